"""E2M1, the 4-bit float of MXFP4 and NVFP4: 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit; no inf, no NaN.

Taught in notebook ``10_fp4.ipynb`` (reachable by name in :func:`ampkit.formats.info` and the views as ``"e2m1"``;
not among the formats notebook 01 lists by default). torch has a packed dtype ``float4_e2m1fn_x2`` but no cast to it
on the CPU, so the kit encodes and decodes E2M1 itself, as a uint8 tensor of 4-bit codes (one code per byte,
``pack_e2m1`` puts two in a byte, the first in the low nibble, as Transformer Engine and torchao store them).

The 16 codes (OCP MX v1.0 §5.3.3): magnitudes 0, 0.5 (the one subnormal), 1, 1.5, 2, 3, 4, 6, and the same with
the sign bit (code | 8). Eight magnitudes cover 0 … 6: the largest is 12× the smallest non-zero one.

Rounding (:func:`e2m1_encode`): to nearest, ties to the even code (0.25 → 0, 0.75 → 1, 1.25 → 1, 1.75 → 2,
2.5 → 2, 3.5 → 4, 5 → 4); beyond ±6 it saturates to ±6 (both references clamp to ±6 before they cast). NaN gives
code 0 (+0), as Transformer Engine's reference ``cast_to_fp4x2`` does (no comparison holds for NaN); a negative zero
keeps its sign (code 8), as torchao's cast and IEEE casts do — Transformer Engine's reference writes +0 there.

>>> e2m1_encode(torch.tensor([5.0, 2.5, -0.3, 7.0])).tolist()
[6, 4, 9, 7]
>>> e2m1_decode(torch.tensor([6, 4, 9, 7], dtype=torch.uint8)).tolist()
[4.0, 2.0, -0.5, 6.0]
"""
from __future__ import annotations

import torch

__all__ = ["E2M1", "E2M1_MAX", "E2M1_SATURATION", "E2M1_VALUES", "E2M1_MIDPOINTS", "e2m1_encode", "e2m1_decode",
           "e2m1_round", "e2m1_neighbours", "e2m1_step", "pack_e2m1", "unpack_e2m1"]

#: the canonical name of the format, as :func:`ampkit.formats.info` knows it
E2M1 = "float4_e2m1"
#: the value of each of the 16 codes (code 8 is -0.0)
E2M1_VALUES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_MAX = 6.0
#: magnitudes at or above this round beyond 6 (the next value would be 8; a tie at 7 goes to it, 6's mantissa bit
#: being odd): where a scaled value *saturates* rather than rounds
E2M1_SATURATION = 7.0
#: halfway between neighbouring magnitudes: the rounding boundaries
E2M1_MIDPOINTS: tuple[float, ...] = tuple((a + b) / 2 for a, b in zip(E2M1_VALUES[:7], E2M1_VALUES[1:8]))

_LUT = torch.tensor(E2M1_VALUES, dtype=torch.float32)


