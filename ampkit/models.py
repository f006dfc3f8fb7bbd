"""Small models that train in seconds on a laptop CPU, each exercising precision-sensitive ops.

Used from ``02_autocast_and_levels.ipynb`` on (the O-levels are applied to these models), and by the
loss-scaling and sinking notebooks.

- :class:`MLP`: Linear/ReLU stack (matmuls, the ops autocast lowers), optional LayerNorm.
- :class:`SimpleCNN`: the classic teaching conv net on 1x32x32 images, with a BatchNorm variant.
- :class:`TinyTransformer`: embedding, LayerNorm, softmax attention, MLP and classifier on token sequences.
- :class:`DecoderLM`: a small decoder-only language model (causal attention written out or fused, LayerNorm or
  :class:`RMSNorm`) for the character corpus of :mod:`ampkit.data`. Taught in notebook 07
  (``07_transformers_in_16_bits.ipynb``).

>>> model = build_model("mlp", seed=0, in_features=8, hidden=16, out_features=3)
>>> model(torch.zeros(2, 8)).shape
torch.Size([2, 3])
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ampkit._util import check_choice, check_int, check_positive_finite

__all__ = ["MLP", "SimpleCNN", "TinyTransformer", "RMSNorm", "CausalSelfAttention", "DecoderBlock", "DecoderLM",
           "lm_loss", "NORMS", "ATTENTIONS", "SCALE_AT", "MODEL_NAMES", "build_model"]


class MLP(nn.Module):
    """``depth`` hidden Linear+ReLU layers of width ``hidden``, then a Linear to ``out_features``.

    ``layernorm=True`` puts a LayerNorm after each hidden Linear (a norm for O2/O3 to treat specially).

    >>> MLP(4, 8, 2, depth=1)(torch.zeros(3, 4)).shape
    torch.Size([3, 2])
    """

    def __init__(self, in_features: int, hidden: int, out_features: int, depth: int = 2, layernorm: bool = False):
        super().__init__()
        in_features, hidden = check_int("in_features", in_features), check_int("hidden", hidden)
        out_features = check_int("out_features", out_features)
        depth = check_int("depth (number of hidden layers)", depth)
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            if layernorm:
                layers.append(nn.LayerNorm(hidden))
            layers.append(nn.ReLU())
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SimpleCNN(nn.Module):
    """Conv2d 1→32 3x3 (valid), [BatchNorm2d], ReLU, Flatten, Linear 32·30·30→128, ReLU, Linear 128→10.

    Input: ``(N, 1, 32, 32)`` images; output: ``(N, 10)`` logits.

    >>> SimpleCNN(batchnorm=True)(torch.zeros(2, 1, 32, 32)).shape
    torch.Size([2, 10])
    """

    def __init__(self, batchnorm: bool = False, n_classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, kernel_size=3)
        self.bn = nn.BatchNorm2d(32) if batchnorm else nn.Identity()
        self.relu1 = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(32 * 30 * 30, 128)
        self.relu2 = nn.ReLU()
        self.fc2 = nn.Linear(128, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or tuple(x.shape[1:]) != (1, 32, 32):
            raise ValueError(f"SimpleCNN expects input of shape (N, 1, 32, 32); got {tuple(x.shape)}")
        x = self.relu1(self.bn(self.conv(x)))
        return self.fc2(self.relu2(self.fc1(self.flatten(x))))


class SelfAttention(nn.Module):
    """Multi-head softmax self-attention written out (q·kᵀ/√d, softmax, ·v) so each op is visible."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).reshape(n, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
        out = (att @ v).transpose(1, 2).reshape(n, t, d)
        return self.proj(out)


class TinyTransformer(nn.Module):
    """Token + position embedding, one pre-norm Transformer block (LayerNorm, softmax attention, LayerNorm, MLP),
    a final LayerNorm, mean pooling over tokens and a Linear classifier.

    >>> net = TinyTransformer(vocab_size=8, seq_len=6, d_model=16, n_heads=2, n_classes=3)
    >>> net(torch.zeros(2, 6, dtype=torch.long)).shape
    torch.Size([2, 3])
    """

    def __init__(self, vocab_size: int = 16, seq_len: int = 16, d_model: int = 32, n_heads: int = 2,
                 n_classes: int = 4, mlp_ratio: int = 2):
        super().__init__()
        self.seq_len = seq_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len, d_model))
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.ReLU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.shape[1] > self.seq_len or tokens.is_floating_point():
            raise ValueError(f"TinyTransformer expects integer tokens of shape (N, <= {self.seq_len}); "
                             f"got {tuple(tokens.shape)} {tokens.dtype}")
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x).mean(dim=1))


