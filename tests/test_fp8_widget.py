"""ampkit.widgets.fp8: the amax-history explorer, headless — sweeps of every control, readout = pure computation."""
import pytest
import torch

from ampkit.fp8 import delayed_scales
from ampkit.lessons.fp8_scaling import record_amax_run
from ampkit.widgets.fp8 import AmaxHistoryExplorer, explorer_state, readout_html


@pytest.fixture(scope="module")
def rec():
    return record_amax_run(steps=50, spikes={20: 16.0}, grad_spikes={30: 32.0})


def test_history_sweep_follows_the_pure_computation(rec):
    w = AmaxHistoryExplorer(rec, history_len=8)
    pngs = set()
    for h in range(1, rec.steps + 1):
        w.history.value = h
        expected = explorer_state(rec, "activation", h, "max", 0)
        assert torch.equal(w.state.delayed_scale, delayed_scales(rec.amax["activation"], "e4m3", h, "max"))
        assert w.readout.value == readout_html(expected)
        pngs.add(w.image.value)
    assert len(pngs) > 3                              # the figure moves with the slider
    w.history.value = 4
    assert "saturated at" in w.readout.value and w.state.saturating_steps >= 1 and w.state.worst_step == 20


def test_algorithm_margin_and_tensor_controls(rec):
    w = AmaxHistoryExplorer(rec)
    for algo in ("most_recent", "max"):
        for margin in range(0, 4):
            w.algo.value, w.margin.value = algo, margin
            assert w.state.algo == algo and w.state.margin == margin
            assert f"margin {margin}" in w.readout.value
    w.tensor.value = "gradient"
    assert w.state.fmt == "e5m2" and "gradient in e5m2" in w.readout.value
    # a larger margin never saturates more steps
    w.history.value, w.algo.value = 4, "max"
    counts = []
    for m in range(0, 6):
        w.margin.value = m
        counts.append(w.state.saturating_steps)
    assert counts == sorted(counts, reverse=True)
    # just-in-time scaling never saturates (its amax is the step's own)
    assert int((w.state.current_saturated > 0).sum()) == 0


def test_bad_tensor_name(rec):
    with pytest.raises(ValueError, match="activation"):
        explorer_state(rec, "weights", 4, "max", 0)
    with pytest.raises(ValueError):
        explorer_state(rec, "activation", 0, "max", 0)
