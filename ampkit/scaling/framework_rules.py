"""Other frameworks' dynamic loss-scale rules — Apex, DeepSpeed (a Python-float scale) — and every framework rule
by one import.

Taught in notebook ``03_loss_scaling.ipynb`` (section "Every framework's scaler as a preset"). Each class is a
:class:`ampkit.scaling.replays.ScaleRule` (``scale``, ``update(overflow)``, ``drops_overflow``) that transliterates
its framework's update code into plain Python — the counters, comparisons and order of that code, so a state walk
written from the framework's source holds step by step. Apex and DeepSpeed keep the scale as a Python ``float``
(float64) and compute in float64, so these rules do too; the frameworks whose scale is a float32 tensor (Paddle,
MindSpore's functional scaler, Keras 3, tf.keras 2, jmp) are in :mod:`ampkit.scaling.tensor_rules` and imported
here as well. Arguments are named and defaulted as the framework does; :func:`ampkit.scaling.presets.preset` builds
them by name. Sources (each class's docstring says which code and gives its rule as pseudo-code):

- Apex: ``NVIDIA/apex`` ``apex/amp/scaler.py`` (``LossScaler.__init__`` / ``update_scale``), last present in commit
  ``cb65b8ed^`` (2025-05: "remove old features: amp, ddp, and rnn" deleted ``apex/amp``).
- DeepSpeed: ``deepspeedai/DeepSpeed`` ``deepspeed/runtime/fp16/loss_scaler.py`` (``DynamicLossScaler.update_scale``)
  and ``deepspeed/runtime/precision_config.py`` (``DeepSpeedFP16Config``: the ``fp16`` config keys and defaults).
- Paddle, MindSpore (functional), Keras 3, tf.keras 2, jmp: see :mod:`ampkit.scaling.tensor_rules`.

>>> r = DeepSpeedDynamicRule(initial_scale_power=4, hysteresis=1)
>>> for o in (True, True): r.update(o)
>>> r.scale
4.0
"""
from __future__ import annotations

from typing import Any

from ampkit._util import check_int, check_positive_finite
from ampkit.scaling.deepspeed_config import deepspeed_bool, deepspeed_int
from ampkit.scaling.rules import StoredScale
from ampkit.scaling.tensor_rules import (
    JmpDynamicLossScale,
    JmpDynamicRule,
    JmpJitDynamicRule,
    KerasLossScaleRule,
    MindSporeFunctionalRule,
    PaddleGradScalerRule,
    TFKeras2LossScaleRule,
)

__all__ = ["RunStopped", "ApexDynamicRule", "DeepSpeedDynamicRule",
           # the float32-tensor rules (ampkit.scaling.tensor_rules), importable from here as well
           "PaddleGradScalerRule", "MindSporeFunctionalRule", "KerasLossScaleRule", "TFKeras2LossScaleRule",
           "JmpDynamicLossScale", "JmpDynamicRule", "JmpJitDynamicRule"]

#: The largest power of two a float32 holds: DeepSpeed's scale multiplies a float32 (or fp16) loss.
_MAX_SCALE_POWER = 127


def _at_least_1(name: str, value: int, given: Any, why: str) -> int:
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1 ({why}); got {given!r}")
    return value


class RunStopped(RuntimeError):
    """Raised by a rule whose framework would end the training run here (DeepSpeed at its minimum scale)."""


class _Rule(StoredScale):
    """What every rule here shares: the stored scale (``scale``) and skipping of overflowing steps."""

    name: str
    drops_overflow = True


