"""The kit's MindSpore scaler presets against the REAL MindSpore 2.10 (``make test-frameworks``; issue 33).

- ``mindspore.amp.DynamicLossScaler(scale_value, scale_factor, scale_window).adjust(grads_finite)`` against the
  kit's preset ``mindspore-amp`` (:class:`ampkit.scaling.tensor_rules.MindSporeFunctionalRule`);
- ``mindspore.nn.DynamicLossScaleUpdateCell`` — the cell ``DynamicLossScaleManager.get_update_cell()`` gives
  ``TrainOneStepWithLossScaleCell`` — against the preset ``mindspore``
  (:class:`ampkit.scaling.rules.MindSporeDynamicRule`);

on :data:`streams.N_STREAMS` random overflow streams each, the scale after EVERY step compared float32-exact,
with factors that are not powers of two (3, 5; 1.5 and 3.0 for the cell, whose factor is a float32 tensor) and
overflow runs long enough to reach MindSpore's floor of 1.

One difference is asserted, not hidden: ``DynamicLossScaleManager.update_loss_scale`` — the manager's own Python
method (``mindspore/train/loss_scale_manager.py``) — computes in Python floats (float64) and multiplies by
``1 / scale_factor``, so with a factor of 3 its scale leaves the float32 sequence the update cell (and the kit)
produce. The kit models the update cell, what a training network runs.

Run in a process of its own (``make test-frameworks`` runs each framework's modules in separate pytest runs:
Paddle imported before MindSpore in one process breaks MindSpore).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")
from mindspore import Tensor, amp, nn  # noqa: E402
from streams import seeds, stream  # noqa: E402

from ampkit.scaling.presets import PRESETS, preset  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)


def _f(t) -> float:
    return float(np.asarray(t.asnumpy()).reshape(()))


def _functional_settings(rng: random.Random) -> dict:
    return {"scale_value": rng.choice([2**10, 2.0**16, 1000, 3.0, 48.0]), "scale_factor": rng.choice([2, 3, 5]),
            "scale_window": rng.randint(1, 6)}


@pytest.mark.parametrize("seed", seeds())
def test_functional_dynamic_loss_scaler_matches_the_kit(seed):
    rng = random.Random(seed)
    kw = _functional_settings(rng)
    flags = stream(rng, 60)
    real = amp.DynamicLossScaler(**kw)
    kit = preset("mindspore-amp", **kw)
    assert _f(real.scale_value) == kit.scale
    for i, overflow in enumerate(flags):
        real.adjust(Tensor(not overflow, ms.bool_))
        kit.update(overflow)
        assert _f(real.scale_value) == kit.scale, (i, kw, flags[: i + 1])


def test_functional_streams_reach_the_floor_and_grow_by_non_powers_of_two():
    """The streams are not too easy: some reach the floor of 1, some grow by 3 or 5."""
    floors = growths = 0
    for seed in seeds():
        rng = random.Random(seed)
        kw = _functional_settings(rng)
        kit = preset("mindspore-amp", **kw)
        before = kit.scale
        for overflow in stream(rng, 60):
            kit.update(overflow)
            floors += kit.scale == 1.0
            growths += kit.scale > before and kw["scale_factor"] != 2
            before = kit.scale
    assert floors > 0 and growths > 0


def _cell_settings(rng: random.Random) -> dict:
    return {"init_loss_scale": rng.choice([2.0**24, 2.0**10, 1000.0, 7.0]),
            "scale_factor": rng.choice([2.0, 3.0, 1.5, 5.0]), "scale_window": rng.randint(1, 6)}


@pytest.mark.parametrize("seed", seeds())
def test_update_cell_matches_the_kit(seed):
    rng = random.Random(seed)
    kw = _cell_settings(rng)
    flags = stream(rng, 60)
    cell = nn.DynamicLossScaleUpdateCell(kw["init_loss_scale"], kw["scale_factor"], kw["scale_window"])
    scale = ms.Parameter(Tensor(kw["init_loss_scale"], ms.float32), name="loss_scale")
    kit = preset("mindspore", **kw)
    for i, overflow in enumerate(flags):
        cell(scale, Tensor(overflow, ms.bool_))
        kit.update(overflow)
        assert _f(scale) == kit.scale, (i, kw, flags[: i + 1])


def test_update_cell_streams_reach_the_floor_with_non_power_of_two_factors():
    floors = 0
    for seed in seeds():
        rng = random.Random(seed)
        kw = _cell_settings(rng)
        kit = preset("mindspore", **kw)
        for overflow in stream(rng, 60):
            kit.update(overflow)
            floors += kit.scale == 1.0 and kw["scale_factor"] in (3.0, 1.5, 5.0)
    assert floors > 0


def test_manager_gives_the_update_cell_of_the_kits_defaults():
    """The preset's defaults are the manager's: 2**24, x2, window 2000 (read off the real objects)."""
    m = amp.DynamicLossScaleManager()
    args = PRESETS["mindspore"].arguments()
    assert (m.get_loss_scale(), m.scale_factor, m.scale_window) == (
        args["init_loss_scale"], args["scale_factor"], args["scale_window"])
    cell = m.get_update_cell()
    assert isinstance(cell, nn.DynamicLossScaleUpdateCell) and m.get_drop_overflow_update() is True
    fixed = amp.FixedLossScaleManager()
    assert (fixed.get_loss_scale(), fixed.get_drop_overflow_update()) == (
        PRESETS["mindspore-fixed"].arguments()["loss_scale"], True)
    assert amp.FixedLossScaleManager(drop_overflow_update=False).get_drop_overflow_update() is \
        PRESETS["mindspore-fixed-apply"].fixed["drop_overflow_update"]


def test_managers_python_update_is_float64_not_the_cells_float32():
    """The asserted difference: the manager's own ``update_loss_scale`` (Python floats) and the update cell (float32
    tensors) agree for a factor of 2 and part for a factor of 3 (``S * (1/3)`` in float64 vs float32)."""
    flags = [True, True, False, False, True, False, False, False, True, True]
    for factor, same in ((2, True), (3, False)):
        m = amp.DynamicLossScaleManager(init_loss_scale=2.0**10, scale_factor=factor, scale_window=2)
        kit = preset("mindspore", init_loss_scale=2.0**10, scale_factor=factor, scale_window=2)
        py, f32 = [], []
        for o in flags:
            m.update_loss_scale(o)
            kit.update(o)
            py.append(m.get_loss_scale())
            f32.append(kit.scale)
        assert (py == f32) is same, (factor, py, f32)
        assert [np.float32(x) for x in py] == pytest.approx(f32, rel=1e-6)
