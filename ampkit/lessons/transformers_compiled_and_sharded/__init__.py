"""Notebook 08's experiments: the decoder of notebook 07 compiled, checkpointed, sharded and hunted. A lesson, above
the engine.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. One module per idea:

- :mod:`~ampkit.lessons.transformers_compiled_and_sharded.task`: the small decoder and its character batches;
- :mod:`~ampkit.lessons.transformers_compiled_and_sharded.compiled`: ``torch.compile`` under autocast against eager
  (:func:`compile_vs_eager`), the backward's autocast setting (:func:`backward_autocast`, :func:`fp32_region_grad`,
  :func:`autocast_rules`);
- :mod:`~ampkit.lessons.transformers_compiled_and_sharded.checkpointing`: activation checkpointing under autocast
  (:func:`checkpoint_experiment`, :func:`saved_bytes`, :func:`linear_calls`, :func:`default_variant`);
- :mod:`~ampkit.lessons.transformers_compiled_and_sharded.sharded`: FSDP2's ``MixedPrecisionPolicy`` on 2 gloo processes
  (:func:`sharded_gradients`);
- :mod:`~ampkit.lessons.transformers_compiled_and_sharded.hunting`: the non-finite hunter and the AMP doctor on the
  decoder (:func:`hunt_decoder`, :func:`overflow_gain`, :func:`fp16_attention_finite`).

>>> small_decoder().context
32
"""
from __future__ import annotations

from ampkit.lessons.transformers_compiled_and_sharded.checkpointing import (
    Checkpointed,
    CheckpointResult,
    DefaultVariant,
    LinearCalls,
    checkpoint_experiment,
    default_variant,
    linear_calls,
    saved_bytes,
    with_checkpointing,
)
from ampkit.lessons.transformers_compiled_and_sharded.compiled import (
    BACKENDS,
    BACKWARD_AUTOCAST,
    CompileRun,
    CountingBackend,
    Fp32Region,
    autocast_rules,
    backward_autocast,
    compile_vs_eager,
    fp32_region_grad,
)
from ampkit.lessons.transformers_compiled_and_sharded.hunting import (
    DecoderHunt,
    first_forward_inf,
    fp16_attention_finite,
    hunt_decoder,
    overflow_gain,
    overflowing_decoder,
    raw_logit_max,
)
from ampkit.lessons.transformers_compiled_and_sharded.sharded import (
    POLICIES,
    ShardedGrads,
    ShardedRun,
    sharded_gradients,
)
from ampkit.lessons.transformers_compiled_and_sharded.task import SMALL, decoder_batches, small_decoder

__all__ = ["SMALL", "small_decoder", "decoder_batches",
           "BACKENDS", "BACKWARD_AUTOCAST", "CompileRun", "CountingBackend", "Fp32Region", "autocast_rules",
           "backward_autocast", "compile_vs_eager", "fp32_region_grad",
           "Checkpointed", "CheckpointResult", "checkpoint_experiment", "saved_bytes", "with_checkpointing",
           "LinearCalls", "linear_calls", "DefaultVariant", "default_variant",
           "POLICIES", "ShardedGrads", "ShardedRun", "sharded_gradients",
           "DecoderHunt", "hunt_decoder", "overflowing_decoder", "raw_logit_max", "first_forward_inf", "overflow_gain",
           "fp16_attention_finite"]
