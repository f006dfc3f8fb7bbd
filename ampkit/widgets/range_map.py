"""The range map of notebook 01 (``01_fp16_range.ipynb``): every format's range on one log2 axis, drawn in the browser.

A view over :func:`ampkit.formats.range_bands` and :func:`ampkit.formats.classify` (``js/rangemap.js`` draws it in
SVG): every format on a log2 axis in the kit's band colours (flushed, subnormal, normal, overflow) with a marker for
a value; optionally a histogram of real values (gradients) with a loss-scale slider that shifts it and reports what
a cast would lose. :class:`~ampkit.widgets.formats.FloatExplorer` shows one under its table.

The engine sends the bands (as data: each format's four intervals of log2|x|), the histogram (bin edges and counts
at scale 1) and, for every position of the loss-scale slider, the summary line of :func:`classify` at that scale.
The front end ports two rules of this module (marked ``# port:`` here, docs/architecture.md "Ports"), which
``tests/browser/test_front_rangemap_arith_browser.py`` checks against it on random inputs: the marker's x is
log2|value| and its label prints |value| and x as Python's ``.4g`` and ``.2f`` do; the bars' edges move by
log2(scale). A saved notebook's map therefore
moves its slider with no kernel. The still picture (:func:`_still_figure`) is a matplotlib figure,
built only when a renderer without JavaScript needs one.
"""
from __future__ import annotations

import html
import math
import textwrap
from typing import Any

import ipywidgets as W
import torch
import traitlets

from ampkit._util import check_positive_finite
from ampkit.dtypes import short_name
from ampkit.formats import FORMATS, Classification, classify, format_name, range_bands
from ampkit.i18n import tr
from ampkit.widgets import snapshot
from ampkit.widgets.front import FrontView
from ampkit.widgets.style import BAND_COLOURS, BAND_LABELS, new_figure, png_bytes

__all__ = ["RangeMap", "format_label"]

#: Which :class:`~ampkit.formats.RangeBands` field holds each band of the kit's scheme (``style.BAND_COLOURS``).
_BAND_FIELD = {"flushed": "flush", "subnormal": "subnormal", "normal": "normal", "overflow": "overflow"}
#: The loss-scale slider's positions: log2(scale) from 0 to 32 in steps of 1.
_SCALE_EXPS = range(0, 33)


def format_label(fmt) -> str:
    """How notebook 01's widgets name a format: the kit's short name, with the fp8 family said (``"fp8 e4m3"``).

    >>> [format_label(f) for f in FORMATS]
    ['fp32', 'fp16', 'bf16', 'fp8 e4m3', 'fp8 e5m2']
    """
    name = format_name(fmt)
    return f"fp8 {short_name(name)}" if name.startswith("float8") else short_name(name)


def _hist(values: torch.Tensor) -> tuple[list[float], list[float]]:
    """Bin edges (whole powers of two, log2|v|) and counts of the nonzero finite ``values``."""
    a = values.abs()
    a = a[(a > 0) & torch.isfinite(a)]
    if a.numel() == 0:
        raise ValueError(tr("values must contain at least one nonzero finite number"))
    logs = torch.log2(a.double())
    lo_bin, hi_bin = math.floor(logs.min().item()), math.ceil(logs.max().item())
    edges = torch.arange(lo_bin, hi_bin + 2, dtype=torch.float64)
    counts = torch.histc(logs, bins=len(edges) - 1, min=edges[0].item(), max=edges[-1].item())
    return edges.tolist(), counts.tolist()


