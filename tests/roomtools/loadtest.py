"""The room's load test, its pure part: the statistics it reports (percentile, median, the largest K under the
latency limit) and its clean-up bookkeeping (``Cleanup``). Used by ``benchmarks/bench_hub.py``; it serves the room
(a JupyterHub on one machine, ``hub/README.md``) and no notebook of its own.

Standard library only. Outside the package (``tests/roomtools/``): the tests and the benchmarks use it.

>>> median([3.0, 1.0, 2.0]), percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90)
(2.0, 4.6)
"""
from __future__ import annotations

import signal


def percentile(values, q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("percentile of an empty list: no measurements")
    if not 0 <= q <= 100:
        raise ValueError(f"q={q}: expected a percentile from 0 to 100")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values) -> float:
    return percentile(values, 50)


def summary(values, digits: int = 1) -> dict:
    """``{"median", "p90", "max", "n"}`` of the measurements, rounded; nulls and n=0 when there are none (a run that
    measured nothing keeps the shape, never a made-up number).

    >>> summary([1.0, 2.0, 3.0])
    {'median': 2.0, 'p90': 2.8, 'max': 3.0, 'n': 3}
    """
    xs = [float(v) for v in values]
    if not xs:
        return {"median": None, "p90": None, "max": None, "n": 0}
    return {"median": round(median(xs), digits), "p90": round(percentile(xs, 90), digits),
            "max": round(max(xs), digits), "n": len(xs)}


def max_k_under(runs: list[dict], limit_ms: float = 200.0) -> int:
    """The largest K of the runs (``{"k", "ok", "update_ms": {"median"}}``) such that it and every smaller K ran
    without errors with a median slider update under ``limit_ms``; 0 when even the smallest does not."""
    best = 0
    for run in sorted(runs, key=lambda r: r["k"]):
        if not run.get("ok") or not run["update_ms"].get("n") or run["update_ms"]["median"] >= limit_ms:
            break
        best = run["k"]
    return best


class Cleanup:
    """A last-in-first-out list of clean-up steps, run once, every step even when one fails; SIGTERM and SIGHUP
    become ``KeyboardInterrupt`` inside ``with cleanup:`` (so Ctrl-C, a kill and an error all clean up).

    >>> done = []
    >>> with Cleanup() as cl:
    ...     cl.add(done.append, "servers"); cl.add(done.append, "accounts")
    >>> done
    ['accounts', 'servers']
    """

    def __init__(self):
        self._steps: list = []
        self.errors: list[str] = []
        self._old: dict = {}

    def add(self, fn, *args) -> None:
        self._steps.append((fn, args))

    def run(self) -> list[str]:
        while self._steps:
            fn, args = self._steps.pop()
            try:
                fn(*args)
            except BaseException as exc:   # noqa: BLE001 — every step runs, whatever the previous one raised
                self.errors.append(f"{getattr(fn, '__name__', fn)}: {exc!r}")
        return self.errors

    @staticmethod
    def _interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def __enter__(self):
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self._old[sig] = signal.signal(sig, self._interrupt)
        return self

    def __exit__(self, *exc):
        try:
            self.run()
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)
        return False
