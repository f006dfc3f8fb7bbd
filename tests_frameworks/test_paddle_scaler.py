"""The kit's Paddle scaler presets against the REAL ``paddle.amp.GradScaler`` of PaddlePaddle 3.3.1
(``make test-frameworks``; issue 33).

Each step runs Paddle's own flow — ``scaler.scale(loss)``, ``backward()``, ``scaler.step(optimizer)``,
``scaler.update()`` — on a one-weight model whose loss is ``w * x`` with ``x = inf`` on the stream's overflow
steps, so Paddle's ``check_finite_and_unscale`` finds the inf itself; the scale after every step is compared
float32-exact with the kit's preset (:class:`ampkit.scaling.tensor_rules.PaddleGradScalerRule`), on
:data:`streams.N_STREAMS` random streams with ratios that are not powers of two (x3, x1.5, x0.3, x0.75), overflow
counts above 1 (``decr_every_n_nan_or_inf``: the counter a clean step resets) and no floor.

PRIVATE INTERNAL: on a CPU, ``GradScaler.__init__`` switches itself off ("AmpScaler can only be enabled on
CUDAPlace, XPUPlace and CustomPlace ..., so it makes no effect"; ``is_enable()`` is False). The test bypasses
that check by replacing ``paddle.amp.grad_scaler.in_dynamic_mode`` (the name the module imported from
``paddle.framework``) with ``lambda: False`` while the scaler is built, and only then; and it calls
``scaler.scale`` inside ``paddle.amp.auto_cast(dtype="float16")``, which does nothing on a CPU but sets
``amp_global_state().amp_dtype`` to float16 (outside it ``scale()`` turns dynamic scaling off, "not recommended
... for float32"). The scale is read with ``scaler.state_dict()["scale"]``.

Run in a process of its own (Paddle imported before MindSpore in one process breaks MindSpore).
"""
from __future__ import annotations

import contextlib
import inspect
import random
import warnings

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")
from streams import seeds, stream  # noqa: E402

from ampkit.scaling.presets import PRESETS, preset  # noqa: E402

# Paddle's own float(tensor) of a shape-[1] scale (math_op_patch.py), on every _update: numpy 1.25+'s warning
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def enabled_grad_scaler(**kwargs) -> paddle.amp.GradScaler:
    """A real ``paddle.amp.GradScaler(**kwargs)`` with its CPU check bypassed (the private internal above)."""
    from ampkit.lessons.mindspore_and_paddle import _grad_scaler_on_cpu

    scaler = _grad_scaler_on_cpu(**kwargs)
    assert scaler.is_enable() and scaler.is_use_dynamic_loss_scaling()
    return scaler


def _scale(scaler) -> float:
    return float(np.asarray(scaler.state_dict()["scale"]).reshape(()))


class PaddleRun:
    """A one-weight model trained by a real GradScaler; ``step(overflow)`` runs one step of Paddle's flow and
    returns whether Paddle itself found inf/NaN."""

    def __init__(self, scaler):
        self.scaler = scaler
        self.w = paddle.create_parameter([1], "float32", default_initializer=paddle.nn.initializer.Constant(1.0))
        self.opt = paddle.optimizer.SGD(learning_rate=0.0, parameters=[self.w])

    def step(self, overflow: bool) -> bool:
        x = paddle.to_tensor([np.inf if overflow else 1.0], dtype="float32")
        with warnings.catch_warnings(), contextlib.redirect_stdout(None):   # auto_cast's CPU warning; _update's print
            warnings.simplefilter("ignore", UserWarning)
            with paddle.amp.auto_cast(dtype="float16"):
                scaled = self.scaler.scale((self.w * x).sum())
            scaled.backward()
            self.scaler.step(self.opt)
            found = bool(self.scaler._cache_found_inf)
            self.scaler.update()
        self.opt.clear_grad()
        return found


def _settings(rng: random.Random) -> dict:
    return {"init_loss_scaling": rng.choice([2.0**16, 8192.0, 1000.0, 3.0]),
            "incr_ratio": rng.choice([2.0, 3.0, 1.5, 4.0]), "decr_ratio": rng.choice([0.5, 0.3, 0.75, 0.25]),
            "incr_every_n_steps": rng.randint(1, 6), "decr_every_n_nan_or_inf": rng.randint(1, 3)}


