"""Costs measured on this machine, real runs of the sink modes, and the simulator's predictions next to them
(notebook ``04_data_sinking``).

:class:`Calibration` holds the simulator's inputs as measured here (``SinkBench.calibrate`` fills it with
:func:`median_per_call`: the *median* of several repeats, the same statistic the real runs report) and turns them
into :class:`ampkit.timeline.SimParams`; :class:`ModeMeasurement` holds every run of one mode
(``SinkBench.measure``: interleaved rounds, the median run reported, every run kept); :func:`predict_vs_measured`
puts the simulator's prediction next to the measurements, in absolute time per step and as ratios to "no sinking",
with the error of each and, round by round, how much of that error is noise; :class:`RunCosts` splits a real
no-sink run's step time into the pieces the simulator adds up (``SinkBench.in_run_costs``); :func:`speedup` says a
measured ratio in words.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ampkit._util import sync
from ampkit.device import Ratio
from ampkit.i18n import tr
from ampkit.timeline import SimParams, simulate

__all__ = ["best_per_call", "median_per_call", "Calibration", "ModeMeasurement", "RunCosts", "predict_vs_measured",
           "speedup"]


def _per_call_times(fn: Callable[[], Any], calls: int, repeats: int, device: torch.device | str) -> list[float]:
    """``repeats`` timings of ``calls`` back-to-back calls, each per call (seconds), ``device`` synced around each."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1; got {repeats!r}")
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        times.append((time.perf_counter() - t0) / calls)
    return times


def best_per_call(fn: Callable[[], Any], calls: int, repeats: int, device: torch.device | str = "cpu") -> float:
    """Fastest of ``repeats`` timings of ``calls`` back-to-back calls, per call (seconds); ``device`` is synced
    before and after each timing, so queued device work is counted.

    >>> best_per_call(lambda: None, calls=10, repeats=2) >= 0
    True
    """
    return min(_per_call_times(fn, calls, repeats, device))


def median_per_call(fn: Callable[[], Any], calls: int, repeats: int, device: torch.device | str = "cpu") -> float:
    """Median of ``repeats`` timings of ``calls`` back-to-back calls, per call (seconds); ``device`` is synced before
    and after each timing. This is what :meth:`ampkit.sinking.SinkBench.calibrate` uses: the real runs it is compared
    with are reported as medians too, so the fastest repeat (:func:`best_per_call`) would bias every simulated time
    low.

    >>> median_per_call(lambda: None, calls=10, repeats=3) >= 0
    True
    """
    return statistics.median(_per_call_times(fn, calls, repeats, device))


