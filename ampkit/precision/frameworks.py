"""PaddlePaddle's AMP vocabulary mapped onto what PyTorch's autocast does here, and PyTorch's answer to Paddle's
``custom_white_list`` / ``custom_black_list``. Taught in ``02_autocast_and_levels.ipynb`` (section 2).

Paddle (``paddle.amp.auto_cast``) sorts ops into three lists:

- **white**: numerically safe and performance-critical, computed in fp16/bf16 — autocast's *lower* list;
- **black**: numerically dangerous, kept in fp32 — autocast's *fp32* list;
- **gray**: on neither list, the op runs in the dtype of its inputs (fp32 if any float input is fp32) — what
  :func:`ampkit.precision.probe_autocast_ops` calls *unlisted* (and *promote*).

The default lists below are Paddle's dynamic-graph lists as released in PaddlePaddle 3.3.1
(``python/paddle/amp/amp_lists.py``, cited in docs/reference.md): ``FP16_*`` for ``dtype='float16'``, ``BF16_*``
for ``dtype='bfloat16'``. Since Paddle 2.6 (PR #55713, "Set bf16 black_list and white_list") bfloat16 uses the same
black list as float16 and the shared ``WHITE_LIST``; up to Paddle 2.5 the bfloat16 black list was empty and its
white list was ``conv2d, einsum, matmul_v2`` (:data:`PADDLE_2_5_BF16_WHITE`). Paddle's extra performance black list
(interpolation, lookup_table, scatter) is left out: it is about speed, not numerics. ``relu`` and ``batch_norm`` are
on neither dynamic-graph list (for either dtype): they follow their inputs; Paddle's static-graph ``gray_list``
names both (:data:`PADDLE_STATIC_GRAY`). MindSpore's lists are different: its O1 white list has ``ReLU`` and its
O2 black list ``BatchNorm`` (:data:`MINDSPORE_O1_WHITE`, :data:`MINDSPORE_O2_BLACK`).

PyTorch has no list arguments; its equivalents are an ``autocast(enabled=False)`` region with explicit casts
(:func:`run_as`) or a custom op whose ``forward`` is decorated with ``torch.amp.custom_fwd(cast_inputs=...)``
(:func:`fp32_matmul`).

>>> paddle_list("softmax_with_cross_entropy", "float16"), paddle_list("relu", "bfloat16")
('black', 'gray')
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from ampkit.formats import format_name
from ampkit.i18n import Word, mark, tr

__all__ = ["PADDLE_FP16_WHITE", "PADDLE_FP16_BLACK", "PADDLE_BF16_WHITE", "PADDLE_BF16_BLACK", "PADDLE_2_5_BF16_WHITE",
           "PADDLE_STATIC_GRAY", "MINDSPORE_O1_WHITE", "MINDSPORE_O2_BLACK", "TORCH_TO_PADDLE", "PROBE_TO_PADDLE",
           "paddle_list", "paddle_rows", "run_as", "fp32_matmul"]

#: Paddle's dynamic-graph ``WHITE_LIST`` (PaddlePaddle 3.3.1, python/paddle/amp/amp_lists.py): float16 and bfloat16.
_PADDLE_WHITE = frozenset({"conv2d", "einsum", "matmul", "matmul_v2", "linear_v2", "max_pool2d_with_index", "mul",
                           "fused_gemm_epilogue", "fused_rotary_position_embedding", "flash_attn"})
#: Paddle's dynamic-graph default white list for float16 (``FP16_WHITE_LIST = WHITE_LIST | ONLY_FP16_WHITE_LIST``).
PADDLE_FP16_WHITE = _PADDLE_WHITE | frozenset({"fake_quantize_dequantize_abs_max",
                                               "fake_quantize_dequantize_moving_average_abs_max", "fused_attention",
                                               "fused_feedforward"})
#: Paddle's dynamic-graph default black list for float16 (``FP16_BLACK_LIST``, PaddlePaddle 3.3.1).
PADDLE_FP16_BLACK = frozenset({
    "tan", "acos", "asin", "sinh", "cosh", "atanh", "tanh_shrink", "erfinv", "exp", "expm1", "log", "log10",
    "log2", "reciprocal", "rsqrt", "pow", "square", "reduce_sum", "mean", "reduce_mean", "reduce_prod", "cumprod",
    "cumsum", "dist", "pnorm", "frobenius_norm", "renorm", "group_norm", "layer_norm", "softmax", "softmin",
    "softplus", "log_softmax", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
    "c_softmax_with_cross_entropy", "c_softmax_with_multi_label_cross_entropy", "cross_entropy", "cross_entropy2",
    "nll_loss", "huber_loss", "triplet_margin_loss", "log_loss", "hsigmoid_loss", "margin_cross_entropy"})
#: Paddle's dynamic-graph default lists for bfloat16 (``BF16_WHITE_LIST = WHITE_LIST``,
#: ``BF16_BLACK_LIST = FP16_BLACK_LIST`` since Paddle 2.6).
PADDLE_BF16_WHITE = _PADDLE_WHITE
PADDLE_BF16_BLACK = PADDLE_FP16_BLACK
#: Up to Paddle 2.5: ``BF16_WHITE_LIST = {'conv2d', 'einsum', 'matmul_v2'}``, ``BF16_BLACK_LIST = set()``.
PADDLE_2_5_BF16_WHITE = frozenset({"conv2d", "einsum", "matmul_v2"})
#: Part of Paddle's static-graph ``gray_list`` (3.3.1, python/paddle/static/amp/fp16_lists.py): "safe, but
#: may be made unsafe by an upstream blacklist op", or with no numerically significant effect.
PADDLE_STATIC_GRAY = frozenset({
    "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max", "elementwise_min",
    "elementwise_pow", "batch_norm", "layer_norm", "tanh", "sigmoid", "pool2d", "dropout", "relu", "relu6",
    "leaky_relu", "concat", "stack", "split", "reshape2", "transpose2", "slice", "gather", "scale", "cast"})
#: MindSpore's ``AMP_WHITE_LIST`` (what O1 converts) and ``AMP_BLACK_LIST`` (what O2 keeps in fp32), by name
#: (mindspore/train/amp.py, MindSpore 2.10; ``mindspore.amp.get_white_list()`` / ``get_black_list()``).
MINDSPORE_O1_WHITE = frozenset({
    "nn.Conv1d", "nn.Conv2d", "nn.Conv3d", "nn.Conv1dTranspose", "nn.Conv2dTranspose", "nn.Conv3dTranspose",
    "nn.Dense", "nn.LSTMCell", "nn.RNNCell", "nn.GRUCell", "ops.Conv2D", "ops.Conv3D", "ops.Conv2DTranspose",
    "ops.Conv3DTranspose", "ops.Conv2DBackpropInput", "ops.MatMul", "ops.BatchMatMul", "ops.PReLU", "ops.ReLU",
    "ops.Ger"})
MINDSPORE_O2_BLACK = frozenset({"nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d", "nn.LayerNorm"})

#: The probe's op name -> the Paddle op that does the same job.
TORCH_TO_PADDLE: dict[str, str] = {
    "linear": "matmul_v2", "matmul": "matmul_v2", "mm": "matmul_v2", "bmm": "matmul_v2", "conv2d": "conv2d",
    "softmax": "softmax", "log_softmax": "log_softmax", "layer_norm": "layer_norm", "group_norm": "group_norm",
    "batch_norm": "batch_norm", "exp": "exp", "log": "log", "pow": "pow", "sum": "reduce_sum", "mean": "mean",
    "prod": "reduce_prod", "cumsum": "cumsum", "relu": "relu", "gelu": "gelu", "cross_entropy": "cross_entropy2",
    "nll_loss": "nll_loss", "binary_cross_entropy_with_logits": "sigmoid_cross_entropy_with_logits",
    "add": "elementwise_add", "mul": "elementwise_mul", "cat": "concat", "stack": "stack",
}

#: What autocast did (the probe's classes) -> the Paddle list that means the same.
PROBE_TO_PADDLE: dict[str, str] = {"lower": "white", "fp32": "black", "unlisted": "gray", "promote": "gray"}

def _paddle_dtype(dtype: str | torch.dtype) -> str:
    """``"float16"`` or ``"bfloat16"`` (Paddle's two AMP dtypes), from any name ampkit.formats accepts."""
    try:
        name = format_name(dtype)
    except (ValueError, TypeError):
        name = None
    if name not in ("float16", "bfloat16"):
        raise ValueError(tr("dtype must be one of float16/fp16/bfloat16/bf16 (or torch.float16/bfloat16); got "
                            "{dtype!r}", dtype=dtype))
    return name


def paddle_list(op: str, dtype: str | torch.dtype = "float16") -> str:
    """``"white"``, ``"black"`` or ``"gray"``: where Paddle's default O1 lists put the Paddle op ``op``.

    >>> paddle_list("matmul_v2", "bf16"), paddle_list("layer_norm", "fp16"), paddle_list("relu", "fp16")
    ('white', 'black', 'gray')
    """
    if not isinstance(op, str) or not op:
        raise TypeError(tr("op must be a Paddle op name (a non-empty str); got {op!r}", op=op))
    dt = _paddle_dtype(dtype)
    white, black = ((PADDLE_FP16_WHITE, PADDLE_FP16_BLACK) if dt == "float16"
                    else (PADDLE_BF16_WHITE, PADDLE_BF16_BLACK))
    word = "white" if op in white else "black" if op in black else "gray"
    return Word(word)   # shown in the kit's language


#: the lists' words, marked for the catalog (a :class:`~ampkit.i18n.Word` shows them translated)
_LIST_WORDS = (mark("white"), mark("black"), mark("gray"))


def paddle_rows(probe: Iterable) -> list[dict[str, str]]:
    """One row per probed op that Paddle also has: what autocast did here, the Paddle list that means the same,
    and Paddle's default list for fp16 and for bf16.

    ``probe`` is :func:`ampkit.precision.probe_autocast_ops`' result (rows with ``op`` and ``observed``).

    >>> from ampkit.precision.probe import probe_autocast_ops
    >>> paddle_rows(probe_autocast_ops("cpu", "bf16", ops=["linear"]))[0]["as a Paddle list"]
    'white'
    """
    rows: list[dict[str, str]] = []
    for r in probe:
        if r.op not in TORCH_TO_PADDLE:
            continue
        name = TORCH_TO_PADDLE[r.op]
        # keys and words are Words: shown in the kit's language, equal to their English (notebooks look rows up
        # by them)
        rows.append({Word("torch op"): r.op, Word("autocast here"): Word(r.observed),
                     Word("as a Paddle list"): Word(PROBE_TO_PADDLE[r.observed]), Word("Paddle op"): name,
                     Word("Paddle fp16 list"): paddle_list(name, "float16"),
                     Word("Paddle bf16 list"): paddle_list(name, "bfloat16")})
    return rows


def run_as(dtype: torch.dtype, fn: Callable, *tensors: torch.Tensor, device_type: str = "cpu"):
    """Run ``fn(*tensors)`` in ``dtype`` whatever the surrounding autocast says: autocast is switched off for the
    call and the floating inputs are cast explicitly (the pattern torch.autocast's docs give for locally disabling
    it). ``run_as(torch.float32, torch.matmul, a, b)`` is Paddle's ``custom_black_list={'matmul_v2'}`` for one call;
    ``run_as(torch.bfloat16, torch.add, a, b)`` is ``custom_white_list={'elementwise_add'}``. Differentiable.

    >>> a = torch.ones(2, 2)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     run_as(torch.float32, torch.matmul, a, a).dtype
    torch.float32
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype (e.g. torch.float32); got {dtype!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    with torch.autocast(device_type, enabled=False):
        return fn(*(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in tensors))


class _FP32MatMul(torch.autograd.Function):
    """``a @ b`` registered with CPU autocast as an fp32 op: ``custom_fwd(cast_inputs=torch.float32)`` casts the
    inputs and runs ``forward`` with autocast off; the backward runs in the forward's dtype."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.transpose(-2, -1), a.transpose(-2, -1) @ grad


def fp32_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product that CPU autocast always runs in fp32 (a custom op on autocast's fp32 list).

    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     fp32_matmul(torch.ones(2, 3), torch.ones(3, 2).bfloat16()).dtype
    torch.float32
    """
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        raise TypeError("fp32_matmul takes two tensors")
    return _FP32MatMul.apply(a, b)
