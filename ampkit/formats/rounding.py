"""What storing numbers in a format does to them: the stored value, its error, a verdict, notes, ulp, sums.

Taught in notebook ``01_fp16_range.ipynb`` (and ``00_start_here.ipynb``'s rounding slider). :func:`round_trip` is
torch's own cast; :func:`compare_formats` says per format what happened (exact, rounded, flushed to zero, overflow
to inf/NaN, saturated to max) and :func:`explain` says it in plain words for the float explorer; :func:`ulp` is the
spacing of representable values at a value (vectorised); :func:`accumulate` is a running sum rounded at every
step (3000 ones summed in fp16 get stuck at 2048; with an fp32 total, as torch's reductions keep it, they reach 3000).

A Python float (float64) is converted to fp16/bf16/fp8 *through float32* by torch 2.x, so it can be rounded twice
(``1 + 2**-11 + 2**-40`` becomes ``1.0`` in fp16, where one correct rounding would give ``1 + 2**-10``).

>>> round_trip(0.1, "fp16")
0.0999755859375
"""
from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ampkit.formats.e2m1 import E2M1, e2m1_round
from ampkit.formats.parse import real_value
from ampkit.formats.registry import FORMATS, FormatInfo, cast, info, resolve_format
from ampkit.i18n import Word, mark, tr

#: the verdicts' words (data, compared by the code), translated where they are shown
_VERDICT_WORDS = (mark("exact"), mark("rounded"), mark("flushed to zero"), mark("overflow to inf"),
                  mark("overflow to nan"), mark("saturated to max"))

__all__ = ["round_trip", "to_fp32", "RoundTrip", "compare_formats", "verdict", "explain", "ulp", "accumulate"]


def round_trip(value: float, fmt: str | torch.dtype) -> float:
    """The value actually stored when ``value`` (a Python float, i.e. float64) is cast to ``fmt``.

    Uses torch's own conversion (round to nearest even, via float32); overflow gives ``inf`` (e4m3fn saturates
    at 448 on CPU).

    >>> round_trip(1 + 2**-11, "fp16")
    1.0
    """
    dtype = resolve_format(fmt)
    return cast(real_value(value), dtype)


_F32 = struct.Struct("f")


def to_fp32(value: float) -> float:
    """``value`` (a Python float, i.e. float64, or anything ``float()`` takes) rounded to the nearest float32, as C's
    ``static_cast<float>`` does: round to nearest even, ``inf`` where it rounds past float32's largest value, 0 (or a
    float32 subnormal) below its smallest. The one float32 rounding of the kit: the loss scalers keep their scale in
    float32 as torch's ``GradScaler`` does, and Transformer Engine keeps its amaxes and scales in float32.

    Bit for bit what ``float(torch.tensor(value, dtype=torch.float32))`` gives, without building a tensor.

    >>> to_fp32(0.1), to_fp32(1e39), to_fp32(-1e39), to_fp32(1e-50)
    (0.10000000149011612, inf, -inf, 0.0)
    >>> to_fp32(2.0**16 * 0.5) == 32768.0     # powers of two (the scales' usual values) are exact
    True
    """
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:                   # rounds beyond float32's largest value
        return math.copysign(math.inf, value)


@dataclass(frozen=True)
class RoundTrip:
    """``value`` as stored in ``fmt``: the stored number, its errors, and what happened (a plain-words verdict)."""

    fmt: str
    value: float
    stored: float
    abs_error: float
    rel_error: float
    verdict: str  # exact, rounded, flushed to zero, overflow to inf, overflow to nan, saturated to max, nan, inf


# port: js/kit.js verdictOf
def verdict(value: float, stored: float, fi: FormatInfo) -> tuple[str, float, float]:
    """(verdict, abs_error, rel_error) of storing ``value`` as ``stored`` in format ``fi``.

    >>> verdict(1e-8, 0.0, info("fp16"))
    ('flushed to zero', 1e-08, 1.0)
    """
    if math.isnan(value):
        return "nan", math.nan, math.nan
    if math.isinf(value):
        return ("inf" if math.isinf(stored) else "saturated to max"), math.nan, math.nan
    if math.isnan(stored):
        return "overflow to nan", math.inf, math.inf
    if math.isinf(stored):
        return "overflow to inf", math.inf, math.inf
    abs_err = abs(stored - value)
    if fi.overflows(value):  # torch saturates some fp8 casts instead of overflowing
        return "saturated to max", abs_err, abs_err / abs(value)
    rel_err = abs_err / abs(value) if value != 0 else 0.0
    if stored == 0.0 and value != 0.0:
        return "flushed to zero", abs_err, rel_err
    return ("exact" if abs_err == 0 else "rounded"), abs_err, rel_err


