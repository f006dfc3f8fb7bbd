"""ampkit.scaling.presets / framework_rules: every framework's rule walked step by step as its source reads, checked
against literal transliterations of that source on random streams; the preset factory's errors; the generated table.

Each state walk lists, per step, the scale AFTER that step's update, worked out by hand from the framework's code
(the source is named above each walk; see also docs/reference.md)."""
from __future__ import annotations

import dataclasses
import math
import random

import pytest
import torch

from ampkit.scaling.framework_rules import JmpDynamicLossScale, RunStopped
from ampkit.scaling.presets import (
    PRESETS,
    defaults_table,
    describe,
    preset,
    preset_arguments,
    preset_names,
    replay_presets,
)
from ampkit.scaling.replays import replay_flags


def after_each(rule, flags: str) -> list[float]:
    """The rule's scale after each step's update."""
    out = []
    for c in flags:
        rule.update(c == "o")
        out.append(rule.scale)
    return out


def random_flags(seed: int, n: int = 300, p: float = 0.25) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


# --- state walks, one per framework ---------------------------------------------------------------------------
WALKS = [
    # torch/amp/grad_scaler.py (_amp_update_scale_): x2 after growth_interval clean steps, x0.5 on overflow
    ("torch", {"init_scale": 4.0, "growth_interval": 2}, "..oo.", [4, 8, 4, 2, 2]),
    ("torch", {"init_scale": 1.0}, "oo", [0.5, 0.25]),                                   # no floor
    # apex/amp/scaler.py update_scale: /2 on overflow (min optional), x2 after scale_window, capped at max
    ("apex", {"init_scale": 2.0**16, "scale_window": 2, "max_loss_scale": 2.0**17}, "....oo",
     [2**16, 2**17, 2**17, 2**17, 2**16, 2**15]),
    ("apex", {"init_scale": 2.0**16, "min_loss_scale": 2.0**15}, "oooo", [2**15] * 4),
    ("apex", {"init_scale": 2.0**30}, "", []),                                            # starts at min(max, init)
    # paddle/amp/grad_scaler.py AmpScaler._update: decr_count reset by a clean step and after a decrease
    ("paddle", {"init_loss_scaling": 8.0, "incr_every_n_steps": 2, "decr_every_n_nan_or_inf": 2}, "o.oo..o",
     [8, 8, 8, 4, 4, 8, 8]),
    ("paddle", {"init_loss_scaling": 8.0, "decr_every_n_nan_or_inf": 2}, "oooo", [8, 4, 4, 2]),
    ("paddle", {"init_loss_scaling": 1.0}, "oo", [0.5, 0.25]),                            # no floor
    ("paddle-tutorial", {}, "o", [512]),
    ("paddle-2.2", {"incr_every_n_steps": 1}, "o.o", [2**15, 2**16, 2**16]),             # N=2: one overflow waits
    # mindspore DynamicLossScaleUpdateCell: grow after scale_window steps since the last overflow or growth
    ("mindspore", {"init_loss_scale": 4, "scale_window": 2}, "..o..", [4, 8, 4, 4, 8]),
    ("mindspore", {"init_loss_scale": 2}, "ooo", [1, 1, 1]),                              # floor 1
    ("mindspore-fixed", {"loss_scale": 2.0**10}, ".o.o", [2**10] * 4),
    # mindspore/amp.py DynamicLossScaler.adjust: counter, grow when counter == window - 1, floor 1
    ("mindspore-amp", {"scale_value": 4, "scale_window": 2}, "..o..", [4, 8, 4, 4, 8]),
    ("mindspore-amp", {"scale_value": 2, "scale_window": 1}, "ooo", [1, 1, 1]),
    ("mindspore-amp", {"scale_value": 1, "scale_window": 1}, "o.", [1, 2]),            # 1 is the least it takes
    # keras/src/optimizers/loss_scale_optimizer.py: counter == growth_steps - 1 -> x2; non-finite -> /2, no floor
    ("keras", {"initial_scale": 4.0, "dynamic_growth_steps": 2}, "..oooo", [4, 8, 4, 2, 1, 0.5]),
    # tf.keras 2 _DynamicLossScaleState.update: maximum(scale / 2, 1)
    ("tf-keras2", {"initial_scale": 4.0, "dynamic_growth_steps": 2}, "..oooo", [4, 8, 4, 2, 1, 1]),
    # jmp/_src/loss_scale.py DynamicLossScale.adjust: counter == period - 1 -> x factor; max(min, scale / factor)
    ("jmp", {"loss_scale": 4.0, "period": 2}, "..oooo", [4, 8, 4, 2, 1, 1]),
    ("jmp", {"loss_scale": 1.0, "min_loss_scale": 0.25}, "ooo", [0.5, 0.25, 0.25]),      # op by op: the floor holds
    # ... under jax.jit: the state comes back without min_loss_scale, so the floor is 1 whatever was given
    ("jmp-jit", {"loss_scale": 4.0, "period": 2}, "..oooo", [4, 8, 4, 2, 1, 1]),
    ("jmp-jit", {"loss_scale": 1.0, "min_loss_scale": 0.25}, "ooo", [1, 1, 1]),
    ("jmp-jit", {"loss_scale": 4.0, "min_loss_scale": 16.0}, "oo", [2, 1]),           # not raised to 16 either
    # deepspeed/runtime/fp16/loss_scaler.py update_scale (master): hysteresis refilled only on growth by default
    ("deepspeed", {"initial_scale_power": 2, "loss_scale_window": 2}, "o.o...o", [4, 4, 2, 2, 2, 4, 4]),
    ("deepspeed", {"initial_scale_power": 4}, "oooo", [16, 8, 4, 2]),
    # precision_config.py (v0.19.5) DeepSpeedFP16Config, pydantic lax int: min_loss_scale 16.0 / "16" is 16
    ("deepspeed", {"initial_scale_power": 6, "hysteresis": 1, "min_loss_scale": 16.0}, "oo..", [32, 16, 16, 16]),
    ("deepspeed", {"initial_scale_power": "6", "hysteresis": "1", "min_loss_scale": "16"}, "oo", [32, 16]),
    # ... and on every clean step with consecutive_hysteresis=True
    ("deepspeed-consecutive", {"initial_scale_power": 2, "loss_scale_window": 2}, "o.o...o", [4, 4, 4, 4, 4, 8, 8]),
]


