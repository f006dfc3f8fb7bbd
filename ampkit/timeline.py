"""A small discrete-event model of a training loop's host and device lanes (notebook ``04_data_sinking``).

Why do data sink, graph sink and loop sink help? Because a training step is not only math: the host prepares the
batch, copies it to the device, *launches* every op (a few microseconds of Python and dispatcher work each), and
waits for the device whenever it reads a number back (``loss.item()``). This module replays those events on three
lanes and gives the timeline and the step time of the four modes:

- ``"none"``: the host prepares and copies each batch itself, launches every op, and syncs after every step.
- ``"data"`` (data sink): a loader lane (a background worker) prepares and copies batches ahead, through a queue of
  ``depth`` batches, so preparation overlaps compute; taking a batch from the worker costs the host ``handoff``.
- ``"data+graph"`` (+ graph sink): the step's ops are launched as one compiled graph: one launch per step.
- ``"data+graph+loop"`` (+ loop sink): the host syncs and runs callbacks once per ``sink_size`` steps.

On a GPU (``async_device=True``) a launched op runs later on the device while the host moves on; on a CPU
(``async_device=False``) the "device" is the host itself, so the host waits for each op.

>>> p = SimParams(prep=1.0, copy=0.5, n_ops=2, launch=0.1, op=1.0, sync=0.2)
>>> round(simulate("none", p, steps=1).step_time, 6)
3.8
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ampkit._util import check_choice, check_int, check_number

__all__ = ["SINK_MODES", "LANES", "SimParams", "Event", "Timeline", "simulate", "simulate_all", "check_mode",
           "GPU_LIKE", "CPU_LIKE", "EVENT_KINDS", "gantt_bars", "Summary", "summarise"]

#: The four modes, from no sinking to all three sinks.
SINK_MODES = ("none", "data", "data+graph", "data+graph+loop")
#: Lanes of the Gantt chart, top to bottom.
LANES = ("loader", "host", "device")


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is one of :data:`SINK_MODES`, else raise a ``ValueError`` naming them.

    >>> check_mode("data")
    'data'
    """
    return check_choice("mode", mode, SINK_MODES)


@dataclass(frozen=True)
class SimParams:
    """Costs of one training step's pieces, in seconds (any unit works if used consistently).

    ``prep``: host time to prepare one batch; ``copy``: host→device copy of one batch; ``n_ops``: ops per step;
    ``launch``: host cost to launch one op; ``op``: device time of one op; ``sync``: host cost of one sync (reading a
    value back) once the device is idle; ``callback``: host cost of the callbacks run after a sync;
    ``handoff``: host cost of taking one batch from the data sink's worker thread (waking it, passing Python's GIL;
    0 for a sink that lives on the device, as MindSpore's does);
    ``graph_launch``: host cost to launch the whole compiled step (default: ``launch``); ``graph_compute``: device
    time of the compiled step (default: ``n_ops * op``; fusion can make it smaller); ``depth``: batches the data
    sink's queue holds; ``sink_size``: steps per sync in loop sink mode; ``async_device``: the device runs behind
    the host (GPU) rather than the host doing the work itself (CPU).

    >>> SimParams(n_ops=10, op=1e-5).step_compute
    0.0001
    """

    prep: float = 0.0
    copy: float = 0.0
    n_ops: int = 1
    launch: float = 0.0
    op: float = 0.0
    sync: float = 0.0
    callback: float = 0.0
    handoff: float = 0.0
    graph_launch: float | None = None
    graph_compute: float | None = None
    depth: int = 2
    sink_size: int = 1
    async_device: bool = True

    def __post_init__(self) -> None:
        for name in ("prep", "copy", "launch", "op", "sync", "callback", "handoff", "graph_launch", "graph_compute"):
            v = getattr(self, name)
            optional = name.startswith("graph_")
            if (v is not None or not optional) and check_number(name, v, example="4e-6") < 0:
                raise ValueError(f"{name} must be {'None or ' if optional else ''}a number >= 0 (seconds); got {v!r}")
        check_int("n_ops", self.n_ops)
        check_int("depth (the data sink's queue size)", self.depth)
        check_int("sink_size (steps per sync; the simulator has no -1)", self.sink_size)

    @property
    def step_compute(self) -> float:
        """Device time of one eager step: ``n_ops * op``."""
        return self.n_ops * self.op

    @property
    def graph_launch_cost(self) -> float:
        return self.launch if self.graph_launch is None else float(self.graph_launch)

    @property
    def graph_compute_time(self) -> float:
        return self.step_compute if self.graph_compute is None else float(self.graph_compute)


