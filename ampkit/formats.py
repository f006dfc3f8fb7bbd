"""Floating-point formats as the ML frameworks store them: fp32, fp16, bf16, fp8.

Taught in notebook ``01_fp16_range.ipynb`` (and previewed in ``00_start_here.ipynb``).

Everything here is derived from torch itself (``torch.finfo``, bit patterns, torch's own casts), never typed in:

- :func:`info` — a format's layout and limits (bits, bias, max, smallest normal/subnormal, eps, has-inf).
- :func:`decompose` / :func:`from_bits` / :func:`toggle_bit` — one number as stored: sign, exponent and mantissa
  bits, kind, stored value, rounding error, ulp and the neighbouring representable values.
- :func:`classify` — vectorised: what fraction of a tensor would flush to zero, turn subnormal, stay normal or
  overflow when cast to a format (used on scaled gradients by ``ampkit.scaling``).
- :func:`round_trip`, :func:`compare_formats`, :func:`ulp`, :func:`accumulate`, :func:`range_bands`,
  :func:`parse_value` — the helpers behind the notebook and the widgets in ``ampkit.widgets.formats``.

Two facts about torch 2.x's casts that the kit reports rather than hides (checked in the tests):

- a Python float (float64) is converted to fp16/bf16/fp8 *through float32*, so it can be rounded twice
  (``1 + 2**-11 + 2**-40`` becomes ``1.0`` in fp16, where one correct rounding would give ``1 + 2**-10``);
- casts to ``float8_e4m3fn`` *saturate* on CPU: ``1000.0`` and even ``inf`` become ``448.0`` (e4m3fn has no inf);
  ``float8_e5m2`` overflows to ``inf`` like fp16.

>>> round_trip(0.1, "fp16")
0.0999755859375
>>> info("fp16").max
65504.0
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import torch

__all__ = [
    "FORMATS", "resolve_format", "format_name", "round_trip", "RoundTrip", "compare_formats",
    "FormatInfo", "info", "Classification", "classify", "classify_codes", "KINDS", "CLASSES",
    "Decomposition", "decompose", "from_bits", "toggle_bit", "ulp", "accumulate", "range_bands",
    "RangeBands", "parse_value", "explain",
]

#: The formats the kit teaches, by canonical name (narrowest last).
FORMATS: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}

_ALIASES: dict[str, str] = {
    "fp32": "float32", "float": "float32", "single": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
}

#: What a single stored number can be (:attr:`Decomposition.kind`).
KINDS = ("zero", "subnormal", "normal", "inf", "nan")
#: What :func:`classify` counts, in the order of :func:`classify_codes`' codes 0..5.
CLASSES = ("zero", "flushed", "subnormal", "normal", "overflow", "nonfinite")

_INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def resolve_format(fmt: str | torch.dtype) -> torch.dtype:
    """Turn a format name (``"fp16"``, ``"bfloat16"``, ``"e4m3"``...) or a torch dtype into a torch dtype.

    Raises ``ValueError`` naming the supported formats for anything else (``"float17"``, ``torch.int8``).

    >>> resolve_format("bf16")
    torch.bfloat16
    """
    if isinstance(fmt, torch.dtype):
        if fmt in FORMATS.values():
            return fmt
        raise ValueError(f"unsupported format {fmt}; supported formats: {', '.join(FORMATS)}")
    if isinstance(fmt, str):
        key = fmt.strip().lower().removeprefix("torch.")
        key = _ALIASES.get(key, key)
        if key in FORMATS:
            return FORMATS[key]
    raise ValueError(
        f"unsupported format {fmt!r}; supported formats: {', '.join(FORMATS)} "
        f"(aliases: {', '.join(sorted(_ALIASES))})"
    )


def format_name(fmt: str | torch.dtype) -> str:
    """Canonical name of a format: ``format_name(torch.half) == "float16"``."""
    dtype = resolve_format(fmt)
    return next(name for name, dt in FORMATS.items() if dt == dtype)


def _check_real(value: object) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"value must be a single number, got a tensor of shape {tuple(value.shape)}")
        if value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"value must be a real number, got a {value.dtype} tensor")
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)  # numpy floats and ints, fractions.Fraction, decimal-likes registered as Real
        hint = " (use parse_value() for text)" if isinstance(value, str) else ""
        raise TypeError(f"value must be a real number, got {type(value).__name__}{hint}")
    try:
        return float(value)
    except OverflowError:  # an int beyond float64
        return math.inf if value > 0 else -math.inf


def round_trip(value: float, fmt: str | torch.dtype) -> float:
    """The value actually stored when ``value`` (a Python float, i.e. float64) is cast to ``fmt``.

    Uses torch's own conversion (round to nearest even, via float32); overflow gives ``inf`` (e4m3fn saturates
    at 448 on CPU).

    >>> round_trip(1 + 2**-11, "fp16")
    1.0
    """
    dtype = resolve_format(fmt)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"value must be a real number, got {type(value).__name__}")
    return torch.tensor(float(value), dtype=torch.float64).to(dtype).to(torch.float64).item()


# ----------------------------------------------------------------------------------------------- info

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


def _pattern_to_float(pattern: int, dtype: torch.dtype) -> float:
    bits = torch.finfo(dtype).bits
    view = _INT_VIEW[bits]
    if view is not torch.uint8 and pattern >= 1 << (bits - 1):
        pattern -= 1 << bits  # signed int view
    return torch.tensor(pattern, dtype=view).view(dtype).to(torch.float64).item()


def _float_to_pattern(value: float, dtype: torch.dtype) -> int:
    """Bit pattern torch stores for ``value`` (float64 -> dtype with torch's own cast)."""
    bits = torch.finfo(dtype).bits
    t = torch.tensor(value, dtype=torch.float64).to(dtype)
    return t.view(_INT_VIEW[bits]).item() & ((1 << bits) - 1)


@lru_cache(maxsize=None)
def _info(name: str) -> FormatInfo:
    dtype = FORMATS[name]
    fi = torch.finfo(dtype)
    mant = round(-math.log2(fi.eps))
    exp_bits = fi.bits - 1 - mant
    bias = _float_to_pattern(1.0, dtype) >> mant  # 1.0 = 2**0: its exponent field is the bias
    inf_pattern = ((1 << exp_bits) - 1) << mant
    has_inf = math.isinf(_pattern_to_float(inf_pattern, dtype))
    over = round_trip(float(fi.max) * 2, dtype)
    overflows_to = "inf" if math.isinf(over) else ("nan" if math.isnan(over) else "max")
    return FormatInfo(name=name, dtype=dtype, bits=fi.bits, exponent_bits=exp_bits, mantissa_bits=mant, bias=bias,
                      max=float(fi.max), smallest_normal=float(fi.smallest_normal),
                      smallest_subnormal=_pattern_to_float(1, dtype), eps=float(fi.eps), has_inf=has_inf,
                      overflows_to=overflows_to)


@lru_cache(maxsize=None)
def _max_pattern(name: str) -> int:
    return _float_to_pattern(float(torch.finfo(FORMATS[name]).max), FORMATS[name])


def info(fmt: str | torch.dtype) -> FormatInfo:
    """Layout and limits of a format, derived from torch (not typed in).

    >>> i = info("fp16"); (i.exponent_bits, i.mantissa_bits, i.bias, i.max, i.smallest_subnormal == 2**-24)
    (5, 10, 15, 65504.0, True)
    """
    return _info(format_name(fmt))


# ------------------------------------------------------------------------------------------- classify

@dataclass(frozen=True)
class Classification:
    """Fractions (summing to 1) of a tensor's values by what a cast to ``fmt`` does to them; ``n`` values in all.

    ``zero``: already exactly 0 · ``flushed``: nonzero, becomes 0 · ``subnormal``: lands in the subnormal band
    · ``normal``: stays normal · ``overflow``: finite but beyond the format's range (becomes inf; NaN in a
    non-saturating e4m3fn; torch's CPU cast saturates e4m3fn to ±448) · ``nonfinite``: already inf or NaN.
    """

    fmt: str
    n: int
    zero: float
    flushed: float
    subnormal: float
    normal: float
    overflow: float
    nonfinite: float

    @property
    def lost(self) -> float:
        """Fraction of nonzero finite values a cast destroys (flushed to zero or overflowed)."""
        return self.flushed + self.overflow

    def as_dict(self) -> dict[str, float]:
        """The six fractions by name, in :data:`CLASSES` order."""
        return {k: getattr(self, k) for k in CLASSES}

    def counts(self) -> dict[str, int]:
        """The six classes as counts of values."""
        return {k: round(getattr(self, k) * self.n) for k in CLASSES}


def _as_float_tensor(values: object) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        t = values.detach()
    elif isinstance(values, (list, tuple)) and values and all(isinstance(v, torch.Tensor) for v in values):
        parts = [v.detach().reshape(-1) for v in values]
        dtype = torch.float64 if any(p.dtype == torch.float64 for p in parts) else torch.float32
        t = torch.cat([p.to(dtype) for p in parts])
    else:
        try:
            t = torch.as_tensor(values, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"expected a tensor, a list of tensors or numbers; got {type(values).__name__}") from exc
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"classify needs real numbers, got a {t.dtype} tensor")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    return t.reshape(-1)


