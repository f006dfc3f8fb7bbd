"""ampkit.fp8.quantize: exhaustive agreement with torch's casts, the scale rule, TE's amax and dequantize, bad input."""
import math

import numpy as np
import pytest
import torch

from ampkit.fp8 import (
    amax_of,
    compute_scale,
    current_scale,
    dequantize,
    fake_quantize,
    fp8_dtype,
    fp8_max,
    fp8_min_subnormal,
    fp8_name,
    fp8_to_float,
    quant_report,
    quantize,
    scale_inv,
)

FORMATS = ["e4m3", "e5m2"]
SCALES = [2.0 ** -6, 0.5, 1.0, 3.0, 2.0 ** 7, 1000.0 / 7.0]


def all_patterns(fmt):
    """Every one of the 256 bit patterns of the format, as its fp8 tensor and its fp32 value."""
    q = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8_dtype(fmt))
    return q, q.float()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scale", SCALES)
def test_quantize_agrees_with_torch_cast_on_all_256_patterns(fmt, scale):
    _, vals = all_patterns(fmt)
    x = vals / scale                                  # inputs that land on (or near) every fp8 value
    ours = quantize(x, scale, fmt, saturate=False)
    theirs = (x.float() * scale).to(fp8_dtype(fmt))    # torch's own cast of the fp32 product
    assert ours.dtype == fp8_dtype(fmt)
    assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8))
    # saturating quantize: identical wherever the product is within range; clipped to ±max elsewhere
    sat = quantize(x, scale, fmt).float()
    prod = x * scale
    inside = prod.abs() <= fp8_max(fmt)
    assert torch.equal(sat[inside], theirs.float()[inside])
    assert torch.equal(sat[torch.isfinite(prod) & ~inside].abs(),
                       torch.full_like(sat[torch.isfinite(prod) & ~inside], fp8_max(fmt)))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scale", [2.0 ** -6, 1.0, 2.0 ** 7])
def test_power_of_two_scales_round_trip_every_pattern_exactly(fmt, scale):
    q, vals = all_patterns(fmt)
    finite = torch.isfinite(vals)
    x = vals / scale
    back = quantize(x, scale, fmt)
    assert torch.equal(back.view(torch.uint8)[finite], q.view(torch.uint8)[finite])
    assert torch.equal(dequantize(back, scale)[finite], x[finite])
    assert torch.isnan(dequantize(back, scale)[torch.isnan(vals)]).all()


def test_format_limits_read_from_torch():
    assert (fp8_max("e4m3"), fp8_max("e5m2")) == (448.0, 57344.0)
    assert (fp8_min_subnormal("e4m3"), fp8_min_subnormal("e5m2")) == (2.0 ** -9, 2.0 ** -16)
    assert fp8_name(torch.float8_e5m2) == "e5m2" and fp8_name("float8_e4m3fn") == "e4m3"


def test_scale_rule_matches_transformer_engine():
    # scale = fp8_max * 2**-margin / amax, in fp32
    assert compute_scale(448.0, "e4m3") == 1.0
    assert compute_scale(7.0, "e4m3", margin=2) == float(torch.tensor(448.0 / 4) / torch.tensor(7.0))
    assert compute_scale(57344.0 / 8, "e5m2") == 8.0
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        assert compute_scale(bad, "e4m3", previous=5.0) == 5.0     # keep the previous scale
    tiny = compute_scale(1e-45, "e4m3")
    assert tiny == torch.finfo(torch.float32).max and not math.isnan(tiny)


def test_current_scale_of_degenerate_tensors_is_one():
    assert current_scale(torch.zeros(4)) == 1.0
    assert current_scale(torch.tensor([float("inf"), float("nan")])) == 1.0
    assert current_scale(torch.tensor([2.0, float("inf")])) == 1.0     # TE: amax inf -> compute_scale_from_amax gives 1
    assert current_scale(torch.tensor([2.0, float("nan")])) == 224.0   # a NaN is skipped by the amax (fmaxf)
    assert current_scale(torch.tensor([float("nan")] * 3)) == 1.0      # all NaN: amax 0
    assert amax_of(torch.tensor([])) == 0.0


