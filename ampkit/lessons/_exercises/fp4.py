"""Notebook 10_fp4's exercises: what E2M1 stores for 3.5 and 5.0, whether a block of amax 14 saturates under the OCP
floor rule, the E4M3 scale of a block whose amax is a quarter of the tensor's, and which gradient the Hadamard transform
helps. State from the notebook: none. See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math

import torch

from ampkit.formats import round_trip
from ampkit.formats.e2m1 import E2M1_VALUES
from ampkit.fp8.hadamard import rht
from ampkit.fp8.mx import block_range
from ampkit.fp8.nvfp4 import E4M3_MAX, nvfp4_quantize
from ampkit.i18n import mark, tr
from ampkit.lessons.fp4 import HADAMARD_CASES, hadamard_cases, hadamard_gradient

EX1_VALUES = (3.5, 5.0)
EX2_AMAX, EX2_RULE = 14.0, "ocp"
EX3_BLOCKS = ((0.5, 3.0), (12.0, -7.0))     # two blocks of 16 (each value repeated 8 times): amaxes 3 and 12
EX3_BLOCK = 0                               # the first block: amax 3, a quarter of the tensor's

HINT_1 = mark("both are midpoints: 3.5 lies halfway between 3 and 4, 5.0 halfway between 4 and 6. A tie goes to the "
              "even code — the one whose mantissa bit is 0. Of 3 (1.5 × 2) and 4 (1.0 × 4), and of 4 and 6 "
              "(1.5 × 4), which have mantissa 1.0?")
HINT_2 = mark("the OCP rule's exponent is floor(log2(amax)) minus E2M1's largest exponent, 2. The block is divided "
              "by 2**exponent; a magnitude of 7 or more no longer rounds to 6.")
HINT_3 = mark("the tensor scale is 448 × 6 / (the tensor's amax): it maps the tensor's amax to 448 × 6. A block's "
              "scale is its own amax / 6 times that tensor scale, rounded to E4M3.")
HINT_4 = mark("compare each gradient's blocks: the transform spreads a block's values into 16 values of similar "
              "size. That helps a block whose values all sit near its amax (they all round to 4 or 6) and does "
              "not help a block where one value dwarfs the rest.")


def expected_1() -> tuple[float, float]:
    """The kit's cast."""
    return tuple(round_trip(v, "e2m1") for v in EX1_VALUES)  # type: ignore[return-value]


def solution_1() -> tuple[float, float]:
    grid = sorted({abs(v) for v in E2M1_VALUES})
    out = []
    for v in EX1_VALUES:
        lo, hi = max(g for g in grid if g <= v), min(g for g in grid if g >= v)
        mantissa = {g: g / 2 ** math.floor(math.log2(g)) for g in (lo, hi)}
        even = lo if mantissa[lo] == 1.0 else hi
        print(tr("{v} lies halfway between {lo} and {hi}; their significands are {mlo} and {mhi}: the tie goes to "
                 "{even}", v=v, lo=lo, hi=hi, mlo=mantissa[lo], mhi=mantissa[hi], even=even))
        out.append(even)
    return out[0], out[1]


def expected_2() -> bool:
    """The engine's block range (checked in the tests against quantizing such a block)."""
    return block_range(EX2_AMAX, "e2m1", EX2_RULE).saturates


def solution_2() -> bool:
    e = math.floor(math.log2(EX2_AMAX)) - 2
    scaled = EX2_AMAX / 2 ** e
    print(tr("exponent floor(log2({amax:g})) - 2 = {e}; {amax:g} / 2**{e} = {scaled:g}, and 7 or more saturates",
             amax=EX2_AMAX, e=e, scaled=scaled))
    return scaled >= 7


def _ex3_tensor() -> torch.Tensor:
    return torch.tensor([v for block in EX3_BLOCKS for v in block for _ in range(8)]).reshape(1, 32)


def expected_3() -> float:
    """The engine: NVFP4's E4M3 block scale of the first block."""
    return float(nvfp4_quantize(_ex3_tensor()).scales.float()[0, EX3_BLOCK])


def solution_3() -> float:
    amax = max(abs(v) for block in EX3_BLOCKS for v in block)
    tensor_scale = E4M3_MAX * 6 / amax
    block_amax = max(abs(v) for v in EX3_BLOCKS[EX3_BLOCK])
    scale = block_amax / 6 * tensor_scale
    print(tr("tensor scale 448 × 6 / {amax:g} = {t:g}; block scale {b:g} / 6 × {t:g} = {s:g}", amax=amax,
             t=tensor_scale, b=block_amax, s=scale))
    return scale


def expected_4() -> set[str]:
    """The lesson's measurement: the cases whose dYᵀ operand error is lower with the transform."""
    return {r["case"] for r in hadamard_cases() if r["operand_on"] < r["operand_off"]}


def solution_4() -> set[str]:
    helped = set()
    for case in HADAMARD_CASES:
        dyt = hadamard_gradient(case).t().contiguous()
        near = []
        for t in (dyt, rht(dyt)):
            blocks = t.reshape(-1, 16).abs()
            near.append(float((blocks >= 0.75 * blocks.amax(dim=1, keepdim=True)).float().mean()))
        print(tr("{case}: values within 75 % of their block's amax: {before:.0%} without the transform, {after:.0%} "
                 "with it", case=case, before=near[0], after=near[1]))
        if near[0] > 0.5 and near[1] < near[0]:
            helped.add(case)
    print(tr("the transform helps where it moves values away from their block's amax: {cases}",
             cases=", ".join(sorted(helped))))
    return helped
