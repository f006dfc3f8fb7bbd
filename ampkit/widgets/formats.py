"""Widgets for notebook 01 (``01_fp16_range.ipynb``): the float explorer and the range map.

Thin views over :mod:`ampkit.formats`: every number shown comes from ``decompose``, ``toggle_bit``, ``explain``,
``classify`` and ``range_bands``; the widgets only wire controls to them and redraw.

- :class:`FloatExplorer` — type a number (or drag a log-scale slider) and see how fp32, fp16, bf16 and the two
  fp8 formats store it: bits coloured by field, stored value, error, ulp and neighbours. Click a bit to flip it.
- :class:`RangeMap` — one matplotlib figure of every format on a log2 axis (flush zone, subnormal band, normal
  band, overflow) with a marker for a value; optionally a histogram of real values (gradients) with a loss-scale
  slider that shifts it and reports what a cast would lose. Drawn once; each change re-blits only the moving
  artists onto the saved background and sends a PNG.
"""
from __future__ import annotations

import html
import io
import math
from functools import partial

import ipywidgets as W
import torch

from ampkit.formats import (
    FORMATS, Classification, Decomposition, classify, decompose, explain, format_name, info, parse_value,
    range_bands, toggle_bit,
)

__all__ = ["FloatExplorer", "RangeMap", "SHORT_NAMES", "FIELD_COLOURS", "bits_row_html", "summary_table_html"]

#: Short labels used by the widgets.
SHORT_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8 e4m3",
               "float8_e5m2": "fp8 e5m2"}
#: Field colours: (background of a 0 bit, background of a 1 bit), the Float Toy convention.
FIELD_COLOURS = {"sign": ("#fde2e2", "#cf222e"), "exponent": ("#dbe9fb", "#0969da"),
                 "mantissa": ("#dcf2d3", "#1a7f37")}
BAND_COLOURS = {"flush": "#d0d7de", "subnormal": "#f2cc60", "normal": "#8fd19e", "overflow": "#ff8182"}

_KIND_COLOURS = {"flushed to zero": "#cf222e", "overflow to inf": "#cf222e", "overflow to nan": "#cf222e",
                 "saturated to max": "#bc4c00", "nan": "#8250df", "inf": "#8250df", "exact": "#1a7f37"}


