"""ampkit.fp8.tiles (1×128 tiles / 128×128 blocks, fp32 scales, as Float8BlockScaling) and compare.tile_stats:
scales against a direct per-tile computation, round trips, the transpose mismatch, bad input."""
import math

import pytest
import torch

from ampkit.fp8 import fp8_to_float, quantize
from ampkit.fp8.compare import PER_TENSOR, compare_tiles, outlier_tensor, tile_label, tile_stats
from ampkit.fp8.tiles import (
    BLOCK_128X128,
    TILE_1X128,
    scales_from_amax,
    tile_dequantize,
    tile_fake_quantize,
    tile_quantize,
    tile_scales,
    transpose_mismatch,
)

MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def spread(rows=256, cols=256, seed=0):
    """Values whose magnitude varies along rows and columns (so row tiles and column tiles differ)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g) * torch.logspace(-6, 6, rows, base=2).unsqueeze(1)
            * torch.logspace(3, -3, cols, base=2))


def direct_scale(values, fmt, power_of_two):
    """One tile's scale written straight from TE's compute_scale_from_amax with Python floats."""
    amax = max(abs(float(v)) for v in values)
    if amax == 0 or not math.isfinite(amax):
        return 1.0
    s = float(torch.tensor(MAX[fmt]) / torch.tensor(amax))      # fp32 division, as __fdiv_rn
    return 2.0 ** math.floor(math.log2(s)) if power_of_two else s


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("power_of_two", [True, False])
@pytest.mark.parametrize("tile", [(1, 128), (128, 128), (4, 8)])
def test_scales_and_values_tile_by_tile(fmt, power_of_two, tile):
    x = spread()
    x[0, :128] = 0.0                                  # an all-zero 1x128 tile: scale 1
    tr, tc = tile
    scales = tile_scales(x, tile, fmt, power_of_two)
    assert scales.shape == (256 // tr, 256 // tc) and scales.dtype == torch.float32
    q, qs = tile_quantize(x, tile, fmt, power_of_two)
    assert torch.equal(qs, scales) and q.dtype == {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
    deq = tile_dequantize(q, qs, tile)
    for i, j in [(0, 0), (1, 1), (scales.shape[0] - 1, scales.shape[1] - 1), (scales.shape[0] // 2, 0)]:
        block = x[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc]
        s = direct_scale(block.reshape(-1), fmt, power_of_two)
        assert float(scales[i, j]) == pytest.approx(s, rel=1e-7)
        # the same numbers as the per-tensor quantize with this tile's scale, dequantized by scale_inv
        want = fp8_to_float(quantize(block, s, fmt)) * float(torch.tensor(1.0) / torch.tensor(s))
        assert torch.equal(deq[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc], want)
    assert torch.equal(tile_fake_quantize(x, tile, fmt, power_of_two), deq)


@pytest.mark.parametrize("power_of_two", [True, False])
def test_nothing_saturates_and_pow2_scales_are_powers_of_two(power_of_two):
    x = spread()
    scales = tile_scales(x, TILE_1X128, "e4m3", power_of_two)
    amax = x.abs().reshape(256, 2, 128).amax(-1)
    assert bool((amax * scales <= 448.0 * (1 + 1e-6)).all())     # the largest value of every tile fits
    mant, _ = torch.frexp(scales)
    assert bool((mant == 0.5).all()) == power_of_two              # powers of two exactly when asked
    if not power_of_two:                                          # an exact fp32 scale puts amax at fp8_max
        assert torch.allclose(amax * scales, torch.full_like(amax, 448.0), rtol=1e-6)
    s = tile_stats(x, "e4m3", TILE_1X128, power_of_two)
    assert s.n_saturated == 0 and s.scheme == "tiles"


def test_scales_from_amax_edge_cases():
    a = torch.tensor([0.0, -1.0, float("inf"), float("nan"), 1e-39, 448.0, 3.0])
    assert scales_from_amax(a, power_of_two=False).tolist()[:6] == [1.0, 1.0, 1.0, 1.0,
                                                                    torch.finfo(torch.float32).max, 1.0]
    assert scales_from_amax(a).tolist()[4:] == [2.0 ** 127, 1.0, 128.0]   # fp32 max, masked: 2**127
    assert float(scales_from_amax(torch.tensor(3.0), "e5m2", power_of_two=False)) == pytest.approx(57344 / 3)


def test_batched_tensors_tile_the_last_two_dimensions():
    x = spread(128, 256).reshape(2, 64, 256)
    assert tile_scales(x, (1, 128)).shape == (2, 64, 2)
    assert torch.equal(tile_fake_quantize(x, (1, 128)).reshape(128, 256), tile_fake_quantize(x.reshape(128, 256)))


def test_quantize_then_transpose_is_not_the_fp8_of_the_transpose():
    x = spread()
    # 1-D tiles: the transposed tensor's tiles are the original columns -> other scales, other values
    assert transpose_mismatch(x, TILE_1X128, power_of_two=False) > 0.5
    # power-of-two scales only move the exponent: the two results differ only where one of the two scalings puts
    # the value below e4m3's smallest normal (2**-6), among the subnormals, where fewer bits are left
    rowwise_t = tile_fake_quantize(x, TILE_1X128).t()
    of_transpose = tile_fake_quantize(x.t().contiguous(), TILE_1X128)
    differ = rowwise_t != of_transpose
    assert 0 < transpose_mismatch(x, TILE_1X128) == float(differ.float().mean())
    s_row = tile_scales(x, TILE_1X128).repeat_interleave(128, 1).t()       # each element's scale, both ways
    s_col = tile_scales(x.t().contiguous(), TILE_1X128).repeat_interleave(128, 1)
    low = torch.minimum((x.t() * s_row).abs(), (x.t() * s_col).abs()) < 2.0 ** -6
    assert bool(low[differ].all()) and bool((s_row != s_col)[differ].all())
    for p2 in (True, False):
        # 2-D blocks: the same 128x128 values share a scale either way
        assert transpose_mismatch(x, BLOCK_128X128, power_of_two=p2) == 0.0
        assert torch.equal(tile_fake_quantize(x, BLOCK_128X128, power_of_two=p2).t(),
                           tile_fake_quantize(x.t().contiguous(), BLOCK_128X128, power_of_two=p2))


def test_tile_stats_against_per_tensor_and_block_sizes():
    x = outlier_tensor(128, 256)
    tensor, row_tiles = compare_tiles(x, "e4m3", TILE_1X128)
    _, blocks = compare_tiles(x, "e4m3", BLOCK_128X128)
    assert tensor.block == PER_TENSOR and tensor.n_blocks == 1 and row_tiles.n_blocks == 256 and blocks.n_blocks == 2
    assert torch.equal(tensor.rel_error, tile_stats(x, "e4m3", (128, 256)).rel_error)   # one tile = the tensor
    # finer scales flush fewer values: 1x128 tiles < 128x128 blocks < one scale for the tensor
    assert row_tiles.n_flushed < blocks.n_flushed < tensor.n_flushed
    assert row_tiles.mean_rel_error < blocks.mean_rel_error < tensor.mean_rel_error
    # the block without an outlier (columns 128-255) is not hurt by the outliers of the other block
    right = blocks.rel_error[:, 128:]
    assert float(right.mean()) == pytest.approx(float(row_tiles.rel_error[:, 128:].mean()), rel=0.05)
    assert tensor.n_flushed + tensor.n_saturated + tensor.n_kept == x.numel()
    assert tile_label(TILE_1X128) == "1×128" and row_tiles.rounding == "power-of-two"
    assert tile_stats(x, "e4m3", TILE_1X128, power_of_two=False).rounding == "fp32"


def test_bad_input():
    x = spread(128, 256)
    with pytest.raises(ValueError, match="does not divide"):
        tile_scales(x, (1, 100))
    with pytest.raises(ValueError, match="does not divide"):
        tile_scales(x, (256, 128))
    with pytest.raises(TypeError, match="pair of ints"):
        tile_scales(x, 128)
    with pytest.raises(TypeError, match="pair of ints"):
        tile_scales(x, (1.0, 128))
    with pytest.raises(ValueError, match="tile rows"):
        tile_scales(x, (0, 128))
    with pytest.raises(TypeError, match="two dimensions"):
        tile_scales(torch.ones(128), (1, 128))
    with pytest.raises(TypeError, match="floating-point"):
        tile_scales(torch.ones(4, 128, dtype=torch.int32), (1, 128))
    with pytest.raises(ValueError, match="e4m3"):
        tile_scales(x, (1, 128), "e3m4")
    with pytest.raises(TypeError, match="power_of_two"):
        tile_scales(x, (1, 128), "e4m3", "yes")
    y = x.clone()
    y[3, 3] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        tile_quantize(y)
    q, s = tile_quantize(x)
    with pytest.raises(ValueError, match="one per 1×128 tile"):
        tile_dequantize(q, s[:, :1])
    with pytest.raises(TypeError, match="float8"):
        tile_dequantize(x, s)
    with pytest.raises(TypeError, match="2-D"):
        transpose_mismatch(x.reshape(2, 64, 256))
    with pytest.raises(ValueError, match="does not divide"):     # fits x (128 x 256), not x.T (256 x 128)
        transpose_mismatch(x, (1, 256))
    with pytest.raises(ValueError, match="per-tensor"):
        tile_stats(x, "e4m3", "tensor")
    with pytest.raises(TypeError, match="2-D"):
        tile_stats(x.reshape(2, 64, 256), "e4m3", (1, 128))