@dataclass(frozen=True)
class Event:
    """One bar of the Gantt chart: ``lane`` (loader, host, device), ``kind`` (prep, copy, handoff, launch, compute,
    wait, sync, callback), start and end time, and the step it belongs to."""

    lane: str
    kind: str
    start: float
    end: float
    step: int

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    """The simulated run: events, total time, per-step time, device utilisation and steps per second."""

    mode: str
    params: SimParams
    steps: int
    events: list[Event] = field(default_factory=list)
    total: float = 0.0
    syncs: int = 0

    @property
    def step_time(self) -> float:
        """Average time per step (total / steps)."""
        return self.total / self.steps

    @property
    def steps_per_s(self) -> float:
        return float("inf") if self.total == 0 else self.steps / self.total

    def busy(self, lane: str, kinds: tuple[str, ...] | None = None) -> float:
        """Total time of ``lane``'s events (optionally only those of ``kinds``)."""
        return sum(e.duration for e in self.events if e.lane == lane and (kinds is None or e.kind in kinds))

    @property
    def utilisation(self) -> float:
        """Fraction of the run the device spends computing (0..1)."""
        return 0.0 if self.total == 0 else self.busy("device", ("compute",)) / self.total

    def lane_events(self, lane: str) -> list[Event]:
        return [e for e in self.events if e.lane == lane]


class _Sim:
    def __init__(self, mode: str, p: SimParams, steps: int):
        self.mode, self.p, self.steps = mode, p, steps
        self.tl = Timeline(mode, p, steps)
        self.host = 0.0
        self.dev = 0.0

    def add(self, lane: str, kind: str, start: float, end: float, step: int) -> None:
        if end > start:
            self.tl.events.append(Event(lane, kind, start, end, step))

    def host_work(self, kind: str, cost: float, step: int) -> None:
        self.add("host", kind, self.host, self.host + cost, step)
        self.host += cost

    def wait_host_until(self, t: float, step: int) -> None:
        if t > self.host:
            self.add("host", "wait", self.host, t, step)
            self.host = t

    def launch(self, launch_cost: float, compute: float, step: int) -> None:
        """Host launches work of ``compute`` device seconds; on a synchronous device the host then waits for it."""
        self.host_work("launch", launch_cost, step)
        start = max(self.host, self.dev)
        self.add("device", "compute", start, start + compute, step)
        self.dev = start + compute
        if not self.p.async_device:
            self.wait_host_until(self.dev, step)

    def sync(self, step: int) -> None:
        self.wait_host_until(self.dev, step)
        self.host_work("sync", self.p.sync, step)
        self.tl.syncs += 1
        self.host_work("callback", self.p.callback, step)

    def run(self) -> Timeline:
        p, mode = self.p, self.mode
        data_sink = mode != "none"
        graph = mode in ("data+graph", "data+graph+loop")
        sink = p.sink_size if mode == "data+graph+loop" else 1
        take: list[float] = []        # when the host took batch k from the queue
        ready: list[float] = []       # when batch k sat in the queue (prepared and copied)
        loader = 0.0
        for k in range(self.steps):
            if data_sink:
                # The worker prepares and copies batch k, then blocks until the queue (depth) has room:
                # its put finishes once the host has taken batch k - depth.
                self.add("loader", "prep", loader, loader + p.prep, k)
                self.add("loader", "copy", loader + p.prep, loader + p.prep + p.copy, k)
                done = loader + p.prep + p.copy
                put = done if k < p.depth else max(done, take[k - p.depth])
                if put > done:
                    self.add("loader", "wait", done, put, k)
                ready.append(done)
                loader = put
                self.wait_host_until(done, k)
                take.append(self.host)
                self.host_work("handoff", p.handoff, k)
            else:
                self.host_work("prep", p.prep, k)
                start = max(self.host, self.dev)    # a synchronous copy waits for the device's queue
                self.wait_host_until(start, k)
                self.add("host", "copy", start, start + p.copy, k)
                self.add("device", "copy", start, start + p.copy, k)
                self.host = self.dev = start + p.copy
            if graph:
                self.launch(p.graph_launch_cost, p.graph_compute_time, k)
            else:
                for _ in range(p.n_ops):
                    self.launch(p.launch, p.op, k)
            if (k + 1) % sink == 0 or k == self.steps - 1:
                self.sync(k)
        self.tl.total = self.host
        return self.tl


# port: js/sink.js simulate
def simulate(mode: str, params: SimParams, steps: int = 8) -> Timeline:
    """Simulate ``steps`` training steps in ``mode`` (one of :data:`SINK_MODES`) and return the timeline.

    The run always ends with a sync (the host reads the last loss), so ``total`` is the time until the host
    knows the result.

    >>> p = SimParams(prep=1.0, n_ops=4, launch=0.5, op=0.5, sync=0.0)
    >>> simulate("none", p, steps=2).step_time, simulate("data", p, steps=2).step_time
    (3.5, 3.0)
    """
    check_mode(mode)
    if not isinstance(params, SimParams):
        raise TypeError(f"params must be a SimParams; got {type(params).__name__}")
    return _Sim(mode, params, check_int("steps", steps)).run()


