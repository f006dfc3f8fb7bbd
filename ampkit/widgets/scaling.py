"""Notebook 03's widgets: the visual loss scaler and the dynamic-scaler replay (with every framework's preset).

Thin views over :mod:`ampkit.scaling` (``scale_sweep``, ``safe_window``, ``log2_histogram``, ``replay``,
``log2_ceiling``, :func:`ampkit.scaling.presets.replay_presets`) and :func:`ampkit.formats.range_bands`.
:class:`VisualLossScaler` is drawn in the browser (:class:`ampkit.widgets.front.FrontView`, ``js/scaler.js``) from
the sweep of every slider position the engine computed when it started. :class:`ScalerReplay` builds its matplotlib
figure once (``ampkit.widgets.style``: the kit's band colours, dpi and size), updates artists on a change and shows
the figure as PNG bytes in an ``ipywidgets.Image`` at the figure's own pixel width; images are cached by inputs.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as W
import torch
import traitlets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend

from ampkit.formats import format_name, range_bands
from ampkit.i18n import mark, tr
from ampkit.scaling import (
    SAFE_MAX_FLUSHED,
    Replay,
    RuleReplay,
    ScaleReport,
    log2_ceiling,
    log2_histogram,
    replay,
    safe_window,
    scale_sweep,
)
from ampkit.scaling.presets import PRESETS, replay_presets
from ampkit.widgets.figtext import localize
from ampkit.widgets.front import FrontView
from ampkit.widgets.style import (
    BAND_COLOURS,
    BAND_LABELS,
    DPI,
    STATUS_COLOURS,
    WidgetView,
    blit_background,
    blit_png,
    dtype_colour,
    new_figure,
    png_bytes,
)

__all__ = ["VisualLossScaler", "ScalerReplay", "scaler_readout_html", "replay_readout_html", "preset_readout_html",
           "DTYPE_CHOICES", "PRESET_STYLES"]

_PALETTE = ("#0969da", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#9a6700", "#a475f9", "#0550ae",
            "#116329", "#953800", "#4d2d00", "#3e1f79", "#24292f", "#bf3989")
_MARKERS = ("o", "s", "^", "D", "v", "P", "*", "<", ">", "h", "p", "d", "8", "H")
_LINESTYLES = ("-", "--", "-.", ":")
#: Per preset name: (colour, marker, linestyle) of its trajectory in the replay — distinct for every preset.
PRESET_STYLES: dict[str, tuple[str, str, str]] = {
    name: (_PALETTE[i % len(_PALETTE)], _MARKERS[i % len(_MARKERS)], _LINESTYLES[i % len(_LINESTYLES)])
    for i, name in enumerate(PRESETS)}
_SKIP_MARK, _APPLIED_MARK = "x", "X"

#: The formats the visual scaler offers (label, canonical name).
DTYPE_CHOICES: tuple[tuple[str, str], ...] = (("fp16", "float16"), ("bf16", "bfloat16"),
                                              ("fp8 e4m3", "float8_e4m3fn"), ("fp8 e5m2", "float8_e5m2"))
_XLIM = (-72, 40)
_SLIDER = (-8, 40)   # the visual scaler's log2(scale) slider: every position is swept when the view starts
_WIDTH_IN, _HEIGHT_IN = 7.0, 3.0
_REPLAY_HEIGHT_IN = 3.8   # the replay: room for the presets' legend
_WIDTH_PX = int(_WIDTH_IN * DPI)   # the Image widget shows the figure at its own pixel width: no blur


def _pct(x: float) -> str:
    return "0 %" if x == 0 else ("< 0.01 %" if x < 1e-4 else f"{100 * x:.2f} %")


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


def replay_readout_html(r: Replay) -> str:
    """The replay's readout: skipped steps and final scale."""
    final = "0" if r.final_scale == 0 else f"2<sup>{math.log2(r.final_scale):.1f}</sup>"
    skipped = tr("skipped steps (overflow): <b class='ampkit-skipped'>{n}</b> of {total}", n=r.skipped,
                 total=len(r.scales))
    return f"<div class='ampkit-replay-readout'>{skipped} · {tr('final scale {s}', s=final)}</div>"


def _log2_text(s: float) -> str:
    return "0" if s == 0 else ("inf" if math.isinf(s) else f"2<sup>{math.log2(s):g}</sup>")


def preset_readout_html(replays: dict[str, RuleReplay]) -> str:
    """One line per replayed preset: its final scale, skipped steps, overflowing updates APPLIED, run stopped."""
    if not replays:
        return f"<div class='ampkit-preset-readout'>{tr('no framework preset selected')}</div>"
    lines = []
    for name, r in replays.items():
        colour = PRESET_STYLES[name][0]
        stop = "" if r.stopped_at is None else " · <b>" + tr("run stopped at step {step}", step=r.stopped_at) + "</b>"
        facts = tr("final scale {s} · skipped <span class='ampkit-preset-skipped'>{skipped}</span> · "
                   "overflow APPLIED <span class='ampkit-preset-applied'>{applied}</span>", s=_log2_text(r.final_scale),
                   skipped=r.skipped, applied=r.applied_overflow)
        lines.append(f"<span style='color:{colour}'>■</span> <b>{name}</b> ({PRESETS[name].framework}): "
                     f"{facts}{stop}")
    return "<div class='ampkit-preset-readout'>" + "<br>".join(lines) + "</div>"