def _check_float(x: object, name: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{name} must be a floating-point tensor; got {got}")
    return x.float()


def _round_magnitude(a: torch.Tensor) -> torch.Tensor:
    """``a`` (magnitudes, no NaN) rounded to E2M1's magnitudes (fp32): the grid's step is 0.5 below 2, 1 below 4,
    2 above — read off ``a``'s fp32 exponent field, clamped to [0, 2] — and ``torch.round`` rounds half to even: on
    each of these grids the even integer is the even code, so the ties go where the format's ties go. Saturates at 6.
    """
    step = e2m1_step(a)
    return (torch.round(a / step) * step).clamp_max_(E2M1_MAX)


def e2m1_step(a: torch.Tensor) -> torch.Tensor:
    """The spacing of E2M1's magnitudes at each magnitude ``a`` (fp32, no NaN): 0.5 below 2, 1 below 4, 2 above —
    read off ``a``'s fp32 exponent field, clamped to [0, 2].

    >>> e2m1_step(torch.tensor([0.3, 1.9, 2.0, 5.0])).tolist()
    [0.5, 0.5, 1.0, 2.0]
    """
    e = ((a.float().view(torch.int32) >> 23) - 127).clamp_(0, 2)  # exponent of a, clamped: 0 (a < 2), 1, 2 (a >= 4)
    return ((e + 126) << 23).view(torch.float32)                  # 2**(e - 1): 0.5, 1, 2


def _no_nan(x: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(x, nan=0.0, posinf=float("inf"), neginf=float("-inf"))


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """The E2M1 code (uint8, 0 … 15) of each value: round to nearest, ties to even, saturate at ±6, NaN → 0.

    >>> e2m1_encode(torch.tensor([0.25, 0.75, 1.25, 1.75, 3.5, -0.0])).tolist()
    [0, 2, 2, 4, 6, 8]
    """
    x = _no_nan(_check_float(x))
    m = _round_magnitude(x.abs())
    # magnitudes 0, 0.5 … 2 → codes 0 … 4 (2m); 3, 4 → 5, 6 (m + 2); 6 → 7
    code = torch.where(m <= 2, 2 * m, torch.where(m <= 4, m + 2, 7.0)).to(torch.uint8)
    return code | torch.signbit(x).to(torch.uint8) << 3


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """The fp32 value of each E2M1 code (uint8, 0 … 15).

    >>> e2m1_decode(torch.arange(8, dtype=torch.uint8)).tolist()
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    """
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        raise TypeError("codes must be a uint8 tensor of E2M1 codes 0 … 15 (from e2m1_encode)")
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError(f"E2M1 codes are 0 … 15; got {int(codes.max())} (packed bytes? use unpack_e2m1 first)")
    return _LUT[codes.long()]


def e2m1_round(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to E2M1 and read back (fp32): what storing it in E2M1 leaves; the same numbers as
    ``e2m1_decode(e2m1_encode(x))`` (signed zeros too; NaN → 0), without the codes.

    >>> e2m1_round(torch.tensor([5.0, 2.6, 100.0, -0.2])).tolist()
    [4.0, 3.0, 6.0, -0.0]
    """
    x = _no_nan(_check_float(x))
    return torch.copysign(_round_magnitude(x.abs()), x)


def e2m1_neighbours(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lo, hi)``: the E2M1 values just below-or-at and at-or-above each ``x`` in [-6, 6] (equal where x is one).

    >>> lo, hi = e2m1_neighbours(torch.tensor([2.5, -0.2, 3.0]))
    >>> lo.tolist(), hi.tolist()
    ([2.0, -0.5, 3.0], [3.0, 0.0, 3.0])
    """
    x = _check_float(x)
    a = x.abs()
    if bool((a > E2M1_MAX).any()) or bool(torch.isnan(x).any()):
        raise ValueError("e2m1_neighbours needs values in [-6, 6] (scale and clamp them first)")
    step = e2m1_step(a)
    down = torch.floor(a / step) * step
    up = torch.where(down == a, a, down + step)
    neg = torch.signbit(x)
    return torch.where(neg, -up, down), torch.where(neg, -down, up) + 0.0   # + 0.0: no -0.0


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Two codes per byte along the last dimension: element 2i in the low nibble, 2i+1 in the high one.

    >>> pack_e2m1(torch.tensor([[1, 15]], dtype=torch.uint8)).tolist()
    [[241]]
    """
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8 or codes.dim() == 0 or codes.shape[-1] % 2:
        raise ValueError("pack_e2m1 needs a uint8 tensor of codes whose last dimension is even")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """The codes of :func:`pack_e2m1`'s bytes, back in order.

    >>> unpack_e2m1(torch.tensor([[241]], dtype=torch.uint8)).tolist()
    [[1, 15]]
    """
    if not isinstance(packed, torch.Tensor) or packed.dtype != torch.uint8 or packed.dim() == 0:
        raise TypeError("unpack_e2m1 needs a uint8 tensor of packed bytes (from pack_e2m1)")
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)
