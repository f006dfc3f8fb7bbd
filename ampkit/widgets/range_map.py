"""The range map of notebook 01 (``01_fp16_range.ipynb``): every format's range on one log2 axis.

A thin view over :func:`ampkit.formats.range_bands` and :func:`ampkit.formats.classify`: one matplotlib figure of
every format on a log2 axis (the kit's band colours: flushed, subnormal, normal, overflow) with a marker for a
value; optionally a histogram of real values (gradients) with a loss-scale slider that shifts it and reports what
a cast would lose. :class:`~ampkit.widgets.formats.FloatExplorer` shows one under its table.

A move sends little to the browser: the PNG is sent once, and its moving parts (the value's marker, the
histogram) are an HTML overlay on top of it.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W
import torch
from matplotlib.patches import Patch

from ampkit._util import check_positive_finite
from ampkit.dtypes import short_name
from ampkit.formats import FORMATS, Classification, classify, format_name, range_bands
from ampkit.i18n import mark, tr
from ampkit.widgets import snapshot
from ampkit.widgets.style import BAND_COLOURS, BAND_LABELS, DPI, WidgetView, new_figure, png_bytes

__all__ = ["RangeMap", "format_label"]

#: Which :class:`~ampkit.formats.RangeBands` field holds each band of the kit's scheme (``style.BAND_COLOURS``).
_BAND_FIELD = {"flushed": "flush", "subnormal": "subnormal", "normal": "normal", "overflow": "overflow"}


def format_label(fmt) -> str:
    """How notebook 01's widgets name a format: the kit's short name, with the fp8 family said (``"fp8 e4m3"``).

    >>> [format_label(f) for f in FORMATS]
    ['fp32', 'fp16', 'bf16', 'fp8 e4m3', 'fp8 e5m2']
    """
    name = format_name(fmt)
    return f"fp8 {short_name(name)}" if name.startswith("float8") else short_name(name)


class RangeMap(WidgetView):
    """Every format's range on one log2 axis, with a marker for a value (and, optionally, a histogram of values).

    The figure (axes and the format bands) is drawn once and sent once as a PNG (``.image``). What moves is an
    HTML overlay on top of it (``.overlay``): the value's marker with its label and, with ``values``, the
    histogram's bars. :meth:`set_value` and :meth:`set_scale` only rewrite that overlay, a few kB per move.

    >>> m = RangeMap(("fp16", "bf16"), value=1e-6)
    >>> m.marker_x    # log2(1e-6)
    -19.931568569324174
    """

    def __init__(self, fmts=tuple(FORMATS), value: float | None = None, values: torch.Tensor | None = None,
                 scale: float = 1.0, lo: float | None = None, hi: float | None = None, dpi: int = DPI,
                 width: float = 8.0):
        self.fmts = [format_name(f) for f in fmts]
        self.values: torch.Tensor | None = None
        self.classification: Classification | None = None
        self.scale = check_positive_finite("scale", scale, example="2.0**16")
        if values is not None:
            v = values.detach().reshape(-1).to(torch.float32) if isinstance(values, torch.Tensor) else \
                torch.as_tensor(values, dtype=torch.float32).reshape(-1)
            self.values = v
            a = v.abs()
            a = a[(a > 0) & torch.isfinite(a)]
            if a.numel() == 0:
                raise ValueError(tr("values must contain at least one nonzero finite number"))
            logs = torch.log2(a.double())
            lo_bin, hi_bin = math.floor(logs.min().item()), math.ceil(logs.max().item())
            edges = torch.arange(lo_bin, hi_bin + 2, dtype=torch.float64)
            self._edges = edges.tolist()
            self._counts = torch.histc(logs, bins=len(edges) - 1, min=edges[0].item(), max=edges[-1].item()).tolist()
            self._classified: dict[float, Classification] = {}
        if lo is None:
            lo = -155.0 if values is None else min(lo_bin - 2, -30)
        if hi is None:
            hi = 135.0 if values is None else max(hi_bin + 26, 20)
        self.lo, self.hi = float(lo), float(hi)
        self.dpi = dpi
        n = len(self.fmts)
        top, bottom = 0.95, 1.05   # inches: title + top axis; x label + band legend
        height = 0.42 * n + 0.3 + top + bottom + (1.9 if values is not None else 0)
        self.fig = new_figure(width, height, dpi=dpi, layout=None)   # fixed margins: the overlay's pixels stay put
        if values is not None:
            self.ax_hist, self.ax = self.fig.subplots(2, 1, sharex=True,
                                                      gridspec_kw={"height_ratios": [1.9, 0.42 * n + 0.3]})
        else:
            self.ax_hist, self.ax = None, self.fig.add_subplot()
        self._draw_static()
        self.fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=bottom / height,
                                 top=1 - top / height, hspace=0.12)
        self._px = (round(self.fig.bbox.width), round(self.fig.bbox.height))
        w, h = self._px
        self.image = W.Image(value=png_bytes(self.fig), format="png",
                             layout=W.Layout(width=f"{w}px", height=f"{h}px", grid_area="map"))
        self.image.add_class("ampkit-range-map")
        self.overlay = W.HTML(layout=W.Layout(width=f"{w}px", height=f"{h}px", grid_area="map", margin="0"))
        self.overlay.add_class("ampkit-range-overlay")
        stack = W.GridBox([self.image, self.overlay], layout=W.Layout(
            grid_template_areas='"map"', grid_template_columns=f"{w}px", grid_template_rows=f"{h}px"))
        self.value: float | None = None
        self.marker_x: float | None = None      # log2|value| (inf for inf; None: no marker)
        self.marker_pos: float | None = None    # where the marker is drawn: marker_x clamped to the axis
        self.label_text = ""
        self.scale_slider = None
        children = [stack]
        if values is not None:
            self.scale_slider = W.FloatLogSlider(value=self.scale, base=2, min=0, max=32, step=1,
                                                 description=tr("loss scale"), readout_format=".0f",
                                                 continuous_update=True, layout=W.Layout(width="520px"))
            self.scale_slider.add_class("ampkit-scale-slider")
            self.scale_slider.observe(lambda ch: self.set_scale(ch["new"]), names="value")
            self.summary = W.HTML()
            self.summary.add_class("ampkit-scale-summary")
            children = [self.scale_slider, self.summary, stack]
            self._update_hist()
        self.widget = W.VBox(children)
        # a reader without a kernel sees the image with the overlay drawn in (ampkit.widgets.snapshot)
        snapshot.register_still(self.image, self.still_png)
        snapshot.register_still(self.overlay, lambda: None)
        self.set_value(value)

    # -- drawing (once)
    def _draw_static(self) -> None:
        ax = self.ax
        n = len(self.fmts)
        for row, name in enumerate(self.fmts):
            y = n - 1 - row
            b = range_bands(name, self.lo, self.hi)
            segs = [getattr(b, _BAND_FIELD[k]) for k in BAND_COLOURS]
            ax.broken_barh([(lo, hi - lo) for lo, hi in segs], (y - 0.38, 0.76),
                           facecolors=list(BAND_COLOURS.values()), edgecolor="white", linewidth=0.8)
        ax.set_yticks(range(n), [format_label(f) for f in reversed(self.fmts)], fontsize=10)
        ax.set_xlim(self.lo, self.hi)
        ax.set_ylim(-0.6, n - 0.4)
        ax.set_xlabel("log2 |x|  (the exponent of the magnitude, in powers of two)", fontsize=10)
        ax.tick_params(axis="x", labelsize=9)
        labels = dict(BAND_LABELS)
        if "float8_e4m3fn" in self.fmts:
            labels["overflow"] = mark("overflow (inf/NaN); e4m3: torch saturates at ±448")
        self.fig.legend(handles=[Patch(color=c, label=labels[k]) for k, c in BAND_COLOURS.items()], ncol=4,
                        loc="lower center", bbox_to_anchor=(0.5, 0.0), fontsize=9, frameon=False,
                        handlelength=1.2, columnspacing=1.2)
        top = self.ax_hist if self.ax_hist is not None else ax
        sec = top.secondary_xaxis("top", functions=(lambda x: x * math.log10(2), lambda d: d / math.log10(2)))
        sec.set_xlabel("log10 |x|  (powers of ten)", fontsize=9)
        sec.tick_params(labelsize=9)
        if self.ax_hist is None:
            top.set_title("Where each format flushes to zero, goes subnormal, is normal and overflows",
                          fontsize=11, pad=6)
            return
        hx = self.ax_hist
        b = range_bands(self.fmts[0], self.lo, self.hi)
        for key in ("flushed", "subnormal", "overflow"):
            lo, hi = getattr(b, _BAND_FIELD[key])
            hx.axvspan(lo, hi, color=BAND_COLOURS[key], alpha=0.25, lw=0)
        hx.set_ylim(0, max(self._counts) * 1.25)  # head room for the scale label
        hx.set_ylabel("count (values per\npower of two)", fontsize=9)
        hx.tick_params(labelsize=9)
        hx.set_title(f"values × loss scale, placed on the {format_label(self.fmts[0])} range "
                     "(one bar per power of two)", fontsize=11, pad=6)

    # -- updates (cheap: only the HTML overlay changes)
    def set_value(self, value: float | None) -> None:
        """Move the marker to ``value`` (None hides it; 0 and NaN have no place on a log axis)."""
        self.value = value
        self.marker_x = self.marker_pos = None
        self.label_text = ""
        if value is not None:
            v = float(value)
            if math.isnan(v) or v == 0:
                self.label_text = tr("{v!r}: no place on a log axis", v=v)
            else:
                x = math.log2(abs(v)) if math.isfinite(v) else math.inf
                self.marker_x = x
                self.marker_pos = min(max(x, self.lo), self.hi)
                where = "" if self.lo <= x <= self.hi else tr(" (off the axis)")
                self.label_text = f"|x| = {abs(v):.4g} = 2^{x:.2f}{where}" if math.isfinite(x) else "|x| = inf"
        self.redraw()

    def set_scale(self, scale: float) -> None:
        """Multiply the histogram's values by ``scale`` (a power of two shifts it right by log2(scale))."""
        if self.values is None:
            raise ValueError(tr("this RangeMap has no values; build it with RangeMap(fmts, values=tensor)"))
        self.scale = check_positive_finite("scale", scale, example="2.0**16")
        self._update_hist()
        self.redraw()

    @property
    def hist_edges(self) -> list[float]:
        """The histogram's bin edges (log2 |value × scale|) as drawn now."""
        shift = math.log2(self.scale)
        return [e + shift for e in self._edges]

    def _update_hist(self) -> None:
        assert self.values is not None   # called only for a RangeMap built with values (__init__, set_scale)
        if self.scale not in self._classified:   # one classify per scale; the slider has 33 positions
            if len(self._classified) >= 64:
                self._classified.pop(next(iter(self._classified)))
            self._classified[self.scale] = classify(self.values * self.scale, self.fmts[0])
        c = self.classification = self._classified[self.scale]
        line = tr("scale {scale:g} = 2^{k:.0f} · {fmt}: flushed {flushed:.1f} % · subnormal {subnormal:.1f} % · "
                  "normal {normal:.1f} % · overflow {overflow:.1f} % · zero {zero:.1f} %", scale=self.scale,
                  k=math.log2(self.scale), fmt=format_label(c.fmt), flushed=100 * c.flushed,
                  subnormal=100 * c.subnormal, normal=100 * c.normal, overflow=100 * c.overflow, zero=100 * c.zero)
        self.summary.value = f"<code>{html.escape(line)}</code>"

    def redraw(self) -> None:
        """Rewrite the overlay (histogram bars, marker and label) in the image's pixels."""
        self.overlay.value = self._hist_html() + self._marker_html()

    def _box(self, ax) -> tuple[float, float, float, float]:
        """(left, top, width, height) of ``ax`` in the image's pixels (origin top left)."""
        b = ax.bbox
        return b.x0, self._px[1] - b.y1, b.width, b.height

    def _hist_html(self) -> str:
        if self.values is None:
            return ""
        ax = self.ax_hist
        left, top, width, height = self._box(ax)
        y0 = ax.transData.transform((self.lo, 0))[1]

        def x_px(x: float) -> float:
            return ax.transData.transform((x, 0))[0] - left

        def y_px(count: float) -> float:
            return ax.transData.transform((self.lo, count))[1] - y0

        edges = self.hist_edges
        bars = "".join(f"<i style='left:{x_px(e0):.1f}px;width:{x_px(e1) - x_px(e0):.1f}px;height:{y_px(c):.1f}px'></i>"
                       for c, e0, e1 in zip(self._counts, edges[:-1], edges[1:]) if c > 0)
        return (f"<style>.ampkit-hist i{{position:absolute;bottom:0;background:#0969da;opacity:0.85;"
                f"box-sizing:border-box;border-right:1px solid #ffffff55}}</style>"
                f"<div class='ampkit-hist' data-shift='{math.log2(self.scale):g}' style='position:absolute;"
                f"left:{left:.1f}px;top:{top:.1f}px;width:{width:.1f}px;height:{height:.1f}px;overflow:hidden'>"
                f"{bars}<div style='position:absolute;left:4px;top:3px;font:13px sans-serif;background:#ffffffd9;"
                f"padding:0 3px'>values × 2<sup>{math.log2(self.scale):.0f}</sup></div></div>")

    def _marker_html(self) -> str:
        if not self.label_text:
            return ""
        left, top, _, height = self._box(self.ax)
        label = html.escape(self.label_text)
        style = ("position:absolute;font:12px/1.3 sans-serif;padding:0 3px;white-space:nowrap;"
                 f"background:#ffffffd9;color:#24292f;top:{top + 2:.0f}px")
        if self.marker_pos is None:
            return f"<div class='ampkit-marker-label' style='{style};left:{left + 4:.0f}px'>{label}</div>"
        x = self.ax.transData.transform((self.marker_pos, 0))[0]
        side = (f"right:{self._px[0] - x + 5:.0f}px" if self.marker_pos > (self.lo + self.hi) / 2
                else f"left:{x + 5:.0f}px")
        return (f"<div class='ampkit-marker' data-x='{self.marker_pos:.4f}' style='position:absolute;"
                f"left:{x - 1:.1f}px;top:{top:.0f}px;width:2px;height:{height:.0f}px;background:#24292f'></div>"
                f"<div class='ampkit-marker-label' style='{style};{side}'>{label}</div>")

    def still_png(self) -> bytes:
        """The figure with what the overlay shows drawn into it (histogram bars, marker, label), as PNG bytes:
        the still picture of this view for a notebook read without a kernel. The figure is left as it was."""
        added = []
        if self.values is not None:
            edges = self.hist_edges
            added += list(self.ax_hist.bar(edges[:-1], self._counts, width=1.0, align="edge", color="#0969da",
                                           alpha=0.85, edgecolor="white", linewidth=0.5))
            added.append(self.ax_hist.text(0.005, 0.97, f"values × 2^{math.log2(self.scale):.0f}", fontsize=10,
                                           transform=self.ax_hist.transAxes, va="top",
                                           bbox={"fc": "white", "alpha": 0.85, "lw": 0}))
        if self.marker_pos is not None:
            added.append(self.ax.axvline(self.marker_pos, color="#24292f", lw=2))
        if self.label_text:
            right = self.marker_pos is not None and self.marker_pos > (self.lo + self.hi) / 2
            x = self.marker_pos if self.marker_pos is not None else self.lo
            added.append(self.ax.annotate(self.label_text, (x, 1.0), xycoords=("data", "axes fraction"),
                                          xytext=(-5 if right else 5, -3), textcoords="offset points",
                                          ha="right" if right else "left", va="top", fontsize=9,
                                          bbox={"fc": "white", "alpha": 0.85, "lw": 0}))
        try:
            return png_bytes(self.fig)
        finally:
            for artist in added:
                artist.remove()

    def png(self) -> bytes:
        """The figure sent (PNG bytes): axes and bands; the marker and histogram are the HTML overlay."""
        return self.image.value

