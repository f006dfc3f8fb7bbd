"""One number as a format stores it, bit by bit: sign, exponent and mantissa fields, kind, errors, ulp, neighbours.

Taught in notebook ``01_fp16_range.ipynb`` (the float explorer shows a :class:`Decomposition` per format).
:func:`decompose` starts from a value (torch's own cast gives the bits), :func:`from_bits` from a bit pattern,
:func:`toggle_bit` flips one bit. The bits are decoded with the IEEE-754 field rules; the tests check every
fp16, bf16 and fp8 pattern against torch.

>>> d = decompose(0.1, "fp16"); (d.bits, d.formula())
('0010111001100110', '+1.1001100110 (binary) × 2^-4')
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampkit._util import check_int
from ampkit.formats.parse import real_value
from ampkit.formats.registry import FormatInfo, float_to_pattern, info
from ampkit.formats.rounding import verdict
from ampkit.i18n import Word, mark, tr

__all__ = ["PATTERN_KINDS", "Decomposition", "decompose", "from_bits", "toggle_bit"]

#: What a single stored number can be (:attr:`Decomposition.kind`).
PATTERN_KINDS = (mark("zero"), mark("subnormal"), mark("normal"), "inf", "nan")


@dataclass(frozen=True)
class Decomposition:
    """One number as a format stores it: its bits, fields, kind, errors and neighbours."""

    fmt: str
    value: float            # what was asked for (float64); equals ``stored`` when built from bits
    pattern: int            # the stored bit pattern as an unsigned integer
    sign: str               # bit strings, e.g. "0", "01111", "0000000000"
    exponent: str
    mantissa: str
    kind: str               # zero, subnormal, normal, inf, nan
    unbiased_exponent: int | None   # power of two of the leading bit (emin for subnormals; None for 0/inf/nan)
    stored: float
    abs_error: float
    rel_error: float
    ulp: float              # spacing of representable values at ``stored`` (nan for inf/nan)
    prev: float             # next representable value towards -inf (bit-pattern neighbour)
    next: float             # next representable value towards +inf
    verdict: str            # exact, rounded, flushed to zero, overflow to inf/nan, saturated to max, nan, inf

    @property
    def bits(self) -> str:
        """All bits, sign first: ``decompose(1.0, "fp16").bits == "0011110000000000"``."""
        return self.sign + self.exponent + self.mantissa

    @property
    def fields(self) -> list[str]:
        """Per bit (sign first): ``"sign"``, ``"exponent"`` or ``"mantissa"``."""
        return ["sign"] + ["exponent"] * len(self.exponent) + ["mantissa"] * len(self.mantissa)

    # port: js/floats.js formula
    def formula(self) -> str:
        """The stored value as a formula, e.g. ``+1.1001100110 (binary) × 2^-4``."""
        s = "-" if self.sign == "1" else "+"
        if self.kind == "normal":
            return f"{s}1.{self.mantissa} (binary) × 2^{self.unbiased_exponent}"
        if self.kind == "subnormal":
            return f"{s}0.{self.mantissa} (binary) × 2^{self.unbiased_exponent}"
        return {"zero": f"{s}0", "inf": f"{s}inf", "nan": "NaN"}[self.kind]


def _fields(pattern: int, fi: FormatInfo) -> tuple[int, int, int]:
    m_bits, e_bits = fi.mantissa_bits, fi.exponent_bits
    return pattern >> (e_bits + m_bits), (pattern >> m_bits) & ((1 << e_bits) - 1), pattern & ((1 << m_bits) - 1)


# port: js/floats.js decode
def _decode(pattern: int, fi: FormatInfo) -> tuple[str, float, int | None]:
    """(kind, value, unbiased exponent) of a bit pattern, from the IEEE-754 field rules (no torch involved)."""
    s, e, m = _fields(pattern, fi)
    e_all, m_all = (1 << fi.exponent_bits) - 1, (1 << fi.mantissa_bits) - 1
    sign = -1.0 if s else 1.0
    if fi.has_inf and e == e_all:
        return ("inf", sign * math.inf, None) if m == 0 else ("nan", math.nan, None)
    if not fi.has_inf and fi.has_nan and e == e_all and m == m_all:  # "fn" formats: one NaN pattern per sign
        return "nan", math.nan, None
    if e == 0:
        if m == 0:
            return "zero", math.copysign(0.0, sign), None
        return "subnormal", sign * math.ldexp(m, fi.emin - fi.mantissa_bits), fi.emin
    return "normal", sign * math.ldexp((1 << fi.mantissa_bits) | m, e - fi.bias - fi.mantissa_bits), e - fi.bias


def _neighbours(pattern: int, kind: str, fi: FormatInfo) -> tuple[float, float]:
    """(prev, next): values of the adjacent bit patterns in numeric order."""
    if kind == "nan":
        return math.nan, math.nan
    sign_bit = 1 << (fi.bits - 1)
    mag = pattern & (sign_bit - 1)

    def val(p: int) -> float:
        return _decode(p, fi)[1]

    if kind == "inf":
        return (val(pattern - 1), math.inf) if not pattern & sign_bit else (-math.inf, val(pattern - 1))
    if mag == 0:  # ±0: the smallest subnormals either side
        return -fi.smallest_subnormal, fi.smallest_subnormal
    if pattern & sign_bit:  # negative: larger magnitude is further left
        return val(pattern + 1), val(pattern - 1)
    return val(pattern - 1), val(pattern + 1)


def _ulp_of(kind: str, pattern: int, fi: FormatInfo) -> float:
    if kind in ("inf", "nan"):
        return math.nan
    e = _fields(pattern, fi)[1]
    return math.ldexp(1.0, max(e, 1) - fi.bias - fi.mantissa_bits)


def _build(value: float, pattern: int, fi: FormatInfo) -> Decomposition:
    kind, stored, unb = _decode(pattern, fi)
    s, e, m = _fields(pattern, fi)
    what, abs_err, rel_err = verdict(value, stored, fi)
    prev, nxt = _neighbours(pattern, kind, fi)
    return Decomposition(
        fmt=fi.name, value=value, pattern=pattern, sign=str(s),
        exponent=format(e, f"0{fi.exponent_bits}b"), mantissa=format(m, f"0{fi.mantissa_bits}b"),
        kind=Word(kind), unbiased_exponent=unb, stored=stored, abs_error=abs_err, rel_error=rel_err,
        ulp=_ulp_of(kind, pattern, fi), prev=prev, next=nxt, verdict=Word(what),   # words shown in the kit's language
    )


# port: js/floats.js explore
def decompose(value: float, fmt: str | torch.dtype) -> Decomposition:
    """``value`` as stored in ``fmt`` (torch's own cast): bits by field, kind, stored value, errors, ulp, neighbours.

    >>> d = decompose(0.1, "fp16"); (d.sign, d.exponent, d.mantissa, d.kind, d.stored)
    ('0', '01011', '1001100110', 'normal', 0.0999755859375)
    """
    fi = info(fmt)
    v = real_value(value)
    return _build(v, float_to_pattern(v, fi.dtype), fi)


def from_bits(bits: int | str, fmt: str | torch.dtype) -> Decomposition:
    """The number a bit pattern means in ``fmt`` (an int, or a string of 0/1, spaces and underscores allowed).

    >>> from_bits("0 11110 1111111111", "fp16").stored
    65504.0
    """
    fi = info(fmt)
    if isinstance(bits, str):
        text = bits.replace(" ", "").replace("_", "")
        if not text or set(text) - {"0", "1"} or len(text) != fi.bits:
            raise ValueError(tr("{fmt} needs a string of exactly {n} bits (0/1); got {bits!r}", fmt=fi.name, n=fi.bits,
                                bits=bits))
        pattern = int(text, 2)
    else:
        pattern = check_int(f"a {fi.name} bit pattern (an int, or a string of {fi.bits} bits)", bits,
                            minimum=0, maximum=(1 << fi.bits) - 1)
    stored = _decode(pattern, fi)[1]
    return _build(stored, pattern, fi)


# port: js/floats.js flipBit
def toggle_bit(d: Decomposition, position: int) -> Decomposition:
    """Flip one bit (``position`` 0 = sign, counting from the left as the bits are printed) of a stored number.

    >>> toggle_bit(decompose(1.0, "fp16"), 0).stored
    -1.0
    """
    fi = info(d.fmt)
    position = check_int(f"the position of a {fi.name} bit", position, minimum=0, maximum=fi.bits - 1)
    return from_bits(d.pattern ^ (1 << (fi.bits - 1 - position)), fi.name)
