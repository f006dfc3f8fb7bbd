"""The scalers that never skip (NoLossScaler, StaticLossScaler(skip_nonfinite=False)) with optimizers that unscale
and skip by themselves (fused SGD/Adam, ``_step_supports_amp_scaling``), and state_dict() in the middle of a step.

NoLossScaler is "plain training with a scaler's calls": with a fused optimizer it must step exactly as a disabled
``torch.amp.GradScaler`` does (a plain ``optimizer.step()``), while still recording inf/NaN in its history.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from test_gradscaler_dropin import (
    INF,
    SCALERS,
    ReadsScaleAndFoundInf,
    TakesTheScaler,
    assert_same_bits,
    on_both,
    params,
    two_layer_case,
)
from torch import nn

from ampkit.scaling import NoLossScaler, StaticLossScaler

FUSED = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, fused=True),
         "adam": lambda ps: torch.optim.Adam(ps, lr=0.05, fused=True),
         "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.05, fused=True)}


def run(scaler, kind: str, poison_at: int | None = None) -> list[torch.Tensor]:
    """Four steps of the two-layer model with a fused optimizer; an inf gradient at ``poison_at``."""
    _, models, data = two_layer_case()
    opt = FUSED[kind](models[0].parameters())
    for i, (x, y) in enumerate(data):
        opt.zero_grad()
        scaler.scale(nn.functional.mse_loss(models[0](x), y)).backward()
        if i == poison_at:
            with torch.no_grad():
                models[0][1].weight.grad[0, 0] = INF
        scaler.step(opt)
        scaler.update()
    return [p.detach().clone() for p in params(models)]


@pytest.mark.parametrize("kind", list(FUSED))
def test_no_loss_scaler_steps_a_fused_optimizer_as_torchs_disabled_scaler(kind):
    got = run(NoLossScaler(), kind)
    want = run(torch.amp.GradScaler("cpu", enabled=False), kind)
    assert_same_bits(got, want)


@pytest.mark.parametrize("kind", list(FUSED))
def test_no_loss_scaler_with_a_fused_optimizer_records_inf_and_steps_anyway(kind):
    scaler = NoLossScaler()
    got = run(scaler, kind, poison_at=1)
    want = run(torch.amp.GradScaler("cpu", enabled=False), kind, poison_at=1)
    assert_same_bits(got, want)
    assert not torch.isfinite(got[2]).all()                        # the inf reached the weights: never skipped
    assert [r.found_inf for r in scaler.history] == [False, True, True, True]   # inf weights: inf/NaN from then on
    assert scaler.skipped_steps == [] and not scaler.last_step_skipped


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_static_scaler_with_a_fused_optimizer_skips_only_when_asked(kind):
    skipping, applying = StaticLossScaler(8.0), StaticLossScaler(8.0, skip_nonfinite=False)
    skipped, applied = run(skipping, kind, poison_at=1), run(applying, kind, poison_at=1)
    assert torch.isfinite(skipped[2]).all() and not torch.isfinite(applied[2]).all()
    assert skipping.skipped_steps == [1] and applying.skipped_steps == []
    assert [r.found_inf for r in applying.history] == [False, True, True, True]
    assert [r.found_inf for r in skipping.history] == [False, True, False, False]
    # without an inf the two are the same run, and the same as torch's scaler held at 8.0
    torch_static = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=10**6)
    assert_same_bits(run(StaticLossScaler(8.0, skip_nonfinite=False), kind), run(torch_static, kind))


def test_no_loss_scaler_hands_an_amp_aware_optimizer_nothing():
    """No FutureWarning, no grad_scaler=, no grad_scale/found_inf: there is nothing to divide and nothing to skip."""
    model = nn.Linear(4, 1)
    o1, o2 = TakesTheScaler(model.parameters()), ReadsScaleAndFoundInf(model.parameters())
    scaler = NoLossScaler()
    scaler.scale(model(torch.randn(4, 4)).mean()).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler.step(o1)
        scaler.step(o2)
    scaler.update()
    assert o1.seen == {"grad_scaler": None, "grad_scale": False, "found_inf": False}
    assert o2.seen == {"grad_scale": None, "found_inf": None}
    assert scaler.history[-1].found_inf is False


def test_non_skipping_static_scaler_gives_amp_aware_optimizers_zero_found_inf():
    model = nn.Linear(4, 1)
    o1, o2 = TakesTheScaler(model.parameters()), ReadsScaleAndFoundInf(model.parameters())
    scaler = StaticLossScaler(4.0, skip_nonfinite=False)
    scaler.scale((model(torch.randn(4, 4)) * INF).mean()).backward()
    with pytest.warns(FutureWarning):
        scaler.step(o1)
    scaler.step(o2)
    assert o1.seen["grad_scaler"] is scaler
    assert scaler._check_inf_per_device(o1)[torch.device("cpu")].item() == 0.0      # what the optimizer reads
    assert o2.seen["grad_scale"].item() == 4.0 and o2.seen["found_inf"].item() == 0.0
    scaler.update()
    assert scaler.history[-1].found_inf and not scaler.history[-1].skipped


# --- state_dict() at any stage of a step: silent, as torch's -----------------------------------------------------
def mid_step_state_scenario(make) -> dict:
    p = torch.ones(3, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = make("cpu", init_scale=8.0, growth_interval=1)
    states = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler.scale((p * 2).sum()).backward()
        states.append(scaler.state_dict())               # after backward
        scaler.unscale_(opt)
        states.append(scaler.state_dict())               # between unscale_ and step
        scaler.step(opt)
        states.append(scaler.state_dict())               # between step and update
        scaler.update()
        states.append(scaler.state_dict())
    keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
    return {"states": [[float(s[k]) for k in keys] for s in states]}


def test_state_dict_in_the_middle_of_a_step_is_silent_as_torchs():
    out = on_both(mid_step_state_scenario)
    assert out["ampkit"]["states"][2][0] == 8.0 and out["ampkit"]["states"][3][0] == 16.0
    assert set(SCALERS) == set(out)