@lru_cache(maxsize=None)
def _boundaries(name: str, compute: torch.dtype) -> torch.Tensor:
    """Ascending magnitudes b0..b4 (in ``compute`` dtype) with the rule: class k <=> b[k-1] <= |x| < b[k].

    b0 smallest positive (so 0 -> zero), b1 first |x| that does not flush, b2 first that rounds to a normal,
    b3 first that overflows, b4 = inf (inf and NaN fall in the last class).
    """
    fi = _info(name)
    if name == "float32" and compute == torch.float32:  # nothing can flush or overflow
        tiny = fi.smallest_subnormal
        return torch.tensor([tiny, tiny, fi.smallest_normal, math.inf, math.inf], dtype=compute)

    def first_at_or_above(x: float, inclusive: bool) -> float:
        """Smallest ``compute`` value v with v >= x (inclusive) or v > x."""
        t = torch.tensor(x, dtype=torch.float64).to(compute)
        if t.item() < x or (not inclusive and t.item() == x):
            t = torch.nextafter(t, torch.tensor(math.inf, dtype=compute))
        return t.item()

    b0 = torch.nextafter(torch.tensor(0.0, dtype=compute), torch.tensor(1.0, dtype=compute)).item()
    b1 = first_at_or_above(fi.flush_threshold, inclusive=False)      # ties at the flush threshold go to 0 (even)
    b2 = first_at_or_above(fi.normal_threshold, inclusive=True)      # ties go to smallest_normal (even)
    b3 = first_at_or_above(fi.overflow_threshold, inclusive=fi.overflow_tie_up)
    b = [b0, max(b0, b1), max(b0, b1, b2), max(b0, b1, b2, b3), math.inf]
    return torch.tensor(b, dtype=compute)