NORMS: tuple[str, ...] = ("layer", "rms")
ATTENTIONS: tuple[str, ...] = ("manual", "sdpa")
SCALE_AT: tuple[str, ...] = ("q", "logits")


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) * weight`` over the last dimension, written out (no fused kernel).

    The mean of squares is computed in the input's dtype, so in fp16 ``x²`` overflows once ``|x| > 256``
    (256² = 65536 > 65504, fp16's largest finite number). ``stat_dtype=torch.float32`` computes it in fp32 and
    casts back, as Llama-style models do. Taught in notebook 07 (``07_transformers_in_16_bits.ipynb``).

    >>> x = torch.tensor([[300.0, 300.0]], dtype=torch.float16)
    >>> RMSNorm(2)(x), RMSNorm(2, stat_dtype=torch.float32)(x)
    (tensor([[0., 0.]], grad_fn=<MulBackward0>), tensor([[1., 1.]], grad_fn=<MulBackward0>))
    """

    def __init__(self, dim: int, eps: float = 1e-6, stat_dtype: torch.dtype | None = None):
        super().__init__()
        self.eps = check_positive_finite("eps", eps, example="1e-6")
        if stat_dtype is not None and not (isinstance(stat_dtype, torch.dtype) and stat_dtype.is_floating_point):
            raise TypeError(f"stat_dtype must be None or a floating torch.dtype (e.g. torch.float32); "
                            f"got {stat_dtype!r}")
        self.stat_dtype = stat_dtype
        self.weight = nn.Parameter(torch.ones(check_int("dim", dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x if self.stat_dtype is None else x.to(self.stat_dtype)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, either written out or through PyTorch's fused function.

    ``attention="manual"``: ``softmax(mask(q·kᵀ/√d))·v`` op by op; ``scale_at="q"`` multiplies q by 1/√d before
    the matmul, ``scale_at="logits"`` divides the logits after it (same result in fp32; in fp16 the unscaled
    logits may overflow first). ``attention="sdpa"``: ``F.scaled_dot_product_attention(is_causal=True)``.

    >>> att = CausalSelfAttention(8, 2, context=4)
    >>> att(torch.zeros(1, 3, 8)).shape, att.logits(torch.zeros(1, 3, 8)).shape
    (torch.Size([1, 3, 8]), torch.Size([1, 2, 3, 3]))
    """

    mask: torch.Tensor   # the causal mask, a buffer (register_buffer below)

    def __init__(self, d_model: int, n_heads: int, context: int, attention: str = "manual", scale_at: str = "q"):
        super().__init__()
        d_model, n_heads = check_int("d_model", d_model), check_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.attention = check_choice("attention", attention, ATTENTIONS)
        self.scale_at = check_choice("scale_at", scale_at, SCALE_AT)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.ones(check_int("context", context), context, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, t, d = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return q, k, v

    def _logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scale = 1.0 / math.sqrt(self.head_dim)
        if self.scale_at == "q":
            return (q * scale) @ k.transpose(-2, -1)
        return (q @ k.transpose(-2, -1)) * scale

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The scaled attention logits ``(N, heads, T, T)`` before the causal mask and the softmax."""
        q, k, _ = self._qkv(x)
        return self._logits(q, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self._qkv(x)
        if self.attention == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            logits = self._logits(q, k).masked_fill(~self.mask[:t, :t], float("-inf"))
            out = torch.softmax(logits, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class DecoderBlock(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))`` (MLP: Linear, GELU, Linear)."""

    def __init__(self, d_model: int, n_heads: int, context: int, mlp_ratio: int = 4, norm: str = "layer",
                 attention: str = "manual", scale_at: str = "q", stat_dtype: torch.dtype | None = None):
        super().__init__()
        check_choice("norm", norm, NORMS)

        def make_norm() -> nn.Module:
            return nn.LayerNorm(d_model) if norm == "layer" else RMSNorm(d_model, stat_dtype=stat_dtype)

        self.norm1, self.norm2 = make_norm(), make_norm()
        self.attn = CausalSelfAttention(d_model, n_heads, context, attention, scale_at)
        hidden = check_int("mlp_ratio", mlp_ratio) * d_model
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DecoderLM(nn.Module):
    """A small decoder-only (GPT-style) language model: token + position embedding, ``n_layers`` pre-norm
    :class:`DecoderBlock` s with causal self-attention, a final norm and an LM head. Returns logits
    ``(N, T, vocab_size)``; position ``t`` sees tokens ``0..t`` only. Taught in notebook 07
    (``07_transformers_in_16_bits.ipynb``).

    ``norm`` is ``"layer"`` (``nn.LayerNorm``) or ``"rms"`` (:class:`RMSNorm`, its statistic in ``stat_dtype``);
    ``attention`` and ``scale_at`` go to :class:`CausalSelfAttention`. Weights start as GPT-2's: normal(0, 0.02),
    biases zero. The default ``vocab_size`` (42) is the size of :data:`ampkit.data.CHAR_VOCAB`.

    >>> lm = DecoderLM(vocab_size=10, context=8, d_model=16, n_heads=2, n_layers=1, norm="rms")
    >>> lm(torch.zeros(2, 5, dtype=torch.long)).shape
    torch.Size([2, 5, 10])
    """

    def __init__(self, vocab_size: int = 42, context: int = 64, d_model: int = 64, n_heads: int = 4,
                 n_layers: int = 2, mlp_ratio: int = 4, norm: str = "layer", attention: str = "manual",
                 scale_at: str = "q", stat_dtype: torch.dtype | None = None):
        super().__init__()
        self.vocab_size, self.context = check_int("vocab_size", vocab_size), check_int("context", context)
        self.embed = nn.Embedding(vocab_size, check_int("d_model", d_model))
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model, n_heads, context, mlp_ratio, norm, attention, scale_at, stat_dtype)
            for _ in range(check_int("n_layers", n_layers)))
        self.norm_f = nn.LayerNorm(d_model) if norm == "layer" else RMSNorm(d_model, stat_dtype=stat_dtype)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
            if isinstance(mod, nn.Linear) and mod.bias is not None:
                nn.init.zeros_(mod.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.is_floating_point() or not 1 <= tokens.shape[1] <= self.context:
            raise ValueError(f"DecoderLM expects integer tokens of shape (N, T) with 1 <= T <= {self.context}; "
                             f"got {tuple(tokens.shape)} {tokens.dtype}")
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm_f(x))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy averaged over every position: logits ``(N, T, V)``, targets ``(N, T)``.

    >>> round(lm_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long)).item(), 4)  # ln 4
    1.3863
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"lm_loss expects logits (N, T, V) and targets (N, T); got {tuple(logits.shape)} and "
                         f"{tuple(targets.shape)}")
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


