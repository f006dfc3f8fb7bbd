"""Notebook 10's lesson (ampkit.lessons.fp4): each table is what the engine computes, checked another way here."""
from __future__ import annotations

import math

import pytest
import torch

from ampkit.fp8 import mx_report, nvfp4_fake_quantize, rht, rht_matrix
from ampkit.lessons import fp4 as L


def test_line_point_rounds_ties_to_even_and_saturates_beyond_six():
    assert (L.line_point(5.0)["to"], L.line_point(2.5)["to"]) == (4.0, 2.0)
    assert L.line_point(5.0)["tie"] and not L.line_point(5.25)["tie"]
    assert L.line_point(5.25)["to"] == 6.0 and L.line_point(7.0) == {**L.line_point(7.0), "to": 6.0,
                                                                       "saturates": True}
    for x in L.LINE_POINTS:   # the value it rounds to is a neighbour, and the nearer one
        p = L.line_point(x)
        other = p["hi"] if p["to"] == p["lo"] else p["lo"]
        assert p["to"] in (p["lo"], p["hi"]) and abs(p["to"] - min(x, 6.0)) <= abs(other - min(x, 6.0))


@pytest.mark.parametrize("amax", [3.0, 6.0, 6.5, 7.0, 7.5, 11.0, 13.0, 0.3])
def test_rule_table_says_saturation_as_quantizing_the_block_finds_it(amax):
    for r in L.rule_table([amax]):
        x = torch.full((1, 32), amax / 64)
        x[0, 0] = amax
        rep = mx_report(x, "e2m1", 32, r.rounding)
        assert (rep.blocks_saturating == 1) == r.saturates, r
        small = torch.zeros(1, 32)
        small[0, 0], small[0, 1] = amax, r.flush_below * 0.99
        assert mx_report(small, "e2m1", 32, r.rounding).flushed == 1 / 32


def test_rule_table_floor_saturates_at_seven_and_rceil_does_not():
    rows = {r.rounding: r for r in L.rule_table([7.0])}
    assert rows["floor"].saturates and rows["ocp"].saturates and not rows["rceil"].saturates
    assert rows["rceil"].flush_below == 2 * rows["floor"].flush_below


def test_e4m3_block_scales_beat_e8m0_ones_on_the_same_blocks():
    t = L.two_levels()
    assert t["nvfp4"] < t["e8m0_16"] <= t["mxfp4"] * 1.01


def test_the_tensor_scale_keeps_small_tensors_alive():
    rows = L.tensor_scale_effect()
    withs = [r["with"] for r in rows]
    assert max(withs) - min(withs) < 1e-6               # scaling the tensor changes nothing with a tensor scale
    tiny = rows[-1]
    assert tiny["factor"] == 1e-6 and tiny["without"] == 1.0 and tiny["zero_without"] == 1.0


def test_2d_weight_blocks_transpose_alike_at_a_cost():
    w = L.weight_2d()
    assert w["16x16"]["transpose_equal"] and w["16x16"]["disagree"] == 0.0
    assert not w["1x16"]["transpose_equal"] and w["1x16"]["disagree"] > 0.5
    assert w["16x16"]["error"] > w["1x16"]["error"]


def test_hadamard_helps_the_offset_gradient_and_not_the_outlier_tokens():
    rows = {r["case"]: r for r in L.hadamard_cases()}
    off, out, gauss = rows["offset"], rows["outlier tokens"], rows["gaussian"]
    assert off["operand_on"] < 0.8 * off["operand_off"] and off["product_on"] < off["product_off"]
    assert off["crest_off"] < 1.5 < off["crest_on"]
    assert out["operand_on"] > 1.3 * out["operand_off"] and out["product_on"] > out["product_off"]
    assert abs(gauss["operand_on"] - gauss["operand_off"]) < 0.05 * gauss["operand_off"]


def test_hadamard_case_operand_error_is_the_rotated_blocks_error():
    dy = L.hadamard_gradient("offset").t().contiguous()
    r = rht(dy)
    q = nvfp4_fake_quantize(r)
    back = (q.reshape(-1, 16) @ rht_matrix().t()).reshape(dy.shape)    # undo the rotation: the same error
    assert math.isclose(L.rel_error(q, r), L.rel_error(back, dy), rel_tol=1e-4)
    with pytest.raises(ValueError, match="'gaussian', 'outlier tokens', 'offset'"):
        L.hadamard_gradient("spiky")


def test_crest_factor_runs_from_one_to_four():
    assert L.crest_factor(torch.ones(2, 16)) == 1.0
    one = torch.zeros(1, 16)
    one[0, 3] = 5.0
    assert L.crest_factor(one) == 4.0


def test_stochastic_rounding_is_unbiased_and_noisier():
    x = torch.linspace(-6, 6, 97)
    s = L.sr_stats(x, draws=64)
    assert s["within_bound"] and s["sr_mean_gap"] < s["rtn_gap"]
    assert s["sr_rms_one_draw"] > s["rtn_rms"]
    with pytest.raises(ValueError):
        L.sr_stats(x, draws=0)


def test_recipe_runs_pair_seeds_and_reject_unknown_names():
    runs = L.recipe_runs(names=("bf16", "nvfp4, last block fp32"), seeds=(0,), steps=2, batch_size=2, last=1)
    assert set(runs) == {"bf16", "nvfp4, last block fp32"} and all(math.isfinite(v[0]) for v in runs.values())
    model, level = L._build("nvfp4, last block fp32", 0)
    kinds = {n: type(m).__name__ for n, m in model.named_modules() if "Linear" in type(m).__name__}
    assert kinds["head"] == "Linear" and kinds["blocks.1.mlp.0"] == "Linear"
    assert kinds["blocks.0.mlp.0"] == "NVFP4Linear" and level == "O0"
    with pytest.raises(ValueError, match="does not have"):
        L.recipe_runs(names=("nvfp4, last block fp32",), seeds=(0,), steps=1, sizes={"n_layers": 1})
    with pytest.raises(ValueError, match="'bf16'"):
        L.recipe_runs(names=("fp2",))
    with pytest.raises(ValueError, match="reference"):
        L.run_summary({"a": [1.0]}, reference="bf16")
