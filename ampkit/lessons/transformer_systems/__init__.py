"""Notebook 08's experiments: the decoder of notebook 07 compiled, checkpointed, sharded and hunted. A lesson, above
the engine.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. One module per idea:

- :mod:`~ampkit.lessons.transformer_systems.task`: the small decoder and its character batches;
- :mod:`~ampkit.lessons.transformer_systems.compiled`: ``torch.compile`` under autocast against eager
  (:func:`compile_vs_eager`);
- :mod:`~ampkit.lessons.transformer_systems.checkpointing`: activation checkpointing under autocast
  (:func:`checkpoint_experiment`, :func:`saved_bytes`);
- :mod:`~ampkit.lessons.transformer_systems.sharded`: FSDP2's ``MixedPrecisionPolicy`` on 2 gloo processes
  (:func:`sharded_gradients`);
- :mod:`~ampkit.lessons.transformer_systems.hunting`: the non-finite hunter and the AMP doctor on the decoder
  (:func:`hunt_decoder`).

>>> small_decoder().context
32
"""
from __future__ import annotations

from ampkit.lessons.transformer_systems.checkpointing import (
    Checkpointed,
    CheckpointResult,
    checkpoint_experiment,
    saved_bytes,
    with_checkpointing,
)
from ampkit.lessons.transformer_systems.compiled import BACKENDS, CompileRun, CountingBackend, compile_vs_eager
from ampkit.lessons.transformer_systems.hunting import DecoderHunt, hunt_decoder, overflowing_decoder, raw_logit_max
from ampkit.lessons.transformer_systems.sharded import POLICIES, ShardedGrads, ShardedRun, sharded_gradients
from ampkit.lessons.transformer_systems.task import SMALL, decoder_batches, small_decoder

__all__ = ["SMALL", "small_decoder", "decoder_batches",
           "BACKENDS", "CompileRun", "CountingBackend", "compile_vs_eager",
           "Checkpointed", "CheckpointResult", "checkpoint_experiment", "saved_bytes", "with_checkpointing",
           "POLICIES", "ShardedGrads", "ShardedRun", "sharded_gradients",
           "DecoderHunt", "hunt_decoder", "overflowing_decoder", "raw_logit_max"]
