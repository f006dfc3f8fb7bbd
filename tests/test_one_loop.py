"""One training loop, one seeded builder, no lesson reseeding torch's global generator (issue #29, item 2).

Read from ampkit's source with ``ast`` (nothing imported):

(a) outside ``ampkit/train.py`` no module calls ``.backward(`` / an optimizer's ``.step()`` / a scaler's
    ``.scale(`` or ``.step(`` except the (module, function) pairs of :data:`LOOP_ALLOWED`, each with its reason:
    the pieces ``train_step`` is made of, scaler wrappers passing calls through, and demonstrations of one step's
    insides (one backward whose gradients are the result, an error that is the lesson) — none a training loop;
(b) outside ``ampkit/models.py`` nothing seeds torch's global generator (``torch.manual_seed``, ``torch.seed``,
    ``torch.set_rng_state``, …) except inside a ``with torch.random.fork_rng(...)`` block;
(c) outside ``ampkit/models.py`` the kit's models (the ``nn.Module`` classes of ``ampkit.models``) are built only
    through ``ampkit.models.build_model``, the one seeded builder.

Then at run time: each lesson's entry points, called at cheap sizes, leave ``torch.random.get_rng_state()`` as it
was; and planted faults prove the checker catches a stray backward, a bare ``manual_seed`` and a direct model.
"""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "ampkit"

#: (module, function) -> why it calls backward / step / scale itself rather than ampkit.train.train_step.
LOOP_ALLOWED: dict[tuple[str, str], str] = {
    ("ampkit.precision.mixed", "MixedPrecision.backward"): "train_step's backward: scaler.scale(loss).backward()",
    ("ampkit.precision.mixed", "MixedPrecision.step"): "train_step's step: scaler.step(optimizer) or optimizer.step()",
    ("ampkit.protocols", "GradScalerSkips.scale"): "torch's GradScaler behind the Scaler protocol: a pass-through",
    ("ampkit.protocols", "GradScalerSkips.step"): "torch's GradScaler behind the Scaler protocol: a pass-through",
    ("ampkit.diagnose.health", "RecordingScaler.scale"): "a scaler wrapper recording history: a pass-through",
    ("ampkit.diagnose.health", "RecordingScaler.step"): "a scaler wrapper recording history: a pass-through",
    ("ampkit.scaling.base", "ScalerBase.step"): "the scaler's own step: optimizer.step() unless a grad is inf/NaN",
    ("ampkit.scaling.base", "ScalerBase._step_amp_aware"): "the scaler's step for an optimizer that unscales "
                                                           "itself (fused, found_inf on the device)",
    ("ampkit.precision.bf16_updates", "BF16Updates.step"): "an optimizer wrapper: its step runs the inner step",
    ("ampkit.precision.checks", "adam_step_in"): "one Adam step on given gradients (no loss, no backward): "
                                                 "what Adam's state holds in a format",
    ("ampkit.scaling.gradients", "capture_gradients"): "one backward, no step: the gradients are the result",
    ("ampkit.lessons.mindspore_and_paddle", "torch_scales"): "the real torch GradScaler driven through a given "
                                                             "overflow stream (notebook 09): the scales are the result",
    ("ampkit.lessons.mindspore_and_paddle", "paddle_scales"): "the real Paddle GradScaler driven through a given "
                                                              "overflow stream (notebook 09): scales are the result",
    ("ampkit.diagnose.headroom", "measure_headroom"): "the doctor's measurement: backward passes to read each "
                                                      "layer's activations and gradients, no optimizer step",
    ("ampkit.diagnose.distributed", "_worker"): "one rank, in its own process, of a data-parallel replay: the "
                                                "gradients all-reduced by hand between backward and the scaler's "
                                                "step, as DDP does inside backward",
    ("ampkit.lessons.amp_in_practice", "_forward_overflow"): "the diagnosis: one forward+backward watched op by "
                                                             "op (the run after it is train_step's)",
    ("ampkit.lessons.amp_in_practice", "_half_model"): "the broken case: GradScaler refusing fp16 gradients is "
                                                       "the lesson (the fix is train_step's)",
    ("ampkit.lessons.amp_in_practice", "diagnose_model"): "the doctor's diagnosis of the learner's model: one "
                                                          "hunted forward+backward, no step",
    ("ampkit.lessons.fp8_scaling", "gemm_tensors"): "one backward to read X, W, dY and dW, no step",
    ("ampkit.lessons.fp8_scaling", "backward_operand_formats"): "one backward of one Fp8Linear to measure the "
                                                                "formats of its backward GEMMs' operands",
    ("ampkit.lessons.loss_scaling", "gradient_agreement.grads"): "one backward at a scale: the gradients are "
                                                                 "compared with fp32's, no step",
    ("ampkit.lessons.transformers_compiled_and_sharded.compiled", "fp32_region_grad"):
        "pytorch#153044 reproduced: one backward, the weight gradient is the result",
    ("ampkit.lessons.transformers_in_16_bits.activations", "gradient_errors"): "the first step's gradients per "
                                                                               "recipe compared, no step",
    ("ampkit.lessons.transformers_in_16_bits.weights", "plateau_experiment"):
        "a bare parameter vector (no nn.Module) stepped by BF16Updates, an optimizer wrapper that is not a "
        "torch.optim.Optimizer; the loss of the weights before each step is the curve",
    ("ampkit.lessons.transformers_in_16_bits.weights", "unscale_error"): "GradScaler's refusal of fp16 gradients: "
                                                                        "the error message is the result",
    ("ampkit.lessons._exercises.amp_in_practice", "_clipped_update"):
        "notebook 05's exercise 1: one fp16 step with clip_grad_norm_ before or after unscale_ (the order is the "
        "question, so the step's insides are spelled out); its update's length is the answer",
    ("ampkit.lessons._exercises.amp_in_practice", "solution_1"):
        "notebook 05's exercise 1 worked out: one scaled backward, whose gradients' norm is read before any step",
}

