"""The sink timeline of notebook ``04_data_sinking``, drawn in the browser (:class:`ampkit.widgets.front.FrontView`,
``js/sink.js``): a sink mode and sliders for the costs of a training step → the simulated Gantt chart of the loader,
host and device lanes, with step time, steps/s, device utilisation, syncs per step and the speed-up over no sinking;
a "measure on this machine" button fills the sliders from a calibration of the kernel's machine.

**Why the page computes the timeline itself.** :func:`ampkit.timeline.simulate` is a small closed-form schedule: per
step, a fixed sequence of sums and maxima of the costs (prep, copy, launch, op, sync, ...), branching only on the
mode's three switches (data sink, graph, loop) and on ``async_device`` — the issue's "timeline of a sink setting",
arithmetic a browser does in a millisecond. Its slider grid (4 modes × 32 sink sizes × 401 × 301 × 400 × 401
positions × 2) is far too large to precompute, so the page PORTS that arithmetic (``simulate``, ``gantt_bars``,
``summarise``, :attr:`SinkTimeline.params` and the readout's numbers; each copy marked ``// port of`` in
``js/sink.js`` and ``# port:`` here, docs/architecture.md "Ports") and the engine sends its parameters:
the slider values (traits) and the costs no slider moves (``base_costs``). ``tests/browser/
test_front_sink_arith_browser.py`` holds every bar and every printed number equal to the engine's on random settings,
so the saved notebook moves every control with no kernel. Only "measure" needs new computation (real steps on the
kernel's machine, :func:`ampkit.sinking.calibrate`): the button sends ``{"event": "measure"}``, the kernel says
"measuring…", then sends the measured costs and says them in :attr:`status`; a view restored from a saved notebook
has no kernel behind it (no "here" answered the page's hello: ``js/kit.js`` ``kernelPresence``), so the page says in
one line "run the notebook to compute this on your machine". The measured costs are text and never branch the saved
state: the notebook is executed without pressing the button.

On the Python side :attr:`timeline`, :attr:`summary` and :attr:`bars` are the engine's own
(:func:`ampkit.timeline.summarise`, :func:`ampkit.timeline.gantt_bars`), computed when read: a move costs the
kernel only its trait.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import ipywidgets as W
import traitlets

from ampkit.i18n import mark, tr
from ampkit.sinking import Calibration, calibrate
from ampkit.timeline import (
    EVENT_KINDS,
    GPU_LIKE,
    LANES,
    SINK_MODES,
    SimParams,
    Summary,
    Timeline,
    check_mode,
    gantt_bars,
    summarise,
)
from ampkit.widgets.front import Control, FrontView
from ampkit.widgets.sinking import (
    EMPTY_LANE_NOTES,
    KIND_COLOURS,
    KIND_LABELS,
    SUMMARY_HEADER,
    summary_html,
    timeline_figure,
)
from ampkit.widgets.style import png_bytes

__all__ = ["SinkTimeline", "SLIDERS", "MAX_BARS"]

_US = 1e-6
#: The most bars the chart draws (ampkit.timeline.gantt_bars merges neighbours beyond).
MAX_BARS = 1500
#: The sliders, in the page's order: (trait, label, min, max, step, log); a log slider's min/max/step are exponents
#: of 10 (as ipywidgets' FloatLogSlider), its value in µs.
SLIDERS = (("sink_steps", mark("sink_size (steps)"), 1, 32, 1, False),
           ("prep_us", mark("data prep (µs/batch)"), 0, 4, 0.01, True),
           ("launch_us", mark("launch (µs/op)"), -1, 2, 0.01, True),
           ("op_count", mark("ops per step"), 1, 400, 1, False),
           ("op_us", mark("op time (µs)"), -1, 3, 0.01, True))
_TITLE = mark("Simulated {mode}: {steps} steps, {step:.1f} µs/step, device computing {util:.0%} of the time")
_LANE_WORDS = {"loader": mark("loader"), "host": mark("host"), "device": mark("device")}


class _Control(Control):
    """A control as the notebook knew it (``timeline.sink_size.value = 16``); a slider also has ``min``, ``max``
    (exponents of ``base`` for a log slider) and ``description``."""

    def __init__(self, view: SinkTimeline, trait: str, description: str = "", lo: float = 0, hi: float = 0,
                 log: bool = False):
        super().__init__(view, trait)
        self.description, self.min, self.max, self.base, self.log = description, lo, hi, 10, log

    def clip(self, value: float) -> float:
        """``value`` moved into the slider's range."""
        lo, hi = (self.base ** self.min, self.base ** self.max) if self.log else (self.min, self.max)
        return min(max(value, lo), hi)


