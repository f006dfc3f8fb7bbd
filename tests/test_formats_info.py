"""ampkit.formats' facts and names: ``info`` against the published layouts and torch, the casts the kit teaches,
the range bands, parsing typed values, bad input and the package's re-exports (notebook 01_fp16_range)."""
import math

import numpy as np
import pytest
import torch

from ampkit.formats import (
    FORMATS,
    classify,
    compare_formats,
    decompose,
    format_name,
    info,
    parse_value,
    range_bands,
    resolve_format,
    round_trip,
)

# --------------------------------------------------------------------------------------------- info

REFERENCE = {  # the published layouts (IEEE 754, bfloat16, OCP FP8) -- info() must derive the same from torch
    "float32": (32, 8, 23, 127, 2.0 ** -126, 2.0 ** -149, 2.0 ** -23, True),
    "float16": (16, 5, 10, 15, 2.0 ** -14, 2.0 ** -24, 2.0 ** -10, True),
    "bfloat16": (16, 8, 7, 127, 2.0 ** -126, 2.0 ** -133, 2.0 ** -7, True),
    "float8_e4m3fn": (8, 4, 3, 7, 2.0 ** -6, 2.0 ** -9, 2.0 ** -3, False),
    "float8_e5m2": (8, 5, 2, 15, 2.0 ** -14, 2.0 ** -16, 2.0 ** -2, True),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_info_matches_the_published_layouts_and_torch(fmt):
    i = info(fmt)
    bits, e, m, bias, tiny, sub, eps, has_inf = REFERENCE[fmt]
    assert (i.bits, i.exponent_bits, i.mantissa_bits, i.bias) == (bits, e, m, bias)
    assert (i.smallest_normal, i.smallest_subnormal, i.eps, i.has_inf) == (tiny, sub, eps, has_inf)
    assert i.max == torch.finfo(FORMATS[fmt]).max
    # max from the layout: largest exponent that is not reserved, all-ones mantissa (e4m3fn: 1.110 * 2^8)
    if has_inf:
        assert i.max == (2 - 2.0 ** -m) * 2.0 ** ((1 << e) - 2 - bias)
    else:
        assert i.max == (2 - 2 * 2.0 ** -m) * 2.0 ** ((1 << e) - 1 - bias)
    assert i.emin == 1 - bias and i.name == fmt and i.dtype == FORMATS[fmt]


def test_info_known_values_and_aliases():
    assert info("fp16").max == 65504 and info(torch.half).max == 65504
    assert info("bf16").max == pytest.approx(3.3895e38, rel=1e-4)
    assert info("e4m3").max == 448 and info("e5m2").max == 57344
    assert info("fp16").ulp_at_max == 32 and info("fp16").overflow_threshold == 65520
    # what torch does past the max, measured: fp16/bf16/e5m2 -> inf, e4m3fn saturates at 448 on CPU
    assert [info(f).overflows_to for f in FORMATS] == ["inf", "inf", "inf", "max", "inf"]


@pytest.mark.parametrize("bad", ["float17", "int8", "", "fp6"])   # fp4 is E2M1 (tests/test_formats_e2m1.py)
def test_info_rejects_unknown_names_listing_the_choices(bad):
    with pytest.raises(ValueError, match="float16.*bfloat16"):
        info(bad)


@pytest.mark.parametrize("bad", [torch.int8, torch.float64, torch.complex64, torch.bool])
def test_info_rejects_other_dtypes(bad):
    with pytest.raises(ValueError, match="supported formats: float32, float16"):
        info(bad)
    with pytest.raises(ValueError, match="supported formats"):
        classify(torch.ones(3), bad)


def test_torch_cast_facts_the_kit_teaches():
    # If a torch release changes these, the notebook's explanations must change too.
    e4m3 = torch.tensor([1000.0, math.inf, -math.inf, 464.0, 465.0]).to(torch.float8_e4m3fn).float().tolist()
    assert e4m3 == [448.0, 448.0, -448.0, 448.0, 448.0]  # saturation, even for inf
    assert torch.tensor([1e6, 61440.0]).to(torch.float8_e5m2).float().isinf().all()
    # float64 -> fp16 goes through float32: 1 + 2^-11 + 2^-40 is rounded twice and lands on 1.0
    assert round_trip(1 + 2 ** -11 + 2 ** -40, "fp16") == 1.0
    assert decompose(1 + 2 ** -11 + 2 ** -40, "fp16").stored == 1.0
    assert round_trip(1 + 2 ** -11 + 2 ** -20, "fp16") == 1 + 2 ** -10  # visible in float32: rounds up


def test_range_bands_are_contiguous_and_ordered():
    for fmt in FORMATS:
        b = range_bands(fmt)
        assert b.flush[1] == b.subnormal[0] and b.subnormal[1] == b.normal[0] and b.normal[1] == b.overflow[0]
        assert b.flush[0] < b.flush[1] < b.subnormal[1] < b.normal[1] < b.overflow[1]
        assert 2 ** b.subnormal[1] == info(fmt).smallest_normal
    assert range_bands("fp16").subnormal == (-25.0, -14.0)
    assert range_bands("bf16").normal[0] == range_bands("fp32").normal[0] == -126  # bf16 keeps fp32's range


@pytest.mark.parametrize("text,value", [
    ("0.1", 0.1), (" 1e-8 ", 1e-8), ("-0", -0.0), ("inf", math.inf), ("-Infinity", -math.inf),
    ("2^-24", 2.0 ** -24), ("2**-24", 2.0 ** -24), ("-2^(10)", -1024.0), ("0x1p-24", 2.0 ** -24),
    ("1_000", 1000.0), ("1e999", math.inf), ("10^400", math.inf), ("−3", -3.0),
])
def test_parse_value(text, value):
    got = parse_value(text)
    assert got == value and math.copysign(1, got) == math.copysign(1, value)
    assert math.isnan(parse_value("nan"))


@pytest.mark.parametrize("text", ["", "abc", "1..2", "0.1.2", "2^x", "one", "1e", "0^-1"])
def test_parse_value_rejects_text_with_a_message(text):
    with pytest.raises(ValueError, match="e.g. 0.1"):
        parse_value(text)


def test_compare_formats_verdicts_and_names():
    assert resolve_format("half") is torch.float16 and format_name(torch.bfloat16) == "bfloat16"
    assert [r.verdict for r in compare_formats(1e-8)] == ["rounded", "rounded", "flushed to zero"]
    assert compare_formats(464.0, ("e4m3",))[0].verdict == "rounded"
    assert compare_formats(1000.0, ("e4m3",))[0].verdict == "saturated to max"


def test_every_public_name_is_on_the_face():
    """ampkit.formats carries every public name of its modules (the same objects: tests/test_public_api.py)."""
    import importlib

    import ampkit.formats

    for name in ("registry", "parse", "rounding", "bits", "bands", "e2m1"):
        mod = importlib.import_module(f"ampkit.formats.{name}")
        public = set(mod.__all__) - {"verdict", "real_value"}   # package-internal helpers
        assert public <= set(ampkit.formats.__all__), (name, public - set(ampkit.formats.__all__))


def test_a_format_that_is_not_a_name_or_dtype_is_a_type_error():
    for bad in (3, None, 16.0, ["fp16"]):
        with pytest.raises(TypeError, match="a format is a name or a torch dtype.*float16"):
            resolve_format(bad)
    with pytest.raises(TypeError, match="format"):
        info(None)


def test_format_info_overflows_matches_the_cast():
    for fmt in ("float32", "float16", "bfloat16", "float8_e5m2"):   # these overflow to inf
        i = info(fmt)
        for v in (i.max, i.overflow_threshold, -i.overflow_threshold, i.max * 1.5, 1.0, math.inf):
            assert i.overflows(v) == math.isinf(round_trip(v, fmt)), (fmt, v)
    e4m3 = info("e4m3")   # saturates instead: 464 (a tie) rounds to the even 448, 465 is past the range
    assert not e4m3.overflows(464.0) and e4m3.overflows(465.0) and round_trip(465.0, "e4m3") == 448.0


def test_real_value_and_round_trip_accept_any_real_number():
    from ampkit.formats.parse import real_value

    assert real_value(np.float32(0.5)) == 0.5 and real_value(torch.tensor([2.0])) == 2.0
    assert real_value(10 ** 400) == math.inf and real_value(-(10 ** 400)) == -math.inf
    assert math.isnan(real_value(math.nan)) and math.copysign(1, real_value(-0.0)) == -1
    assert round_trip(np.float64(0.1), "fp16") == 0.0999755859375 and round_trip(10 ** 400, "fp16") == math.inf
    for bad in ("0.1", None, True, 1j, torch.ones(2), torch.tensor(True)):
        with pytest.raises(TypeError):
            real_value(bad)
        with pytest.raises(TypeError):
            round_trip(bad, "fp16")
