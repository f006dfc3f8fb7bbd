"""Headless tests of notebook 03's ScalerReplay (ampkit/widgets/replay.py, drawn by js/replay.js): what the engine
sends the page — the initial setting and every setting one control away, every preset from every start, and the
kernel's one replay of any other setting — decodes to exactly what ampkit.scaling computes, on random settings."""
from __future__ import annotations

import json
import math
import random

import pytest
import traitlets

from ampkit.scaling import replay
from ampkit.scaling.presets import PRESETS, replay_presets
from ampkit.widgets import ScalerReplay
from ampkit.widgets.replay import GRID, PRESET_STYLES, nearest_computed, preset_line, replay_line

NAMES = tuple(GRID)
GMAX = [1e-6 * (1 + 0.5 * ((i * 7) % 5)) for i in range(120)]


def runs(text: str) -> list[float]:
    """replay.js's parseRuns, written again here to check it: the drawn log2 value of each step."""
    out: list[float] = []
    for token in text.split(" ") if text else []:
        y, _, n = token.partition("*")
        out += [float(y)] * int(n or 1)
    return out


def steps(text: str) -> list[int]:
    out: list[int] = []
    for token in text.split(" ") if text else []:
        a, _, b = token.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def drawn(s: float) -> float:
    """Where the page draws a scale: log2 (0 at the axis' bottom, -2; inf at its top, 64), to 1/1000 octave."""
    y = math.log2(s) if 0 < s < math.inf else (-2.0 if s <= 0 else 64.0)
    return float(y) if y.is_integer() else round(y, 3)


def check_line(line: str, r) -> None:
    """A main replay's line decodes to the engine's replay ``r``."""
    traj, skipped, n, final = line.split(";")
    assert runs(traj) == [drawn(s) for s in r.scales]
    assert steps(skipped) == [i for i, o in enumerate(r.overflow) if o]
    assert n == str(r.skipped) and final == ("0" if r.final_scale == 0 else f"{math.log2(r.final_scale):.1f}")


def check_preset_line(line: str, r) -> None:
    traj, skipped, applied, stop, final, n, m = line.split(";")
    assert runs(traj) == [drawn(s) for s in r.scales]
    assert steps(skipped) == [i for i, (o, a) in enumerate(zip(r.overflow, r.applied)) if o and not a]
    assert steps(applied) == [i for i, (o, a) in enumerate(zip(r.overflow, r.applied)) if o and a]
    assert stop == ("-" if r.stopped_at is None else str(r.stopped_at))
    assert final == ("0" if r.final_scale == 0 else "inf" if math.isinf(r.final_scale)
                     else f"{math.log2(r.final_scale):g}")
    assert (n, m) == (str(r.skipped), str(r.applied_overflow))


def engine(gmax, setting):
    i, g, b, h = setting
    return replay(gmax, "fp16", init_scale=2.0 ** i, growth_interval=g, backoff_factor=b, hysteresis=h)


def sent_line(rp: ScalerReplay, setting) -> str | None:
    """The line the page selects for ``setting`` from what was sent (None: not sent — the kernel computes it)."""
    origin = rp.origin
    moved = [i for i in range(4) if setting[i] != origin[i]]
    if len(moved) > 1:
        return None
    i = moved[0] if moved else 0
    pos = [float(v) for v in rp.grid[NAMES[i]].split()].index(setting[i])
    return rp.lines[int(rp.axes[NAMES[i]].split()[pos])]


@pytest.fixture(scope="module")
def view() -> ScalerReplay:
    return ScalerReplay(GMAX, init_log2=16, growth_interval=5)


def test_every_setting_one_control_away_is_sent_as_the_engine_replays_it(view):
    assert view.origin == [16, 5, 0.5, 1]
    count = 0
    for i, name in enumerate(NAMES):
        assert [float(v) for v in view.grid[name].split()] == [float(v) for v in GRID[name]]
        for v in GRID[name]:
            setting = [v if j == i else view.origin[j] for j in range(4)]
            check_line(sent_line(view, setting), engine(GMAX, setting))
            count += 1
    assert count == 49 + 500 + 17 + 8
    assert len(set(view.lines)) == len(view.lines)                         # each replay sent once


def test_every_preset_from_every_start_is_sent(view):
    starts = [None, *GRID["init"]]
    for name in PRESETS:
        index = [int(k) for k in view.preset_index[name].split()]
        assert len(index) == len(starts)
        for k, at in zip(starts, index):
            check_preset_line(view.lines[at], replay_presets([name], GMAX, "fp16", log2_init=k)[name])


def test_random_settings_equal_the_engine_and_the_kernel_sends_only_the_missing_one(view):
    rng = random.Random(30)
    for _ in range(150):
        setting = [rng.choice(GRID[n]) for n in NAMES]
        if rng.random() < 0.3:                                   # one control away: nothing is sent
            setting = list(view.origin)
            i = rng.randrange(4)
            setting[i] = rng.choice(GRID[NAMES[i]])
        before = view.current
        view.setting = setting
        ref = engine(GMAX, setting)
        assert view.state == ref
        line = sent_line(view, setting)
        if line is None:
            key, _, line = view.current.partition("|")
            assert key == f"{setting[0]} {setting[1]} {float(setting[2])!r} {setting[3]}"
            assert len(view.current.encode()) <= 2048                # bytes per move
        else:
            assert view.current == before
        check_line(line, ref)
        assert replay_line(ref) == line
    view.setting = view.origin


