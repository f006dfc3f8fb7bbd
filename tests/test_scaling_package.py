"""ampkit.scaling as a package: the Scaler protocol, the re-exported names, one validator rule, the shared replay."""
from __future__ import annotations

import ast
import importlib
import inspect
import math
import pkgutil
from pathlib import Path

import nbformat
import pytest
import torch

import ampkit.scaling
from ampkit.lessons.loss_scaling import train_task, underflow_task
from ampkit.protocols import Scaler as ProtocolScaler
from ampkit.protocols import as_scaler
from ampkit.scaling import (
    DynamicLossScaler,
    DynamicScalerRule,
    MindSporeDynamicRule,
    MindSporeFixedRule,
    NoLossScaler,
    Scaler,
    ScaleRule,
    StaticLossScaler,
    TorchGradScalerRule,
    log2_ceiling,
    log2_histogram,
    replay,
    replay_grad_max,
    safe_window,
    scale_report,
    scale_sweep,
)

ROOT = Path(__file__).resolve().parents[1]
SCALERS = [lambda: NoLossScaler(), lambda: StaticLossScaler(8.0), lambda: DynamicLossScaler(),
           lambda: torch.amp.GradScaler("cpu"), lambda: torch.amp.GradScaler("cpu", enabled=False)]


# --- the Scaler protocol --------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", SCALERS, ids=["none", "static", "dynamic", "torch", "torch-disabled"])
def test_every_scaler_satisfies_the_protocol(make):
    scaler = make()
    assert isinstance(as_scaler(scaler), Scaler) and Scaler is ProtocolScaler
    assert isinstance(scaler, Scaler) != isinstance(scaler, torch.amp.GradScaler)   # torch's lacks last_step_skipped


