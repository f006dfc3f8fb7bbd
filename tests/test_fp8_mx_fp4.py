"""MXFP4 and the MX scale rules (ampkit.fp8.mx with ``fmt="e2m1"``; E2M1 from ampkit.formats.e2m1), against torchao
0.18's ``to_mx`` (every ``ScaleCalculationMode``: FLOOR, CEIL, EVEN, RCEIL; E2M1 and E4M3 elements) and Transformer
Engine's reference MXFP4 path (``_quantize_blockwise_reference(pow_2_scales=True)``, v2.18, vendored): E8M0 bytes and
element codes bit for bit, and the edges where torchao differs (a block so small that its exponent is -127, and
non-finite blocks), with which the kit follows.
"""
from __future__ import annotations

import pytest
import torch
import torchao.prototype.mx_formats.mx_tensor as mx_tensor  # a pinned test dependency: no skip without it
from te_reference.load import te_reference
from torchao.prototype.mx_formats.config import ScaleCalculationMode

from ampkit.formats.e2m1 import (
    E2M1_MIDPOINTS,
    E2M1_VALUES,
    e2m1_decode,
    e2m1_encode,
    e2m1_neighbours,
    pack_e2m1,
    unpack_e2m1,
)
from ampkit.fp8.mx import e8m0_encode, emax_elem, mx_exponents, mx_fake_quantize, mx_quantize, mx_report

MODES = {"floor": ScaleCalculationMode.FLOOR, "ceil": ScaleCalculationMode.CEIL, "even": ScaleCalculationMode.EVEN,
         "rceil": ScaleCalculationMode.RCEIL}
ELEM = {"e2m1": torch.float4_e2m1fn_x2, "e4m3": torch.float8_e4m3fn}


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(41)
    near_pow2 = torch.randn(8, 64, generator=g)
    near_pow2[:, 0] = torch.tensor([4.0, 7.0, 7.5, 6.0, 3.5, 1.75, 1.5, 12.0])   # amaxes on the rules' edges
    return {
        "randn": torch.randn(16, 128, generator=g),
        "wide_range": torch.randn(16, 128, generator=g) * torch.logspace(-20, 20, 128),
        "near_pow2": near_pow2,
        "zeros": torch.zeros(4, 64),
        "tiny_amax": torch.randn(4, 64, generator=g) * 1e-30,
        "huge_amax": torch.randn(4, 64, generator=g) * 1e36,
        "bf16": torch.randn(8, 64, generator=g).bfloat16(),
    }


INPUTS = _inputs()


def _codes(fmt: str, data: torch.Tensor) -> torch.Tensor:
    return unpack_e2m1(data) if fmt == "e2m1" else data.view(torch.uint8)


@pytest.mark.parametrize("fmt", ["e2m1", "e4m3"])
@pytest.mark.parametrize("rule", list(MODES))
@pytest.mark.parametrize("name", list(INPUTS))
def test_scales_and_elements_equal_torchao_bit_for_bit(name, rule, fmt):
    x = INPUTS[name]
    scale, data = mx_tensor.to_mx(x, ELEM[fmt], 32, MODES[rule])
    q, e, bad = mx_quantize(x, fmt, 32, rule)
    assert torch.equal(e8m0_encode(e, bad), scale.view(torch.uint8))
    mine = q if fmt == "e2m1" else q.view(torch.uint8)
    assert torch.equal(mine, _codes(fmt, data))


@pytest.mark.parametrize("name", ["randn", "wide_range", "near_pow2", "zeros", "huge_amax"])
def test_mxfp4_te_rule_equals_te_reference_pow2_path(name):
    """TE's reference MXFP4 (``pow_2_scales=True``, 1×32): ``2**ceil(log2(amax / 6))`` — the kit's ``"te"`` for
    E2M1, the same as ``"rceil"``. Its scale is computed with ``torch.log2``; these inputs keep away from a quotient
    within an ulp of a power of two, where a log2 that rounds could decide ``ceil``."""
    x = INPUTS[name]
    ref = te_reference("v2.18").NVFP4QuantizerRef
    packed, decode = ref._quantize_blockwise_reference(x, None, 32, 1, pow_2_scales=True, eps=0.0)
    q, e, _ = mx_quantize(x, "e2m1", 32, "te")
    assert torch.equal(torch.ldexp(torch.ones_like(e, dtype=torch.float32), e.float()), decode)
    assert torch.equal(pack_e2m1(q), packed)
    assert torch.equal(mx_exponents(x, "e2m1", rounding="te"), mx_exponents(x, "e2m1", rounding="rceil"))