@pytest.mark.parametrize("seed", seeds())
def test_grad_scaler_matches_the_kit(seed):
    rng = random.Random(seed)
    kw = _settings(rng)
    flags = stream(rng, 60)
    run = PaddleRun(enabled_grad_scaler(**kw))
    kit = preset("paddle", **kw)
    assert _scale(run.scaler) == kit.scale
    for i, overflow in enumerate(flags):
        assert run.step(overflow) is overflow          # Paddle found the inf itself, and only there
        kit.update(overflow)
        assert _scale(run.scaler) == kit.scale, (i, kw, flags[: i + 1])


def test_the_streams_go_below_one_and_reset_the_overflow_count():
    """The streams are not too easy: some scales fall below 1 (Paddle has no floor), and some overflow runs
    shorter than decr_every_n_nan_or_inf end in a clean step (the count a clean step resets)."""
    below_one = resets = 0
    for seed in seeds():
        rng = random.Random(seed)
        kw = _settings(rng)
        kit, run = preset("paddle", **kw), 0
        for overflow in stream(rng, 60):
            kit.update(overflow)
            below_one += kit.scale < 1.0
            resets += not overflow and 0 < run < kw["decr_every_n_nan_or_inf"]
            run = run + 1 if overflow else 0
    assert below_one > 0 and resets > 0


def test_the_issues_sequence_a_clean_step_resets_the_overflow_count():
    """Issue 33's settings (init 8192, x4 every 3 clean steps, x0.25 every 2 overflows): overflow, clean,
    overflow lowers nothing; two overflows in a row do."""
    kw = {"init_loss_scaling": 8192, "incr_ratio": 4, "decr_ratio": 0.25, "incr_every_n_steps": 3,
          "decr_every_n_nan_or_inf": 2}
    run, kit = PaddleRun(enabled_grad_scaler(**kw)), preset("paddle", **kw)
    real, ours = [], []
    for o in (True, False, True, True, False, False, False):
        run.step(o)
        kit.update(o)
        real.append(_scale(run.scaler))
        ours.append(kit.scale)
    assert real == ours == [8192.0, 8192.0, 8192.0, 2048.0, 2048.0, 2048.0, 8192.0]


def test_the_presets_defaults_are_paddles():
    """``paddle`` is GradScaler's signature; ``paddle-tutorial`` changes only init_loss_scaling; the real
    AmpScaler (the base class) still defaults to Paddle 2.2's 2**15 and 1000 steps, the ``paddle-2.2`` preset."""
    sig = {n: p.default for n, p in inspect.signature(paddle.amp.GradScaler).parameters.items()}
    kit = PRESETS["paddle"].arguments()
    assert {n: sig[n] for n in kit} == kit
    assert PRESETS["paddle-tutorial"].arguments() == {**kit, "init_loss_scaling": 1024.0}
    base = {n: p.default for n, p in inspect.signature(paddle.amp.AmpScaler).parameters.items()}
    old = PRESETS["paddle-2.2"].arguments()
    assert (base["init_loss_scaling"], base["incr_every_n_steps"]) == (old["init_loss_scaling"],
                                                                       old["incr_every_n_steps"])


def test_on_a_cpu_the_grad_scaler_switches_itself_off():
    """Without the bypass, the real scaler on a CPU is off: what a learner sees running the post's code."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = paddle.amp.GradScaler(init_loss_scaling=8192)
    assert scaler.is_enable() is False
    assert any("can only be enabled on CUDAPlace" in str(w.message) for w in caught)


def test_the_default_decreases_at_every_overflow():
    """#39: 09 sets ``decr_every_n_nan_or_inf=2`` to show Paddle's count; the default is 1 (the signature), and
    with it the real scaler decreases at every overflow, in a row or not — notebook 09 shows both streams."""
    from ampkit.lessons.mindspore_and_paddle import paddle_scales
    from ampkit.lessons.mindspore_and_paddle_copied import signature_defaults

    assert signature_defaults(paddle.amp.GradScaler, "decr_every_n_nan_or_inf") == {"decr_every_n_nan_or_inf": 1}
    flags = "oo.o..o"
    with contextlib.redirect_stdout(None):
        default = paddle_scales(flags, init_loss_scaling=1024.0, incr_every_n_steps=10)
        two = paddle_scales(flags, init_loss_scaling=1024.0, incr_every_n_steps=10, decr_every_n_nan_or_inf=2)
    assert default == [512.0, 256.0, 256.0, 128.0, 128.0, 128.0, 64.0]
    assert two == [1024.0, 512.0, 512.0, 512.0, 512.0, 512.0, 512.0]