class SinkTimeline(FrontView):
    """A sink mode and the costs of a step (sink_size, data prep, launch overhead, ops per step, op time; whether
    the device runs asynchronously, as a GPU does) → the simulated timeline, drawn in the browser.

    Controls (``.value`` as before): ``.mode``, ``.sink_size``, ``.prep``, ``.launch``, ``.n_ops``, ``.op`` (times in
    µs), ``.async_device``; their traits are ``sink_mode``, ``sink_steps``, ``prep_us``, ``launch_us``, ``op_count``,
    ``op_us``, ``device_async``. The engine's state: ``.params``, ``.timeline``, ``.summary``, ``.bars``,
    ``.readout_html``, ``.calibration`` (after :meth:`measure`, the page's "measure" button).

    >>> w = SinkTimeline(); w.mode.value = "data+graph+loop"; w.sink_size.value = 8
    >>> w.summary.syncs_per_step
    0.125
    """

    _front = "sink"
    sink_mode = traitlets.Unicode("none").tag(sync=True)
    sink_steps = traitlets.Int(4).tag(sync=True)
    prep_us = traitlets.Float(200.0).tag(sync=True)
    launch_us = traitlets.Float(6.0).tag(sync=True)
    op_count = traitlets.Int(60).tag(sync=True)
    op_us = traitlets.Float(4.0).tag(sync=True)
    device_async = traitlets.Bool(True).tag(sync=True)
    base_costs = traitlets.Dict().tag(sync=True)
    modes: traitlets.List[str] = traitlets.List(list(SINK_MODES)).tag(sync=True)
    sliders: traitlets.List[dict] = traitlets.List().tag(sync=True)
    kinds: traitlets.List[list] = traitlets.List([[k, KIND_COLOURS[k]] for k in EVENT_KINDS]).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)

    def __init__(self, params: SimParams = GPU_LIKE, mode: str = "none",
                 calibrate_fn: Callable[[], Calibration] | None = None):
        if not isinstance(params, SimParams):
            raise TypeError(tr("params must be a SimParams; got {type}", type=type(params).__name__))
        self.calibrate_fn = calibrate_fn
        self.calibration: Calibration | None = None
        self._cache: tuple[Any, tuple[Timeline, Summary, list]] | None = None
        self._controls = {trait: _Control(self, trait, tr(label), lo, hi, log)
                          for trait, label, lo, hi, _step, log in SLIDERS}
        self.sink_size, self.prep, self.launch, self.n_ops, self.op = self._controls.values()
        self.mode = _Control(self, "sink_mode", tr("mode"))
        self.async_device = _Control(self, "device_async", tr("asynchronous device (GPU-like)"))
        self._base = params
        super().__init__(sliders=[{"trait": t, "min": lo, "max": hi, "step": step, "log": log}
                                  for t, _label, lo, hi, step, log in SLIDERS],
                         base_costs=self._costs(params), sink_mode=mode, **self._slider_values(params))
        self.on_msg(self._on_front_msg)

    # -- the controls' traits, validated -------------------------------------------------------------------
    def _slider_values(self, p: SimParams) -> dict[str, Any]:
        c = self._controls
        return {"sink_steps": int(c["sink_steps"].clip(p.sink_size)), "prep_us": c["prep_us"].clip(p.prep / _US),
                "launch_us": c["launch_us"].clip(p.launch / _US), "op_count": int(c["op_count"].clip(p.n_ops)),
                "op_us": c["op_us"].clip(p.op / _US), "device_async": bool(p.async_device)}

    @traitlets.validate("sink_mode")
    def _valid_mode(self, proposal: dict) -> str:
        try:
            return check_mode(proposal["value"])
        except ValueError as err:
            raise traitlets.TraitError(str(err)) from None

    @traitlets.validate("sink_steps", "prep_us", "launch_us", "op_count", "op_us")
    def _in_range(self, proposal: dict) -> float:
        name, value = proposal["trait"].name, proposal["value"]
        ctl = self._controls[name]
        lo, hi = (10.0 ** ctl.min, 10.0 ** ctl.max) if ctl.log else (ctl.min, ctl.max)
        ok = isinstance(value, (int, float)) and math.isfinite(value) and \
            lo * (1 - 1e-12) <= value <= hi * (1 + 1e-12)
        if not ok:
            raise traitlets.TraitError(tr("{name} must be a number from {lo:g} to {hi:g}; got {value!r}",
                                          name=ctl.description, lo=lo, hi=hi, value=value))
        return value

    # -- the engine's state -------------------------------------------------------------------------------
    @property
    def base(self) -> SimParams:
        """The costs no slider moves (copy, sync, callback, handoff, graph launch and fusion, queue depth)."""
        return self._base

    @staticmethod
    def _costs(b: SimParams) -> dict[str, Any]:
        fusion = None if b.graph_compute is None else (1.0 if b.step_compute == 0 else b.graph_compute / b.step_compute)
        return {"copy": b.copy, "sync": b.sync, "callback": b.callback, "handoff": b.handoff,
                "graph_launch": b.graph_launch, "fusion": fusion, "depth": b.depth}

    @property
    def fusion(self) -> float:
        """The compiled step's compute as a fraction of the eager ops' compute, from the base costs (1.0 when
        the graph only saves launches, as CUDA graphs do; < 1 when the compiler also fused work away)."""
        fusion = self.base_costs["fusion"]
        return 1.0 if fusion is None else fusion

    # port: js/sink.js paramsOf
    @property
    def params(self) -> SimParams:
        """The simulator's costs of the controls' setting (what ``js/sink.js``'s ``paramsOf`` computes)."""
        b = self._base
        n_ops, op = int(self.op_count), self.op_us * _US
        return SimParams(prep=self.prep_us * _US, copy=b.copy, n_ops=n_ops, launch=self.launch_us * _US, op=op,
                         sync=b.sync, callback=b.callback, handoff=b.handoff, graph_launch=b.graph_launch,
                         graph_compute=None if b.graph_compute is None else self.fusion * n_ops * op,
                         depth=b.depth, sink_size=int(self.sink_steps), async_device=bool(self.device_async))

    def _computed(self) -> tuple[Timeline, Summary, list]:
        key = (self.sink_mode, self.params)
        if self._cache is None or self._cache[0] != key:
            tl, s = summarise(self.sink_mode, key[1])
            self._cache = (key, (tl, s, gantt_bars(tl, max_bars=MAX_BARS)))
        return self._cache[1]

    @property
    def timeline(self) -> Timeline:
        """The engine's simulated timeline of the setting (:func:`ampkit.timeline.summarise`)."""
        return self._computed()[0]

    @property
    def summary(self) -> Summary:
        return self._computed()[1]

    @property
    def bars(self) -> list:
        """The chart's bars: :func:`ampkit.timeline.gantt_bars` of the timeline (at most :data:`MAX_BARS`)."""
        return self._computed()[2]

    @property
    def readout_html(self) -> str:
        return summary_html(self.summary)

    @property
    def title_text(self) -> str:
        s = self.summary
        return tr(_TITLE, mode=s.mode, steps=self.timeline.steps, step=s.step_time * 1e6, util=s.utilisation)

    # -- measure on this machine --------------------------------------------------------------------------
    def _on_front_msg(self, _widget: Any, content: dict, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "measure":
            self.measure()

    def measure(self) -> None:
        """Fill the sliders from a calibration of this machine (``calibrate_fn``, default
        :func:`ampkit.sinking.calibrate` without compiling); the measured costs are said in :attr:`status`."""
        self.status = tr("measuring…")
        fn = self.calibrate_fn
        cal = calibrate(compile=False) if fn is None else fn()
        self.calibration = cal
        p = cal.params(sink_size=int(self.sink_steps))
        self._base = p
        with self.hold_trait_notifications():
            self.base_costs = self._costs(p)
            values = self._slider_values(p)
            del values["sink_steps"]
            for name, value in values.items():
                setattr(self, name, value)
        self.status = tr("measured on {device}: launch {launch:.2f} µs/op, op {op:.2f} µs, {n} ops/step, "
                         "prep {prep:.0f} µs/batch, data-sink handoff {handoff:.0f} µs/batch", device=cal.device,
                         launch=p.launch / _US, op=p.op / _US, n=p.n_ops, prep=p.prep / _US, handoff=p.handoff / _US)

    # -- words and the still picture ----------------------------------------------------------------------
    def words(self) -> dict[str, Any]:
        return {"mode": tr("mode"), "sliders": {t: tr(label) for t, label, *_ in SLIDERS},
                "async": tr("asynchronous device (GPU-like)"), "measure": tr("measure on this machine"),
                "measuring": tr("measuring…"), "no_kernel": tr("run the notebook to compute this on your machine"),
                "header": re.findall(r"<th>(.*?)</th>", tr(SUMMARY_HEADER)), "title": tr(_TITLE),
                "xlabel": tr("time since the first step began (µs)"),
                "lanes": {lane: tr(_LANE_WORDS[lane]) for lane in LANES},
                "kinds": {k: tr(KIND_LABELS[k]) for k in EVENT_KINDS},
                "empty": {lane: tr(msg) if msg else "" for lane, msg in EMPTY_LANE_NOTES.items()}}

    def still(self) -> W.Widget:
        setting = ", ".join(f"{ctl.description}: {ctl.value:.3g}" for ctl in self._controls.values())
        chart = png_bytes(timeline_figure(self.timeline, self.bars, self.title_text))
        return W.VBox([W.HTML(f"{tr('mode')}: <code>{self.sink_mode}</code>; {setting}"), W.HTML(self.readout_html),
                       W.Image(value=chart, format="png")])
