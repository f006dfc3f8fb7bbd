"""Timing for the bench scripts: callables run in turn, round after round, so that each sees the same load.

On a shared machine a run's speed drifts by tens of percent; timing A for a while and then B measures the drift as
much as the difference. ``interleaved`` runs one call of each (or ``inner`` calls, for very short ones) per round
and keeps every round's seconds per call; a :class:`Timing` gives the median and the spread of those samples, and
``paired_ratio`` the median of the per-round ratios (the two calls of a round ran back to back).

The bench scripts import it as ``from _timing import ...``: they run as ``python benchmarks/bench_x.py`` (``make
bench``), which puts this folder first on ``sys.path``.

>>> t = interleaved({"a": lambda: None, "b": lambda: None}, rounds=5)
>>> sorted(t), len(t["a"].samples), t["a"].min <= t["a"].median <= t["a"].max
(['a', 'b'], 5, True)
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Timing", "interleaved", "paired_ratio", "time_one"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one callable, one sample per round, in the order they were taken."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        """The middle sample: the figure the bench scripts report (an outlier round moves it little)."""
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        """The fastest round: nearest to what the machine does with nothing else running."""
        return min(self.samples)

    def percentile(self, q: float) -> float:
        """The sample at fraction ``q`` (0 to 1) of the sorted samples (nearest rank below, no interpolation)."""
        if not 0 <= q <= 1:
            raise ValueError(f"q is a fraction between 0 and 1; got {q!r}")
        ordered = sorted(self.samples)
        return ordered[int(q * (len(ordered) - 1))]

    @property
    def spread(self) -> float:
        """The 90th minus the 10th percentile: how much the middle 80 % of the rounds differ."""
        return self.percentile(0.9) - self.percentile(0.1)

    @property
    def max(self) -> float:
        """The slowest round (a warm-up the rounds did not absorb, or a burst of load)."""
        return max(self.samples)


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, *, warmup: int = 2,
                inner: int = 1) -> dict[str, Timing]:
    """Call each of ``fns`` ``warmup`` times, then ``rounds`` rounds of each in turn (``inner`` calls per sample)."""
    if not fns:
        raise ValueError("interleaved needs at least one callable to time")
    for name, value in (("rounds", rounds), ("inner", inner), ("warmup", warmup)):
        if not isinstance(value, int) or value < (0 if name == "warmup" else 1):
            raise ValueError(f"{name} must be an int >= {0 if name == 'warmup' else 1}; got {value!r}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times[k].append((time.perf_counter() - t0) / inner)
    return {k: Timing(tuple(v)) for k, v in times.items()}


def time_one(fn: Callable[[], object], rounds: int, *, warmup: int = 1, inner: int = 1) -> Timing:
    """One callable's :class:`Timing` (``interleaved`` with nothing beside it)."""
    return interleaved({"fn": fn}, rounds, warmup=warmup, inner=inner)["fn"]


def paired_ratio(a: Timing, b: Timing) -> float:
    """Median over rounds of a_i / b_i: each pair ran back to back, so both saw the same load."""
    if len(a.samples) != len(b.samples):
        raise ValueError(f"paired_ratio needs timings of the same rounds; got {len(a.samples)} and {len(b.samples)}")
    return statistics.median(x / y for x, y in zip(a.samples, b.samples))
