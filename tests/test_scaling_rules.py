"""ampkit.scaling.rules / .replays / .legacy: torch's rule against torch itself, MindSpore's rules against literal
transliterations of MindSpore's source, the replays, the legacy-spelling probe and the one-step gradient comparison."""
from __future__ import annotations

import math
import random
import warnings

import pytest
import torch

from ampkit.lessons.loss_scaling import gradient_agreement, underflow_task
from ampkit.scaling import (
    MindSporeDynamicRule,
    MindSporeFixedRule,
    TorchGradScalerRule,
    legacy_amp_spellings,
    parse_flags,
    replay_flags,
    replay_grad_max,
)


def random_flags(seed: int, n: int = 200, p: float = 0.3) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


def torch_scales(flags, **kw) -> list[float]:
    """The scales of a real torch.amp.GradScaler fed a gradient that is inf exactly where flags say."""
    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.0)
    scaler = torch.amp.GradScaler("cpu", **kw)
    out = []
    for bad in flags:
        out.append(scaler.get_scale())
        opt.zero_grad(set_to_none=True)
        c = torch.tensor([float("inf") if bad else 1.0, 1.0])
        scaler.scale((p * c).sum()).backward()
        scaler.step(opt)
        scaler.update()
    return out


# --- torch ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_torch_rule_matches_torch_gradscaler(seed):
    flags = random_flags(seed, n=80, p=0.25)
    kw = {"init_scale": 2.0 ** (seed * 3), "growth_interval": 1 + seed % 4}
    r = replay_flags(TorchGradScalerRule(**kw), flags)
    assert r.scales == torch_scales(flags, **kw)
    assert r.skipped == sum(flags) and r.applied_overflow == 0


def test_torch_rule_has_no_floor():
    assert replay_flags(TorchGradScalerRule(init_scale=4.0), "oooooo").final_scale == 2.0**-4


# --- MindSpore dynamic ---------------------------------------------------------------------------------------
def mindspore_manager_update(scales_out, flags, init=2**24, factor=2, window=2000):
    """Literal transliteration of DynamicLossScaleManager.update_loss_scale (loss_scale_manager.py)."""
    loss_scale, cur_iter, last_overflow_iter = init, 1, 0
    for overflow in flags:
        scales_out.append(float(loss_scale))
        if overflow:
            loss_scale = max(loss_scale * (1 / factor), 1)
            last_overflow_iter = cur_iter
        else:
            if (cur_iter - last_overflow_iter) % window == 0:
                loss_scale *= factor
        cur_iter += 1
    return float(loss_scale)


def mindspore_functional_adjust(flags, scale, factor, window):
    """Literal transliteration of mindspore.amp.DynamicLossScaler.adjust (amp.py): a counter instead of iters."""
    out, counter = [], 0
    for overflow in flags:
        out.append(float(scale))
        finite = not overflow
        if finite:
            if counter == window - 1 and math.isfinite(scale * factor):
                scale = scale * factor
        else:
            scale = max(1.0, scale / factor)
        counter = ((counter + 1) % window) * int(finite)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_mindspore_rule_matches_its_manager_and_functional_scaler(seed):
    flags = random_flags(seed, n=150, p=0.2 + 0.1 * (seed % 3))
    window = 1 + seed % 5
    init = 2.0 ** (seed % 6)
    rule = replay_flags(MindSporeDynamicRule(init_loss_scale=init, scale_window=window), flags)
    manager: list[float] = []
    final = mindspore_manager_update(manager, flags, init=init, window=window)
    assert rule.scales == manager and rule.final_scale == final
    assert rule.scales == mindspore_functional_adjust(flags, init, 2, window)
    assert min(rule.scales) >= 1.0 and rule.skipped == sum(flags)


@pytest.mark.parametrize("seed", range(4))
def test_mindspore_equals_torch_while_above_one(seed):
    flags = random_flags(seed, n=120, p=0.2)
    kw_t = {"init_scale": 2.0**40, "growth_interval": 3}
    t = replay_flags(TorchGradScalerRule(**kw_t), flags)
    m = replay_flags(MindSporeDynamicRule(init_loss_scale=2.0**40, scale_window=3), flags)
    assert min(t.scales) >= 1 and t.scales == m.scales


def test_mindspore_defaults_and_floor():
    r = MindSporeDynamicRule()
    assert (r.scale, r.scale_factor, r.scale_window, r.drops_overflow) == (2.0**24, 2.0, 2000, True)
    rep = replay_flags(MindSporeDynamicRule(init_loss_scale=4, scale_window=2), "oooo..")
    assert rep.scales == [4.0, 2.0, 1.0, 1.0, 1.0, 1.0] and rep.final_scale == 2.0


def test_mindspore_fixed_rule():
    f = MindSporeFixedRule()
    assert (f.scale, f.drops_overflow) == (128.0, True)
    dropped = replay_flags(MindSporeFixedRule(), ".oo.")
    applied = replay_flags(MindSporeFixedRule(1024.0, drop_overflow_update=False), ".oo.")
    assert dropped.applied == [True, False, False, True] and dropped.applied_overflow == 0
    assert applied.applied == [True] * 4 and applied.applied_overflow == 2 and applied.skipped == 0
    assert set(applied.scales) == {1024.0} == {applied.final_scale}


