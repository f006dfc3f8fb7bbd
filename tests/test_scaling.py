"""ampkit.scaling: static and no scaler, bad input, the bf16 warning, history fractions, notebook 03's task."""
from __future__ import annotations

import warnings

import pytest
import torch
from _scaling_steps import INF, NAN, coeffs, make_opt, make_params, one_step, run_pattern

from ampkit.scaling import DynamicLossScaler, NoLossScaler, StaticLossScaler


# --- static and none ----------------------------------------------------------------------------------------------
def test_static_scaler_keeps_its_scale_and_skips_or_not():
    s = StaticLossScaler(2.0**8)
    scales, skips = run_pattern(s, ".o.o")
    assert scales == [256.0] * 4 and skips == [False, True, False, True]
    unsafe = StaticLossScaler(2.0**8, skip_nonfinite=False)
    params = make_params(0)
    opt = make_opt(params)
    one_step(unsafe, params, opt, coeffs(0, 0, "inf"))
    assert unsafe.history[-1].found_inf and not unsafe.last_step_skipped
    assert not all(torch.isfinite(p).all() for p in params)       # stepped with inf: the model is ruined


def test_no_loss_scaler_is_plain_training():
    n = NoLossScaler()
    p1, p2 = make_params(4), make_params(4)
    o1, o2 = make_opt(p1), make_opt(p2)
    for i in range(4):
        cs = coeffs(i, 4)
        one_step(n, p1, o1, cs)
        o2.zero_grad()
        sum((p * c).sum() for p, c in zip(p2, cs)).backward()
        o2.step()
    assert all(torch.equal(a, b) for a, b in zip(p1, p2))
    assert n.scales == [1.0] * 4 and n.skipped_steps == []
    one_step(n, p1, o1, coeffs(9, 4, "nan"))
    assert n.history[-1].found_inf and not n.history[-1].skipped


def test_no_loss_scaler_is_a_disabled_scaler_and_quiet_with_bf16():
    n = NoLossScaler()
    assert not n.is_enabled() and DynamicLossScaler().is_enabled() and StaticLossScaler(2.0).is_enabled()
    p = torch.ones(3, dtype=torch.bfloat16, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n.scale((p * 2).sum()).backward()
        n.step(opt)
        n.update()
    assert torch.equal(p, torch.zeros(3, dtype=torch.bfloat16))


def test_no_loss_scaler_accepts_fp16_grads_o3():
    p = torch.ones(3, dtype=torch.float16, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.5)
    n = NoLossScaler()
    n.scale((p * 2).sum()).backward()
    n.step(opt)
    n.update()
    assert torch.equal(p, torch.zeros(3, dtype=torch.float16))


# --- bad input ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, err, words", [
    (dict(init_scale=0.0), ValueError, "positive finite"),
    (dict(init_scale=-2.0), ValueError, "positive finite"),
    (dict(init_scale=NAN), ValueError, "positive finite"),
    (dict(init_scale=INF), ValueError, "positive finite"),
    (dict(init_scale="65536"), TypeError, "number"),
    (dict(growth_factor=1.0), ValueError, "> 1"),
    (dict(growth_factor=0.5), ValueError, "> 1"),
    (dict(backoff_factor=1.0), ValueError, r"\(0, 1\)"),
    (dict(backoff_factor=1.5), ValueError, r"\(0, 1\)"),
    (dict(backoff_factor=0.0), ValueError, "positive"),
    (dict(growth_interval=0), ValueError, ">= 1"),
    (dict(growth_interval=2.5), TypeError, "int"),
    (dict(hysteresis=0), ValueError, ">= 1"),
    (dict(min_scale=0.0), ValueError, "positive"),
    (dict(min_scale=4.0, max_scale=2.0, init_scale=3.0), ValueError, "min_scale"),
    (dict(init_scale=2.0**20, max_scale=2.0**16), ValueError, "init_scale"),
])
def test_bad_constructor_arguments(kw, err, words):
    with pytest.raises(err, match=words):
        DynamicLossScaler(**kw)


@pytest.mark.parametrize("bad", [0, -1.0, NAN, INF])
def test_bad_static_scale(bad):
    with pytest.raises(ValueError, match="positive finite"):
        StaticLossScaler(bad)


def test_fp16_grads_explain_o2_master_weights():
    model = torch.nn.Linear(4, 2).half()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for scaler in (DynamicLossScaler(), StaticLossScaler(128.0)):
        opt.zero_grad()
        scaler.scale(model(torch.ones(3, 4, dtype=torch.float16)).float().sum()).backward()
        with pytest.raises(ValueError, match="(?s)Attempting to unscale FP16 gradients.*master weights.*O2"):
            scaler.step(opt)


def test_bad_calls():
    s = DynamicLossScaler()
    with pytest.raises(ValueError, match="tensor"):        # torch's type; a TypeError too (the kit's rule)
        s.scale(3.0)
    with pytest.raises(TypeError, match="tensor"):
        s.scale("loss")
    p = torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    with pytest.raises(RuntimeError, match="before any scale"):
        s.step(opt)
    s.scale(p.sum())
    with pytest.raises(TypeError, match="optimizer"):
        s.unscale_("sgd")
    with pytest.raises(RuntimeError, match="no gradients"):
        s.step(opt)


def test_update_with_new_scale_like_torch():
    ours, ref = DynamicLossScaler(), torch.amp.GradScaler("cpu")
    for s in (ours, ref):
        ps = make_params()
        o = make_opt(ps)
        s.scale(sum(p.sum() for p in ps)).backward()
        s.step(o)
        s.update(new_scale=3.3)
    assert ours.get_scale() == ref.get_scale() == pytest.approx(3.3, rel=1e-7)


