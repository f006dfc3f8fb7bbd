"""Notebook 06's widget: the amax-history explorer.

A thin view over :mod:`ampkit.fp8` (``delayed_scales``, ``current_scales``) and :mod:`ampkit.lessons.fp8_scaling`
(``record_amax_run``, ``saturation_per_step``, ``flush_per_step``). A recorded fp8 run's per-step amax (activation
or gradient, with spikes); sliders for the history length and the margin and a choice of ``amax_compute_algo`` give
the scale each step would have cast with — delayed vs just-in-time side by side — and the fraction of that step's
values saturated / flushed. The figure is laid out once and redrawn on every change; shown as PNG bytes in an
``ipywidgets.Image`` at the figure's own pixel width.
"""
from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as W
import torch

from ampkit.fp8 import ALGOS, current_scales, delayed_scales, fp8_max, fp8_min_subnormal
from ampkit.i18n import tr
from ampkit.lessons.fp8_scaling import AmaxRecording, flush_per_step, record_amax_run, saturation_per_step
from ampkit.widgets.style import (
    BAND_COLOURS,
    DPI,
    STATUS_COLOURS,
    WidgetView,
    blit_background,
    blit_png,
    dtype_colour,
    freeze_layout,
    new_figure,
)

__all__ = ["AmaxHistoryExplorer", "ExplorerState", "explorer_state", "readout_html"]

_WIDTH_IN, _HEIGHT_IN = 7.5, 5.0
_WIDTH_PX = int(_WIDTH_IN * DPI)


@dataclass(frozen=True)
class ExplorerState:
    """What the explorer shows for one setting: per-step scales and fractions, delayed and just-in-time."""

    tensor: str
    fmt: str
    history_len: int
    algo: str
    margin: int
    amax: torch.Tensor
    delayed_scale: torch.Tensor
    current_scale: torch.Tensor
    delayed_saturated: torch.Tensor
    delayed_flushed: torch.Tensor
    current_saturated: torch.Tensor
    current_flushed: torch.Tensor

    @property
    def saturating_steps(self) -> int:
        return int((self.delayed_saturated > 0).sum())

    @property
    def worst_step(self) -> int:
        return int(self.delayed_saturated.argmax())


def explorer_state(rec: AmaxRecording, tensor: str, history_len: int, algo: str, margin: int) -> ExplorerState:
    """Compute one setting's per-step numbers (vectorised: one sliding max, two searchsorted calls per scheme)."""
    if tensor not in rec.amax:
        raise ValueError(tr("tensor must be one of {choices}; got {value!r}", choices=", ".join(map(repr, rec.amax)),
                            value=tensor))
    fmt, amax, vals = rec.formats[tensor], rec.amax[tensor], rec.values[tensor]
    ds = delayed_scales(amax, fmt, history_len, algo, margin)
    cs = current_scales(amax, fmt, margin)
    sub = fp8_min_subnormal(fmt)
    return ExplorerState(tensor=tensor, fmt=fmt, history_len=history_len, algo=algo, margin=margin, amax=amax,
                         delayed_scale=ds, current_scale=cs,
                         delayed_saturated=saturation_per_step(vals, ds, fmt),
                         delayed_flushed=flush_per_step(vals, ds, sub),
                         current_saturated=saturation_per_step(vals, cs, fmt),
                         current_flushed=flush_per_step(vals, cs, sub))


def _pct(x: float) -> str:
    return "0 %" if x == 0 else ("< 0.01 %" if x < 1e-4 else f"{100 * x:.2f} %")


def readout_html(s: ExplorerState) -> str:
    """The saturation readout: delayed vs just-in-time, steps that saturated, the worst one, mean flushed."""
    bad = STATUS_COLOURS["bad"] if s.saturating_steps else STATUS_COLOURS["good"]
    worst = (tr("worst step {step}: <b>{pct}</b> of its values saturated", step=s.worst_step,
                pct=_pct(float(s.delayed_saturated[s.worst_step]))) if s.saturating_steps
             else tr("no step saturates"))
    head = tr("<b>{tensor} in {fmt}</b> · delayed scaling, history {history}, <code>{algo}</code>, margin {margin}:",
              tensor=s.tensor, fmt=s.fmt, history=s.history_len, algo=s.algo, margin=s.margin)
    saturated = tr("saturated at {n} of {total} steps", n=s.saturating_steps, total=len(s.amax))
    flushed = tr("({worst}); flushed to zero on average", worst=worst)
    jit = tr("just-in-time scaling: saturated at {n} steps; flushed on average {pct}.",
             n=int((s.current_saturated > 0).sum()), pct=_pct(float(s.current_flushed.mean())))
    return (f"<div class='ampkit-fp8-readout'>{head} <span class='ampkit-fp8-saturated' style='color:{bad}'>"
            f"{saturated}</span> {flushed} "
            f"<span class='ampkit-fp8-flushed'>{_pct(float(s.delayed_flushed.mean()))}</span>.<br>"
            f"{jit}</div>")


