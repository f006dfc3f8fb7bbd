"""watch(): a finite step runs with nothing installed; a step that went inf/NaN is replayed from the exact state
before it, under the op-level hunter, and finds what the always-on hunter finds; the state after the replay is the
state after one step."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from _diagnose_runs import (
    RECIPES,
    adam_eps,
    always_on,
    amp_run,
    assert_same,
    forward_overflow,
    installed,
    make_batches,
    run_plain,
    tiny_run,
    train_state,
    transient,
)
from torch import nn

from ampkit.data import make_blobs
from ampkit.diagnose import RecordingScaler, StepFinding, watch
from ampkit.lessons.amp_in_practice import SCENARIOS
from ampkit.scaling import DynamicLossScaler


# --- the tests -------------------------------------------------------------------------------------------------
def test_every_scenario_of_the_doctor_is_covered():
    assert set(RECIPES) == set(SCENARIOS), "a new scenario in scenarios.py needs its recipe here"


@pytest.mark.parametrize("snapshot", ["full", "lazy"])
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("name", sorted(RECIPES))
def test_replay_finds_what_the_always_on_hunter_finds(name, fixed, snapshot):
    if name == "model.half() + GradScaler" and not fixed:
        run = RECIPES[name](False)
        watched = watch(run.step, run.model, run.optimizer, run.scaler, snapshot=snapshot)
        before = installed(run.model, [run.optimizer])
        with pytest.raises(ValueError, match="FP16 gradients"):   # the step's own error passes through unchanged
            watched(*run.batches[0])
        assert installed(run.model, [run.optimizer]) == before and watched.findings == []
        return
    expected = always_on(RECIPES[name](fixed))
    plain = RECIPES[name](fixed)
    run_plain(plain)
    run = RECIPES[name](fixed)
    watched = watch(run.step, run.model, run.optimizer, run.scaler, snapshot=snapshot, replays=100)
    for args in run.batches:
        watched(*args)
    found = {f.step: f.event for f in watched.findings if f.replayed}
    lazy_blind = [f.step for f in watched.findings if not f.replayed]
    assert found == {i: e for i, e in enumerate(expected) if e is not None and i not in lazy_blind}
    # only snapshot="lazy" may leave a step unreplayed: the optimizer step made finite gradients inf/NaN
    assert all("lazy" in f.note and "gradients" not in f.seen_in for f in watched.findings if not f.replayed)
    assert snapshot == "lazy" or not lazy_blind
    assert_same(train_state(plain), train_state(run))   # one optimizer step, one scaler update per step, replayed too
    assert bool(watched.findings) == any(e is not None for e in expected)
    if not fixed and name != "scale too low":   # an underflow is no inf/NaN: nothing to find there
        assert watched.findings


def test_scenario_findings_name_the_layer_and_the_phase():
    run = forward_overflow(False)
    watched = watch(run.step, run.model, run.optimizer, run.scaler)
    for args in run.batches:
        watched(*args)
    first = watched.findings[0]
    assert first.step == 0 and first.replayed and "scaler" in first.seen_in and "loss" in first.seen_in
    assert (first.event.phase, first.event.module, first.event.op) == ("forward", "net.2", "aten.addmm")
    assert "skipped the step" in first.describe() and "net.2" in first.describe()
    # the run goes on: every step is skipped and recorded, only the first is replayed (replays=1)
    assert [f.step for f in watched.findings] == list(range(6))
    assert [f.replayed for f in watched.findings] == [True] + [False] * 5
    assert "replays=1" in watched.findings[1].describe()


def test_optimizer_made_nan_is_replayed_with_full_and_reported_with_lazy():
    full, lazy = adam_eps(False), adam_eps(False)
    w_full = watch(full.step, full.model, full.optimizer)
    w_lazy = watch(lazy.step, lazy.model, lazy.optimizer, snapshot="lazy")
    for a, b in zip(full.batches, lazy.batches):
        w_full(*a)
        w_lazy(*b)
    f, g = w_full.findings[0], w_lazy.findings[0]
    assert f.step == g.step and f.seen_in == g.seen_in == ("parameters",)
    assert f.replayed and f.event.phase == "outside the model"     # inside optimizer.step()
    assert not g.replayed and g.event is None and "snapshot='full'" in g.describe()


def _dropout_run(seed=0):
    """Hidden unit 0 feeds the output layer with an fp16-overflowing weight: a step overflows exactly when dropout
    keeps unit 0 (one sample per step), so the random state decides what the hunter finds."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
    with torch.no_grad():
        model[0].bias[0] = 5.0
        model[3].weight[:, 0] = 3e4
    X, y = make_blobs(12, n_features=8, n_classes=3, seed=seed)
    run = amp_run(model, X, y, 12, torch.float16, torch.amp.GradScaler("cpu"), lr=1e-6)
    run.batches = [(X[i:i + 1], y[i:i + 1]) for i in range(12)]
    return run


