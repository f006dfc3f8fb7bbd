"""Notebook 01_fp16_range's exercises: what fp16 stores for 1000.3, the smallest scale that makes 90 % of the
nonzero gradients normal, where an e4m3 running total gets stuck, and the largest fp16 input whose exp is finite.

State from the notebook: ``grads`` (the trained model's gradients after step 60). See :mod:`ampkit.exercises`.
"""
from __future__ import annotations

import math

import torch

from ampkit.formats import accumulate, classify, info, round_trip, ulp
from ampkit.i18n import mark, tr

EX1_VALUE = 1000.3
EX2_SHARE = 0.9
EX3_STEPS = 100
TOLERANCE = {4: {"abs_tol": 2**-9}}

HINT_1 = mark("not 1000.3 (fp16 has no such number) and not 1000 (that rounds to a whole number): between 512 "
              "and 1024 fp16's ulp is 2^(9-10) = 0.5, so round 1000.3 to the nearest multiple of 0.5.")
HINT_2 = mark("the table above counts the gradients that are exactly 0 too, and no scale makes them normal: its "
              "percentages are too low for this question. Print normal_share(2.0**k) for k = 0, 1, 2, ...: "
              "the first k that reaches 0.9 is the answer.")
HINT_3 = mark("it gets stuck once the gap between neighbouring numbers reaches 2 (then total + 1 is a tie and rounds "
              "back to the even neighbour). With m stored mantissa bits that happens at 2^(m+1): fp16 (m = 10) "
              "stops at 2^11 = 2048.")
HINT_4 = mark("exp(x) turns inf once it reaches 65520, where rounding goes to inf (not 65504), so x < ln(65520) "
              "≈ 11.0901. And x must itself be an fp16 number: between 8 and 16 they are 2^(3-10) = 1/128 apart. "
              "Take the largest multiple of 1/128 below 11.0901 (not 11: 11 is finite but not the largest).")


def expected_1() -> float:
    """The engine: torch's cast of 1000.3 to fp16 and back."""
    return round_trip(EX1_VALUE, "fp16")


def solution_1() -> float:
    _, exponent = math.frexp(EX1_VALUE)
    gap = 2.0 ** (exponent - 1 - info("fp16").mantissa_bits)
    nearest = round(EX1_VALUE / gap) * gap
    print(tr("ulp between 512 and 1024: 2**({e} - {m}) = {gap}; the nearest multiple of it: {nearest}",
             e=exponent - 1, m=info("fp16").mantissa_bits, gap=gap, nearest=nearest))
    return nearest


def expected_2(grads: torch.Tensor) -> float:
    """The engine: ``classify`` at each power-of-two scale; the first whose normal share of nonzeros reaches 90 %."""
    def share(scale: float) -> float:
        c = classify(grads * scale, "fp16")
        return c.normal / (1 - c.zero)

    return next(2.0**k for k in range(40) if share(2.0**k) >= EX2_SHARE)


def solution_2(grads: torch.Tensor) -> float:
    nonzero = grads[grads != 0].abs()
    h16 = info("fp16")
    share = {k: ((nonzero * 2.0**k >= h16.normal_threshold) & (nonzero * 2.0**k < h16.overflow_threshold))
             .double().mean().item() for k in range(20)}
    k = min(k for k, s in share.items() if s >= EX2_SHARE)
    print(tr("normal share of the nonzero gradients (counted against 2**-14 and 65520): 2^{below}: {a:.1%}, 2^{k}: "
             "{b:.1%} -> S = {s:g}", below=k - 1, a=share[k - 1], k=k, b=share[k], s=2.0**k))
    return 2.0**k


def expected_3() -> float:
    """The engine: a running total in e4m3, 1 added 100 times."""
    return accumulate([1.0] * EX3_STEPS, "e4m3")[-1].item()


def solution_3() -> float:
    m = info("e4m3").mantissa_bits
    stuck = 2.0 ** (m + 1)
    print(tr("e4m3 has m = {m} stored mantissa bits: from 2^{e} up its numbers are 2 apart, so total + 1 is a tie "
             "and rounds back to the even neighbour: stuck at {stuck:g}; the next e4m3 number up is {up:g}", m=m,
             e=m + 1, stuck=stuck, up=stuck + ulp(stuck, "e4m3")))
    return stuck


def expected_4() -> float:
    """The engine: every finite non-negative fp16 number, exp'd in fp16; the largest whose exp is finite."""
    every = torch.arange(0, 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16)
    every = every[torch.isfinite(every)]
    return every[torch.isfinite(torch.exp(every))].max().item()


def solution_4() -> float:
    limit = math.log(info("fp16").overflow_threshold)
    step = float(ulp(limit, "fp16"))
    x = math.ceil(limit / step) * step - step
    print(tr("ln(65520) = {limit:.4f}; fp16's step there is {step}; the largest fp16 number below it: {x} (exp = "
             "{e:.0f})", limit=limit, step=step, x=x, e=math.exp(x)))
    return x
