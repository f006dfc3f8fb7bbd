"""The doctor's scenarios: each broken run is diagnosed as what it is, and its fix makes it healthy."""
import math

import pytest
import torch
from torch import nn

from ampkit.diagnose.health import FP16_MAX
from ampkit.lessons.amp_in_practice import SCENARIOS, diagnose_model, outlier_run, run_scenario, scenario_names
from ampkit.models import MLP
from ampkit.scaling import DynamicLossScaler
from ampkit.scaling.presets import preset
from ampkit.scaling.replays import replay_flags

EXPECTED = {  # scenario -> words the broken run's diagnosis must contain
    "fp16 forward overflow": ["forward pass", "net.2", "GradScaler cannot fix"],
    "log of zero": ["persistent"],
    "transient spikes": ["transient", "backed off 2 time(s)"],
    "scale too low": ["scale too low"],
    "model.half() + GradScaler": ["Attempting to unscale FP16 gradients"],
    "adam eps in fp16": ["is 0 in fp16", "addcdiv"],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_broken_then_fixed(name):
    broken = run_scenario(name)
    assert not broken.healthy and not broken.fixed
    for word in EXPECTED[name]:
        assert word in broken.diagnosis, (word, broken.diagnosis)
    assert broken.fix and broken.evidence["kind"] in ("scales", "headroom", "losses")
    fixed = run_scenario(name, fixed=True)
    assert fixed.healthy and fixed.fixed and fixed.fix.startswith("applied")


def test_my_model():
    torch.manual_seed(0)
    m = MLP(4, 8, 2)
    rep = run_scenario("my model", model=m, batch=(torch.randn(8, 4), torch.zeros(8, dtype=torch.long)))
    assert rep.healthy and "no inf/NaN" in rep.diagnosis
    with torch.no_grad():
        m.net[0].weight.mul_(1e6)
    rep = diagnose_model(m, torch.randn(8, 4) * 10, torch.zeros(8, dtype=torch.long))
    assert not rep.healthy and "net.0" in rep.diagnosis


def test_bad_input():
    with pytest.raises(ValueError, match="the doctor knows: fp16 forward overflow, .*my model"):
        run_scenario("exploding gradients")
    with pytest.raises(ValueError, match="needs model="):
        run_scenario("my model")
    with pytest.raises(ValueError, match="no parameters"):
        run_scenario("my model", model=nn.ReLU(), batch=(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long)))
    with pytest.raises(ValueError, match="scalar"):
        diagnose_model(nn.Linear(2, 2), torch.zeros(3, 2), None, loss_fn=lambda o, y: o)
    assert scenario_names()[-1] == "my model"
    m, xy = MLP(4, 8, 2), (torch.randn(4, 4), torch.zeros(4, dtype=torch.long))
    for bad in ("fp32", "e4m3", torch.float32, 16):
        with pytest.raises(ValueError, match="one of fp16, bf16"):
            diagnose_model(m, *xy, dtype=bad)
    assert diagnose_model(m, *xy, dtype=torch.bfloat16).evidence["dtype"] == "bf16"
    with pytest.raises(TypeError, match="batch=\\(x, y\\).*got Tensor"):
        run_scenario("my model", model=m, batch=xy[0])
    with pytest.raises(TypeError, match="of length 3"):
        run_scenario("my model", model=m, batch=(*xy, None))


def test_forward_overflow_evidence_follows_the_fix():
    broken, fixed = run_scenario("fp16 forward overflow"), run_scenario("fp16 forward overflow", fixed=True)
    assert broken.evidence["dtype"] == "fp16" and min(broken.evidence["bits"]) < 0
    assert fixed.evidence["dtype"] == "bf16" and min(fixed.evidence["bits"]) > 0


def test_outlier_run_hysteresis_both_ways():
    """torch's GradScaler halves at each spike; DeepSpeed's consecutive hysteresis (ampkit's default) never;
    DeepSpeed's default (hysteresis refilled only when the scale grows) halves at the second spike."""
    drops = {}
    for label, scaler in [("torch", torch.amp.GradScaler("cpu")),
                          ("consecutive", DynamicLossScaler(hysteresis=2, consecutive_hysteresis=True)),
                          ("deepspeed default", DynamicLossScaler(hysteresis=2, consecutive_hysteresis=False))]:
        r = outlier_run(scaler)
        h = r.history
        assert [i for i, s in enumerate(h.skipped) if s] == [5, 11], label   # every spike is skipped
        drops[label] = [i for i in range(1, h.steps) if h.scales[i] < h.scales[i - 1]]
        for i in (5, 11):   # the case hysteresis is for: a finite loss, scaled gradients that overflow in backward
            assert math.isfinite(r.losses[i]) and r.first_inf[i].phase == "backward", label
            assert r.grad_max[i] < FP16_MAX < r.grad_max[i] * h.scales[i], label
    assert drops == {"torch": [6, 12], "consecutive": [], "deepspeed default": [12]}


def test_outlier_run_matches_deepspeeds_rule():
    """The kit's DynamicLossScaler(hysteresis=2, consecutive_hysteresis=False) takes the scales DeepSpeed's
    update_scale (the "deepspeed" preset, a transliteration) takes over the same overflows."""
    for kit, name in ((DynamicLossScaler(hysteresis=2, consecutive_hysteresis=False), "deepspeed"),
                      (DynamicLossScaler(hysteresis=2), "deepspeed-consecutive")):
        h = outlier_run(kit).history
        assert replay_flags(preset(name), h.skipped).scales == h.scales, name


def test_outlier_run_bad_input():
    with pytest.raises(ValueError, match="outliers must be a tuple of step numbers in 0..7"):
        outlier_run(torch.amp.GradScaler("cpu"), steps=8, outliers=(8,))
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        outlier_run(torch.amp.GradScaler("cpu"), steps=0)
    with pytest.raises(TypeError, match="GradScaler's calls"):
        outlier_run(object())


def test_evidence_carries_kinds_and_gradient_stats():
    ev = run_scenario("fp16 forward overflow").evidence
    assert ev["kinds"] == ["Linear", "ReLU activation", "Linear", "ReLU activation", "Linear"]
    ev = run_scenario("scale too low").evidence
    assert len(ev["small_fraction"]) == len(ev["scales"]) == len(ev["grad_max"])
    assert min(ev["small_fraction"]) > 0.1
