"""Scaler health: each class from a synthetic history; the recording wrapper on torch's GradScaler."""
import pytest
import torch
import torch.nn.functional as F

from ampkit.diagnose import RUN_KINDS, RecordingScaler, ScalerHistory, classify_run
from ampkit.models import MLP
from ampkit.scaling import DynamicLossScaler


def test_persistent():
    h = ScalerHistory(scales=[2.0 ** 16] * 10 + [2.0 ** (15 - i) for i in range(8)],
                      skipped=[False] * 10 + [True] * 8)
    d = classify_run(h)
    assert d.kind == "persistent" and "last 8" in d.evidence and "NonFiniteHunter" in d.fix


def test_transient():
    scales = [2.0 ** 16] * 30
    skipped = [False] * 30
    skipped[7] = skipped[21] = True
    for i in range(8, 30):
        scales[i] = 2.0 ** 15
    for i in range(22, 30):
        scales[i] = 2.0 ** 14
    assert classify_run(ScalerHistory(scales, skipped)).kind == "transient"


def test_skip_right_after_growth_is_healthy():
    scales = [2.0 ** 10] * 5 + [2.0 ** 11] + [2.0 ** 10] * 5
    skipped = [False] * 5 + [True] + [False] * 5
    d = classify_run(ScalerHistory(scales, skipped))
    assert d.kind == "healthy"


def test_scale_too_low_and_growth_too_slow():
    h = ScalerHistory([1.0] * 30, [False] * 30, grad_max=[1e-3] * 30, small_fraction=[0.6] * 30)
    assert classify_run(h).kind == "scale too low"
    h = ScalerHistory([2.0 ** 4] * 30, [False] * 30, grad_max=[1e-2] * 30, small_fraction=[0.01] * 30)
    assert classify_run(h).kind == "growth too slow"
    h = ScalerHistory([2.0 ** 4] * 30, [False] * 30, grad_max=[1e3] * 30, small_fraction=[0.01] * 30)
    assert classify_run(h).kind == "healthy"
    assert set(RUN_KINDS) == {"healthy", "persistent", "transient", "scale too low", "growth too slow"}


def _run(scaler, steps, poison=False):
    torch.manual_seed(0)
    m = MLP(4, 8, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    rec = RecordingScaler(scaler)
    x, y = torch.randn(16, 4), torch.zeros(16, dtype=torch.long)
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        if poison:
            loss = loss * float("nan")
        rec.scale(loss).backward()
        rec.step(opt)
        rec.update()
    return rec


@pytest.mark.parametrize("make", [lambda: torch.amp.GradScaler("cpu"), lambda: DynamicLossScaler()])
def test_recording_wrapper(make):
    rec = _run(make(), 8, poison=True)
    assert rec.history.skipped == [True] * 8
    assert rec.history.scales[0] == 2.0 ** 16 and rec.history.scales[-1] == 2.0 ** 9
    assert classify_run(rec.history).kind == "persistent"
    rec = _run(make(), 5)
    assert rec.history.skipped == [False] * 5 and rec.get_scale() == 2.0 ** 16
    assert "scale" in rec.state_dict()


@pytest.mark.parametrize("n", [0, -1])
def test_persistent_steps_below_one_is_an_error_not_a_verdict(n):
    healthy = ScalerHistory([2.0 ** 16] * 10, [False] * 10)
    assert classify_run(healthy).kind == "healthy"
    with pytest.raises(ValueError, match=f"persistent_steps must be an int >= 1; got {n}"):
        classify_run(healthy, persistent_steps=n)


def test_classify_argument_types_and_ranges():
    h = ScalerHistory([2.0 ** 16] * 10, [False] * 10)
    with pytest.raises(TypeError, match="persistent_steps must be an int"):
        classify_run(h, persistent_steps=2.5)
    with pytest.raises(TypeError, match="persistent_steps must be an int"):
        classify_run(h, persistent_steps=True)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="small_threshold must be a fraction between 0 and 1"):
            classify_run(h, small_threshold=bad)
    with pytest.raises(ValueError, match="finite number"):
        classify_run(h, small_threshold=float("nan"))
    with pytest.raises(TypeError, match="small_threshold must be a finite number"):
        classify_run(h, small_threshold="0.1")
    # the thresholds do what they say: 3 skips at the end are persistent with persistent_steps=3, not with 5
    tail = ScalerHistory([2.0 ** 16] * 10 + [2.0 ** (15 - i) for i in range(3)], [False] * 10 + [True] * 3)
    assert classify_run(tail, persistent_steps=3).kind == "persistent"
    assert classify_run(tail, persistent_steps=5).kind != "persistent"
    low = ScalerHistory([1.0] * 30, [False] * 30, grad_max=[1e-3] * 30, small_fraction=[0.3] * 30)
    assert classify_run(low, small_threshold=0.2).kind == "scale too low"
    assert classify_run(low, small_threshold=0.5).kind != "scale too low"


def test_history_lengths_and_scales_checked():
    with pytest.raises(ValueError, match="grad_max must be empty or have one entry per step \\(2\\); got 1"):
        ScalerHistory([1.0, 1.0], [False, False], grad_max=[1.0])
    with pytest.raises(ValueError, match="small_fraction must be empty"):
        ScalerHistory([1.0], [False], small_fraction=[0.1, 0.2])
    for bad in (0.0, -1.0, float("inf"), float("nan"), "1"):
        with pytest.raises(ValueError, match="positive finite number"):
            ScalerHistory([bad], [False])


def test_fix_texts_are_true_to_the_sources():
    d = classify_run(ScalerHistory([2.0 ** 16] * 8, [True] * 8))
    assert "forward" in d.fix and "bf16" in d.fix          # a forward overflow gives the same picture
    scales = [2.0 ** 16] * 6 + [2.0 ** 15] * 6
    d = classify_run(ScalerHistory(scales, [False] * 5 + [True] + [False] * 6))
    assert d.kind == "transient" and "needs no fix" in d.fix and "GradScaler has none" in d.fix
    assert "consecutive_hysteresis=True" in d.fix


def test_bad_input():
    with pytest.raises(TypeError, match="unscale_"):
        RecordingScaler(object())
    with pytest.raises(ValueError, match="one entry per step"):
        ScalerHistory([1.0], [])
    with pytest.raises(ValueError, match="empty"):
        classify_run(ScalerHistory())
    with pytest.raises(TypeError, match="ScalerHistory"):
        classify_run([1.0])