class ScalerReplay(WidgetView):
    """A dynamic scaler replayed over a run's recorded gradient maxima; sliders for its settings, and a preset
    list: the same gradient maxima replayed under each selected framework's rule (its own defaults, or starting
    at log2(init) when ``presets_start_at_init`` is ticked), overlaid; ``x`` marks a skipped overflow step, a red
    ``X`` an overflowing update that was APPLIED.

    >>> rp = ScalerReplay([1e-6] * 50, growth_interval=5)
    >>> rp.state.skipped
    0
    >>> rp.presets.value = ("torch", "mindspore-fixed-apply"); rp.start_at_init.value = True; rp.init.value = 40
    >>> rp.preset_states["mindspore-fixed-apply"].applied_overflow
    50
    """

    def __init__(self, grad_max: Sequence[float], fmt: str = "float16", init_log2: int = 16,
                 growth_interval: int = 20, backoff: float = 0.5, hysteresis: int = 1,
                 presets: Sequence[str] = (), presets_start_at_init: bool = False):
        self.grad_max = [float(g) for g in grad_max]
        if not self.grad_max:
            raise ValueError(tr("grad_max must hold one gradient magnitude per step (e.g. TaskRun.grad_max)"))
        self.fmt = format_name(fmt)
        self.init = W.IntSlider(value=init_log2, min=0, max=48, description="log2(init)", continuous_update=True)
        self.interval = W.IntSlider(value=growth_interval, min=1, max=500, description=tr("growth every"),
                                    continuous_update=True)
        self.backoff = W.FloatSlider(value=backoff, min=0.1, max=0.9, step=0.05, description=tr("backoff"),
                                     continuous_update=True)
        self.hysteresis = W.IntSlider(value=hysteresis, min=1, max=8, description=tr("hysteresis"),
                                      continuous_update=True)
        self.presets = W.SelectMultiple(options=[(f"{n}: {p.framework}", n) for n, p in PRESETS.items()],
                                        value=tuple(presets), rows=7, description=tr("presets"),
                                        layout=W.Layout(width="520px"))
        self.presets.add_class("ampkit-preset-select")
        self.start_at_init = W.Checkbox(value=presets_start_at_init, description=tr("presets start at log2(init)"),
                                        indent=False)
        self.start_at_init.add_class("ampkit-preset-at-init")
        self.preset_readout = W.HTML()
        self.readout = W.HTML()
        self.image = W.Image(format="png", width=_WIDTH_PX)
        self.image.add_class("ampkit-replay-plot")
        self._pngs: dict[tuple, bytes] = {}
        self._build_figure()
        self.state: Replay
        self.preset_states: dict[str, RuleReplay] = {}
        for s in (self.init, self.interval, self.backoff, self.hysteresis, self.presets, self.start_at_init):
            s.observe(self._on_change, names="value")
        self._update()
        self.widget = W.VBox([W.HBox([self.init, self.interval]), W.HBox([self.backoff, self.hysteresis]),
                              W.HBox([self.presets, self.start_at_init]), self.readout, self.preset_readout,
                              self.image])

    def _build_figure(self) -> None:
        steps = list(range(len(self.grad_max)))
        ceiling = log2_ceiling(self.grad_max, self.fmt)
        self.fig = new_figure(_WIDTH_IN, _REPLAY_HEIGHT_IN, layout=None)   # fixed layout: the blitted artists stay put
        self.ax = self.fig.add_subplot()
        top = 64
        self.ax.fill_between(steps, ceiling, top, step="post", color=BAND_COLOURS["overflow"], alpha=0.12, lw=0,
                             label=f"{format_name(self.fmt)} overflows here")
        self.ax.step(steps, ceiling, where="post", color=BAND_COLOURS["overflow"], lw=1, ls="--")
        (self._line,) = self.ax.step(steps, [0.0] * len(steps), where="post", color=dtype_colour(self.fmt), lw=1.8,
                                     label="log2(scale) the scaler used")
        self._marks = self.ax.scatter([], [], marker=_SKIP_MARK, s=40, color="#24292f", zorder=3,
                                      label="overflow: step skipped")
        every = max(1, len(steps) // 10)
        # markers staggered per preset (offset i * every / 14): coinciding trajectories still show every marker
        self._preset_lines = {
            n: self.ax.step([], [], where="post", color=c, marker=m, ls=ls, lw=1.3, ms=5, label=n,
                            markevery=(i * every // len(PRESET_STYLES), every))[0]
            for i, (n, (c, m, ls)) in enumerate(PRESET_STYLES.items())}
        self._preset_skips = self.ax.scatter([], [], marker=_SKIP_MARK, s=36, zorder=4)
        self._preset_applied = self.ax.scatter([], [], marker=_APPLIED_MARK, s=70, color=STATUS_COLOURS["bad"],
                                               edgecolors="#24292f", linewidths=0.6, zorder=5)
        self.ax.set_xlabel("training step")
        self.ax.set_ylabel("log2(loss scale)")
        self.ax.set_xlim(0, len(steps))
        self.ax.set_ylim(-2, top)
        self.ax.set_title("Dynamic scaler replayed over this run's largest gradients", fontsize=11)
        self.fig.tight_layout(rect=(0, 0, 0.74, 1))   # room on the right for the legend
        self._legend: Legend | None = None
        self._bgs: dict[tuple[str, ...], object] = {}   # per preset selection: the base plus that selection's legend
        self._base_bg = blit_background(self.fig, self._moving())   # axes, ceiling band, title: drawn once
        for line in self._preset_lines.values():                # blit_background showed every moving artist again
            line.set_visible(False)

    def _moving(self) -> tuple:
        return (self._line, self._marks, *self._preset_lines.values(), self._preset_skips, self._preset_applied)

    def _draw_presets(self) -> None:
        """Overlay each selected preset's trajectory; skipped and APPLIED overflow steps marked apart."""
        skips, skip_colours, applied = [], [], []
        for n, line in self._preset_lines.items():
            r = self.preset_states.get(n)
            line.set_visible(r is not None)
            if r is None:
                continue
            ys = [_y(s) for s in r.scales]
            line.set_data(range(len(ys)), ys)
            for i, (o, a) in enumerate(zip(r.overflow, r.applied)):
                if o and a:
                    applied.append([i, ys[i]])
                elif o:
                    skips.append([i, ys[i]])
                    skip_colours.append(PRESET_STYLES[n][0])
        self._preset_skips.set_offsets(skips or torch.empty(0, 2).numpy())
        self._preset_skips.set_color(skip_colours or "#24292f")
        self._preset_applied.set_offsets(applied or torch.empty(0, 2).numpy())

    def _background_for(self, names: tuple[str, ...]) -> object:
        """The blitting background for this preset selection: the static base with the selection's legend drawn
        on it (once per selection — a legend is the slowest artist to draw)."""
        if names not in self._bgs:
            if len(self._bgs) >= 64:   # bounded cache
                self._bgs.pop(next(iter(self._bgs)))
            handles = [self._line, self._marks] + [self._preset_lines[n] for n in names]
            labels = [mark("ampkit (sliders)"), mark("its skipped steps"), *names]
            if names:
                handles += [self._preset_skips, self._preset_applied]
                labels += [mark("preset: step skipped"), mark("preset: inf/NaN APPLIED")]
            if self._legend is not None:
                self._legend.remove()
            self._legend = self.fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.745, 0.5),
                                           fontsize=7, frameon=False)
            canvas = self.fig.canvas
            assert isinstance(canvas, FigureCanvasAgg)   # new_figure gives the figure an Agg canvas
            canvas.restore_region(self._base_bg)
            localize(self._legend)   # drawn here directly, not through the figure's draw
            self._legend.draw(canvas.get_renderer())
            self._bgs[names] = canvas.copy_from_bbox(self.fig.bbox)
        return self._bgs[names]

    def _update(self) -> None:
        names = tuple(n for n in PRESETS if n in self.presets.value)
        at_init = bool(self.start_at_init.value)
        key = (self.init.value, self.interval.value, round(self.backoff.value, 4), self.hysteresis.value, names,
               at_init and bool(names))
        self.state = replay(self.grad_max, self.fmt, init_scale=2.0 ** key[0], growth_interval=key[1],
                            backoff_factor=key[2], hysteresis=key[3])
        self.preset_states = replay_presets(list(names), self.grad_max, self.fmt,
                                            log2_init=key[0] if at_init else None)
        self.readout.value = replay_readout_html(self.state)
        self.preset_readout.value = preset_readout_html(self.preset_states)
        ys = [_y(s) for s in self.state.scales]
        self._line.set_ydata(ys)
        self._marks.set_offsets([[i, y] for i, (y, o) in enumerate(zip(ys, self.state.overflow)) if o] or
                                torch.empty(0, 2).numpy())
        self._draw_presets()
        if key not in self._pngs:      # the artists always follow the state; only the PNG is cached
            if len(self._pngs) >= 256:   # bounded cache: drop the oldest image
                self._pngs.pop(next(iter(self._pngs)))
            self._pngs[key] = blit_png(self.fig, self._background_for(names), self._moving())
        self.image.value = self._pngs[key]


def _y(s: float) -> float:
    """log2 of a scale for the replay's axis (0 and below drawn at its bottom, -2; inf at its top)."""
    return math.log2(s) if 0 < s < math.inf else (-2.0 if s <= 0 else 64.0)
