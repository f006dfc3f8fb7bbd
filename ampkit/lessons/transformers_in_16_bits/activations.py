"""Notebook 07 (``07_transformers_in_16_bits.ipynb``): where a transformer breaks in 16 bits, on a CPU.

The experiments of its sections 1–4: the small decoder (:class:`ampkit.models.DecoderLM`) trained in fp32, bf16
and fp16 side by side (:func:`train_side_by_side`, :func:`gradient_errors`), attention logits that overflow
(:func:`attention_overflow`, :func:`softmax_with_inf`, :func:`sdpa_vs_manual`) and where they start to
(:func:`largest_logit`, :func:`overflow_threshold`), a norm's mean of squares (:func:`norm_rows`) and the loss over a
vocabulary (:func:`loss_rows`, :func:`underflow_share`, :func:`predicted_zero_share`). Sections 5–6 (bf16 weights,
a model stored in fp16) are in :mod:`ampkit.lessons.transformers_in_16_bits.weights`.

Low-precision arithmetic here is the arithmetic of the dtype itself, as CPU autocast runs it: a matmul of fp16
tensors gives fp16, and ``softmax`` of fp16 logits stays in fp16 on the CPU (CPU autocast does not list softmax;
CUDA autocast casts it to fp32 — notebook 07 probes both).

>>> r = attention_overflow(60.0, 64, "fp16", scale_at="logits")
>>> r.overflowed, r.nan_rows > 0
(True, True)
>>> attention_overflow(60.0, 64, "fp16", scale_at="q").overflowed
False
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ampkit._util import check_choice, check_int, check_positive_finite, saved_tensor_bytes
from ampkit.data import make_data
from ampkit.formats import format_name, info
from ampkit.models import SCALE_AT, build_model, lm_loss
from ampkit.precision import MixedPrecision, apply_level
from ampkit.protocols import as_scaler
from ampkit.train import History, make_optimizer, train

__all__ = ["DTYPES", "RECIPES", "Run", "train_side_by_side", "step_activation_bytes", "gradient_errors",
           "AttentionOverflow", "attention_overflow", "largest_logit", "overflow_threshold", "softmax_with_inf",
           "SdpaCheck", "sdpa_vs_manual", "norm_rows", "loss_rows", "underflow_share", "predicted_zero_share"]

#: The three formats of the notebook, by the kit's short name.
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
#: The three training runs of section 1: (level, autocast dtype, with a loss scaler).
RECIPES: dict[str, tuple[str, str, bool]] = {"fp32": ("O0", "bf16", False), "bf16": ("O1", "bf16", False),
                                           "fp16": ("O1", "fp16", True)}


def _dtype(name: str) -> torch.dtype:
    return DTYPES[check_choice("dtype", name, tuple(DTYPES))]


# -- section 1: the model trained three ways ------------------------------------------------------------------------

@dataclass
class Run:
    """One training run of section 1: its :class:`~ampkit.train.History` (losses, step times, scales) and memory."""

    name: str
    history: History
    param_bytes: int       # the model's parameters as stored
    saved_bytes: int       # what the forward pass keeps for the backward pass (one batch)
    weights: torch.Tensor | None = None     # every parameter after the last step, flattened, in fp32


def step_activation_bytes(mp: MixedPrecision, x: torch.Tensor, y: torch.Tensor) -> int:
    """Bytes of the tensors the forward pass and the loss save for the backward pass (each storage counted once):
    the activation memory of one step, counted by :func:`ampkit._util.saved_tensor_bytes`, not timed."""
    return saved_tensor_bytes(lambda: lm_loss(mp.forward(x), y))


def train_side_by_side(steps: int = 30, batch_size: int = 8, lr: float = 3e-3, seed: int = 0, n_samples: int = 512,
                       **model_kw) -> dict[str, Run]:
    """Train the same :class:`~ampkit.models.DecoderLM` (same start, same batches) in fp32 (O0), under bf16
    autocast (O1) and under fp16 autocast with ``torch.amp.GradScaler`` (O1), with AdamW, on the CPU; one
    :class:`Run` per mode of :data:`RECIPES`. ``model_kw`` go to the model (``n_layers``, ``d_model``, ...).

    >>> runs = train_side_by_side(steps=2, batch_size=2, n_samples=8, n_layers=1, d_model=16, context=16)
    >>> sorted(runs), runs["fp16"].history.steps
    (['bf16', 'fp16', 'fp32'], 2)
    """
    steps, batch_size = check_int("steps", steps), check_int("batch_size", batch_size)
    context = model_kw.get("context", 64)
    data = make_data("decoder", seed=seed, n_samples=n_samples, context=context)
    runs: dict[str, Run] = {}
    for name, (level, dtype, scaled) in RECIPES.items():
        model = build_model("decoder", seed=seed, **model_kw)
        mp = apply_level(model, make_optimizer("adamw", model.parameters(), lr), level, dtype)
        scaler = as_scaler(torch.amp.GradScaler("cpu")) if scaled else None
        memory = step_activation_bytes(mp, data[0][:batch_size], data[1][:batch_size])
        hist = train(mp, data, scaler=scaler, steps=steps, batch_size=batch_size, loss_fn=lm_loss, seed=seed)
        params = sum(p.numel() * p.element_size() for p in mp.model.parameters())
        weights = torch.cat([p.detach().float().flatten() for p in mp.model.parameters()])
        runs[name] = Run(name, hist, params, memory, weights)
    return runs


def gradient_errors(batch_size: int = 4, seed: int = 0, **model_kw) -> dict[str, float]:
    """The first step's gradients of :func:`train_side_by_side`'s bf16 and fp16 runs against the fp32 run's (same
    weights, same batch): ``|g - g_fp32| / |g_fp32|`` over all parameters (fp16 with GradScaler's 2**16, unscaled)."""
    data = make_data("decoder", seed=seed, n_samples=batch_size, context=model_kw.get("context", 64))
    grads = {}
    for name, (level, dtype, scaled) in RECIPES.items():
        model = build_model("decoder", seed=seed, **model_kw)
        mp = apply_level(model, make_optimizer("adamw", model.parameters(), 1e-3), level, dtype)
        scale = 2.0 ** 16 if scaled else 1.0
        (lm_loss(mp.forward(data[0]), data[1]) * scale).backward()
        parts = []
        for p in mp.model.parameters():
            assert p.grad is not None  # the loss uses every parameter
            parts.append(p.grad.flatten() / scale)
        grads[name] = torch.cat(parts)
    ref = grads.pop("fp32")
    return {name: float((g - ref).norm() / ref.norm()) for name, g in grads.items()}


# -- section 2: attention -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttentionOverflow:
    """One attention's logits in one format: the largest magnitude the matmul produced (``matmul_max``: q·kᵀ, or
    (q/√d)·kᵀ when the scale comes first; ``inf`` once it overflowed), the largest scaled logit (``largest``), the
    format's largest finite number, and the share of softmax rows that came out with a NaN."""

    dtype: str
    act_scale: float
    head_dim: int
    scale_at: str
    matmul_max: float
    largest: float
    fmt_max: float
    nan_rows: float

    @property
    def overflowed(self) -> bool:
        return math.isinf(self.matmul_max)


def _qk(act_scale: float, head_dim: int, tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k from N(0, act_scale²), each from its own stream: a longer context extends the same sequence (its
    first ``n`` rows are those of the ``n``-token draw), so its largest product can only grow."""
    q = torch.randn(tokens, head_dim, generator=torch.Generator().manual_seed(2 * seed)) * act_scale
    k = torch.randn(tokens, head_dim, generator=torch.Generator().manual_seed(2 * seed + 1)) * act_scale
    return q, k


def attention_overflow(act_scale: float, head_dim: int, dtype: str = "fp16", scale_at: str = "logits",
                       tokens: int = 64, seed: int = 0) -> AttentionOverflow:
    """One head's causal attention on queries and keys drawn from N(0, ``act_scale``²), computed in ``dtype``:
    the logits ``q·kᵀ/√d`` with the scale applied to q before the matmul (``scale_at="q"``) or to the logits after
    it (``"logits"``), the causal mask (-inf above the diagonal) and the softmax, all in ``dtype``.

    One q·k of independent q and k has a spread of about ``act_scale² · √head_dim``; the largest of the
    ``tokens·(tokens+1)/2`` products is several spreads (:func:`largest_logit`), and correlated q and k reach
    ``act_scale² · head_dim``. The scale after the matmul comes too late when the product passes the format's
    maximum (fp16: 65504).
    """
    act_scale = check_positive_finite("act_scale", act_scale, example="30.0")
    head_dim, tokens = check_int("head_dim", head_dim), check_int("tokens", tokens)
    scale_at = check_choice("scale_at", scale_at, SCALE_AT)
    dt = _dtype(dtype)
    q, k = (t.to(dt) for t in _qk(act_scale, head_dim, tokens, seed))
    scale = 1.0 / math.sqrt(head_dim)
    product = (q * scale) @ k.T if scale_at == "q" else q @ k.T
    logits = product if scale_at == "q" else product * scale
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    probs = torch.softmax(logits.masked_fill(~causal, float("-inf")), dim=-1)

    def visible_max(t: torch.Tensor) -> float:
        return float(t.float().abs().masked_fill(~causal, 0.0).max())

    return AttentionOverflow(dtype, act_scale, head_dim, scale_at, visible_max(product), visible_max(logits),
                             torch.finfo(dt).max, float(probs.isnan().any(-1).float().mean()))


def largest_logit(head_dim: int = 64, tokens: int = 64, seed: int = 0, correlated: bool = False) -> float:
    """The largest |q·k| among the ``tokens·(tokens+1)/2`` products a causal head computes, for q and k drawn from
    N(0, 1) as :func:`attention_overflow` draws them (times s² for activation scale s), computed in fp32.
    ``correlated=True`` takes k = q: each q·q is a sum of d squares, about d (not √d).

    >>> largest_logit(64, 64) > 64 ** 0.5 * 3        # several spreads: the largest of 2080 products
    True
    """
    q, k = _qk(1.0, check_int("head_dim", head_dim), check_int("tokens", tokens), seed)
    if correlated:
        k = q
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    return float((q @ k.T).abs().masked_fill(~causal, 0.0).max())


def overflow_threshold(head_dim: int = 64, tokens: int = 64, dtype: str = "fp16", scale_at: str = "logits",
                       seed: int = 0, correlated: bool = False) -> float:
    """The activation scale s from which :func:`attention_overflow`'s matmul output rounds to inf in ``dtype``:
    ``sqrt(limit / M)`` with M the :func:`largest_logit` (divided by √d when the scale is on q) and limit the
    smallest magnitude that rounds to inf, ``formats.info(dtype).overflow_threshold`` (fp16: 65520). The rounding of
    q and k to ``dtype`` moves it by a fraction of a per cent.

    >>> t = overflow_threshold(64, 64)
    >>> attention_overflow(0.99 * t, 64).overflowed, attention_overflow(1.01 * t, 64).overflowed
    (False, True)
    """
    scale_at = check_choice("scale_at", scale_at, SCALE_AT)
    m = largest_logit(head_dim, tokens, seed, correlated)
    if scale_at == "q":
        m /= math.sqrt(head_dim)
    return math.sqrt(info(_dtype(dtype)).overflow_threshold / m)


def softmax_with_inf(n: int = 6, dtype: str = "fp16") -> torch.Tensor:
    """``softmax`` of one row of ``n`` logits in which one logit is ``+inf`` (an overflowed q·k): the row's max is
    inf, ``inf - inf`` is NaN, and the NaN reaches every entry through the row's sum.

    >>> softmax_with_inf(4).isnan().tolist()
    [True, True, True, True]
    """
    n = check_int("n", n, minimum=2)
    row = torch.linspace(-1.0, 1.0, n).to(_dtype(dtype))
    row[n // 2] = float("inf")
    return torch.softmax(row, dim=-1)


@dataclass(frozen=True)
class SdpaCheck:
    """Written-out attention vs ``F.scaled_dot_product_attention`` and vs GPT-2's upcast path on the same
    fp16/bf16 inputs: the share of output rows with a NaN in each, and the largest error against float64 of the
    fused function and of the upcast path. ``autocast_cast_max``/``autocast_cast_dtype``: q and k cast to fp32
    (as GPT-J's eager attention does) but multiplied under CPU autocast of ``dtype``: the largest |q·k| and its
    dtype (autocast casts the matmul's inputs back down, so fp16 gives inf again)."""

    dtype: str
    manual_nan_rows: float
    sdpa_nan_rows: float
    sdpa_max_error: float
    upcast_nan_rows: float
    upcast_max_error: float
    autocast_cast_max: float
    autocast_cast_dtype: str


def sdpa_vs_manual(act_scale: float = 60.0, head_dim: int = 64, dtype: str = "fp16", tokens: int = 64,
                   seed: int = 0) -> SdpaCheck:
    """The same causal attention written out (scale after the matmul, all in ``dtype``), through
    ``F.scaled_dot_product_attention(is_causal=True)``, and GPT-2's ``reorder_and_upcast_attn`` path as Hugging
    Face writes it (q and k cast to fp32, ``torch.baddbmm(..., beta=0, alpha=1/√d)``, the softmax in fp32, the
    probabilities cast back before the product with v); values v from N(0, 1)."""
    dt = _dtype(dtype)
    q, k = _qk(check_positive_finite("act_scale", act_scale, example="60.0"), check_int("head_dim", head_dim),
               check_int("tokens", tokens), seed)
    v = torch.randn(tokens, head_dim, generator=torch.Generator().manual_seed(1000 + seed))
    q4, k4, v4 = (t[None, None] for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q4.double(), k4.double(), v4.double(), is_causal=True)
    low = [t.to(dt) for t in (q4, k4, v4)]
    fused = F.scaled_dot_product_attention(low[0], low[1], low[2], is_causal=True)
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    logits = (low[0] @ low[1].transpose(-2, -1)) / math.sqrt(head_dim)
    manual = torch.softmax(logits.masked_fill(~causal, float("-inf")), dim=-1) @ low[2]
    q3, k3 = low[0][0].float(), low[1][0].float().transpose(-2, -1)
    scores = torch.baddbmm(torch.empty(1, tokens, tokens), q3, k3, beta=0, alpha=1.0 / math.sqrt(head_dim))
    upcast = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1).to(dt) @ low[2][0]
    with torch.autocast("cpu", dtype=dt):                       # GPT-J's fp32 cast, inside an autocast region
        cast = low[0][0].float() @ low[1][0].float().transpose(-2, -1)

    def nan_rows(out: torch.Tensor) -> float:
        return float(out.isnan().any(-1).float().mean())

    def error(out: torch.Tensor) -> float:
        return float((out.double() - ref.reshape(out.shape)).abs().max())

    return SdpaCheck(dtype, nan_rows(manual), nan_rows(fused), error(fused), nan_rows(upcast), error(upcast),
                     float(cast.float().abs().masked_fill(~causal, 0.0).max()), format_name(cast.dtype))


# -- section 3: norms -----------------------------------------------------------------------------------------------

def _rms(x: torch.Tensor, stat_dtype: torch.dtype | None) -> torch.Tensor:
    h = x if stat_dtype is None else x.to(stat_dtype)
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def norm_rows(magnitudes=(100.0, 255.0, 256.0, 300.0, 1000.0), dim: int = 64, dtype: str = "fp16"
              ) -> list[dict[str, float]]:
    """For each magnitude m, a vector of ``dim`` values ±m in ``dtype`` normalised three ways; each row gives
    ``x²`` in the format, the first output of RMSNorm with its mean of squares in ``dtype`` (``out_low``; ±1 is
    right), and the largest error against the fp32 result of: that RMSNorm (``rms_low``), RMSNorm with the statistic
    in fp32 and cast back (``rms_fp32_stat``), and ``F.layer_norm`` on the ``dtype`` input (``layer_norm``).

    >>> [r["rms_low"] > 0.5 for r in norm_rows((255.0, 256.0))]
    [False, True]
    """
    dt = _dtype(dtype)
    dim = check_int("dim", dim, minimum=2)
    signs = torch.tensor([1.0, -1.0]).repeat(dim // 2 + 1)[:dim]
    rows = []
    for m in magnitudes:
        x32 = signs * check_positive_finite("magnitude", m, example="300.0")
        x = x32.to(dt)
        ref_rms, ref_ln = _rms(x.float(), None), F.layer_norm(x.float(), (dim,))
        low = _rms(x, None).float()
        rows.append({"magnitude": float(m), "square": float(x[0] * x[0]), "out_low": float(low[0]),
                     "rms_low": float((low - ref_rms).abs().max()),
                     "rms_fp32_stat": float((_rms(x, torch.float32).float() - ref_rms).abs().max()),
                     "layer_norm": float((F.layer_norm(x, (dim,)).float() - ref_ln).abs().max())})
    return rows


# -- section 4: the loss --------------------------------------------------------------------------------------------

def _logits(vocab: int, n: int, logit_std: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    vocab, n = check_int("vocab", vocab, minimum=2), check_int("n", n)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, vocab, generator=g) * check_positive_finite("logit_std", logit_std, example="2.0")
    return logits, torch.randint(0, vocab, (n,), generator=g)


#: Section 4's ways of computing the loss: (the format the logits are stored in, the format the loss is computed in).
LOSS_WAYS = (("fp32", "fp32"), ("bf16", "bf16"), ("bf16", "fp32"), ("fp16", "fp16"), ("fp16", "fp32"))


def loss_rows(vocab: int = 32000, n: int = 64, logit_std: float = 2.0, seed: int = 0) -> list[dict[str, str | float]]:
    """Cross-entropy (mean over ``n`` positions) over a vocabulary of ``vocab`` tokens, logits from
    N(0, ``logit_std``²), for each of :data:`LOSS_WAYS`: the logits stored in one format, the loss computed in
    that format or in fp32 (``logits.float()``, what autocast does). Each row: the loss, its error against float64
    in nats, and the gradient's largest relative error (the gradient as the logits' format stores it).

    >>> rows = loss_rows(vocab=1000, n=4)
    >>> [(r["logits"], r["loss_in"]) for r in rows][:3], rows[2]["loss_error"] < rows[1]["loss_error"]
    ([('fp32', 'fp32'), ('bf16', 'bf16'), ('bf16', 'fp32')], True)
    """
    logits, target = _logits(vocab, n, logit_std, seed)
    ref = logits.double().requires_grad_()
    loss_ref = F.cross_entropy(ref, target)
    (grad_ref,) = torch.autograd.grad(loss_ref, ref)
    rows: list[dict[str, str | float]] = []
    for stored, computed in LOSS_WAYS:
        low = logits.to(DTYPES[stored]).requires_grad_()
        loss = F.cross_entropy(low.to(DTYPES[computed]), target)
        (grad,) = torch.autograd.grad(loss, low)
        rel = ((grad.double() - grad_ref).abs() / grad_ref.abs()).max()
        loss = loss.detach()
        rows.append({"logits": stored, "loss_in": computed, "loss": float(loss),
                     "loss_error": abs(float(loss) - float(loss_ref.detach())), "grad_max_rel_error": float(rel),
                     "loss_dtype": format_name(loss.dtype), "grad_dtype": format_name(grad.dtype)})
    return rows


def underflow_share(what: str = "gradient", dtype: str = "fp16", vocab: int = 32000, n: int = 64,
                    positions: int | None = None, scale: float = 1.0, logit_std: float = 2.0, seed: int = 0) -> float:
    """The share of entries that are exactly 0 once stored in ``dtype``, for the logits of :func:`loss_rows`:
    ``what="probabilities"``: ``softmax(logits)`` computed in ``dtype``; ``what="gradient"``: the gradient
    ``scale · (p − one_hot) / positions`` of the loss (computed in fp32, as autocast does) that reaches logits
    stored in ``dtype`` — a mean over ``positions`` (default ``n``) times a loss scale (GradScaler starts at 2**16).

    >>> underflow_share("probabilities", vocab=1000, n=4), underflow_share("gradient", "bf16", vocab=1000, n=4)
    (0.0, 0.0)
    """
    what = check_choice("what", what, ("probabilities", "gradient"))
    logits, target = _logits(vocab, n, logit_std, seed)
    low = logits.to(_dtype(dtype)).requires_grad_()
    if what == "probabilities":
        out = torch.softmax(low.detach(), dim=-1)
    else:
        positions = n if positions is None else check_int("positions", positions)
        loss = F.cross_entropy(low.float(), target, reduction="sum") / positions
        (out,) = torch.autograd.grad(loss * check_positive_finite("scale", scale), low)
    return float((out == 0).double().mean())


def predicted_zero_share(factor: float, dtype: str = "fp16", vocab: int = 32000, logit_std: float = 2.0) -> float:
    """The share of probabilities p for which ``factor · p`` rounds to 0 in ``dtype``, predicted for logits from
    N(0, σ²) with σ = ``logit_std``: p = e^l / Z with Z ≈ V·e^(σ²/2), so factor·p is below half the format's
    smallest subnormal t when l < σ²/2 + ln V + ln(t / factor), a share Φ(that / σ). ``factor`` 1: the
    probabilities; ``scale / positions``: a gradient entry.

    >>> round(predicted_zero_share(1 / 64), 2)                    # the gradient of a mean over 64 positions
    0.35
    """
    t = torch.finfo(_dtype(dtype)).smallest_normal * torch.finfo(_dtype(dtype)).eps / 2
    sigma = check_positive_finite("logit_std", logit_std, example="2.0")
    x = sigma ** 2 / 2 + math.log(check_int("vocab", vocab, minimum=2)) + math.log(t / factor)
    return 0.5 * math.erfc(-x / (sigma * math.sqrt(2)))
