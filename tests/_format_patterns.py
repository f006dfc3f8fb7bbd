"""Shared by the ampkit.formats tests: every bit pattern of a small format, torch's own reading of each, and the
values at each format's thresholds (where off-by-one bugs live)."""
import math

import torch

from ampkit.formats import FORMATS, info

SMALL = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def all_patterns(fmt: str) -> tuple[list[int], torch.Tensor]:
    """Every bit pattern of ``fmt`` and the float64 values torch reads from them."""
    dtype = FORMATS[fmt]
    bits = torch.finfo(dtype).bits
    patterns = list(range(1 << bits))
    raw = torch.tensor(patterns, dtype=torch.int64)
    if bits == 16:
        raw = torch.where(raw >= 1 << 15, raw - (1 << 16), raw)
    values = raw.to(INT_VIEW[bits]).view(dtype).to(torch.float64)
    return patterns, values


def torch_kind(v: float, fmt: str) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf"
    if v == 0:
        return "zero"
    return "subnormal" if abs(v) < torch.finfo(FORMATS[fmt]).smallest_normal else "normal"


def torch_neighbours(fmt: str, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(prev, next) for every value, from torch: nextafter for fp16/bf16, the sorted table of all values for fp8."""
    dtype = FORMATS[fmt]
    if fmt in ("float16", "bfloat16"):
        x = values.to(dtype)
        up = torch.nextafter(x, torch.full_like(x, math.inf)).to(torch.float64)
        down = torch.nextafter(x, torch.full_like(x, -math.inf)).to(torch.float64)
        return down, up
    # fp8: no nextafter kernel; the neighbours are the adjacent entries of the sorted set of representable values
    finite = sorted(set(v for v in values.tolist() if not math.isnan(v)) - {-0.0} | {0.0})
    above = {a: b for a, b in zip(finite, finite[1:])}
    below = {b: a for a, b in zip(finite, finite[1:])}
    fi = info(fmt)
    top = math.nan if not fi.has_inf else math.inf  # e4m3fn: the pattern after 448 is NaN
    prev, nxt = [], []
    for v in values.tolist():
        if math.isnan(v):
            prev.append(math.nan), nxt.append(math.nan)
        elif v == 0:
            prev.append(-fi.smallest_subnormal), nxt.append(fi.smallest_subnormal)
        elif math.isinf(v):
            prev.append(v if v < 0 else fi.max), nxt.append(v if v > 0 else -fi.max)
        else:
            prev.append(below.get(v, -top if v == -fi.max else math.nan))
            nxt.append(above.get(v, top if v == fi.max else math.nan))
    return torch.tensor(prev, dtype=torch.float64), torch.tensor(nxt, dtype=torch.float64)


def boundary_values(dtype: torch.dtype) -> torch.Tensor:
    """Each format's thresholds and their neighbours in ``dtype``, both signs: where off-by-one bugs live."""
    pts = []
    for fmt in FORMATS:
        i = info(fmt)
        for b in (i.flush_threshold, i.smallest_subnormal, i.normal_threshold, i.smallest_normal, i.max,
                  i.overflow_threshold, 2 * i.max):
            t = torch.tensor(b, dtype=torch.float64).to(dtype)
            pts += [torch.nextafter(t, torch.tensor(0.0, dtype=dtype)), t,
                    torch.nextafter(t, torch.tensor(math.inf, dtype=dtype))]
    x = torch.stack(pts)
    return torch.cat([x, -x, torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan], dtype=dtype)])


def same(a: float, b: float) -> bool:
    """Equal including the sign of zero, NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)