def _num(x: float) -> str:
    """A float as the explorer prints it: exact (repr) for stored values."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _short(x: float) -> str:
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.3e}" if x != 0 else "0"


def bits_row_html(d: Decomposition) -> str:
    """The bits of ``d`` as text grouped by field (``0 01011 1001100110``), coloured, with a CSS class for tests."""
    parts = []
    for field, bits in (("sign", d.sign), ("exponent", d.exponent), ("mantissa", d.mantissa)):
        parts.append(f"<span style='color:{FIELD_COLOURS[field][1]}'>{bits}</span>")
    return (f"<span style='font-size:85%;white-space:nowrap'><code class='ampkit-bitstring' data-bits='{d.bits}'>"
            f"{' '.join(parts)}</code> <span class='ampkit-formula' style='color:#57606a'>= "
            f"{html.escape(d.formula())}</span></span>")


def summary_table_html(state: dict[str, Decomposition]) -> str:
    """One table row per format: stored value, kind, what happened, errors, ulp and the two neighbours."""
    head = ("<tr><th>format</th><th>stored value</th><th>kind</th><th>what happened</th><th>abs error</th>"
            "<th>rel error</th><th>ulp</th><th>previous</th><th>next</th></tr>")
    rows = []
    for name, d in state.items():
        colour = _KIND_COLOURS.get(d.verdict, "#57606a")
        rows.append(
            f"<tr class='ampkit-row-{name}'><td><b>{SHORT_NAMES.get(name, name)}</b></td>"
            f"<td class='ampkit-stored'><code>{_num(d.stored)}</code></td><td>{d.kind}</td>"
            f"<td style='color:{colour}'><b>{html.escape(d.verdict)}</b></td>"
            f"<td>{_short(d.abs_error)}</td><td>{_short(d.rel_error)}</td><td>{_short(d.ulp)}</td>"
            f"<td><code>{_num(d.prev)}</code></td><td><code>{_num(d.next)}</code></td></tr>"
        )
    return f"<table class='ampkit-explorer-table'>{head}{''.join(rows)}</table>"


def _message_html(notes: list[str], error: str | None = None) -> str:
    if error:
        return f"<div class='ampkit-error' style='color:#cf222e'>⚠️ {html.escape(error)}</div>"
    if not notes:
        return "<div class='ampkit-note' style='color:#57606a'>Every format just rounds this value.</div>"
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"<ul class='ampkit-note' style='margin:2px 0'>{items}</ul>"


class RangeMap:
    """Every format's range on one log2 axis, with a marker for a value (and, optionally, a histogram of values).

    Built once: the bands are drawn into a saved background; :meth:`set_value` / :meth:`set_scale` move only
    the marker, the label and the histogram, then send a PNG to ``.image``.

    >>> m = RangeMap(("fp16", "bf16"), value=1e-6)
    >>> m.marker_x    # log2(1e-6)
    -19.931568569324174
    """

    def __init__(self, fmts=tuple(FORMATS), value: float | None = None, values: torch.Tensor | None = None,
                 scale: float = 1.0, lo: float | None = None, hi: float | None = None, dpi: int = 72,
                 width: float = 8.0):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fmts = [format_name(f) for f in fmts]
        self.values = None
        self.classification: Classification | None = None
        self.scale = float(scale)
        if values is not None:
            v = values.detach().reshape(-1).to(torch.float32) if isinstance(values, torch.Tensor) else \
                torch.as_tensor(values, dtype=torch.float32).reshape(-1)
            self.values = v
            a = v.abs()
            a = a[(a > 0) & torch.isfinite(a)]
            if a.numel() == 0:
                raise ValueError("values must contain at least one nonzero finite number")
            self._logs = torch.log2(a.double())
            self._log_lo, self._log_hi = math.floor(self._logs.min().item()), math.ceil(self._logs.max().item())
        if lo is None:
            lo = -155.0 if values is None else min(self._log_lo - 2, -30)
        if hi is None:
            hi = 135.0 if values is None else max(self._log_hi + 26, 20)
        self.lo, self.hi = float(lo), float(hi)
        self.dpi = dpi
        n = len(self.fmts)
        height = 0.55 * n + 1.1 + (1.8 if values is not None else 0)
        self.fig = Figure(figsize=(width, height), dpi=dpi)
        FigureCanvasAgg(self.fig)  # an Agg canvas of its own: no pyplot, works under any backend
        if values is not None:
            self.ax_hist, self.ax = self.fig.subplots(2, 1, sharex=True,
                                                      gridspec_kw={"height_ratios": [1.8, 0.55 * n + 0.3]})
        else:
            self.ax_hist, self.ax = None, self.fig.add_subplot()
        self._draw_static()
        self.marker = self.ax.axvline(0.0, color="black", lw=1.6, animated=True)
        self.label = self.ax.text(0.0, n - 0.35, "", ha="left", va="bottom", fontsize=8, animated=True,
                                  bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8})
        self._animated = [self.marker, self.label]
        if values is not None:
            self._draw_hist_static()
        # fixed margins in inches (tight_layout would cost a quarter of a second per build)
        self.fig.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, bottom=0.5 / height,
                                 top=1 - (0.62 if values is not None else 0.42) / height, hspace=0.12)
        self.fig.canvas.draw()
        self._background = self.fig.canvas.copy_from_bbox(self.fig.bbox)
        self.image = W.Image(format="png", layout=W.Layout(width=f"{int(width * dpi)}px"))
        self.image.add_class("ampkit-range-map")
        self.value: float | None = None
        self.marker_x: float | None = None
        self.scale_slider = None
        children = [self.image]
        if values is not None:
            self.scale_slider = W.FloatLogSlider(value=self.scale, base=2, min=0, max=32, step=1,
                                                 description="loss scale", readout_format=".0f",
                                                 continuous_update=True, layout=W.Layout(width="520px"))
            self.scale_slider.add_class("ampkit-scale-slider")
            self.scale_slider.observe(lambda ch: self.set_scale(ch["new"]), names="value")
            self.summary = W.HTML()
            self.summary.add_class("ampkit-scale-summary")
            children = [self.scale_slider, self.summary, self.image]
        self.widget = W.VBox(children)
        if values is not None:
            self._update_hist()
        self.set_value(value)

    # -- drawing (once)
    def _draw_static(self) -> None:
        ax = self.ax
        n = len(self.fmts)
        for row, name in enumerate(self.fmts):
            y = n - 1 - row
            b = range_bands(name, self.lo, self.hi)
            segs = [(lo, hi - lo) for lo, hi in (b.flush, b.subnormal, b.normal, b.overflow)]
            ax.broken_barh(segs, (y - 0.38, 0.76), facecolors=[BAND_COLOURS[k] for k in BAND_COLOURS],
                           edgecolor="white", linewidth=0.5)
        ax.set_yticks(range(n), [SHORT_NAMES.get(f, f) for f in reversed(self.fmts)], fontsize=8)
        ax.set_xlim(self.lo, self.hi)
        ax.set_ylim(-0.6, n - 0.4 + (0.5 if self.ax_hist is None else 0.5))
        ax.set_xlabel("log2 |x|   (grey: flushes to 0 · yellow: subnormal · green: normal · red: overflows; "
                      "torch saturates e4m3fn at 448)", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        top = self.ax_hist if self.ax_hist is not None else ax
        sec = top.secondary_xaxis("top", functions=(lambda x: x * math.log10(2), lambda d: d / math.log10(2)))
        sec.set_xlabel("log10 |x|", fontsize=8)
        sec.tick_params(labelsize=8)

    def _draw_hist_static(self) -> None:
        ax = self.ax_hist
        b = range_bands(self.fmts[0], self.lo, self.hi)
        for key in ("flush", "subnormal", "overflow"):
            lo, hi = getattr(b, key)
            ax.axvspan(lo, hi, color=BAND_COLOURS[key], alpha=0.45, lw=0)
        edges = torch.arange(self._log_lo, self._log_hi + 2, dtype=torch.float64)
        counts = torch.histc(self._logs, bins=len(edges) - 1, min=edges[0].item(), max=edges[-1].item())
        self._edges, self._counts = edges.numpy(), counts.numpy()
        self.hist = ax.stairs(self._counts, self._edges, fill=True, color="#0969da", alpha=0.8, animated=True)
        self.hist_text = ax.text(0.01, 0.95, "", transform=ax.transAxes, ha="left", va="top", fontsize=8,
                                 animated=True, bbox={"fc": "white", "ec": "none", "alpha": 0.85})
        ax.set_ylim(0, self._counts.max() * 1.3)  # head room for the fractions line
        ax.set_ylabel("count", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_title(f"values × loss scale, placed on the {SHORT_NAMES.get(self.fmts[0], self.fmts[0])} range",
                     fontsize=9)
        self._animated += [self.hist, self.hist_text]

    # -- updates (cheap)
    def set_value(self, value: float | None) -> None:
        """Move the marker to ``value`` (None hides it; 0 and NaN have no place on a log axis)."""
        self.value = value
        if value is None:
            self.marker.set_visible(False)
            self.label.set_visible(False)
            self.marker_x = None
        else:
            v = float(value)
            self.label.set_visible(True)
            if math.isnan(v) or v == 0:
                self.marker.set_visible(False)
                self.marker_x = None
                self.label.set_position((self.lo + 2, self.label.get_position()[1]))
                self.label.set_text(f"{v!r}: no place on a log axis")
            else:
                x = math.log2(abs(v)) if math.isfinite(v) else math.inf
                self.marker_x = x
                xs = min(max(x, self.lo), self.hi)
                self.marker.set_visible(True)
                self.marker.set_xdata([xs, xs])
                right = xs > (self.lo + self.hi) / 2
                self.label.set_horizontalalignment("right" if right else "left")
                self.label.set_position((xs - 1 if right else xs + 1, self.label.get_position()[1]))
                where = "" if self.lo <= x <= self.hi else " (off the axis)"
                self.label.set_text(f"|x| = {abs(v):.4g} = 2^{x:.2f}{where}" if math.isfinite(x) else "|x| = inf")
        self.redraw()

    def set_scale(self, scale: float) -> None:
        """Multiply the histogram's values by ``scale`` (a power of two shifts it right by log2(scale))."""
        if self.values is None:
            raise ValueError("this RangeMap has no values; build it with RangeMap(fmts, values=tensor)")
        self.scale = float(scale)
        self._update_hist()
        self.redraw()

    def _update_hist(self) -> None:
        shift = math.log2(self.scale)
        self.hist.set_data(values=self._counts, edges=self._edges + shift)
        c = classify(self.values * self.scale, self.fmts[0])
        self.classification = c
        line = (f"scale {self.scale:g} = 2^{shift:.0f} · {SHORT_NAMES.get(c.fmt, c.fmt)}: "
                f"flushed {100 * c.flushed:.1f} % · subnormal {100 * c.subnormal:.1f} % · "
                f"normal {100 * c.normal:.1f} % · overflow {100 * c.overflow:.1f} % · zero {100 * c.zero:.1f} %")
        self.hist_text.set_text(line)
        if hasattr(self, "summary"):
            self.summary.value = f"<code>{html.escape(line)}</code>"

    def redraw(self) -> None:
        """Blit the moving artists onto the saved background and send the PNG to ``.image``."""
        from PIL import Image

        canvas = self.fig.canvas
        canvas.restore_region(self._background)
        for artist in self._animated:
            artist.axes.draw_artist(artist)
        buf = canvas.buffer_rgba()
        img = Image.frombuffer("RGBA", (int(buf.shape[1]), int(buf.shape[0])), bytes(buf), "raw", "RGBA", 0, 1)
        out = io.BytesIO()
        img.convert("RGB").save(out, format="png", compress_level=1)
        self.image.value = out.getvalue()

    def png(self) -> bytes:
        """The last image sent (PNG bytes)."""
        return self.image.value

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


