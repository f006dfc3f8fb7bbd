"""ampkit.formats bits: ``decompose`` / ``from_bits`` / ``toggle_bit`` agree with torch's own conversion (value,
kind, neighbours) for every one of the 65,536 fp16 and bf16 bit patterns and all 256 of each fp8 format, and on many
float32 patterns; special values and bad input."""
import math

import numpy as np
import pytest
import torch
from _format_patterns import SMALL, all_patterns, same, torch_kind, torch_neighbours
from hypothesis import given, settings
from hypothesis import strategies as st

from ampkit.formats import FORMATS, decompose, from_bits, info, round_trip, toggle_bit


@pytest.mark.parametrize("fmt", SMALL)
def test_from_bits_agrees_with_torch_for_every_pattern(fmt):
    patterns, values = all_patterns(fmt)
    prev, nxt = torch_neighbours(fmt, values)
    vals, prevs, nexts = values.tolist(), prev.tolist(), nxt.tolist()
    i = info(fmt)
    for p in patterns:
        d = from_bits(p, fmt)
        v = vals[p]
        assert same(d.stored, v), (fmt, p, d.stored, v)
        assert d.kind == torch_kind(v, fmt), (fmt, p)
        # neighbours: equal as numbers (the fp8 table has one zero; decompose names the -0 pattern next to -tiny)
        assert same(d.prev, prevs[p]) or d.prev == prevs[p] == 0, (fmt, p, d.prev, prevs[p])
        assert same(d.next, nexts[p]) or d.next == nexts[p] == 0, (fmt, p, d.next, nexts[p])
        assert d.bits == format(p, f"0{i.bits}b") and len(d.exponent) == i.exponent_bits
        assert d.verdict in ("exact", "nan", "inf")
        if d.kind in ("normal", "subnormal"):
            # the formula (-1)^s * 1.m * 2^e (0.m for subnormals) gives the same number
            lead = 1 if d.kind == "normal" else 0
            mant = lead + int(d.mantissa, 2) / 2 ** i.mantissa_bits
            assert (-1) ** int(d.sign) * mant * 2.0 ** d.unbiased_exponent == v
            assert d.ulp == 2.0 ** (d.unbiased_exponent - i.mantissa_bits)


@pytest.mark.parametrize("fmt", SMALL)
def test_decompose_of_every_representable_value_gives_back_its_pattern(fmt):
    patterns, values = all_patterns(fmt)
    for p, v in zip(patterns, values.tolist()):
        d = decompose(v, fmt)
        if math.isnan(v):
            assert d.kind == "nan" and d.verdict == "nan" and math.isnan(d.stored)
            continue
        assert d.pattern == p and same(d.stored, v), (fmt, p, v, d.pattern)
        assert d.verdict == "inf" if math.isinf(v) else (d.abs_error == 0 and d.verdict == "exact")


def test_float32_decompose_agrees_with_torch_on_many_patterns():
    g = torch.Generator().manual_seed(0)
    raw = torch.randint(-2 ** 31, 2 ** 31 - 1, (20000,), generator=g, dtype=torch.int64)
    edge = torch.tensor([0, 1, 2, 0x007FFFFF, 0x00800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000])
    raw = torch.cat([raw, edge, edge - 2 ** 31]).to(torch.int32)
    x = raw.view(torch.float32)
    up = torch.nextafter(x, torch.full_like(x, math.inf)).double().tolist()
    down = torch.nextafter(x, torch.full_like(x, -math.inf)).double().tolist()
    for k, v in enumerate(x.double().tolist()):
        d = from_bits(raw[k].item() & 0xFFFFFFFF, "fp32")
        assert same(d.stored, v) and d.kind == torch_kind(v, "float32")
        if d.kind != "zero":
            assert same(d.next, up[k]) and same(d.prev, down[k])


@settings(max_examples=400, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(list(FORMATS)))
def test_decompose_stores_what_torch_stores(x, fmt):
    d = decompose(x, fmt)
    assert same(d.stored, round_trip(x, fmt))
    if math.isfinite(x) and math.isfinite(d.stored) and d.verdict != "saturated to max":
        assert d.abs_error == abs(d.stored - x)
        assert d.prev <= d.stored <= d.next
        assert d.abs_error <= d.ulp  # nearest rounding (twice at most, via float32)


