"""Notebook 03's widgets (``03_loss_scaling.ipynb``): the visual loss scaler; the dynamic-scaler replay (with every
framework's preset) lives in :mod:`ampkit.widgets.replay` and is re-exported here.

Thin views over :mod:`ampkit.scaling` (``scale_sweep``, ``safe_window``, ``log2_histogram``) and
:func:`ampkit.formats.range_bands`. :class:`VisualLossScaler` is drawn in the browser
(:class:`ampkit.widgets.front.FrontView`, ``js/scaler.js``) from the sweep of every slider position the engine
computed when it started.

>>> from ampkit.widgets.scaling import ScalerReplay      # drawn by js/replay.js, defined in ampkit.widgets.replay
>>> ScalerReplay.__module__
'ampkit.widgets.replay'
"""
from __future__ import annotations

import ipywidgets as W
import torch
import traitlets

from ampkit.formats import format_name, range_bands
from ampkit.i18n import tr
from ampkit.scaling import SAFE_MAX_FLUSHED, ScaleReport, log2_histogram, safe_window, scale_sweep
from ampkit.widgets.front import FrontView
from ampkit.widgets.replay import PRESET_STYLES, ScalerReplay, preset_readout_html, replay_readout_html
from ampkit.widgets.style import BAND_COLOURS, BAND_LABELS, DPI, new_figure, png_bytes

__all__ = ["VisualLossScaler", "ScalerReplay", "scaler_readout_html", "replay_readout_html", "preset_readout_html",
           "DTYPE_CHOICES", "PRESET_STYLES"]


#: The formats the visual scaler offers (label, canonical name).
DTYPE_CHOICES: tuple[tuple[str, str], ...] = (("fp16", "float16"), ("bf16", "bfloat16"),
                                              ("fp8 e4m3", "float8_e4m3fn"), ("fp8 e5m2", "float8_e5m2"))
_XLIM = (-72, 40)
_SLIDER = (-8, 40)   # the visual scaler's log2(scale) slider: every position is swept when the view starts
_WIDTH_IN, _HEIGHT_IN = 7.0, 3.0
_WIDTH_PX = int(_WIDTH_IN * DPI)   # the Image widget shows the figure at its own pixel width: no blur


def _pct(x: float) -> str:
    value = "0" if x == 0 else ("< 0.01" if x < 1e-4 else f"{100 * x:.2f}")
    return tr("{value} %", value=value)       # Chinese: 67% (no space to break a narrow readout at)


def scaler_readout_html(report: ScaleReport, window: tuple[int, int] | None) -> str:
    """The visual scaler's readout: % flushed / subnormal / overflow at this scale, and the safe window."""
    win = (tr("none in range — no power-of-two scale keeps every gradient") if window is None
           else f"2<sup>{window[0]}</sup> … 2<sup>{window[1]}</sup>")
    head = tr("<b>scale 2<sup>{k}</sup> in {fmt}</b>: ", k=report.log2_scale, fmt=report.fmt)
    flushed = tr("flushed to zero {pct}", pct=_pct(report.flushed))
    subnormal = tr("subnormal {pct}", pct=_pct(report.subnormal))
    overflow = tr("overflow {pct}", pct=_pct(report.overflow))
    of_what = tr("(of the nonzero gradient values)")
    safe = tr("safe window (no overflow, ≤ {pct:g} % flushed):", pct=100 * SAFE_MAX_FLUSHED)
    return (f"<div class='ampkit-scale-readout'>{head}"
            f"<span class='ampkit-flushed' style='color:{BAND_COLOURS['flushed']}'>{flushed}</span>"
            f" · <span class='ampkit-subnormal'>{subnormal}</span>"
            f" · <span class='ampkit-overflow' style='color:{BAND_COLOURS['overflow']}'>{overflow}</span>"
            f" <small>{of_what}</small><br>"
            f"{safe} "
            f"<span class='ampkit-window'>{win}</span></div>")