class ApexDynamicRule(_Rule):
    """NVIDIA Apex amp's dynamic ``LossScaler``: start at ``min(max_loss_scale, init_scale)``; on overflow skip the
    step, halve (not below ``min_loss_scale`` when one is given) and reset the clean-step count; after
    ``scale_window`` clean steps double, capped at ``max_loss_scale``. (``LossScaler`` also takes ``scale_factor``,
    but ``update_scale`` always uses 2, so it is not offered here.)

    ``LossScaler.update_scale`` keeps ``_loss_scale`` as a Python float: float64 throughout, exact for the halving
    and doubling (only a scale beyond float64's range would round)::

        S = min(max_loss_scale, init_scale);  unskipped = 0                  # float64
        overflow:  S = max(min_loss_scale, S / 2.) if min_loss_scale else S / 2.;  unskipped = 0
        clean:     unskipped += 1
        if unskipped == scale_window: S = min(max_loss_scale, S * 2.);  unskipped = 0

    >>> r = ApexDynamicRule(init_scale=2.0**24, scale_window=1); r.update(False); r.scale == 2.0**24
    True
    """

    name = "Apex amp LossScaler"

    def __init__(self, init_scale: float = 2.0**16, scale_window: int = 2000, min_loss_scale: float | None = None,
                 max_loss_scale: float = 2.0**24):
        self.max_loss_scale = check_positive_finite("max_loss_scale", max_loss_scale)
        self.min_loss_scale = None if min_loss_scale is None else check_positive_finite("min_loss_scale",
                                                                                         min_loss_scale)
        if self.min_loss_scale is not None and self.min_loss_scale > self.max_loss_scale:
            raise ValueError(f"min_loss_scale ({min_loss_scale!r}) must be <= max_loss_scale ({max_loss_scale!r}), "
                             "or None for no floor (Apex's default)")
        self._scale = min(self.max_loss_scale, check_positive_finite("init_scale", init_scale))
        self.scale_window = check_int("scale_window", scale_window)
        self._unskipped = 0

    def update(self, overflow: bool) -> None:
        """``LossScaler.update_scale``."""
        if overflow:
            self._scale = (max(self.min_loss_scale, self._scale / 2.0) if self.min_loss_scale
                           else self._scale / 2.0)
            self._unskipped = 0
        else:
            self._unskipped += 1
        if self._unskipped == self.scale_window:
            self._scale = min(self.max_loss_scale, self._scale * 2.0)
            self._unskipped = 0