@pytest.mark.parametrize("make", SCALERS, ids=["none", "static", "dynamic", "torch", "torch-disabled"])
def test_protocol_calls_bind_on_every_scaler(make):
    """Not just the names: every call the protocol declares binds with the protocol's arguments."""
    scaler = make()
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    calls = {"scale": (torch.ones(()),), "unscale_": (opt,), "step": (opt,), "update": (), "get_scale": (),
             "is_enabled": (), "state_dict": (), "load_state_dict": ({"scale": 1.0},)}
    declared = {n for n, v in vars(Scaler).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert declared == set(calls)
    for name, args in calls.items():
        inspect.signature(getattr(scaler, name)).bind(*args)
    inspect.signature(scaler.update).bind(2.0)          # update(new_scale) too


class _Partial:
    def scale(self, outputs):
        return outputs

    def step(self, optimizer):
        return None


def test_protocol_refuses_objects_missing_a_call():
    assert not isinstance(_Partial(), Scaler)
    assert not isinstance(None, Scaler) and not isinstance(MindSporeFixedRule(), Scaler)


@pytest.mark.parametrize("rule", [TorchGradScalerRule(), MindSporeDynamicRule(), MindSporeFixedRule(),
                                  DynamicScalerRule(hysteresis=2)])
def test_rules_satisfy_scale_rule(rule):
    assert isinstance(rule, ScaleRule) and not isinstance(DynamicLossScaler(), ScaleRule)


def test_train_task_accepts_torchs_scaler_through_the_protocol():
    sc = torch.amp.GradScaler("cpu")
    run = train_task(underflow_task(), "fp16", sc, steps=3)
    assert run.scaler is sc and isinstance(as_scaler(sc), Scaler) and len(run.losses) == 3


# --- structure ------------------------------------------------------------------------------------------------
def _modules():
    return [importlib.import_module(i.name) for i in pkgutil.iter_modules(ampkit.scaling.__path__, "ampkit.scaling.")]


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_each_module_is_small_and_declares_its_names(module):
    lines = Path(module.__file__).read_text().count("\n")
    assert lines <= 400, f"{module.__name__}: {lines} lines"   # (its __all__: tests/test_public_api.py)


def _sources() -> list[str]:
    out = [f.read_text() for pattern in ("tests/**/*.py", "benchmarks/*.py", "ampkit/**/*.py")
           for f in ROOT.glob(pattern)]
    for nb in ROOT.glob("notebooks/*.ipynb"):
        cells = nbformat.read(nb, as_version=4).cells
        out += ["\n".join(line for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!")))
                for c in cells if c.cell_type == "code"]
    return out


def test_every_name_the_kit_imports_from_ampkit_scaling_is_there():
    wanted: set[str] = set()
    stale: list[str] = []
    for text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == "ampkit.scaling":
                wanted |= {a.name for a in node.names}
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and "ampkit.scaling_rules" in (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]):
                stale.append(ast.unparse(node))
    assert not stale, f"the old module is gone, import from ampkit.scaling: {stale}"
    assert {"DynamicLossScaler", "replay_flags", "StaticLossScaler"} <= wanted
    missing = sorted(n for n in wanted if not hasattr(ampkit.scaling, n))
    assert not missing, missing


# --- one validator rule: wrong type -> TypeError, wrong value -> ValueError -----------------------------------
@pytest.mark.parametrize("call,err", [
    (lambda: DynamicLossScaler(growth_interval=2.5), TypeError),
    (lambda: DynamicLossScaler(growth_interval=0), ValueError),
    (lambda: StaticLossScaler("8"), TypeError),
    (lambda: StaticLossScaler(-8.0), ValueError),
    (lambda: log2_histogram(torch.ones(2), lo=1.5), TypeError),
    (lambda: log2_histogram(torch.ones(2), lo=2, hi=2), ValueError),
    (lambda: log2_histogram(torch.ones(2), bins_per_octave=0), ValueError),
    (lambda: scale_report(torch.ones(2), 2.5), TypeError),
    (lambda: scale_sweep(torch.ones(2), "fp16", 3, 2), ValueError),
    (lambda: scale_sweep(torch.ones(2), "fp16", "0", 2), TypeError),
    (lambda: safe_window(torch.ones(2), max_flushed="1%"), TypeError),
    (lambda: safe_window(torch.ones(2), max_flushed=1.0), ValueError),
    (lambda: MindSporeDynamicRule(scale_window=2.5), TypeError),
    (lambda: MindSporeDynamicRule(scale_window=0), ValueError),
    (lambda: MindSporeFixedRule(loss_scale="big"), TypeError),
    (lambda: underflow_task(loss_weight="tiny"), TypeError),
    (lambda: underflow_task(loss_weight=0.0), ValueError),
    (lambda: train_task(underflow_task(), steps=1.0), TypeError),
    (lambda: train_task(underflow_task(), steps=0), ValueError),
    (lambda: NoLossScaler().update(new_scale=2.0), ValueError),
])
def test_same_mistake_same_exception(call, err):
    with pytest.raises(err):
        call()


# --- the one replay loop --------------------------------------------------------------------------------------
def test_replay_is_the_dynamic_rule_replayed():
    gm = [2.0**-20 * (1 + (i % 3)) for i in range(80)]
    kw = dict(init_scale=2.0**34, growth_interval=3, hysteresis=2, min_scale=2.0**20)
    r, rr = replay(gm, "fp16", **kw), replay_grad_max(DynamicScalerRule(**kw), gm, "fp16")
    assert (r.scales, r.overflow, r.skipped, r.final_scale) == (rr.scales, rr.overflow, rr.skipped, rr.final_scale)
    assert r.skipped > 0 and rr.applied_overflow == 0


def test_dynamic_scaler_rule_equals_the_scaler_itself():
    """The rule runs DynamicLossScaler's own update: same scales as the scaler stepping on inf/finite grads."""
    flags = [i % 7 in (0, 1) for i in range(60)]
    rule, scaler = DynamicScalerRule(init_scale=2.0**10, growth_interval=4, hysteresis=2), DynamicLossScaler(
        init_scale=2.0**10, growth_interval=4, hysteresis=2)
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.0)
    scaler.scale(p.sum())                  # as torch: step() before any scale() raises
    for bad in flags:
        assert rule.scale == scaler.get_scale()
        p.grad = torch.tensor([math.inf if bad else 1.0])
        scaler.step(opt)
        scaler.update()
        rule.update(bad)
    assert rule.scale == scaler.get_scale()


def test_log2_ceiling_is_where_replays_overflow():
    gm = [2.0**-20, 2.0**-3, 0.0, 1.0]
    ceiling = log2_ceiling(gm, "fp16")
    assert math.isnan(ceiling[2]) and ceiling[3] == math.log2(65520.0)
    for k in range(0, 40):
        r = replay_grad_max(MindSporeFixedRule(2.0**k), gm, "fp16")
        assert r.overflow == [g > 0 and k >= c for g, c in zip(gm, ceiling)]
    with pytest.raises(ValueError, match="finite"):
        log2_ceiling([math.nan])