#: (module, function) -> why it sets torch's global generator outside a fork_rng block.
SEED_ALLOWED: dict[tuple[str, str], str] = {
    ("ampkit.diagnose.watch", "WatchedStep._restore"): "the replay puts back the RNG state it saved before the "
                                                       "step it replays (the learner's own state, not a seed)",
}

#: (module, function) -> why it builds a kit model without build_model.
BUILD_ALLOWED: dict[tuple[str, str], str] = {
    ("ampkit.lessons._exercises.transformers_in_16_bits", "solution_3"):
        "notebook 07's exercise 3 worked out: one RMSNorm layer (no weights to seed) applied to one fp16 row, its "
        "statistic written out and in fp32; no model is built",
}

SEEDING = {"manual_seed", "seed", "set_rng_state"}   # torch.<name> / torch.random.<name> / torch.cuda.<name>...


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    else:
        parts.append("?")
    return ".".join(reversed(parts))


def kit_models(models_source: str) -> set[str]:
    """The classes ``ampkit/models.py`` defines (the kit's models and their blocks)."""
    return {n.name for n in ast.parse(models_source).body if isinstance(n, ast.ClassDef)}


def _loop_call(call: ast.Call) -> str | None:
    """``recv.backward(...)``, an optimizer's step (``recv.step()`` without arguments, or any ``step`` of a receiver
    named ``*opt*``; a sink model's, a scaler's or a plot's ``step`` takes arguments) or a scaler's ``scale(...)`` /
    ``step(opt)`` (a receiver named ``*scaler*``)."""
    if not isinstance(call.func, ast.Attribute):
        return None
    recv, attr = _dotted(call.func.value), call.func.attr
    last = recv.split(".")[-1].lower()
    optimizer_step = attr == "step" and (not call.args and not call.keywords or "opt" in last)
    if attr == "backward" or optimizer_step or (attr in ("scale", "step") and "scaler" in last):
        return f"{recv}.{attr}(...)"
    return None


def _seed_call(call: ast.Call, torch_names: set[str]) -> str | None:
    name = _dotted(call.func)
    *owner, last = name.split(".")
    torch_rng = owner in (["torch"], ["torch", "random"], ["torch", "cuda"])   # not a torch.Generator()'s
    if not owner and name in torch_names:     # from torch import manual_seed (as ms)
        return name
    if torch_rng and (last in SEEDING or last.startswith(("manual_seed", "set_rng_state"))):
        return name
    return None