def test_the_rules_differ_where_the_docstring_says():
    """Block amax 7 (significand 1.75): FLOOR 2**0 (7 saturates to 6), CEIL 2**1, EVEN rounds 1.75 up: 2**1, RCEIL
    ceil(log2(7/6)) = 1. Block amax 4: FLOOR, CEIL and EVEN give 2**0, RCEIL 2**0 (4/6 < 1)."""
    x = torch.zeros(2, 32)
    x[0, 0], x[1, 0] = 7.0, 4.0
    got = {r: mx_exponents(x, "e2m1", rounding=r)[:, 0].tolist() for r in ("ocp", "floor", "ceil", "even", "rceil")}
    assert got == {"ocp": [0, 0], "floor": [0, 0], "ceil": [1, 0], "even": [1, 0], "rceil": [1, 0]}
    assert mx_report(x, "e2m1", rounding="floor").blocks_saturating == 1
    assert mx_report(x, "e2m1", rounding="rceil").blocks_saturating == 0


def test_a_block_at_exponent_minus_127_is_where_torchao_differs():
    """A block whose amax is about 1e-38 gets exponent -127 (E8M0 byte 0, 2**-127) under FLOOR. The kit scales its
    elements by 2**127 exactly (Transformer Engine's ``exp2f_rcp``: byte 0 → 2**127); torchao divides by fp32's
    smallest normal 2**-126 instead (its comment: 2**-127 is subnormal), so its elements are half as large — and
    under RCEIL it multiplies by 1.0 for byte 0. The bytes agree; the codes do not."""
    x = torch.zeros(1, 32)
    x[0, :4] = torch.tensor([4e-38, 2e-38, -1e-38, 3e-39])
    scale, data = mx_tensor.to_mx(x, ELEM["e2m1"], 32, MODES["floor"])
    q, e, bad = mx_quantize(x, "e2m1", 32, "floor")
    assert int(e) == -127 and int(scale.view(torch.uint8)) == 0
    assert e2m1_decode(q)[0, 0].item() == 6.0                                # 4e-38 · 2**127 ≈ 6.8: saturates
    assert e2m1_decode(unpack_e2m1(data))[0, 0].item() == 3.0                # 4e-38 · 2**126 ≈ 3.4
    y = torch.zeros(1, 32)                                                   # RCEIL byte 0: amax / 6 <= 2**-127
    y[0, :4] = torch.tensor([3e-38, 2e-38, -1e-38, 3e-39])
    scale_r, data_r = mx_tensor.to_mx(y, ELEM["e2m1"], 32, MODES["rceil"])
    assert int(scale_r.view(torch.uint8)) == 0 and int(mx_exponents(y, "e2m1", rounding="rceil")) == -127
    assert e2m1_decode(unpack_e2m1(data_r)).eq(0).all()                      # times 1.0: all flush
    assert e2m1_decode(mx_quantize(y, "e2m1", 32, "rceil")[0])[0, :4].tolist() == [6.0, 3.0, -1.5, 0.5]


