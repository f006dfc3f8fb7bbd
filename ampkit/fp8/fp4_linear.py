"""A simulated NVFP4 (or MXFP4) linear layer: the FP4 training recipe's numerics on any CPU. Taught in
``10_fp4.ipynb``.

Each of the layer's three GEMMs multiplies FP4-quantized operands (decoded to fp32, products and sums in fp32),
quantized along that GEMM's contracted dimension, as Transformer Engine's ``NVFP4BlockScaling`` recipe does
(``transformer_engine/common/recipe/__init__.py`` at v2.8 … v2.18):

==========  ======================  =============================================================================
GEMM        operands                how each operand is quantized (recipe defaults)
==========  ======================  =============================================================================
fprop       Y = X · Wᵀ              X: 1×16 blocks along in_features, round to nearest; W: 16×16 blocks (2D)
dgrad       dX = dY · W             dY: 1×16 along out_features, **stochastic rounding**; W: its 16×16 blocks again
                                    (a 2D-scaled weight and its transpose share blocks, so W is quantized once)
wgrad       dW = dYᵀ · X            dYᵀ and Xᵀ: 1×16 along the tokens, after the **random Hadamard transform**;
                                    dYᵀ with stochastic rounding
==========  ======================  =============================================================================

Each switch of :class:`NVFP4Recipe` turns one piece off (``rht``, ``stochastic``, ``weight_2d``), so its effect can
be measured; ``fmt="mxfp4"`` quantizes every operand with MXFP4 instead (E2M1 in blocks of 32, E8M0 scales, rule
``mx_rounding``; no tensor scale, no Hadamard, no stochastic rounding). :func:`to_nvfp4` converts a model's
linear layers and leaves the ones named in ``keep`` unconverted (in the recipe of arXiv 2509.25149 §4, the last
blocks stay in BF16). in_features and out_features must be multiples of the block (16, MXFP4: 32); the token
count is padded with zero rows to one where wgrad needs it (zeros add nothing to a product). The bias gradient
comes from the unquantized output gradient.

>>> layer = NVFP4Linear(32, 16, recipe=NVFP4Recipe(seed=0))
>>> layer(torch.randn(4, 32)).shape
torch.Size([4, 16])
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ampkit._util import check_choice, check_int
from ampkit.fp8.hadamard import rht
from ampkit.fp8.mx import SCALE_RULES, mx_fake_quantize
from ampkit.fp8.nvfp4 import ARITHMETICS, nvfp4_fake_quantize

__all__ = ["FP4_FORMATS", "NVFP4Recipe", "NVFP4Linear", "to_nvfp4", "quantize_operand"]

FP4_FORMATS = ("nvfp4", "mxfp4")


@dataclass(frozen=True)
class NVFP4Recipe:
    """The recipe's switches; the defaults are Transformer Engine's ``NVFP4BlockScaling`` defaults (RHT on the wgrad
    inputs, stochastic rounding of the gradient, 2D weight blocks). ``seed`` seeds the stochastic rounding."""

    fmt: str = "nvfp4"
    rht: bool = True
    stochastic: bool = True
    weight_2d: bool = True
    arithmetic: str = "te"
    mx_rounding: str = "rceil"
    seed: int = 0

    def __post_init__(self):
        check_choice("fmt", self.fmt, FP4_FORMATS)
        check_choice("arithmetic", self.arithmetic, ARITHMETICS)
        check_choice("mx_rounding", self.mx_rounding, SCALE_RULES)
        check_int("seed", self.seed, minimum=0)
        for name in ("rht", "stochastic", "weight_2d"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False; got {getattr(self, name)!r}")


def _block(recipe: NVFP4Recipe) -> int:
    return 32 if recipe.fmt == "mxfp4" else 16


def _pad_rows(t: torch.Tensor, multiple: int) -> torch.Tensor:
    pad = (-t.shape[0]) % multiple
    return torch.cat([t, t.new_zeros(pad, t.shape[1])]) if pad else t


def quantize_operand(t: torch.Tensor, recipe: NVFP4Recipe, *, weight: bool = False, hadamard: bool = False,
                     stochastic: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
    """One GEMM operand (2-D, contracted along its last dimension) as the recipe stores it, decoded to fp32.

    >>> quantize_operand(torch.ones(2, 32), NVFP4Recipe()).tolist()[0][:2]
    [1.0, 1.0]
    """
    if recipe.fmt == "mxfp4":
        return mx_fake_quantize(t, "e2m1", 32, recipe.mx_rounding)
    if hadamard and recipe.rht:
        t = rht(t.float())
    sr = stochastic and recipe.stochastic
    tile = "16x16" if weight and recipe.weight_2d else "1x16"
    return nvfp4_fake_quantize(t, tile, recipe.arithmetic, "stochastic" if sr else "nearest",
                               generator if sr else None)


class _NVFP4LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        r = layer.recipe
        x2 = x.reshape(-1, x.shape[-1]).float()
        wq = quantize_operand(weight.detach().float(), r, weight=True)
        y = quantize_operand(x2, r) @ wq.t()
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.shape, ctx.has_bias = layer, x.shape, bias is not None
        y = y.reshape(*x.shape[:-1], weight.shape[0])
        return y + bias if bias is not None else y

    @staticmethod
    def backward(ctx, g):
        x2, weight = ctx.saved_tensors
        layer, r = ctx.layer, ctx.layer.recipe
        g2 = g.reshape(-1, g.shape[-1]).float()
        w = weight.detach().float()
        # dgrad: dY along out_features (SR); W's columnwise copy (2D: the same blocks, transposed)
        wq_t = quantize_operand(w, r, weight=True).t() if r.weight_2d and r.fmt == "nvfp4" else \
            quantize_operand(w.t().contiguous(), r, weight=True)        # 1-D blocks: the transpose is its own copy
        dq = quantize_operand(g2, r, stochastic=True, generator=layer.generator)
        dx = dq @ wq_t.t()
        # wgrad: dYᵀ and Xᵀ along the tokens, Hadamard on both, SR on dYᵀ
        gt, xt = (_pad_rows(t, _block(r)).t().contiguous() for t in (g2, x2))
        dw = quantize_operand(gt, r, hadamard=True, stochastic=True, generator=layer.generator) @ \
            quantize_operand(xt, r, hadamard=True).t()
        grad_b = g2.sum(0) if ctx.has_bias else None
        return dx.reshape(ctx.shape), dw.to(weight.dtype), grad_b, None


class NVFP4Linear(nn.Linear):
    """``nn.Linear`` whose three GEMMs see FP4-quantized operands (module docstring). ``generator``: the seeded
    generator of its stochastic rounding. The output has the input's dtype."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, recipe: NVFP4Recipe | None = None):
        super().__init__(in_features, out_features, bias=bias)
        if recipe is not None and not isinstance(recipe, NVFP4Recipe):
            raise TypeError(f"recipe must be an ampkit.fp8.NVFP4Recipe (or None for the default); "
                            f"got {type(recipe).__name__}")
        self.recipe = recipe or NVFP4Recipe()
        self.generator = torch.Generator().manual_seed(self.recipe.seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        block = _block(self.recipe)
        if self.in_features % block or self.out_features % block:
            raise ValueError(f"in_features ({self.in_features}) and out_features ({self.out_features}) must be "
                             f"multiples of {block} for {self.recipe.fmt}")
        return _NVFP4LinearFn.apply(x, self.weight, self.bias, self).to(x.dtype)

    def extra_repr(self) -> str:
        r = self.recipe
        return super().extra_repr() + (f", fmt={r.fmt}, rht={r.rht}, stochastic={r.stochastic}, "
                                       f"weight_2d={r.weight_2d}")


def to_nvfp4(model: nn.Module, recipe: NVFP4Recipe | None = None,
             keep: Iterable[str] | Callable[[str], bool] = ()) -> list[str]:
    """Replace (in place) every ``nn.Linear`` of ``model`` by an :class:`NVFP4Linear` holding the same parameters,
    except those whose qualified name is in ``keep`` (or for which ``keep(name)`` is true), which stay as they are
    (the model's own dtype: bf16 for a bf16 model). Each converted layer gets its own seed (``recipe.seed + i``).
    Returns the names converted.

    >>> m = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    >>> to_nvfp4(m, keep={"1"})
    ['0']
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    recipe = recipe or NVFP4Recipe()
    kept = keep if callable(keep) else set(keep).__contains__
    done: list[str] = []
    for name, child in list(model.named_modules()):
        if not isinstance(child, nn.Linear) or isinstance(child, NVFP4Linear) or kept(name):
            continue
        r = NVFP4Recipe(**{**recipe.__dict__, "seed": recipe.seed + len(done)})
        new = NVFP4Linear(child.in_features, child.out_features, child.bias is not None, r)
        new.weight, new.bias = child.weight, child.bias
        parent_name, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, leaf, new)
        done.append(name)
    return done