# port: js/rounding.js rows
def compare_formats(value: float, fmts: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> list[RoundTrip]:
    """Round ``value`` into each format and say what happened; the data behind 00's rounding slider.

    >>> [r.verdict for r in compare_formats(1e-8)]
    ['rounded', 'rounded', 'flushed to zero']
    """
    v = real_value(value)
    rows = []
    for fmt in fmts:
        fi = info(fmt)
        stored = cast(v, fi.dtype)
        what, abs_err, rel_err = verdict(v, stored, fi)
        rows.append(RoundTrip(fi.name, v, stored, abs_err, rel_err, Word(what)))
    return rows


# port: js/floats.js notesFor
def explain(value: float, fmts: Iterable[str | torch.dtype] = tuple(FORMATS)) -> list[str]:
    """Plain-words notes on what is special about ``value`` in ``fmts`` (NaN, inf, -0.0, flush, overflow, saturation).

    Empty for an ordinary value that every format merely rounds.

    >>> explain(0.1, ("fp32", "fp16"))
    []
    """
    v = real_value(value)
    infos = [info(f) for f in fmts]
    notes: list[str] = []
    if math.isnan(v):
        return [tr("NaN (not a number) is what 0/0 or inf - inf give; every format has NaN bit patterns and any "
                   "arithmetic with NaN gives NaN. e4m3fn has just one NaN pattern per sign (all ones) and no inf.")]
    if math.isinf(v):
        notes.append(tr("{sign}inf is what overflow gives in IEEE formats (exponent all ones, mantissa zero).",
                        sign="-" if v < 0 else "+"))
        if any(fi.name == "float8_e4m3fn" for fi in infos):
            notes.append(tr("float8_e4m3fn has no inf: torch's cast saturates it to ±448 (the format's max)."))
        return notes
    if v == 0:
        if math.copysign(1.0, v) < 0:
            return [tr("-0.0 has only the sign bit set. It equals +0.0 (-0.0 == 0.0 is True) but remembers the sign: "
                       "in torch, 1 / -0.0 is -inf. Tiny negative values flush to -0.0.")]
        return [tr("0 is all bits zero in every format.")]
    widest = info("float32")
    if widest.overflows(v):
        notes.append(tr("{v:.3g} is beyond every format's max (float32's max is {max:.3g}): all of them overflow.",
                        v=v, max=widest.max))
    for fi in infos:
        name = fi.name
        stored = cast(v, fi.dtype)
        what = verdict(v, stored, fi)[0]
        if what == "flushed to zero":
            notes.append(tr("{name} flushes {v:.3g} to zero: it is below half the smallest subnormal ({t:.3g}).",
                            name=name, v=v, t=fi.flush_threshold))
        elif what == "overflow to inf":
            notes.append(tr("{name} overflows to inf: {v:.3g} is past its max ({max:.6g}).", name=name, v=v,
                            max=fi.max))
        elif what == "overflow to nan":
            notes.append(tr("{name} overflows to NaN: {v:.3g} is past its max ({max:.6g}).", name=name, v=v,
                            max=fi.max))
        elif what == "saturated to max":
            notes.append(tr("{name} saturates: {v:.3g} is past its max, and torch's cast clamps it to "
                            "{clamp:g} (the format has no inf).", name=name, v=v, clamp=math.copysign(fi.max, v)))
        elif stored != 0 and abs(stored) < fi.smallest_normal:
            notes.append(tr("{name} stores {v:.3g} as a subnormal: below its smallest normal "
                            "({normal:.3g}), so fewer significant bits (relative error {rel:.1e}).", name=name, v=v,
                            normal=fi.smallest_normal, rel=abs(stored - v) / abs(v)))
    return notes


def ulp(values: float | torch.Tensor, fmt: str | torch.dtype) -> float | torch.Tensor:
    """Spacing of ``fmt``'s representable numbers at each value (after rounding it into ``fmt``); vectorised.

    Constant (``smallest_subnormal``) below the smallest normal, doubling with every power of two above;
    ``nan`` where the value overflows or is not finite.

    >>> ulp(1.0, "fp16"), ulp(2048.0, "fp16"), ulp(1.0, "bf16")
    (0.0009765625, 2.0, 0.0078125)
    >>> ulp(0.0, "fp16") == info("fp16").smallest_subnormal == 2.0**-24
    True
    """
    fi = info(fmt)
    scalar = not isinstance(values, torch.Tensor)
    t = (values.detach().to(torch.float64) if isinstance(values, torch.Tensor)
         else torch.as_tensor(values, dtype=torch.float64))
    stored = (e2m1_round(t.float()) if fi.name == E2M1 else t.to(fi.dtype)).to(torch.float64)
    _, exp = torch.frexp(stored.abs())
    e = torch.clamp(exp.to(torch.float64) - 1, min=fi.emin)
    e = torch.where(stored == 0, torch.full_like(e, fi.emin), e)   # frexp(0) has exponent 0: zero sits at the bottom
    out = torch.pow(2.0, e - fi.mantissa_bits)
    a = t.abs()
    over = (a > fi.overflow_threshold) | ((a == fi.overflow_threshold) & fi.overflow_tie_up)
    out = torch.where(torch.isfinite(stored) & ~over, out, torch.full_like(out, math.nan))
    return out.item() if scalar else out


# port: js/kit.js roundTo
def _round_scalar(x: float, fi: FormatInfo) -> float:
    """Round a float64 to ``fi`` the way torch does (through float32, nearest even; overflow per ``overflows_to``).

    Pure Python (no tensor per addition), so a loop of thousands of additions stays fast; the tests check it
    against torch's cast.
    """
    if x != x or x in (math.inf, -math.inf):
        if x != x:
            return math.nan
        return x if fi.has_inf else math.copysign(fi.max, x)
    if fi.name != "float32":
        x = _round_scalar(x, info("float32"))
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
    stored = t.reshape(-1).to(torch.float64).to(fi.dtype).to(torch.float64).tolist()
    out = []
    acc = 0.0
    for v in stored:
        acc = _round_scalar(acc + v, acc_fi)
        out.append(acc)
    return torch.tensor(out, dtype=torch.float64)