def fmaxf_amax(values):
    """TE's amax loop written out: ``amax = fmaxf(fabsf(v), amax)`` from 0; fmaxf returns the other operand of a NaN."""
    amax = 0.0
    for v in values:
        a = abs(v)
        amax = amax if math.isnan(a) else a if math.isnan(amax) else max(a, amax)
    return amax


@pytest.mark.parametrize("seed", range(4))
def test_amax_is_tes_fmaxf_reduction(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(200, generator=g) * 10
    idx = torch.randperm(200, generator=g)
    x[idx[:seed * 3]] = float("nan")                          # seed 0: no NaN
    x[idx[20:20 + seed // 2]] = -float("inf") if seed % 2 else float("inf")   # seeds 2, 3: one inf
    assert amax_of(x) == fmaxf_amax(x.tolist())
    assert (amax_of(x) == float("inf")) == (seed >= 2)
    assert amax_of(x.to(torch.bfloat16)) == fmaxf_amax(x.to(torch.bfloat16).float().tolist())
    with pytest.raises(TypeError, match="tensor"):
        amax_of(x.tolist())


def test_compute_scale_rounds_the_amax_to_fp32_first():
    # TE stores amaxes in fp32: 1e39 is inf there and 1e-50 is 0, so both keep the previous scale
    assert compute_scale(1e39, "e4m3", previous=5.0) == 5.0
    assert compute_scale(1e-50, "e4m3", previous=5.0) == 5.0
    assert compute_scale(1e-45, "e4m3") == torch.finfo(torch.float32).max   # fp32 subnormal amax: the scale overflows
    assert compute_scale(0.1, "e4m3") == float(torch.tensor(448.0) / torch.tensor(0.1))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scale", SCALES + [3.0, 12345.678, 2.149e4])
def test_dequantize_is_q_times_fp32_scale_inv_on_all_256_patterns(fmt, scale):
    """TE: scale_inv = fp32(1 / scale) is stored with the data, dequantize = q * scale_inv (numpy's fp32 as oracle)."""
    q, vals = all_patterns(fmt)
    s32 = np.float32(scale)
    inv = np.float32(1.0) / s32
    expected = torch.from_numpy(vals.numpy().astype(np.float32) * inv)
    got = dequantize(q, scale)
    assert scale_inv(scale) == float(inv)
    assert torch.equal(torch.isnan(got), torch.isnan(expected))
    ok = ~torch.isnan(expected)
    assert torch.equal(got[ok], expected[ok])
    # the documented difference from q / scale: at most one fp32 ulp, and none for a power-of-two scale
    divided = torch.from_numpy(vals.numpy().astype(np.float32) / s32)
    fin = ok & torch.isfinite(divided)
    ulp = torch.from_numpy(np.abs(np.spacing(divided.numpy().astype(np.float32))))
    assert bool(((got - divided).abs()[fin] <= ulp[fin]).all())
    if math.log2(float(s32)).is_integer():
        assert torch.equal(got[fin], divided[fin])


def test_dequantize_differs_from_division_by_one_ulp_on_many_elements():
    q, vals = all_patterns("e4m3")
    fin = torch.isfinite(vals) & (vals != 0)
    differ = (dequantize(q, 3.0) != vals / torch.tensor(3.0)) & fin
    assert 0.2 < float(differ.sum()) / float(fin.sum()) < 0.3            # 25 % at scale 3, e4m3
    assert not bool(((dequantize(q, 4.0) != vals / 4.0) & fin).any())


def test_report_counts_saturated_flushed_kept():
    x = torch.tensor([1000.0, 500.0, 1.0, 1e-4, 0.0, float("nan"), -2.0, 3.0])
    r = quant_report(x, 1.0, "e4m3")
    assert (r.saturated, r.flushed, r.nonfinite) == (2 / 8, 1 / 8, 1 / 8)
    assert r.kept == 4 / 8 and math.isclose(r.saturated + r.flushed + r.kept + r.nonfinite, 1.0)
    assert r.max_abs_error == 1000.0 - 448.0
    fine = quant_report(torch.tensor([1.0, 2.0, 0.5]), 1.0)
    assert fine.rel_error == 0.0 and fine.kept == 1.0
    # e5m2 without saturation: overflow becomes inf, still counted as saturated, error stays finite
    raw = quant_report(torch.tensor([1e6, 1.0]), 1.0, "e5m2", saturate=False)
    assert raw.saturated == 0.5 and math.isfinite(raw.rel_error) and raw.max_abs_error == 1e6


def test_fake_quantize_error_is_within_half_an_ulp():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    s = current_scale(x, "e4m3")
    err = (fake_quantize(x, s, "e4m3") - x).abs() * s
    # e4m3 has 3 mantissa bits: relative spacing 2**-3, so |err| <= 2**-4 * |x| (normals) or half a subnormal step
    assert bool((err <= torch.maximum(x.abs() * s * 2.0 ** -4, torch.tensor(2.0 ** -10))).all())


@pytest.mark.parametrize("bad", ["e3m4", "fp16", torch.float16])
def test_unknown_format_is_a_value_error(bad):
    with pytest.raises(ValueError, match="e4m3"):
        quantize(torch.ones(2), 1.0, bad)


def test_bad_scale_margin_and_types():
    with pytest.raises(TypeError):
        fp8_name(3)
    with pytest.raises(ValueError):
        quantize(torch.ones(2), 0.0)
    with pytest.raises(ValueError):
        quantize(torch.ones(2), float("nan"))
    with pytest.raises(TypeError):
        quantize([1.0], 1.0)
    with pytest.raises(ValueError, match="margin"):
        compute_scale(1.0, margin=-1)
    with pytest.raises(TypeError, match="margin"):
        compute_scale(1.0, margin=0.5)
    with pytest.raises(TypeError):
        compute_scale("big")
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        dequantize(torch.ones(2), 1.0)
    with pytest.raises(ValueError, match="fp32"):
        quantize(torch.ones(2), 1e39)                  # inf in fp32
    with pytest.raises(ValueError, match="fp32"):
        quantize(torch.ones(2), 1e-50)                 # 0 in fp32
    with pytest.raises(TypeError, match="scale"):
        quantize(torch.ones(2), True)
    with pytest.raises(ValueError, match="shape"):
        quantize(torch.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="tensor"):
        quant_report([1.0], 1.0)
    with pytest.raises(ValueError, match="previous"):
        compute_scale(1.0, previous=float("nan"))


def test_torch_raw_casts_saturate_e4m3_but_not_e5m2():
    big = torch.tensor([500.0, 1e6, float("inf")])
    assert quantize(big, 1.0, "e4m3", saturate=False).float().tolist() == [448.0] * 3
    huge = torch.tensor([1e5, 1e6, float("inf")])
    assert quantize(huge, 1.0, "e5m2", saturate=False).float().tolist() == [float("inf")] * 3
    assert quantize(huge, 1.0, "e5m2").float().tolist() == [57344.0] * 3         # saturate=True clamps first
    assert quantize(torch.tensor([61439.0, 61440.0]), 1.0, "e5m2", saturate=False).float().tolist() == [
        57344.0, float("inf")]                                                   # the saturation_threshold


@pytest.mark.parametrize("fmt", FORMATS)
def test_fast_fp8_to_float_is_torchs_cast_on_all_256_patterns(fmt):
    q, vals = all_patterns(fmt)
    fast = fp8_to_float(q)
    assert torch.equal(torch.isnan(fast), torch.isnan(vals))
    ok = ~torch.isnan(vals)
    assert torch.equal(fast[ok], vals[ok])
    assert torch.equal(torch.signbit(fast[ok]), torch.signbit(vals[ok]))      # -0.0 stays -0.0