def test_non_finite_blocks_kit_gives_nan_byte_torchao_depends_on_the_rule():
    """A block holding inf: the kit's E8M0 byte is 0xFF (NaN, as for NaN), after Microsoft's MX emulation (see
    ampkit/fp8/mx/rule.py); torchao gives NaN → 0xFF too, but inf → 253 under FLOOR (the exponent field of inf, 128,
    minus emax) and 254 under RCEIL."""
    x = torch.randn(2, 32, generator=torch.Generator().manual_seed(3))
    x[0, 5], x[1, 7] = float("inf"), float("nan")
    q, e, bad = mx_quantize(x, "e2m1", 32, "floor")
    assert e8m0_encode(e, bad).tolist() == [[255], [255]]
    ao = {r: mx_tensor.to_mx(x, ELEM["e2m1"], 32, MODES[r])[0].view(torch.uint8).flatten().tolist()
          for r in ("floor", "rceil")}
    assert ao == {"floor": [253, 255], "rceil": [254, 255]}
    assert torch.isnan(mx_fake_quantize(x, "e2m1", 32, "floor")).all()


def test_e2m1_every_value_and_every_midpoint():
    """All 16 codes round-trip; each midpoint goes to the even code (the one with mantissa bit 0); just off a midpoint
    goes to the nearer value; beyond 6 saturates; NaN → code 0."""
    codes = torch.arange(16, dtype=torch.uint8)
    values = e2m1_decode(codes)
    assert values.tolist() == list(E2M1_VALUES)
    assert torch.equal(e2m1_encode(values), codes)
    mids = torch.tensor(E2M1_MIDPOINTS)
    tie_codes = e2m1_encode(mids)
    assert (tie_codes & 1).eq(0).all()                                        # ties to even
    assert e2m1_decode(tie_codes).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    up = torch.nextafter(mids, torch.tensor(10.0))
    assert torch.equal(e2m1_decode(e2m1_encode(up)), torch.tensor(E2M1_VALUES[1:8]))
    assert e2m1_decode(e2m1_encode(torch.tensor([7.0, 1e30, float("inf"), -float("inf")]))).tolist() == \
        [6.0, 6.0, 6.0, -6.0]
    assert int(e2m1_encode(torch.tensor([float("nan")]))) == 0


def test_e2m1_matches_torchao_cast_on_a_dense_sweep():
    """torchao's own E2M1 cast (bit manipulation, ``f32_to_f4_unpacked``) and the kit's (bucketize) agree on every
    fp32 value of a dense sweep over ±8, subnormals and signed zeros included."""
    from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked

    x = torch.cat([torch.linspace(-8, 8, 200_001), torch.tensor([0.0, -0.0, 1e-40, -1e-40])])
    x = torch.cat([x, torch.nextafter(torch.tensor(E2M1_MIDPOINTS), torch.tensor(0.0)),
                   -torch.tensor(E2M1_MIDPOINTS)])
    assert torch.equal(e2m1_encode(x), f32_to_f4_unpacked(x))


def test_e2m1_neighbours_bracket_and_bad_input_says_what_is_valid():
    x = torch.linspace(-6, 6, 1001)
    lo, hi = e2m1_neighbours(x)
    assert bool((lo <= x).all() and (x <= hi).all())
    assert emax_elem("e2m1") == 2
    with pytest.raises(ValueError, match="-6, 6"):
        e2m1_neighbours(torch.tensor([7.0]))
    with pytest.raises(ValueError, match="'e4m3', 'e5m2', 'e2m1'"):
        mx_quantize(torch.zeros(1, 32), "e3m0")
    with pytest.raises(TypeError, match="uint8"):
        e2m1_decode(torch.zeros(2))


def test_block_range_agrees_with_quantizing_the_block():
    """For amaxes across a binade and every rule: ``block_range(amax).saturates`` is exactly whether mx_report counts
    the block as saturating, and a value just below ``flush_below`` flushes while one at twice it does not."""
    from ampkit.fp8.mx import SCALE_RULES, block_range

    for rule in SCALE_RULES:
        for amax in torch.linspace(3.0, 13.0, 81).tolist():
            r = block_range(amax, "e2m1", rule)
            x = torch.zeros(1, 32)
            x[0, 0], x[0, 1], x[0, 2] = amax, 0.99 * r.flush_below, 2 * r.flush_below
            assert r.saturates == (mx_report(x, "e2m1", rounding=rule).blocks_saturating == 1), (rule, amax)
            q = mx_fake_quantize(x, "e2m1", 32, rule)[0]
            assert q[1] == 0 and q[2] != 0, (rule, amax)
