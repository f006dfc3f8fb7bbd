"""The non-finite hunter and the AMP doctor of notebook 05 pointed at the decoder: the first inf found in attention.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. :func:`overflowing_decoder` builds a decoder whose
attention logits overflow fp16: one head of size 64, ``attention="manual"`` and the first LayerNorm of each block
with a large gain (``gain``: large activations, as trained models have in some channels). With
``scale_at="logits"`` the product q·kᵀ is formed before the 1/√d scale and passes fp16's largest number (65504);
with ``scale_at="q"`` q is scaled first and the same logits stay 8 times smaller.

:func:`hunt_decoder` runs the kit's training step (O1, fp16 autocast, ``torch.amp.GradScaler`` recorded by
:class:`ampkit.diagnose.RecordingScaler`) under :func:`ampkit.diagnose.hunt` once, then a few steps for the doctor's
:func:`ampkit.diagnose.classify_run`, and asks notebook 05's ``diagnose_model`` about one batch.

:func:`first_forward_inf` hunts one fp16 forward pass only; :func:`overflow_gain` finds by bisection the smallest
gain at which that hunt names the matmul; :func:`fp16_attention_finite` runs block 0's fp16 q, k, v through the
written-out attention's q·kᵀ and through ``F.scaled_dot_product_attention``.

Note: the causal mask itself writes ``-inf`` above the diagonal (``masked_fill``), by design. In a model that does
not overflow, that is the first non-finite value the hunter sees; a real overflow shows up as an earlier op (the
matmul ``aten.bmm``).

>>> from ampkit.formats import FP16_MAX
>>> x, _ = decoder_batches(1)[0]
>>> raw_logit_max(overflowing_decoder("logits"), x) > FP16_MAX     # q·kᵀ passes 65504 (hunt_decoder finds where)
True
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.diagnose import Diagnosis, NonFiniteEvent, RecordingScaler, classify_run, hunt
from ampkit.i18n import tr
from ampkit.lessons.amp_in_practice import DoctorReport, diagnose_model
from ampkit.lessons.transformers_compiled_and_sharded.task import decoder_batches, small_decoder
from ampkit.models import SCALE_AT, DecoderBlock, DecoderLM, lm_loss
from ampkit.precision import apply_level
from ampkit.train import train_step

__all__ = ["overflowing_decoder", "raw_logit_max", "DecoderHunt", "hunt_decoder", "first_forward_inf",
           "overflow_gain", "fp16_attention_finite"]


def overflowing_decoder(scale_at: str = "logits", gain: float = 400.0, seed: int = 0) -> DecoderLM:
    """The small decoder with one head of size 64 (``d_model=64``), manual attention, ``scale_at`` and each block's
    ``norm1`` gain multiplied by ``gain``."""
    scale_at = check_choice("scale_at", scale_at, SCALE_AT)
    gain = check_positive_finite("gain", gain, example="400.0")
    model = small_decoder(seed, d_model=64, n_heads=1, attention="manual", scale_at=scale_at)
    with torch.no_grad():
        for block in model.blocks:
            assert isinstance(block, DecoderBlock)
            weight = block.norm1.weight
            assert isinstance(weight, torch.Tensor)
            weight.mul_(gain)
    return model


def _block0_qkv(model: DecoderLM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    block = model.blocks[0]
    assert isinstance(block, DecoderBlock)
    h = block.norm1(model.embed(x) + model.pos(torch.arange(x.shape[1])))
    n, t, d = h.shape
    q, k, v = block.attn.qkv(h).reshape(n, t, 3, block.attn.n_heads, block.attn.head_dim).permute(2, 0, 3, 1, 4)
    return q, k, v


def raw_logit_max(model: DecoderLM, x: torch.Tensor) -> float:
    """The largest |q·kᵀ| (before the 1/√d scale) in the first block, computed in fp32 on batch ``x``."""
    with torch.no_grad():
        q, k, _ = _block0_qkv(model, x)
        return float((q @ k.transpose(-2, -1)).abs().max())


def fp16_attention_finite(model: DecoderLM, x: torch.Tensor) -> tuple[bool, bool]:
    """Block 0's q, k, v (computed in fp32, then rounded to fp16): is the written-out product q·kᵀ finite in fp16,
    and is ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``'s output finite in fp16?"""
    with torch.no_grad():
        q, k, v = (t.half() for t in _block0_qkv(model, x))
        manual = bool(torch.isfinite(q @ k.transpose(-2, -1)).all())
        sdpa = bool(torch.isfinite(F.scaled_dot_product_attention(q, k, v, is_causal=True)).all())
    return manual, sdpa


