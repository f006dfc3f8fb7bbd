"""The MX block rule (:mod:`ampkit.fp8.mx`, whose docstring states it): a block's E8M0 exponent per scale rule,
E8M0 bytes, quantize / dequantize with fp8 or E2M1 elements, and the per-tensor report. Taught in
``06_fp8_scaling.ipynb`` (MXFP8) and ``10_fp4.ipynb`` (MXFP4).

>>> mx_exponents(torch.tensor([[500.0] + [1.0] * 31]), "e4m3", rounding="te").tolist()
[[1]]
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampkit._util import check_choice, check_int
from ampkit.formats.e2m1 import E2M1_MAX, E2M1_SATURATION, e2m1_decode, e2m1_encode
from ampkit.fp8.quantize import (
    FP8_FORMATS,
    fp8_dtype,
    fp8_max,
    fp8_name,
    fp8_to_float,
    saturates,
)
from ampkit.i18n import tr

__all__ = ["ROUNDINGS", "SCALE_RULES", "ELEMENTS", "elem_name", "elem_max", "MX_BLOCK", "E8M0_MIN", "E8M0_MAX",
           "E8M0_BIAS", "E8M0_NAN", "emax_elem", "mx_exponents", "mx_quantize", "mx_dequantize", "mx_fake_quantize",
           "MXReport", "mx_report", "pow2", "check_block", "e8m0_encode", "e8m0_decode"]

#: the two MXFP8 rules notebook 06 compares (its view lists these)
ROUNDINGS = ("ocp", "te")
#: every rule the kit computes: the two above and torchao's names (``10_fp4.ipynb``)
SCALE_RULES = (*ROUNDINGS, "floor", "ceil", "even", "rceil")
#: the element formats of an MX block: MXFP8 (e4m3, e5m2) and MXFP4 (e2m1)
ELEMENTS = ("e4m3", "e5m2", "e2m1")
_E2M1_NAMES = ("e2m1", "fp4", "float4_e2m1", "float4_e2m1fn", "mxfp4")
#: mantissa bits of each element format (torchao's EVEN rounds the block amax to this many)
_MBITS = {"e4m3": 3, "e5m2": 2, "e2m1": 1}
MX_BLOCK = 32
#: E8M0 (OCP MX v1.0 §5.4.1): 8 exponent bits, bias 127, exponents -127 … 127, byte 0xFF = NaN (no inf, no zero).
E8M0_MIN, E8M0_MAX, E8M0_BIAS, E8M0_NAN = -127, 127, 127, 0xFF


def elem_name(fmt: str | torch.dtype) -> str:
    """``"e4m3"``, ``"e5m2"`` or ``"e2m1"`` for any accepted spelling of an MX element format.

    >>> elem_name("fp4"), elem_name(torch.float8_e5m2)
    ('e2m1', 'e5m2')
    """
    if isinstance(fmt, str) and fmt.strip().lower() in _E2M1_NAMES:
        return "e2m1"
    if fmt == getattr(torch, "float4_e2m1fn_x2", None):
        return "e2m1"
    try:
        return fp8_name(fmt)
    except ValueError:
        raise ValueError(f"unknown MX element format {fmt!r}; valid: {', '.join(map(repr, ELEMENTS))}") from None


def elem_max(fmt: str | torch.dtype) -> float:
    """The element format's largest value (448, 57344, 6).

    >>> elem_max("e2m1")
    6.0
    """
    name = elem_name(fmt)
    return E2M1_MAX if name == "e2m1" else fp8_max(name)


def emax_elem(fmt: str | torch.dtype) -> int:
    """Exponent of the element format's largest normal: floor(log2(elem_max)) (8 for e4m3, 15 for e5m2, 2 for e2m1).

    >>> emax_elem("e4m3"), emax_elem("e5m2"), emax_elem("e2m1")   # 448 = 1.75·2**8, 57344 = 1.75·2**15, 6 = 1.5·2**2
    (8, 15, 2)
    """
    return math.floor(math.log2(elem_max(fmt)))


def pow2(e: torch.Tensor) -> torch.Tensor:
    """``2**e`` in fp32, exactly, for integer ``e`` in [-149, 127] (from the bits: a normal's exponent field, or a
    subnormal's one mantissa bit); the same numbers as ``torch.ldexp(1, e)``, at a fraction of its cost.

    >>> pow2(torch.tensor([0, -1, 127, -127, -149])).tolist() == [1.0, 0.5, 2.0**127, 2.0**-127, 2.0**-149]
    True
    """
    e = e.to(torch.int32)
    bits = torch.where(e >= -126, (e + 127) << 23, torch.ones_like(e) << (e + 149).clamp(min=0))
    return bits.view(torch.float32)


def check_block(x: torch.Tensor, block: int) -> int:
    """``block`` as a positive int dividing ``x``'s last dimension (ValueError naming the valid sizes otherwise).

    >>> check_block(torch.zeros(2, 64), 32)
    32
    >>> check_block(torch.zeros(2, 12), 32)
    Traceback (most recent call last):
    ...
    ValueError: block 32 does not divide the last dimension (12); no padding is done — valid block sizes: [1, 2, ...]
    """
    block = check_int("block", block, minimum=1)
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise TypeError("x must be a tensor with at least one dimension")
    n = x.shape[-1]
    if n % block:
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        raise ValueError(tr("block {block} does not divide the last dimension ({n}); no padding is done — "
                            "valid block sizes: {divisors}", block=block, n=n, divisors=divisors))
    return block


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    return x.detach().float().reshape(*x.shape[:-1], x.shape[-1] // block, block)


def mx_exponents(x: torch.Tensor, fmt: str = "e4m3", block: int = MX_BLOCK, rounding: str = "ocp") -> torch.Tensor:
    """The shared exponent of each block (int32, shape ``(..., last_dim // block)``); scale = 2**exponent.

    >>> mx_exponents(torch.tensor([[3.0, 0.5, 1.0, 100.0]]), block=2).tolist()   # floor(log2(amax)) - 8 per block
    [[-7, -2]]
    >>> big = torch.tensor([[500.0, 1.0]])                     # 500 / 2**0 is above 448: "te" rounds the exponent up
    >>> mx_exponents(big, block=2, rounding="ocp").tolist(), mx_exponents(big, block=2, rounding="te").tolist()
    ([[0]], [[1]])
    """
    rounding = check_choice("rounding", rounding, SCALE_RULES)
    return _exponents(_blocks(x, check_block(x, block)), elem_name(fmt), rounding)[0]


def _te_e8m0(amax: torch.Tensor, fmt: str) -> torch.Tensor:
    """Transformer Engine's ``float_to_e8m0(amax * max_norm_rcp)`` for finite ``amax`` ≥ 0, as unbiased exponents.

    ``max_norm_rcp`` is ``1 / fp8_max`` rounded to fp32 and the product is an fp32 multiply; the byte is the
    product's exponent field, plus one when its mantissa is non-zero — except at byte 0xFE (no overflow) and for a
    subnormal product at most 2**-127 (it stays 0x00); a product of 0 gives 0x00."""
    rcp = torch.tensor(1.0 / elem_max(fmt), dtype=torch.float32)
    val = amax.float() * rcp
    bits = val.view(torch.int32)
    exp, man = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    up = (man > 0) & (exp != 0xFE) & ~((exp == 0) & (man <= 0x400000))
    byte = torch.where(val == 0, torch.zeros_like(exp), exp + up.to(exp.dtype))
    return byte - E8M0_BIAS


def _exponents(b: torch.Tensor, fmt: str, rounding: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(exponents, nonfinite_blocks)`` of blocks ``b`` (shape ``(..., n_blocks, block)``)."""
    finite = torch.isfinite(b).all(dim=-1)
    amax = torch.where(torch.isfinite(b), b.abs(), torch.zeros_like(b)).amax(dim=-1)
    mant, ex = torch.frexp(amax)             # amax = mant * 2**ex, mant in [0.5, 1): floor(log2) = ex - 1
    if rounding == "te" and fmt == "e2m1":  # TE's MXFP4 reference: cast_to_e8(amax / 6), the "rceil" rule
        rounding = "rceil"
    if rounding in ("ocp", "floor"):
        e = ex - 1 - emax_elem(fmt)
    elif rounding == "ceil":
        e = torch.where(mant == 0.5, ex - 1, ex) - emax_elem(fmt)
    elif rounding == "even":                # significand 2*mant >= 2 - 2**-(mbits+1) rounds up a binade
        e = torch.where(2 * mant >= 2 - 2.0 ** -(_MBITS[fmt] + 1), ex, ex - 1) - emax_elem(fmt)
    elif rounding == "rceil":
        mq, eq = torch.frexp(amax / elem_max(fmt))   # the fp32 quotient, then the exact ceil(log2)
        e = torch.where(mq == 0.5, eq - 1, eq)
        e = torch.where(mq == 0, torch.full_like(e, E8M0_MIN), e)
    else:
        e = _te_e8m0(amax, fmt)
    if rounding != "te":
        e = torch.where(amax > 0, e, torch.full_like(e, E8M0_MIN))
    e = e.clamp(E8M0_MIN, E8M0_MAX)
    e = torch.where(finite, e, torch.full_like(e, E8M0_MAX))
    return e.to(torch.int32), ~finite


def e8m0_encode(exponents: torch.Tensor, nonfinite_blocks: torch.Tensor | None = None) -> torch.Tensor:
    """The E8M0 bytes (uint8) of block exponents: ``exponent + 127``, and the NaN code 0xFF for non-finite blocks.

    >>> e8m0_encode(torch.tensor([-127, 0, 127]), torch.tensor([False, False, True])).tolist()
    [0, 127, 255]
    """
    e = _check_exponents(exponents)
    byte = (e + E8M0_BIAS).to(torch.uint8)
    if nonfinite_blocks is not None:
        bad = _check_flags(nonfinite_blocks, e.shape)
        byte = torch.where(bad, torch.full_like(byte, E8M0_NAN), byte)
    return byte


def e8m0_decode(scale_bytes: torch.Tensor) -> torch.Tensor:
    """The fp32 scale of each E8M0 byte: ``2**(byte - 127)``, NaN for 0xFF (2**-127 is an fp32 subnormal, exact).

    >>> e8m0_decode(torch.tensor([0, 127, 254, 255], dtype=torch.uint8)).tolist()[1:]
    [1.0, 1.7014118346046923e+38, nan]
    """
    if not isinstance(scale_bytes, torch.Tensor) or scale_bytes.dtype != torch.uint8:
        raise TypeError("scale_bytes must be a uint8 tensor of E8M0 bytes (from e8m0_encode)")
    e = scale_bytes.to(torch.int32) - E8M0_BIAS
    s = pow2(e)
    return torch.where(scale_bytes == E8M0_NAN, torch.full_like(s, float("nan")), s)


def _check_exponents(exponents, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """Block exponents as an int32 tensor in [-127, 127] (of ``shape`` when given)."""
    want = f"exponents must be an integer tensor of E8M0 exponents in [{E8M0_MIN}, {E8M0_MAX}]"
    if shape is not None:
        want += f" of shape {tuple(shape)} (one per block)"
    if (not isinstance(exponents, torch.Tensor) or exponents.is_floating_point() or exponents.is_complex()
            or exponents.dtype == torch.bool):
        got = exponents.dtype if isinstance(exponents, torch.Tensor) else type(exponents).__name__
        raise TypeError(f"{want} (from mx_quantize or mx_exponents), or uint8 E8M0 bytes; got {got}")
    if shape is not None and tuple(exponents.shape) != tuple(shape):
        raise ValueError(f"{want}; got shape {tuple(exponents.shape)}")
    e = exponents.to(torch.int32)
    if e.numel() and (int(e.min()) < E8M0_MIN or int(e.max()) > E8M0_MAX):
        raise ValueError(f"{want}; got values from {int(e.min())} to {int(e.max())}")
    return e


def _check_flags(flags, shape: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(flags, torch.Tensor) or flags.dtype != torch.bool:
        raise TypeError("nonfinite_blocks must be a bool tensor (from mx_quantize) or None")
    if tuple(flags.shape) != tuple(shape):
        raise ValueError(f"nonfinite_blocks must have the exponents' shape {tuple(shape)}; got {tuple(flags.shape)}")
    return flags


def _prepare(x: torch.Tensor, fmt: str, block: int, rounding: str):
    """Validated ``(block, format name, rounding, blocks view, exponents, non-finite blocks)``."""
    block = check_block(x, block)
    name, rounding = elem_name(fmt), check_choice("rounding", rounding, SCALE_RULES)
    b = _blocks(x, block)
    return (block, name, rounding, b, *_exponents(b, name, rounding))


def mx_quantize(x: torch.Tensor, fmt: str = "e4m3", block: int = MX_BLOCK, rounding: str = "ocp"
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(elements, exponents, nonfinite_blocks)``: elements = ``x / 2**e`` saturated to ±fp8_max, cast to fp8.

    >>> q, exponents, nonfinite = mx_quantize(torch.tensor([[3.0, 0.5, 1.0, 100.0]]), block=2)
    >>> q.float().tolist(), exponents.tolist(), nonfinite.tolist()       # elements are x / 2**e
    ([[384.0, 64.0, 4.0, 384.0]], [[-7, -2]], [[False, False]])
    """
    _, name, _, b, e, bad = _prepare(x, fmt, block, rounding)
    m = elem_max(name)
    scaled = (b * pow2(-e).unsqueeze(-1)).clamp(-m, m)          # times an exact power of two: x / 2**e
    if name == "e2m1":                      # MXFP4: E2M1 codes, one per byte
        return e2m1_encode(scaled).reshape(x.shape), e, bad
    return scaled.to(fp8_dtype(name)).reshape(x.shape), e, bad


def mx_dequantize(q: torch.Tensor, exponents: torch.Tensor, nonfinite_blocks: torch.Tensor | None = None,
                  block: int = MX_BLOCK) -> torch.Tensor:
    """fp32 values: each element times its block's scale ``2**exponent`` (NaN for non-finite blocks).

    ``exponents``: one int per block, shape ``q.shape[:-1] + (q.shape[-1] // block,)`` (from :func:`mx_quantize`), or
    the same shape of uint8 E8M0 bytes (from :func:`e8m0_encode`; 0xFF decodes the block to NaN).

    >>> q, exponents, nonfinite = mx_quantize(torch.tensor([[3.0, 0.5, 1.0, 100.0]]), block=2)
    >>> mx_dequantize(q, exponents, nonfinite, block=2).tolist()    # 100 -> 384 * 2**-2 = 96: e4m3's 3 mantissa bits
    [[3.0, 0.5, 1.0, 96.0]]
    """
    if not isinstance(q, torch.Tensor) or q.dtype not in (*FP8_FORMATS.values(), torch.uint8):
        got = q.dtype if isinstance(q, torch.Tensor) else type(q).__name__
        raise TypeError(f"q must be a float8_e4m3fn or float8_e5m2 tensor, or uint8 E2M1 codes (from mx_quantize); "
                        f"got {got}")
    block = check_block(q, block)
    shape = (*q.shape[:-1], q.shape[-1] // block)
    if isinstance(exponents, torch.Tensor) and exponents.dtype == torch.uint8:
        if tuple(exponents.shape) != shape:
            raise ValueError(f"E8M0 bytes must have shape {shape} (one per block of {block}); "
                             f"got {tuple(exponents.shape)}")
        scales = e8m0_decode(exponents)
    else:
        scales = pow2(_check_exponents(exponents, shape))
    if nonfinite_blocks is not None:
        scales = torch.where(_check_flags(nonfinite_blocks, shape), torch.full_like(scales, float("nan")), scales)
    b = (e2m1_decode(q) if q.dtype == torch.uint8 else fp8_to_float(q)).reshape(*shape, block)
    return (b * scales.unsqueeze(-1)).reshape(q.shape)


def mx_fake_quantize(x: torch.Tensor, fmt: str = "e4m3", block: int = MX_BLOCK, rounding: str = "ocp") -> torch.Tensor:
    """What MX storage leaves of ``x``, in fp32.

    >>> x = torch.tensor([[500.0] + [1.0] * 31])
    >>> mx_fake_quantize(x, rounding="ocp")[0, 0].item(), mx_fake_quantize(x, rounding="te")[0, 0].item()
    (448.0, 512.0)
    """
    q, e, bad = mx_quantize(x, fmt, block, rounding)
    return mx_dequantize(q, e, bad, block)


@dataclass(frozen=True)
class MXReport:
    """Block-scaled quantization of one tensor: fractions saturated / flushed, the error, blocks that saturated."""

    fmt: str
    block: int
    rounding: str
    saturated: float
    flushed: float
    rel_error: float
    blocks_saturating: int
    n_blocks: int


def mx_report(x: torch.Tensor, fmt: str = "e4m3", block: int = MX_BLOCK, rounding: str = "ocp") -> MXReport:
    """Quantize ``x`` with MX block scaling and count what happened (finite inputs).

    >>> x = torch.tensor([[500.0] + [1.0] * 31])              # one block; its largest value saturates under "ocp"
    >>> [(r.saturated, r.blocks_saturating) for r in (mx_report(x, rounding="ocp"), mx_report(x, rounding="te"))]
    [(0.03125, 1), (0.0, 0)]
    """
    block, name, rounding, b, e, _ = _prepare(x, fmt, block, rounding)
    deq = mx_fake_quantize(x, name, block, rounding).reshape(b.shape)
    finite = torch.isfinite(b)
    scaled = (b * pow2(-e).unsqueeze(-1)).abs()
    sat = finite & (scaled >= E2M1_SATURATION if name == "e2m1" else saturates(scaled, name))
    flushed = finite & (b != 0) & (deq == 0)
    n = max(b.numel(), 1)
    err = torch.where(finite, b - deq, torch.zeros_like(b))
    norm = float(torch.where(finite, b, torch.zeros_like(b)).norm())
    return MXReport(fmt=name, block=block, rounding=rounding, saturated=int(sat.sum()) / n,
                    flushed=int(flushed.sum()) / n, rel_error=float(err.norm()) / norm if norm > 0 else 0.0,
                    blocks_saturating=int(sat.any(dim=-1).sum()), n_blocks=int(e.numel()))