def _compute_view(t: torch.Tensor, name: str) -> torch.Tensor:
    """The values as torch's cast sees them: float64 goes through float32 unless the target is float32."""
    if t.dtype == torch.float64:
        return t if name == "float32" else t.to(torch.float32)
    if t.dtype == torch.float32:
        return t
    return t.to(torch.float32)  # fp16 / bf16 / fp8 inputs: exact in float32


def classify_codes(values: torch.Tensor, fmt: str | torch.dtype) -> torch.Tensor:
    """Per value, the index in :data:`CLASSES` of what a cast to ``fmt`` does to it (int64 tensor, same shape).

    >>> classify_codes(torch.tensor([0.0, 1e-9, 1e-6, 1.0, 1e5, float("nan")]), "fp16").tolist()
    [0, 1, 2, 3, 4, 5]
    """
    name = format_name(fmt)
    t = values.detach() if isinstance(values, torch.Tensor) else _as_float_tensor(values)
    if not t.is_floating_point():
        t = t.to(torch.float64)
    x = _compute_view(t, name)
    codes = torch.bucketize(x.abs(), _boundaries(name, x.dtype).to(x.device), right=True)
    if t.dtype == torch.float64 and x is not t:  # float64 values beyond float32's range become 0 or inf on the way: flushed / overflow
        codes = torch.where((codes == 5) & torch.isfinite(t), torch.full_like(codes, 4), codes)
        codes = torch.where((codes == 0) & (t != 0), torch.full_like(codes, 1), codes)
    return codes


