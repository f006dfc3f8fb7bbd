"""Every framework's loss-scale rule as a named preset: build it, replay it, tabulate its defaults.

Taught in notebook ``03_loss_scaling.ipynb`` (section "Every framework's scaler as a preset"; the cross-framework
table :func:`defaults_table` is generated here). :func:`preset` builds a fresh rule (a
:class:`ampkit.scaling.replays.ScaleRule`) by name with the framework's own argument names and defaults;
:func:`ampkit.scaling.replays.replay_flags` / ``replay_grad_max`` run it; :func:`describe` measures what a rule
does (initial scale, growth, backoff, floor) by feeding it clean and overflowing steps — the table is those
measurements, not typed numbers. Rules and sources: :mod:`ampkit.scaling.rules`,
:mod:`ampkit.scaling.framework_rules`; the facts are in ``docs/reference.md``.

>>> preset("deepspeed").scale, preset("paddle", init_loss_scaling=8192).scale
(65536.0, 8192.0)
>>> preset("pytorch")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown preset 'pytorch'; the presets are: torch, apex, paddle, ..., deepspeed, deepspeed-consecutive
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ampkit._util import check_int
from ampkit.i18n import Word, mark, tr
from ampkit.scaling.framework_rules import (
    ApexDynamicRule,
    DeepSpeedDynamicRule,
    JmpDynamicRule,
    JmpJitDynamicRule,
    KerasLossScaleRule,
    MindSporeFunctionalRule,
    PaddleGradScalerRule,
    RunStopped,
    TFKeras2LossScaleRule,
)
from ampkit.scaling.replays import RuleReplay, ScaleRule, replay_grad_max
from ampkit.scaling.rules import MindSporeDynamicRule, MindSporeFixedRule, TorchGradScalerRule

__all__ = ["Preset", "PRESETS", "preset", "preset_names", "preset_arguments", "describe", "RuleSummary",
           "defaults_table", "replay_presets"]


@dataclass(frozen=True)
class Preset:
    """One framework's rule: ``build(**kwargs)`` with ``fixed`` arguments preset, where it comes from, how it
    sets its initial scale (``init_arg``; ``init_is_power``: that argument is log2 of the scale)."""

    name: str
    framework: str
    build: Callable[..., ScaleRule]
    source: str
    init_arg: str
    fixed: dict[str, Any] = field(default_factory=dict)
    init_is_power: bool = False
    notes: str = ""

    def arguments(self) -> dict[str, Any]:
        """The framework's arguments this preset accepts, with their values here (``inspect.Parameter.empty``
        where the framework has no default)."""
        sig = inspect.signature(self.build)
        return {n: self.fixed.get(n, p.default) for n, p in sig.parameters.items()}

    def make(self, **kwargs: Any) -> ScaleRule:
        """A fresh rule; ``kwargs`` override the preset's arguments (only the framework's own names)."""
        valid = self.arguments()
        bad = sorted(set(kwargs) - set(valid))
        if bad:
            raise TypeError(tr("{framework} has no argument {bad}; its arguments are: {valid}",
                               framework=self.framework, bad=", ".join(map(repr, bad)), valid=", ".join(valid)))
        return self.build(**{**self.fixed, **kwargs})

    def with_log2_init(self, k: int) -> dict[str, Any]:
        """The keyword that starts this preset at scale ``2**k``."""
        return {self.init_arg: int(k) if self.init_is_power else 2.0 ** k}


_SRC = {
    "torch": "torch/amp/grad_scaler.py + aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp (torch 2.13, "
             "installed); tested against torch itself",
    "apex": "NVIDIA/apex apex/amp/scaler.py, LossScaler.__init__/update_scale (last in commit cb65b8ed^: Apex "
            "removed amp in 2025)",
    "paddle": "PaddlePaddle/Paddle python/paddle/amp/grad_scaler.py, GradScaler.__init__ + AmpScaler._update; "
              "paddle/phi/kernels/cpu/scale_kernel.cc (develop, 2.6/3.x defaults)",
    "mindspore": "mindspore/python/mindspore/train/loss_scale_manager.py + nn/wrap/loss_scale.py "
                 "DynamicLossScaleUpdateCell (2.x)",
    "mindspore-amp": "mindspore/python/mindspore/amp.py DynamicLossScaler.adjust; values from the MindSpore "
                     "'Automatic Mix Precision' tutorial",
    "keras": "keras-team/keras keras/src/optimizers/loss_scale_optimizer.py (Keras 3)",
    "tf-keras2": "keras-team/tf-keras tf_keras/mixed_precision/loss_scale_optimizer.py (= TF 2.x "
                 "tensorflow/python/keras/mixed_precision/loss_scale_optimizer.py), _DynamicLossScaleState.update",
    "jmp": "google-deepmind/jmp jmp/_src/loss_scale.py DynamicLossScale.adjust (v0.0.4), op by op; measured with "
           "jax 0.10.2",
    "jmp-jit": "google-deepmind/jmp jmp/_src/loss_scale.py DynamicLossScale.adjust + tree_flatten/tree_unflatten "
               "(v0.0.4) as jax.jit compiles it (XLA algebraic_simplifier.cc HandleDivide); measured with jax 0.10.2",
    "deepspeed": "deepspeedai/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py update_scale + "
                 "runtime/precision_config.py DeepSpeedFP16Config (master, 2026)",
}

#: Every preset, by name (one per framework rule; variants reuse a rule with other arguments).
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("torch", "PyTorch torch.amp.GradScaler", TorchGradScalerRule, _SRC["torch"], "init_scale",
           notes=mark("skips inf/NaN steps; no floor; CPU since torch 2.3")),
    Preset("apex", mark("NVIDIA Apex amp (deprecated)"), ApexDynamicRule, _SRC["apex"], "init_scale",
           notes=mark("min_loss_scale optional (None by default)")),
    Preset("paddle", "Paddle GradScaler", PaddleGradScalerRule, _SRC["paddle"], "init_loss_scaling",
           notes=mark("decr_every_n_nan_or_inf counts overflows in a row; minimize() = step + update")),
    Preset("paddle-tutorial", "Paddle GradScaler(init_loss_scaling=1024)", PaddleGradScalerRule, _SRC["paddle"],
           "init_loss_scaling", {"init_loss_scaling": 1024.0},
           notes=mark("the API docs' example: init_loss_scaling=1024")),
    Preset("paddle-2.2", "Paddle 2.2 GradScaler", PaddleGradScalerRule, _SRC["paddle"] + "; 2.2 docs",
           "init_loss_scaling", {"init_loss_scaling": 2.0**15, "incr_every_n_steps": 1000,
                                 "decr_every_n_nan_or_inf": 2}, notes=mark("Paddle 2.2's defaults")),
    Preset("mindspore", "MindSpore DynamicLossScaleManager", MindSporeDynamicRule, _SRC["mindspore"],
           "init_loss_scale", notes=mark("skips overflow steps")),
    Preset("mindspore-fixed", "MindSpore FixedLossScaleManager", MindSporeFixedRule, _SRC["mindspore"],
           "loss_scale", notes=mark("drop_overflow_update=True: overflowing steps skipped")),
    Preset("mindspore-fixed-apply", "MindSpore FixedLossScaleManager(drop_overflow_update=False)",
           MindSporeFixedRule, _SRC["mindspore"], "loss_scale", {"drop_overflow_update": False},
           notes=mark("overflowing steps APPLIED: inf/NaN reach the weights")),
    Preset("mindspore-amp", mark("MindSpore amp.DynamicLossScaler (functional)"), MindSporeFunctionalRule,
           _SRC["mindspore-amp"], "scale_value", {"scale_value": 2.0**16, "scale_factor": 2, "scale_window": 50},
           notes=mark("no defaults: the tutorial's values; the skip is the user's all_finite")),
    Preset("keras", "Keras 3 LossScaleOptimizer", KerasLossScaleRule, _SRC["keras"], "initial_scale",
           notes=mark("no floor in Keras 3")),
    Preset("tf-keras2", "tf.keras 2 LossScaleOptimizer", TFKeras2LossScaleRule, _SRC["tf-keras2"],
           "initial_scale", notes=mark("floor 1 (Keras 3 dropped it)")),
    Preset("jmp", mark("jmp DynamicLossScale (JAX, op by op)"), JmpDynamicRule, _SRC["jmp"], "loss_scale",
           {"loss_scale": 2.0**15}, notes=mark("no default scale: its docstring's 2^15; immutable adjust(); "
                                               "the skip is the user's select_tree; scale / factor in float32")),
    Preset("jmp-jit", mark("jmp DynamicLossScale (JAX, under jax.jit)"), JmpJitDynamicRule, _SRC["jmp-jit"],
           "loss_scale", {"loss_scale": 2.0**15},
           notes=mark("scale x float32(1/factor); min_loss_scale lost in the jit round trip: floor 1")),
    Preset("deepspeed", "DeepSpeed fp16", DeepSpeedDynamicRule, _SRC["deepspeed"], "initial_scale_power",
           init_is_power=True,
           notes=mark("hysteresis refilled only when the scale grows; stops the run at the minimum")),
    Preset("deepspeed-consecutive", "DeepSpeed fp16 (consecutive_hysteresis=True)", DeepSpeedDynamicRule,
           _SRC["deepspeed"], "initial_scale_power", {"consecutive_hysteresis": True}, init_is_power=True,
           notes=mark("hysteresis refilled by every clean step")),
)}


def preset_names() -> list[str]:
    """The preset names, in the order of :data:`PRESETS`.

    >>> preset_names()[:3], len(preset_names())
    (['torch', 'apex', 'paddle'], 15)
    """
    return list(PRESETS)


def _get(name: str) -> Preset:
    if not isinstance(name, str):
        raise TypeError(tr("preset name must be a string, one of: {names}; got {type}", names=", ".join(PRESETS),
                           type=type(name).__name__))
    if name not in PRESETS:
        raise ValueError(tr("unknown preset {name!r}; the presets are: {names}", name=name, names=", ".join(PRESETS)))
    return PRESETS[name]


def preset(name: str, **kwargs: Any) -> ScaleRule:
    """A fresh rule of framework preset ``name`` (see :func:`preset_names`); ``kwargs`` are that framework's own
    arguments (an argument it does not have → TypeError naming its arguments).

    >>> preset("keras", dynamic_growth_steps=1000).dynamic_growth_steps
    1000
    """
    return _get(name).make(**kwargs)


def preset_arguments(name: str) -> dict[str, Any]:
    """The arguments preset ``name`` accepts and their values in it.

    >>> preset_arguments("jmp")
    {'loss_scale': 32768.0, 'period': 2000, 'factor': 2, 'min_loss_scale': 1.0}
    """
    return _get(name).arguments()


@dataclass(frozen=True)
class RuleSummary:
    """What a rule does, measured: initial scale; growth factor and clean steps to the first growth (and from it to
    the second, ``growth_then``: DeepSpeed >= 0.17.1 waits one step longer for its first growth); backoff
    factor and overflows in a row to the first backoff; whether overflows separated by a clean step add up
    (``hysteresis_refill``: "every clean step" — they don't — / "on growth" — they do — / "-"); the floor the
    scale stops at (``None``: none found) and whether the framework stops the run there; a ceiling (``None``:
    none within 12 growths); whether overflowing steps are skipped."""

    init: float
    growth_factor: float
    growth_after: int | None
    backoff_factor: float
    backoff_after: int | None
    hysteresis_refill: str
    floor: float | None
    stops_at_floor: bool
    ceiling: float | None
    skips: bool
    growth_then: int | None = None


def _steps_until_change(rule: ScaleRule, overflow: bool, limit: int) -> tuple[int | None, float]:
    s0 = rule.scale
    for i in range(1, limit + 1):
        try:
            rule.update(overflow)
        except RunStopped:
            return None, 1.0
        if rule.scale != s0:
            return i, rule.scale / s0
    return None, 1.0


def _feed(rule: ScaleRule, overflow: bool, n: int) -> tuple[list[float], bool]:
    """The scales after each of ``n`` steps, and whether the rule stopped the run."""
    scales: list[float] = []
    for _ in range(n):
        try:
            rule.update(overflow)
        except RunStopped:
            return scales, True
        scales.append(rule.scale)
    return scales, False


def _rule_factory(make: str | Callable[[], ScaleRule]) -> Callable[[], ScaleRule]:
    """``make`` as a function that builds a fresh rule: a preset name, or such a function (checked once)."""
    if isinstance(make, str):
        return _get(make).make
    if isinstance(make, ScaleRule) or not callable(make):
        raise TypeError(f"describe() takes a preset name (one of: {', '.join(PRESETS)}) or a function that builds "
                        "a fresh rule, e.g. describe(lambda: preset('torch', init_scale=2.0**10)) — it builds several "
                        f"and runs each; got {type(make).__name__}")
    rule = make()
    if not isinstance(rule, ScaleRule):
        raise TypeError("describe(make): make() must return a rule (an object with .scale, .update(overflow) and "
                        f".drops_overflow, e.g. preset('torch')); it returned {type(rule).__name__}")
    return make


def describe(make: str | Callable[[], ScaleRule], limit: int = 5000) -> RuleSummary:
    """Measure a rule — ``make`` is a preset name or a function that builds a fresh rule: feed clean steps until the
    scale grows (at most ``limit``), overflows until it shrinks, 80 overflows in a row for a floor, and clean steps
    through 12 growths for a ceiling.

    >>> d = describe("deepspeed"); d.growth_after, d.growth_then, d.backoff_after, d.hysteresis_refill, d.floor
    (1001, 1000, 2, 'on growth', 1.0)
    >>> describe(lambda: preset("jmp-jit", loss_scale=2.0**10, factor=3)).backoff_factor   # float32(1/3): jax.jit
    0.3333333432674408
    """
    make = _rule_factory(make)
    limit = check_int("limit", limit)
    init = make().scale
    grow_n, grow_f = _steps_until_change(make(), False, limit)
    grow_then = None
    if grow_n is not None:
        r = make()
        _feed(r, False, grow_n)
        grow_then = _steps_until_change(r, False, limit)[0]
    back_n, back_f = _steps_until_change(make(), True, 64)
    refill = "-"
    if back_n is not None and back_n > 1:     # hysteresis: do overflows separated by a clean step add up?
        r = make()
        for _ in range(back_n - 1):
            r.update(True)
            r.update(False)
        r.update(True)
        refill = "on growth" if r.scale != init else "every clean step"
    scales, stopped = _feed(make(), True, 80)
    floor = None
    if back_n is not None and scales and (stopped or scales[-1] == scales[-2]):
        floor = scales[-1]
    ceiling = None
    if grow_n is not None:
        final = _feed(make(), False, 12 * grow_n)[0][-1]
        if final < init * grow_f**12:
            ceiling = final
    return RuleSummary(init, grow_f, grow_n, back_f, back_n, refill, floor, stopped, ceiling,
                       bool(getattr(make(), "drops_overflow", True)), grow_then)


def _pow2(x: float) -> str:
    k = math.log2(x) if x > 0 else math.nan
    return f"2^{int(k)}" if k == int(k) else f"{x:g}"


def defaults_table(names: list[str] | None = None) -> list[dict[str, str]]:
    """The cross-framework table, one row per preset, every number measured with :func:`describe`.

    >>> row = defaults_table(["torch"])[0]                # measured by running the rule, not copied from the docs
    >>> row["initial scale"], row["growth"], row["backoff"], row["overflow step"]
    ('2^16', 'x2 after 2000 clean steps', 'x0.5', 'skipped')
    """
    rows = []
    for name in names or preset_names():
        p = _get(name)
        d = describe(p.make)
        # every cell a Word: shown in the kit's language, equal to its English (notebooks compare with it)
        growth = Word("never") if d.growth_after is None else (
            Word("x{factor:g} after {n} clean steps", factor=d.growth_factor, n=d.growth_after)
            if d.growth_then in (None, d.growth_after) else
            Word("x{factor:g} after {n} clean steps, then every {then}", factor=d.growth_factor, n=d.growth_after,
                 then=d.growth_then))
        backoff = (Word("never") if d.backoff_after is None else Word("x{factor:g}", factor=d.backoff_factor)
                   if d.backoff_after == 1 else
                   Word("x{factor:g} from overflow no. {n}", factor=d.backoff_factor, n=d.backoff_after))
        if d.growth_after is None and d.backoff_after is None:
            bounds, hyst = Word("constant"), "-"
        else:
            floor = (Word("no floor") if d.floor is None else
                     Word("floor {floor:g} (run stops)", floor=d.floor) if d.stops_at_floor else
                     Word("floor {floor:g}", floor=d.floor))
            bounds = floor if d.ceiling is None else Word("{floor} / ceiling {ceiling}", floor=floor,
                                                          ceiling=_pow2(d.ceiling))
            hyst = ("1" if d.backoff_after in (None, 1) else
                    Word("{n} overflows in a row", n=d.backoff_after)
                    if d.hysteresis_refill == "every clean step" else
                    Word("{n}, refilled only on growth", n=d.backoff_after))
        rows.append({"preset": name, "system": tr(p.framework), "initial scale": _pow2(d.init), "growth": growth,
                     "backoff": backoff, "floor / ceiling": bounds, "hysteresis": hyst,
                     "overflow step": Word("skipped") if d.skips else Word("APPLIED"), "notes": Word(p.notes)})
    return rows


def replay_presets(names: list[str], grad_max: list[float], fmt: str = "fp16",
                   log2_init: int | None = None) -> dict[str, RuleReplay]:
    """The same recorded gradient maxima replayed under each preset in ``names`` (each starting at its own default
    scale, or at ``2**log2_init`` when given).

    >>> r = replay_presets(["torch", "mindspore-fixed-apply"], [2.0**-10] * 3, log2_init=30)
    >>> r["torch"].skipped, r["mindspore-fixed-apply"].applied_overflow
    (3, 3)
    """
    out = {}
    for n in names:
        p = _get(n)
        kw = {} if log2_init is None else p.with_log2_init(log2_init)
        out[n] = replay_grad_max(p.make(**kw), grad_max, fmt)
    return out