class RangeMap(FrontView):
    """Every format's range on one log2 axis, with a marker for a value (and, optionally, a histogram of values
    with a loss-scale slider), drawn in the browser from the engine's bands.

    Python keeps the engine's numbers: ``.marker_x`` (log2|value|), ``.marker_pos`` (clamped to the axis),
    ``.label_text``, and with ``values`` ``.classification`` (:func:`classify` at ``.scale``), ``.hist_edges`` and
    ``.summary`` (the line shown). :meth:`set_value` and :meth:`set_scale` move it; the slider moves ``scale_exp``.

    >>> m = RangeMap(("fp16", "bf16"), value=1e-6)
    >>> m.marker_x    # log2(1e-6)
    -19.931568569324174
    """

    _front = "rangemap"
    lo = traitlets.Float(-155.0).tag(sync=True)
    hi = traitlets.Float(135.0).tag(sync=True)
    formats: traitlets.List[dict] = traitlets.List().tag(sync=True)
    marker = traitlets.Unicode("").tag(sync=True)        # repr of the value ("" for no marker)
    hist = traitlets.Dict().tag(sync=True)                # {} or edges/counts at scale 1, the slider, summaries
    scale_exp = traitlets.Float(0.0).tag(sync=True)      # log2(scale)
    summary = traitlets.Unicode("").tag(sync=True)       # the summary line at the current scale

    def __init__(self, fmts=tuple(FORMATS), value: float | None = None, values: torch.Tensor | None = None,
                 scale: float = 1.0, lo: float | None = None, hi: float | None = None):
        self.fmts = [format_name(f) for f in fmts]
        self.values: torch.Tensor | None = None
        self.classification: Classification | None = None
        self._classified: dict[float, Classification] = {}
        scale = check_positive_finite("scale", scale, example="2.0**16")
        self._scale = scale
        hist: dict[str, Any] = {}
        if values is not None:
            v = values.detach().reshape(-1).to(torch.float32) if isinstance(values, torch.Tensor) else \
                torch.as_tensor(values, dtype=torch.float32).reshape(-1)
            edges, counts = _hist(v)
            self.values = v
            hist = {"edges": edges, "counts": counts, "min_exp": _SCALE_EXPS[0], "max_exp": _SCALE_EXPS[-1],
                    "summaries": [self._line(2.0 ** k) for k in _SCALE_EXPS]}
            lo = min(edges[0] - 2, -30) if lo is None else lo
            hi = max(edges[-1] + 25, 20) if hi is None else hi
        lo, hi = (-155.0 if lo is None else float(lo)), (135.0 if hi is None else float(hi))
        self.value: float | None = None
        self.marker_x: float | None = None      # log2|value| (inf for inf; None: no marker)
        self.marker_pos: float | None = None    # where the marker is drawn: marker_x clamped to the axis
        self.label_text = ""
        bands = [{"name": f, "label": format_label(f), "bands": {k: list(getattr(range_bands(f, lo, hi), field))
                                                                  for k, field in _BAND_FIELD.items()}}
                 for f in self.fmts]
        super().__init__(lo=lo, hi=hi, formats=bands, hist=hist, scale_exp=math.log2(scale))
        snapshot.register_still(self, self.still)   # also when shown inside another view (FloatExplorer)
        if values is not None:
            self._scale_changed({"new": self.scale_exp})
        self.set_value(value)

    @property
    def scale(self) -> float:
        """The loss scale the histogram's values are multiplied by (``2 ** scale_exp``)."""
        return self._scale

    def words(self) -> dict[str, Any]:
        bands = {k: tr(v) for k, v in BAND_LABELS.items()}
        if "float8_e4m3fn" in self.fmts:
            bands["overflow"] = tr("overflow (inf/NaN); e4m3: torch saturates at ±448")
        first = format_label(self.fmts[0]) if self.fmts else ""
        return {"title": tr("Where each format flushes to zero, goes subnormal, is normal and overflows"),
                "axis": tr("log2 |x|  (the exponent of the magnitude, in powers of two)"),
                "axis10": tr("log10 |x|  (powers of ten)"), "bands": bands, "scale": tr("loss scale"),
                "hist_title": tr("values × loss scale, placed on the {fmt} range (one bar per power of two)",
                                 fmt=first),
                "count": tr("count (values per power of two)"), "times": tr("values × 2^"),
                "no_place": tr("{v}: no place on a log axis"), "off": tr(" (off the axis)")}

    # -- the engine's state
    def _classify(self, scale: float) -> Classification:
        assert self.values is not None
        if scale not in self._classified:   # one classify per scale
            if len(self._classified) >= 64:
                self._classified.pop(next(iter(self._classified)))
            self._classified[scale] = classify(self.values * scale, self.fmts[0])
        return self._classified[scale]

    def _line(self, scale: float) -> str:
        c = self._classify(scale)
        return tr("scale {scale:g} = 2^{k:.0f} · {fmt}: flushed {flushed:.1f} % · subnormal {subnormal:.1f} % · "
                  "normal {normal:.1f} % · overflow {overflow:.1f} % · zero {zero:.1f} %", scale=scale,
                  k=math.log2(scale), fmt=format_label(c.fmt), flushed=100 * c.flushed,
                  subnormal=100 * c.subnormal, normal=100 * c.normal, overflow=100 * c.overflow, zero=100 * c.zero)

    @traitlets.observe("scale_exp")
    def _scale_changed(self, change: dict) -> None:
        if self.values is None:
            return
        k = change["new"]
        self._scale = self._scale if math.log2(self._scale) == k else 2.0 ** k   # set_scale keeps its own number
        self.classification = self._classify(self._scale)
        self.summary = self._line(self._scale)

    def set_value(self, value: float | None) -> None:
        """Move the marker to ``value`` (None hides it; 0 and NaN have no place on a log axis)."""
        self.value = value
        self.marker_x = self.marker_pos = None
        self.label_text = ""
        if value is not None:
            v = float(value)
            if math.isnan(v) or v == 0:
                self.label_text = tr("{v}: no place on a log axis", v=repr(v))
            else:
                x = math.log2(abs(v)) if math.isfinite(v) else math.inf
                self.marker_x = x
                self.marker_pos = min(max(x, self.lo), self.hi)
                self.label_text = self.marker_label(v, x)
        self.marker = "" if value is None else repr(float(value))

    # port: js/rangemap.js marker
    def marker_label(self, value: float, x: float) -> str:
        """The marker's label for a finite nonzero ``value`` whose log2|value| is ``x``.

        The page computes ``x`` with its own ``Math.log2`` (V8's), this module with Python's (the C library's): neither
        is correctly rounded, so the two can differ by an ulp, and ``2^{x:.2f}`` by 0.01 where x sits on a ``.xx5``
        tie. The label is therefore a rule of (value, x), and the browser test checks the page's label for the page's
        own x (and that x within an ulp of this module's)."""
        where = "" if self.lo <= x <= self.hi else tr(" (off the axis)")
        return f"|x| = {abs(value):.4g} = 2^{x:.2f}{where}" if math.isfinite(x) else "|x| = inf"

    def set_scale(self, scale: float) -> None:
        """Multiply the histogram's values by ``scale`` (a power of two shifts it right by log2(scale))."""
        if self.values is None:
            raise ValueError(tr("this RangeMap has no values; build it with RangeMap(fmts, values=tensor)"))
        self._scale = check_positive_finite("scale", scale, example="2.0**16")
        if self.scale_exp == math.log2(self._scale):
            self._scale_changed({"new": self.scale_exp})
        self.scale_exp = math.log2(self._scale)

    # port: js/rangemap.js shiftedEdges
    @property
    def hist_edges(self) -> list[float]:
        """The histogram's bin edges (log2 |value × scale|) as drawn now."""
        shift = math.log2(self.scale)
        return [e + shift for e in self.hist.get("edges", [])]

    def still(self) -> bytes | W.Widget:
        """The still picture: the map of the current state drawn by matplotlib (:func:`_still_figure`), under the
        loss scale and its summary line when there is a histogram."""
        if self.values is None:
            return self.png()
        return W.VBox([W.HTML(f"{self.text['scale']}: {self.scale:g}"),
                       W.HTML(f"<code>{html.escape(self.summary)}</code>"), W.Image(value=self.png(), format="png")])

    def png(self) -> bytes:
        """The map of the current state drawn by matplotlib, as PNG bytes (what a renderer without JavaScript shows)."""
        return png_bytes(_still_figure(self))


