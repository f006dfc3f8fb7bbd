"""Floating-point formats as the ML frameworks store them: fp32, fp16, bf16, fp8.

Taught in notebook ``01_fp16_range.ipynb`` (and previewed in ``00_start_here.ipynb``).

>>> round_trip(0.1, "fp16")
0.0999755859375
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["FORMATS", "resolve_format", "format_name", "round_trip", "RoundTrip", "compare_formats"]

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


def round_trip(value: float, fmt: str | torch.dtype) -> float:
    """The value actually stored when ``value`` (a Python float, i.e. float64) is cast to ``fmt``.

    Uses torch's own conversion (round to nearest even); overflow gives ``inf`` (``nan`` for e4m3fn).

    >>> round_trip(1 + 2**-11, "fp16")
    1.0
    """
    dtype = resolve_format(fmt)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"value must be a real number, got {type(value).__name__}")
    return torch.tensor(float(value), dtype=torch.float64).to(dtype).to(torch.float64).item()


def _overflow_threshold(fmt: str) -> float:
    """Smallest magnitude that no longer rounds to the format's max: max + half an ulp at max."""
    fi = torch.finfo(FORMATS[fmt])
    return fi.max + fi.eps * 2.0 ** math.floor(math.log2(fi.max)) / 2


@dataclass(frozen=True)
class RoundTrip:
    """``value`` as stored in ``fmt``: the stored number, its errors, and what happened (a plain-words verdict)."""

    fmt: str
    value: float
    stored: float
    abs_error: float
    rel_error: float
    verdict: str  # exact, rounded, flushed to zero, overflow to inf, overflow to nan, saturated to max, nan, inf


def compare_formats(value: float, fmts: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> list[RoundTrip]:
    """Round ``value`` into each format and say what happened; the data behind 00's rounding slider.

    >>> [r.verdict for r in compare_formats(1e-8)]
    ['rounded', 'rounded', 'flushed to zero']
    """
    rows = []
    for fmt in fmts:
        name = format_name(fmt)
        stored = round_trip(value, name)
        if math.isnan(value):
            verdict, abs_err, rel_err = "nan", math.nan, math.nan
        elif math.isinf(value):
            verdict = "inf" if math.isinf(stored) else "saturated to max"
            abs_err, rel_err = math.nan, math.nan
        elif math.isnan(stored):
            verdict, abs_err, rel_err = "overflow to nan", math.inf, math.inf
        elif math.isinf(stored):
            verdict, abs_err, rel_err = "overflow to inf", math.inf, math.inf
        elif abs(value) >= _overflow_threshold(name):  # torch saturates some fp8 casts instead of overflowing
            verdict, abs_err = "saturated to max", abs(stored - value)
            rel_err = abs_err / abs(value)
        else:
            abs_err = abs(stored - value)
            rel_err = abs_err / abs(value) if value != 0 else 0.0
            if stored == 0.0 and value != 0.0:
                verdict = "flushed to zero"
            else:
                verdict = "exact" if abs_err == 0 else "rounded"
        rows.append(RoundTrip(name, float(value), stored, abs_err, rel_err, verdict))
    return rows