def classify(values: torch.Tensor | Iterable[torch.Tensor], fmt: str | torch.dtype) -> Classification:
    """Fractions of ``values`` that a cast to ``fmt`` keeps zero, flushes, makes subnormal, keeps normal or overflows.

    Vectorised (one pass of ``torch.bucketize``); agrees with actually casting (see the tests). Accepts a tensor,
    a list of tensors (e.g. all gradients of a model) or a list of numbers.

    >>> c = classify(torch.tensor([1e-9, 1e-6, 1.0, 1e5]), "fp16"); (c.flushed, c.subnormal, c.normal, c.overflow)
    (0.25, 0.25, 0.25, 0.25)
    """
    name = format_name(fmt)
    t = _as_float_tensor(values)
    n = t.numel()
    if n == 0:
        raise ValueError("classify needs at least one value; got an empty tensor")
    x = _compute_view(t, name)
    bounds = _boundaries(name, x.dtype).to(x.device)  # works on CUDA/MPS tensors too: one host sync for the counts
    counts = torch.bincount(torch.bucketize(x.abs(), bounds, right=True), minlength=6).tolist()
    if t.dtype == torch.float64 and x is not t:  # float64 went through float32 (as torch's cast does): fix up values it made 0 or inf
        moved = counts[5] - (n - int(torch.isfinite(t).sum()))
        counts[4] += moved
        counts[5] -= moved
        moved = counts[0] - int((t == 0).sum())
        counts[1] += moved
        counts[0] -= moved
    f = [c / n for c in counts]
    return Classification(name, n, *f)


# ------------------------------------------------------------------------------------------ decompose

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


def _decode(pattern: int, fi: FormatInfo) -> tuple[str, float, int | None]:
    """(kind, value, unbiased exponent) of a bit pattern, from the IEEE-754 field rules (no torch involved)."""
    s, e, m = _fields(pattern, fi)
    e_all, m_all = (1 << fi.exponent_bits) - 1, (1 << fi.mantissa_bits) - 1
    sign = -1.0 if s else 1.0
    if fi.has_inf and e == e_all:
        return ("inf", sign * math.inf, None) if m == 0 else ("nan", math.nan, None)
    if not fi.has_inf and e == e_all and m == m_all:  # "fn" formats: one NaN pattern per sign, no inf
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


def _overflows(value: float, fi: FormatInfo) -> bool:
    a = abs(value)
    return a > fi.overflow_threshold or (a == fi.overflow_threshold and fi.overflow_tie_up)


def _verdict(value: float, stored: float, fi: FormatInfo) -> tuple[str, float, float]:
    """(verdict, abs_error, rel_error) of storing ``value`` as ``stored``."""
    if math.isnan(value):
        return "nan", math.nan, math.nan
    if math.isinf(value):
        return ("inf" if math.isinf(stored) else "saturated to max"), math.nan, math.nan
    if math.isnan(stored):
        return "overflow to nan", math.inf, math.inf
    if math.isinf(stored):
        return "overflow to inf", math.inf, math.inf
    abs_err = abs(stored - value)
    if _overflows(value, fi):  # torch saturates some fp8 casts instead of overflowing
        return "saturated to max", abs_err, abs_err / abs(value)
    rel_err = abs_err / abs(value) if value != 0 else 0.0
    if stored == 0.0 and value != 0.0:
        return "flushed to zero", abs_err, rel_err
    return ("exact" if abs_err == 0 else "rounded"), abs_err, rel_err


def _build(value: float, pattern: int, fi: FormatInfo) -> Decomposition:
    kind, stored, unb = _decode(pattern, fi)
    s, e, m = _fields(pattern, fi)
    verdict, abs_err, rel_err = _verdict(value, stored, fi)
    prev, nxt = _neighbours(pattern, kind, fi)
    return Decomposition(
        fmt=fi.name, value=value, pattern=pattern, sign=str(s),
        exponent=format(e, f"0{fi.exponent_bits}b"), mantissa=format(m, f"0{fi.mantissa_bits}b"),
        kind=kind, unbiased_exponent=unb, stored=stored, abs_error=abs_err, rel_error=rel_err,
        ulp=_ulp_of(kind, pattern, fi), prev=prev, next=nxt, verdict=verdict,
    )