def _is_fork_rng(item: ast.withitem) -> bool:
    return isinstance(item.context_expr, ast.Call) and _dotted(item.context_expr.func).split(".")[-1] == "fork_rng"


def scan(source: str, module: str, models: set[str]) -> list[tuple[str, str, str, int]]:
    """Every (check, function, call, line) in ``source``: ``loop`` (a), ``seed`` (b), ``build`` (c)."""
    tree = ast.parse(source)
    torch_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   and n.module in ("torch", "torch.random", "torch.cuda") for a in n.names
                   if a.name in SEEDING or a.name.startswith(("manual_seed", "set_rng_state"))}
    model_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   and n.module == "ampkit.models" for a in n.names if a.name in models}
    found: list[tuple[str, str, str, int]] = []

    def visit(node: ast.AST, where: list[str], forked: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = [*where, node.name]
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_fork_rng(i) for i in node.items):
            forked = True
        if isinstance(node, ast.Call):
            func = ".".join(where) or "<module>"
            if (hit := _loop_call(node)) is not None:
                found.append(("loop", func, hit, node.lineno))
            if (hit := _seed_call(node, torch_names)) is not None and not forked:
                found.append(("seed", func, hit, node.lineno))
            name = _dotted(node.func)
            qualified = name.startswith(("models.", "ampkit.models.")) and name.split(".")[-1] in models
            if name in model_names or qualified:
                found.append(("build", func, name, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, where, forked)

    visit(tree, [], False)
    return found


def _package_findings() -> list[tuple[str, str, str, str, int]]:
    models = kit_models((PKG / "models.py").read_text(encoding="utf-8"))
    out = []
    for path in sorted(PKG.rglob("*.py")):
        module = ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        for check, func, call, line in scan(path.read_text(encoding="utf-8"), module, models):
            out.append((check, module, func, call, line))
    return out


FINDINGS = _package_findings()
ALLOWED = {"loop": LOOP_ALLOWED, "seed": SEED_ALLOWED, "build": BUILD_ALLOWED}
EXEMPT = {"loop": "ampkit.train", "seed": "ampkit.models", "build": "ampkit.models"}


@pytest.mark.parametrize("check", ["loop", "seed", "build"])
def test_no_module_bypasses_the_loop_or_the_builder(check):
    bad = [f"{m}.{f} line {line}: {call}" for c, m, f, call, line in FINDINGS
           if c == check and m != EXEMPT[check] and (m, f) not in ALLOWED[check]]
    hint = {"loop": "call ampkit.train.train_step (hooks: forward_loss, after_backward) or, for a demonstration of "
                    "one step's insides, add it to LOOP_ALLOWED with its reason",
            "seed": "build seeded models with ampkit.models.build_model, draw with a torch.Generator, or seed "
                    "inside `with torch.random.fork_rng(devices=[]):`",
            "build": "build kit models with ampkit.models.build_model(name, seed=..., **kw)"}[check]
    assert not bad, f"{hint}:\n" + "\n".join(bad)


def test_every_allowance_is_still_needed_and_reasoned():
    for check, allowed in ALLOWED.items():
        used = {(m, f) for c, m, f, _, _ in FINDINGS if c == check}
        stale = sorted(set(allowed) - used)
        assert not stale, f"{check}: allowed but no longer found (drop them): {stale}"
        assert all(len(reason) > 20 for reason in allowed.values())


def test_the_lessons_still_use_train_step():
    """The loops moved into train_step stay there: each of these lessons names it."""
    for rel in ("lessons/amp_in_practice.py", "lessons/fp8_scaling.py", "lessons/loss_scaling.py",
                "lessons/transformers_in_16_bits/weights.py", "sinking/trainer.py"):
        assert "train_step(" in (PKG / rel).read_text(encoding="utf-8"), rel


# -- planted faults: the checker sees what it must --------------------------------------------------------------

PLANTED = '''
import torch
from torch import manual_seed as ms
from ampkit.models import MLP, build_model
from ampkit import models

def stray(model, opt, scaler, x):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    scaler.scale(loss)

def reseeds():
    torch.manual_seed(0)
    torch.random.manual_seed(1)
    ms(2)
    torch.seed()

def protected():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build_model("mlp")

def direct():
    return MLP(4, 8, 2), models.DecoderLM()

def fine(sink, ax, g):
    sink.step(1, 2); ax.step([0], [1]); self_step(*args); torch.Generator().manual_seed(3); g.manual_seed(4)
'''


def test_planted_faults_are_caught():
    models = kit_models((PKG / "models.py").read_text(encoding="utf-8"))
    found = scan(textwrap.dedent(PLANTED), "planted", models)
    by = {(c, f, call) for c, f, call, _ in found}
    assert {("loop", "stray", "loss.backward(...)"), ("loop", "stray", "opt.step(...)"),
            ("loop", "stray", "scaler.scale(...)")} <= by
    assert {("seed", "reseeds", n) for n in ("torch.manual_seed", "torch.random.manual_seed", "ms", "torch.seed")} <= by
    assert {("build", "direct", "MLP"), ("build", "direct", "models.DecoderLM")} <= by
    assert not [x for x in found if x[1] in ("protected", "fine")], found
    assert len(found) == 9, found


# -- at run time: the lessons leave torch's global generator as they found it ------------------------------------

def _entry_points():
    import torch

    from ampkit.lessons import amp_in_practice as amp
    from ampkit.lessons import autocast_and_levels as levels
    from ampkit.lessons import fp8_scaling as fp8
    from ampkit.lessons import loss_scaling as ls
    from ampkit.lessons.transformers_compiled_and_sharded import compiled
    from ampkit.lessons.transformers_in_16_bits import activations, weights
    from ampkit.models import build_model

    task = ls.underflow_task(n_samples=256)
    calls = {
        **{f"amp_in_practice.run_scenario({n!r}, {f})": (lambda n=n, f=f: amp.run_scenario(n, f))
           for n in amp.SCENARIOS for f in (False, True)},
        "amp_in_practice.outlier_run": lambda: amp.outlier_run(torch.amp.GradScaler("cpu"), steps=6, outliers=(4,)),
        "autocast_and_levels.run_level": lambda: levels.run_level("mlp", "O1", steps=2),
        **{f"fp8_scaling.train_mode({m!r})": (lambda m=m: fp8.train_mode(m, steps=2, task=fp8.make_task(0, 128, 64)))
           for m in fp8.TRAIN_FORMATS},
        "fp8_scaling.record_amax_run": lambda: fp8.record_amax_run(steps=2, spikes={}, grad_spikes={}),
        "fp8_scaling.backward_operand_formats": fp8.backward_operand_formats,
        "loss_scaling.train_task": lambda: ls.train_task(task, "fp16", torch.amp.GradScaler("cpu"), steps=2),
        "loss_scaling.gradient_agreement": lambda: ls.gradient_agreement(task, 12),
        "activations.train_side_by_side": lambda: activations.train_side_by_side(
            steps=1, batch_size=2, n_samples=8, n_layers=1, context=16),
        "activations.gradient_errors": lambda: activations.gradient_errors(batch_size=2, n_layers=1, context=16),
        "weights.plateau_experiment": lambda: weights.plateau_experiment(steps=2),
        "weights.lost_updates": weights.lost_updates,
        "weights.train_in_bf16": lambda: weights.train_in_bf16(steps=1),
        "weights.unscale_error": weights.unscale_error,
        **{f"weights.dtype_mismatch({c!r}, {f})": (lambda c=c, f=f: weights.dtype_mismatch(c, f))
           for c in weights.MISMATCHES for f in (False, True)},
        **{f"weights.finetune_stored({f!r})": (lambda f=f: weights.finetune_stored(f, steps=1)) for f in weights.FIXES},
        "compiled.fp32_region_grad": lambda: compiled.fp32_region_grad(False),
        "amp_in_practice.diagnose_model": lambda: amp.diagnose_model(
            build_model("mlp"), torch.zeros(4, 16), torch.zeros(4, dtype=torch.long)),
    }
    return calls


def test_lessons_leave_torchs_global_generator_alone():
    import torch

    torch.manual_seed(20240529)
    moved = []
    for name, call in _entry_points().items():
        before = torch.random.get_rng_state()
        call()
        if not torch.equal(before, torch.random.get_rng_state()):
            moved.append(name)
    assert not moved, f"these lesson calls changed torch's global RNG state: {moved}"