class AmaxHistoryExplorer(WidgetView):
    """Sliders for history length and margin, a choice of algorithm and tensor → per-step scales and saturation.

    ``recording``: an :class:`~ampkit.lessons.fp8_scaling.AmaxRecording` (default:
    :func:`~ampkit.lessons.fp8_scaling.record_amax_run`).
    """

    def __init__(self, recording: AmaxRecording | None = None, history_len: int = 16, margin: int = 0,
                 algo: str = "max", tensor: str = "activation"):
        self.rec = recording if recording is not None else record_amax_run()
        steps = self.rec.steps
        self.history = W.IntSlider(value=history_len, min=1, max=steps, description=tr("history"),
                                   continuous_update=True, layout=W.Layout(width="480px"))
        self.margin = W.IntSlider(value=margin, min=0, max=8, description=tr("margin"), continuous_update=True,
                                  layout=W.Layout(width="480px"))
        self.algo = W.ToggleButtons(options=list(ALGOS), value=algo, description=tr("algorithm"))
        self.tensor = W.ToggleButtons(options=list(self.rec.amax), value=tensor, description=tr("tensor"))
        self.image = W.Image(format="png", width=_WIDTH_PX)
        self.image.add_class("ampkit-fp8-plot")
        self.readout = W.HTML()
        self._build()
        self._cache: dict[tuple, tuple[ExplorerState, bytes]] = {}
        for c in (self.history, self.margin, self.algo, self.tensor):
            c.observe(self._on_change, names="value")
        self.widget = W.VBox([W.HBox([self.tensor, self.algo]), self.history, self.margin, self.readout, self.image])
        self._update()

    # --- figure ----------------------------------------------------------------------------------------------
    def _build(self) -> None:
        fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
        top, bottom = fig.subplots(2, 1, sharex=True)
        steps = torch.arange(self.rec.steps).numpy()
        self._amax_line, = top.plot(steps, steps * 0 + 1, color="#24292f", lw=1.5, marker=".", ms=3,
                                    label="amax of the step (recorded)")
        self._d_line, = top.step(steps, steps * 0 + 1, where="mid", color=dtype_colour("e4m3"), lw=2,
                                 label="largest value the delayed scale keeps (fp8_max / scale)")
        self._c_line, = top.plot(steps, steps * 0 + 1, color="#0969da", lw=1, ls="--",
                                 label="just-in-time: fp8_max / scale (= amax · 2^margin)")
        top.set_yscale("log", base=2)
        top.set_ylabel("magnitude (log2 scale)")
        top.legend(loc="upper right", fontsize=7)
        self._d_sat, = bottom.plot(steps, steps * 0.0, color=BAND_COLOURS["overflow"], lw=2, marker="o", ms=3,
                                   label="saturated, delayed")
        self._c_sat, = bottom.plot(steps, steps * 0.0, color=BAND_COLOURS["overflow"], lw=1, ls=":", marker="x",
                                   ms=4, label="saturated, just-in-time")
        self._d_flu, = bottom.plot(steps, steps * 0.0, color=BAND_COLOURS["flushed"], lw=2, marker="s", ms=2,
                                   label="flushed to zero, delayed")
        self._c_flu, = bottom.plot(steps, steps * 0.0, color=BAND_COLOURS["flushed"], lw=1, ls="--",
                                   label="flushed to zero, just-in-time")
        # symlog: linear below 0.01 % (one value in 4096 is 0.024 %), logarithmic above, so a step that saturates one
        # value stands out as clearly as one at 30 % (on a 0-100 % axis it would sit on the zero line)
        bottom.set_yscale("symlog", linthresh=0.01, linscale=0.4)
        bottom.set_ylim(0, 150)
        bottom.set_yticks([0, 0.01, 0.1, 1, 10, 100], ["0", "0.01", "0.1", "1", "10", "100"])
        bottom.set_xlabel("training step")
        bottom.set_ylabel("% of the step's values")   # the ticks show the log scale
        bottom.legend(loc="upper right", fontsize=7, ncols=2)
        self._top, self._bottom, self.figure = top, bottom, fig
        top.set_title("amax history explorer")
        self._moving = [self._amax_line, self._d_line, self._c_line, self._d_sat, self._c_sat, self._d_flu,
                        self._c_flu]
        self._limits()
        self._top.set_ylim(*self._ylim[self.tensor.value])
        freeze_layout(fig)
        self._bg_for: str | None = None   # the tensor the blitting background was drawn for

    def _limits(self) -> None:
        """Fixed y-limits per tensor (every setting fits), so the axes never move and only the lines are redrawn."""
        self._ylim = {}
        for name, amax in self.rec.amax.items():
            pos = amax[amax > 0]
            lo = float(pos.min()) / 2 if pos.numel() else 2.0 ** -20
            self._ylim[name] = (lo, float(amax.max()) * 2.0 ** (self.margin.max + 1))

    def _render(self, s: ExplorerState) -> bytes:
        m = fp8_max(s.fmt)
        if self._bg_for != s.tensor:       # a new tensor: new y-limits, new background (once per tensor)
            self._top.set_ylim(*self._ylim[s.tensor])
            self._top.set_title(f"amax history explorer — {s.tensor} ({s.fmt}): a spike above the solid line "
                                "saturates", fontsize=9)
            self._bg = blit_background(self.figure, self._moving)
            self._bg_for = s.tensor
        self._amax_line.set_ydata(s.amax.numpy())
        self._d_line.set_ydata((m / s.delayed_scale).numpy())
        self._c_line.set_ydata((m / s.current_scale).numpy())
        for line, v in ((self._d_sat, s.delayed_saturated), (self._c_sat, s.current_saturated),
                        (self._d_flu, s.delayed_flushed), (self._c_flu, s.current_flushed)):
            line.set_ydata((100 * v).numpy())
        return blit_png(self.figure, self._bg, self._moving)

    # --- updates ---------------------------------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self.tensor.value, self.history.value, self.algo.value, self.margin.value)

    def _update(self) -> None:
        key = self._key()
        if key not in self._cache:
            state = explorer_state(self.rec, key[0], key[1], key[2], key[3])
            self._cache[key] = (state, self._render(state))
        self.state, png = self._cache[key]
        self.readout.value = readout_html(self.state)
        self.image.value = png
