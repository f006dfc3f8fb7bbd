"""Precision levels O0–O3 (fp16 or bf16), the per-layer dtype trace, memory, and the live autocast op probe.

Taught in ``02_autocast_and_levels.ipynb``. One idea per module:

- :mod:`~ampkit.precision.levels`: the level names and what they mean in PyTorch, Apex, MindSpore and Paddle;
- :mod:`~ampkit.precision.mixed`: :func:`apply_level` and the :class:`MixedPrecision` it returns (the step);
- :mod:`~ampkit.precision.trace`: :func:`trace_dtypes` (dtypes per layer) and :func:`memory_report`;
- :mod:`~ampkit.precision.probe`: :func:`probe_autocast_ops`, autocast's op lists found by running them;
- :mod:`~ampkit.precision.frameworks`: Paddle's white/black/gray lists, :func:`run_as`, :func:`fp32_matmul`;
- :mod:`~ampkit.precision.checks`: one Adam step in fp16/bf16, evaluation under autocast;
- :mod:`~ampkit.precision.bf16_updates`: bf16 weights that stop learning, and Kahan / stochastic-rounding updates.

>>> import torch
>>> from ampkit.models import build_model
>>> rows = trace_dtypes(build_model("mlp_ln"), torch.zeros(2, 16), "O2", "bf16")
>>> [(r.name, r.as_row()["params"]) for r in rows[1:3]]
[('net.0', 'bf16'), ('net.1', 'fp32')]
"""
from __future__ import annotations

from ampkit.precision.bf16_updates import BF16Updates, apply_update, stochastic_round
from ampkit.precision.checks import AdamStep, EvalGap, adam_step_in, evaluate_under_autocast
from ampkit.precision.frameworks import fp32_matmul, paddle_list, paddle_rows, run_as
from ampkit.precision.levels import (
    LEVEL_MAP,
    LEVELS,
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
    "LEVELS", "LEVEL_MAP", "resolve_level", "level_map_rows", "level_label", "speed_phrase",
    # applying a level
    "apply_level", "MixedPrecision",
    # trace and memory
    "LayerTrace", "trace_dtypes", "MemoryReport", "memory_report",
    # op probe
    "OpProbe", "DOCUMENTED_AUTOCAST", "probe_autocast_ops",
    # Paddle's lists (the tables themselves: ampkit.precision.frameworks), PyTorch's per-op overrides
    "paddle_list", "paddle_rows", "run_as", "fp32_matmul",
    # numerical checks
    "AdamStep", "adam_step_in", "EvalGap", "evaluate_under_autocast",
    # bf16 weight updates (notebook 07)
    "BF16Updates", "apply_update", "stochastic_round",
]