class DeepSpeedDynamicRule(_Rule):
    """DeepSpeed's fp16 ``DynamicLossScaler`` with its ``fp16`` config keys: scale ``2**initial_scale_power``;
    every overflowing step is skipped. An overflow lowers the hysteresis count while it is above 1; once it is 1
    the overflow divides the scale by 2 (not below ``min_loss_scale``; at the minimum DeepSpeed raises and the run
    stops: :class:`RunStopped`). A clean step grows the scale x2 when the steps since the last overflow, minus one,
    are a positive multiple of ``loss_scale_window`` (so the first growth after an overflow, or after the start, waits
    ``window + 1`` clean steps, each later one ``window``: DeepSpeed >= 0.17.1). The count
    is refilled to ``hysteresis``: by DEFAULT (``consecutive_hysteresis=False``) only when the scale grows — overflows
    separated by clean steps still use it up; with ``consecutive_hysteresis=True`` on every clean step (only
    overflows in a row count, like ``ampkit.scaling.DynamicLossScaler(hysteresis=N)``).

    The arguments take what DeepSpeed's ``fp16`` config takes (its pydantic model converts them:
    :mod:`ampkit.scaling.deepspeed_config`): ``min_loss_scale=16.0`` or ``"16"`` is 16, ``"auto"`` the default;
    0.25, ``True`` and ``"16.0"`` are refused there. The kit's own bounds: ``initial_scale_power`` from 0 to 127
    and ``hysteresis`` >= 1 (DeepSpeed takes any int: a negative power, or a hysteresis that never lowers).

    ``update_scale`` keeps ``cur_scale`` as a Python number (the int ``2**initial_scale_power`` at first, a float64
    after the first change; ``scale_factor`` is 2.0, which the config does not expose) — float64 throughout::

        S = 2**initial_scale_power;  m = min_loss_scale                       # an int >= 1 in the fp16 config
        cur_hysteresis = hysteresis;  cur_iter = 0;  last_overflow_iter = -1
        overflow:  if hysteresis == 1 or cur_hysteresis == 1:
                       if S == m: stop the run                               # "already at minimum"
                       S = max(S / 2.0, m)
                   else: cur_hysteresis -= 1
                   last_overflow_iter = cur_iter
        clean:     if consecutive_hysteresis: cur_hysteresis = hysteresis
                   stable = cur_iter - last_overflow_iter - 1
                   if stable > 0 and stable % loss_scale_window == 0:
                       if not consecutive_hysteresis: cur_hysteresis = hysteresis
                       S = S * 2.0
        cur_iter += 1

    >>> r = DeepSpeedDynamicRule(initial_scale_power=4)
    >>> for o in (True, False, True): r.update(o)
    >>> r.scale      # the first overflow used up the hysteresis, the second (after a clean step) halved
    8.0
    >>> DeepSpeedDynamicRule(min_loss_scale=16.0).min_loss_scale     # DeepSpeed's config reads 16.0 as 16
    16
    """

    name = "DeepSpeed fp16"

    def __init__(self, initial_scale_power: int = 16, loss_scale_window: int = 1000, hysteresis: int = 2,
                 consecutive_hysteresis: bool = False, min_loss_scale: int = 1):
        # DeepSpeed's config model converts each value (16.0 -> 16, "16" -> 16, "auto" -> the default, ...):
        # ampkit.scaling.deepspeed_config; the ranges below are DeepSpeed's (> 0) or, where noted, the kit's.
        k = deepspeed_int("initial_scale_power", initial_scale_power, 16)
        if not 0 <= k <= _MAX_SCALE_POWER:
            raise ValueError(f"initial_scale_power must be an int from 0 to {_MAX_SCALE_POWER} (the scale "
                             f"2**initial_scale_power multiplies a float32 loss, and 2**{_MAX_SCALE_POWER} is the "
                             f"largest power of two a float32 holds); got {initial_scale_power!r}")
        self._scale = 2.0**k
        self.scale_window = _at_least_1("loss_scale_window", deepspeed_int("loss_scale_window", loss_scale_window,
                                                                           1000, strict=True), loss_scale_window,
                                        "DeepSpeed refuses <= 0 with dynamic scaling")
        self.delayed_shift = _at_least_1("hysteresis", deepspeed_int("hysteresis", hysteresis, 2), hysteresis,
                                         "the kit's bound: with hysteresis <= 0 DeepSpeed never lowers the scale")
        self.consecutive_hysteresis = deepspeed_bool("consecutive_hysteresis", consecutive_hysteresis, False)
        self.min_loss_scale = _at_least_1("min_loss_scale", deepspeed_int("min_loss_scale", min_loss_scale, 1,
                                                                          strict=True), min_loss_scale,
                                          "DeepSpeed refuses <= 0 with dynamic scaling")
        if self.min_loss_scale > 2**_MAX_SCALE_POWER:
            raise ValueError(f"min_loss_scale must be an int from 1 to 2**{_MAX_SCALE_POWER} (a float32 holds no "
                             f"larger scale); got {min_loss_scale!r}")
        self.min_scale = float(self.min_loss_scale)
        self.cur_hysteresis = self.delayed_shift
        self.cur_iter = 0
        self.last_overflow_iter = -1
        if self.consecutive_hysteresis:
            self.name = "DeepSpeed fp16 (consecutive_hysteresis)"

    def update(self, overflow: bool) -> None:
        """``DynamicLossScaler.update_scale(overflow)``."""
        if overflow:
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                if self._scale == self.min_scale:
                    raise RunStopped(f"DeepSpeed stops the run: overflow at the minimum loss scale {self.min_scale:g}"
                                     " ('Current loss scale already at minimum')")
                self._scale = max(self._scale / 2.0, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.delayed_shift
            stable_interval = (self.cur_iter - self.last_overflow_iter) - 1
            if stable_interval > 0 and stable_interval % self.scale_window == 0:
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self._scale *= 2.0
        self.cur_iter += 1
