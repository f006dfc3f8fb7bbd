"""ampkit.fp8.delayed: hand-written state walks (history rolls, algorithm, margin, zero / inf / NaN amaxes), TE's fused
kernel written out as an oracle, vectorised = stepped, bad input."""
import math

import pytest
import torch

from ampkit.fp8 import DelayedScaling, current_scales, delayed_scales, quant_report, recipe_formats
from ampkit.lessons.fp8_scaling import flush_per_step, saturation_per_step


def walk(amaxes, **kw):
    """The scale each step casts with when ``amaxes`` are recorded one by one (record, then update)."""
    s, used = DelayedScaling(**kw), []
    for a in amaxes:
        used.append(s.scale)
        s.record(a)
        s.update()
    return used, s


def test_max_over_a_window_of_two_by_hand():
    # e4m3 max 448. Step 0 uses the initial scale 1. After step t the window is the last two amaxes.
    scales, s = walk([4.0, 2.0, 1.0, 1.0, 8.0], fmt="e4m3", history_len=2, algo="max")
    assert scales == [1.0, 448 / 4, 448 / 4, 448 / 2, 448 / 1]
    assert s.scale == 448 / 8
    assert s.history.tolist() == [0.0, 8.0]            # rolled: newest slot zeroed, the last amax behind it


def test_history_layout_is_tes_roll_minus_one():
    # TE: torch.roll(amax_history, -1, 0), then slot 0 zeroed: slots 1..L-1 hold the previous amaxes, oldest first
    _, s = walk([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], fmt="e4m3", history_len=4)
    assert s.history.tolist() == [0.0, 4.0, 5.0, 6.0]


NAN, INF = float("nan"), float("inf")


def assert_walk(rows, **kw):
    """Step through ``rows`` = (amax recorded, scale the step casts with, history after the update, scale after)."""
    s = DelayedScaling(**kw)
    for t, (amax, used, history, after) in enumerate(rows):
        assert s.scale == used, (t, s.scale, used)
        s.record(amax)
        s.update()
        torch.testing.assert_close(s.history, torch.tensor(history), rtol=0, atol=0, equal_nan=True,
                                   msg=f"history after step {t}")
        assert s.scale == after, (t, s.scale, after)


def test_walk_a_step_with_amax_zero_changes_nothing():
    # TE's fused update (kernel_bulk; the zero-amax rule since TE 1.6): amax 0 -> no roll, no new scale.
    # e4m3, history 3, "max".
    # (TE's unfused path would roll at steps 1, 3, 4 and let the 4.0 leave the window two steps earlier.)
    assert_walk([
        # amax  used   history after      scale after
        (4.0,   1.0,   [0.0, 0.0, 4.0],   112.0),
        (0.0,   112.0, [0.0, 0.0, 4.0],   112.0),     # did not run: same history, same scale
        (2.0,   112.0, [0.0, 4.0, 2.0],   112.0),
        (0.0,   112.0, [0.0, 4.0, 2.0],   112.0),
        (0.0,   112.0, [0.0, 4.0, 2.0],   112.0),
        (1.0,   112.0, [0.0, 2.0, 1.0],   112.0),     # window 4, 2, 1: the 4 still counts
        (1.0,   112.0, [0.0, 1.0, 1.0],   224.0),     # window 2, 1, 1
        (1.0,   224.0, [0.0, 1.0, 1.0],   448.0),
        (1.0,   448.0, [0.0, 1.0, 1.0],   448.0),
    ], fmt="e4m3", history_len=3, algo="max")


def test_walk_an_inf_amax_freezes_the_scale_while_it_is_in_the_window():
    assert_walk([
        (2.0,   1.0,   [0.0, 2.0],   224.0),
        (INF,   224.0, [0.0, INF],   224.0),     # window max inf: keep the previous scale
        (1.0,   224.0, [0.0, 1.0],   224.0),     # the inf is still in the window (1, inf)
        (1.0,   224.0, [0.0, 1.0],   448.0),     # gone
        (1.0,   448.0, [0.0, 1.0],   448.0),
    ], fmt="e4m3", history_len=2, algo="max")


def test_walk_nan_is_skipped_by_max_and_keeps_the_scale_for_most_recent():
    assert_walk([
        (2.0,   1.0,   [0.0, 2.0],   224.0),
        (NAN,   224.0, [0.0, NAN],   224.0),     # fmaxf skips the NaN: the window max is the 2
        (1.0,   224.0, [0.0, 1.0],   448.0),
    ], fmt="e4m3", history_len=2, algo="max")
    assert_walk([
        (2.0,   1.0,   [0.0, 0.0, 2.0],   224.0),
        (NAN,   224.0, [0.0, 2.0, NAN],   224.0),     # most recent is NaN: keep
        (INF,   224.0, [0.0, NAN, INF],   224.0),     # most recent is inf: keep
        (0.0,   224.0, [0.0, NAN, INF],   224.0),     # zero: no roll
        (4.0,   224.0, [0.0, INF, 4.0],   112.0),
    ], fmt="e4m3", history_len=3, algo="most_recent")


