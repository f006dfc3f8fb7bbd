"""Loss scaling: ampkit's scalers (none, static, dynamic) with torch.amp.GradScaler's calls, and the rules.

Taught in notebook ``03_loss_scaling.ipynb`` (the widgets in :mod:`ampkit.widgets.scaling` draw what this package
computes; the notebook's own experiments are in :mod:`ampkit.lessons.loss_scaling`).

Why: fp16's smallest positive value is 2**-24 (magnitudes at or below 2**-25 round to zero), and backward passes
are full of smaller gradients. Multiplying the loss by ``scale`` multiplies every gradient of the backward pass by
``scale`` (chain rule), lifting them into fp16's range; dividing the fp32 (master) gradients by ``scale`` before
the optimizer step undoes it.

====================  ======================================================================================
module                holds
====================  ======================================================================================
``errors``            the scalers' errors (:class:`Scaler` itself is :mod:`ampkit.protocols`', re-exported here)
``dynamic_rule``      :class:`DynamicRule` — the dynamic rule as a pure object (state in, state out)
``base``              the machinery the scalers share (stages, unscale, skip, history: :class:`StepRecord`)
``scalers``           :class:`NoLossScaler`, :class:`StaticLossScaler`, :class:`DynamicLossScaler` (the rule)
``defaults``          :data:`TABLE_COLUMNS` — the columns of :func:`defaults_table` (defaults across frameworks)
``framework_rules``   Apex and DeepSpeed rules (a float64 scale), from source (built by name with :func:`preset`)
``deepspeed_config``  DeepSpeed's ``fp16`` config values as its pydantic model reads them (16.0 -> 16)
``tensor_rules``      Paddle, MindSpore (functional), Keras 3, tf.keras 2, jmp (op by op, jax.jit): a float32 scale
``presets``           :func:`preset` (one constructor per framework), :func:`describe`, :func:`replay_presets`
``gradients``         capture gradients, classify them at a scale (:func:`scale_report`, :func:`safe_window`)
``rules``             torch's and MindSpore's rules as pure arithmetic
``replays``           a rule (:class:`ScaleRule`) or ampkit's dynamic scaler run over recorded steps: :func:`replay`
``legacy``            what the legacy ``torch.cuda.amp`` spellings do on this torch
====================  ======================================================================================

>>> scaler = DynamicLossScaler(init_scale=2.0**16, growth_interval=2000)
>>> scaler.get_scale(), isinstance(scaler, Scaler)
(65536.0, True)

Differences from torch.amp.GradScaler
-------------------------------------
:class:`DynamicLossScaler` is called like ``torch.amp.GradScaler`` — ``DynamicLossScaler("cpu")``,
``DynamicLossScaler(enabled=use_amp)``, the same five leading arguments in the same order, the same getters and
setters, ``step``/``unscale_`` on any object with ``param_groups`` and ``step()``, fused optimizers handed the
scaler or ``grad_scale``/``found_inf`` — and gives the same numbers bit for bit and the same exception types
(tests/test_gradscaler_dropin.py, tests/test_gradscaler_dropin_api.py re-run PyTorch's own scenarios on both).
What remains different on purpose (each tested in tests/test_gradscaler_dropin_api.py):

1. ``device`` defaults to ``None``: the scale lives wherever the loss is. torch's default ``"cuda"`` disables the
   scaler (with a warning) on a machine without CUDA; ``DynamicLossScaler("cuda")`` does exactly that too.
2. A number as the first argument (``DynamicLossScaler(1024.0)``, ampkit's old spelling) is a ``TypeError``
   naming ``init_scale=``; torch takes it as the device name and silently starts at 2**16.
3. Settings are checked — in the constructor (also when ``enabled=False``) and in ``set_growth_factor`` /
   ``set_backoff_factor`` / ``set_growth_interval``: ``ValueError``/``TypeError`` naming the valid range
   (torch checks only ``growth_factor > 1`` and ``backoff_factor < 1``, only when enabled, with
   ``AssertionError`` — ampkit's errors there are :class:`ScalerValueError`, an ``AssertionError`` too).
   ``enabled`` must be ``True`` or ``False``.
4. A disabled scaler still answers ``get_growth_factor()`` & co. with its settings (torch's raises
   ``AttributeError``: it never stored them).
5. ``scale("text")`` raises :class:`ScaleInputError` (a ``ValueError``, like torch's for other non-tensors);
   torch returns a lazy ``map`` over the characters that never fails.
6. ``update(new_scale=t)`` takes any 1-element tensor, as torch's message says; torch's ``copy_`` into its 0-dim
   scale fails with ``RuntimeError`` for shape ``[1]``.
7. Errors carry a longer message, and where torch raises ``AssertionError``, ``AttributeError`` or ``KeyError``
   ampkit raises a class deriving from both torch's type and the kit's (:class:`ScalerUsageError`,
   :class:`ScalerValueError`, :class:`ScalerTypeError`, :class:`ScalerStateError`, :class:`ScaleInputError`),
   so an ``except`` written for either catches it.
8. ``load_state_dict`` validates the whole state before changing anything (missing keys: :class:`ScalerStateError`,
   a ``KeyError`` like torch's; bad values: ``ValueError``/``TypeError``); torch loads what it finds.
   ``state_dict()`` carries extra keys (``hysteresis``, ``consecutive_hysteresis``, ``_overflows_counted``,
   ``min_scale``, ``max_scale``) that torch's ``load_state_dict`` ignores; torch's five-key state loads here.
9. Extras torch does not have: keyword-only ``hysteresis``, ``consecutive_hysteresis``, ``min_scale``,
   ``max_scale``, ``track``, ``record_history``; ``history``, ``last_step_skipped``, ``scales``,
   ``skipped_steps``; a ``UserWarning`` (once) when a scaler is used with bfloat16, where it is unnecessary.
10. :class:`NoLossScaler` is not torch's disabled scaler: it still checks gradients for inf/NaN and records
    history (and steps anyway, fused optimizers included: they get a plain ``step()`` as from torch's disabled
    scaler), and refuses a state whose scale is not 1. Its ``state_dict()`` is ``{}`` as
    torch's disabled one. For torch's ``enabled=False`` use ``DynamicLossScaler(enabled=False)``.
    :class:`StaticLossScaler` has no torch counterpart (its first argument is the scale).
"""
from __future__ import annotations