def test_decompose_explains_special_values():
    assert decompose(math.nan, "fp16").verdict == "nan"
    assert decompose(math.inf, "fp16").verdict == "inf" and decompose(-math.inf, "bf16").stored == -math.inf
    sat = decompose(math.inf, "e4m3")
    assert sat.verdict == "saturated to max" and sat.stored == 448.0
    neg0 = decompose(-0.0, "fp16")
    assert neg0.kind == "zero" and neg0.sign == "1" and neg0.bits == "1" + "0" * 15 and neg0.verdict == "exact"
    huge = decompose(1e300, "fp32")
    assert huge.verdict == "overflow to inf" and huge.kind == "inf"
    assert decompose(1e308 * 10, "bf16").verdict == "inf"  # that is already inf in Python
    assert decompose(10 ** 400, "fp16").verdict == "inf"  # an int beyond float64: treated as inf
    assert decompose(70000.0, "fp16").verdict == "overflow to inf"
    assert decompose(1000.0, "e4m3").verdict == "saturated to max"
    assert decompose(464.0, "e4m3").verdict == "rounded"  # the tie rounds to the even 448, no overflow
    assert decompose(1e-8, "fp16").verdict == "flushed to zero"
    d = decompose(1e-6, "fp16")
    assert d.kind == "subnormal" and d.unbiased_exponent == -14 and d.ulp == 2.0 ** -24
    d = decompose(0.1, "fp16")
    assert d.formula() == "+1.1001100110 (binary) × 2^-4"
    assert d.rel_error == pytest.approx(abs(0.0999755859375 - 0.1) / 0.1)
    assert decompose(torch.tensor(2.0), "bf16").stored == 2.0
    import fractions

    assert decompose(np.float32(0.1), "fp16").stored == 0.0999755859375 and decompose(np.int64(3), "e4m3").stored == 3
    assert decompose(fractions.Fraction(1, 3), "bf16").stored == 0.333984375
    for bad in ("0.1", [0.1], None, True, torch.ones(2), np.bool_(True), 1j):
        with pytest.raises(TypeError):
            decompose(bad, "fp16")


def test_from_bits_strings_and_toggle_bit():
    assert from_bits("0 11110 1111111111", "fp16").stored == 65504.0
    assert from_bits("0_11111_0000000000", "fp16").kind == "inf"
    assert from_bits("0 1111 111", "e4m3").kind == "nan" and from_bits("0 1111 110", "e4m3").stored == 448
    one = decompose(1.0, "fp16")
    assert toggle_bit(one, 0).stored == -1.0
    assert toggle_bit(one, 1).kind == "inf"  # 0 11111 0000000000
    assert toggle_bit(one, 15).stored == 1 + 2 ** -10  # last mantissa bit = one ulp
    assert toggle_bit(toggle_bit(one, 7), 7) == one
    for bad in ("0101", "0 11110 111111111x", ""):
        with pytest.raises(ValueError, match="16 bits"):
            from_bits(bad, "fp16")
    # the kit's one validator rule (ampkit._util): a wrong value is a ValueError, a wrong type a TypeError
    with pytest.raises(ValueError, match="float8_e5m2 bit pattern.* >= 0 and <= 255; got 256"):
        from_bits(256, "e5m2")
    with pytest.raises(ValueError, match="float16 bit.* >= 0 and <= 15; got 16"):
        toggle_bit(one, 16)
    with pytest.raises(TypeError, match="float16 bit"):
        toggle_bit(one, 1.0)   # was a ValueError before the formats package used ampkit._util.check_int
    with pytest.raises(TypeError):
        from_bits(1.5, "fp16")
    with pytest.raises(TypeError):
        from_bits(True, "fp16")
    assert from_bits(np.int64(0x3C00), "fp16").stored == 1.0 and toggle_bit(one, np.int8(0)).stored == -1.0
