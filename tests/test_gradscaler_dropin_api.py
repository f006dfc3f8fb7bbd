"""ampkit's DynamicLossScaler as a drop-in for torch.amp.GradScaler("cpu"): its calls, state, pickling and errors.

Each behaviour is run on both scalers (PyTorch's test/test_torch.py ``test_grad_scaling_state_dict``,
test/test_cuda.py's GradScaler pickling test, and torch/amp/grad_scaler.py's checks, in our own words). The last
section tests every difference from torch that ampkit keeps on purpose (listed in ``ampkit.scaling``'s docstring,
"Differences from torch.amp.GradScaler").
"""
from __future__ import annotations

import itertools
import pickle
import warnings

import pytest
import torch
from test_gradscaler_dropin import INF, SCALERS, on_both, params, two_layer_case
from torch import nn

import ampkit.scaling
from ampkit.scaling import DynamicLossScaler, NoLossScaler, ScalerUsageError


def started(make, *args, **kwargs):
    """A scaler that has scaled a loss, with an optimizer whose gradients are ready (step 0 of a loop)."""
    scaler = make("cpu", *args, **kwargs)
    p = torch.ones(3, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    scaler.scale((p * 2).sum()).backward()
    return scaler, opt, p


def walk(scaler, pattern: str = "..o.oo....") -> list[float]:
    p = torch.ones(3, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    out = []
    for ch in pattern:
        opt.zero_grad()
        scaler.scale((p * (INF if ch == "o" else 1.0)).sum()).backward()
        scaler.step(opt)
        scaler.update()
        out.append(scaler.get_scale())
    return out


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_calls_before_any_scale_raise_assertion_error(make):
    scaler = make("cpu")
    p = torch.ones(2, requires_grad=True)
    p.grad = torch.ones(2)
    opt = torch.optim.SGD([p], lr=0.1)
    for call in (lambda: scaler.step(opt), lambda: scaler.unscale_(opt), lambda: scaler.update(),
                 lambda: scaler.update(2.0)):
        with pytest.raises(AssertionError, match="scale"):
            call()
    assert torch.equal(p, torch.ones(2))                     # nothing stepped


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_calls_out_of_order(make):
    """torch's error types and words on both; ampkit's message goes on to say what to do instead."""
    scaler, opt, _ = started(make)
    kit = isinstance(scaler, DynamicLossScaler)
    with pytest.raises(RuntimeError, match="[Cc]losure"):
        scaler.step(opt, closure=lambda: 0.0)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called" + (".*divide them again" if kit else "")):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(AssertionError, match=("before any " if kit else "") + "inf check"):
        scaler.update()                                      # no step this iteration


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_fp16_gradients_are_refused(make):
    scaler = make("cpu")
    p = torch.ones(2, dtype=torch.float16, requires_grad=True)
    scaler.scale(p.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.step(torch.optim.SGD([p], lr=0.1))


def new_scale_scenario(make) -> dict:
    scaler, opt, _ = started(make)
    scaler.step(opt)
    with pytest.raises(AttributeError):                      # an int is neither a float nor a tensor
        scaler.update(2)
    for bad in (torch.tensor(2.0, requires_grad=True), torch.tensor([2.0, 3.0])):
        with pytest.raises(AssertionError):
            scaler.update(bad)
    seen = []
    for good in (0.0, INF, 3.3, torch.tensor(1.5, dtype=torch.float64), torch.tensor(0.1, dtype=torch.float16)):
        scaler.update(good)
        seen.append(scaler.get_scale())
    assert seen[:3] == [0.0, INF, pytest.approx(3.3)] and seen[3] == 1.5
    return {"seen": seen, "next": walk(scaler, "..")}


def test_update_new_scale_type_rules():
    on_both(new_scale_scenario)


def settings_scenario(make) -> dict:
    scaler = make("cpu", init_scale=2.0**8, growth_interval=3)
    first = walk(scaler)
    scaler.set_growth_factor(4.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(1)
    got = (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval())
    assert got == (4.0, 0.25, 1) and scaler.is_enabled()
    return {"first": first, "then": walk(scaler), "got": got}


def test_setters_and_getters():
    on_both(settings_scenario)


@pytest.mark.parametrize("lazy", [True, False])
def test_state_dict_moves_everything(lazy):
    def scenario(make):
        source = make("cpu", init_scale=3.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2)
        target = make("cpu", init_scale=6.0, growth_factor=7.0, backoff_factor=0.8, growth_interval=1)
        if lazy:                                         # the target's scale tensor already exists
            assert target.scale(torch.full((1,), 4.0)).item() == 24.0
        target.load_state_dict(source.state_dict())
        got = (target.get_scale(), target.get_growth_factor(), target.get_backoff_factor(),
               target.get_growth_interval(), target.state_dict()["_growth_tracker"])
        assert got == (3.0, 4.0, 0.5, 2, 0)
        return {"got": got, "then": walk(target)}
    on_both(scenario)


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_disabled_scaler_is_a_pass_through(make):
    off, on = make("cpu", enabled=False), make("cpu", init_scale=8.0)
    assert not off.is_enabled() and off.get_scale() == 1.0 and off.state_dict() == {}
    off.load_state_dict({})
    off.load_state_dict(on.state_dict())                     # ignored
    assert off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        on.load_state_dict(off.state_dict())
    loss = torch.tensor(2.0)
    assert off.scale(loss) is loss
    p = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.5)
    (p * INF).sum().backward()
    off.unscale_(opt)
    off.step(opt)                                            # steps, even on inf: nothing checks
    off.update()
    assert not torch.isfinite(p).any()


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_cuda_device_without_cuda_behaves_the_same(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = make("cuda")
    ref = torch.amp.GradScaler("cuda") if torch.cuda.is_available() else None
    assert s.is_enabled() == (ref.is_enabled() if ref is not None else False)
    assert any("CUDA is not available" in str(w.message) for w in caught) == (not s.is_enabled())


@pytest.mark.parametrize("lazy", [True, False])
def test_pickle_round_trip(lazy):
    def scenario(make):
        a = make("cpu", init_scale=3.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2)
        if lazy:
            a.scale(torch.tensor([4.0]))
        b = pickle.loads(pickle.dumps(a))
        got = (b.is_enabled(), b.get_scale(), b.get_growth_factor(), b.get_backoff_factor(),
               b.get_growth_interval(), b.state_dict()["_growth_tracker"])
        assert got == (True, 3.0, 4.0, 0.5, 2, 0)
        p = torch.ones(2, requires_grad=True)
        p.grad = torch.ones(2)
        with pytest.raises(AssertionError):                  # the unpickled scaler starts again at scale()
            b.step(torch.optim.SGD([p], lr=0.1))
        assert b.scale(torch.tensor([4.0])).item() == 12.0
        return {"got": got, "then": walk(b)}
    on_both(scenario)


@pytest.mark.parametrize("make", SCALERS.values(), ids=SCALERS.keys())
def test_pickle_between_step_and_update_is_refused(make):
    scaler, opt, _ = started(make)
    pickle.dumps(scaler)                                     # scaled, no step yet: fine
    scaler.step(opt)
    with pytest.raises(AssertionError, match="pickled"):
        pickle.dumps(scaler)
    scaler.update()
    assert pickle.loads(pickle.dumps(scaler)).get_scale() == scaler.get_scale()


# --- any optimizer, positional arguments ---------------------------------------------------------------------------
def duck_scenario(make) -> dict:
    """Any object with param_groups and step() is an optimizer to the scaler (here: a wrapper, not a subclass)."""
    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

        @property
        def param_groups(self):
            return self.inner.param_groups

        def step(self, *args, **kwargs):
            return self.inner.step(*args, **kwargs)

    control, scaled, data = two_layer_case()
    opt = Wrapper(torch.optim.SGD(scaled[0].parameters(), lr=0.1))
    scaler = make("cpu", init_scale=2.0**20, growth_interval=1)
    for x, y in data:
        for p in params(scaled):
            p.grad = None
        scaler.scale(nn.functional.mse_loss(scaled[0](x), y) * 1e30).backward()   # overflows at first
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    return {"params": [p.detach().clone() for p in params(scaled)], "scale": scaler.get_scale()}


def test_any_object_with_param_groups_and_step():
    out = on_both(duck_scenario)
    assert out["ampkit"]["scale"] < 2.0**20


@pytest.mark.parametrize("args", [("cpu", 2.0**10, 3.0, 0.25, 2, True), ("cpu", 8.0), ("cpu",)])
def test_positional_arguments_mean_the_same(args):
    def walk(make):
        scaler = make(*args)
        p = torch.ones(3, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.1)
        scales = []
        for c in itertools.islice(itertools.cycle([1.0, 1.0, INF, 1.0]), 12):
            opt.zero_grad()
            scaler.scale((p * c).sum()).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        return {"scales": scales, "state": [scaler.state_dict()[k] for k in ("growth_factor", "backoff_factor",
                                                                                "growth_interval", "_growth_tracker")]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_both(walk)


# --- the differences kept on purpose (ampkit.scaling's docstring, "Differences from torch.amp.GradScaler") --------
def test_difference_1_default_device_is_the_losss():
    assert DynamicLossScaler().is_enabled() and walk(DynamicLossScaler(init_scale=4.0)) == walk(
        torch.amp.GradScaler("cpu", init_scale=4.0))
    assert DynamicLossScaler(torch.device("cpu")).scale(torch.tensor(1.0)).item() == 2.0**16


def test_difference_2_a_number_first_is_refused():
    with pytest.raises(TypeError, match="init_scale=1024.0"):
        DynamicLossScaler(1024.0)
    assert torch.amp.GradScaler(1024.0).scale(torch.tensor(1.0)).item() == 2.0**16    # torch: silently 2**16
    with pytest.raises(ValueError, match="device type"):
        DynamicLossScaler("gpu0")


@pytest.mark.parametrize("call, err", [
    (lambda s: s.set_growth_factor(1.0), AssertionError), (lambda s: s.set_backoff_factor(1.5), AssertionError),
    (lambda s: s.set_backoff_factor(0.0), ValueError), (lambda s: s.set_growth_interval(0), ValueError),
    (lambda s: s.set_growth_interval(2.5), TypeError), (lambda s: s.set_growth_factor("2"), TypeError),
])
def test_difference_3_settings_are_checked(call, err):
    ours, ref = DynamicLossScaler("cpu"), torch.amp.GradScaler("cpu")
    call(ref)                                                # torch accepts anything
    with pytest.raises(err):
        call(ours)
    assert ours.state_dict() == DynamicLossScaler("cpu").state_dict()     # unchanged
    with pytest.raises(ValueError, match="> 1"):
        DynamicLossScaler("cpu", growth_factor=0.5, enabled=False)
    torch.amp.GradScaler("cpu", growth_factor=0.5, enabled=False)
    with pytest.raises(TypeError, match="True or False"):
        DynamicLossScaler(enabled="yes")


def test_difference_4_disabled_getters_answer():
    assert DynamicLossScaler("cpu", growth_interval=7, enabled=False).get_growth_interval() == 7
    with pytest.raises(AttributeError):
        torch.amp.GradScaler("cpu", enabled=False).get_growth_interval()


def test_difference_5_scale_of_text():
    with pytest.raises(ValueError, match="tensor"):
        DynamicLossScaler().scale("loss")
    assert not isinstance(torch.amp.GradScaler("cpu").scale("loss"), (str, torch.Tensor))     # a lazy map


def test_difference_6_new_scale_of_shape_one():
    for make in SCALERS.values():
        scaler, opt, _ = started(make)
        scaler.step(opt)
        if make is SCALERS["torch"]:
            with pytest.raises(RuntimeError, match="shape"):
                scaler.update(torch.tensor([1.5]))
        else:
            scaler.update(torch.tensor([1.5]))
            assert scaler.get_scale() == 1.5


def test_difference_7_errors_are_both_types():
    scaler = DynamicLossScaler()
    with pytest.raises(ScalerUsageError) as info:
        scaler.update()
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, AssertionError)
    scaler.scale(torch.tensor(1.0))
    with pytest.raises(ampkit.scaling.ScalerTypeError) as info:
        scaler.unscale_("sgd")
    assert isinstance(info.value, TypeError) and isinstance(info.value, AttributeError)


def test_difference_8_load_state_dict_validates_first():
    ours, ref = DynamicLossScaler("cpu", init_scale=8.0), torch.amp.GradScaler("cpu", init_scale=8.0)
    bad = {"scale": -1.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 10, "_growth_tracker": 0}
    ref.load_state_dict(bad)
    assert ref.get_scale() == -1.0                           # torch loads it
    with pytest.raises(ValueError, match="positive"):
        ours.load_state_dict(bad)
    with pytest.raises(KeyError):
        ref.load_state_dict({"scale": 2.0})
    with pytest.raises(KeyError, match="missing keys"):
        ours.load_state_dict({"scale": 2.0})
    assert ours.state_dict()["scale"] == 8.0
    extra = DynamicLossScaler("cpu", hysteresis=2, consecutive_hysteresis=False).state_dict()
    ref.load_state_dict(extra)                               # torch ignores the extra keys
    assert set(extra) - set(ref.state_dict()) == {"hysteresis", "consecutive_hysteresis", "_overflows_counted",
                                                  "min_scale", "max_scale"}


def test_difference_9_extras_and_the_bf16_warning():
    s = DynamicLossScaler("cpu", init_scale=4.0, hysteresis=2, min_scale=1.0, record_history=True)
    walk(s, ".o")
    assert s.scales == [4.0, 4.0] and s.skipped_steps == [1] and s.last_step_skipped
    with pytest.warns(UserWarning, match="bfloat16"):
        DynamicLossScaler().scale(torch.ones(1, dtype=torch.bfloat16))


def test_difference_10_no_loss_scaler_is_not_the_disabled_scaler():
    n = NoLossScaler()
    assert n.state_dict() == {} and not n.is_enabled()
    n.load_state_dict({})
    with pytest.raises(ValueError, match="1.0"):
        n.load_state_dict({"scale": 8.0})
    p = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.5)
    n.scale((p * INF).sum()).backward()
    n.step(opt)
    n.update()
    assert n.history[-1].found_inf and not n.history[-1].skipped