from ampkit.protocols import Scaler
from ampkit.scaling.base import StepRecord
from ampkit.scaling.defaults import TABLE_COLUMNS
from ampkit.scaling.dynamic_rule import DynamicRule, DynamicState
from ampkit.scaling.errors import ScaleInputError, ScalerStateError, ScalerTypeError, ScalerUsageError, ScalerValueError
from ampkit.scaling.gradients import (
    SAFE_MAX_FLUSHED,
    ScaleReport,
    capture_gradients,
    log2_histogram,
    safe_window,
    scale_report,
    scale_sweep,
)
from ampkit.scaling.legacy import LegacyCall, legacy_amp_spellings
from ampkit.scaling.presets import (
    PRESETS,
    Preset,
    RuleSummary,
    defaults_table,
    describe,
    preset,
    preset_arguments,
    preset_names,
    replay_presets,
)
from ampkit.scaling.replays import (
    Replay,
    RuleReplay,
    ScaleRule,
    log2_ceiling,
    parse_flags,
    replay,
    replay_flags,
    replay_grad_max,
)
from ampkit.scaling.rules import DynamicScalerRule, MindSporeDynamicRule, MindSporeFixedRule, TorchGradScalerRule
from ampkit.scaling.scalers import TORCH_STATE_KEYS, DynamicLossScaler, NoLossScaler, StaticLossScaler

__all__ = [
    # the scalers
    "Scaler", "NoLossScaler", "StaticLossScaler", "DynamicLossScaler", "StepRecord", "TORCH_STATE_KEYS",
    "ScalerUsageError", "ScalerValueError", "ScalerTypeError", "ScalerStateError", "ScaleInputError",
    # gradients at a scale
    "capture_gradients", "log2_histogram", "ScaleReport", "scale_report", "scale_sweep", "safe_window",
    "SAFE_MAX_FLUSHED",
    # the dynamic rule, rules and replays
    "DynamicRule", "DynamicState",
    "ScaleRule", "DynamicScalerRule", "TorchGradScalerRule", "MindSporeDynamicRule", "MindSporeFixedRule",
    "Replay", "replay", "RuleReplay", "parse_flags", "replay_flags", "replay_grad_max", "log2_ceiling",
    "LegacyCall", "legacy_amp_spellings",
    # every framework's rule as a preset (the rule classes: ampkit.scaling.framework_rules, .tensor_rules)
    "TABLE_COLUMNS", "PRESETS", "Preset", "RuleSummary", "preset", "preset_names", "preset_arguments", "describe",
    "defaults_table", "replay_presets",
]