def test_dropout_replay_uses_the_same_random_state():
    expected = always_on(_dropout_run())
    plain = _dropout_run()
    run_plain(plain)
    run = _dropout_run()
    watched = watch(run.step, run.model, run.optimizer, run.scaler, replays=100)
    for args in run.batches:
        watched(*args)
    assert 0 < len(watched.findings) < len(run.batches)      # some masks keep unit 0, some drop it
    assert {f.step: f.event for f in watched.findings} == {i: e for i, e in enumerate(expected) if e is not None}
    assert_same(train_state(plain), train_state(run))
    # the same replay without restoring the RNG draws other dropout masks: another result (the test can fail)
    run = _dropout_run()
    careless = watch(run.step, run.model, run.optimizer, run.scaler, replays=100)
    careless._restore_rng = False
    for args in run.batches:
        careless(*args)
    assert {f.step: f.event for f in careless.findings} != {f.step: f.event for f in watched.findings}


@pytest.mark.parametrize("snapshot", ["full", "lazy"])
def test_state_after_replay_is_one_step_with_adam_batchnorm_and_ampkit_scaler(snapshot):
    def make():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = DynamicLossScaler(init_scale=2.0 ** 10, growth_interval=3)
        X, y = make_blobs(64, n_features=8, n_classes=3, seed=1)

        def step(xb, yb):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(xb)
            loss = F.cross_entropy(out.float(), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss
        batches = make_batches(X, y, 8, poison=frozenset({0, 4}))   # step 0: Adam's state does not exist yet
        return SimpleNamespace(model=model, optimizer=opt, scaler=scaler, step=step, batches=batches)
    plain = make()        # make() seeds the global RNG: build and run one set-up after the other
    run_plain(plain)
    run = make()
    watched = watch(run.step, run.model, run.optimizer, run.scaler, snapshot=snapshot, replays=100)
    for args in run.batches:
        watched(*args)
    assert [f.step for f in watched.findings] == [0, 4] and all(f.replayed for f in watched.findings)
    assert all("scaler" in f.seen_in for f in watched.findings)
    assert_same(train_state(plain), train_state(run))
    assert run.optimizer.state_dict()["state"][0]["step"] == 6      # 8 steps, 2 skipped: no double step
    assert len(run.scaler.history) == 8                               # one scaler update per step


def test_two_optimizers_share_a_recording_scaler():
    """PyTorch's AMP examples: several models and optimizers, one scaler, one update(); here wrapped in the kit's
    RecordingScaler, whose history must not get the replayed step twice."""
    def make():
        torch.manual_seed(0)
        a, b = nn.Linear(8, 16), nn.Linear(16, 3)
        model = nn.Sequential(a, nn.ReLU(), b)
        opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1, momentum=0.9), torch.optim.Adam(b.parameters())
        scaler = RecordingScaler(torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2))
        X, y = make_blobs(64, n_features=8, n_classes=3, seed=2)

        def step(xb, yb):
            opt_a.zero_grad()
            opt_b.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(xb).float(), yb)
            scaler.scale(loss).backward()
            scaler.step(opt_a)
            scaler.step(opt_b)
            scaler.update()
            return loss
        return SimpleNamespace(model=model, optimizer=[opt_a, opt_b], scaler=scaler, step=step,
                               batches=make_batches(X, y, 6, poison=frozenset({3})))
    plain = make()
    run_plain(plain)
    run = make()
    watched = watch(run.step, run.model, run.optimizer, run.scaler)
    for args in run.batches:
        watched(*args)
    assert [(f.step, f.replayed) for f in watched.findings] == [(3, True)]
    assert_same(train_state(plain), train_state(run))
    # RecordingScaler records each scaler.step(): two per step, none twice
    assert run.scaler.history.skipped == [False] * 6 + [True] * 2 + [False] * 4


def test_gradient_accumulation_micro_step_restores_the_gradients():
    def make():               # the inf is in the second micro-batch of the second group: gradients exist already
        model, opt, X = tiny_run(6, (4, 0), float("inf"))

        def micro(x, last):                  # no zero_grad: the gradients add up until the optimizer step
            model(x).square().mean().backward()
            if last:
                opt.step()
                opt.zero_grad()
        return SimpleNamespace(model=model, optimizer=opt, scaler=None, step=micro,
                               batches=[(X[i:i + 1], i % 3 == 2) for i in range(6)])
    plain = make()
    run_plain(plain)
    run = make()
    watched = watch(run.step, run.model, run.optimizer)
    for args in run.batches:
        watched(*args)
    assert watched.findings[0].step == 4 and watched.findings[0].event.phase == "forward"
    assert_same(train_state(plain), train_state(run))


