"""Precision levels O0–O3 (fp16 or bf16), the per-layer dtype trace, memory, and the live autocast op probe.

Taught in ``02_autocast_and_levels.ipynb`` (bf16 weight updates: ``07_transformers_in_16_bits.ipynb``).

================  ===================================================================================================
module            holds
================  ===================================================================================================
``levels``        the level names and what they mean in PyTorch, Apex, MindSpore and Paddle (:data:`LEVEL_MAP`)
``mixed``         :func:`apply_level` and the :class:`MixedPrecision` it returns (the step)
``trace``         :func:`trace_dtypes` (dtypes per layer) and :func:`memory_report`
``probe``         :func:`probe_autocast_ops`, autocast's op lists found by running them
``frameworks``    Paddle's white/black/gray lists and MindSpore's (:data:`PADDLE_STATIC_GRAY`,
                  :data:`MINDSPORE_O1_WHITE`, ...), :func:`paddle_list`, :func:`run_as`, :func:`fp32_matmul`
``checks``        one Adam step in fp16/bf16 (:func:`adam_step_in`), evaluation under autocast
``bf16_updates``  bf16 weights that stop learning (:func:`nearest_threshold`), and Kahan / stochastic-rounding
                  updates (:class:`BF16Updates`)
================  ===================================================================================================

>>> import torch
>>> from ampkit.models import build_model
>>> rows = trace_dtypes(build_model("mlp_ln"), torch.zeros(2, 16), "O2", "bf16")
>>> [(r.name, r.as_row()["params"]) for r in rows[1:3]]
[('net.0', 'bf16'), ('net.1', 'fp32')]
"""
from __future__ import annotations

from ampkit.precision.bf16_updates import (
    UPDATE_MODES,
    WRAPPER_MODES,
    BF16Updates,
    Updated,
    apply_update,
    nearest_threshold,
    stochastic_round,
)
from ampkit.precision.checks import AdamStep, EvalGap, adam_step_in, evaluate_under_autocast
from ampkit.precision.frameworks import (
    MINDSPORE_O1_WHITE,
    MINDSPORE_O2_BLACK,
    PADDLE_2_5_BF16_WHITE,
    PADDLE_BF16_BLACK,
    PADDLE_BF16_WHITE,
    PADDLE_FP16_BLACK,
    PADDLE_FP16_WHITE,
    PADDLE_STATIC_GRAY,
    PROBE_TO_PADDLE,
    TORCH_TO_PADDLE,
    fp32_matmul,
    paddle_list,
    paddle_rows,
    run_as,
)
from ampkit.precision.levels import (
    LEVEL_MAP,
    LEVELS,
    NORM_TYPES,
    level_label,
    level_map_rows,
    resolve_level,
    speed_phrase,
)
from ampkit.precision.mixed import MixedPrecision, apply_level
from ampkit.precision.probe import DOCUMENTED_AUTOCAST, OpProbe, probe_autocast_ops
from ampkit.precision.trace import LayerTrace, MemoryReport, memory_report, trace_dtypes

__all__ = [
    # levels
    "LEVELS", "LEVEL_MAP", "NORM_TYPES", "resolve_level", "level_map_rows", "level_label", "speed_phrase",
    # applying a level
    "apply_level", "MixedPrecision",
    # trace and memory
    "LayerTrace", "trace_dtypes", "MemoryReport", "memory_report",
    # op probe
    "OpProbe", "DOCUMENTED_AUTOCAST", "probe_autocast_ops",
    # Paddle's and MindSpore's lists, PyTorch's per-op overrides
    "PADDLE_FP16_WHITE", "PADDLE_FP16_BLACK", "PADDLE_BF16_WHITE", "PADDLE_BF16_BLACK", "PADDLE_2_5_BF16_WHITE",
    "PADDLE_STATIC_GRAY", "MINDSPORE_O1_WHITE", "MINDSPORE_O2_BLACK", "TORCH_TO_PADDLE", "PROBE_TO_PADDLE",
    "paddle_list", "paddle_rows", "run_as", "fp32_matmul",
    # numerical checks
    "AdamStep", "adam_step_in", "EvalGap", "evaluate_under_autocast",
    # bf16 weight updates (notebook 07)
    "UPDATE_MODES", "WRAPPER_MODES", "Updated", "BF16Updates", "apply_update", "stochastic_round",
    "nearest_threshold",
]
