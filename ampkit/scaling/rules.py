"""Loss-scaling rules side by side — torch's GradScaler, MindSpore's two managers — as pure arithmetic.

Taught in notebook ``03_loss_scaling.ipynb`` (sections 10–11: MindSpore's hand-written step and its loss-scale
managers next to torch's scaler). A rule is a :class:`ampkit.scaling.replays.ScaleRule`: ``scale``,
``update(overflow)`` and ``drops_overflow``; :mod:`ampkit.scaling.replays` runs one over a sequence of steps.
No framework but torch is needed.

- :class:`TorchGradScalerRule` — ``torch.amp.GradScaler.update()``: halve on overflow (no floor), double after
  ``growth_interval`` clean steps, skip overflowing steps. It runs :class:`ampkit.scaling.DynamicLossScaler`'s
  own rule (:class:`ampkit.scaling.dynamic_rule.DynamicRule`), which is tested bit for bit against torch
  (:class:`DynamicScalerRule`: the same with every DynamicLossScaler setting — hysteresis, min/max).
- :class:`MindSporeDynamicRule` — ``mindspore.amp.DynamicLossScaleManager(init_loss_scale=2**24, scale_factor=2,
  scale_window=2000)`` as its update cell ``DynamicLossScaleUpdateCell`` applies it (source:
  ``mindspore/python/mindspore/nn/wrap/loss_scale.py``): the same rule with a **floor of 1**, and a backoff that
  multiplies by the float32 reciprocal of the factor (torch multiplies by ``backoff_factor``); overflow steps skipped.
- :class:`MindSporeFixedRule` — ``FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)``: the scale
  never changes; with ``drop_overflow_update=False`` overflowing updates are **applied** (inf/NaN reach the weights).

The other frameworks' rules (Apex, Paddle, MindSpore's functional scaler, Keras, jmp, DeepSpeed) are in
:mod:`ampkit.scaling.framework_rules`; :func:`ampkit.scaling.presets.preset` builds any of them by name.

>>> r = TorchGradScalerRule(init_scale=8.0, growth_interval=1); r.update(False); r.scale
16.0
"""
from __future__ import annotations

import math
from typing import Any

from ampkit._util import check_int, check_number
from ampkit.formats import FP32_MAX, to_fp32
from ampkit.scaling.dynamic_rule import DynamicRule, DynamicState
from ampkit.scaling.scalers import DynamicLossScaler

__all__ = ["DynamicScalerRule", "TorchGradScalerRule", "MindSporeDynamicRule", "MindSporeFixedRule"]


def f32_setting(name: str, value: Any, above: float = 0.0, at_least: bool = False, why: str = "") -> float:
    """``value`` as the float32 a framework stores it as: a finite number (ints accepted, bools refused) that is
    ``> above`` (``>= above`` when ``at_least``) both as given — the frameworks check the Python value before they
    convert it (MindSpore's ``if scale_value < 1.0``, Paddle's ``assert decr_ratio < 1.0``), so 0.99999999 is
    below 1 although its float32 is 1.0 — and after rounding to float32, which must also be finite. ``why`` ends
    the message.

    >>> f32_setting("scale_value", 1, 1.0, at_least=True)
    1.0
    >>> f32_setting("scale_value", 0.99999999, 1.0, at_least=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: scale_value must be a number >= 1 that a float32 holds (...); got 0.99999999 (as a float32: 1.0)
    """
    v = check_number(name, value, "2.0**16")
    s = to_fp32(v)

    def in_range(x: float) -> bool:
        return x >= above if at_least else x > above

    ok = math.isfinite(s) and in_range(value) and in_range(s)
    if not ok:
        kind = f"number {'>=' if at_least else '>'} {above:g}" if above else "positive number"
        shown = "" if s == v else f" (as a float32: {s!r})"
        raise ValueError(f"{name} must be a {kind} that a float32 holds (at most {FP32_MAX:.8g}){why}; "
                         f"got {value!r}{shown}")
    return s


def _at_least_one(name: str, value: Any, strict: bool = False) -> float:
    """``value`` as a float32 >= 1 (``> 1`` when ``strict``): MindSpore's bound on its scales and factor."""
    return f32_setting(name, value, 1.0, at_least=not strict, why=" (MindSpore's bound; it keeps it as a float32)")


class DynamicScalerRule:
    """:class:`ampkit.scaling.DynamicLossScaler`'s rule as a replayed rule: ``kwargs`` are the scaler's settings
    (``init_scale``, ``growth_interval``, ``hysteresis``, ``min_scale``, ...), checked as the scaler checks them.
    ``update`` calls the same pure :class:`~ampkit.scaling.dynamic_rule.DynamicRule` the scaler's ``update()`` calls.

    >>> r = DynamicScalerRule(init_scale=8.0, hysteresis=2); r.update(True); r.scale
    8.0
    """

    name = "ampkit DynamicLossScaler"
    drops_overflow = True

    def __init__(self, **kwargs: Any):
        scaler = DynamicLossScaler(record_history=False, **kwargs)   # the scaler's own checks and defaults
        self.rule: DynamicRule = scaler.rule
        self.state: DynamicState = scaler.rule_state

    @property
    def scale(self) -> float:
        """The scale the next step uses."""
        return self.state.scale

    def update(self, overflow: bool) -> None:
        """One step of the rule: ``state = rule.adjust(state, overflow)``."""
        self.state = self.rule.adjust(self.state, bool(overflow))


