"""NVFP4: E2M1 values in blocks of 16 with an E4M3 scale each, under one fp32 scale per tensor (two levels).
Taught in ``10_fp4.ipynb``.

Level 2, the tensor: ``global_encode = 448 · 6 / amax`` (fp32; the tensor's amax maps to the largest E4M3 × E2M1
product, 2688). Level 1, each block of 16 (1×16 along the last dimension, or 16×16 for weights so that a weight and
its transpose share their blocks): ``block_scale = e4m3(block_amax / 6 · global_encode)``, and the elements are
``e2m1(x · 1 / (block_scale · global_decode))`` with ``global_decode = 1 / global_encode``. Decoding is
``e2m1 · block_scale · (amax / 2688)``: the first product is exact in fp32, the second rounds once (Transformer
Engine applies it in the GEMM's epilogue as ``alpha``).

The per-tensor scale is what lets an E4M3 block scale work: E4M3 spans 2**-9 … 448, so the block amaxes are moved
into that window by one fp32 number; MXFP4's E8M0 block scale needs no tensor scale but can only be a power of two.

Three ways of doing the fp32 arithmetic of ``block_scale`` (``arithmetic=``), each the code of one reference:

``"te"``       Transformer Engine's reference quantizer from v2.14 on (``quantization_nvfp4.py``, then
               ``quantization_ref_nvfp4.py`` from v2.16): ``block_amax · (global_encode · fp32(1/6))``.
``"te2.8"``    the same quantizer at v2.8 … v2.13 (``experimental/quantization_microblock_ref.py`` at v2.8):
               ``(block_amax / 6) · global_encode``. The two differ in the last bit of the fp32 product, which can
               move the E4M3 scale by one step on a few blocks.
``"torchao"``  torchao's ``nvfp4_quantize`` (0.18): ``per_tensor = amax / 2688``, ``block_scale =
               e4m3(clamp((block_amax / 6) / per_tensor, 2**-6, 448))``, elements ``x · ((1 / per_tensor) /
               block_scale)``. The clamp at E4M3's smallest *normal* is the real disagreement: a block whose scale
               falls below 2**-6 (its amax below about 2**-6 · 6 / 2688 ≈ 3.5e-5 of the tensor's) keeps scale 2**-6
               in torchao, while Transformer Engine stores E4M3's subnormal scale, or 0 and flushes the block.
               An all-zero tensor has amax 0: torchao divides 0 by 0 (NaN scales); TE encodes with fp32's max.

The kit follows Transformer Engine (``"te"``) by default: it is what the NVFP4 recipe trains with, and its
subnormal block scales keep blocks that torchao rounds coarsely (``tests/test_fp8_nvfp4_refs.py`` shows the case).

Non-finite input: an inf makes the tensor amax inf, so ``global_encode`` is 0 and TE replaces it by 1; a NaN makes
its block scale NaN (E4M3 0x7F) and the block decodes to NaN.

>>> t = nvfp4_quantize(torch.tensor([[6.0, 5.0, 2.5, 0.1] * 4]))
>>> e2m1_decode(t.codes)[0, :4].tolist(), t.scales.float()[0, 0].item()   # 5, 2.5: ties to the even codes
([6.0, 4.0, 2.0, 0.0], 448.0)
>>> t.dequantize()[0, 0].item()                # 6 · 448 · fp32(6 / 2688): the tensor scale rounds once
6.000000476837158
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ampkit._util import check_choice
from ampkit.formats import FP32_MAX
from ampkit.formats.e2m1 import E2M1_MAX, e2m1_decode, e2m1_encode, e2m1_round
from ampkit.fp8.stochastic import stochastic_e2m1, stochastic_round_e2m1

__all__ = ["NVFP4_BLOCK", "ARITHMETICS", "TILES", "ROUNDINGS_FP4", "E4M3_MAX", "NVFP4Tensor", "nvfp4_quantize",
           "nvfp4_dequantize", "nvfp4_fake_quantize", "tensor_amax"]

NVFP4_BLOCK = 16
ARITHMETICS = ("te", "te2.8", "torchao")
TILES = {"1x16": (1, 16), "16x16": (16, 16)}
ROUNDINGS_FP4 = ("nearest", "stochastic")
E4M3_MAX = 448.0
_F32_MAX = torch.tensor(FP32_MAX)
_E4M3_TINY = torch.finfo(torch.float8_e4m3fn).tiny            # 2**-6: torchao's floor for a block scale


@dataclass(frozen=True)
class NVFP4Tensor:
    """One tensor in NVFP4: E2M1 codes (uint8, one per value, the input's shape), one E4M3 scale per block
    (``float8_e4m3fn``, shape ``(rows, cols // 16)``; a 16×16 tile repeats its scale on its 16 rows, as Transformer
    Engine stores it), and the fp32 tensor amax that sets the second level."""

    codes: torch.Tensor
    scales: torch.Tensor
    amax: torch.Tensor
    tile: str
    arithmetic: str

    @property
    def global_decode(self) -> torch.Tensor:
        """``amax / 2688`` (fp32) as the decoder uses it (Transformer Engine's GEMM ``alpha`` for one operand)."""
        return self.amax / (E4M3_MAX * E2M1_MAX)

    def dequantize(self) -> torch.Tensor:
        """fp32 values: ``e2m1 · e4m3 scale · (amax / 2688)``."""
        return nvfp4_dequantize(self)


def tensor_amax(x: torch.Tensor) -> torch.Tensor:
    """The fp32 amax of the whole tensor, as Transformer Engine's reference takes it (``torch.max(abs)``: NaN wins).

    >>> tensor_amax(torch.tensor([[1.0, -3.0]])).item()
    3.0
    """
    return x.detach().abs().max().float()


def _check_2d(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension")
    x2 = x.detach().reshape(-1, x.shape[-1]) if x.dim() != 2 else x.detach()
    if x2.shape[-1] % NVFP4_BLOCK:
        raise ValueError(f"the last dimension ({x2.shape[-1]}) must be a multiple of {NVFP4_BLOCK} (no padding)")
    return x2


def _block_amax(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """fp32 amax per block, shape ``(rows, cols // 16)`` (16×16: each tile's amax on its 16 rows)."""
    m, n = x.shape
    a = x.abs().float()
    if tile == (1, 16):
        return a.reshape(m, n // 16, 16).amax(dim=-1)
    pad = (-m) % 16                                           # TE pads rows with zeros: no effect on an amax
    if pad:
        a = torch.cat([a, a.new_zeros(pad, n)])
    t = a.reshape((m + pad) // 16, 16, n // 16, 16).amax(dim=(1, 3))
    return t.repeat_interleave(16, dim=0)[:m]


def _scales(vec_max: torch.Tensor, amax: torch.Tensor, arithmetic: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(block scales as float8_e4m3fn, the fp32 encode factor per block)``, in the reference's own arithmetic."""
    six, e4 = torch.tensor(E2M1_MAX), torch.tensor(E4M3_MAX)
    if arithmetic == "torchao":
        per_tensor = amax / (E4M3_MAX * E2M1_MAX)
        s = torch.clamp((vec_max / six) / per_tensor, min=_E4M3_TINY, max=E4M3_MAX).to(torch.float8_e4m3fn)
        return s, (1.0 / per_tensor) / s.float()
    enc = torch.minimum(e4 * six / amax, _F32_MAX)
    enc = torch.where(enc == 0, torch.ones_like(enc), enc)
    dec = 1.0 / enc
    if arithmetic == "te":
        ds = vec_max * (enc * torch.reciprocal(six))
    else:
        ds = (vec_max / six) * enc
    s = torch.clamp(torch.minimum(ds, _F32_MAX), -E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return s, torch.minimum(1.0 / (s.float() * dec), _F32_MAX)


def _scaled(x: torch.Tensor, tile: str, arithmetic: str, amax) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x times its encode factors, clamped to ±6, 2-D; the E4M3 block scales; the tensor amax)``."""
    tile_shape = TILES[check_choice("tile", tile, tuple(TILES))]
    arithmetic = check_choice("arithmetic", arithmetic, ARITHMETICS)
    x2 = _check_2d(x, tile_shape)
    a = tensor_amax(x2) if amax is None else torch.as_tensor(amax, dtype=torch.float32)
    m, n = x2.shape
    s, enc = _scales(_block_amax(x2, tile_shape), a, arithmetic)
    scaled = (x2.float().reshape(m, n // 16, 16) * enc.unsqueeze(-1)).clamp(-E2M1_MAX, E2M1_MAX).reshape(m, n)
    return scaled, s, a


def _check_rounding(rounding: str, generator) -> str:
    rounding = check_choice("rounding", rounding, ROUNDINGS_FP4)
    if rounding == "stochastic" and not isinstance(generator, torch.Generator):
        raise ValueError("rounding='stochastic' needs a seeded torch.Generator (generator=torch.Generator()"
                         ".manual_seed(0)), so that a run can be repeated")
    return rounding


def nvfp4_quantize(x: torch.Tensor, tile: str = "1x16", arithmetic: str = "te", rounding: str = "nearest",
                   generator: torch.Generator | None = None, amax: torch.Tensor | float | None = None
                   ) -> NVFP4Tensor:
    """Quantize a 2-D tensor (higher ranks are flattened to rows) to NVFP4 along its last dimension.

    ``tile``: ``"1x16"`` (activations, gradients) or ``"16x16"`` (the recipe's weights); ``arithmetic``: whose fp32
    steps to follow (module docstring); ``rounding``: ``"nearest"`` (ties to even) or ``"stochastic"`` (needs a seeded
    ``generator``: :func:`ampkit.fp8.stochastic.stochastic_e2m1`); ``amax``: the tensor amax to use (default: this
    tensor's, :func:`tensor_amax`).

    >>> t = nvfp4_quantize(torch.arange(1.0, 17.0).reshape(1, 16))
    >>> t.scales.float().tolist(), t.amax.item()                  # block amax = tensor amax: scale 448
    ([[448.0]], 16.0)
    """
    rounding = _check_rounding(rounding, generator)
    scaled, s, a = _scaled(x, tile, arithmetic, amax)
    codes = stochastic_e2m1(scaled, generator) if isinstance(generator, torch.Generator) and rounding == "stochastic" \
        else e2m1_encode(scaled)
    return NVFP4Tensor(codes=codes.reshape(x.shape), scales=s, amax=a, tile=tile, arithmetic=arithmetic)


def nvfp4_dequantize(t: NVFP4Tensor) -> torch.Tensor:
    """fp32 values of an :class:`NVFP4Tensor`: ``(e2m1 · e4m3 scale) · (amax / 2688)`` (NaN blocks stay NaN).

    >>> nvfp4_dequantize(nvfp4_quantize(torch.tensor([[2688.0] * 16]))).tolist()[0][:2]   # amax / 2688 = 1
    [2688.0, 2688.0]
    """
    if not isinstance(t, NVFP4Tensor):
        raise TypeError("nvfp4_dequantize needs an NVFP4Tensor (from nvfp4_quantize)")
    v = e2m1_decode(t.codes).reshape(-1, t.codes.shape[-1])
    m, n = v.shape
    out = (v.reshape(m, n // 16, 16) * t.scales.float().unsqueeze(-1)).reshape(m, n) * t.global_decode
    return out.reshape(t.codes.shape)


def nvfp4_fake_quantize(x: torch.Tensor, tile: str = "1x16", arithmetic: str = "te", rounding: str = "nearest",
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """What NVFP4 storage leaves of ``x``, in fp32: the numbers of :func:`nvfp4_dequantize` of
    :func:`nvfp4_quantize`, bit for bit, computed without the codes (the simulated layer's hot path).

    >>> nvfp4_fake_quantize(torch.tensor([[1.0, 0.4] + [0.0] * 14]))[0, :2].tolist()
    [1.0, 0.3333333432674408]
    """
    rounding = _check_rounding(rounding, generator)
    scaled, s, a = _scaled(x, tile, arithmetic, None)
    m, n = scaled.shape
    v = stochastic_round_e2m1(scaled, generator) if isinstance(generator, torch.Generator) and \
        rounding == "stochastic" else e2m1_round(scaled)
    v = v.reshape(m, n // 16, 16)
    return ((v * s.float().unsqueeze(-1)).reshape(m, n) * (a / (E4M3_MAX * E2M1_MAX))).reshape(x.shape)
