"""Activation checkpointing under autocast: the same gradients, fewer saved activations.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. :func:`with_checkpointing` wraps every
:class:`~ampkit.models.DecoderBlock` of a copy of a decoder in ``torch.utils.checkpoint.checkpoint(block, x,
use_reentrant=False)``: the block's forward keeps only its input for backward and runs again during backward.
:func:`checkpoint_experiment` takes one step of the kit's training step (O1 autocast) with and without it and
compares the gradients bit for bit; :func:`saved_activation_bytes` counts the bytes autograd saved for backward with
``torch.autograd.graph.saved_tensors_hooks`` (each storage once, parameters left out), not by timing.
:func:`linear_calls` counts, over every block, how often each ``nn.Linear`` starts its forward and how often it
returns from it in one step: the non-reentrant checkpoint stops the recomputation as soon as every saved tensor is
back (``early_stop=True``, torch's default), inside the block's last ``Linear``. :func:`default_variant` calls
``checkpoint`` without ``use_reentrant`` and reports what torch 2.13 does: a warning, then the reentrant variant.

>>> [type(b).__name__ for b in with_checkpointing(small_decoder()).blocks]
['Checkpointed', 'Checkpointed']
"""
from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from ampkit._util import saved_tensor_bytes
from ampkit.dtypes import short_name
from ampkit.lessons.transformers_compiled_and_sharded.task import decoder_batches, small_decoder
from ampkit.models import DecoderBlock, DecoderLM, lm_loss
from ampkit.precision import MixedPrecision, apply_level
from ampkit.train import train_step

__all__ = ["Checkpointed", "with_checkpointing", "saved_activation_bytes", "CheckpointResult", "checkpoint_experiment",
           "LinearCalls", "linear_calls", "DefaultVariant", "default_variant"]


class Checkpointed(nn.Module):
    """``module`` run through ``torch.utils.checkpoint.checkpoint(module, x, use_reentrant=False)``."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.module, x, use_reentrant=False)


def with_checkpointing(model: DecoderLM) -> DecoderLM:
    """A deep copy of ``model`` with each block wrapped in :class:`Checkpointed` (same weights, same order)."""
    if not isinstance(model, DecoderLM):
        raise TypeError(f"with_checkpointing takes a DecoderLM (build_model('decoder')); got {type(model).__name__}")
    out = copy.deepcopy(model)
    out.blocks = nn.ModuleList(Checkpointed(b) for b in out.blocks)
    return out


def saved_activation_bytes(model: nn.Module, fn: Callable[[], object]) -> int:
    """Run ``fn()`` and return the bytes of the tensors autograd saved for backward meanwhile: each storage counted
    once, ``model``'s parameters (kept anyway) left out (:func:`ampkit._util.saved_tensor_bytes`)."""
    return saved_tensor_bytes(fn, leave_out=model.parameters())


@dataclass(frozen=True)
class CheckpointResult:
    """One O1 step of the same decoder without and with checkpointing."""

    dtype: str
    grads_equal: bool                    # every gradient the same bits
    max_abs_grad_diff: float
    saved_bytes_plain: int
    saved_bytes_checkpointed: int
    qkv_dtypes_plain: tuple[str, ...]         # output dtype of blocks.0's attention qkv Linear, per call
    qkv_dtypes_checkpointed: tuple[str, ...]  # the second call is the recomputation during backward


def _step(model: DecoderLM, qkv: nn.Module, dtype: str, x, y) -> tuple[list[torch.Tensor], int, tuple[str, ...]]:
    mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.1), "O1", dtype)
    seen: list[str] = []
    handle = qkv.register_forward_hook(lambda mod, args, out: seen.append(short_name(out.dtype)))
    grads: list[torch.Tensor] = []

    def keep_grads(m: MixedPrecision) -> None:
        for p in m.params:
            assert p.grad is not None  # after backward: the loss uses every parameter
            grads.append(p.grad.detach().clone())

    try:
        n = saved_activation_bytes(model, lambda: train_step(mp, x, y, lm_loss, after_backward=keep_grads))
    finally:
        handle.remove()
    return grads, n, tuple(seen)