def test_a_tensor_with_an_inf_records_amax_inf():
    s = DelayedScaling("e4m3", history_len=2)
    s.step(torch.tensor([1.0, 2.0]))
    r = s.step(torch.tensor([1.0, INF]))
    assert r.amax == INF and r.report.nonfinite == 0.5 and s.scale == 224.0
    before = s.history.clone()
    r = s.step(torch.tensor([NAN, NAN]))          # NaN elements are skipped: amax 0, as if the step did not run
    assert r.amax == 0.0 and torch.equal(s.history, before) and s.scale == 224.0


def fmaxf(a, b):
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def te_kernel_bulk(history, scale, algo, scaled_max):
    """Transformer Engine's fused update (delayed_scaling.cu, kernel_bulk) for one tensor, line by line."""
    h, length = list(history), len(history)
    last_amax, amax = h[0], 0.0
    if last_amax != 0.0:
        new = [0.0] * length
        for i in range(length):
            a = h[i + 1] if i < length - 1 else last_amax
            amax = fmaxf(amax, a)
            new[i] = a if i > 0 else 0.0
        h = new
    if algo == "most_recent":
        amax = last_amax
    f32 = lambda v: float(torch.tensor(v, dtype=torch.float32))   # noqa: E731
    new_scale = f32(scaled_max / amax) if math.isfinite(amax) and amax > 0 else scale
    if math.isinf(new_scale):
        new_scale = torch.finfo(torch.float32).max
    return h, new_scale


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("history_len", [1, 2, 5])
def test_stepping_matches_tes_kernel_written_out(algo, history_len):
    g = torch.Generator().manual_seed(history_len)
    amaxes = (torch.rand(40, generator=g) * 8).tolist()
    for i, v in zip(torch.randperm(40, generator=g)[:12].tolist(), [0.0] * 6 + [NAN] * 3 + [INF] * 2 + [1e-45]):
        amaxes[i] = v
    s = DelayedScaling("e4m3", history_len=history_len, algo=algo)
    h, scale = [0.0] * history_len, 1.0
    for a in amaxes:
        a32 = float(torch.tensor(a, dtype=torch.float32))
        s.record(a)
        s.update()
        h, scale = te_kernel_bulk([a32] + h[1:], scale, algo, 448.0)
        assert s.scale == scale
        torch.testing.assert_close(s.history, torch.tensor(h), rtol=0, atol=0, equal_nan=True)


def test_most_recent_ignores_older_amaxes():
    scales, _ = walk([4.0, 2.0, 1.0, 16.0], fmt="e4m3", history_len=3, algo="most_recent")
    assert scales == [1.0, 112.0, 224.0, 448.0]


def test_margin_halves_the_scale_per_step_of_margin():
    a, _ = walk([4.0, 4.0], fmt="e5m2", history_len=1, margin=0)
    b, _ = walk([4.0, 4.0], fmt="e5m2", history_len=1, margin=3)
    assert b[1] == a[1] / 8 == 57344 / 4 / 8


def test_a_spike_saturates_under_delayed_but_not_current_scaling():
    s = DelayedScaling("e4m3", history_len=4)
    for _ in range(3):
        s.step(torch.full((8,), 1.0))
    spike = torch.tensor([1.0] * 7 + [16.0])
    r = s.step(spike)
    assert r.scale == 448.0 and r.report.saturated == 1 / 8     # the stale amax (1.0) clips the 16
    assert current_scales(torch.tensor([16.0]))[0] == 28.0         # just-in-time: 16 maps to 448 exactly


def test_zero_and_nonfinite_amax_keep_the_previous_scale():
    scales, s = walk([2.0, 0.0, float("nan"), 4.0], fmt="e4m3", history_len=1, algo="max")
    assert scales == [1.0, 224.0, 224.0, 224.0]
    assert s.scale == 112.0
    # an inf in the window keeps the previous scale until it leaves the window
    v = delayed_scales(torch.tensor([2.0, float("inf"), 1.0, 1.0]), "e4m3", history_len=2)
    assert v.tolist() == [1.0, 224.0, 224.0, 224.0]
    assert not torch.isnan(delayed_scales(torch.tensor([float("nan")] * 3))).any()
    assert current_scales(torch.tensor([0.0, float("nan"), float("inf")])).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("history_len", [1, 3, 16])
