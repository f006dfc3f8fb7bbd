"""E2M1 in ampkit.formats, reachable by name ("e2m1", "fp4", torch.float4_e2m1fn_x2) and not in the default list:
info derived from the kit's table as the other formats' from torch, round_trip/decompose/from_bits/classify/
range_bands/ulp agree with the E2M1 codec on every pattern and midpoint, and the float explorer's data says it has
no NaN (its all-ones pattern is 6)."""
from __future__ import annotations

import math

import torch

from ampkit.formats import (
    E2M1_VALUES,
    FORMATS,
    classify_codes,
    decompose,
    e2m1_round,
    format_name,
    from_bits,
    info,
    range_bands,
    resolve_format,
    round_trip,
    ulp,
)
from ampkit.formats.e2m1 import E2M1_MIDPOINTS
from ampkit.widgets.formats import explorer_formats


def test_reachable_by_name_not_in_the_default_list():
    assert "float4_e2m1" not in FORMATS
    for name in ("e2m1", "fp4", "E2M1", "float4_e2m1fn_x2", torch.float4_e2m1fn_x2):
        assert format_name(name) == "float4_e2m1"
    assert resolve_format("e2m1") is torch.float4_e2m1fn_x2


def test_info_fields():
    fi = info("e2m1")
    assert (fi.bits, fi.exponent_bits, fi.mantissa_bits, fi.bias) == (4, 2, 1, 1)
    assert (fi.max, fi.smallest_normal, fi.smallest_subnormal, fi.eps) == (6.0, 1.0, 0.5, 0.5)
    assert (fi.has_inf, fi.has_nan, fi.overflows_to) == (False, False, "max")
    assert (fi.flush_threshold, fi.normal_threshold, fi.overflow_threshold, fi.overflow_tie_up) == (0.25, 0.75, 7.0,
                                                                                                    True)
    assert info("fp16").has_nan and info("e4m3").has_nan


def test_every_pattern_decodes_as_the_codec_and_round_trips():
    for p, v in enumerate(E2M1_VALUES):
        d = from_bits(p, "e2m1")
        assert d.stored == v and math.copysign(1, d.stored) == math.copysign(1, v)
        assert d.kind == ("zero" if v == 0 else "subnormal" if abs(v) == 0.5 else "normal")
        assert decompose(v, "e2m1").pattern == p
        assert round_trip(v, "e2m1") == v
    assert from_bits("0111", "e2m1").stored == 6.0                           # all ones: 6, not NaN


def test_midpoints_round_to_even_and_sweeps_agree_with_classify_and_ulp():
    assert [round_trip(m, "e2m1") for m in E2M1_MIDPOINTS] == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    x = torch.linspace(-9, 9, 3601)
    stored = e2m1_round(x)
    codes = classify_codes(x, "e2m1")          # 0 zero, 1 flushed, 2 subnormal, 3 normal, 4 overflow
    assert bool(((codes == 1) == ((stored == 0) & (x != 0))).all())
    assert bool(((codes == 2) == (stored.abs() == 0.5)).all())
    assert bool(((codes == 4) == (x.abs() >= 7)).all())                      # 7 rounds beyond 6 (to 8): saturates
    assert range_bands("e2m1").subnormal == (-2.0, 0.0)
    assert (ulp(5.0, "e2m1"), ulp(0.2, "e2m1"), ulp(3.0, "e2m1")) == (2.0, 0.5, 1.0)
    assert math.isnan(ulp(8.0, "e2m1"))


def test_the_float_explorer_gets_e2m1_without_nan():
    f = explorer_formats(["e2m1"])[0]
    assert (f["bits"], f["exponent_bits"], f["has_inf"], f["has_nan"], f["max"]) == (4, 2, False, False, 6.0)