def decompose(value: float, fmt: str | torch.dtype) -> Decomposition:
    """``value`` as stored in ``fmt`` (torch's own cast): bits by field, kind, stored value, errors, ulp, neighbours.

    >>> d = decompose(0.1, "fp16"); (d.sign, d.exponent, d.mantissa, d.kind, d.stored)
    ('0', '01011', '1001100110', 'normal', 0.0999755859375)
    """
    fi = info(fmt)
    v = _check_real(value)
    return _build(v, _float_to_pattern(v, fi.dtype), fi)


def from_bits(bits: int | str, fmt: str | torch.dtype) -> Decomposition:
    """The number a bit pattern means in ``fmt`` (an int, or a string of 0/1, spaces and underscores allowed).

    >>> from_bits("0 11110 1111111111", "fp16").stored
    65504.0
    """
    fi = info(fmt)
    if isinstance(bits, str):
        text = bits.replace(" ", "").replace("_", "")
        if not text or set(text) - {"0", "1"} or len(text) != fi.bits:
            raise ValueError(f"{fi.name} needs a string of exactly {fi.bits} bits (0/1); got {bits!r}")
        pattern = int(text, 2)
    elif isinstance(bits, int) and not isinstance(bits, bool):
        pattern = bits
    else:
        raise TypeError(f"bits must be an int or a string of 0/1, got {type(bits).__name__}")
    if not 0 <= pattern < 1 << fi.bits:
        raise ValueError(f"a {fi.name} bit pattern is in 0..{(1 << fi.bits) - 1}; got {pattern}")
    stored = _decode(pattern, fi)[1]
    return _build(stored, pattern, fi)


def toggle_bit(d: Decomposition, position: int) -> Decomposition:
    """Flip one bit (``position`` 0 = sign, counting from the left as the bits are printed) of a stored number.

    >>> toggle_bit(decompose(1.0, "fp16"), 0).stored
    -1.0
    """
    fi = info(d.fmt)
    if not isinstance(position, int) or not 0 <= position < fi.bits:
        raise ValueError(f"position must be in 0..{fi.bits - 1} for {fi.name}; got {position!r}")
    return from_bits(d.pattern ^ (1 << (fi.bits - 1 - position)), fi.name)


# ------------------------------------------------------------------------------------- other helpers

