"""Notebook 07 (``07_transformers_in_16_bits.ipynb``): a small decoder in 16 bits, on a CPU. A lesson, above the
engine; its names are on :mod:`ampkit.lessons` too.

===============  ====================================================================================================
module           holds
===============  ====================================================================================================
``activations``  sections 1–4: fp32, bf16 and fp16 trained side by side (:func:`train_side_by_side`), attention
                 logits that overflow (:func:`attention_overflow`), a norm's mean of squares (:func:`norm_rows`),
                 the loss over a vocabulary (:func:`loss_rows`)
``drift``        section 1: a 16-bit run's loss difference from fp32 split into its weights' part and its forward
                 arithmetic's part (:func:`loss_difference_parts`)
``weights``      sections 5–6: bf16 weights that stop learning (:func:`plateau_experiment`), a model stored in fp16
                 as a fine-tuner receives one (:func:`finetune_stored`)
===============  ====================================================================================================

>>> from ampkit.lessons.transformers_in_16_bits import RECIPES
>>> list(RECIPES)
['fp32', 'bf16', 'fp16']
"""
from __future__ import annotations

from ampkit.lessons.transformers_in_16_bits.activations import (
    DTYPES,
    RECIPES,
    AttentionOverflow,
    Run,
    SdpaCheck,
    attention_overflow,
    gradient_errors,
    largest_logit,
    loss_rows,
    norm_rows,
    overflow_threshold,
    predicted_zero_share,
    sdpa_vs_manual,
    softmax_with_inf,
    step_activation_bytes,
    train_side_by_side,
    underflow_share,
)
from ampkit.lessons.transformers_in_16_bits.drift import LossParts, loss_difference_parts
from ampkit.lessons.transformers_in_16_bits.weights import (
    FIXES,
    MISMATCHES,
    FineTune,
    LoRALinear,
    dtype_mismatch,
    finetune_stored,
    kept_in_bf16,
    lost_updates,
    plateau_experiment,
    train_in_bf16,
    unscale_error,
)

__all__ = [
    # activations (sections 1–4)
    "DTYPES", "RECIPES", "Run", "train_side_by_side", "step_activation_bytes", "gradient_errors",
    "AttentionOverflow", "attention_overflow", "largest_logit", "overflow_threshold", "softmax_with_inf",
    "SdpaCheck", "sdpa_vs_manual", "norm_rows", "loss_rows", "underflow_share", "predicted_zero_share",
    # drift (section 1)
    "LossParts", "loss_difference_parts",
    # weights (sections 5–6)
    "plateau_experiment", "lost_updates", "kept_in_bf16", "train_in_bf16", "unscale_error", "MISMATCHES",
    "dtype_mismatch", "LoRALinear", "FIXES", "FineTune", "finetune_stored",
]