@pytest.mark.parametrize("make,err,match", [
    (lambda: MindSporeDynamicRule(init_loss_scale=0.5), ValueError, ">= 1"),
    (lambda: MindSporeDynamicRule(scale_window=0), ValueError, "int >= 1"),
    (lambda: MindSporeDynamicRule(scale_factor=1), ValueError, "> 1"),
    (lambda: MindSporeDynamicRule(init_loss_scale="big"), TypeError, "number"),
    (lambda: MindSporeFixedRule(loss_scale=0.25), ValueError, ">= 1"),
    (lambda: MindSporeFixedRule(drop_overflow_update="no"), TypeError, "True or False"),
    (lambda: TorchGradScalerRule(init_scale=-1.0), ValueError, "positive"),
])
def test_bad_settings(make, err, match):
    with pytest.raises(err, match=match):
        make()


# --- replays -------------------------------------------------------------------------------------------------
def test_parse_flags():
    assert parse_flags(".o.") == [False, True, False] == parse_flags([0, 1, 0])
    with pytest.raises(ValueError, match="'.'"):
        parse_flags("..x")
    with pytest.raises(TypeError, match="iterable of bools"):
        parse_flags([0.5])


def test_replay_rejects_non_rules():
    with pytest.raises(TypeError, match="TorchGradScalerRule"):
        replay_flags(object(), "..")


def test_replay_grad_max_overflows_exactly_at_fp16_threshold():
    # fp16 rounds 65520 (and above) to inf; just below stays finite
    r = replay_grad_max(MindSporeFixedRule(2.0**10, drop_overflow_update=False), [65520 / 1024, 65519 / 1024])
    assert r.overflow == [True, False] and r.applied_overflow == 1
    t = replay_grad_max(TorchGradScalerRule(init_scale=2.0**20, growth_interval=1), [2.0**-4] * 6, "fp16")
    assert t.overflow[0] and not t.overflow[1] and t.skipped >= 2
    with pytest.raises(ValueError, match="finite"):
        replay_grad_max(TorchGradScalerRule(), [float("nan")])


# --- legacy spellings ----------------------------------------------------------------------------------------
def test_legacy_spellings_warn_and_leave_filters_alone():
    before = list(warnings.filters)
    calls = legacy_amp_spellings()
    assert warnings.filters == before
    assert [c.spelling for c in calls] == ["torch.cuda.amp.autocast()", "torch.cuda.amp.GradScaler()",
                                          "torch.cpu.amp.autocast()", "torch.cpu.amp.GradScaler()"]
    for c in calls:
        assert c.category in ("FutureWarning", "DeprecationWarning"), c
        assert "deprecated" in c.message and "torch.amp" in c.message and "torch.amp" in c.replacement
        if c.spelling.startswith("torch.cuda"):
            assert c.enabled == torch.cuda.is_available()
            if not torch.cuda.is_available():
                assert any("CUDA" in w for w in c.other_warnings)
        else:
            assert c.enabled


# --- one step's gradient -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def task():
    return underflow_task()


def test_gradient_agreement(task):
    none = gradient_agreement(task, 0)
    assert none.zero_fraction == 1.0 and math.isnan(none.cosine) and none.norm_ratio == 0.0
    small = gradient_agreement(task, 2)
    good = gradient_agreement(task, 16)
    assert small.cosine < 0.5 and small.norm_ratio > 1.2          # partial underflow: longer, elsewhere
    assert good.cosine > 0.999 and abs(good.norm_ratio - 1) < 0.01 and good.zero_fraction < small.zero_fraction
    assert gradient_agreement(task, 0, "bf16").cosine > 0.99       # bf16 needs no scale


def test_gradient_agreement_bad_input(task):
    with pytest.raises(TypeError, match="int"):
        gradient_agreement(task, 2.5)
    with pytest.raises(ValueError, match="fp16 or bf16"):
        gradient_agreement(task, 4, "fp32")


def test_scaler_defaults_table_agrees_with_the_mindspore_rule():
    from ampkit.scaling import defaults_table

    table = defaults_table()
    row = next(r for r in table if r["preset"] == "mindspore")
    rule = MindSporeDynamicRule()
    assert row["system"].startswith("MindSpore DynamicLossScaleManager")
    assert row["initial scale"] == f"2^{int(math.log2(rule.scale))}"
    assert row["growth"] == f"x{rule.scale_factor:g} after {rule.scale_window} clean steps"
    assert row["floor / ceiling"] == "floor 1" and row["overflow step"] == "skipped"
    fixed = next(r for r in table if r["preset"] == "mindspore-fixed-apply")
    assert "drop_overflow_update=False" in fixed["system"] and fixed["overflow step"] == "APPLIED"
