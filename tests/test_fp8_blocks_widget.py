"""ampkit.fp8.compare and ampkit.widgets.fp8_blocks: per-tensor vs per-block counts (MX and fp32 tiles), headless
sweep of every control (the state the page selects from), bad input."""
import base64
import json
import statistics
import time

import pytest
import torch
import traitlets

from ampkit.fp8 import mx_exponents, mx_fake_quantize, saturation_threshold
from ampkit.fp8.compare import (
    LOG2_ERROR_FLOOR,
    PER_TENSOR,
    block_choices,
    block_stats,
    compare_blocks,
    compare_tiles,
    log2_error,
    outlier_tensor,
)
from ampkit.fp8.tiles import tile_scales
from ampkit.widgets.fp8_blocks import SCHEMES, BlockScalingExplorer, blocks_readout_html, scheme_choices, setting_key


def test_block_choices_divide_the_last_dimension():
    assert block_choices(128) == (PER_TENSOR, 8, 16, 32, 64, 128)
    assert block_choices(96) == (PER_TENSOR, 8, 16, 32)
    assert all(96 % b == 0 for b in block_choices(96)[1:])


def test_stats_against_a_direct_computation():
    x = outlier_tensor()
    for fmt in ("e4m3", "e5m2"):
        thr, inclusive = saturation_threshold(fmt)   # beyond it, |x/2**e| would round past fp8_max
        for rounding in ("ocp", "te"):
            s = block_stats(x, fmt, 32, rounding)
            deq = mx_fake_quantize(x, fmt, 32, rounding)
            assert torch.equal(s.flushed, (x != 0) & (deq == 0))
            scale = torch.ldexp(torch.ones(1), mx_exponents(x, fmt, 32, rounding).float()).repeat_interleave(32, -1)
            mag = (x / scale).abs()
            assert torch.equal(s.saturated, mag >= thr if inclusive else mag > thr)
            assert torch.allclose(s.rel_error, (deq - x).abs() / x.abs())
            assert s.n_flushed + s.n_saturated + s.n_kept == x.numel()
            # per-tensor = one block holding the whole tensor
            t = block_stats(x, fmt, PER_TENSOR, rounding)
            assert t.n_blocks == 1
            assert torch.equal(t.rel_error.reshape(1, -1),
                               block_stats(x.reshape(1, -1), fmt, x.numel(), rounding).rel_error)


def test_outliers_make_blocks_win_and_the_floor_rule_saturate():
    x = outlier_tensor()
    tensor, block = compare_blocks(x, "e4m3", 32, "ocp")
    assert block.n_flushed < tensor.n_flushed / 5 and block.mean_rel_error < tensor.mean_rel_error / 3
    assert block.n_saturated > 0 and compare_blocks(x, "e4m3", 32, "te")[1].n_saturated == 0
    # smaller blocks flush fewer values (TE rule, e4m3)
    flushed = [block_stats(x, "e4m3", b, "te").n_flushed for b in (8, 16, 32, 64, 128)]
    assert flushed == sorted(flushed)


def test_log2_error_is_clamped():
    s = block_stats(outlier_tensor(), "e4m3", PER_TENSOR, "te")
    e = log2_error(s)
    assert float(e.min()) >= LOG2_ERROR_FLOOR and float(e.max()) == 0.0
    assert bool((e[s.flushed] == 0).all())


def test_bad_input():
    x = outlier_tensor()
    with pytest.raises(ValueError, match="valid block sizes"):
        block_stats(x, "e4m3", 48)
    with pytest.raises(ValueError, match="per-tensor"):
        block_stats(x, "e4m3", "tensor")
    with pytest.raises(TypeError):
        block_stats(x, "e4m3", 32.0)
    with pytest.raises(ValueError, match="'ocp', 'te'"):
        block_stats(x, "e4m3", 32, "nearest")
    with pytest.raises(ValueError):
        block_stats(x, "e3m4", 32)
    y = x.clone()
    y[0, 0] = float("inf")
    with pytest.raises(ValueError, match="finite"):
        block_stats(y, "e4m3", 32)
    with pytest.raises(TypeError):
        block_stats(torch.tensor(1.0), "e4m3", 1)
    with pytest.raises(ValueError, match="rows >= 16"):
        outlier_tensor(4, 128)
    with pytest.raises(ValueError, match="one of"):
        BlockScalingExplorer(block=48)
    with pytest.raises(TypeError, match="2-D"):
        BlockScalingExplorer(torch.ones(128))
    with pytest.raises(ValueError):
        BlockScalingExplorer(rounding="up")
    with pytest.raises(ValueError, match=r"'mx', '1x128' for a tensor of shape \(16, 128\); got '128x128'"):
        BlockScalingExplorer(outlier_tensor(), scheme="128x128")    # 16 rows: no 128x128 block fits
    with pytest.raises(TypeError, match="power_of_two"):
        BlockScalingExplorer(power_of_two=1)


def _decode(code: dict, n: int) -> torch.Tensor:
    """A mask code as js/blocks.js's maskIndices reads it (indices, or base64 bits, most significant first)."""
    out = torch.zeros(n, dtype=torch.bool)
    if "i" in code:
        out[[int(i) for i in code["i"].split(",") if i]] = True
        return out
    bits = [(byte >> (7 - k)) & 1 for byte in base64.b64decode(code["b"]) for k in range(8)]
    return torch.tensor(bits[:n], dtype=torch.bool)