def compare_formats(value: float, fmts: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> list[RoundTrip]:
    """Round ``value`` into each format and say what happened; the data behind 00's rounding slider.

    >>> [r.verdict for r in compare_formats(1e-8)]
    ['rounded', 'rounded', 'flushed to zero']
    """
    rows = []
    for fmt in fmts:
        name = format_name(fmt)
        stored = round_trip(value, name)
        verdict, abs_err, rel_err = _verdict(float(value), stored, _info(name))
        rows.append(RoundTrip(name, float(value), stored, abs_err, rel_err, verdict))
    return rows


@dataclass(frozen=True)
class RoundTrip:
    """``value`` as stored in ``fmt``: the stored number, its errors, and what happened (a plain-words verdict)."""

    fmt: str
    value: float
    stored: float
    abs_error: float
    rel_error: float
    verdict: str  # exact, rounded, flushed to zero, overflow to inf, overflow to nan, saturated to max, nan, inf


def ulp(values: float | torch.Tensor, fmt: str | torch.dtype) -> float | torch.Tensor:
    """Spacing of ``fmt``'s representable numbers at each value (after rounding it into ``fmt``); vectorised.

    Constant (``smallest_subnormal``) below the smallest normal, doubling with every power of two above;
    ``nan`` where the value overflows or is not finite.

    >>> ulp(1.0, "fp16"), ulp(2048.0, "fp16"), ulp(1.0, "bf16")
    (0.0009765625, 2.0, 0.0078125)
    """
    fi = info(fmt)
    scalar = not isinstance(values, torch.Tensor)
    t = torch.as_tensor(values, dtype=torch.float64) if scalar else values.detach().to(torch.float64)
    stored = t.to(fi.dtype).to(torch.float64) if fi.name != "float32" else t.to(torch.float32).to(torch.float64)
    _, exp = torch.frexp(stored.abs())
    e = torch.clamp(exp.to(torch.float64) - 1, min=fi.emin)
    out = torch.pow(2.0, e - fi.mantissa_bits)
    a = t.abs()
    over = (a > fi.overflow_threshold) | ((a == fi.overflow_threshold) & fi.overflow_tie_up)
    out = torch.where(torch.isfinite(stored) & ~over, out, torch.full_like(out, math.nan))
    return out.item() if scalar else out


def _round_scalar(x: float, fi: FormatInfo) -> float:
    """Round a float64 to ``fi`` the way torch does (through float32, nearest even; overflow per ``overflows_to``)."""
    if x != x or x in (math.inf, -math.inf):
        if x != x:
            return math.nan
        return x if fi.has_inf else math.copysign(fi.max, x)
    if fi.name != "float32":
        x = _round_scalar(x, _info("float32"))
        if x in (math.inf, -math.inf):
            return x if fi.has_inf else math.copysign(fi.max, x)
    if x == 0.0:
        return x
    _, e = math.frexp(x)
    q = math.ldexp(1.0, max(e - 1, fi.emin) - fi.mantissa_bits)
    r = round(x / q) * q  # Python's round(): nearest, ties to even
    if abs(r) > fi.max:
        if fi.overflows_to == "inf":
            return math.copysign(math.inf, x)
        return math.copysign(fi.max, x) if fi.overflows_to == "max" else math.nan
    return math.copysign(r, x) if r == 0 else r


def accumulate(values: Iterable[float] | torch.Tensor, fmt: str | torch.dtype,
               accumulator: str | torch.dtype | None = None) -> torch.Tensor:
    """Running sum of ``values`` stored in ``fmt``, adding one at a time and rounding each partial sum.

    The partial sums are kept in ``accumulator`` (default: ``fmt`` itself, like a naive loop in that format;
    ``"fp32"`` models what torch's reductions do). Returns all partial sums as float64 (the last is the total).

    >>> accumulate([1.0] * 3000, "fp16")[-1].item()    # stuck: 2048 + 1 rounds back to 2048
    2048.0
    >>> accumulate([1.0] * 3000, "fp16", accumulator="fp32")[-1].item()
    3000.0
    """
    fi = info(fmt)
    acc_fi = fi if accumulator is None else info(accumulator)
    t = values.detach() if isinstance(values, torch.Tensor) else torch.as_tensor(list(values), dtype=torch.float64)
    t = t.reshape(-1).to(torch.float64)
    stored = t.to(fi.dtype).to(torch.float64).tolist() if fi.name != "float32" else \
        t.to(torch.float32).to(torch.float64).tolist()
    out = []
    acc = 0.0
    rnd = _round_scalar
    for v in stored:
        acc = rnd(acc + v, acc_fi)
        out.append(acc)
    return torch.tensor(out, dtype=torch.float64)


@dataclass(frozen=True)
class RangeBands:
    """A format's magnitude bands on a log2 axis (for the range map): each is a (low, high) pair of log2|x|."""

    fmt: str
    flush: tuple[float, float]       # rounds to zero
    subnormal: tuple[float, float]   # gradual underflow: fewer significant bits
    normal: tuple[float, float]      # full precision
    overflow: tuple[float, float]    # inf (or saturation/NaN for e4m3fn)


def range_bands(fmt: str | torch.dtype, lo: float = -160.0, hi: float = 140.0) -> RangeBands:
    """Where ``fmt`` flushes, goes subnormal, is normal and overflows, as intervals of log2|x| within [lo, hi].

    >>> range_bands("fp16").subnormal   # 2**-25 (flushes below) .. 2**-14 (smallest normal)
    (-25.0, -14.0)
    """
    fi = info(fmt)
    f = math.log2(fi.flush_threshold)
    s = math.log2(fi.smallest_normal)
    o = math.log2(fi.overflow_threshold)
    # the subnormal band spans smallest_subnormal/2 .. smallest_normal; normal continues up to the overflow point
    return RangeBands(fi.name, (lo, f), (f, s), (s, o), (o, hi))


_POW = re.compile(r"^\s*([+-]?)\s*(\d+(?:\.\d*)?)\s*(?:\*\*|\^)\s*\(?\s*([+-]?\d+)\s*\)?\s*$")


def parse_value(text: str) -> float:
    """Read a number typed by a learner: ``0.1``, ``1e-8``, ``-0``, ``inf``, ``nan``, ``2^-24``, ``2**-24``, ``0x1p-24``.

    Raises ``ValueError`` with a message saying what is accepted.

    >>> parse_value("2^-24") == 2**-24, parse_value(" -1e-8 ")
    (True, -1e-08)
    """
    if not isinstance(text, str):
        return _check_real(text)
    s = text.strip().replace("_", "").replace("−", "-")
    if not s:
        raise ValueError("type a number, e.g. 0.1, 1e-8, -0, inf, nan, 2^-24")
    try:
        return float(s)
    except ValueError:
        pass
    except OverflowError:  # pragma: no cover - float() of text never overflows, it gives inf
        return math.inf
    if s.lower().startswith(("0x", "-0x", "+0x")):
        try:
            return float.fromhex(s)
        except (ValueError, OverflowError):
            pass
    m = _POW.match(s)
    if m:
        sign, base, exp = m.groups()
        try:
            v = float(base) ** int(exp)
        except OverflowError:
            v = math.inf
        except ZeroDivisionError:
            raise ValueError(f"{text!r} divides by zero; try e.g. 0.1, 1e-8, 2^-24") from None
        return -v if sign == "-" else v
    raise ValueError(f"{text!r} is not a number; try e.g. 0.1, 1e-8, -0, inf, nan, 2^-24 or 0x1p-24")


def explain(value: float, fmts: Iterable[str | torch.dtype] = tuple(FORMATS)) -> list[str]:
    """Plain-words notes on what is special about ``value`` in ``fmts`` (NaN, inf, -0.0, flush, overflow, saturation).

    Empty for an ordinary value that every format merely rounds. The float explorer shows these lines.

    >>> explain(1e-8, ("fp32", "fp16"))
    ['float16 flushes 1e-08 to zero: it is below half the smallest subnormal (2.98e-08).']
    """
    v = _check_real(value)
    names = [format_name(f) for f in fmts]
    notes: list[str] = []
    if math.isnan(v):
        return ["NaN (not a number) is what 0/0 or inf - inf give; every format has NaN bit patterns and any "
                "arithmetic with NaN gives NaN. e4m3fn has just one NaN pattern per sign (all ones) and no inf."]
    if math.isinf(v):
        notes.append(f"{'-' if v < 0 else '+'}inf is what overflow gives in IEEE formats (exponent all ones, "
                     "mantissa zero).")
        if "float8_e4m3fn" in names:
            notes.append("float8_e4m3fn has no inf: torch's cast saturates it to ±448 (the format's max).")
        return notes
    if v == 0:
        if math.copysign(1.0, v) < 0:
            return ["-0.0 has only the sign bit set. It equals +0.0 (-0.0 == 0.0 is True) but remembers the sign: in "
                    "torch, 1 / -0.0 is -inf. Tiny negative values flush to -0.0."]
        return ["0 is all bits zero in every format."]
    widest = _info("float32")
    if _overflows(v, widest):
        notes.append(f"{v:.3g} is beyond every format's max (float32's max is {widest.max:.3g}): all of them "
                     "overflow.")
    for name in names:
        fi = _info(name)
        stored = round_trip(v, name)
        verdict = _verdict(v, stored, fi)[0]
        if verdict == "flushed to zero":
            notes.append(f"{name} flushes {v:.3g} to zero: it is below half the smallest subnormal "
                         f"({fi.flush_threshold:.3g}).")
        elif verdict == "overflow to inf":
            notes.append(f"{name} overflows to inf: {v:.3g} is past its max ({fi.max:.6g}).")
        elif verdict == "overflow to nan":
            notes.append(f"{name} overflows to NaN: {v:.3g} is past its max ({fi.max:.6g}).")
        elif verdict == "saturated to max":
            notes.append(f"{name} saturates: {v:.3g} is past its max, and torch's cast clamps it to "
                         f"{math.copysign(fi.max, v):g} (the format has no inf).")
        elif stored != 0 and abs(stored) < fi.smallest_normal:
            notes.append(f"{name} stores {v:.3g} as a subnormal: below its smallest normal "
                         f"({fi.smallest_normal:.3g}), so fewer significant bits (relative error "
                         f"{abs(stored - v) / abs(v):.1e}).")
    return notes