def simulate_all(params: SimParams, steps: int = 8) -> dict[str, Timeline]:
    """:func:`simulate` for every mode in :data:`SINK_MODES`, as ``{mode: Timeline}``.

    >>> tls = simulate_all(GPU_LIKE)
    >>> tls["data+graph+loop"].step_time < tls["none"].step_time
    True
    """
    return {m: simulate(m, params, steps) for m in SINK_MODES}


#: Illustrative GPU-like costs (seconds): tiny ops, launches that cost more than the ops, an expensive sync.
GPU_LIKE = SimParams(prep=200e-6, copy=40e-6, n_ops=60, launch=6e-6, op=4e-6, sync=60e-6, callback=30e-6,
                     graph_launch=15e-6, depth=2, sink_size=4, async_device=True)
#: Illustrative CPU-like costs: the host runs the ops itself (no asynchronous device), syncs are nearly free.
CPU_LIKE = replace(GPU_LIKE, copy=5e-6, sync=1e-6, async_device=False)


#: The kinds of event the simulator emits (bars of the Gantt chart), in the order a step meets them.
EVENT_KINDS = ("prep", "copy", "handoff", "launch", "compute", "wait", "sync", "callback")


# port: js/sink.js ganttBars
def gantt_bars(timeline: Timeline, max_bars: int = 3000) -> list[Event]:
    """The timeline's events, merged for drawing: touching bars of the same kind on a lane become one; if more
    than ``max_bars`` remain, neighbours closer than one pixel-ish (total / ``max_bars``) merge into a block
    labelled with the kind that fills most of it.

    >>> tl = simulate("data+graph+loop", SimParams(n_ops=3, launch=1.0, op=1.0, sink_size=2), steps=2)
    >>> [(e.lane, e.kind, e.start, e.end) for e in gantt_bars(tl) if e.lane == "device"]
    [('device', 'compute', 1.0, 7.0)]
    """
    check_int("max_bars", max_bars)
    out: list[Event] = []
    for lane in LANES:
        evs = sorted(timeline.lane_events(lane), key=lambda e: e.start)
        merged: list[Event] = []
        for e in evs:
            last = merged[-1] if merged else None
            if last is not None and last.kind == e.kind and e.start - last.end <= 1e-12 * max(1.0, e.end):
                merged[-1] = Event(lane, e.kind, last.start, e.end, last.step)
            else:
                merged.append(e)
        out.extend(merged)
    if len(out) <= max_bars:
        return out
    res = (timeline.total or 1.0) * len(LANES) / max_bars
    coarse: list[Event] = []
    for lane in LANES:
        block: list[Event] = []
        for e in (x for x in out if x.lane == lane):
            if e.duration >= res:            # wide enough to see: keep it as it is
                if block:
                    coarse.append(_block(block))
                    block = []
                coarse.append(e)
                continue
            if block and (e.start - block[-1].end > res or e.end - block[0].start > res):
                coarse.append(_block(block))
                block = []
            block.append(e)
        if block:
            coarse.append(_block(block))
    return coarse


def _block(events: list[Event]) -> Event:
    time_by_kind: dict[str, float] = {}
    for e in events:
        time_by_kind[e.kind] = time_by_kind.get(e.kind, 0.0) + e.duration
    kind = max(time_by_kind, key=time_by_kind.__getitem__)
    return Event(events[0].lane, kind, events[0].start, events[-1].end, events[0].step)


@dataclass(frozen=True)
class Summary:
    """The numbers the sink-timeline widget shows for one simulated mode (rendered by
    :func:`ampkit.widgets.sinking.summary_html`)."""

    mode: str
    step_time: float
    steps_per_s: float
    utilisation: float
    syncs_per_step: float
    speedup: float          # step time of "none" divided by this mode's


# port: js/sink.js summarise
def summarise(mode: str, params: SimParams, steps: int | None = None) -> tuple[Timeline, Summary]:
    """Simulate ``mode`` (and ``"none"`` for the speed-up) over ``steps`` steps (default: enough for two sinks,
    at least 8) and return the timeline with its :class:`Summary`.

    >>> tl, s = summarise("data", SimParams(prep=1.0, n_ops=2, op=1.0), steps=4)
    >>> s.step_time, round(s.speedup, 3), s.syncs_per_step   # 1 + 4 * 2 = 9 vs 4 * 3 = 12
    (2.25, 1.333, 1.0)
    """
    check_mode(mode)
    if steps is None:
        steps = max(8, 2 * params.sink_size)
    tl = simulate(mode, params, steps)
    base = tl if mode == "none" else simulate("none", params, steps)
    return tl, Summary(mode, tl.step_time, tl.steps_per_s, tl.utilisation, tl.syncs / steps,
                       base.total / tl.total if tl.total > 0 else float("inf"))