def _still_figure(m: RangeMap):
    """The map of ``m`` as a matplotlib figure (bands, axes, legend; histogram and marker of its current state)."""
    from matplotlib.patches import Patch

    words = m.text
    n = len(m.fmts)
    width, top, bottom = 8.0, 0.95, 1.05
    height = 0.42 * n + 0.3 + top + bottom + (1.9 if m.values is not None else 0)
    fig = new_figure(width, height, layout=None)
    if m.values is not None:
        hx, ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.9, 0.42 * n + 0.3]})
    else:
        hx, ax = None, fig.add_subplot()
    for row, name in enumerate(m.fmts):
        b = range_bands(name, m.lo, m.hi)
        ax.broken_barh([(lo, hi - lo) for lo, hi in (getattr(b, _BAND_FIELD[k]) for k in BAND_COLOURS)],
                       (n - 1 - row - 0.38, 0.76), facecolors=list(BAND_COLOURS.values()), edgecolor="white",
                       linewidth=0.8)
    ax.set_yticks(range(n), [f["label"] for f in reversed(m.formats)], fontsize=10)
    ax.set_xlim(m.lo, m.hi)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel(words["axis"], fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    fig.legend(handles=[Patch(color=c, label=words["bands"][k]) for k, c in BAND_COLOURS.items()], ncol=4,
               loc="lower center", bbox_to_anchor=(0.5, 0.0), fontsize=9, frameon=False, handlelength=1.2,
               columnspacing=1.2)
    sec = (hx if hx is not None else ax).secondary_xaxis(
        "top", functions=(lambda x: x * math.log10(2), lambda d: d / math.log10(2)))
    sec.set_xlabel(words["axis10"], fontsize=9)
    sec.tick_params(labelsize=9)
    if hx is None:
        ax.set_title(words["title"], fontsize=11, pad=6)
    else:
        b = range_bands(m.fmts[0], m.lo, m.hi)
        for key in ("flushed", "subnormal", "overflow"):
            lo, hi = getattr(b, _BAND_FIELD[key])
            hx.axvspan(lo, hi, color=BAND_COLOURS[key], alpha=0.25, lw=0)
        counts = m.hist["counts"]
        hx.set_ylim(0, max(counts) * 1.25)
        hx.set_ylabel("\n".join(textwrap.wrap(words["count"], 20)), fontsize=9)
        hx.tick_params(labelsize=9)
        hx.set_title(words["hist_title"], fontsize=11, pad=6)
        edges = m.hist_edges
        hx.bar(edges[:-1], counts, width=1.0, align="edge", color="#0969da", alpha=0.85, edgecolor="white",
               linewidth=0.5)
        hx.text(0.005, 0.97, f"{words['times']}{math.log2(m.scale):g}", fontsize=10, transform=hx.transAxes,
                va="top", bbox={"fc": "white", "alpha": 0.85, "lw": 0})
    if m.marker_pos is not None:
        ax.axvline(m.marker_pos, color="#24292f", lw=2)
    if m.label_text:
        right = m.marker_pos is not None and m.marker_pos > (m.lo + m.hi) / 2
        x = m.marker_pos if m.marker_pos is not None else m.lo
        ax.annotate(m.label_text, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(-5 if right else 5, -3),
                    textcoords="offset points", ha="right" if right else "left", va="top", fontsize=9,
                    bbox={"fc": "white", "alpha": 0.85, "lw": 0})
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=bottom / height, top=1 - top / height,
                        hspace=0.12)
    return fig
