"""Notebook 07 (``07_transformers_in_16_bits.ipynb``), sections 5 and 6: weights stored in 16 bits.

Section 5, bf16 weights that stop learning: :func:`plateau_experiment` (a linear model fitted in fp32 and with bf16
weights updated by each mode of :class:`ampkit.precision.BF16Updates`), :func:`lost_updates` (which of the
decoder's bf16 weights would lose one AdamW update), :func:`kept_in_bf16` (which steps a bf16 weight keeps) and
:func:`train_in_bf16` (the decoder stored in bf16, trained: which weights moved at all). Section 6, a model stored in
fp16, as a fine-tuner receives one: the errors it meets (:func:`unscale_error`, :func:`dtype_mismatch`) and three
fixes (:func:`finetune_stored`: fp32 weights under autocast, fp32 trainable adapters, or bf16 without a scaler).

>>> lost = lost_updates(lr=1e-3)
>>> lost["norm gain"], lost["matrix"] < 0.01
(1.0, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.data import make_data
from ampkit.i18n import Word
from ampkit.models import DecoderBlock, DecoderLM, build_model, lm_loss
from ampkit.precision import MixedPrecision, apply_level
from ampkit.precision.bf16_updates import WRAPPER_MODES, BF16Updates
from ampkit.train import train_step

__all__ = ["plateau_experiment", "lost_updates", "kept_in_bf16", "train_in_bf16", "unscale_error", "MISMATCHES",
           "dtype_mismatch", "LoRALinear", "FIXES", "FineTune", "finetune_stored"]


def plateau_experiment(steps: int = 300, lr: float = 0.01, n: int = 64, d: int = 8, noise: float = 0.1,
                       seed: int = 0) -> dict[str, list[float]]:
    """Fit a linear model ``y = X w`` (``n`` points, ``d`` weights, targets with noise ``noise``) by SGD at
    learning rate ``lr``, in fp32 and with bf16 weights stored by each of :data:`WRAPPER_MODES`; returns each
    loss curve (mean squared error after every step, ``steps + 1`` values, the first before any step).

    The forward pass runs in fp32 on the (bf16) weights, so the curves differ only by how updates are stored.
    Weights start at 0 and grow to about 1-2, where bf16's gap is ``2**-7``: once ``lr * |grad|`` falls below
    half of it, ``"nearest"`` stops while the others go on to the fp32 loss.

    >>> curves = plateau_experiment(steps=50)
    >>> sorted(curves), len(curves["fp32"])
    (['fp32', 'kahan', 'master', 'nearest', 'stochastic'], 51)
    """
    if steps < 1 or n < 1 or d < 1:
        raise ValueError(f"steps, n and d must be at least 1; got steps={steps}, n={n}, d={d}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive finite number; got {lr}")
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    w_true = 1.0 + torch.rand(d, generator=g)
    y = X @ w_true + noise * torch.randn(n, generator=g)
    curves: dict[str, list[float]] = {}
    for name in ("fp32", *WRAPPER_MODES):
        dtype = torch.float32 if name == "fp32" else torch.bfloat16
        w = torch.nn.Parameter(torch.zeros(d, dtype=dtype))
        sgd = torch.optim.SGD([w], lr=lr)
        opt = sgd if name == "fp32" else BF16Updates(sgd, mode=name, seed=seed)
        losses = []
        for step in range(steps + 1):
            loss = ((X @ w.float() - y) ** 2).mean()
            losses.append(loss.item())
            if step < steps:
                opt.zero_grad()
                loss.backward()
                opt.step()
        curves[name] = losses
    return curves


def _kind(name: str, p: torch.Tensor) -> str:
    """The parameter's kind, a Word (07 prints the dicts keyed by it: shown in the kit's language)."""
    if p.dim() == 1:
        return Word("norm gain") if "norm" in name and name.endswith("weight") else Word("bias")
    return Word("embedding") if "embed" in name or name.startswith("pos") else Word("matrix")


def lost_updates(lr: float = 3e-3, seed: int = 0) -> dict[str, float]:
    """One AdamW step (learning rate ``lr``) of the decoder on one batch, computed in fp32; for each kind of
    parameter (``matrix``, ``embedding``, ``bias``, ``norm gain``), the share of the non-zero updates that
    round-to-nearest loses when the weight is stored in bf16 (``bf16(w + u) == bf16(w)``).

    Adam's first update is about ``lr`` for every weight. Matrices start near 0.02, where bf16's gap is about
    1e-4; norm gains start at 1.0, where half the gap is 2**-8 = 0.0039, more than the update."""
    lr = check_positive_finite("lr", lr, example="3e-3")
    model = build_model("decoder", seed=seed)
    x, y = make_data("decoder", seed=seed, n_samples=8)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    train_step(model, x, y, lm_loss, optimizer=opt)
    lost: dict[str, list[float]] = {}
    for n, p in model.named_parameters():
        u = p.detach() - before[n]
        w16 = before[n].to(torch.bfloat16)
        moved = u != 0
        gone = ((w16.float() + u).to(torch.bfloat16) == w16) & moved
        tally = lost.setdefault(_kind(n, p), [0.0, 0.0])
        tally[0] += float(gone.sum())
        tally[1] += float(moved.sum())
    return {k: (g / m if m else 0.0) for k, (g, m) in lost.items()}


def kept_in_bf16(weight: float, updates) -> list[bool]:
    """For a weight stored in bf16 (``weight`` rounded to bf16 first), whether each update of ``updates`` changes
    it with round-to-nearest (``bf16(w + u) != w``), the sum computed in fp32.

    >>> kept_in_bf16(1.0, [0.003, -0.003]), kept_in_bf16(1 - 2**-8, [0.003, -0.003])
    ([False, True], [True, True])
    """
    w16 = torch.tensor(float(weight)).to(torch.bfloat16)
    return [bool((w16.float() + float(u)).to(torch.bfloat16) != w16) for u in updates]


def train_in_bf16(lr: float = 3e-4, steps: int = 20, seed: int = 0) -> dict[str, float | str]:
    """Train the decoder stored in bf16 (``model.to(torch.bfloat16)``, no fp32 copy) with ``torch.optim.AdamW`` at
    ``lr`` for ``steps`` steps; returns, per kind of parameter (see :func:`lost_updates`), the share of its entries
    that differ from their start, and ``"moments"``: the dtype AdamW keeps its moments in (the parameter's own)."""
    lr = check_positive_finite("lr", lr, example="3e-4")
    model = build_model("decoder", seed=seed).to(torch.bfloat16)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    x, y = make_data("decoder", seed=seed, n_samples=4 * check_int("steps", steps))
    for i in range(steps):   # the kit's step on the model as it is: bf16 logits go to the loss as fp32
        train_step(model, x[4 * i: 4 * i + 4], y[4 * i: 4 * i + 4], lm_loss, optimizer=opt)
    moved: dict[str, list[float]] = {}
    for n, p in model.named_parameters():
        tally = moved.setdefault(_kind(n, p), [0.0, 0.0])
        tally[0] += float((p.detach() != before[n]).sum())
        tally[1] += p.numel()
    out: dict[str, float | str] = {k: c / t for k, (c, t) in moved.items()}
    out["moments"] = str(next(iter(opt.state.values()))["exp_avg"].dtype).removeprefix("torch.")
    return out


def _fp16_decoder(seed: int) -> nn.Module:
    return build_model("decoder", seed=seed, n_layers=1).half()


def unscale_error(seed: int = 0) -> str:
    """Train one step of a decoder stored in fp16 (``model.half()``) with ``torch.amp.GradScaler``: the message
    of the ``ValueError`` that ``scaler.step`` raises (GradScaler refuses to unscale fp16 gradients)."""
    model = _fp16_decoder(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    x, y = make_data("decoder", seed=seed, n_samples=4)
    scaler.scale(lm_loss(model(x).float(), y)).backward()
    try:
        scaler.step(opt)
    except ValueError as e:
        return str(e)
    raise AssertionError("GradScaler stepped fp16 parameters: this torch no longer refuses them")


#: Where an fp32 tensor meets an fp16-stored model, outside autocast (section 6): ``"fp32 input"`` (fp32 features
#: into an fp16 ``nn.Linear``), ``"fp32 softmax"`` (probabilities upcast to fp32 for a stable softmax, times fp16
#: values), ``"fp32 key cache"`` (fp16 queries times keys kept in fp32, with ``torch.bmm``) and ``"fp32 class
#: weights"`` (a class-weighted cross-entropy of the fp16 logits with the weights in fp32).
#: the cases (Words: each prints in the page's language and still equals its English)
MISMATCHES = (Word("fp32 input"), Word("fp32 softmax"), Word("fp32 key cache"), Word("fp32 class weights"))


def dtype_mismatch(case: str = "fp32 softmax", fix: bool = False, seed: int = 0) -> str | torch.Tensor:
    """Run one of :data:`MISMATCHES`: the message of the ``RuntimeError`` torch raises (``fix=False``), or the
    result once the two dtypes agree (``fix=True``): the fp32 tensor cast to the model's fp16 first (Hugging Face's
    attention casts its fp32 softmax back with ``.to(query.dtype)``), except for the loss, where the logits go to
    fp32 instead (section 4: the loss in fp32). The wording depends on the kernel, not on the cause.

    >>> dtype_mismatch("fp32 class weights")
    'expected scalar type Half but found Float'
    """
    case = check_choice("case", case, MISMATCHES)
    g = torch.Generator().manual_seed(seed)
    h16 = torch.randn(8, 8, 16, generator=g).half()
    other = torch.randn(8, 8, 16, generator=g)                       # fp32
    if case == "fp32 class weights":
        logits, target = h16.flatten(0, 1), torch.arange(64) % 16      # 64 positions, 16 classes
        weight = other[0, 0].abs() + 0.5                                # one fp32 weight per class
        try:
            return F.cross_entropy(logits.float() if fix else logits, target, weight=weight)
        except RuntimeError as e:
            return str(e)
    if fix:
        other = other.half()
    try:
        if case == "fp32 input":
            with torch.random.fork_rng(devices=[]):   # its weights from torch's RNG as it stands, which stays put
                lin = nn.Linear(16, 16).half()
            return lin(other)
        if case == "fp32 softmax":
            probs = torch.softmax(other @ other.transpose(1, 2), dim=-1)    # fp32 (or fp16 when fixed)
            return torch.bmm(probs, h16)
        return torch.bmm(h16, other.transpose(1, 2))
    except RuntimeError as e:
        return str(e)


class LoRALinear(nn.Module):
    """A frozen (fp16 or bf16) ``nn.Linear`` plus a trainable low-rank update ``B·A`` kept in fp32: the output is
    ``base(x) + (x·Aᵀ·Bᵀ)·scale``, cast to the input's dtype. ``B`` starts at zero, so the layer starts as the base
    (the LoRA recipe, Hu et al. 2021)."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        self.base = base.requires_grad_(False)
        rank = check_int("rank", rank)
        g = torch.Generator().manual_seed(rank)
        self.A = nn.Parameter(torch.randn(rank, base.in_features, generator=g) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = check_positive_finite("alpha", alpha, example="8.0") / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + ((x.float() @ self.A.T @ self.B.T) * self.scale).to(x.dtype)


#: The fixes of section 6: ``"fp32 + autocast"`` (the model cast to fp32 and trained under fp16 autocast with a
#: GradScaler: notebook 03's recipe), ``"fp32 adapters"`` (fp16 base frozen, LoRA adapters in fp32, GradScaler) and
#: ``"bf16"`` (the model stored in bf16, every parameter trained, no scaler; AdamW's moments then bf16 too).
FIXES = (Word("fp32 + autocast"), Word("fp32 adapters"), "bf16")   # Words: printed in the kit's language


@dataclass
class FineTune:
    """One fine-tuning run of :func:`finetune_stored`: its losses, how many parameters it trained out of the model's
    (adapters included), the dtype of AdamW's moments and how many steps the scaler skipped."""

    fix: str
    losses: list[float]
    trainable: int
    total: int
    moments: str
    skipped: int

    @property
    def share(self) -> float:
        return self.trainable / self.total


def finetune_stored(fix: str = "fp32 adapters", steps: int = 8, lr: float = 1e-2, seed: int = 0) -> FineTune:
    """Fine-tune a decoder stored in fp16 (as received) with one of :data:`FIXES` for ``steps`` AdamW steps on the
    same batches."""
    fix = check_choice("fix", fix, FIXES)
    steps = check_int("steps", steps)
    model = build_model("decoder", seed=seed, n_layers=1, context=32).half()
    assert isinstance(model, DecoderLM)  # build_model's "decoder"
    scaler = None
    if fix == "bf16":
        model = model.to(torch.bfloat16)
    elif fix == "fp32 + autocast":
        model = model.float()
        scaler = torch.amp.GradScaler("cpu")
    else:
        model = model.requires_grad_(False)
        for block in model.blocks:
            assert isinstance(block, DecoderBlock)
            # module surgery: the adapter takes the Linear's place as the child module of that name (nn.Module's
            # add_module replaces it; models.py types the attribute as the Linear it builds)
            block.attn.add_module("qkv", LoRALinear(block.attn.qkv))
        model.add_module("head", LoRALinear(model.head))
        scaler = torch.amp.GradScaler("cpu")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=check_positive_finite("lr", lr, example="1e-2"))
    # the kit's step: "fp32 + autocast" is O1 (fp16 autocast), the others step the stored model as it is
    mp = apply_level(model, opt, "O1", "fp16") if fix == "fp32 + autocast" else MixedPrecision.plain(model, opt)
    x, y = make_data("decoder", seed=seed, n_samples=8 * steps, context=32)
    losses, skipped = [], 0
    for i in range(steps):
        before = scaler.get_scale() if scaler is not None else 0.0
        losses.append(float(train_step(mp, x[8 * i: 8 * i + 8], y[8 * i: 8 * i + 8], lm_loss, scaler)))
        skipped += scaler is not None and scaler.get_scale() < before
    moments = str(opt.state[params[0]]["exp_avg"].dtype).removeprefix("torch.")
    return FineTune(fix, losses, sum(p.numel() for p in params), sum(p.numel() for p in model.parameters()),
                    moments, int(skipped))