class FloatExplorer:
    """Type a number or drag the log slider; see how each format stores it, bit by bit. Click a bit to flip it.

    ``.text`` (the text box), ``.slider`` (log2 scale, magnitudes 2^-150 … 2^129), ``.buttons[fmt]`` (one
    button per bit, sign first), ``.message`` (notes or an error), ``.table``; ``.state[fmt]`` holds the
    :class:`~ampkit.formats.Decomposition` shown; ``.range_map`` the linked :class:`RangeMap` (or None).

    >>> ex = FloatExplorer(value=0.1, show_map=False)
    >>> ex.state["float16"].bits
    '0010111001100110'
    >>> ex.text.value = "65504"; ex.state["float16"].verdict
    'exact'
    """

    def __init__(self, value: float = 0.1, fmts=tuple(FORMATS), show_map: bool = True):
        self.fmts = [format_name(f) for f in fmts]
        self.value = float(value)
        self.error: str | None = None
        self.state: dict[str, Decomposition] = {}
        self._syncing = False
        self.text = W.Text(value=_num(self.value), description="value", continuous_update=False,
                           placeholder="0.1, 1e-8, 2^-24, -0, inf, nan", layout=W.Layout(width="300px"))
        self.text.add_class("ampkit-explorer-text")
        self.slider = W.FloatLogSlider(value=abs(self.value) if self.value else 1.0, base=2, min=-150, max=129,
                                       step=0.01, description="|value|", readout_format=".4g",
                                       continuous_update=True, layout=W.Layout(width="620px"))
        self.slider.add_class("ampkit-explorer-slider")
        self.message = W.HTML()
        self.message.add_class("ampkit-explorer-message")
        self.table = W.HTML()
        self.table.add_class("ampkit-explorer-summary")
        self.buttons: dict[str, list[W.Button]] = {}
        self.bitstrings: dict[str, W.HTML] = {}
        rows = []
        for name in self.fmts:
            i = info(name)
            fields = ["sign"] + ["exponent"] * i.exponent_bits + ["mantissa"] * i.mantissa_bits
            buttons = []
            row = [W.HTML(f"<b>{SHORT_NAMES.get(name, name)}</b>", layout=W.Layout(width="70px"))]
            for pos, field in enumerate(fields):
                b = W.Button(description="0", tooltip=f"{name} bit {pos} ({field}): click to flip",
                             layout=W.Layout(width="19px", height="24px", padding="0", margin="0"))
                b.add_class("ampkit-bit")
                b.on_click(partial(self._on_bit, name, pos))
                buttons.append(b)
                if pos in (1, 1 + i.exponent_bits):  # a small gap between fields
                    row.append(W.Box(layout=W.Layout(width="5px")))
                row.append(b)
            self.buttons[name] = buttons
            self.bitstrings[name] = W.HTML(layout=W.Layout(margin="0 0 0 8px"))
            row.append(self.bitstrings[name])
            box = W.HBox(row, layout=W.Layout(align_items="center"))
            box.add_class(f"ampkit-bits-{name}")
            rows.append(box)
        self.range_map = RangeMap(self.fmts, value=self.value) if show_map else None
        self.text.observe(self._on_text, names="value")
        self.slider.observe(self._on_slider, names="value")
        legend = W.HTML("<span style='font-size:90%'>bits: <b style='color:#cf222e'>sign</b> · "
                        "<b style='color:#0969da'>exponent</b> · <b style='color:#1a7f37'>mantissa</b> "
                        "(click a bit to flip it)</span>")
        parts = [W.HBox([self.text, legend]), self.slider, *rows, self.table, self.message]
        if self.range_map is not None:
            parts.append(self.range_map.widget)
        self.widget = W.VBox(parts)
        self.widget.add_class("ampkit-explorer")
        self.set_value(self.value)

    # -- controls
    def _on_text(self, change: dict) -> None:
        if self._syncing:
            return
        try:
            value = parse_value(change["new"])
        except ValueError as exc:
            self.error = str(exc)
            self.message.value = _message_html([], self.error)
            return
        self.set_value(value)

    def _on_slider(self, change: dict) -> None:
        if self._syncing:
            return
        cur = abs(self.value)
        if math.isfinite(cur) and cur > 0 and change["new"] > 0:
            # The browser snaps a log slider's value to its step grid when it renders or syncs; such a nudge
            # (never more than half a step) is not a move by the learner and must not change the value shown.
            if abs(math.log2(change["new"]) - math.log2(cur)) <= self.slider.step / 2 + 1e-12:
                return
        sign = -1.0 if math.copysign(1.0, self.value) < 0 else 1.0
        self.set_value(sign * change["new"])

    def _on_bit(self, name: str, position: int, _button=None) -> None:
        self.flip(name, position)

    def flip(self, fmt: str, position: int) -> None:
        """Flip bit ``position`` (0 = sign) of ``fmt``'s stored pattern; the explorer moves to the new value."""
        name = format_name(fmt)
        d = toggle_bit(self.state[name], position)
        self.set_value(d.stored, keep={name: d})

    def set_value(self, value: float, keep: dict[str, Decomposition] | None = None) -> None:
        """Show ``value`` in every format (``keep``: decompositions to show as they are, e.g. a flipped NaN)."""
        keep = keep or {}
        self.value = float(value)
        self.error = None
        for name in self.fmts:
            d = keep.get(name) or decompose(self.value, name)
            self.state[name] = d
            for b, bit, field in zip(self.buttons[name], d.bits, d.fields):
                if b.description != bit:
                    b.description = bit
                colour = FIELD_COLOURS[field][int(bit)]
                if b.style.button_color != colour:
                    b.style.button_color = colour
                    b.style.text_color = "white" if bit == "1" else "#24292f"
            self.bitstrings[name].value = bits_row_html(d)
        self.table.value = summary_table_html(self.state)
        self.message.value = _message_html(explain(self.value, self.fmts))
        self._syncing = True
        try:
            self.text.value = _num(self.value)
            if math.isfinite(self.value) and self.value != 0:
                self.slider.value = abs(self.value)
        finally:
            self._syncing = False
        if self.range_map is not None:
            self.range_map.set_value(self.value)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
