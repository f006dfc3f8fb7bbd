"""The formats the kit teaches, their names, and each one's layout and limits as torch stores it.

Taught in notebook ``01_fp16_range.ipynb``. :data:`FORMATS` names them; :func:`resolve_format` / :func:`format_name`
turn any accepted name (``"fp16"``, ``"half"``, ``torch.bfloat16``, ``"e4m3"``...) into the torch dtype / canonical
name; :func:`info` gives a :class:`FormatInfo` (bits, bias, max, smallest normal/subnormal, eps, has-inf, what
overflow gives), every field derived from torch (``torch.finfo``, bit patterns, torch's own cast), never typed in.

>>> info("fp16").max, format_name("half")
(65504.0, 'float16')
>>> FP16_MAX == info("fp16").max == 65504.0
True
>>> FP16_TINY == info("fp16").smallest_normal == 2.0**-14, FP32_MAX == info("fp32").max
(True, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from ampkit.formats.e2m1 import E2M1, E2M1_VALUES, e2m1_encode, e2m1_round
from ampkit.i18n import tr

__all__ = ["FORMATS", "BY_NAME_ONLY", "FP16_MAX", "FP16_TINY", "FP32_MAX", "resolve_format", "format_name",
           "FormatInfo", "info"]

#: fp16's largest finite number, 65504 (``torch.finfo(torch.float16).max``): a value or gradient above it
#: overflows to inf when stored in fp16. ``info("fp16").max`` is the same number; this is the constant for a hot path.
FP16_MAX: float = float(torch.finfo(torch.float16).max)
#: fp16's smallest normal number, 2**-14 (``torch.finfo(torch.float16).tiny``, ``info("fp16").smallest_normal``):
#: a scaled gradient below it keeps fewer significant bits (a subnormal) or flushes to zero.
FP16_TINY: float = float(torch.finfo(torch.float16).tiny)
#: fp32's largest finite number, (2 - 2**-23) * 2**127 (``torch.finfo(torch.float32).max``, ``info("fp32").max``):
#: what a scale that overflowed to inf is clamped to, and the bound of any setting a float32 must hold.
FP32_MAX: float = float(torch.finfo(torch.float32).max)

#: The formats the kit teaches, by canonical name (narrowest last).
FORMATS: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}

#: Formats known by name but not listed in :data:`FORMATS` (so not in the views' default lists): E2M1, the 4-bit
#: float of MXFP4/NVFP4 (``10_fp4.ipynb``). torch has no cast to it on a CPU: the kit's own
#: (:mod:`ampkit.formats.e2m1`) stands in for torch's, and its dtype is torch's packed ``float4_e2m1fn_x2``.
BY_NAME_ONLY: dict[str, torch.dtype] = {E2M1: torch.float4_e2m1fn_x2}

_ALIASES: dict[str, str] = {
    "e2m1": E2M1, "fp4": E2M1, "float4_e2m1fn": E2M1, "float4_e2m1fn_x2": E2M1, "fp4_e2m1": E2M1,
    "fp32": "float32", "float": "float32", "single": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
    "e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
}

#: Signed-int dtype of each width, to read a format's bits (``tensor.view``).
_INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def resolve_format(fmt: str | torch.dtype) -> torch.dtype:
    """Turn a format name (``"fp16"``, ``"bfloat16"``, ``"e4m3"``...) or a torch dtype into a torch dtype.

    An unknown name or another dtype (``"float17"``, ``torch.int8``) is a ``ValueError`` naming the supported
    formats; anything else (``3``, ``None``) is a ``TypeError``.

    >>> resolve_format("bf16")
    torch.bfloat16
    """
    if isinstance(fmt, torch.dtype):
        if fmt in FORMATS.values() or fmt in BY_NAME_ONLY.values():
            return fmt
        raise ValueError(tr("unsupported format {fmt}; supported formats: {names}", fmt=fmt, names=", ".join(FORMATS)))
    if not isinstance(fmt, str):
        raise TypeError(tr("a format is a name or a torch dtype (supported formats: {names}); got {type} {fmt!r}",
                           names=", ".join(FORMATS), type=type(fmt).__name__, fmt=fmt))
    key = fmt.strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key in FORMATS:
        return FORMATS[key]
    if key in BY_NAME_ONLY:
        return BY_NAME_ONLY[key]
    raise ValueError(tr("unsupported format {fmt!r}; supported formats: {names} (aliases: {aliases})", fmt=fmt,
                        names=", ".join(FORMATS), aliases=", ".join(sorted(_ALIASES))))


def format_name(fmt: str | torch.dtype) -> str:
    """Canonical name of a format: ``format_name(torch.half) == "float16"``.

    >>> format_name(torch.half), format_name("bf16"), format_name(torch.float8_e4m3fn)
    ('float16', 'bfloat16', 'float8_e4m3fn')
    """
    dtype = resolve_format(fmt)
    return next(name for name, dt in (*FORMATS.items(), *BY_NAME_ONLY.items()) if dt == dtype)


def cast(value: float, dtype: torch.dtype) -> float:
    """``value`` (float64) after torch's own cast to ``dtype`` and back: the number a tensor of ``dtype`` holds.
    E2M1: the kit's cast (:func:`ampkit.formats.e2m1.e2m1_round`), through float32 as torch's casts go."""
    if dtype in BY_NAME_ONLY.values():
        return float(e2m1_round(torch.tensor(value, dtype=torch.float64).to(torch.float32)))
    return torch.tensor(value, dtype=torch.float64).to(dtype).to(torch.float64).item()


def pattern_to_float(pattern: int, dtype: torch.dtype) -> float:
    """The value torch reads from bit pattern ``pattern`` (an unsigned int) of ``dtype`` (E2M1: the kit's table)."""
    if dtype in BY_NAME_ONLY.values():
        return E2M1_VALUES[pattern]
    bits = torch.finfo(dtype).bits
    view = _INT_VIEW[bits]
    if view is not torch.uint8 and pattern >= 1 << (bits - 1):
        pattern -= 1 << bits  # signed int view
    return torch.tensor(pattern, dtype=view).view(dtype).to(torch.float64).item()


def float_to_pattern(value: float, dtype: torch.dtype) -> int:
    """Bit pattern torch stores for ``value`` (float64 -> dtype with torch's own cast), as an unsigned int."""
    if dtype in BY_NAME_ONLY.values():
        return int(e2m1_encode(torch.tensor(value, dtype=torch.float64).to(torch.float32)))
    bits = torch.finfo(dtype).bits
    t = torch.tensor(value, dtype=torch.float64).to(dtype)
    return int(t.view(_INT_VIEW[bits]).item()) & ((1 << bits) - 1)


@dataclass(frozen=True)
class FormatInfo:
    """A float format's layout and limits, all read from torch (``finfo`` and bit patterns)."""

    name: str
    dtype: torch.dtype
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    has_inf: bool
    overflows_to: str  # what torch gives for 2*max: "inf", "nan" or "max" (saturates)
    has_nan: bool = True   # E2M1 has none: its all-ones pattern is 6, not NaN

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number (also the subnormals' scale)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        return math.frexp(self.max)[1] - 1

    @property
    def ulp_at_max(self) -> float:
        """Gap between ``max`` and the next smaller representable value."""
        return math.ldexp(1.0, self.emax - self.mantissa_bits)

    @property
    def overflow_threshold(self) -> float:
        """Smallest magnitude that no longer rounds to ``max`` (``max`` + half an ulp; see ``overflow_tie_up``)."""
        return self.max + self.ulp_at_max / 2

    @property
    def overflow_tie_up(self) -> bool:
        """Whether exactly ``overflow_threshold`` rounds away from ``max`` (round-half-even: max's last bit is 1)."""
        return (_max_pattern(self.name) & 1) == 1

    @property
    def flush_threshold(self) -> float:
        """Magnitudes at or below this (half the smallest subnormal) round to zero."""
        return self.smallest_subnormal / 2

    @property
    def normal_threshold(self) -> float:
        """Magnitudes at or above this round to a normal number (ties go to the even ``smallest_normal``)."""
        return self.smallest_normal - self.smallest_subnormal / 2

    def overflows(self, value: float) -> bool:
        """Whether ``value`` is past the format's range (rounds beyond ``max``; torch may saturate it instead)."""
        a = abs(value)
        return a > self.overflow_threshold or (a == self.overflow_threshold and self.overflow_tie_up)


@lru_cache(maxsize=None)
def _info(name: str) -> FormatInfo:
    dtype = FORMATS[name] if name in FORMATS else BY_NAME_ONLY[name]
    if name in BY_NAME_ONLY:   # no torch.finfo: read the same limits off the kit's E2M1 table
        bits = (len(E2M1_VALUES) - 1).bit_length()
        one = float_to_pattern(1.0, dtype)
        eps, fmax = pattern_to_float(one + 1, dtype) - 1.0, max(E2M1_VALUES)
        mant = round(-math.log2(eps))
        tiny = pattern_to_float(1 << mant, dtype)
    else:
        fi = torch.finfo(dtype)
        bits, eps, fmax, tiny = fi.bits, float(fi.eps), float(fi.max), float(fi.smallest_normal)
        mant = round(-math.log2(fi.eps))
    exp_bits = bits - 1 - mant
    bias = float_to_pattern(1.0, dtype) >> mant  # 1.0 = 2**0: its exponent field is the bias
    inf_pattern = ((1 << exp_bits) - 1) << mant
    has_inf = math.isinf(pattern_to_float(inf_pattern, dtype))
    has_nan = any(math.isnan(pattern_to_float(p, dtype)) for p in ((1 << (bits - 1)) - 1, (1 << bits) - 1))
    over = cast(fmax * 2, dtype)
    overflows_to = "inf" if math.isinf(over) else ("nan" if math.isnan(over) else "max")
    return FormatInfo(name=name, dtype=dtype, bits=bits, exponent_bits=exp_bits, mantissa_bits=mant, bias=bias,
                      max=fmax, smallest_normal=tiny, smallest_subnormal=pattern_to_float(1, dtype), eps=eps,
                      has_inf=has_inf, overflows_to=overflows_to, has_nan=has_nan)


@lru_cache(maxsize=None)
def _max_pattern(name: str) -> int:
    fi = _info(name)
    return float_to_pattern(fi.max, fi.dtype)


def info(fmt: str | torch.dtype) -> FormatInfo:
    """Layout and limits of a format, derived from torch (not typed in).

    >>> i = info("fp16"); (i.exponent_bits, i.mantissa_bits, i.bias, i.max, i.smallest_subnormal == 2**-24)
    (5, 10, 15, 65504.0, True)
    >>> i = info("e2m1"); (i.bits, i.exponent_bits, i.bias, i.max, i.smallest_subnormal, i.has_nan, i.overflows_to)
    (4, 2, 1, 6.0, 0.5, False, 'max')
    """
    return _info(fmt if isinstance(fmt, str) and fmt in FORMATS else format_name(fmt))  # canonical names: fast