def first_forward_inf(scale_at: str = "logits", gain: float = 400.0, seed: int = 0) -> NonFiniteEvent | None:
    """The hunter's first inf/NaN in one fp16 O1 *forward pass* of :func:`overflowing_decoder` on the first batch."""
    model = overflowing_decoder(scale_at, gain, seed)
    x, _ = decoder_batches(1, seed=seed)[0]
    mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.01), "O1", "fp16")
    with torch.no_grad():
        return hunt(model, lambda: mp.forward(x))


def overflow_gain(scale_at: str = "logits", lo: float = 1.0, hi: float = 1000.0, rel_tol: float = 1e-3,
                  seed: int = 0) -> float:
    """The smallest gain (to ``rel_tol``) at which :func:`first_forward_inf` names ``aten.bmm``, by bisection
    between ``lo`` (must not overflow) and ``hi`` (must)."""
    lo, hi = check_positive_finite("lo", lo, example="1.0"), check_positive_finite("hi", hi, example="1000.0")

    def overflows(g: float) -> bool:
        first = first_forward_inf(scale_at, g, seed)
        return first is not None and first.op == "aten.bmm"

    if overflows(lo) or not overflows(hi):
        raise ValueError(tr("overflow_gain needs a gain lo={lo:g} whose q·kᵀ stays finite in fp16 and hi={hi:g} "
                            "whose q·kᵀ overflows", lo=lo, hi=hi))
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if overflows(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class DecoderHunt:
    """What the hunter and the doctor said about one fp16 decoder."""

    scale_at: str
    raw_logit_max: float             # fp32 |q·kᵀ| max in block 0 on the hunted batch
    first: NonFiniteEvent | None     # the hunter's first inf/NaN in one training step
    losses: tuple[float, ...]        # the doctor's run
    skipped: tuple[bool, ...]
    diagnosis: Diagnosis             # classify_run of that run's scaler history
    report: DoctorReport             # notebook 05's diagnose_model on one batch


def hunt_decoder(scale_at: str = "logits", gain: float = 400.0, steps: int = 6, seed: int = 0) -> DecoderHunt:
    """Hunt one O1 fp16 training step of :func:`overflowing_decoder`, then train a fresh copy ``steps`` steps with a
    recorded GradScaler and classify the run; finally ``diagnose_model`` on the first batch."""
    steps = check_int("steps", steps)
    data = decoder_batches(steps, seed=seed)
    x, y = data[0]
    model = overflowing_decoder(scale_at, gain, seed)
    raw = raw_logit_max(model, x)
    mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.01), "O1", "fp16")
    first = hunt(model, lambda: train_step(mp, x, y, lm_loss, torch.amp.GradScaler("cpu")))

    model = overflowing_decoder(scale_at, gain, seed)
    mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.01), "O1", "fp16")
    rec = RecordingScaler(torch.amp.GradScaler("cpu"))
    losses = tuple(train_step(mp, xb, yb, lm_loss, rec).item() for xb, yb in data)
    report = diagnose_model(overflowing_decoder(scale_at, gain, seed), x, y, lm_loss, "fp16")
    return DecoderHunt(scale_at, raw, first, losses, tuple(rec.history.skipped), classify_run(rec.history), report)