@pytest.mark.parametrize("name,kwargs,flags,expected", WALKS, ids=[f"{w[0]}-{i}" for i, w in enumerate(WALKS)])
def test_state_walk(name, kwargs, flags, expected):
    assert after_each(preset(name, **kwargs), flags) == [float(e) for e in expected]


def test_every_preset_has_a_state_walk():
    assert {w[0] for w in WALKS} >= set(PRESETS) - {"mindspore-fixed-apply"}


def test_apex_start_is_capped():
    assert preset("apex", init_scale=2.0**30).scale == 2.0**24


def test_mindspore_fixed_apply_applies_overflowing_updates():
    r = replay_flags(preset("mindspore-fixed-apply"), ".oo.")
    assert r.applied == [True] * 4 and r.applied_overflow == 2 and r.skipped == 0
    s = replay_flags(preset("mindspore-fixed"), ".oo.")
    assert s.applied == [True, False, False, True] and s.applied_overflow == 0


def test_deepspeed_stops_the_run_at_its_minimum():
    rule = preset("deepspeed", initial_scale_power=1, hysteresis=1)
    rule.update(True)
    assert rule.scale == 1.0
    with pytest.raises(RunStopped, match="minimum"):
        rule.update(True)
    r = replay_flags(preset("deepspeed", initial_scale_power=1, hysteresis=1), "ooo.")
    assert r.stopped_at == 1 and r.scales == [2.0, 1.0] and r.final_scale == 1.0


def test_jmp_adjust_is_immutable():
    s = JmpDynamicLossScale(8.0, period=2, min_loss_scale=0.5)
    t, u = s.adjust(True), s.jit_adjust(True)
    assert (s.loss_scale, s.counter) == (8.0, 0) and (t.loss_scale, t.counter) == (u.loss_scale, u.counter) == (8.0, 1)
    assert (s.min_loss_scale, t.min_loss_scale, u.min_loss_scale) == (0.5, 0.5, 1.0)   # jit: back to the default
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.loss_scale = 4.0   # type: ignore[misc]


def test_jmp_presets_name_their_mode():
    """The two jmp presets take the same arguments and say which mode each models (notebook 03's table)."""
    assert preset_arguments("jmp") == preset_arguments("jmp-jit")
    assert "op by op" in PRESETS["jmp"].framework and "jax.jit" in PRESETS["jmp-jit"].framework
    rows = {r["preset"]: r for r in defaults_table(["jmp", "jmp-jit"])}
    assert "floor 1" in rows["jmp-jit"]["notes"] and "float32(1/factor)" in rows["jmp-jit"]["notes"]
    assert describe(lambda: preset("jmp", loss_scale=4.0, min_loss_scale=0.25)).floor == 0.25
    assert describe(lambda: preset("jmp-jit", loss_scale=4.0, min_loss_scale=0.25)).floor == 1.0


def test_keras3_has_no_floor_tf_keras2_has():
    k3 = replay_flags(preset("keras", initial_scale=2.0), "o" * 6)
    k2 = replay_flags(preset("tf-keras2", initial_scale=2.0), "o" * 6)
    assert k3.final_scale == 2.0**-5 and k2.final_scale == 1.0