def test_scaler_skip_seen_when_the_step_drops_its_gradients_at_the_end():
    run = forward_overflow(False)
    inner = run.step

    def step(xb, yb):
        inner(xb, yb)
        run.optimizer.zero_grad(set_to_none=True)
        return torch.zeros(())             # neither the loss nor the gradients show it: the scaler does
    watched = watch(step, run.model, run.optimizer, run.scaler)
    watched(*run.batches[0])
    assert watched.last.seen_in == ("scaler",) and watched.last.event.module == "net.2"


@pytest.mark.parametrize("snapshot", ["full", "lazy"])
def test_off_installs_nothing_and_a_finite_step_runs_bare(snapshot):
    run = forward_overflow(True)
    before = installed(run.model, [run.optimizer])
    seen = []

    def step(xb, yb):
        seen.append(installed(run.model, [run.optimizer]))
        return run.step(xb, yb)
    watched = watch(step, run.model, run.optimizer, run.scaler, snapshot=snapshot)
    assert installed(run.model, [run.optimizer]) == before          # created, not called: nothing
    for args in run.batches:
        watched(*args)
    assert watched.findings == [] and watched.last is None and watched.calls == 6
    assert installed(run.model, [run.optimizer]) == before          # after the calls: nothing left
    mods, opts, glob, modes, anomaly = seen[0]
    assert (mods, glob, modes, anomaly) == before[0:1] + before[2:]   # during a call: no module hook, no mode
    assert opts == ([(1, 0)] if snapshot == "lazy" else before[1])    # lazy: one optimizer pre-hook, in the call
    assert seen.count(seen[0]) == len(seen)


def test_snapshot_memory_full_copies_lazy_does_not():
    run = transient(False)
    full = watch(run.step, run.model, run.optimizer, run.scaler)
    full(*run.batches[0])                   # the first call: no gradients yet, so none copied
    full(*run.batches[1])
    n = sum(p.numel() * 4 for p in run.model.parameters())
    assert full.snapshot_bytes == 2 * n     # parameters + gradients (SGD without momentum keeps no state)
    lazy = watch(run.step, run.model, run.optimizer, run.scaler, snapshot="lazy")
    lazy(*run.batches[2])
    assert lazy.snapshot_bytes == 0


def test_huge_finite_values_are_no_finding():
    lin = nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.fill_(1e30)              # finite, but its fp32 2-norm is inf: the fused check's false alarm
    watched = watch(lambda x: lin(x).sum(), lin)
    watched(torch.zeros(1, 2))
    assert watched.findings == [] and watched.last is None


def test_finding_describe_and_type():
    run = transient(False)
    watched = watch(run.step, run.model, run.optimizer, run.scaler)
    for args in run.batches[:6]:
        watched(*args)
    f = watched.last
    assert isinstance(f, StepFinding) and f.step == 5 and "step 5" in f.describe()


def test_bad_input():
    lin = nn.Linear(1, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="callable"):
        watch(None, lin)
    with pytest.raises(TypeError, match="nn.Module"):
        watch(lambda: None, "model")
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        watch(lambda: None, lin, "sgd")
    with pytest.raises(TypeError, match="scale, step, update"):
        watch(lambda: None, lin, opt, scaler=2.0)
    with pytest.raises(ValueError, match="'full', 'lazy'"):
        watch(lambda: None, lin, opt, snapshot="eager")
    with pytest.raises(ValueError, match="replays must be an int >= 0"):
        watch(lambda: None, lin, opt, replays=-1)
    with pytest.raises(TypeError, match="replays must be an int"):
        watch(lambda: None, lin, opt, replays=1.5)


def test_lazy_copies_parameters_only_for_a_bad_step_without_scaler():
    def make():
        model, opt, X = tiny_run(5, (3, 1), float("nan"))

        def step(x):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()              # no scaler: NaN gradients become NaN parameters
            return loss
        return SimpleNamespace(model=model, optimizer=opt, scaler=None, step=step,
                               batches=[(X[i:i + 1],) for i in range(5)])
    plain = make()
    run_plain(plain)
    run = make()
    watched = watch(run.step, run.model, run.optimizer, snapshot="lazy", replays=5)
    sizes = []
    for args in run.batches:
        watched(*args)
        sizes.append(watched.snapshot_bytes)
    assert sizes[:3] == [0, 0, 0] and sizes[3] > 0          # the first copy is taken for step 3, the bad one
    first = watched.findings[0]
    assert first.step == 3 and first.replayed and first.event.phase == "forward" and not first.event.inputs_finite
    assert_same(train_state(plain), train_state(run))
