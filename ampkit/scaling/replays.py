"""Replays: a loss-scale rule run over a recorded training run, without training again.

Taught in notebook ``03_loss_scaling.ipynb`` (section 5, the replay widget; sections 10–11, torch's and
MindSpore's rules on the same steps). A replay feeds a rule (:class:`ScaleRule`, defined here) one
overflow flag per step — given as text (``"..o.."``), or decided from the step's largest |gradient|: step ``t``
overflows when ``scale * grad_max[t]`` is beyond the format's range. It assumes the gradients do not depend on
which steps were skipped — close for short stretches.

>>> from ampkit.scaling.rules import MindSporeDynamicRule, MindSporeFixedRule, TorchGradScalerRule
>>> replay_flags(MindSporeDynamicRule(init_loss_scale=4, scale_window=2), "ooooo..").scales
[4.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
>>> replay_flags(TorchGradScalerRule(init_scale=4.0, growth_interval=2), "ooooo..").scales
[4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.125]
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from ampkit.formats import info
from ampkit.i18n import tr
from ampkit.scaling.framework_rules import RunStopped
from ampkit.scaling.rules import DynamicScalerRule

__all__ = ["ScaleRule", "Replay", "replay", "RuleReplay", "parse_flags", "replay_flags", "replay_grad_max",
           "log2_ceiling"]


@runtime_checkable
class ScaleRule(Protocol):
    """A loss-scale rule reduced to its arithmetic: the current ``scale``, ``update(overflow)`` after a step, and
    whether an overflowing step's update is dropped (``drops_overflow``). See :mod:`ampkit.scaling.rules`."""

    drops_overflow: bool

    @property
    def scale(self) -> float:
        """The scale the next step uses."""
        ...

    def update(self, overflow: bool) -> None:
        """Advance the rule by one step that did (or did not) overflow."""
        ...


@dataclass(frozen=True)
class Replay:
    """A dynamic scaler replayed over recorded gradient maxima: the scale used at each step, which steps
    overflowed (and were skipped), and where the scale ended."""

    scales: list[float]
    overflow: list[bool]
    skipped: int
    final_scale: float


@dataclass(frozen=True)
class RuleReplay:
    """A rule run over a sequence of steps: the scale each step used, which overflowed, which updates were
    applied, and the scale at the end."""

    name: str
    scales: list[float]
    overflow: list[bool]
    applied: list[bool]
    final_scale: float
    stopped_at: int | None = None   #: the step at which the framework ended the run (DeepSpeed at its minimum)

    @property
    def skipped(self) -> int:
        """Steps whose update was dropped."""
        return sum(not a for a in self.applied)

    @property
    def applied_overflow(self) -> int:
        """Overflowing updates that were applied anyway (inf/NaN gradients reached the weights)."""
        return sum(a and o for a, o in zip(self.applied, self.overflow))


def parse_flags(flags: str | Iterable[bool]) -> list[bool]:
    """``"..o."`` (``.`` clean, ``o`` overflow) or an iterable of bools -> a list of overflow flags.

    >>> parse_flags(".o.")
    [False, True, False]
    """
    if isinstance(flags, str):
        bad = sorted(set(flags) - {".", "o"})
        if bad:
            raise ValueError(tr("flags as text use '.' (clean step) and 'o' (overflow); got {bad}", bad=bad))
        return [c == "o" for c in flags]
    out = list(flags)
    if not all(isinstance(f, (bool, int)) for f in out):
        raise TypeError(tr("flags must be a string of '.'/'o' or an iterable of bools (True = overflow)"))
    return [bool(f) for f in out]


def _grad_maxima(grad_max: Iterable[float]) -> list[float]:
    gm = [float(g) for g in grad_max]
    bad = [g for g in gm if not math.isfinite(g) or g < 0]
    if bad:
        raise ValueError(f"grad_max must hold finite magnitudes >= 0 (one per step); got {bad[0]!r}")
    return gm


def _run(rule: ScaleRule, steps: Iterable[Any], overflows: Callable[[float, Any], bool]) -> RuleReplay:
    """The one replay loop: per step, the scale used, ``overflows(scale, step)``, whether the update applies."""
    if not isinstance(rule, ScaleRule):
        raise TypeError(tr("rule must be a TorchGradScalerRule, MindSporeDynamicRule, MindSporeFixedRule or a preset's "
                           "rule (ampkit.scaling.presets.preset(name)): an object with .scale, .update(overflow), "
                           ".drops_overflow; got {type}", type=type(rule).__name__))
    scales, over, applied, stopped = [], [], [], None
    for i, step in enumerate(steps):
        s = rule.scale
        o = overflows(s, step)
        scales.append(s)
        over.append(o)
        applied.append(not (o and rule.drops_overflow))
        try:
            rule.update(o)
        except RunStopped:      # the framework ends the run here: no later steps
            stopped = i
            break
    return RuleReplay(getattr(rule, "name", type(rule).__name__), scales, over, applied, rule.scale, stopped)


def replay_flags(rule: ScaleRule, flags: str | Iterable[bool]) -> RuleReplay:
    """Run ``rule`` (a fresh rule object; it is advanced) over overflow ``flags``.

    >>> from ampkit.scaling.rules import MindSporeFixedRule
    >>> replay_flags(MindSporeFixedRule(128.0, drop_overflow_update=False), ".o.").applied
    [True, True, True]
    """
    return _run(rule, parse_flags(flags), lambda scale, flag: flag)


def replay_grad_max(rule: ScaleRule, grad_max: Iterable[float], fmt: str | torch.dtype = "fp16") -> RuleReplay:
    """Run ``rule`` over recorded largest |gradient| per step: a step overflows when ``scale * grad_max`` is
    beyond ``fmt``'s range.

    >>> from ampkit.scaling.rules import MindSporeFixedRule
    >>> replay_grad_max(MindSporeFixedRule(2.0**20), [2.0**-5, 2.0**-3], "fp16").overflow
    [False, True]
    """
    limit = info(fmt).overflow_threshold
    return _run(rule, _grad_maxima(grad_max), lambda scale, g: scale * g >= limit)


def replay(grad_max: Iterable[float], fmt: str | torch.dtype = "fp16", **scaler_kwargs: Any) -> Replay:
    """Run :class:`ampkit.scaling.DynamicLossScaler`'s rule (the same code as ``update()``) over a recorded run.
    ``scaler_kwargs`` are DynamicLossScaler's (``init_scale``, ``growth_interval``, ``hysteresis``, ...).

    >>> r = replay([1e-3] * 6, init_scale=2.0**26, growth_interval=2); r.overflow, r.skipped
    ([True, False, False, True, False, False], 2)
    """
    gm = _grad_maxima(grad_max)
    r = replay_grad_max(DynamicScalerRule(**scaler_kwargs), gm, fmt)
    return Replay(r.scales, r.overflow, r.skipped, r.final_scale)


def log2_ceiling(grad_max: Iterable[float], fmt: str | torch.dtype = "fp16") -> list[float]:
    """Per step, ``log2`` of the scale at which ``scale * grad_max`` reaches ``fmt``'s overflow threshold (a step
    whose scale is at or above it overflows); ``nan`` where ``grad_max`` is 0 (no scale overflows).

    >>> [round(c, 4) for c in log2_ceiling([2.0**-20, 0.0], "fp16")]
    [35.9996, nan]
    """
    limit = info(fmt).overflow_threshold
    return [math.log2(limit / g) if g > 0 else math.nan for g in _grad_maxima(grad_max)]
