"""Notebook 04_data_sinking's exercises: the losses LossMonitor prints per sink, a step's time with and without
sinking when the loader is slow, a graph sink's bound when compute dominates, and syncing every step vs a loop sink.

State from the notebook: ``data`` (section 4's data set of 5 tagged batches). See :mod:`ampkit.exercises`.
"""
from __future__ import annotations

from typing import Any

from ampkit.i18n import mark, tr
from ampkit.sinking import loop_sink
from ampkit.timeline import SimParams, simulate

EX1_EPOCHS, EX1_SINK = 3, 4
P2 = SimParams(prep=400e-6, n_ops=100, launch=2e-6, op=1e-6, graph_launch=2e-6, async_device=False)
P3 = SimParams(n_ops=200, launch=5e-6, op=20e-6, graph_launch=15e-6, async_device=False)
P4 = SimParams(graph_launch=10e-6, graph_compute=100e-6, sync=50e-6, sink_size=4, async_device=True)
TOLERANCE = {3: {"abs_tol": 0.006}}

HINT_1 = mark("with sink_size > 0 each 'epoch' is 4 steps and the data is NOT restarted at each epoch: the second "
              "sink continues where the first stopped and wraps round after batch 4. Write down the 12 batches in "
              "order.")
HINT_2 = mark("without a sink the host prepares the batch, then runs the step: the two add up. With a data sink the "
              "worker prepares the next batch while the host runs this step, so the slower of the two sets the pace "
              "— and a faster step cannot take a batch the loader has not finished.")
HINT_3 = mark("a graph sink removes launches, not compute: the 200 x 20 µs of compute are still there. Compare "
              "200 x (5 + 20) µs with 15 + 200 x 20 µs.")
HINT_4 = mark("a sync costs more than its 50 µs: while the host launches and reads back, the device idles. Inside a "
              "sink the host launches the next step while the device still computes this one, so the device idles "
              "only for the sink's first launch and its one read-back. Spreading the 50 µs over 4 steps is not "
              "enough.")


def _steady_us(mode: str, params: SimParams) -> float:
    """Simulated time per step once the run is under way, in µs: (40 steps - 20 steps) / 20."""
    return (simulate(mode, params, steps=40).total - simulate(mode, params, steps=20).total) / 20 * 1e6


def expected_1(data: Any) -> tuple[float, ...]:
    """The engine: loop_sink run with a step whose loss is the batch's tag; each sink's last loss."""
    return tuple(s.loss for s in loop_sink(lambda x, tag: x.sum(), data, epochs=EX1_EPOCHS,
                                           sink_size=EX1_SINK).sinks)


def solution_1(data: Any) -> tuple[float, ...]:
    order = [i % len(data) for i in range(EX1_EPOCHS * EX1_SINK)]
    sinks = [order[k:k + EX1_SINK] for k in range(0, len(order), EX1_SINK)]
    printed = tuple(float(s[-1]) for s in sinks)
    print(tr("the data iterated endlessly, {n} steps per sink: batches per sink {sinks} -> LossMonitor prints each "
             "sink's last loss (a batch's loss is its tag): {printed}", n=EX1_SINK, sinks=sinks, printed=printed))
    return printed


def expected_2() -> tuple[int, ...]:
    """The engine: the timeline simulator, per mode."""
    return tuple(round(_steady_us(mode, P2)) for mode in ("none", "data", "data+graph"))


def solution_2() -> tuple[int, ...]:
    prep, eager = P2.prep * 1e6, P2.n_ops * (P2.launch + P2.op) * 1e6
    graph = (P2.graph_launch_cost + P2.graph_compute_time) * 1e6
    reasoned = (round(prep + eager), round(max(prep, eager)), round(max(prep, graph)))
    print(tr("loader {prep:.0f} µs, eager step {eager:.0f} µs, compiled step {graph:.0f} µs: without a sink they add "
             "up, with a data sink the slower sets the pace: {reasoned}", prep=prep, eager=eager, graph=graph,
             reasoned=reasoned))
    return reasoned


def expected_3() -> float:
    """The engine: the simulator's data sink over its data + graph sink."""
    return _steady_us("data", P3) / _steady_us("data+graph", P3)


def solution_3() -> float:
    eager = P3.n_ops * (P3.launch + P3.op)
    graph = P3.graph_launch_cost + P3.n_ops * P3.op
    print(tr("eager {eager:.0f} µs, graph {graph:.0f} µs (one launch, the same compute): {ratio:.4f}x faster",
             eager=eager * 1e6, graph=graph * 1e6, ratio=eager / graph))
    return eager / graph


def expected_4() -> tuple[int, int]:
    """The engine: the simulator, syncing every step and with a loop sink."""
    return round(_steady_us("data+graph", P4)), round(_steady_us("data+graph+loop", P4))


def solution_4() -> tuple[int, int]:
    launch, compute, sync = P4.graph_launch_cost * 1e6, P4.graph_compute_time * 1e6, P4.sync * 1e6
    every = launch + compute + sync
    sunk = (launch + P4.sink_size * compute + sync) / P4.sink_size
    print(tr("sync every step: nothing overlaps, {every:.1f} µs | a sink of {n}: the launches hide behind compute, "
             "{sunk:.1f} µs", every=every, n=P4.sink_size, sunk=sunk))
    return round(every), round(sunk)
