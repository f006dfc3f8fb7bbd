"""ampkit.fp8.mx: block exponents against a direct per-spec computation and TE's float_to_e8m0, E8M0 bytes against
torch's float8_e8m0fnu, saturation of the floor rule, bad input."""
import math

import numpy as np
import pytest
import torch

from ampkit.fp8 import (
    current_scale,
    e8m0_decode,
    e8m0_encode,
    fake_quantize,
    mx_dequantize,
    mx_exponents,
    mx_fake_quantize,
    mx_quantize,
    mx_report,
)


def spec_exponent(block, fmt, rounding):
    """One block's shared exponent, written straight from the two sources with Python floats."""
    amax = max(abs(v) for v in block)
    if amax == 0:
        return -127
    if rounding == "ocp":     # OCP MX v1.0: floor(log2(amax)) - emax_elem
        e = math.floor(math.log2(amax)) - {"e4m3": 8, "e5m2": 15}[fmt]
    else:                     # TE MXFP8: exponent of fp32(amax * fp32(1 / fp8_max)), rounded up unless a power of two
        r = float(np.float32(amax) * np.float32(1.0 / {"e4m3": 448.0, "e5m2": 57344.0}[fmt]))
        if r == 0:
            return -127           # the product underflowed fp32: E8M0 byte 0x00
        m, ex = math.frexp(r)
        e = ex - 1 if m == 0.5 else ex
    return max(-127, min(127, e))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("rounding", ["ocp", "te"])
def test_exponents_match_the_spec_block_by_block(fmt, rounding):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 128, generator=g) * torch.logspace(-30, 30, 6, base=2).unsqueeze(1)
    x[0, :32] = 0.0
    x[1, 32:64] = 0.0
    x[1, 40] = 448.0     # exact powers / maxima
    x[2, 64] = 2.0 ** 8
    x[3, 96:128] = 2.0 ** -140  # TE: amax / fp8_max underflows fp32
    e = mx_exponents(x.float(), fmt, rounding=rounding)
    for i in range(6):
        for j in range(4):
            blk = x[i, 32 * j: 32 * (j + 1)].float().tolist()
            assert int(e[i, j]) == spec_exponent(blk, fmt, rounding), (i, j)


def te_float_to_e8m0(val):
    """TE's float_to_e8m0 (ptx_arch_spec.cuh, the non-Blackwell branch) on fp32 numpy values, bit by bit."""
    u = val.astype(np.float32).view(np.uint32)
    exp, man = (u >> 23) & 0xFF, u & 0x7FFFFF
    up = (man > 0) & (exp != 0xFE) & ~((exp == 0) & (man <= 0x400000))
    out = np.where(val == 0, 0, exp + up)
    return np.where(np.isnan(val), 0xFF, np.where(np.isinf(val), 0xFE, out)).astype(np.int64)


#: fp32 mantissas to try in each binade: every 61st, the smallest 512 (products that underflow to 0), every one near
#: 0x600000 (1.75 = 448 / 256 and 57344 / 32768: products near a power of two) and near 0x400000 and the top.
MANTISSAS = np.unique(np.concatenate([
    np.arange(0, 2 ** 23, 61), np.arange(512), np.arange(0x5FF000, 0x601000), np.arange(0x3FFF00, 0x400100),
    np.arange(2 ** 23 - 256, 2 ** 23)])).astype(np.uint32)


@pytest.mark.parametrize("fmt, fp8max", [("e4m3", 448.0), ("e5m2", 57344.0)])
@pytest.mark.parametrize("binade", [0, 1, 9, 10, 16, 17, 127, 135, 254])   # 0: fp32 subnormals
def test_te_rule_is_tes_float_to_e8m0_across_fp32(fmt, fp8max, binade):
    amax = (MANTISSAS | np.uint32(binade << 23)).view(np.float32)
    expected = te_float_to_e8m0(amax * np.float32(1.0 / fp8max)) - 127
    block = torch.from_numpy(amax.copy()).reshape(-1, 1)          # one-value blocks: the block amax is the value
    assert np.array_equal(mx_exponents(block, fmt, block=1, rounding="te").reshape(-1).numpy(), expected)


def test_te_rule_clamps_an_underflowing_block_to_minus_127_instead_of_flushing_it():
    x = torch.full((1, 32), 2.0 ** -140)            # amax / 57344 is below fp32's smallest subnormal
    assert int(mx_exponents(x, "e5m2", rounding="te")) == -127
    assert torch.equal(mx_fake_quantize(x, "e5m2", rounding="te"), x)   # 2**-140 / 2**-127 = 2**-13: an e5m2 value
    assert torch.equal(mx_fake_quantize(x, "e5m2", rounding="ocp"), x)


def test_e8m0_bytes_decode_as_torchs_float8_e8m0fnu():
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    ours, theirs = e8m0_decode(b), b.view(torch.float8_e8m0fnu).float()
    assert torch.isnan(ours[255]) and torch.isnan(theirs[255])
    assert torch.equal(ours[:255], theirs[:255])
    assert ours[0] == 2.0 ** -127 and ours[127] == 1.0 and ours[254] == 2.0 ** 127
    assert e8m0_encode(torch.arange(-127, 128)).tolist() == list(range(255))


