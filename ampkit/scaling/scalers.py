"""The three loss scalers — none, static, dynamic — with torch.amp.GradScaler's calls and a per-step history.

Taught in notebook ``03_loss_scaling.ipynb`` (sections 3–5: static scales, the dynamic rule, parity with torch).
The shared calls (``scale``, ``unscale_``, ``step``, ``update``) are in :mod:`ampkit.scaling.base`; each class
here adds its rule (``_next_scale``) and its state (``state_dict``/``load_state_dict``).

The dynamic rule, one training step (``S`` = scale, all arithmetic as torch does it: the scale is a float32,
products are taken in float64 and rounded to float32)::

    loss_scaled = loss * S;  loss_scaled.backward()         # scale(loss)
    grads *= float32(1 / float64(S))                        # unscale_(optimizer)
    found_inf = any(not isfinite(g) for g in grads)
    if found_inf:                                           # step(optimizer)
        skip optimizer.step()                               #   params and optimizer state untouched
    else:
        optimizer.step()
    if found_inf:                                           # update()
        tracker = 0
        counted += 1
        if counted >= hysteresis:                           #   DeepSpeed's hysteresis (delayed_shift)
            S = max(S * backoff_factor, min_scale)          #   Apex: a floor ...
    else:
        if consecutive_hysteresis:                          #   DeepSpeed's consecutive_hysteresis=True:
            counted = 0                                     #     any clean step refills the count
        tracker += 1
        if tracker == growth_interval:
            if isfinite(S * growth_factor):                 #   torch: never grow to inf
                S = min(S * growth_factor, max_scale)       #   Apex: ... and a ceiling
            tracker = 0
            counted = 0                                     #   DeepSpeed's default: growing refills it

With ``hysteresis=1`` and no ``min_scale``/``max_scale`` this is exactly ``torch.amp.GradScaler``'s rule
(``torch._amp_update_scale_``): the same scale sequence, skipped steps and parameters, bit for bit (tested).
:class:`StaticLossScaler` keeps ``S`` fixed (and by default still skips non-finite steps);
:class:`NoLossScaler` is ``S = 1`` and never skips — plain training, with the same calls.

>>> scaler = DynamicLossScaler(init_scale=2.0**16, growth_interval=2000)
>>> scaler.get_scale()
65536.0
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch.cuda.amp.common import amp_definitely_not_available

from ampkit._util import check_int, check_positive_finite
from ampkit.formats import to_fp32
from ampkit.i18n import tr
from ampkit.scaling.base import ScalerBase
from ampkit.scaling.dynamic_rule import DynamicRule, DynamicState, check_backoff_factor, check_growth_factor
from ampkit.scaling.errors import ScalerStateError

__all__ = ["NoLossScaler", "StaticLossScaler", "DynamicLossScaler", "TORCH_STATE_KEYS"]

#: The keys of ``torch.amp.GradScaler.state_dict()``; :class:`DynamicLossScaler` reads and writes them too.
TORCH_STATE_KEYS: tuple[str, ...] = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
def _device_type(device: Any) -> str | None:
    """torch's first argument: a device type ("cpu", "cuda"), a ``torch.device``, or None (the loss's device)."""
    if device is None or isinstance(device, torch.device):
        return None if device is None else device.type
    if not isinstance(device, str):
        hint = (tr("; to set the initial scale write init_scale={device!r}", device=device)
                if isinstance(device, (int, float)) else "")
        raise TypeError(tr("the first argument is the device type, as in torch.amp.GradScaler('cpu') ('cpu', 'cuda', "
                           "or None: wherever the loss is); got {type} {device!r}{hint}", type=type(device).__name__,
                           device=device, hint=hint))
    try:
        return torch.device(device).type
    except RuntimeError as err:
        raise ValueError(tr("device must be a device type such as 'cpu' or 'cuda'; got {device!r}",
                            device=device)) from err


class NoLossScaler(ScalerBase):
    """No scaling (scale 1) and no skipping — plain training, but with a scaler's calls and a history.

    Swap it in for a real scaler to see what happens without one: non-finite gradients are recorded
    (``history[i].found_inf``) and the optimizer steps anyway — a fused optimizer (``fused=True``) too: it gets a
    plain ``step()``, as from a disabled ``torch.amp.GradScaler``.

    >>> s = NoLossScaler(); loss = torch.tensor(2.0); s.scale(loss) is loss
    True
    """

    _skip_nonfinite = False
    _multiply = False

    def __init__(self, *, track: str | torch.dtype | None = None, record_history: bool = True):
        super().__init__(1.0, track=track, record_history=record_history)
        self._scaled = True          # nothing to multiply: step() without scale() is plain training
        self._materialised = True
        self._warned_bf16 = True     # no scaling, nothing to warn about with bf16

    def is_enabled(self) -> bool:
        """False: like a disabled ``torch.amp.GradScaler`` it neither scales nor skips (it still records history)."""
        return False

    def __repr__(self) -> str:
        return "NoLossScaler()"

    def _check_new_scale(self, value: float) -> float:
        if value != 1.0:
            raise ValueError("NoLossScaler's scale is always 1.0; use StaticLossScaler or DynamicLossScaler")
        return value

    def state_dict(self) -> dict[str, Any]:
        """``{}``, as a disabled ``torch.amp.GradScaler``."""
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Accept ``{}`` (a disabled scaler's state) or a mapping whose ``scale`` (if any) is 1.0."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict() takes a dict; got {type(state_dict).__name__}")
        if "scale" in state_dict and state_dict["scale"] != 1.0:
            raise ValueError(f"NoLossScaler has scale 1.0; this state has scale {state_dict['scale']!r} — "
                             "load it into StaticLossScaler or DynamicLossScaler")


class StaticLossScaler(ScalerBase):
    """A constant scale: the loss is always multiplied by ``scale``.

    ``skip_nonfinite=True`` (default) skips steps whose gradients overflowed, as dynamic scalers do;
    ``False`` steps anyway (the parameters become inf/NaN — what a too-large static scale does without a check).

    >>> StaticLossScaler(1024.0).get_scale()
    1024.0
    """

    def __init__(self, scale: float, *, skip_nonfinite: bool = True, track: str | torch.dtype | None = None,
                 record_history: bool = True):
        scale = check_positive_finite("scale", scale)
        if not isinstance(skip_nonfinite, bool):
            raise TypeError(f"skip_nonfinite must be True or False; got {skip_nonfinite!r}")
        super().__init__(scale, track=track, record_history=record_history)
        self._skip_nonfinite = skip_nonfinite

    def __repr__(self) -> str:
        return f"StaticLossScaler(scale={self._scale!r}, skip_nonfinite={self._skip_nonfinite})"

    def state_dict(self) -> dict[str, Any]:
        """``{"scale": ...}``."""
        return {"scale": self.get_scale()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a ``{"scale": ...}`` mapping (torch's and DynamicLossScaler's states have that key too)."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict() takes a dict with key 'scale'; got {type(state_dict).__name__}")
        if "scale" not in state_dict:
            raise ValueError(f"load_state_dict() needs key 'scale'; got keys {sorted(map(str, state_dict))}")
        value = check_positive_finite("state_dict['scale']", state_dict["scale"])
        self._set_scale(to_fp32(value) if self._materialised else value)


class DynamicLossScaler(ScalerBase):
    """The dynamic loss scaler: back off on overflow, grow after ``growth_interval`` clean steps.

    Called like ``torch.amp.GradScaler`` — ``DynamicLossScaler("cpu")``, ``DynamicLossScaler(enabled=use_amp)``,
    the same five leading arguments in the same order — with the same defaults and rule (exact parity with
    ``hysteresis=1``, no min/max) except ``device=None``: the scale lives wherever the loss is (torch's default
    ``"cuda"`` disables a scaler on a machine without CUDA, with a warning; ``DynamicLossScaler("cuda")`` does too).

    Keyword-only extras: ``hysteresis=N`` backs off only once N overflows have been counted; every overflow step is
    still skipped. When the count starts again is DeepSpeed's ``consecutive_hysteresis``: ``True`` (ampkit's
    default) refills it on every clean step — every overflow from the N-th *in a row* on backs off; ``False``
    (DeepSpeed's own default) refills it only when the scale grows — overflows separated by clean steps still add
    up, and once the count is down every overflow halves the scale until the next growth
    (``DynamicLossScaler.update_scale`` in deepspeed/runtime/fp16/loss_scaler.py). ``min_scale``/``max_scale``
    clamp the scale (Apex's ``min_loss_scale``/``max_loss_scale``). See the module docstring for the rule.

    >>> s = DynamicLossScaler(init_scale=4.0, growth_interval=1, max_scale=8.0)
    >>> s.state_dict()["scale"], s.state_dict()["max_scale"]
    (4.0, 8.0)
    >>> DynamicLossScaler("cpu", enabled=False).state_dict()
    {}
    """

    def __init__(self, device: str | torch.device | None = None, init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True, *, hysteresis: int = 1, consecutive_hysteresis: bool = True,
                 min_scale: float | None = None, max_scale: float | None = None,
                 track: str | torch.dtype | None = None, record_history: bool = True):
        device = _device_type(device)
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be True or False; got {type(enabled).__name__} {enabled!r}")
        init_scale = check_positive_finite("init_scale", init_scale)
        rule = DynamicRule(growth_factor, backoff_factor, growth_interval, hysteresis, consecutive_hysteresis,
                           min_scale, max_scale)
        init_scale = rule.check_scale(init_scale)
        if enabled and device == "cuda" and amp_definitely_not_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)      # torch's warning, word for word
            enabled = False
        super().__init__(init_scale, track=track, record_history=record_history, active=enabled, device=device)
        self._rule = rule               # the update rule: settings only, pure (ampkit.scaling.dynamic_rule)
        self._growth_tracker = 0
        self._overflows_counted = 0     # overflows since the hysteresis count was last refilled

    def __repr__(self) -> str:
        r = self._rule
        return (f"DynamicLossScaler(scale={self._scale!r}, growth_factor={r.growth_factor!r}, "
                f"backoff_factor={r.backoff_factor!r}, growth_interval={r.growth_interval}, "
                f"enabled={self._active}, hysteresis={r.hysteresis}, "
                f"consecutive_hysteresis={r.consecutive_hysteresis}, min_scale={r.min_scale!r}, "
                f"max_scale={r.max_scale!r})")

    @property
    def rule(self) -> DynamicRule:
        """The update rule with this scaler's settings (a frozen :class:`~ampkit.scaling.dynamic_rule.DynamicRule`).

        >>> DynamicLossScaler(growth_interval=3).rule.growth_interval
        3
        """
        return self._rule

    @property
    def rule_state(self) -> DynamicState:
        """Where the rule stands: scale, clean steps counted, overflows counted."""
        return DynamicState(self._scale, self._growth_tracker, self._overflows_counted)

    def get_growth_factor(self) -> float:
        """As torch's: the factor the scale grows by after ``growth_interval`` clean steps."""
        return self._rule.growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """As torch's (checked: > 1)."""
        self._rule = dataclasses.replace(self._rule, growth_factor=check_growth_factor(new_factor))

    def get_backoff_factor(self) -> float:
        """As torch's: the factor the scale shrinks by on overflow."""
        return self._rule.backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """As torch's (checked: in (0, 1))."""
        self._rule = dataclasses.replace(self._rule, backoff_factor=check_backoff_factor(new_factor))

    def get_growth_interval(self) -> int:
        """As torch's: how many clean steps in a row before the scale grows."""
        return self._rule.growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """As torch's (checked: an int >= 1)."""
        self._rule = dataclasses.replace(self._rule, growth_interval=check_int("growth_interval", new_interval))

    def _next_scale(self, found_inf: bool) -> float:
        state = self._rule.adjust(self.rule_state, found_inf)
        self._growth_tracker, self._overflows_counted = state.growth_tracker, state.overflows_counted
        return state.scale

    def state_dict(self) -> dict[str, Any]:
        """torch's five keys (so ``torch.amp.GradScaler.load_state_dict`` accepts it) plus ampkit's extras;
        ``{}`` when disabled, as torch."""
        if not self._active:
            return {}
        return {                                 # at any stage, silently, as torch's
            "scale": self.get_scale(),
            "growth_factor": self._rule.growth_factor,
            "backoff_factor": self._rule.backoff_factor,
            "growth_interval": self._rule.growth_interval,
            "_growth_tracker": self._growth_tracker,
            "hysteresis": self._rule.hysteresis,
            "consecutive_hysteresis": self._rule.consecutive_hysteresis,
            "_overflows_counted": self._overflows_counted,
            "min_scale": self._rule.min_scale,
            "max_scale": self._rule.max_scale,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state from :meth:`state_dict` or from ``torch.amp.GradScaler.state_dict()`` (same keys).

        A torch state leaves hysteresis and min/max as this scaler has them. Anything else raises a clear error.
        A disabled scaler ignores the call, as torch's.
        """
        if not self._active:
            return
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict() takes a dict (from DynamicLossScaler.state_dict() or "
                            f"torch.amp.GradScaler.state_dict()); got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise ScalerStateError("The source state dict is empty, possibly because it was saved from a disabled "
                                   "scaler (state_dict() of an enabled=False scaler is {}, as torch's).")
        missing = [k for k in TORCH_STATE_KEYS if k not in state_dict]
        if missing:
            raise ScalerStateError(
                f"not a loss-scaler state: missing keys {missing}; expected the keys of "
                f"torch.amp.GradScaler.state_dict() {list(TORCH_STATE_KEYS)} (plus optional hysteresis, "
                f"consecutive_hysteresis, _overflows_counted, min_scale, max_scale); "
                f"got keys {sorted(map(str, state_dict))}")
        d = dict(state_dict)
        # validate everything on a scratch instance before touching self
        probe = DynamicLossScaler(
            init_scale=d["scale"], growth_factor=d["growth_factor"], backoff_factor=d["backoff_factor"],
            growth_interval=d["growth_interval"], hysteresis=d.get("hysteresis", self._rule.hysteresis),
            consecutive_hysteresis=d.get("consecutive_hysteresis", self._rule.consecutive_hysteresis),
            min_scale=d.get("min_scale", self._rule.min_scale), max_scale=d.get("max_scale", self._rule.max_scale),
            record_history=False)
        tracker = check_int("state_dict['_growth_tracker']", d["_growth_tracker"], minimum=0)
        counted = check_int("state_dict['_overflows_counted']",
                            d.get("_overflows_counted", d.get("_overflows_in_a_row", 0)), minimum=0)
        self._rule = probe.rule
        self._growth_tracker = tracker
        self._overflows_counted = counted
        scale = float(d["scale"])
        self._set_scale(to_fp32(scale) if self._materialised else scale)