def checkpoint_experiment(dtype: str = "bf16", seed: int = 0, batch_size: int = 16, **model_kw) -> CheckpointResult:
    """One training step (level O1 in ``dtype``) of the small decoder, plain and with every block checkpointed."""
    plain = small_decoder(seed, **model_kw)
    ckpt = with_checkpointing(plain)
    x, y = decoder_batches(1, batch_size, plain.context, seed)[0]
    b0, c0 = plain.blocks[0], ckpt.blocks[0]
    assert isinstance(b0, DecoderBlock) and isinstance(c0, Checkpointed) and isinstance(c0.module, DecoderBlock)
    g0, n0, d0 = _step(plain, b0.attn.qkv, dtype, x, y)
    g1, n1, d1 = _step(ckpt, c0.module.attn.qkv, dtype, x, y)
    diff = max(float((a - b).abs().max()) for a, b in zip(g0, g1))
    return CheckpointResult(short_name(dtype), all(torch.equal(a, b) for a, b in zip(g0, g1)), diff, n0, n1, d0, d1)


@dataclass(frozen=True)
class LinearCalls:
    """Per ``nn.Linear`` (by name) of one training step: forward calls started (forward pre-hooks) and finished
    (forward hooks, which run when ``forward`` returns)."""

    started: dict[str, int]
    finished: dict[str, int]

    @property
    def total_started(self) -> int:
        return sum(self.started.values())

    @property
    def total_finished(self) -> int:
        return sum(self.finished.values())


def linear_calls(n_layers: int = 4, checkpointed: bool = True, early_stop: bool = True, dtype: str = "bf16",
                 seed: int = 0, batch_size: int = 16) -> LinearCalls:
    """One O1 step (in ``dtype``) of the small decoder with ``n_layers`` blocks, every block checkpointed or none;
    count the calls of every ``nn.Linear`` (each block's ``attn.qkv``, ``attn.proj``, ``mlp.0``, ``mlp.2``, and
    the ``head``). ``early_stop``: ``torch.utils.checkpoint.set_checkpoint_early_stop`` for the step."""
    model = small_decoder(seed, n_layers=n_layers)
    if checkpointed:
        model = with_checkpointing(model)
    started: dict[str, int] = {}
    finished: dict[str, int] = {}
    handles = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear):
            name = name.replace(".module.", ".")
            started[name] = finished[name] = 0
            handles.append(mod.register_forward_pre_hook(
                lambda m, a, name=name: started.__setitem__(name, started[name] + 1)))
            handles.append(mod.register_forward_hook(
                lambda m, a, o, name=name: finished.__setitem__(name, finished[name] + 1)))
    x, y = decoder_batches(1, batch_size, model.context, seed)[0]
    mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.1), "O1", dtype)
    try:
        with set_checkpoint_early_stop(bool(early_stop)):
            train_step(mp, x, y, lm_loss)
    finally:
        for h in handles:
            h.remove()
    return LinearCalls(started, finished)


@dataclass(frozen=True)
class DefaultVariant:
    """What ``torch.utils.checkpoint.checkpoint(fn, x)`` without ``use_reentrant`` did in this torch."""

    warned: bool           # a warning was issued
    message: str           # its first sentence
    raised: bool           # an exception instead (the warning's announced future)
    grad_fn: str           # the output's grad_fn: CheckpointFunctionBackward is the reentrant variant


def default_variant() -> DefaultVariant:
    """Call ``checkpoint(lambda t: t * 2, x)`` with no ``use_reentrant`` and record the warning and the variant."""
    x = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = checkpoint(lambda t: t * 2, x)
        except Exception as e:   # a later torch may raise, as its warning says
            return DefaultVariant(bool(caught), str(caught[0].message) if caught else "", True, type(e).__name__)
    message = str(caught[0].message).split(". ")[0] if caught else ""
    return DefaultVariant(bool(caught), message, False, type(out.grad_fn).__name__)
