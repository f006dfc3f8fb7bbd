"""ampkit.precision.bf16_updates: lost bf16 updates, Kahan summation, stochastic rounding, the optimizer wrapper."""
from __future__ import annotations

import math

import pytest
import torch

from ampkit.lessons.transformers_in_16_bits.weights import plateau_experiment
from ampkit.precision import BF16Updates, apply_update, stochastic_round
from ampkit.precision.bf16_updates import nearest_threshold

BF16 = torch.bfloat16


def _weights(n: int = 2000, seed: int = 0) -> torch.Tensor:
    """bf16 weights of both signs over many binades, with exact powers of two and zero among them."""
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, generator=g) * torch.exp2(torch.randint(-20, 10, (n,), generator=g).float())).to(BF16)
    w[:40] = torch.tensor([2.0 ** k for k in range(-10, 10)] + [-(2.0 ** k) for k in range(-10, 10)], dtype=BF16)
    w[40] = 0.0
    return w


def _neighbour(w: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The next bf16 number above (``up``) or below each ``w``, from the bit patterns (float64)."""
    bits = w.view(torch.int16).to(torch.int32)
    away = torch.where(w > 0, up, ~up)                     # for w > 0 "up" moves away from zero
    step = torch.where(away, 1, -1)
    zero = w == 0
    bits = torch.where(zero, torch.ones_like(bits), bits + step)   # 0 -> smallest subnormal, sign applied below
    out = bits.to(torch.int16).view(BF16).to(torch.float64)
    return torch.where(zero & ~up, -out, out)


def test_nearest_threshold_is_half_the_gap_to_the_neighbour_on_the_updates_side():
    w = _weights()
    for sign in (1.0, -1.0):
        u = torch.full(w.shape, sign)
        gap = (_neighbour(w, torch.full(w.shape, sign > 0)) - w.double()).abs()
        assert torch.equal(nearest_threshold(w, u), gap / 2)


@pytest.mark.parametrize("factor,kept", [(0.01, False), (0.5, False), (0.99, False), (1.01, True), (1.9, True)])
def test_nearest_loses_an_update_exactly_when_it_is_below_half_the_gap(factor, kept):
    w = _weights()
    g = torch.Generator().manual_seed(1)
    sign = torch.where(torch.rand(w.shape, generator=g) < 0.5, -1.0, 1.0).double()
    u = (sign * nearest_threshold(w, sign) * factor).float()
    new = apply_update(w, u, "nearest").weight
    changed = new != w
    assert bool(changed.all()) if kept else not bool(changed.any())
    p = w.clone()
    p.add_(u)                                              # what an optimizer's in-place update stores
    assert torch.equal(new, p)


def test_the_gap_below_a_power_of_two_is_half_the_gap_above():
    one = torch.ones(1, dtype=BF16)
    assert apply_update(one, torch.tensor([0.003]), "nearest").weight.item() == 1.0          # < 2**-8: lost
    assert apply_update(one, torch.tensor([-0.003]), "nearest").weight.item() == 1 - 2 ** -8  # > 2**-9: kept


def test_apply_update_is_pure():
    w, c = torch.ones(3, dtype=BF16), torch.full((3,), 1e-3, dtype=BF16)
    w0, c0 = w.clone(), c.clone()
    for mode in ("nearest", "kahan", "stochastic"):
        apply_update(w, torch.full((3,), 0.5), mode, c if mode == "kahan" else None, torch.Generator())
    assert torch.equal(w, w0) and torch.equal(c, c0)


@pytest.mark.parametrize("comp_dtype", [BF16, torch.float32])
def test_kahan_keeps_what_rounding_drops(comp_dtype):
    """1000 updates of 1e-3 on a weight of 1.0: nearest loses every one; Kahan ends within one bf16 gap of the
    exact sum, and weight + buffer closer still (0.5% with a bf16 buffer, 1e-5 with an fp32 one)."""
    w_n = w_k = torch.ones(4, dtype=BF16)
    c = torch.zeros(4, dtype=comp_dtype)
    u = torch.full((4,), 1e-3)
    for _ in range(1000):
        w_n = apply_update(w_n, u, "nearest").weight
        w_k, c = apply_update(w_k, u, "kahan", c)
    assert c.dtype == comp_dtype
    assert torch.equal(w_n, torch.ones(4, dtype=BF16))
    exact = 1.0 + 1000 * 1e-3
    assert (w_k.double() - exact).abs().max().item() <= 2 ** -7            # one gap at 2.0 is 2**-6: well inside
    held = (w_k.double() + c.double() - exact).abs().max().item()
    assert held < (5e-3 if comp_dtype == BF16 else 1e-5)                 # a bf16 buffer rounds too (8 bits)


def test_stochastic_round_is_unbiased_with_a_stated_bound():
    """Each x lies at a different fraction of its gap; N draws of the rounded value, each one of the two
    neighbours (lo, lo + gap). The mean's standard deviation is at most gap / (2 sqrt(N)); we allow 5 of them
    (a chance below 1e-6 of failing for a correct rounding, and the generator is seeded). Round-to-nearest would
    be off by up to half a gap, hundreds of times the bound."""
    g = torch.Generator().manual_seed(0)
    lo = torch.tensor([1.0, 1.5, -3.0, 2 ** -20, 1e30, -7e-3], dtype=BF16).double()
    gap = (_neighbour(lo.to(BF16), lo > 0) - lo).abs()
    frac = torch.tensor([0.25, 0.01, 0.5, 0.9, 0.6, 0.37], dtype=torch.float64)
    x = (lo + torch.sign(lo) * frac * gap).float()           # exact in fp32: 16 spare bits
    n = 200_000
    r = stochastic_round(x.expand(n, -1), g).double()
    assert bool(((r == lo) | (r == lo + torch.sign(lo) * gap)).all())
    bound = 5 * gap / (2 * math.sqrt(n))
    assert bool(((r.mean(0) - x.double()).abs() < bound).all()), (r.mean(0) - x.double()) / gap
    nearest_bias = (x.to(BF16).double() - x.double()).abs()             # min(frac, 1 - frac) gaps
    far = (torch.minimum(frac, 1 - frac) >= 0.1) & (frac != 0.5)
    assert bool((nearest_bias[far] > 10 * bound[far]).all())              # the test would catch nearest


def test_stochastic_round_keeps_bf16_values_and_specials_and_is_seeded():
    v = torch.tensor([0.0, -0.0, 1.0, -2.5, torch.finfo(BF16).max, math.inf, -math.inf, math.nan]).repeat(100)
    r = stochastic_round(v, torch.Generator().manual_seed(3))
    assert torch.equal(r.float()[~v.isnan()], v[~v.isnan()]) and bool(r.float()[v.isnan()].isnan().all())
    x = torch.rand(500, generator=torch.Generator().manual_seed(4))
    a, b = (stochastic_round(x, torch.Generator().manual_seed(5)) for _ in range(2))
    assert torch.equal(a, b)


def test_bad_input_names_the_choices():
    w = torch.ones(2, dtype=BF16)
    with pytest.raises(ValueError, match="nearest, kahan, stochastic"):
        apply_update(w, torch.ones(2), "round")
    with pytest.raises(TypeError, match="bfloat16"):
        apply_update(w.float(), torch.ones(2))
    with pytest.raises(TypeError, match="compensation"):
        apply_update(w, torch.ones(2), "kahan", torch.zeros(2, dtype=torch.float16))
    p = torch.nn.Parameter(torch.ones(2, dtype=BF16))
    with pytest.raises(ValueError, match="nearest, master, kahan, stochastic"):
        BF16Updates(torch.optim.SGD([p], lr=0.1), mode="fp32")
    q = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(TypeError, match="parameter 1 of group 0 is torch.float32"):
        BF16Updates(torch.optim.SGD([p, q], lr=0.1))
    with pytest.raises(ValueError, match="lr"):
        plateau_experiment(lr=0.0)


def _run(mode: str, steps: int, opt_cls=torch.optim.SGD, n: int = 5, **kw) -> tuple[torch.nn.Parameter, object]:
    p = torch.nn.Parameter(torch.ones(n, dtype=BF16))
    opt = BF16Updates(opt_cls([p], **kw), mode=mode, seed=7)
    for _ in range(steps):
        opt.zero_grad()
        p.grad = torch.full_like(p, 1.0)
        opt.step()
    return p, opt


def test_wrapper_stores_updates_by_mode_and_keeps_parameters_bf16():
    exact = 1.0 - 200 * 1e-3
    p, _ = _run("nearest", 200, lr=1e-3)
    assert torch.equal(p.data, torch.ones(5, dtype=BF16))               # every update lost
    for mode in ("master", "kahan"):
        p, opt = _run(mode, 200, lr=1e-3)
        assert p.dtype == BF16 and p.grad.dtype == BF16
        assert (p.double() - exact).abs().max().item() <= 2 ** -9, (mode, p)  # 0.8 rounded: within half a gap
    # stochastic: each step adds an unbiased error of standard deviation at most gap / 2 (gap = 2**-8 in [0.5, 1)),
    # so after 200 steps the mean of 400 weights is within 5 * sqrt(200 / 400) * gap / 2 of the exact value
    p, _ = _run("stochastic", 200, lr=1e-3, n=400)
    assert p.dtype == BF16
    assert abs(p.double().mean().item() - exact) < 5 * math.sqrt(200 / 400) * 2 ** -9
    assert p.double().std().item() > 0                                   # the weights did take different paths
    a, _ = _run("stochastic", 50, lr=1e-3)
    b, _ = _run("stochastic", 50, lr=1e-3)
    assert torch.equal(a.data, b.data)                                    # seeded


def test_wrapper_leaves_state_to_the_inner_optimizer():
    p, opt = _run("kahan", 3, torch.optim.SGD, lr=1e-3, momentum=0.9)
    buf = opt.optimizer.state[p]["momentum_buffer"]
    assert buf.dtype == torch.float32 and buf.shape == p.shape            # computed on the fp32 copy, as said
    assert opt.state_dict()["state"][0]["momentum_buffer"] is buf
    p, opt = _run("master", 3, torch.optim.Adam, lr=1e-3)
    assert set(opt.optimizer.state[p]) == {"step", "exp_avg", "exp_avg_sq"}
    assert torch.equal(opt.master[p].to(BF16), p.data)


def test_plateau_experiment_nearest_stops_and_the_fixes_reach_fp32():
    curves = plateau_experiment()
    assert set(curves) == {"fp32", "nearest", "master", "kahan", "stochastic"}
    assert all(len(c) == 301 and c[0] == curves["fp32"][0] for c in curves.values())
    fp32 = curves["fp32"][-1]
    assert curves["nearest"][-1] > 10 * fp32                              # the plateau: measured 0.30 vs 0.010
    assert curves["nearest"][-1] == curves["nearest"][-50]                # and it is flat: no update lands
    for mode in ("master", "kahan", "stochastic"):
        assert curves[mode][-1] < 1.2 * fp32, (mode, curves[mode][-1], fp32)
    assert plateau_experiment(steps=20) == plateau_experiment(steps=20)  # deterministic