def test_a_non_finite_block_has_the_ocp_nan_byte():
    x = torch.ones(4, 32)
    x[1, 3], x[2, 0], x[3, 31] = float("inf"), float("nan"), -float("inf")
    for rounding in ("ocp", "te"):
        q, e, bad = mx_quantize(x, "e4m3", rounding=rounding)
        byte = e8m0_encode(e, bad)
        assert byte.reshape(-1).tolist() == [127 - 8, 255, 255, 255]     # ones: exponent -8 under both rules
        out = mx_dequantize(q, byte)                              # the bytes alone carry the NaN
        assert torch.equal(out[0], torch.ones(32)) and torch.isnan(out[1:]).all()
        assert torch.equal(torch.isnan(mx_dequantize(q, e, bad)), torch.isnan(out))


def test_floor_rule_can_saturate_te_rule_never_does():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 256, generator=g) * 3
    ocp, te = mx_report(x, "e4m3", rounding="ocp"), mx_report(x, "e4m3", rounding="te")
    assert ocp.saturated > 0 and ocp.blocks_saturating > 0
    assert te.saturated == 0 and te.blocks_saturating == 0
    q, e, _ = mx_quantize(x, "e4m3", rounding="te")
    assert float((torch.ldexp(x.reshape(64, 8, 32), (-e).unsqueeze(-1).float()).abs()).max()) <= 448.0


def test_block_scaling_beats_per_tensor_on_outliers():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 256, generator=g) * 0.01
    x[:, 0] = 1e4                # one outlier per row of 256 (one block in 8)
    per_tensor = fake_quantize(x, current_scale(x, "e4m3"), "e4m3")
    rel_pt = float((per_tensor - x).norm() / x.norm())
    small = x.abs() < 1
    flushed_pt = float(((per_tensor == 0) & (x != 0) & small).float().sum())
    blk = mx_fake_quantize(x, "e4m3", rounding="te")
    flushed_mx = float(((blk == 0) & (x != 0) & small).float().sum())
    assert flushed_mx < flushed_pt
    err_small = lambda deq: float((deq - x)[small].norm() / x[small].norm())   # noqa: E731
    assert err_small(blk) < err_small(per_tensor) / 2
    assert rel_pt < 1e-4           # over the whole tensor the outliers dominate: the per-tensor error looks tiny


def test_round_trip_and_nonfinite_blocks():
    x = torch.tensor([[1.0] * 32 + [2.0, float("inf")] + [0.0] * 30])
    q, e, bad = mx_quantize(x)
    assert bad.tolist() == [[False, True]]
    out = mx_dequantize(q, e, bad)
    assert torch.equal(out[0, :32], torch.ones(32)) and torch.isnan(out[0, 32:]).all()
    assert int(e[0, 1]) == 127
    assert mx_exponents(torch.zeros(1, 32)).tolist() == [[-127]]
    assert torch.equal(mx_fake_quantize(torch.zeros(1, 32)), torch.zeros(1, 32))


@pytest.mark.parametrize("block, exc", [(0, ValueError), (-32, ValueError), (40, ValueError), (2.0, TypeError),
                                        (True, TypeError)])
def test_block_must_be_a_positive_divisor(block, exc):
    with pytest.raises(exc, match="block"):
        mx_exponents(torch.ones(2, 96), block=block)


def test_mx_dequantize_bad_exponents_name_the_valid_shape():
    q, e, bad = mx_quantize(torch.ones(2, 64))
    with pytest.raises(ValueError, match=r"shape \(2, 2\) \(one per block\); got shape \(1, 2\)"):
        mx_dequantize(q, e[:1])
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        mx_dequantize(q, e8m0_encode(e).reshape(4))
    with pytest.raises(ValueError, match=r"\[-127, 127\]"):
        mx_dequantize(q, e + 200)
    with pytest.raises(TypeError, match="integer tensor"):
        mx_dequantize(q, e.float())
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        mx_dequantize(q.float(), e)
    with pytest.raises(ValueError, match="nonfinite_blocks must have"):
        mx_dequantize(q, e, bad[:1])
    with pytest.raises(TypeError, match="nonfinite_blocks must be a bool"):
        mx_dequantize(q, e, bad.int())
    with pytest.raises(TypeError, match="uint8"):
        e8m0_decode(e)
    assert torch.equal(mx_dequantize(q, e, bad), torch.ones(2, 64))


def test_other_block_sizes_and_bad_choices():
    assert mx_exponents(torch.ones(2, 96), block=96).shape == (2, 1)
    with pytest.raises(ValueError, match="ocp"):
        mx_report(torch.ones(1, 32), rounding="nearest")
    with pytest.raises(ValueError, match="e4m3"):
        mx_quantize(torch.ones(1, 32), "int8")