class TorchGradScalerRule(DynamicScalerRule):
    """``torch.amp.GradScaler``'s rule (defaults: 2**16, x2 after 2000 clean steps, x0.5, skip on overflow).

    The arithmetic of ``torch._amp_update_scale_`` (``aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp``; the
    CUDA kernel is the same): the scale ``S`` is a float32, the factors are C++ ``double`` — the product is taken in
    float64 and rounded to float32 once::

        S = float32(init_scale)
        overflow:  S = float32(S * backoff_factor);  tracker = 0             # no floor
        clean:     tracker += 1
                   if tracker == growth_interval:
                       G = float32(S * growth_factor);  tracker = 0
                       if isfinite(G): S = G                                 # never grows to inf

    >>> TorchGradScalerRule().scale
    65536.0
    """

    name = "torch.amp.GradScaler"

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        init_scale = f32_setting("init_scale", init_scale, why=" (torch keeps the scale in a float32 tensor)")
        super().__init__(init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval)


class StoredScale:
    """The ``scale`` of a MindSpore rule: a float32 kept on the rule itself."""

    _scale: float

    @property
    def scale(self) -> float:
        """The scale the next step uses."""
        return self._scale


class MindSporeDynamicRule(StoredScale):
    """MindSpore's ``DynamicLossScaleManager`` (its ``DynamicLossScaleUpdateCell``): torch's rule with a floor of 1.

    ``DynamicLossScaleUpdateCell.construct`` (``mindspore/python/mindspore/nn/wrap/loss_scale.py``), in float32
    (the scale is a float32 ``Parameter``, the factor ``Tensor(scale_factor, float32)``, ``P.Reciprocal`` and ``*``
    are float32 ops; the backoff MULTIPLIES by the reciprocal, it does not divide)::

        S = float32(init_loss_scale);  F = float32(scale_factor);  R = float32(1 / F)
        cur_iter = 1;  last_overflow_iter = 0
        each step:
            if overflow: S = max(float32(S * R), 1.0)
            should_inc = scale_window <= cur_iter - last_overflow_iter
            if overflow or should_inc: last_overflow_iter = cur_iter
            if should_inc and not overflow: S = float32(S * F)                 # no finiteness check
            cur_iter += 1

    Overflowing steps are always skipped (``get_drop_overflow_update()`` is True). Defaults are MindSpore's.
    ``scale_factor`` must be > 1 here (MindSpore accepts any factor > 0; below 1 the rule runs backwards).

    >>> r = MindSporeDynamicRule(); r.scale == 2**24
    True
    """

    name = "MindSpore DynamicLossScaleManager"
    drops_overflow = True

    def __init__(self, init_loss_scale: float = 2.0**24, scale_factor: float = 2, scale_window: int = 2000):
        self._scale = _at_least_one("init_loss_scale", init_loss_scale)
        self.scale_factor = _at_least_one("scale_factor", scale_factor, strict=True)     # Tensor(.., float32)
        self._reciprocal = to_fp32(1.0 / self.scale_factor)                               # P.Reciprocal, float32
        self.scale_window = check_int("scale_window", scale_window)
        self._cur_iter = 1
        self._last_overflow_iter = 0

    def update(self, overflow: bool) -> None:
        """``DynamicLossScaleUpdateCell.construct`` after one step."""
        overflow = bool(overflow)
        scale = max(to_fp32(self._scale * self._reciprocal), 1.0) if overflow else self._scale
        should_inc = self.scale_window <= self._cur_iter - self._last_overflow_iter
        if overflow or should_inc:
            self._last_overflow_iter = self._cur_iter
        if should_inc and not overflow:
            scale = to_fp32(scale * self.scale_factor)
        self._scale = scale
        self._cur_iter += 1


class MindSporeFixedRule(StoredScale):
    """MindSpore's ``FixedLossScaleManager(loss_scale=128.0, drop_overflow_update=True)``: a constant scale.

    ``drop_overflow_update=False`` applies overflowing updates (the optimizer divides by ``loss_scale`` itself and
    nothing checks for inf/NaN) — like ``ampkit.scaling.StaticLossScaler(S, skip_nonfinite=False)``.

    >>> MindSporeFixedRule().scale, MindSporeFixedRule().drops_overflow
    (128.0, True)
    """

    def __init__(self, loss_scale: float = 128.0, drop_overflow_update: bool = True):
        self._scale = _at_least_one("loss_scale", loss_scale)
        if not isinstance(drop_overflow_update, bool):
            raise TypeError(f"drop_overflow_update must be True or False; got {drop_overflow_update!r}")
        self.drops_overflow = drop_overflow_update
        self.name = f"MindSpore FixedLossScaleManager(drop_overflow_update={drop_overflow_update})"

    def update(self, overflow: bool) -> None:
        """Nothing changes (MindSpore's ``update_loss_scale`` does nothing here)."""
