"""ampkit.formats bands: ``classify`` agrees with actually casting the tensor, for every fp16/bf16/fp8 bit pattern,
at the band boundaries and on random values (the other formats tests: test_formats_info, _bits, _rounding)."""
import math

import pytest
import torch
from _format_patterns import SMALL, all_patterns, boundary_values

from ampkit.formats import CLASSES, FORMATS, classify, classify_codes, info

# --------------------------------------------------------------------------------- classify vs casting

def classes_by_casting(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """The reference: cast with torch, then read off what happened to each value."""
    i = info(fmt)
    y = x.to(i.dtype).to(torch.float64)
    xd = x.to(torch.float64)
    a = y.abs()
    codes = torch.full(x.shape, CLASSES.index("normal"))
    codes[(a > 0) & (a < i.smallest_normal)] = CLASSES.index("subnormal")
    codes[(a == 0) & (xd != 0)] = CLASSES.index("flushed")
    codes[xd == 0] = CLASSES.index("zero")
    # overflow: the cast gave inf/NaN, or (saturating e4m3fn) gave max for a value that rounds past it
    # (torch's cast reads a float64 through float32, so the saturation test looks at that float32 value too)
    seen = xd if x.dtype != torch.float64 or fmt == "float32" else x.to(torch.float32).to(torch.float64)
    saturated = (a == i.max) & (seen.abs() > i.overflow_threshold)
    codes[(~torch.isfinite(y) | saturated) & torch.isfinite(xd)] = CLASSES.index("overflow")
    codes[~torch.isfinite(xd)] = CLASSES.index("nonfinite")
    return codes


def check_classify(x: torch.Tensor, fmt: str) -> None:
    expected = classes_by_casting(x, fmt)
    codes = classify_codes(x, fmt)
    bad = (codes != expected).nonzero().flatten()
    assert bad.numel() == 0, (fmt, x.dtype, x[bad[:5]].tolist(), codes[bad[:5]].tolist(), expected[bad[:5]].tolist())
    c = classify(x, fmt)
    counts = torch.bincount(expected, minlength=6).tolist()
    assert [getattr(c, k) for k in CLASSES] == [k / x.numel() for k in counts]
    assert math.isclose(sum(c.as_dict().values()), 1.0) and c.n == x.numel()


@pytest.mark.parametrize("source", SMALL)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_classify_every_pattern_agrees_with_casting(source, fmt):
    _, values = all_patterns(source)
    x = values.to(FORMATS[source])  # the tensor in its own dtype, as a model would hold it
    check_classify(x, fmt)
    check_classify(x.to(torch.float32), fmt)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_classify_agrees_with_casting_at_boundaries_and_random(dtype, fmt):
    g = torch.Generator().manual_seed(1)
    rand = torch.randn(200_000, generator=g, dtype=torch.float64) * torch.exp2(
        torch.randint(-170, 140, (200_000,), generator=g).to(torch.float64))
    check_classify(torch.cat([boundary_values(dtype), rand.to(dtype)]), fmt)


def test_classify_inputs_and_errors():
    c = classify(torch.tensor([1e-9, 1e-6, 1.0, 1e5]), "fp16")
    assert (c.flushed, c.subnormal, c.normal, c.overflow, c.lost) == (0.25, 0.25, 0.25, 0.25, 0.5)
    grads = [torch.zeros(3), torch.full((5,), 1e-9, dtype=torch.float64), torch.ones(2, dtype=torch.bfloat16)]
    c = classify(grads, torch.float16)
    assert c.n == 10 and c.counts() == {"zero": 3, "flushed": 5, "subnormal": 0, "normal": 2, "overflow": 0,
                                        "nonfinite": 0}
    assert classify([0.0, math.nan, 1.0, math.inf], "bf16").nonfinite == 0.5
    assert classify(torch.arange(10), "fp16").normal == 0.9  # integers are accepted as numbers
    e4 = classify(torch.tensor([1000.0, 464.0, 448.0]), "e4m3")
    assert (e4.overflow, e4.normal) == (1 / 3, 2 / 3)
    with pytest.raises(ValueError, match="empty"):
        classify(torch.tensor([]), "fp16")
    with pytest.raises(TypeError):
        classify("abc", "fp16")
    with pytest.raises(TypeError):
        classify(torch.ones(2, dtype=torch.complex64), "fp16")
