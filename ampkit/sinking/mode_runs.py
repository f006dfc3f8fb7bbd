"""Notebook ``04_data_sinking``'s bench: the lesson's workload run in the four modes on this machine.

:class:`SinkBench` builds the workload (:class:`~ampkit.sinking.workload.ManySmallOps` trained with MSE and SGD on a
:class:`~ampkit.sinking.workload.BatchLoader`), measures the simulator's inputs (:meth:`SinkBench.calibrate`), times
real runs of each mode (:meth:`SinkBench.measure`) and compares them
(:func:`ampkit.sinking.measure.predict_vs_measured`).
:func:`calibrate` and :func:`measure_modes` do one of those with a fresh bench; :func:`warm_compile_cache` compiles its
graph-sink step once so the workshop does not wait for ``torch.compile`` (``python -m ampkit warmup``).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from ampkit._util import check_int, sync
from ampkit.device import pick_device
from ampkit.sinking.cache import compile_cache_dir
from ampkit.sinking.compile import compile_unavailable_reason
from ampkit.sinking.loop import LossMonitor, SinkInfo, endless, loop_sink
from ampkit.sinking.measure import Calibration, ModeMeasurement, RunCosts, median_per_call, predict_vs_measured
from ampkit.sinking.prefetch import DevicePrefetcher
from ampkit.sinking.trainer import SinkModel
from ampkit.sinking.workload import BatchLoader, ManySmallOps, count_ops
from ampkit.timeline import SINK_MODES, check_mode

__all__ = ["SinkBench", "calibrate", "measure_modes", "warm_compile_cache"]

_GRAPH_MODES = ("data+graph", "data+graph+loop")


class SinkBench:
    """The sinking lesson's workload on this machine: :class:`ManySmallOps` trained with MSE and SGD on batches
    from a :class:`BatchLoader` that spends ``prep_seconds`` per batch. :meth:`calibrate` measures the simulator's
    inputs, :meth:`measure` times the four real modes, :meth:`compare` puts predictions next to measurements.

    Two identical networks (same seed) are kept: one eager, one with the graph sink, so that compiling happens
    once per bench.

    >>> bench = SinkBench(prep_seconds=0.0, compile=False, n_samples=64)
    >>> bench.measure(steps=4, modes=("none",))["none"].steps
    4
    """

    def __init__(self, *, width: int = 64, depth: int = 12, batch_size: int = 32, n_samples: int = 2048,
                 prep_seconds: float = 4e-4, lr: float = 0.05, device: str | torch.device | None = None,
                 compile: bool = True, seed: int = 0):
        self.device = pick_device(device)
        self.prep_seconds = float(prep_seconds)
        g = torch.Generator().manual_seed(seed)
        X = torch.randn(n_samples, width, generator=g)
        Y = torch.tanh(0.5 * X + 0.1 * torch.randn(n_samples, width, generator=g))
        self.loader = BatchLoader(X, Y, batch_size, seed=seed, prep_seconds=self.prep_seconds)
        self.models: dict[bool, SinkModel] = {}
        for graph in (False, True):
            net = ManySmallOps(width, depth, seed=seed).to(self.device)
            opt = torch.optim.SGD(net.parameters(), lr=lr, foreach=True)
            self.models[graph] = SinkModel(net, nn.functional.mse_loss, opt, graph_sink=graph and compile)
        self.sample = tuple(t.to(self.device) for t in next(iter(BatchLoader(X, Y, batch_size, shuffle=False))))
        self._warm = {False: False, True: False}

    def _warmup(self, graph: bool) -> None:
        if not self._warm[graph]:
            for _ in range(5):
                self.models[graph].step(*self.sample)
            sync(self.device)
            self._warm[graph] = True

    @property
    def compiled(self) -> bool:
        """Whether the graph-sink model really runs compiled (compiling it now if it has not run yet)."""
        self._warmup(True)
        return self.models[True].loss_graph.compiled

    def calibrate(self, repeats: int = 10) -> Calibration:
        """Measure the simulator's inputs on this machine (about a second, plus the first compile): each cost is
        the median of ``repeats`` timings (:func:`~ampkit.sinking.measure.median_per_call`), the statistic
        :meth:`measure` reports for the real runs."""
        dev, cpu = self.device, torch.device("cpu")
        tiny = torch.ones(1, device=dev)
        launch = median_per_call(lambda: torch.tanh(tiny), 200, repeats, dev)
        self._warmup(False)
        self._warmup(True)
        x, y = self.sample
        eager_step = median_per_call(lambda: self.models[False].step(x, y), 20, repeats, dev)
        graph_model = self.models[True]
        graph_step = median_per_call(lambda: graph_model.step(x, y), 20, repeats, dev) \
            if graph_model.loss_graph.compiled else None
        n_ops = count_ops(self.models[False].step, x, y)
        op = max(eager_step / n_ops - launch, 0.0)
        losses = [self.models[False].step(x, y)]
        sync_cost = median_per_call(lambda: torch.stack(losses).float().tolist(), 200, repeats, dev)
        mon, info = LossMonitor(), SinkInfo(1, 1, 1, (0.5,))
        callback = median_per_call(lambda: mon(info), 500, repeats, dev)
        if dev.type == "cpu":
            copy = 0.0
        else:
            host = tuple(t.cpu() for t in self.sample)
            copy = median_per_call(lambda: [t.to(dev) for t in host], 20, repeats, dev)
        it = endless(self.loader)
        prep = median_per_call(lambda: next(it), 4, repeats, cpu)
        it.close()
        batches = [self.sample] * 32
        plain = median_per_call(lambda: [b for b in batches], 1, repeats, cpu) / len(batches)
        through = median_per_call(lambda: [b for b in DevicePrefetcher(batches, dev, 2)], 1, repeats, dev) \
            / len(batches)
        handoff = max(through - plain, 0.0)
        return Calibration(str(dev), launch, op, n_ops, sync_cost, callback, copy, prep, eager_step, graph_step,
                           graph_model.loss_graph.compile_seconds, graph_model.graph_message,
                           async_device=dev.type == "cuda", handoff=handoff)

    def measure(self, steps: int = 16, sink_size: int = 8, modes: Sequence[str] = SINK_MODES, depth: int = 2,
                rounds: int = 6) -> dict[str, ModeMeasurement]:
        """Time short runs of ``steps`` real training steps in each mode, ``rounds`` times interleaved; each mode's
        result is its median run (the lower median for an even count) with every run's time in ``runs``. One
        LossMonitor callback; the loss is read back every step except in loop-sink mode (once per ``sink_size``
        steps)."""
        for mode in modes:
            check_mode(mode)
        rounds = check_int("rounds", rounds)
        runs: dict[str, list[ModeMeasurement]] = {mode: [] for mode in modes}
        for _ in range(rounds):
            for mode in modes:
                graph = mode in _GRAPH_MODES
                self._warmup(graph)
                model = self.models[graph]
                for _ in range(2):              # warm this model's caches after the other mode's run
                    model.step(*self.sample)
                if mode == "data+graph+loop":
                    log = loop_sink(model.step, self.loader, max(1, steps // sink_size), sink_size, [LossMonitor()],
                                    prefetch_depth=depth, device=self.device)
                else:
                    log = loop_sink(model.step, _Take(self.loader, steps), 1, None, [LossMonitor()],
                                    prefetch_depth=0 if mode == "none" else depth, device=self.device)
                runs[mode].append(ModeMeasurement(mode, log.seconds / log.steps, log.steps, log.syncs,
                                                  log.data_wait_seconds))
        out = {}
        for mode, ms in runs.items():
            median = sorted(ms, key=lambda m: m.step_time)[(len(ms) - 1) // 2]
            out[mode] = replace(median, runs=tuple(m.step_time for m in ms))
        return out

    def in_run_costs(self, steps: int = 16, rounds: int = 3, pause_repeats: int = 21) -> RunCosts:
        """Time the pieces of real no-sink runs from inside (the loop is :func:`loop_sink`, as in :meth:`measure`):
        how long taking each batch from the loader and each training step took, and the rest of each step; the
        median run of ``rounds``. Then the same eager step back to back and right after a pause as long as the
        loader's (``prep_seconds``), ``pause_repeats`` times each (medians). See :class:`RunCosts`."""
        steps, rounds = check_int("steps", steps), check_int("rounds", rounds)
        pause_repeats = check_int("pause_repeats", pause_repeats)
        self._warmup(False)
        model, x, y = self.models[False], *self.sample
        runs = []
        for _ in range(rounds):
            for _ in range(2):
                model.step(x, y)
            step_times: list[float] = []
            data = _Timed(_Take(self.loader, steps))

            def timed_step(*batch, _times=step_times):
                t0 = time.perf_counter()
                loss = model.step(*batch)
                _times.append(time.perf_counter() - t0)
                return loss

            log = loop_sink(timed_step, data, 1, None, [LossMonitor()], device=self.device)
            total = log.seconds / log.steps
            prep, step = sum(data.times) / log.steps, sum(step_times) / log.steps
            runs.append((total, prep, step, total - prep - step))
        total, prep, step, rest = sorted(runs)[(len(runs) - 1) // 2]

        def step_time(pause: float) -> float:
            times = []
            for _ in range(pause_repeats):
                if pause:
                    time.sleep(pause)
                t0 = time.perf_counter()
                model.step(x, y)
                sync(self.device)
                times.append(time.perf_counter() - t0)
            return sorted(times)[(len(times) - 1) // 2]

        return RunCosts(total, prep, step, rest, step_time(0.0), step_time(self.prep_seconds), steps)

    def compare(self, calibration: Calibration, measured: dict[str, ModeMeasurement], sink_size: int = 8,
                depth: int = 2) -> list[dict[str, Any]]:
        """See :func:`ampkit.sinking.measure.predict_vs_measured`."""
        return predict_vs_measured(calibration, measured, sink_size, depth)


class _Timed:
    """A re-iterable that records how long each ``next()`` of ``data`` took (``times``, seconds)."""

    def __init__(self, data: Iterable):
        self.data = data
        self.times: list[float] = []

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator:
        it = iter(self.data)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            self.times.append(time.perf_counter() - t0)
            yield batch


class _Take:
    """The first ``n`` batches of a (re-iterable) loader, as a re-iterable."""

    def __init__(self, loader: Iterable, n: int):
        self.loader, self.n = loader, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator:
        it = iter(self.loader)
        for _ in range(self.n):
            try:
                yield next(it)
            except StopIteration:
                it = iter(self.loader)
                yield next(it)


def calibrate(**bench_kwargs: Any) -> Calibration:
    """Measure the simulator's inputs on this machine with a fresh :class:`SinkBench` (keywords go to it).

    >>> calibrate(compile=False, n_samples=64).n_ops > 10
    True
    """
    return SinkBench(**bench_kwargs).calibrate()


def measure_modes(steps: int = 16, sink_size: int = 8, **bench_kwargs: Any) -> dict[str, ModeMeasurement]:
    """Time the four modes for real with a fresh :class:`SinkBench` (keywords go to it).

    >>> sorted(measure_modes(steps=4, sink_size=2, compile=False, n_samples=64, prep_seconds=0.0))
    ['data', 'data+graph', 'data+graph+loop', 'none']
    """
    return SinkBench(**bench_kwargs).measure(steps, sink_size)


def warm_compile_cache(**bench_kwargs: Any) -> tuple[bool, float, str]:
    """Compile notebook 04's graph-sink step once so the kit's compile cache is warm before a workshop.

    ``make lab`` / ``make test`` run it after installing (``python -m ampkit warmup``). Measured on a 2-core CPU
    (torch 2.13): 13.6 s and 16.4 s from an empty cache, 3.7-4.1 s with the cache warm. The compile goes through
    :func:`ampkit.sinking.cache.kit_compile_cache`, the same folder notebook 04's compiles use. Returns
    (compiled, seconds, note); the note says whether the cache was empty before (a cold compile) and never raises for
    a missing compiler — it says why compiling is unavailable.

    >>> compiled, seconds, note = warm_compile_cache()
    >>> compiled or "eager" in note
    True
    """
    fxgraph = compile_cache_dir() / "fxgraph"
    was_cold = not (fxgraph.is_dir() and any(fxgraph.iterdir()))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as notebook 04 runs it
    t0 = time.perf_counter()
    try:
        bench = SinkBench(prep_seconds=0.0, **bench_kwargs)
        compiled = bench.compiled
        reason = None if compiled else (compile_unavailable_reason(bench.device) or "compile failed")
    except Exception as exc:  # a broken toolchain must not break installation
        compiled, reason = False, f"{type(exc).__name__}: {exc}"
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - t0
    note = (f"compile cache warm in {compile_cache_dir()}, "
            f"{'empty before: a cold compile' if was_cold else 'which already held kernels'}" if compiled
            else f"torch.compile unavailable here ({reason}); notebook 04's graph sink runs eager")
    return compiled, seconds, note