class VisualLossScaler(FrontView):
    """Gradient magnitudes (log2 histogram) over a format's bands; a log2(scale) slider shifts them, drawn in the
    browser (``js/scaler.js``). The engine sweeps every slider position of every offered format when the view is
    built (:func:`ampkit.scaling.scale_sweep`, :func:`ampkit.scaling.safe_window`) and sends that sweep as the view's
    state; the page only SELECTS the position's numbers (the readout's percentages are the engine's own strings), so
    the view moves without a kernel. :attr:`state` and :attr:`window` are the engine's report for the position.

    ``values``: gradient values captured in fp32 (e.g. :func:`ampkit.scaling.capture_gradients`).

    >>> v = VisualLossScaler(torch.tensor([2.0**-30, 2.0**-20, 1e-3]), log2_scale=0)
    >>> round(v.state.flushed, 3), v.window
    (0.333, (6, 25))
    >>> v.log2_scale = 26; v.state.overflow > 0
    True
    """

    _front = "scaler"
    log2_scale = traitlets.Int(0).tag(sync=True)
    fmt = traitlets.Unicode("float16").tag(sync=True)
    min_log2 = traitlets.Int(_SLIDER[0]).tag(sync=True)
    max_log2 = traitlets.Int(_SLIDER[1]).tag(sync=True)
    xlim: traitlets.List[int] = traitlets.List(list(_XLIM)).tag(sync=True)
    formats: traitlets.List[dict] = traitlets.List().tag(sync=True)
    hist = traitlets.Dict().tag(sync=True)
    sweep = traitlets.Dict().tag(sync=True)

    def __init__(self, values: torch.Tensor, fmt: str = "float16", log2_scale: int = 0):
        if not isinstance(values, torch.Tensor) or values.numel() == 0:
            raise TypeError(tr("values must be a non-empty tensor of gradient values (see capture_gradients)"))
        self.values = values.detach().reshape(-1).float()
        fmt = format_name(fmt)
        names = [name for _, name in DTYPE_CHOICES]
        if fmt not in names:
            raise ValueError(tr("the visual scaler offers {names}; got {fmt!r}", names=", ".join(names), fmt=fmt))
        edges, frac = log2_histogram(self.values, lo=_XLIM[0] - 40, hi=_XLIM[1], bins_per_octave=1)
        self._reports: dict[tuple[str, int], ScaleReport] = {}
        self._windows: dict[str, tuple[int, int] | None] = {}
        sweep = {}
        for name in names:   # every slider position of every format, computed once, sent as the view's state
            reports = scale_sweep(self.values, name, *_SLIDER)
            self._reports.update({(name, k): r for k, r in reports.items()})
            self._windows[name] = window = safe_window(self.values, name, *_SLIDER, sweep=reports)
            b = range_bands(name, lo=_XLIM[0], hi=_XLIM[1])
            sweep[name] = {
                "pct": [[_pct(r.flushed), _pct(r.subnormal), _pct(r.overflow)] for r in reports.values()],
                "window": None if window is None else list(window),
                "bands": {"flushed": list(b.flush), "subnormal": list(b.subnormal), "normal": list(b.normal),
                          "overflow": list(b.overflow)}}
        self.state: ScaleReport = self._reports[(fmt, 0)]
        self.window: tuple[int, int] | None = self._windows[fmt]
        super().__init__(fmt=fmt, formats=[{"label": label, "name": name} for label, name in DTYPE_CHOICES],
                         hist={"edges": [float(e) for e in edges], "frac": [float(f) for f in frac]},
                         sweep=sweep)
        self.log2_scale = log2_scale
        self._select(None)

    @traitlets.validate("log2_scale")
    def _valid_scale(self, proposal: dict) -> int:
        k = proposal["value"]
        if not self.min_log2 <= k <= self.max_log2:
            raise traitlets.TraitError(tr("log2_scale must be an integer in [{lo}, {hi}]; got {k}", lo=self.min_log2,
                                          hi=self.max_log2, k=k))
        return k

    @traitlets.validate("fmt")
    def _valid_fmt(self, proposal: dict) -> str:
        fmt = format_name(proposal["value"])
        if self.sweep and fmt not in self.sweep:
            raise traitlets.TraitError(tr("the visual scaler offers {names}; got {fmt!r}", names=", ".join(self.sweep),
                                          fmt=fmt))
        return fmt

    @traitlets.observe("log2_scale", "fmt")
    def _select(self, change: dict | None) -> None:
        if self._reports:
            self.state, self.window = self._reports[(self.fmt, self.log2_scale)], self._windows[self.fmt]

    @property
    def readout_html(self) -> str:
        """The readout of the current position, as the page shows it (for the still picture and the tests)."""
        return scaler_readout_html(self.state, self.window)

    def words(self) -> dict:
        return {"scale": "log2(scale)", "format": tr("format"),
                "head": tr("<b>scale 2<sup>{k}</sup> in {fmt}</b>: "), "flushed": tr("flushed to zero {pct}"),
                "subnormal": tr("subnormal {pct}"), "overflow": tr("overflow {pct}"),
                "of_what": tr("(of the nonzero gradient values)"),
                "safe": tr("safe window (no overflow, ≤ {pct:g} % flushed):", pct=100 * SAFE_MAX_FLUSHED),
                "none": tr("none in range — no power-of-two scale keeps every gradient"),
                "bands": [[n, tr(label)] for n, label in BAND_LABELS.items()], "bars": tr("gradients × scale"),
                "xlabel": tr("log2 |gradient × scale|  (powers of two; each bar is one octave)"),
                "ylabel": tr("fraction of nonzero values")}

    def still(self) -> W.Widget:
        return W.VBox([W.HTML(f"log2(scale) = {self.log2_scale}, {tr('format')}: {self.fmt}"),
                       W.HTML(self.readout_html), W.Image(value=_still_png(self), format="png", width=_WIDTH_PX)])


def _still_png(v: VisualLossScaler) -> bytes:
    """The histogram over the format's bands at the view's position, as a PNG (renderers without JavaScript)."""
    fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
    ax = fig.add_subplot()
    for name, (lo, hi) in v.sweep[v.fmt]["bands"].items():
        ax.axvspan(lo, hi, color=BAND_COLOURS[name], alpha=0.18, lw=0, label=BAND_LABELS[name])
    edges, frac = v.hist["edges"], v.hist["frac"]
    ax.stairs(frac, [e + v.log2_scale for e in edges], fill=True, color="#0969da", alpha=0.8, label="gradients × scale")
    ax.set_xlim(*_XLIM)
    ax.set_ylim(0, max(0.05, max(frac) * 1.15))
    ax.set_xlabel("log2 |gradient × scale|  (powers of two; each bar is one octave)")
    ax.set_ylabel("fraction of nonzero values")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"{v.fmt}: gradients × $2^{{{v.log2_scale}}}$ — flushed {_pct(v.state.flushed)}, "
                 f"overflow {_pct(v.state.overflow)}", fontsize=11)
    return png_bytes(fig)