@dataclass(frozen=True)
class Calibration:
    """Costs measured on this machine (seconds), the simulator's inputs.

    ``launch``: one tiny op (dispatch overhead); ``op``: average device time per op of the workload's eager step
    (``eager_step / n_ops - launch``); ``n_ops``: ATen ops per eager step (counted); ``sync``: reading one loss
    back (``stack(...).tolist()``); ``callback``: one LossMonitor call; ``copy``: moving one batch to the device
    (0 on CPU: the data already lives there); ``prep``: the loader's time per batch; ``eager_step`` /
    ``graph_step``: one step alone, eager and compiled (``None`` when the graph sink fell back);
    ``async_device``: whether the device runs behind the host (CUDA) or the host computes (CPU); ``handoff``: extra
    time per batch when batches come through a :class:`DevicePrefetcher` (thread wake-ups, passing Python's GIL).

    >>> cal = Calibration("cpu", 1e-6, 1e-6, 10, 0.0, 0.0, 0.0, 0.0, 2e-5, 5e-6, 1.0, "", False)
    >>> p = cal.params(sink_size=4)      # the compiled step alone, less one launch, is the graph's compute
    >>> p.n_ops, p.sink_size, round(p.graph_compute * 1e6, 6)
    (10, 4, 4.0)
    """

    device: str
    launch: float
    op: float
    n_ops: int
    sync: float
    callback: float
    copy: float
    prep: float
    eager_step: float
    graph_step: float | None
    compile_seconds: float | None
    graph_message: str
    async_device: bool
    handoff: float = 0.0

    def params(self, sink_size: int = 8, depth: int = 2) -> SimParams:
        """The :class:`ampkit.timeline.SimParams` for these costs."""
        graph_compute = None if self.graph_step is None else max(self.graph_step - self.launch, 0.0)
        return SimParams(prep=self.prep, copy=self.copy, n_ops=self.n_ops, launch=self.launch, op=self.op,
                         sync=self.sync, callback=self.callback, handoff=self.handoff, graph_launch=self.launch,
                         graph_compute=graph_compute, depth=depth, sink_size=sink_size,
                         async_device=self.async_device)

    def lines(self) -> list[str]:
        """The costs as aligned text lines, in µs."""
        us = 1e6
        out = [tr("device: {device}", device=self.device),
               tr("launch (dispatch) per op: {t:7.2f} µs", t=self.launch * us),
               tr("compute per op (avg):     {t:7.2f} µs   over {n} ops per eager step", t=self.op * us, n=self.n_ops),
               tr("sync (read losses back):  {t:7.2f} µs", t=self.sync * us),
               tr("callback (LossMonitor):   {t:7.2f} µs", t=self.callback * us),
               tr("copy of one batch:        {t:7.2f} µs", t=self.copy * us),
               tr("data prep per batch:      {t:7.2f} µs", t=self.prep * us),
               tr("data sink handoff/batch:  {t:7.2f} µs", t=self.handoff * us),
               tr("eager step alone:         {t:7.2f} µs", t=self.eager_step * us)]
        if self.graph_step is not None:
            out.append(tr("compiled step alone:      {t:7.2f} µs   (compile: {s:.1f} s)", t=self.graph_step * us,
                          s=self.compile_seconds))
        else:
            out.append(tr("compiled step: n/a ({why})", why=self.graph_message))
        return out


@dataclass(frozen=True)
class ModeMeasurement:
    """Real runs of one mode: the median run's seconds per step, steps, host syncs and the time the loop waited for
    data (``data_wait``: seconds spent blocked on the data sink's queue over the whole run; 0 without a data sink,
    where the loader runs inside the step), and ``runs``: every run's seconds per step, in the order they ran."""

    mode: str
    step_time: float
    steps: int
    syncs: int
    data_wait: float
    runs: tuple[float, ...] = ()

    @property
    def spread(self) -> tuple[float, float]:
        """(fastest, slowest) seconds per step over the runs."""
        runs = self.runs or (self.step_time,)
        return min(runs), max(runs)


@dataclass(frozen=True)
class RunCosts:
    """Where the time of a real no-sink run goes, per step (seconds; ``SinkBench.in_run_costs``), next to what the
    simulator assumes. Timed *inside* the run: ``prep`` (taking the next batch from the loader), ``step`` (the
    training step) and ``rest`` (everything else the loop does per step: reading the loss back, the callback, the
    loop's own bookkeeping), adding up to ``total``. ``step_alone`` is the same step timed back to back and
    ``step_after_pause`` the step timed right after the thread slept as long as the loader does (both medians):
    their difference shows what waiting for the loader does to the next step on this machine.

    >>> c = RunCosts(total=10.0, prep=4.0, step=5.0, rest=1.0, step_alone=4.5, step_after_pause=5.0, steps=16)
    >>> c.prep + c.step + c.rest == c.total
    True
    """

    total: float
    prep: float
    step: float
    rest: float
    step_alone: float
    step_after_pause: float
    steps: int

    def differences(self, calibration: Calibration) -> dict[str, float]:
        """Inside the run minus the calibration, per piece (seconds per step): ``prep``, ``step`` and ``rest``
        (the calibration's ``sync + callback``). On a device the host waits for (``async_device`` False: the CPU)
        they add up to the run's total minus the simulator's "none" step time, which is then the sum
        ``prep + copy + eager step + sync + callback``; on an asynchronous device (CUDA) the simulator overlaps host
        and device, and its step is shorter than that sum."""
        return {"prep": self.prep - calibration.prep - calibration.copy,
                "step": self.step - calibration.n_ops * (calibration.launch + calibration.op),
                "rest": self.rest - calibration.sync - calibration.callback}