_BUILDERS = {
    "mlp": lambda **kw: MLP(**{"in_features": 16, "hidden": 64, "out_features": 4, **kw}),
    "mlp_ln": lambda **kw: MLP(**{"in_features": 16, "hidden": 64, "out_features": 4, "layernorm": True, **kw}),
    "cnn": lambda **kw: SimpleCNN(**{"batchnorm": False, **kw}),
    "cnn_bn": lambda **kw: SimpleCNN(**{"batchnorm": True, **kw}),
    "transformer": lambda **kw: TinyTransformer(**kw),
    "decoder": lambda **kw: DecoderLM(**kw),
}
#: Names accepted by :func:`build_model` (and by :func:`ampkit.data.make_data`).
MODEL_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def build_model(name: str, seed: int = 0, **kw) -> nn.Module:
    """Build a model by name, its initial weights drawn from torch's RNG seeded with ``seed`` (fp32, CPU).

    Names: ``mlp`` (16→64→64→4), ``mlp_ln`` (same with LayerNorm), ``cnn`` (SimpleCNN), ``cnn_bn``
    (SimpleCNN with BatchNorm), ``transformer`` (TinyTransformer), ``decoder`` (DecoderLM). Keyword arguments go
    to the constructor. The global RNG state is left untouched.

    >>> type(build_model("cnn_bn").bn).__name__
    'BatchNorm2d'
    """
    if not isinstance(name, str) or name.strip().lower() not in _BUILDERS:
        raise ValueError(f"model name must be one of {', '.join(MODEL_NAMES)}; got {name!r}")
    seed = check_int("seed", seed, minimum=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return _BUILDERS[name.strip().lower()](**kw)
        except TypeError as e:
            raise TypeError(f"bad keyword arguments for model {name!r}: {e}") from None
