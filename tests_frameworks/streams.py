"""Random overflow streams for the cross-checks against the real MindSpore and Paddle (``make test-frameworks``).

A stream is a list of booleans (True: that step's gradients overflowed) drawn with a seeded ``random.Random``:
runs of clean steps and runs of overflows of random lengths, so that windows of clean steps complete, overflows
come in a row (Paddle's ``decr_every_n_nan_or_inf``) and are separated by single clean steps (its counter reset),
and long overflow runs push a scale to its floor (MindSpore's 1). The settings each test draws alongside include
factors that are not powers of two (3, 5, 1.5, 0.3), whose float32 arithmetic is where a rule written in float64
would drift.

>>> s = stream(random.Random(0), 40); len(s), set(s) <= {True, False}
(40, True)
"""
from __future__ import annotations

import random

N_STREAMS = 24          # >= 20 a scaler, as issue 33 asks


def stream(rng: random.Random, n: int) -> list[bool]:
    """``n`` steps: alternating runs, clean runs of 1..8 steps, overflow runs of 1..4 (one run in six of 10..40:
    down to the floor)."""
    out: list[bool] = []
    overflow = rng.random() < 0.3
    while len(out) < n:
        if overflow:
            k = rng.randint(10, 40) if rng.random() < 1 / 6 else rng.randint(1, 4)
        else:
            k = rng.randint(1, 8)
        out.extend([overflow] * k)
        overflow = not overflow
    return out[:n]


def seeds() -> list[int]:
    """One seed per stream (pytest parametrizes over them: a failing stream names its seed)."""
    return list(range(N_STREAMS))