def predict_vs_measured(calibration: Calibration, measured: dict[str, ModeMeasurement], sink_size: int = 8,
                        depth: int = 2) -> list[dict[str, Any]]:
    """One row per measured mode: measured and predicted seconds per step (``measured``, ``predicted``) with the
    relative error of the absolute prediction (``abs_error`` = predicted / measured - 1: negative when the simulator
    is too fast), and both times as ratios to mode ``"none"`` (the speed-up a learner cares about) with the relative
    error of the predicted ratio (``error``). A ratio hides an error that every mode shares (a simulator 15 % fast in
    every mode predicts every ratio right), so show both. With per-run times (``ModeMeasurement.runs``, interleaved
    rounds) a row also has ``abs_error_range``, ``measured_ratio_range`` and ``error_range``: the same numbers run
    by run, (lowest, highest) — how much of each error is measurement noise.

    >>> cal = Calibration("cpu", 1e-6, 1e-6, 10, 0.0, 0.0, 0.0, 0.0, 2e-5, 5e-6, 1.0, "", False)
    >>> rows = predict_vs_measured(cal, {"none": ModeMeasurement("none", 2.5e-5, 100, 100, 0.0)})
    >>> round(rows[0]["error"], 3), round(rows[0]["abs_error"], 3)     # predicted 20 µs, measured 25 µs
    (0.0, -0.2)
    """
    params = calibration.params(sink_size=sink_size, depth=depth)
    rows = []
    base_steps = measured["none"].steps if "none" in measured else 16
    base_pred = simulate("none", params, base_steps).step_time
    base_meas = measured["none"].step_time if "none" in measured else None
    for mode, m in measured.items():
        if mode in ("data+graph", "data+graph+loop") and calibration.graph_step is None:
            pred = simulate("data", params, m.steps).step_time  # the graph sink fell back to eager
        else:
            pred = simulate(mode, params, m.steps).step_time
        row: dict[str, Any] = {"mode": mode, "measured": m.step_time, "predicted": pred,
                               "abs_error": pred / m.step_time - 1.0}
        if m.runs:
            row["abs_error_range"] = (pred / max(m.runs) - 1.0, pred / min(m.runs) - 1.0)
        if base_meas:
            row["measured_ratio"] = m.step_time / base_meas
            row["predicted_ratio"] = pred / base_pred
            row["error"] = row["predicted_ratio"] / row["measured_ratio"] - 1.0
            ratios = [a / b for a, b in zip(m.runs, measured["none"].runs)]
            if ratios:
                row["measured_ratio_range"] = (min(ratios), max(ratios))
                row["error_range"] = (row["predicted_ratio"] / max(ratios) - 1.0,
                                      row["predicted_ratio"] / min(ratios) - 1.0)
        rows.append(row)
    return rows


def speedup(measured: dict[str, ModeMeasurement], mode: str, reference: str = "none") -> Ratio:
    """How much faster ``mode`` ran than ``reference``, round by round (the rounds interleave the modes, so round r
    of both ran under the same conditions): an :class:`ampkit.device.Ratio` (median, lowest, highest, rounds) whose
    ``phrase()`` says it in words ("1.6x faster than ...").

    >>> m = {"none": ModeMeasurement("none", 4.0, 8, 8, 0.0, (4.0, 6.0, 4.0)),
    ...      "data": ModeMeasurement("data", 2.0, 8, 8, 0.0, (2.0, 2.0, 4.0))}
    >>> speedup(m, "data").phrase("no sinking")
    '2.0x faster than no sinking (median of 3 repeats; range 1.0-3.0x faster)'
    """
    for name in (mode, reference):
        if name not in measured:
            raise ValueError(f"no measurement of mode {name!r}; measured: {', '.join(map(repr, measured))}")
    a, b = measured[reference], measured[mode]
    pairs = list(zip(a.runs, b.runs)) or [(a.step_time, b.step_time)]
    ratios = sorted(x / y for x, y in pairs)
    return Ratio(ratios[(len(ratios) - 1) // 2], ratios[0], ratios[-1], len(ratios))