# --- the rules against their sources, bit for bit on random streams: tests/test_scaling_presets_float32.py -------
def test_jmp_and_mindspore_functional_agree_with_tf_keras2_when_factor_2():
    # the three have the same counter rule and floor 1 with factor 2 (their sources: adjust / update)
    for seed in range(3):
        flags = "".join("o" if f else "." for f in random_flags(seed, 200))
        a = after_each(preset("jmp", loss_scale=64.0, period=3), flags)
        a_jit = after_each(preset("jmp-jit", loss_scale=64.0, period=3), flags)
        b = after_each(preset("mindspore-amp", scale_value=64.0, scale_window=3), flags)
        c = after_each(preset("tf-keras2", initial_scale=64.0, dynamic_growth_steps=3), flags)
        assert a == a_jit == b == c


# --- the factory ----------------------------------------------------------------------------------------------
def test_unknown_preset_lists_the_presets():
    with pytest.raises(ValueError) as e:
        preset("pytorch")
    assert all(n in str(e.value) for n in PRESETS)
    with pytest.raises(TypeError, match="string"):
        preset(3)   # type: ignore[arg-type]


def test_foreign_argument_names_the_frameworks_arguments():
    with pytest.raises(TypeError, match=r"Paddle GradScaler has no argument 'growth_interval'.*incr_every_n_steps"):
        preset("paddle", growth_interval=10)
    with pytest.raises(TypeError, match=r"DeepSpeed.*'init_scale'.*initial_scale_power, loss_scale_window"):
        preset("deepspeed", init_scale=2.0**16)
    with pytest.raises(TypeError, match="dynamic_growth_steps"):
        preset("keras", min_loss_scale=1.0)


@pytest.mark.parametrize("make,err,match", [
    (lambda: preset("paddle", decr_ratio=2.0), ValueError, "< 1"),
    (lambda: preset("paddle", incr_every_n_steps=0), ValueError, "int >= 1"),
    (lambda: preset("deepspeed", consecutive_hysteresis="maybe"), ValueError, "True or False"),   # "yes" is True
    (lambda: preset("jmp", loss_scale=-1.0), ValueError, "positive"),
    (lambda: preset("mindspore-amp", scale_factor=0), ValueError, "int >= 1"),
])
def test_bad_preset_values(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_presets_are_fresh_and_start_where_asked():
    a, b = preset("torch"), preset("torch")
    a.update(True)
    assert b.scale == 2.0**16 != a.scale
    for name, p in PRESETS.items():
        assert p.make(**p.with_log2_init(5)).scale == 32.0, name
    assert preset_arguments("deepspeed")["initial_scale_power"] == 16
    assert preset_names() == list(PRESETS)


def test_replay_presets_uses_each_rule():
    gm = [2.0**-20] * 40
    r = replay_presets(["torch", "mindspore", "mindspore-fixed-apply"], gm, log2_init=40)
    assert r["torch"].scales[:5] == [2.0**40, 2.0**39, 2.0**38, 2.0**37, 2.0**36]
    assert r["mindspore-fixed-apply"].applied_overflow == 40 and r["mindspore-fixed-apply"].skipped == 0
    assert replay_presets(["mindspore"], gm)["mindspore"].scales[0] == 2.0**24


# --- the table is measured from the presets -------------------------------------------------------------------
def test_table_is_generated_from_the_presets():
    rows = {r["preset"]: r for r in defaults_table()}
    assert set(rows) == set(PRESETS)
    for name, row in rows.items():
        assert row["initial scale"] == f"2^{int(math.log2(preset(name).scale))}"
    # change a preset's defaults -> its row changes (nothing typed)
    p = dataclasses.replace(PRESETS["keras"], fixed={"initial_scale": 2.0**9, "dynamic_growth_steps": 7})
    d = describe(p.make)
    assert (d.init, d.growth_after, d.floor) == (2.0**9, 7, None)


def test_table_rows_say_what_each_framework_does():
    rows = {r["preset"]: r for r in defaults_table()}
    t = torch.amp.GradScaler("cpu")
    assert rows["torch"]["growth"] == f"x{t.get_growth_factor():g} after {t.get_growth_interval()} clean steps"
    assert rows["torch"]["backoff"] == f"x{t.get_backoff_factor():g}" and rows["torch"]["floor / ceiling"] == "no floor"
    assert rows["apex"]["floor / ceiling"] == "no floor / ceiling 2^24"
    assert rows["mindspore"]["initial scale"] == "2^24" and rows["mindspore"]["floor / ceiling"] == "floor 1"
    assert rows["keras"]["floor / ceiling"] == "no floor" and rows["tf-keras2"]["floor / ceiling"] == "floor 1"
    assert rows["deepspeed"]["hysteresis"] == "2, refilled only on growth"
    assert rows["deepspeed-consecutive"]["hysteresis"] == "2 overflows in a row"
    assert rows["deepspeed"]["growth"] == "x2 after 1001 clean steps, then every 1000"
    assert rows["deepspeed"]["floor / ceiling"] == "floor 1 (run stops)"
    assert rows["paddle-2.2"]["hysteresis"] == "2 overflows in a row"
    assert rows["mindspore-fixed-apply"]["overflow step"] == "APPLIED"
    assert rows["mindspore-fixed"]["growth"] == "never" and rows["mindspore-fixed"]["floor / ceiling"] == "constant"