# --- bf16 warning ---------------------------------------------------------------------------------------------------
def test_bf16_with_a_scaler_warns_once():
    p = torch.ones(3, dtype=torch.bfloat16, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    s = DynamicLossScaler()
    with pytest.warns(UserWarning, match="bfloat16.*unnecessary"):
        s.scale((p * 2).float().sum()).backward()
        s.step(opt)
    s.update()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.scale((p * 2).float().sum())                    # once per scaler
    model = torch.nn.Linear(4, 2)
    with pytest.warns(UserWarning, match="bfloat16"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            DynamicLossScaler().scale(model(torch.ones(2, 4)).float().sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.autocast("cpu", dtype=torch.float16):
            DynamicLossScaler().scale(model(torch.ones(2, 4)).float().sum())


# --- fractions (ampkit.formats.classify) --------------------------------------------------------------------------
def test_history_fractions_track_the_scaled_gradients():
    from ampkit.formats import classify

    p = torch.zeros(4, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    c = torch.tensor([1e-9, 1e-6, 1e-2, 0.0])           # scale 1: flushed, subnormal, normal, zero in fp16
    for scale, flushed in ((1.0, 0.25), (2.0**10, 0.0)):
        s = StaticLossScaler(scale, track="fp16")
        opt.zero_grad()
        s.scale((p * c).sum()).backward()
        s.step(opt)
        s.update()
        fr = s.history[-1].fractions
        assert fr.flushed == pytest.approx(flushed)
        assert fr.zero == pytest.approx(0.25)
        ref = classify(c * scale, torch.float16)
        assert fr == ref


# --- notebook 03's task: the facts the notebook states ------------------------------------------------------------
@pytest.fixture(scope="module")
def task():
    from ampkit.lessons.loss_scaling import underflow_task

    return underflow_task()


def test_underflow_task_fp16_stalls_and_scaling_rescues(task):
    from ampkit.lessons.loss_scaling import train_task

    fp32 = train_task(task, "fp32", steps=60)
    none = train_task(task, "fp16", None, steps=60)
    dyn = train_task(task, "fp16", DynamicLossScaler(growth_interval=10), steps=60)
    bf16 = train_task(task, "bf16", None, steps=60)
    mistake = train_task(task, "fp16", None, steps=60, scale_after_backward=2.0**18)
    assert min(none.zero_grads) > 0.99                         # fp16 flushed (almost) every gradient
    assert none.final_loss() > 0.95 * none.losses[0]           # ... so it did not learn
    assert fp32.final_loss() < 0.8 * fp32.losses[0]
    assert abs(dyn.final_loss() - fp32.final_loss()) < 0.02 * fp32.final_loss()
    assert abs(bf16.final_loss() - fp32.final_loss()) < 0.05 * fp32.final_loss()
    assert mistake.zero_grads == none.zero_grads and mistake.losses == none.losses


def test_clipping_after_unscale_is_right(task):
    from ampkit.lessons.loss_scaling import train_task

    right = train_task(task, "fp16", StaticLossScaler(2.0**16), steps=40, clip_norm=1e-5)
    wrong = train_task(task, "fp16", StaticLossScaler(2.0**16), steps=40, clip_norm=1e-5, unscale_before_clip=False)
    fp32 = train_task(task, "fp32", steps=40, clip_norm=1e-5)
    assert abs(right.final_loss(10) - fp32.final_loss(10)) < 0.02 * fp32.final_loss(10)
    assert wrong.final_loss(10) > 0.97 * wrong.losses[0]       # clipped 2**16 times too hard: no progress


def test_replay_uses_the_scalers_rule():
    from ampkit.scaling import replay

    r = replay([2.0**-20] * 40, "fp16", init_scale=2.0**30, growth_interval=2, hysteresis=2, min_scale=2.0**30)
    assert min(r.scales) == 2.0**30 and r.skipped > 0
    with pytest.raises(ValueError, match="hysteresis"):
        replay([1.0], hysteresis=0)


def test_a_runs_own_ceiling_is_where_it_overflowed(task):
    """Notebook 03 §5's figure draws a run's scales over the band where scale × largest gradient overflows fp16: the
    band must be that run's own (it once came from the fp32 run's gradients, and a clean step sat inside it). At every
    step the run did not skip, scale × its own largest gradient is below fp16's overflow threshold; at every skip it
    is not; ``TaskRun.log2_ceiling`` says the same in log2, and the fp32 run's gradients do not (the old mistake)."""
    import math

    from ampkit.formats import info
    from ampkit.lessons.loss_scaling import train_task

    thr = info("fp16").overflow_threshold
    dyn = train_task(task, "fp16", DynamicLossScaler(growth_interval=5), steps=150)
    assert dyn.scales == dyn.scaler.scales and 0 < sum(dyn.skipped) < 150
    assert [s * g >= thr for s, g in zip(dyn.scales, dyn.grad_max)] == dyn.skipped
    ceiling = dyn.log2_ceiling("fp16")
    assert [math.log2(s) >= c for s, c in zip(dyn.scales, ceiling)] == dyn.skipped
    fp32 = train_task(task, "fp32", steps=150)
    assert fp32.scales == [1.0] * 150 and not any(fp32.skipped)
    assert [s * g >= thr for s, g in zip(dyn.scales, fp32.grad_max)] != dyn.skipped
