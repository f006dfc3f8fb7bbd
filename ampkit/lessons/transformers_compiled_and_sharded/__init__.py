"""Notebook 08 (``08_transformers_compiled_and_sharded.ipynb``): the decoder of notebook 07 compiled, checkpointed,
sharded and hunted. A lesson, above the engine; its names are on :mod:`ampkit.lessons` too.

=================  ==================================================================================================
module             holds
=================  ==================================================================================================
``task``           the small decoder and its character batches (:func:`small_decoder`, :func:`decoder_batches`)
``compiled``       ``torch.compile`` under autocast against eager (:func:`compile_vs_eager`), the backward's autocast
                   setting (:func:`backward_autocast`, :func:`fp32_region_grad`, :func:`autocast_rules`)
``checkpointing``  activation checkpointing under autocast (:func:`checkpoint_experiment`,
                   :func:`saved_activation_bytes`, :func:`linear_calls`, :func:`default_variant`)
``sharded``        FSDP2's ``MixedPrecisionPolicy`` on 2 gloo processes (:func:`sharded_gradients`)
``hunting``        the non-finite hunter and the AMP doctor on the decoder (:func:`hunt_decoder`,
                   :func:`overflow_gain`, :func:`fp16_attention_finite`)
=================  ==================================================================================================

>>> from ampkit.lessons.transformers_compiled_and_sharded import small_decoder
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
    saved_activation_bytes,
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
    current_backward_autocast,
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

__all__ = [
    # the task
    "SMALL", "small_decoder", "decoder_batches",
    # compiled
    "BACKENDS", "BACKWARD_AUTOCAST", "CompileRun", "CountingBackend", "Fp32Region", "autocast_rules",
    "backward_autocast", "current_backward_autocast", "compile_vs_eager", "fp32_region_grad",
    # checkpointing
    "Checkpointed", "CheckpointResult", "checkpoint_experiment", "saved_activation_bytes", "with_checkpointing",
    "LinearCalls", "linear_calls", "DefaultVariant", "default_variant",
    # sharded
    "POLICIES", "ShardedGrads", "ShardedRun", "sharded_gradients",
    # hunting
    "DecoderHunt", "hunt_decoder", "overflowing_decoder", "raw_logit_max", "first_forward_inf", "overflow_gain",
    "fp16_attention_finite",
]
