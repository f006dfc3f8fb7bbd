"""Every preset against an independent reference written here from its framework's source, bit for bit, on seeded
random streams of overflow / clean steps with factors and settings that are not powers of two (2.5, 1/3, 0.7, 3).

Each reference is the framework's update code transliterated with numpy, in the dtype the framework computes in:
numpy float32 scalars where the framework keeps a float32 tensor (Paddle, MindSpore, Keras, tf.keras, jmp), Python
floats where it keeps a Python float (Apex, DeepSpeed), and torch's own ``torch._amp_update_scale_`` for torch. No
reference calls the kit. Scales are compared as float64 bit patterns, so a difference of one ulp fails. The
``*_would_differ`` tests show each stream tells the framework's operation from the look-alike one (a float64
ratio, a division instead of a multiplication by a reciprocal, an unrounded floor): they fail if a stream is too
tame to catch the kind of error this file guards against."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ampkit.scaling import PRESETS, preset, replay_flags

F32 = np.float32
N_STEPS = 400
SEEDS = (0, 1, 2)


def flags_for(seed: int, p: float, n: int = N_STEPS) -> list[bool]:
    rng = random.Random(1000 + seed)
    return [rng.random() < p for _ in range(n)]


def kit_scales(rule, flags: list[bool]) -> tuple[list[float], bool]:
    """The scale after each step's update (and whether the rule stopped the run), from the kit's one replay loop."""
    r = replay_flags(rule, flags)          # r.scales: the scale each step used, so the one after the step before
    if r.stopped_at is not None:
        return r.scales[1:r.stopped_at + 1], True
    return r.scales[1:] + [r.final_scale], False


def bits(xs) -> np.ndarray:
    return np.asarray([float(x) for x in xs], dtype=np.float64).view(np.uint64)


def assert_bit_equal(kit: list[float], ref: list) -> None:
    assert len(kit) == len(ref)
    a, b = bits(kit), bits(ref)
    bad = np.flatnonzero(a != b)
    assert bad.size == 0, f"first difference at step {bad[0]}: kit {kit[bad[0]]!r}, reference {float(ref[bad[0]])!r}"


# --- references, one per framework ------------------------------------------------------------------------------
def torch_reference(flags, init, growth, backoff, interval):
    """torch itself: the float32 scale tensor and int32 tracker updated by torch._amp_update_scale_."""
    scale = torch.full((), init, dtype=torch.float32)
    tracker = torch.zeros((), dtype=torch.int32)
    out = []
    for f in flags:
        torch._amp_update_scale_(scale, tracker, torch.full((), float(f)), growth, backoff, interval)
        out.append(scale.item())
    return out


def apex_reference(flags, init, window, min_loss_scale, max_loss_scale):
    """apex/amp/scaler.py LossScaler.update_scale: a Python float."""
    loss_scale, unskipped, out = min(max_loss_scale, init), 0, []
    for has_overflow in flags:
        if has_overflow:
            loss_scale = max(min_loss_scale, loss_scale / 2.) if min_loss_scale else loss_scale / 2.
            unskipped = 0
        else:
            unskipped += 1
        if unskipped == window:
            loss_scale = min(max_loss_scale, loss_scale * 2.)
            unskipped = 0
        out.append(loss_scale)
    return out


def paddle_reference(flags, init, incr_ratio, decr_ratio, n_incr, n_decr, ratio_dtype=F32):
    """python/paddle/amp/grad_scaler.py AmpScaler._update: a float32 tensor times a Python float, which Paddle's
    scale kernel converts to float32 (ScaleKernel: scale.to<T>())."""
    scale = F32(init)
    incr = decr = 0
    out = []
    for found_inf in flags:
        if found_inf:
            incr, decr = 0, decr + 1
            if decr == n_decr:
                scale, decr = F32(np.float64(scale) * ratio_dtype(decr_ratio)), 0
        else:
            decr, incr = 0, incr + 1
            if incr == n_incr:
                scale, incr = F32(np.float64(scale) * ratio_dtype(incr_ratio)), 0
        out.append(scale)
    return out


def mindspore_cell_reference(flags, init, factor, window, reciprocal=True):
    """nn/wrap/loss_scale.py DynamicLossScaleUpdateCell.construct: float32 Parameter, Tensor(factor, float32),
    P.Reciprocal, P.Maximum with 1.0, int32 iteration counters."""
    scale, f = F32(init), F32(factor)
    inv = F32(1) / f
    cur_iter, last_overflow_iter, out = 1, 0, []
    for overflow in flags:
        down = scale * inv if reciprocal else scale / f
        on_overflow = np.maximum(down, F32(1.0)) if overflow else scale
        should_inc = window <= cur_iter - last_overflow_iter
        if overflow or should_inc:
            last_overflow_iter = cur_iter
        scale = on_overflow * f if (should_inc and not overflow) else on_overflow
        cur_iter += 1
        out.append(scale)
    return out


def mindspore_functional_reference(flags, init, factor, window, divide=True):
    """mindspore/amp.py DynamicLossScaler.adjust: float32 scale_value, Python int factor (float32 in the op)."""
    scale, k, counter, out = F32(init), F32(factor), 0, []
    for overflow in flags:
        finite = not overflow
        grown = scale * k
        if finite:
            if counter == window - 1 and np.isfinite(grown):
                scale = grown
        else:
            scale = np.maximum(F32(1), scale / k if divide else scale * (F32(1) / k))
        counter = ((counter + 1) % window) * int(finite)
        out.append(scale)
    return out


def keras3_reference(flags, init, growth_steps):
    """keras/src/optimizers/loss_scale_optimizer.py: float32 variable; x2.0 / x0.5, no floor, no finiteness check."""
    scale, counter, out = F32(init), 0, []
    for overflow in flags:
        if overflow:
            counter, scale = 0, scale * F32(0.5)
        elif counter == growth_steps - 1:
            counter, scale = 0, scale * F32(2.0)
        else:
            counter += 1
        out.append(scale)
    return out


def tf_keras2_reference(flags, init, growth_steps):
    """tf_keras/mixed_precision/loss_scale_optimizer.py _DynamicLossScaleState.update (multiplier 2)."""
    scale, counter, out = F32(init), 0, []
    for overflow in flags:
        if not overflow:
            if counter + 1 >= growth_steps:
                new = scale * F32(2.0)
                if np.isfinite(new):
                    scale = new
                counter = 0
            else:
                counter += 1
        else:
            scale, counter = np.maximum(scale / F32(2.0), F32(1)), 0
        out.append(scale)
    return out


def jmp_reference(flags, init, period, factor, min_loss_scale, reciprocal=False, min_dtype=F32):
    """jmp/_src/loss_scale.py DynamicLossScale.adjust: float32 arrays. Op by op (the default here) a float32
    division by the factor; under jax.jit (``reciprocal=True``, with ``min_loss_scale=1``: the jit round trip
    drops it) XLA's algebraic simplifier turns the division by the static factor into a multiplication by
    float32(1 / factor)."""
    scale, counter, k, lo = F32(init), 0, F32(factor), min_dtype(min_loss_scale)
    out = []
    for overflow in flags:
        finite = not overflow
        if finite:
            if counter == period - 1:
                grown = scale * k
                scale = grown if np.isfinite(grown) else scale
        else:
            down = scale * (F32(1) / k) if reciprocal else scale / k
            scale = max(lo, down)
        counter = ((counter + 1) % period) * int(finite)
        out.append(scale)
    return out


def deepspeed_reference(flags, power, window, min_scale, delayed_shift, consecutive):
    """deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale (master): Python numbers."""
    cur_scale, scale_factor = 2**power, 2.
    cur_iter, last_overflow_iter, cur_hysteresis, out = 0, -1, delayed_shift, []
    for overflow in flags:
        if overflow:
            if delayed_shift == 1 or cur_hysteresis == 1:
                if cur_scale == min_scale:
                    return out, True
                cur_scale = max(cur_scale / scale_factor, min_scale)
            else:
                cur_hysteresis -= 1
            last_overflow_iter = cur_iter
        else:
            if consecutive:
                cur_hysteresis = delayed_shift
            stable_interval = (cur_iter - last_overflow_iter) - 1
            if (stable_interval > 0) and (stable_interval % window == 0):
                if not consecutive:
                    cur_hysteresis = delayed_shift
                cur_scale *= scale_factor
        cur_iter += 1
        out.append(cur_scale)
    return out, False


# --- the cases: (preset, its arguments, overflow probability, reference) ----------------------------------------
CASES = [
    ("torch", dict(init_scale=1000.3, growth_factor=2.5, backoff_factor=1 / 3, growth_interval=3), 0.3,
     lambda fl: torch_reference(fl, 1000.3, 2.5, 1 / 3, 3)),
    ("torch", dict(init_scale=3.3e5, growth_factor=1.3, backoff_factor=0.7, growth_interval=2), 0.35,
     lambda fl: torch_reference(fl, 3.3e5, 1.3, 0.7, 2)),
    ("apex", dict(init_scale=1000.3, scale_window=3, min_loss_scale=0.7, max_loss_scale=3e5), 0.3,
     lambda fl: apex_reference(fl, 1000.3, 3, 0.7, 3e5)),
    ("paddle", dict(init_loss_scaling=1000.3, incr_ratio=2.5, decr_ratio=1 / 3, incr_every_n_steps=3,
                    decr_every_n_nan_or_inf=2), 0.4,
     lambda fl: paddle_reference(fl, 1000.3, 2.5, 1 / 3, 3, 2)),
    ("paddle-tutorial", dict(incr_ratio=1.3, decr_ratio=0.7, incr_every_n_steps=2), 0.35,
     lambda fl: paddle_reference(fl, 1024, 1.3, 0.7, 2, 1)),
    ("paddle-2.2", dict(incr_ratio=1.5, decr_ratio=0.3, incr_every_n_steps=4), 0.4,
     lambda fl: paddle_reference(fl, 2.0**15, 1.5, 0.3, 4, 2)),
    ("mindspore", dict(init_loss_scale=3.3e5, scale_factor=2.5, scale_window=3), 0.3,
     lambda fl: mindspore_cell_reference(fl, 3.3e5, 2.5, 3)),
    ("mindspore-fixed", dict(loss_scale=1000.3), 0.3, lambda fl: [F32(1000.3)] * len(fl)),
    ("mindspore-fixed-apply", dict(loss_scale=1000.3), 0.3, lambda fl: [F32(1000.3)] * len(fl)),
    ("mindspore-amp", dict(scale_value=1000.3, scale_factor=3, scale_window=3), 0.3,
     lambda fl: mindspore_functional_reference(fl, 1000.3, 3, 3)),
    ("keras", dict(initial_scale=1000.3, dynamic_growth_steps=3), 0.6,          # down into subnormals and to 0
     lambda fl: keras3_reference(fl, 1000.3, 3)),
    ("keras", dict(initial_scale=1000.3, dynamic_growth_steps=1), 0.05,         # up to inf
     lambda fl: keras3_reference(fl, 1000.3, 1)),
    ("tf-keras2", dict(initial_scale=1000.3, dynamic_growth_steps=3), 0.4,
     lambda fl: tf_keras2_reference(fl, 1000.3, 3)),
    ("tf-keras2", dict(initial_scale=1000.3, dynamic_growth_steps=1), 0.05,     # stops below inf
     lambda fl: tf_keras2_reference(fl, 1000.3, 1)),
    ("jmp", dict(loss_scale=1000.3, period=3, factor=3, min_loss_scale=0.7), 0.35,
     lambda fl: jmp_reference(fl, 1000.3, 3, 3, 0.7)),
    ("jmp-jit", dict(loss_scale=1000.3, period=3, factor=3, min_loss_scale=0.7), 0.35,     # 0.7 is lost: floor 1
     lambda fl: jmp_reference(fl, 1000.3, 3, 3, 1.0, reciprocal=True)),
]
DS_CASES = [
    ("deepspeed", dict(initial_scale_power=10, loss_scale_window=3, hysteresis=3, min_loss_scale=3), 0.3, False),
    ("deepspeed-consecutive", dict(initial_scale_power=10, loss_scale_window=3, hysteresis=3, min_loss_scale=3),
     0.5, True),                                           # only 3 overflows in a row lower it
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,kwargs,p,reference", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_preset_matches_its_source_bit_for_bit(name, kwargs, p, reference, seed):
    fl = flags_for(seed, p)
    kit, stopped = kit_scales(preset(name, **kwargs), fl)
    with np.errstate(over="ignore", under="ignore"):
        ref = reference(fl)
    assert not stopped
    assert_bit_equal(kit, ref)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,kwargs,p,consecutive", DS_CASES, ids=[c[0] for c in DS_CASES])
def test_deepspeed_matches_its_source_until_it_stops(name, kwargs, p, consecutive, seed):
    fl = flags_for(seed, p)
    kit, stopped = kit_scales(preset(name, **kwargs), fl)
    ref, ref_stopped = deepspeed_reference(fl, 10, 3, 3, 3, consecutive)
    assert stopped == ref_stopped
    assert_bit_equal(kit, ref)
    assert 3.0 in kit          # the stream reached the non-power-of-two floor


def test_every_preset_is_checked_bit_for_bit():
    assert {c[0] for c in CASES} | {c[0] for c in DS_CASES} == set(PRESETS)


def test_streams_reach_the_interesting_places():
    """The streams are not tame: Keras 3 reaches subnormals, 0 and inf, tf.keras 2 stops at its largest float32."""
    low, _ = kit_scales(preset("keras", initial_scale=1000.3, dynamic_growth_steps=3), flags_for(0, 0.6))
    assert 0.0 in low and any(0 < s < 2.0**-126 for s in low)
    high, _ = kit_scales(preset("keras", initial_scale=1000.3, dynamic_growth_steps=1), flags_for(0, 0.05))
    assert high[-1] == float("inf")
    capped, _ = kit_scales(preset("tf-keras2", initial_scale=1000.3, dynamic_growth_steps=1), flags_for(0, 0.05))
    assert max(capped) < float("inf") and max(capped) > 2.0**127
    floor, _ = kit_scales(preset("jmp", loss_scale=1000.3, period=3, factor=3, min_loss_scale=0.7), flags_for(0, 0.35))
    assert float(F32(0.7)) in floor and 0.7 not in floor
    jit_floor, _ = kit_scales(preset("jmp-jit", loss_scale=1000.3, period=3, factor=3, min_loss_scale=0.7),
                              flags_for(0, 0.35))
    assert 1.0 in jit_floor and min(jit_floor) == 1.0


def test_mindspore_fixed_apply_applies_what_fixed_skips():
    fl = flags_for(0, 0.3)
    assert replay_flags(preset("mindspore-fixed-apply", loss_scale=1000.3), fl).applied == [True] * len(fl)
    assert replay_flags(preset("mindspore-fixed", loss_scale=1000.3), fl).applied == [not f for f in fl]


# --- each stream separates the framework's operation from its look-alike -----------------------------------------
def differs(a: list, b: list) -> bool:
    return bool((bits(a) != bits(b)).any())


@pytest.mark.parametrize("seed", SEEDS)
def test_paddle_with_a_float64_ratio_would_differ(seed):
    fl = flags_for(seed, 0.4)
    f32_ratio = paddle_reference(fl, 1000.3, 2.5, 1 / 3, 3, 2)
    f64_ratio = paddle_reference(fl, 1000.3, 2.5, 1 / 3, 3, 2, ratio_dtype=np.float64)
    assert differs(f32_ratio, f64_ratio)


@pytest.mark.parametrize("seed", SEEDS)
def test_mindspore_cell_dividing_would_differ(seed):
    fl = flags_for(seed, 0.3)
    assert differs(mindspore_cell_reference(fl, 3.3e5, 2.5, 3),
                   mindspore_cell_reference(fl, 3.3e5, 2.5, 3, reciprocal=False))


@pytest.mark.parametrize("seed", SEEDS)
def test_mindspore_functional_by_reciprocal_would_differ(seed):
    fl = flags_for(seed, 0.3)
    assert differs(mindspore_functional_reference(fl, 1000.3, 3, 3),
                   mindspore_functional_reference(fl, 1000.3, 3, 3, divide=False))


@pytest.mark.parametrize("seed", SEEDS)
def test_jmp_with_an_unrounded_floor_or_a_division_would_differ(seed):
    fl = flags_for(seed, 0.35)
    ref = jmp_reference(fl, 1000.3, 3, 3, 0.7)
    assert differs(ref, jmp_reference(fl, 1000.3, 3, 3, 0.7, min_dtype=float))
    assert differs(ref, jmp_reference(fl, 1000.3, 3, 3, 0.7, reciprocal=True))
    assert differs(jmp_reference(fl, 1000.3, 3, 3, 1.0), jmp_reference(fl, 1000.3, 3, 3, 1.0, reciprocal=True))


def test_torch_multiplies_by_the_double_factor_not_its_float32():
    """torch's kernel takes the factors as C++ doubles: float32(S * 1/3) in float64, not S * float32(1/3)."""
    fl = flags_for(0, 0.3)
    scale, tracker, with_f32_factor = F32(1000.3), 0, []
    for f in fl:
        if f:
            scale, tracker = scale * F32(1 / 3), 0
        else:
            tracker += 1
            if tracker == 3:
                scale, tracker = scale * F32(2.5), 0
        with_f32_factor.append(scale)
    assert differs(torch_reference(fl, 1000.3, 2.5, 1 / 3, 3), with_f32_factor)


def test_sharded_grad_scaler_cpu_update_multiplies_by_the_float32_factor():
    """docs/reference.md: FSDP's ShardedGradScaler updates a CPU scale with ``self._scale *= factor`` (float32 times
    float32(factor), no finiteness check), unlike torch._amp_update_scale_ (float32(S * double factor))."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    s = ShardedGradScaler("cpu", init_scale=606636.2, backoff_factor=0.7, growth_factor=3.0, growth_interval=1)
    s._lazy_init_scale_growth_tracker(torch.device("cpu"))
    s._amp_update_scale_cpu_(torch.ones(1))
    assert s._scale.item() == float(F32(606636.2) * F32(0.7)) != torch_reference([True], 606636.2, 3.0, 0.7, 1)[0]
    s._scale.fill_(3e38)
    s._amp_update_scale_cpu_(torch.zeros(1))
    assert s._scale.item() == float("inf")          # grown past float32's range: torch's kernel would keep 3e38