def test_nearest_computed_setting_is_one_control_away():
    rng = random.Random(4)
    origin = (16, 5, 0.5, 1)
    for _ in range(300):
        setting = tuple(rng.choice(GRID[n]) for n in NAMES)
        near = nearest_computed(setting, origin)
        moved = [i for i in range(4) if near[i] != origin[i]]
        assert len(moved) <= 1 and all(near[i] == setting[i] for i in moved)
    assert nearest_computed(origin, origin) == origin
    assert nearest_computed((16, 7, 0.5, 1), origin) == (16, 7, 0.5, 1)


def test_controls_keep_their_value_api_and_refuse_bad_input():
    rp = ScalerReplay(GMAX, growth_interval=5)
    assert (rp.init.value, rp.interval.value, rp.backoff.value, rp.hysteresis.value) == (16, 5, 0.5, 1)
    assert (rp.init.min, rp.init.max, rp.interval.max, rp.hysteresis.max) == (0, 48, 500, 8)
    rp.backoff.value = 0.52                                          # the slider's step: 0.05
    assert rp.backoff.value == 0.5
    rp.hysteresis.value = 3
    assert rp.setting == [16, 5, 0.5, 3] and rp.state == engine(GMAX, (16, 5, 0.5, 3))
    with pytest.raises(traitlets.TraitError, match=r"init must be in \[0, 48\]"):
        rp.init.value = 60
    with pytest.raises(traitlets.TraitError, match=r"backoff must be in \[0.1, 0.9\]"):
        rp.backoff.value = 0.95
    with pytest.raises(traitlets.TraitError, match="the presets are: torch, apex"):
        rp.presets.value = ("torch", "nope")
    with pytest.raises(ValueError, match=r"interval must be in \[1, 500\]"):
        ScalerReplay(GMAX, growth_interval=2000)
    with pytest.raises(ValueError, match="one gradient magnitude per step"):
        ScalerReplay([])
    with pytest.raises(ValueError, match="finite"):
        replay([1.0, float("nan")])


def test_replay_overflows_exactly_at_the_fp16_limit():
    # grad max 2**-20: scale * g overflows fp16 once scale >= 65520 * 2**20 ~ 2**36
    rp = ScalerReplay([2.0**-20] * 60, init_log2=30, growth_interval=1)
    r = rp.state
    assert [s for s, o in zip(r.scales, r.overflow) if o][0] == 2.0**36
    assert all((s * 2.0**-20 >= 65520) == o for s, o in zip(r.scales, r.overflow))
    rp.hysteresis.value = 3
    assert rp.state.skipped > r.skipped            # with hysteresis the scale lingers above the limit longer
    assert "<b class='ampkit-skipped'>" in rp.readout_html


def test_presets_overlay_each_selected_rule():
    rp = ScalerReplay(GMAX, growth_interval=5)
    assert rp.preset_states == {} and "no framework preset selected" in rp.presets_html
    rp.presets.value = ("deepspeed", "torch", "mindspore")            # shown in the presets' order
    assert rp.shown == ["torch", "mindspore", "deepspeed"]
    for at_init in (False, True):
        rp.start_at_init.value = at_init
        for k in (10, 30, 40):
            rp.init.value = k
            ref = replay_presets(["torch", "mindspore", "deepspeed"], GMAX, "fp16", log2_init=k if at_init else None)
            assert rp.preset_states == ref
            for n in ref:
                assert f"<b>{n}</b>" in rp.presets_html
    assert rp.preset_states["torch"].skipped > 0                     # from 2**40 torch skips its way down
    styles = list(PRESET_STYLES.values())
    assert len(set(styles)) == len(PRESETS) and len({c for c, _, _ in styles}) == len(PRESETS)   # distinguishable
    assert [p["name"] for p in rp.preset_info] == list(PRESETS)


def test_applied_overflow_and_a_stopped_run_are_told_apart():
    rp = ScalerReplay([2.0**-20] * 40, presets=("mindspore-fixed", "mindspore-fixed-apply"),
                      presets_start_at_init=True, init_log2=40)
    assert rp.preset_states["mindspore-fixed-apply"].applied_overflow == 40
    assert rp.preset_states["mindspore-fixed"].skipped == 40
    assert "overflow APPLIED <span class='ampkit-preset-applied'>40</span>" in rp.presets_html
    ds = ScalerReplay([2.0**17] * 40, presets=("deepspeed",))        # overflows fp16 at any scale >= 1
    r = ds.preset_states["deepspeed"]
    assert r.stopped_at == 17 and r.final_scale == 1.0 and "run stopped at step" in ds.presets_html
    assert preset_line(r).split(";")[3] == "17"


def test_state_is_small_and_the_still_picture_is_a_png(view):
    state = {k: v for k, v in view.get_state().items() if k != "_esm"}
    assert len(json.dumps(state)) < 80_000                           # far below a view's 200 KB, module aside
    still = view.still()
    assert still.children[-1].value[:4] == b"\x89PNG"
    assert set(view.words()) >= {"uncomputed", "skipped", "final", "facts", "xlabel", "ylabel", "title"}
