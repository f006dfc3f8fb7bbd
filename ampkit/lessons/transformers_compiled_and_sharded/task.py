"""The small decoder and the character batches that every experiment of notebook 08 trains on.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. One place for the sizes, so that the compiled, the
checkpointed, the sharded and the hunted runs all start from the same seeded weights and see the same batches.

>>> model = small_decoder()
>>> [tuple(x.shape) for x, _ in decoder_batches(2)]
[(8, 32), (8, 32)]
"""
from __future__ import annotations

import torch

from ampkit._util import check_int
from ampkit.data import CHAR_VOCAB, char_batches, make_corpus
from ampkit.models import DecoderLM, build_model

__all__ = ["SMALL", "small_decoder", "decoder_batches"]

#: The decoder's sizes in notebook 08: 2 layers, 2 heads, width 32, a context of 32 characters.
SMALL: dict[str, int] = {"context": 32, "d_model": 32, "n_heads": 2, "n_layers": 2}


def small_decoder(seed: int = 0, **kw) -> DecoderLM:
    """``build_model("decoder", seed, **SMALL)``; keywords override the sizes (e.g. ``n_layers=4``)."""
    model = build_model("decoder", seed=seed, **{**SMALL, **kw})
    assert isinstance(model, DecoderLM)  # build_model's "decoder"
    return model


def decoder_batches(steps: int, batch_size: int = 8, context: int = 32, seed: int = 0,
                    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` seeded batches ``(x, y)`` of next-character windows from the kit's corpus (4096 characters)."""
    steps = check_int("steps", steps)
    ids = CHAR_VOCAB.encode(make_corpus(4096, seed=0))
    return list(char_batches(ids, check_int("batch_size", batch_size), check_int("context", context),
                             seed=check_int("seed", seed, minimum=0), steps=steps))