def _scales(code: dict) -> list[float]:
    """Block scales as js/blocks.js's blockScales reads them."""
    return [float(ord(c) - 80) for c in code["c"]] if "c" in code else [float(v) for v in code["v"].split(",")]


def _engine_scales(x: torch.Tensor, s) -> torch.Tensor:
    """k per block (x stored as x / 2**k), from the engine directly: MX exponents, or -log2 of the fp32 tile scale."""
    if s.scheme == "mx":
        flat = x.reshape(1, -1) if s.block == PER_TENSOR else x
        return mx_exponents(flat, s.fmt, flat.shape[-1] if s.block == PER_TENSOR else s.block, s.rounding).float()
    tile = tuple(x.shape) if s.block == PER_TENSOR else s.block
    return -torch.log2(tile_scales(x, tile, s.fmt, s.rounding == "power-of-two"))


def test_widget_sweep_equals_the_pure_function():
    """Every setting the controls reach was computed when the view started; its state (what the page draws and
    reads out) equals ampkit.fp8.compare's numbers and masks for that setting, and selecting it sets .stats."""
    w = BlockScalingExplorer()
    x = w.x
    assert tuple(x.shape) == (128, 256) and [v for v, _ in w.choices["scheme"]] == ["mx", "1x128", "128x128"]
    assert [v for v, _ in w.choices["block"]] == ["per-tensor", 8, 16, 32, 64, 128, 256]
    assert len(w.states) == 2 * (2 * 7 + 2 * 2)            # every reachable setting, nothing else
    size = len(json.dumps({k: getattr(w, k) for k in ("states", "masks", "choices", "text", "look", "shape")}))
    assert size + len(w._esm) < 200_000, size            # the saved view's state fits the notebooks' budget
    times = []

    def check(key: str, tensor, block, shape) -> None:
        st = w.states[key]
        assert st["edges"] == shape
        for row, s in zip(st["rows"], (tensor, block)):
            assert (row["flushed"], row["saturated"], row["kept"]) == (s.n_flushed, s.n_saturated, s.n_kept)
            assert row["err"] == f"{s.mean_rel_error:.4f}" and f">{row['err']}<" in w.readout_html
            assert torch.equal(_decode(w.masks[row["f"]], x.numel()), s.flushed.reshape(-1))
            assert torch.equal(_decode(w.masks[row["s"]], x.numel()), s.saturated.reshape(-1))
            assert _scales(row["k"]) == pytest.approx(_engine_scales(x, s).reshape(-1).tolist(), abs=0.005001)
        assert w.readout_html == blocks_readout_html(tensor, block) and st["verdict"] in w.readout_html
        assert w.stats[0].n_flushed == tensor.n_flushed and w.stats[1].n_flushed == block.n_flushed

    for fmt in ("e4m3", "e5m2"):
        w.scheme = "mx"
        for rounding, _ in w.choices["rounding"]:
            for b, _ in w.choices["block"]:
                t0 = time.perf_counter()
                w.fmt, w.rounding, w.block = fmt, rounding, b
                times.append(time.perf_counter() - t0)
                tensor, block = compare_blocks(x, fmt, b, rounding)
                check(setting_key("mx", b, fmt, rounding, True), tensor, block,
                      None if b == PER_TENSOR else [1, b])
                assert f"<td class='ampkit-fp8-n-flushed' style='color:#8c959f'>{block.n_flushed}</td>" \
                       in w.readout_html
        for scheme in ("1x128", "128x128"):
            for p2 in (True, False):
                w.scheme, w.power_of_two = scheme, p2
                tensor, block = compare_tiles(x, fmt, SCHEMES[scheme][1], p2)
                check(setting_key(scheme, 0, fmt, "", p2), tensor, block, list(SCHEMES[scheme][1]))
                assert w.stats[1].block == SCHEMES[scheme][1]
                assert ("rounded down to a power of two" if p2 else "exact fp32 scale") in w.readout_html
    w.scheme = "1x128"                    # controls that do not apply to the scheme do not change the setting
    stats = w.stats
    w.block, w.rounding = 64, "te"
    assert w.stats is stats
    for name, bad in (("block", 48), ("scheme", "tiles"), ("fmt", "e3m4"), ("rounding", "up")):
        with pytest.raises(traitlets.TraitError, match="must be one of"):
            setattr(w, name, bad)
    assert w.still().children[1].value[:4] == b"\x89PNG"
    print(f"selection: median {1e6 * statistics.median(times):.0f} us over {len(times)} settings")


def test_tiles_confine_the_outliers_damage():
    """The readout's numbers on the default tensor: 1x128 tiles < 128x128 blocks < one scale, in flushed values."""
    w = BlockScalingExplorer(scheme="1x128")
    tensor, tiles = w.stats
    assert "1×128 tiles</b> (256 scales)" in w.readout_html and "per tensor</b> (1 scale)" in w.readout_html
    w.scheme = "128x128"
    _, blocks = w.stats
    assert "128×128 blocks</b> (2 scales)" in w.readout_html
    assert tiles.n_flushed < blocks.n_flushed < tensor.n_flushed and tensor.n_saturated == blocks.n_saturated == 0
    assert scheme_choices((16, 128)) == ("mx", "1x128") and scheme_choices((128, 96)) == ("mx",)
