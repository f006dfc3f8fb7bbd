"""A simulated fp8 linear layer: the numerics of fp8 training on any CPU. Taught in ``06_fp8_scaling.ipynb``.

Forward: the input and the weight are quantized to the recipe's forward format (e4m3 in HYBRID) with their own
scaling state, then multiplied **in fp32** from the dequantized values. Backward: the gradient of the layer's
output ``dY`` is quantized to the backward format (e5m2 in HYBRID) with its own state; the input gradient
(``dY · W``) and the weight gradient (``dYᵀ · X``) are computed from it and the saved quantized input / weight and
come out in fp32 — as in Transformer Engine, where these GEMM outputs are not fp8; the bias gradient comes from the
unquantized output gradient.

The simulation accumulates every sum in fp32. Real fp8 tensor cores multiply the same fp8 values, but on Hopper the
accumulator of an fp8 GEMM keeps fewer bits than fp32 (the DeepSeek-V3 report, arXiv:2412.19437 §3.3.2, puts it at
about 14 bits); Transformer Engine's ``use_split_accumulator=True`` turns cuBLAS's fp8 fast accumulation off so
partial sums are promoted to fp32 (``transformer_engine/common/gemm/cublaslt_gemm.cu``). So the simulation shows the
numerics of fp8 *storage*; a GPU can add accumulation error on top.

Where torch offers a real scaled fp8 matmul (``torch._scaled_mm``; torch 2.13 runs it on the CPU too),
:func:`fp8_matmul` can use it and :func:`scaled_mm_agrees` checks it against the simulation.

>>> layer = Fp8Linear(32, 16, recipe=Fp8Recipe(scaling="current"))
>>> layer(torch.randn(4, 32)).shape
torch.Size([4, 16])
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ampkit._util import check_choice
from ampkit.fp8.delayed import DelayedScaling, check_algo, check_history_len, recipe_formats
from ampkit.fp8.quantize import amax_of, check_margin, current_scale, dequantize, quantize

__all__ = ["SCALINGS", "Fp8Recipe", "Fp8Linear", "to_fp8", "fp8_matmul", "scaled_mm_available", "scaled_mm_agrees",
           "TENSORS"]

SCALINGS = ("delayed", "current")
TENSORS = ("input", "weight", "grad_output")


@dataclass(frozen=True)
class Fp8Recipe:
    """Which formats (``recipe``: HYBRID / E4M3 / E5M2), delayed or just-in-time (``"current"``) scaling, and the
    delayed-scaling knobs. Defaults are Transformer Engine's ``DelayedScaling`` defaults (HYBRID, history 1024,
    "max", margin 0)."""

    recipe: str = "HYBRID"
    scaling: str = "delayed"
    history_len: int = 1024
    algo: str = "max"
    margin: int = 0

    def __post_init__(self):
        recipe_formats(self.recipe)
        check_choice("scaling", self.scaling, SCALINGS)
        check_history_len(self.history_len)
        check_algo(self.algo)
        check_margin(self.margin)

    @property
    def formats(self) -> dict[str, str]:
        f = recipe_formats(self.recipe)
        return {"input": f["forward"], "weight": f["forward"], "grad_output": f["backward"]}


def scaled_mm_available(device: torch.device | str = "cpu") -> bool:
    """Whether ``torch._scaled_mm`` runs an e4m3 x e4m3 -> fp32 matmul on ``device`` (tried once, 16x16).

    >>> scaled_mm_available("cpu")                    # the CPU build of torch 2.13 (the tested release) runs it
    True
    """
    try:
        a = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device=device)
        out = torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        return bool(out[0, 0] == 16)
    except (RuntimeError, AttributeError, TypeError, NotImplementedError):
        return False


def fp8_matmul(aq: torch.Tensor, a_scale: float, bq: torch.Tensor, b_scale: float, backend: str = "simulate"
               ) -> torch.Tensor:
    """``dequantize(aq) @ dequantize(bq).T`` in fp32: ``"simulate"`` (dequantize, fp32 matmul) or ``"scaled_mm"``
    (``torch._scaled_mm`` on the fp8 values with fp32 output, the dequantizing factors ``1/scale`` passed in).

    >>> a, b = torch.tensor([[0.3, 1.0]]), torch.tensor([[1.0, 1.0]])
    >>> fp8_matmul(quantize(a, 1.0), 1.0, quantize(b, 1.0), 1.0)     # 0.3 is stored as e4m3's 0.3125
    tensor([[1.3125]])
    """
    backend = check_choice("backend", backend, ("simulate", "scaled_mm"))
    if backend == "simulate":
        return dequantize(aq, a_scale) @ dequantize(bq, b_scale).t()
    inv_a = torch.tensor(1.0 / a_scale, dtype=torch.float32, device=aq.device)
    inv_b = torch.tensor(1.0 / b_scale, dtype=torch.float32, device=bq.device)
    return torch._scaled_mm(aq, bq.t(), scale_a=inv_a, scale_b=inv_b, out_dtype=torch.float32)


#: How far ``torch._scaled_mm`` may be from the simulation, relative to the largest output: 2^-10. Both compute the
#: same exact products; the simulation adds them in fp32, while fp8 tensor cores keep fewer bits in the running sum
#: (the DeepSeek-V3 report, §3.3.2: about 14 bits on H800). Measured on an H100 (torch 2.11, K = 128): up to
#: 3.3e-4 of the largest output, with or without ``use_fast_accum``; the CPU's ``_scaled_mm`` agrees to 1e-6.
SCALED_MM_RTOL = 2.0 ** -10


def scaled_mm_agrees(a: torch.Tensor, b: torch.Tensor, fmt: str = "e4m3", rtol: float = SCALED_MM_RTOL) -> bool:
    """Quantize ``a`` (m x k) and ``b`` (n x k) with their current scales; both backends of :func:`fp8_matmul` agree
    to ``rtol`` of the largest output (they compute the same products; how the sums are accumulated differs by
    backend and device: see :data:`SCALED_MM_RTOL`).

    >>> a = torch.linspace(-1, 1, 64).reshape(4, 16)
    >>> scaled_mm_agrees(a, a) if scaled_mm_available() else True     # the CPU build of torch 2.13 has _scaled_mm
    True
    """
    sa, sb = current_scale(a, fmt), current_scale(b, fmt)
    aq, bq = quantize(a, sa, fmt), quantize(b, sb, fmt)
    sim = fp8_matmul(aq, sa, bq, sb, "simulate")
    real = fp8_matmul(aq, sa, bq, sb, "scaled_mm")
    return bool(torch.allclose(real, sim, rtol=rtol, atol=rtol * float(sim.abs().max())))


class _Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        fmt = layer.recipe.formats
        sx, sw = layer._scale("input", x), layer._scale("weight", weight)
        xd = dequantize(quantize(x, sx, fmt["input"]), sx)
        wd = dequantize(quantize(weight, sw, fmt["weight"]), sw)
        ctx.save_for_backward(xd, wd)
        ctx.layer, ctx.has_bias = layer, bias is not None
        ctx.saved_formats = {"X": fmt["input"], "W": fmt["weight"]}     # what the saved operands were cast to
        layer.gemms["fprop"] = (("X", fmt["input"]), ("W", fmt["weight"]))
        y = xd @ wd.t()                      # fp32 products and sums (a GPU's fp8 GEMM may accumulate in fewer bits)
        return y + bias if bias is not None else y

    @staticmethod
    def backward(ctx, g):
        xd, wd = ctx.saved_tensors
        layer = ctx.layer
        sg = layer._scale("grad_output", g)
        fg = layer.recipe.formats["grad_output"]
        gd = dequantize(quantize(g, sg, fg), sg)
        # X and W are not cast again: the backward GEMMs reuse the forward pass's fp8 copies (as Transformer Engine)
        layer.gemms["dgrad"] = (("dY", fg), ("W", ctx.saved_formats["W"]))
        layer.gemms["wgrad"] = (("dY", fg), ("X", ctx.saved_formats["X"]))
        g2, x2 = gd.reshape(-1, gd.shape[-1]), xd.reshape(-1, xd.shape[-1])
        grad_b = g.reshape(-1, g.shape[-1]).sum(0) if ctx.has_bias else None
        return gd @ wd, g2.t() @ x2, grad_b, None


class Fp8Linear(nn.Linear):
    """``nn.Linear`` whose matmul sees fp8-quantized input, weight and output gradient (see the module docstring).

    ``states``: one :class:`~ampkit.fp8.delayed.DelayedScaling` per tensor (input, weight, grad_output) in delayed
    mode. ``log``: per tensor, the (scale, amax) of every call. ``keep_values=True`` also keeps each call's
    sorted magnitudes in ``values`` (for the amax-history explorer). ``gemms``: for the last call of each GEMM
    (``"fprop"`` Y = X·Wᵀ, ``"dgrad"`` dX = dY·W, ``"wgrad"`` dW = dYᵀ·X), its fp8 operands as ``(name, format)``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, recipe: Fp8Recipe | None = None):
        super().__init__(in_features, out_features, bias=bias)
        if recipe is not None and not isinstance(recipe, Fp8Recipe):
            raise TypeError(f"recipe must be an ampkit.fp8.Fp8Recipe (or None for the default); "
                            f"got {type(recipe).__name__}")
        self.recipe = recipe or Fp8Recipe()
        if not isinstance(self.recipe, Fp8Recipe):
            raise TypeError(f"recipe must be an Fp8Recipe; got {type(self.recipe).__name__}")
        r, fmts = self.recipe, self.recipe.formats
        self.states = {t: DelayedScaling(fmts[t], r.history_len, r.algo, r.margin) for t in TENSORS}
        self.log: dict[str, list[tuple[float, float]]] = {t: [] for t in TENSORS}
        self.keep_values = False
        self.values: dict[str, list[torch.Tensor]] = {t: [] for t in TENSORS}
        self.gemms: dict[str, tuple[tuple[str, str], ...]] = {}

    def _scale(self, name: str, t: torch.Tensor) -> float:
        amax = amax_of(t)
        if self.recipe.scaling == "current":
            scale = current_scale(t, self.states[name].fmt, self.recipe.margin)
        else:
            state = self.states[name]
            scale = state.scale
            state.record(amax)
            state.update()         # the scale for the next step (the history now holds this step's amax)
        self.log[name].append((scale, amax))
        if self.keep_values:
            self.values[name].append(t.detach().abs().float().reshape(-1).sort().values)
        return scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Fp8LinearFn.apply(x.float(), self.weight, self.bias, self)

    def extra_repr(self) -> str:
        r = self.recipe
        return super().extra_repr() + f", recipe={r.recipe}, scaling={r.scaling}, history={r.history_len}"


def to_fp8(model: nn.Module, recipe: Fp8Recipe | None = None) -> nn.Module:
    """Replace every ``nn.Linear`` in ``model`` (in place) by an :class:`Fp8Linear` holding the same parameters.

    >>> to_fp8("model")
    Traceback (most recent call last):
    TypeError: model must be a torch.nn.Module (for example ampkit.models.MLP(...)); got str
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (for example ampkit.models.MLP(...)); "
                        f"got {type(model).__name__}")
    if recipe is not None and not isinstance(recipe, Fp8Recipe):
        raise TypeError(f"recipe must be an ampkit.fp8.Fp8Recipe (or None for the default); "
                        f"got {type(recipe).__name__}")
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear) and not isinstance(child, Fp8Linear):
            new = Fp8Linear(child.in_features, child.out_features, child.bias is not None, recipe)
            new.weight, new.bias = child.weight, child.bias
            setattr(model, name, new)
        else:
            to_fp8(child, recipe)
    return model
