"""Notebook 07 (``07_transformers_in_16_bits.ipynb``): a small decoder in 16 bits, on a CPU. A lesson.

- :mod:`~ampkit.lessons.transformers_in_16_bits.activations` (sections 1–4): fp32, bf16 and fp16 trained side by
  side, attention logits that overflow, a norm's mean of squares, the loss over a vocabulary;
- :mod:`~ampkit.lessons.transformers_in_16_bits.weights` (sections 5–6): bf16 weights that stop learning, a model
  stored in fp16 as a fine-tuner receives one.

>>> from ampkit.lessons.transformers_in_16_bits import RECIPES
>>> list(RECIPES)
['fp32', 'bf16', 'fp16']
"""
from __future__ import annotations

from ampkit.lessons.transformers_in_16_bits import activations as _activations
from ampkit.lessons.transformers_in_16_bits import weights as _weights
from ampkit.lessons.transformers_in_16_bits.activations import *  # noqa: F403
from ampkit.lessons.transformers_in_16_bits.weights import *  # noqa: F403

__all__ = [*_activations.__all__, *_weights.__all__]
