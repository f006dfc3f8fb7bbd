"""The dynamic loss-scale rule as a pure object: state in, state out (as jmp's ``DynamicLossScale.adjust``).

Taught in notebook ``03_loss_scaling.ipynb`` (section 4, the dynamic rule). :class:`DynamicRule` holds the settings
(checked once, frozen); :meth:`DynamicRule.adjust` takes a :class:`DynamicState` (scale, clean-step tracker,
overflows counted) and whether the step overflowed, and returns the next state. Nothing else: no tensors, no
optimizer, no history. :class:`ampkit.scaling.DynamicLossScaler`'s ``update()`` calls it, and so does the replayed
rule :class:`ampkit.scaling.rules.DynamicScalerRule` (and through it the presets' and the widgets' replays): one
rule. The arithmetic is torch's (``torch._amp_update_scale_``): the scale is a float32, each product is rounded to
float32 once; see :mod:`ampkit.scaling.scalers` for the rule written out.

>>> rule = DynamicRule(growth_interval=2)
>>> s = rule.adjust(DynamicState(8.0), overflow=False); s
DynamicState(scale=8.0, growth_tracker=1, overflows_counted=0)
>>> rule.adjust(s, overflow=False).scale, rule.adjust(s, overflow=True).scale
(16.0, 4.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ampkit._util import check_int, check_positive_finite
from ampkit.formats import to_fp32
from ampkit.i18n import tr
from ampkit.scaling.errors import ScalerValueError

__all__ = ["DynamicRule", "DynamicState"]


def check_growth_factor(value: Any) -> float:
    """``value`` as a growth factor: a finite number > 1 (``ScalerValueError`` otherwise)."""
    value = check_positive_finite("growth_factor", value)
    if value <= 1.0:
        raise ScalerValueError(tr("growth_factor must be > 1 (the scale grows by it; torch's default 2.0); got "
                                  "{value!r}", value=value))
    return value


def check_backoff_factor(value: Any) -> float:
    """``value`` as a backoff factor: a number in (0, 1) (``ScalerValueError`` otherwise)."""
    value = check_positive_finite("backoff_factor", value)
    if not 0.0 < value < 1.0:
        raise ScalerValueError(tr("backoff_factor must be in (0, 1) (the scale shrinks by it; torch's default 0.5); "
                                  "got {value!r}", value=value))
    return value


@dataclass(frozen=True)
class DynamicState:
    """Where the rule stands: the ``scale`` the next step uses, clean steps since the last change
    (``growth_tracker``, torch's ``_growth_tracker``), and overflows counted towards ``hysteresis``."""

    scale: float
    growth_tracker: int = 0
    overflows_counted: int = 0


@dataclass(frozen=True)
class DynamicRule:
    """The dynamic rule's settings (torch's defaults; ``hysteresis``, ``consecutive_hysteresis`` as DeepSpeed,
    ``min_scale``/``max_scale`` as Apex). Checked here: bad values raise ``ValueError``/``TypeError``.

    >>> DynamicRule(backoff_factor=2.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ampkit.scaling.errors.ScalerValueError: backoff_factor must be in (0, 1) (the scale shrinks by it; ...
    """

    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    hysteresis: int = 1
    consecutive_hysteresis: bool = True
    min_scale: float | None = None
    max_scale: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.consecutive_hysteresis, bool):
            raise TypeError(f"consecutive_hysteresis must be True or False; got {self.consecutive_hysteresis!r}")
        checked = {"growth_factor": check_growth_factor(self.growth_factor),
                   "backoff_factor": check_backoff_factor(self.backoff_factor),
                   "growth_interval": check_int("growth_interval", self.growth_interval),
                   "hysteresis": check_int("hysteresis", self.hysteresis),
                   "min_scale": None if self.min_scale is None else to_fp32(check_positive_finite("min_scale",
                                                                                                 self.min_scale)),
                   "max_scale": None if self.max_scale is None else to_fp32(check_positive_finite("max_scale",
                                                                                                 self.max_scale))}
        lo, hi = checked["min_scale"], checked["max_scale"]
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_scale ({self.min_scale!r}) must be <= max_scale ({self.max_scale!r})")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def check_scale(self, init_scale: Any) -> float:
        """``init_scale`` checked: a positive finite number inside ``[min_scale, max_scale]``."""
        init_scale = check_positive_finite("init_scale", init_scale)
        lo, hi = self.min_scale, self.max_scale
        if (lo is not None and init_scale < lo) or (hi is not None and init_scale > hi):
            raise ValueError(f"init_scale ({init_scale!r}) must lie in [min_scale, max_scale] = "
                             f"[{lo!r}, {hi!r}]")
        return init_scale

    def adjust(self, state: DynamicState, overflow: bool) -> DynamicState:
        """The state after one step that did (``overflow=True``) or did not find inf/NaN gradients."""
        scale, tracker, counted = state.scale, state.growth_tracker, state.overflows_counted
        if overflow:
            tracker = 0
            counted += 1
            if counted >= self.hysteresis:
                scale = to_fp32(scale * self.backoff_factor)
                if self.min_scale is not None and scale < self.min_scale:
                    scale = self.min_scale
        else:
            if self.consecutive_hysteresis:
                counted = 0                 # consecutive_hysteresis=True: a clean step refills the count
            tracker += 1
            if tracker == self.growth_interval:
                grown = to_fp32(scale * self.growth_factor)
                if math.isfinite(grown):
                    scale = grown if self.max_scale is None or grown < self.max_scale else self.max_scale
                tracker = 0
                counted = 0                 # DeepSpeed's default: only growing refills it
        return DynamicState(scale, tracker, counted)
