"""Notebook 06_fp8_scaling's exercises: the margin that absorbs a doubling amax, the scale a delayed window casts
with, how many backward-GEMM operands HYBRID makes e5m2, and what one outlier flushes with one scale vs 1×128 tiles.

State from the notebook: ``runs`` (section 6's training runs; exercise 3 reads the fp8 run's layer record). See
:mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import torch

from ampkit.fp8 import (
    DelayedScaling,
    Fp8Linear,
    compare_tiles,
    delayed_scales,
    fp8_max,
    fp8_min_subnormal,
    saturation_threshold,
)
from ampkit.i18n import mark, tr
from ampkit.lessons.fp8_scaling import backward_operand_formats

EX1_STEPS, EX1_LARGEST_MARGIN = 8, 6
EX2_AMAXES, EX2_HISTORY = (2.0, 8.0, 1.0, 1.0, 1.0), 3
EX4_SHAPE, EX4_SMALL, EX4_OUTLIER, EX4_TILE = (4, 256), 0.01, 10000.0, 128
TOLERANCE = {2: {"rel_tol": 1e-6}}

HINT_1 = mark("step t's amax is twice step t-1's, and the scale maps step t-1's amax to 448 / 2**margin. Where does "
              "step t's amax land, and is that above 464?")
HINT_2 = mark("delayed scaling casts step t before it knows step t's amax: the window is the amaxes of steps t-3 … "
              "t-1, not t-2 … t. Which is the largest for t = 4, and what scale does it give?")
HINT_3 = mark("HYBRID picks a tensor's format by what the tensor is, not by the pass that reads it. Go through the "
              "four operands one by one: which are gradients, and which were cast to fp8 in the forward pass and "
              "kept for the backward? A tensor that enters both GEMMs counts twice.")
HINT_4 = mark("with one scale, the outlier's amax sets the scale of every value: multiply 0.01 by that scale and "
              "compare with the flush threshold. With 1×128 tiles only the tile that holds the outlier gets its "
              "scale: how many small values share that tile?")


def expected_1() -> int | None:
    """The engine: delayed scaling (history 1, "most_recent") stepped over an amax that doubles every step."""
    for m in range(EX1_LARGEST_MARGIN + 1):
        state = DelayedScaling("e4m3", history_len=1, algo="most_recent", margin=m)
        results = [state.step(torch.tensor([2.0 ** t, -(2.0 ** t) / 3])) for t in range(EX1_STEPS)]
        if all(r.report.saturated == 0 for r in results[1:]):
            return m
    return None


def solution_1() -> int:
    limit, _ = saturation_threshold("e4m3")
    landing = {m: 2 * fp8_max("e4m3") / 2**m for m in range(4)}
    print(tr("the scale maps the previous amax a to 448 / 2**margin; this step's amax 2a lands at 2 x 448 / 2**margin:"
             " {landing} (saturates above {limit:g})", landing=landing, limit=limit))
    return min(m for m, v in landing.items() if v <= limit)


def expected_2() -> float:
    """The engine: the scales delayed scaling casts with over the recorded amaxes; step 4's."""
    return float(delayed_scales(torch.tensor(EX2_AMAXES), "e4m3", history_len=EX2_HISTORY, algo="max")[4])


def solution_2() -> float:
    window = EX2_AMAXES[4 - EX2_HISTORY:4]
    scale = fp8_max("e4m3") / max(window)
    print(tr("step 4 casts with the window of steps 1-3, amaxes {window}: 448 / {top} = {scale}", window=window,
             top=max(window), scale=scale))
    return scale


def expected_3() -> int:
    """The lesson's measurement: both formats tried for every backward operand, the pair reproducing dX and dW kept."""
    measured = backward_operand_formats()
    return sum(fmt == "e5m2" for pair in measured.values() for fmt in pair)


def solution_3(runs: dict) -> int:
    layer = [m for m in runs["fp8"].model.modules() if isinstance(m, Fp8Linear)][1]
    for gemm, operands in layer.gemms.items():
        print(tr("{gemm}: {operands}", gemm=gemm, operands=" × ".join(f"{name} {fmt}" for name, fmt in operands)))
    counted = sum(fmt == "e5m2" for gemm in ("dgrad", "wgrad") for _, fmt in layer.gemms[gemm])
    print(tr("e5m2 operands of the two backward GEMMs (the record of net.2 in section 6's fp8 run): {n}", n=counted))
    return counted


def _outlier_tensor() -> torch.Tensor:
    x = torch.full(EX4_SHAPE, EX4_SMALL)
    x[0, 5] = EX4_OUTLIER
    return x


EX4 = _outlier_tensor()


def expected_4() -> tuple[int, int]:
    """The engine: per-tensor and per-1×128-tile statistics with exact fp32 scales."""
    by_tensor, by_tile = compare_tiles(EX4, "e4m3", (1, EX4_TILE), power_of_two=False)
    return by_tensor.n_flushed, by_tile.n_flushed


def solution_4() -> tuple[int, int]:
    flush_at = fp8_min_subnormal("e4m3") / 2
    one_scale = fp8_max("e4m3") / EX4_OUTLIER
    n_small = EX4_SHAPE[0] * EX4_SHAPE[1] - 1
    by_tensor = n_small if EX4_SMALL * one_scale <= flush_at else 0
    tile_scale = fp8_max("e4m3") / EX4_SMALL
    by_tile = (EX4_TILE - 1) + (0 if EX4_SMALL * tile_scale <= flush_at else 0)
    print(tr("one scale 448 / {outlier:g} = {scale:.4f}: 0.01 x scale = {small:.6f}, flushed at or below {flush:.6f}: "
             "all {n} small values lost", outlier=EX4_OUTLIER, scale=one_scale, small=EX4_SMALL * one_scale,
             flush=flush_at, n=by_tensor))
    print(tr("1×128 tiles: only the outlier's tile gets that scale, its {n} small values are lost; the others scale "
             "0.01 to 448", n=by_tile))
    return by_tensor, by_tile
