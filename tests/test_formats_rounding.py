"""ampkit.formats rounding: ``ulp`` for every positive fp16/bf16 pattern, the scalar rounding against torch's cast at
every threshold, and ``accumulate`` against a torch loop in that format."""
import math

import pytest
import torch
from _format_patterns import all_patterns, boundary_values, same

from ampkit.formats import FORMATS, accumulate, info, round_trip, ulp
from ampkit.formats.rounding import _round_scalar


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_ulp_is_the_gap_to_the_next_value_for_every_positive_pattern(fmt):
    _, values = all_patterns(fmt)
    x = values[(values > 0) & torch.isfinite(values)]
    gap = torch.nextafter(x.to(FORMATS[fmt]), torch.full_like(x, math.inf).to(FORMATS[fmt])).double() - x
    u = ulp(x, fmt)
    top = x == info(fmt).max  # next is inf there; the ulp is the spacing of the top binade
    assert torch.equal(u[~top], gap[~top])
    assert u[top].item() == info(fmt).ulp_at_max


def test_ulp_across_magnitudes():
    assert ulp(1.0, "fp16") == 2 ** -10 and ulp(2048.0, "fp16") == 2.0 and ulp(1.0, "bf16") == 2 ** -7
    assert ulp(1e-7, "fp16") == 2 ** -24 and ulp(1.0, "e4m3") == 0.125 and ulp(1.0, "fp32") == 2 ** -23
    assert math.isnan(ulp(1e5, "fp16")) and math.isnan(ulp(math.inf, "bf16")) and math.isnan(ulp(1000.0, "e4m3"))
    xs = torch.logspace(-3, 4, 50, base=10, dtype=torch.float64)
    u16, u_bf = ulp(xs, "fp16"), ulp(xs, "bf16")
    assert torch.all(u_bf == u16 * 8)  # 3 mantissa bits fewer, everywhere in fp16's normal range
    assert torch.all(u16 / xs <= 2 ** -10) and torch.all(u16 / xs > 2 ** -11)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_round_scalar_matches_torch_cast(fmt):
    g = torch.Generator().manual_seed(2)
    x = torch.cat([boundary_values(torch.float64),
                   torch.randn(3000, generator=g, dtype=torch.float64)
                   * torch.exp2(torch.randint(-160, 140, (3000,), generator=g).to(torch.float64))])
    midpoints = [(a + b) / 2 for a, b in zip(x.tolist(), x.tolist()[1:])]
    for v in x.tolist() + midpoints + [1 + 2 ** -11 + 2 ** -40, 2048 + 1.0, 65520.0, 464.0]:
        assert same(_round_scalar(v, info(fmt)), round_trip(v, fmt)), (fmt, v)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_accumulate_matches_a_torch_loop_in_that_format(fmt):
    g = torch.Generator().manual_seed(3)
    vals = torch.rand(400, generator=g, dtype=torch.float64) * 10
    acc = torch.zeros((), dtype=FORMATS[fmt])
    expected = []
    for v in vals.to(FORMATS[fmt]):
        acc = acc + v  # torch's own fp16/bf16 addition
        expected.append(acc.item())
    assert accumulate(vals, fmt).tolist() == expected


def test_accumulate_long_sums():
    assert accumulate([1.0] * 3000, "fp16")[-1].item() == 2048.0  # 2048 + 1 == 2048
    assert accumulate([1.0] * 3000, "bf16")[-1].item() == 256.0  # 8 significant bits
    assert accumulate([1.0] * 3000, "fp16", accumulator="fp32")[-1].item() == 3000.0
    small = accumulate(torch.full((10_000,), 1e-4), "fp16")
    assert small[-1].item() < 0.5  # the true sum is ~1.0: the running sum stalls when an add is < half an ulp
    assert abs(accumulate(torch.full((10_000,), 1e-4), "fp16", accumulator="fp32")[-1].item() - 1.0) < 1e-3
    assert accumulate([448.0, 448.0], "e4m3").tolist() == [448.0, 448.0]  # saturates
    assert accumulate([60000.0, 60000.0], "fp16").tolist() == [60000.0, math.inf]


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16", "e4m3", "e5m2"])
def test_ulp_at_zero_and_below_half_the_smallest_subnormal_is_the_smallest_subnormal(fmt):
    tiny = info(fmt).smallest_subnormal
    assert ulp(0.0, fmt) == ulp(-0.0, fmt) == tiny
    assert ulp(tiny / 4, fmt) == tiny          # rounds to zero: the spacing there is still the smallest subnormal
    assert ulp(tiny, fmt) == tiny
