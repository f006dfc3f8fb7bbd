"""fp8 training numerics on any CPU: per-tensor scaling, delayed scaling, MX block scaling, a simulated fp8 linear
layer. Taught in ``06_fp8_scaling.ipynb``.

============  =======================================================================================================
module        holds
============  =======================================================================================================
``quantize``  one scale per tensor (``fp8_max / amax / 2**margin``), quantize / dequantize, reports
``delayed``   amax history, "max" / "most_recent", margin; delayed vs just-in-time; the recipes
``mx``        MX block scaling (32 values share an E8M0 scale): OCP floor rule vs Transformer Engine's
``tiles``     an fp32 scale per 1×128 tile or 128×128 block (Transformer Engine's Float8BlockScaling)
``compare``   per-tensor vs per-block scaling, element by element (:func:`compare_blocks`, :func:`compare_tiles`,
              :func:`outlier_tensor`)
``linear``    ``Fp8Linear`` (fp8 forward / e5m2 backward, fp32 products), ``torch._scaled_mm`` check
``nvfp4``     NVFP4's two levels (fp32 tensor scale, E4M3 scale per 1×16 or 16×16 block, E2M1 values), as
              Transformer Engine's reference quantizer (v2.8, v2.18) and torchao compute them (``10_fp4.ipynb``)
``hadamard``  the 16×16 random Hadamard transform with Transformer Engine's fixed signs (``10_fp4.ipynb``)
``stochastic`` stochastic rounding onto E2M1 with a seeded generator, and its statistical bound (``10_fp4.ipynb``)
``fp4_linear`` ``NVFP4Linear``: the NVFP4 recipe's forward and backward quantization, layers kept in bf16
============  =======================================================================================================

Notebook 06's own runs (fp8 vs bf16 vs fp32 training of a kit model, a recorded run's amaxes with spikes) are in
:mod:`ampkit.lessons.fp8_scaling`.

>>> compute_scale(448.0, "e4m3")
1.0
"""
from __future__ import annotations

from ampkit.fp8.compare import BlockStats, block_stats, compare_blocks, compare_tiles, outlier_tensor, tile_stats
from ampkit.fp8.delayed import (
    ALGOS,
    DelayedScaling,
    StepResult,
    current_scales,
    delayed_scales,
    recipe_formats,
)
from ampkit.fp8.fp4_linear import NVFP4Linear, NVFP4Recipe, to_nvfp4
from ampkit.fp8.hadamard import TE_SIGNS, hadamard_matrix, rht, rht_matrix
from ampkit.fp8.linear import Fp8Linear, Fp8Recipe, fp8_matmul, scaled_mm_agrees, scaled_mm_available, to_fp8
from ampkit.fp8.mx import (
    ELEMENTS,
    SCALE_RULES,
    BlockRange,
    MXReport,
    block_range,
    e8m0_decode,
    e8m0_encode,
    mx_dequantize,
    mx_exponents,
    mx_fake_quantize,
    mx_quantize,
    mx_report,
)
from ampkit.fp8.nvfp4 import ARITHMETICS, NVFP4Tensor, nvfp4_dequantize, nvfp4_fake_quantize, nvfp4_quantize
from ampkit.fp8.quantize import (
    QuantReport,
    amax_of,
    compute_scale,
    current_scale,
    dequantize,
    fake_quantize,
    fp8_dtype,
    fp8_max,
    fp8_min_subnormal,
    fp8_name,
    fp8_to_float,
    quant_report,
    quantize,
    saturation_threshold,
    scale_inv,
)
from ampkit.fp8.stochastic import round_up_probability, sr_mean_bound, stochastic_e2m1
from ampkit.fp8.tiles import (
    tile_fake_quantize,
    tile_scales,
    transpose_mismatch,
)

__all__ = [
    # one scale per tensor
    "fp8_dtype", "fp8_name", "fp8_max", "fp8_min_subnormal", "compute_scale", "amax_of", "current_scale", "quantize",
    "dequantize", "fake_quantize", "saturation_threshold", "fp8_to_float", "QuantReport", "quant_report", "scale_inv",
    # delayed scaling and the recipes
    "ALGOS", "recipe_formats", "DelayedScaling", "StepResult", "delayed_scales", "current_scales",
    # MX blocks and fp32 tiles
    "MXReport", "mx_exponents", "mx_quantize", "mx_dequantize", "mx_fake_quantize", "mx_report", "e8m0_encode",
    "e8m0_decode", "tile_scales", "tile_fake_quantize", "transpose_mismatch",
    # per-tensor vs per-block, element by element
    "BlockStats", "block_stats", "tile_stats", "compare_blocks", "compare_tiles", "outlier_tensor",
    # the simulated fp8 linear layer
    "Fp8Recipe", "Fp8Linear", "to_fp8", "fp8_matmul", "scaled_mm_available", "scaled_mm_agrees",
    # FP4: MXFP4 (mx with fmt="e2m1"), NVFP4, the Hadamard transform, stochastic rounding, the simulated layer
    "ELEMENTS", "SCALE_RULES", "BlockRange", "block_range", "ARITHMETICS", "NVFP4Tensor", "nvfp4_quantize",
    "nvfp4_dequantize", "nvfp4_fake_quantize", "TE_SIGNS", "hadamard_matrix", "rht_matrix", "rht", "stochastic_e2m1",
    "round_up_probability", "sr_mean_bound",
    "NVFP4Recipe", "NVFP4Linear", "to_nvfp4",
]
