"""Training runs for tests/test_diagnose_watch.py: the doctor's scenarios as step functions, and helpers that run
a set-up plain or under the always-on hunter and compare two training states bit for bit."""
import copy
from types import SimpleNamespace

import torch
import torch.nn.functional as F
import torch.nn.modules.module as module_globals
import torch.optim.optimizer as optimizer_globals

from ampkit.data import make_blobs
from ampkit.diagnose import NonFiniteHunter
from ampkit.lessons.amp_in_practice import SPIKE_FACTOR
from ampkit.models import MLP
from ampkit.precision import apply_level
from ampkit.scaling import DynamicLossScaler


# --- the doctor's scenarios as step functions (the same models, data, scalers and settings as scenarios.py) ------
def task(seed=0):
    X, y = make_blobs(64, n_features=8, n_classes=3, seed=seed)
    torch.manual_seed(seed)
    return MLP(8, 32, 3, depth=2), X, y


def make_batches(X, y, steps, poison=frozenset(), fixed_batch=False, factor=1e5):
    """``poison``: steps whose inputs are multiplied by ``factor`` (1e5: a forward overflow in fp16)."""
    out = []
    for step in range(steps):
        i = 0 if fixed_batch else (step * 16) % 64
        xb, yb = X[i:i + 16], y[i:i + 16]
        out.append((xb * factor if step in poison else xb, yb))
    return out


def amp_run(model, X, y, steps, dtype, scaler, loss_fn=F.cross_entropy, lr=0.05, poison=frozenset(), factor=1e5):
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype):
            out = model(xb)
        loss = loss_fn(out.float(), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return SimpleNamespace(model=model, optimizer=opt, scaler=scaler, step=step,
                           batches=make_batches(X, y, steps, poison, factor=factor))


def forward_overflow(fixed):
    model, X, y = task()
    with torch.no_grad():
        model.net[2].weight.mul_(1e5)
        model.net[4].weight.mul_(1e-5)
    return amp_run(model, X, y, 6, torch.bfloat16 if fixed else torch.float16, torch.amp.GradScaler("cpu"), lr=1e-6)


def log_of_zero(fixed):
    def naive(out, target):
        p = torch.softmax(out.half() * 50, dim=1)
        return F.cross_entropy(out, target) - 0.01 * (p * torch.log(p)).sum(1).mean().float()

    def stable(out, target):
        z = out * 50
        return F.cross_entropy(out, target) - 0.01 * (torch.softmax(z, 1) * torch.log_softmax(z, 1)).sum(1).mean()
    model, X, y = task()
    return amp_run(model, X, y, 12, torch.float16, torch.amp.GradScaler("cpu"), stable if fixed else naive)


def transient(fixed):
    model, X, y = task()
    scaler = DynamicLossScaler(hysteresis=2) if fixed else torch.amp.GradScaler("cpu")
    # the scenario's outlier batches: a finite loss, scaled gradients that overflow in the backward pass
    return amp_run(model, X, y, 16, torch.float16, scaler, poison=frozenset({5, 11}), factor=SPIKE_FACTOR)


def scale_too_low(fixed):
    model, X, y = task()
    scaler = torch.amp.GradScaler("cpu") if fixed else torch.amp.GradScaler("cpu", init_scale=1.0,
                                                                             growth_interval=10 ** 6)
    return amp_run(model, X, y, 12, torch.float16, scaler, lambda o, t: F.cross_entropy(o, t) * 1e-4)


def half_model(fixed):
    model, X, y = task()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    if fixed:
        mp = apply_level(model, opt, "O2", "fp16")

        def step(xb, yb):
            mp.zero_grad()
            loss = F.cross_entropy(mp.forward(xb), yb)
            mp.backward(loss, scaler)
            mp.step(scaler)
            return loss
    else:
        model.half()

        def step(xb, yb):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb.half()).float(), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)      # raises: GradScaler refuses fp16 gradients
            scaler.update()
            return loss
    return SimpleNamespace(model=model, optimizer=opt, scaler=scaler, step=step,
                           batches=make_batches(X, y, 6, fixed_batch=True))


def adam_eps(fixed):
    model, X, y = task()
    model.half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4 if fixed else 1e-8)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb.half()).float(), yb) * 1e-3
        loss.backward()
        opt.step()
        return loss
    return SimpleNamespace(model=model, optimizer=opt, scaler=None, step=step,
                           batches=make_batches(X, y, 4, fixed_batch=True))


RECIPES = {"fp16 forward overflow": forward_overflow, "log of zero": log_of_zero,
           "transient spikes": transient, "scale too low": scale_too_low,
           "model.half() + GradScaler": half_model, "adam eps in fp16": adam_eps}


# --- helpers ---------------------------------------------------------------------------------------------------
def tiny_run(rows, bad_at, bad):
    """A seeded MLP 4-8-2, SGD with momentum and ``rows`` inputs of 4 features, the one at ``bad_at`` set to ``bad``."""
    torch.manual_seed(0)
    model = MLP(4, 8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X = torch.randn(rows, 4)
    X[bad_at] = bad
    return model, opt, X


def always_on(run):
    """The always-on hunter: every step under NonFiniteHunter; the first event of each step."""
    events = []
    for args in run.batches:
        with NonFiniteHunter(run.model) as h:
            run.step(*args)
        events.append(h.first)
    return events


def run_plain(run):
    for args in run.batches:
        run.step(*args)


def train_state(run):
    opts = run.optimizer if isinstance(run.optimizer, list) else [run.optimizer]
    scaler = run.scaler
    return {"params": [p.detach().clone() for p in run.model.parameters()],
            "grads": [None if p.grad is None else p.grad.clone() for p in run.model.parameters()],
            "buffers": [b.clone() for b in run.model.buffers()],
            "optimizers": [copy.deepcopy(o.state_dict()) for o in opts if o is not None],
            "scaler": None if scaler is None else scaler.state_dict(),
            "history": scaler_history(scaler),
            "rng": torch.get_rng_state()}


def scaler_history(scaler):
    history = getattr(scaler, "history", None)
    if history is None:
        return None
    return list(history) if isinstance(history, list) else {k: list(v) for k, v in vars(history).items()}


def assert_same(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=f"{path} differs")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, z) in enumerate(zip(a, b)):
            assert_same(x, z, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def installed(model, optimizers):
    """Every place a hook or a mode could hide."""
    mods = [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks), len(m._backward_pre_hooks))
            for m in model.modules()]
    opts = [(len(o._optimizer_step_pre_hooks), len(o._optimizer_step_post_hooks)) for o in optimizers]
    glob = (len(module_globals._global_forward_hooks), len(module_globals._global_forward_pre_hooks),
            len(module_globals._global_backward_hooks), len(optimizer_globals._global_optimizer_pre_hooks),
            len(optimizer_globals._global_optimizer_post_hooks))
    return mods, opts, glob, torch._C._len_torch_dispatch_stack(), torch.is_anomaly_enabled()