@pytest.mark.parametrize("margin", [0, 2])
def test_vectorised_equals_stepping(algo, history_len, margin):
    g = torch.Generator().manual_seed(history_len + margin)
    amax = torch.rand(60, generator=g) * 10
    amax[[5, 30, 31, 32, 40, 47, 50]] = torch.tensor([200.0, 0.0, 0.0, NAN, INF, 0.0, 1e-45])
    stepped, _ = walk(amax.tolist(), fmt="e4m3", history_len=history_len, algo=algo, margin=margin)
    fast = delayed_scales(amax, "e4m3", history_len, algo, margin)
    assert fast.tolist() == stepped


def test_vectorised_edge_runs():
    assert delayed_scales(torch.zeros(3), history_len=4).tolist() == [1.0, 1.0, 1.0]      # nothing ever ran
    assert delayed_scales([0.0, 0.0, 2.0, 0.0], history_len=1, initial_scale=4.0).tolist() == [4.0, 4.0, 4.0, 224.0]
    assert delayed_scales([2.0, INF, 0.0, 1.0, 1.0, 1.0], history_len=2).tolist() == [1.0, 224.0, 224.0, 224.0,
                                                                                       224.0, 448.0]


def test_per_step_fractions_match_quant_report():
    g = torch.Generator().manual_seed(0)
    vals = (torch.randn(5, 200, generator=g) * torch.tensor([1.0, 10, 100, 0.001, 1]).unsqueeze(1)).abs()
    scales = torch.tensor([1.0, 10.0, 1.0, 1.0, 300.0])
    s = vals.sort(dim=1).values
    sat = saturation_per_step(s, scales, "e4m3")
    flu = flush_per_step(s, scales, 2.0 ** -9)
    for t in range(5):
        r = quant_report(vals[t], float(scales[t]), "e4m3")
        assert abs(float(sat[t]) - r.saturated) < 1e-6 and abs(float(flu[t]) - r.flushed) < 1e-6


def test_per_step_fractions_at_the_exact_thresholds():
    vals = torch.tensor([[463.9, 464.0, 464.1, 1.0], [61439.0, 61440.0, 61441.0, 1.0]]).sort(dim=1).values
    assert saturation_per_step(vals[:1], torch.tensor([1.0]), "e4m3").tolist() == [0.25]    # only 464.1: a tie stays
    assert saturation_per_step(vals[1:], torch.tensor([1.0]), "e5m2").tolist() == [0.5]     # 61440 and 61441
    assert quant_report(vals[0], 1.0, "e4m3").saturated == 0.25
    assert quant_report(vals[1], 1.0, "e5m2").saturated == 0.5


def test_recipes():
    assert recipe_formats("HYBRID") == {"forward": "e4m3", "backward": "e5m2"}
    assert recipe_formats("E4M3")["backward"] == "e4m3"
    with pytest.raises(ValueError, match="HYBRID"):
        recipe_formats("FP8")
    with pytest.raises(TypeError):
        recipe_formats(None)


@pytest.mark.parametrize("kw, exc", [({"history_len": 0}, ValueError), ({"history_len": 2.0}, TypeError),
                                     ({"margin": -1}, ValueError), ({"margin": 1.5}, TypeError),
                                     ({"algo": "mean"}, ValueError), ({"fmt": "e3m4"}, ValueError)])
def test_bad_input(kw, exc):
    with pytest.raises(exc):
        DelayedScaling(**kw)
    with pytest.raises(exc):
        delayed_scales(torch.ones(3), **kw)


@pytest.mark.parametrize("bad, exc", [(NAN, ValueError), (0.0, ValueError), (-1.0, ValueError), (1e39, ValueError),
                                      ("1.0", TypeError), (None, TypeError)])
def test_bad_initial_scale_names_initial_scale(bad, exc):
    with pytest.raises(exc, match="initial_scale must be a positive finite fp32 number"):
        DelayedScaling(initial_scale=bad)
    with pytest.raises(exc, match="initial_scale"):
        delayed_scales(torch.ones(3), initial_scale=bad)


@pytest.mark.parametrize("bad, exc, words", [(torch.tensor([]), ValueError, "got none"),
                                             ([], ValueError, "got none"),
                                             (torch.ones(2, 3), ValueError, "shape"),
                                             ([1.0, -2.0], ValueError, "negative"),
                                             ("abc", TypeError, "got str"),
                                             (torch.tensor([True]), TypeError, "bool")])
def test_bad_amaxes_name_what_is_valid(bad, exc, words):
    for fn in (lambda a: delayed_scales(a, history_len=4), current_scales):
        with pytest.raises(exc, match=f"one amax per step.*{words}"):
            fn(bad)


def test_bad_recorded_amax():
    s = DelayedScaling()
    with pytest.raises(ValueError, match=">= 0, inf or NaN"):
        s.record(-1.0)
    with pytest.raises(TypeError, match=">= 0, inf or NaN"):
        s.record("big")
    with pytest.raises(ValueError, match="one element"):
        s.record(torch.ones(2))
