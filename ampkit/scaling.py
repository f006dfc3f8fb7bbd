"""Loss scalers — none, static, dynamic — with torch.amp.GradScaler's calls, plus a per-step history.

Taught in notebook ``03_loss_scaling.ipynb`` (the widgets in :mod:`ampkit.widgets.scaling` plot what this
module computes).

Why: fp16 stores nothing below 2**-24, and backward passes are full of smaller gradients. Multiplying the
loss by ``scale`` multiplies every gradient of the backward pass by ``scale`` (chain rule), lifting them into
fp16's range; dividing the fp32 (master) gradients by ``scale`` before the optimizer step undoes it.

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
        overflows_in_a_row += 1
        if overflows_in_a_row >= hysteresis:                #   DeepSpeed: only the N-th overflow in a row
            S = max(S * backoff_factor, min_scale)          #   Apex: a floor ...
    else:
        overflows_in_a_row = 0
        tracker += 1
        if tracker == growth_interval:
            if isfinite(S * growth_factor):                 #   torch: never grow to inf
                S = min(S * growth_factor, max_scale)       #   Apex: ... and a ceiling
            tracker = 0

With ``hysteresis=1`` and no ``min_scale``/``max_scale`` this is exactly ``torch.amp.GradScaler``'s rule
(``torch._amp_update_scale_``): the same scale sequence, skipped steps and parameters, bit for bit (tested).
:class:`StaticLossScaler` keeps ``S`` fixed (and by default still skips non-finite steps);
:class:`NoLossScaler` is ``S = 1`` and never skips — plain training, with the same calls.

>>> scaler = DynamicLossScaler(init_scale=2.0**16, growth_interval=2000)
>>> scaler.get_scale()
65536.0
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = [
    "NoLossScaler",
    "StaticLossScaler",
    "DynamicLossScaler",
    "StepRecord",
    "TORCH_STATE_KEYS",
]

#: The keys of ``torch.amp.GradScaler.state_dict()``; :class:`DynamicLossScaler` reads and writes them too.
TORCH_STATE_KEYS: tuple[str, ...] = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"

_O2_HINT = (
    "Attempting to unscale FP16 gradients: parameter {name} of the optimizer has a float16 .grad. A loss "
    "scaler divides gradients by the scale and checks them for inf/NaN, which must happen in float32 (in fp16 "
    "the small unscaled gradients would flush to zero again, and the large scaled ones are already inf). "
    "Give the optimizer fp32 master weights instead: O2 keeps an fp32 copy of every parameter that the optimizer "
    "steps (ampkit.precision.apply_level(model, optimizer, 'O2', 'fp16')), or use O1 (torch.autocast with fp32 "
    "parameters). Pure fp16 training (O3, model.half()) has no master weights and can only use NoLossScaler()."
)
_BF16_WARNING = (
    "a loss scaler with bfloat16: bf16 has fp32's 8 exponent bits (smallest normal 2**-126), so gradients do not "
    "underflow and a loss scaler is unnecessary — train bf16 without one (NoLossScaler() or scaler=None)."
)


def _f32(x: float) -> float:
    """Round a Python float (float64) to the nearest float32, as C's ``static_cast<float>`` does (inf on overflow)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _check_positive_finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive finite number (e.g. 2.0**16); got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number (e.g. 2.0**16, 128.0, 1.0); got {value!r}")
    return value


def _check_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int >= {minimum}; got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}")
    return int(value)


@dataclass(frozen=True)
class StepRecord:
    """One training step as a scaler saw it (an entry of ``scaler.history``).

    ``scale``: the scale this step's loss was multiplied by; ``found_inf``: some gradient was inf/NaN;
    ``skipped``: the optimizer step was skipped; ``next_scale``: the scale after ``update()``;
    ``fractions``: when the scaler was built with ``track=dtype``, :func:`ampkit.formats.classify` of the
    scaled gradients in that format (fractions zero / flushed / subnormal / normal / overflow / nonfinite).
    """

    step: int
    scale: float
    found_inf: bool
    skipped: bool
    next_scale: float
    fractions: Any = None


@dataclass
class _OptState:
    stage: str = _READY
    found_inf: dict = field(default_factory=dict)   # device -> 0-dim float32 tensor (1.0 when inf/NaN seen)
    found_inf_value: bool | None = None            # host copy once synced
    skipped: bool = False


class _ScalerBase:
    """Machinery shared by the three scalers: per-optimizer stages, unscale, skip, history."""

    _skip_nonfinite: bool = True
    _multiply: bool = True

    def __init__(self, scale: float, *, track: str | torch.dtype | None = None, record_history: bool = True):
        self._scale = scale                 # Python float; float32-exact once materialised
        self._scale_t: torch.Tensor | None = None
        self._materialised = False
        self._per_opt: dict[int, _OptState] = defaultdict(_OptState)
        self._warned_bf16 = False
        self._step_count = 0
        self._pending_fractions: list = []
        self.last_step_skipped: bool = False
        self.record_history = bool(record_history)
        self.history: list[StepRecord] = []
        if track is None:
            self.track = None
        else:
            from ampkit.formats import resolve_format

            self.track = resolve_format(track)

    # -- torch.amp.GradScaler's calls -----------------------------------------------------------------
    def is_enabled(self) -> bool:
        """Always True (torch's disabled scaler is :class:`NoLossScaler` here)."""
        return True

    def get_scale(self) -> float:
        """The current scale as a Python float (no device sync: ampkit keeps it on the host)."""
        return self._scale

    def _materialise(self, device: torch.device) -> torch.Tensor:
        if not self._materialised:
            self._scale = _f32(self._scale)
            self._materialised = True
        t = self._scale_t
        if t is None or t.device != device:
            t = self._scale_t = torch.full((), self._scale, dtype=torch.float32, device=device)
        return t

    def _set_scale(self, value: float) -> None:
        if value != self._scale:
            self._scale = value
            if self._scale_t is not None:
                self._scale_t.fill_(value)

    def _maybe_warn_bf16(self, dtype: torch.dtype | None, device_type: str | None) -> None:
        if self._warned_bf16:
            return
        bf16 = dtype == torch.bfloat16
        if not bf16 and device_type is not None:
            try:
                bf16 = torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == torch.bfloat16
            except (RuntimeError, TypeError):  # a device type autocast does not know
                bf16 = False
        if bf16:
            self._warned_bf16 = True
            warnings.warn(_BF16_WARNING, UserWarning, stacklevel=4)

    def scale(self, outputs: torch.Tensor | Iterable[torch.Tensor]) -> torch.Tensor | Iterable[torch.Tensor]:
        """Multiply a loss (or a list/tuple of tensors) by the current scale, as torch's ``scaler.scale``.

        >>> DynamicLossScaler(init_scale=8.0).scale(torch.tensor(0.5))
        tensor(4.)
        """
        if isinstance(outputs, torch.Tensor):
            self._maybe_warn_bf16(outputs.dtype, outputs.device.type)
            if not self._multiply:
                return outputs
            return outputs * self._materialise(outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes)):
            return map(self.scale, outputs)
        raise TypeError(f"scale() takes a tensor (the loss) or a list/tuple of tensors; got {type(outputs).__name__}")

    def _grads_by_device_dtype(self, optimizer: torch.optim.Optimizer, allow_fp16: bool) -> dict:
        groups: dict = defaultdict(lambda: defaultdict(list))
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                g = p.grad
                if g is None:
                    continue
                if g.dtype == torch.float16 and not allow_fp16:
                    raise ValueError(_O2_HINT.format(name=f"#{pi} of param group {gi} (shape {tuple(p.shape)})"))
                if g.is_sparse:
                    if g.dtype is torch.float16:
                        p.grad = g = g.coalesce()
                    g = g._values()
                groups[g.device][g.dtype].append(g)
        return groups

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place and note whether any is inf/NaN.

        Call it at most once per step, after all backward passes and before clipping:
        ``scaler.unscale_(opt); clip_grad_norm_(params, 1.0); scaler.step(opt); scaler.update()``.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"unscale_() takes a torch.optim.Optimizer; got {type(optimizer).__name__}")
        state = self._per_opt[id(optimizer)]
        if state.stage == _UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update(): the gradients are "
                "already divided by the scale, a second call would divide them again. Call it once per step "
                "(before clipping), then step() and update().")
        if state.stage == _STEPPED:
            raise RuntimeError("unscale_() is being called after step(); call update() first (it starts the next step).")
        groups = self._grads_by_device_dtype(optimizer, allow_fp16=not self._multiply)
        if self.track is not None:
            self._pending_fractions.append(self._classify(groups))
        if self._multiply:
            scale_t = self._materialise(next(iter(groups)) if groups else torch.device("cpu"))
            # as torch: the reciprocal in float64, then float32
            inv_master = scale_t.double().reciprocal().float()
        else:
            inv_master = None
        found: dict = {}
        with torch.no_grad():
            for device, per_dtype in groups.items():
                fi = torch.zeros((), dtype=torch.float32, device=device)
                inv = (inv_master if inv_master is not None and inv_master.device == device else
                       (inv_master.to(device) if inv_master is not None else torch.ones((), device=device)))
                for dtype, grads in per_dtype.items():
                    if dtype == torch.bfloat16:
                        self._maybe_warn_bf16(dtype, None)
                    torch._amp_foreach_non_finite_check_and_unscale_(grads, fi, inv)
                found[device] = fi
        state.found_inf = found
        state.found_inf_value = None
        state.stage = _UNSCALED

    def _classify(self, groups: dict) -> Any:
        from ampkit.formats import classify

        flat = [g.detach().reshape(-1).float() for per_dtype in groups.values() for gs in per_dtype.values() for g in gs]
        if not flat:
            return None
        return classify(torch.cat([f.cpu() for f in flat]), self.track)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless done already), then ``optimizer.step()`` — skipped when a gradient is inf/NaN.

        Sets ``last_step_skipped``. Returns what ``optimizer.step`` returned (None when skipped).
        """
        if "closure" in kwargs:
            raise RuntimeError("closures are not supported with a loss scaler (as with torch.amp.GradScaler): "
                               "compute the loss, scale(loss).backward(), then step(optimizer) without a closure.")
        state = self._per_opt[id(optimizer)]
        if state.stage == _STEPPED:
            raise RuntimeError("step() has already been called since the last update(); call update() once per step.")
        if state.stage == _READY:
            self.unscale_(optimizer)
        if not state.found_inf:
            raise RuntimeError("the optimizer has no gradients: call scaler.scale(loss).backward() before step().")
        found = bool(sum(v.item() for v in state.found_inf.values()))
        state.found_inf_value = found
        skip = found and self._skip_nonfinite
        state.skipped = skip
        self.last_step_skipped = skip
        state.stage = _STEPPED
        return None if skip else optimizer.step(*args, **kwargs)

    def _found_inf_this_step(self) -> tuple[bool, bool]:
        if not self._per_opt or not any(s.found_inf for s in self._per_opt.values()):
            raise RuntimeError("update() before any inf check: call scaler.step(optimizer) (or unscale_) first, "
                               "once per step: scale(loss).backward(); step(optimizer); update().")
        found = False
        skipped = False
        for s in self._per_opt.values():
            if s.found_inf_value is None and s.found_inf:
                s.found_inf_value = bool(sum(v.item() for v in s.found_inf.values()))
            found = found or bool(s.found_inf_value)
            skipped = skipped or s.skipped
        return found, skipped

    def _next_scale(self, found_inf: bool) -> float:
        return self._scale

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """End the step: adjust the scale (dynamic rule, see the module docstring) and record history.

        ``new_scale`` sets the scale by hand, as in torch.
        """
        if new_scale is not None and not any(s.found_inf for s in self._per_opt.values()):
            found = skipped = False          # torch allows setting the scale without a step
        else:
            found, skipped = self._found_inf_this_step()
        used = self._scale
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, torch.Tensor) else new_scale
            value = _check_positive_finite("new_scale", value)
            if isinstance(self, NoLossScaler) and value != 1.0:
                raise ValueError("NoLossScaler's scale is always 1.0; use StaticLossScaler or DynamicLossScaler")
            self._set_scale(_f32(value))
        else:
            self._set_scale(self._next_scale(found))
        if self.record_history:
            fr = self._pending_fractions[0] if len(self._pending_fractions) == 1 else (
                self._pending_fractions or None)
            self.history.append(StepRecord(self._step_count, used, found, skipped, self._scale, fr))
        self._pending_fractions = []
        self._step_count += 1
        self._per_opt = defaultdict(_OptState)

    def _found_inf_per_device(self, optimizer: torch.optim.Optimizer) -> dict:
        """As torch's private helper of the same name (so code that inspects torch's scaler works here too)."""
        return self._per_opt[id(optimizer)].found_inf

    # -- history helpers ------------------------------------------------------------------------------
    @property
    def scales(self) -> list[float]:
        """The scale of every recorded step (``[r.scale for r in history]``)."""
        return [r.scale for r in self.history]

    @property
    def skipped_steps(self) -> list[int]:
        """Indices of the steps whose optimizer step was skipped."""
        return [r.step for r in self.history if r.skipped]

    def _check_stage_for_state(self) -> None:
        if any(s.stage != _READY for s in self._per_opt.values()):
            warnings.warn("state_dict() in the middle of a step: take it after update().", UserWarning, stacklevel=3)


class NoLossScaler(_ScalerBase):
    """No scaling (scale 1) and no skipping — plain training, but with a scaler's calls and a history.

    Swap it in for a real scaler to see what happens without one: non-finite gradients are recorded
    (``history[i].found_inf``) and the optimizer steps anyway.

    >>> s = NoLossScaler(); loss = torch.tensor(2.0); s.scale(loss) is loss
    True
    """

    _skip_nonfinite = False
    _multiply = False

    def __init__(self, *, track: str | torch.dtype | None = None, record_history: bool = True):
        super().__init__(1.0, track=track, record_history=record_history)
        self._materialised = True

    def __repr__(self) -> str:
        return "NoLossScaler()"

    def state_dict(self) -> dict[str, Any]:
        """``{"scale": 1.0}``."""
        return {"scale": 1.0}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Accept a mapping whose ``scale`` (if any) is 1.0."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict() takes a dict; got {type(state_dict).__name__}")
        if "scale" in state_dict and state_dict["scale"] != 1.0:
            raise ValueError(f"NoLossScaler has scale 1.0; this state has scale {state_dict['scale']!r} — "
                             "load it into StaticLossScaler or DynamicLossScaler")


class StaticLossScaler(_ScalerBase):
    """A constant scale: the loss is always multiplied by ``scale``.

    ``skip_nonfinite=True`` (default) skips steps whose gradients overflowed, as dynamic scalers do;
    ``False`` steps anyway (the parameters become inf/NaN — what a too-large static scale does without a check).

    >>> StaticLossScaler(1024.0).get_scale()
    1024.0
    """

    def __init__(self, scale: float, *, skip_nonfinite: bool = True, track: str | torch.dtype | None = None,
                 record_history: bool = True):
        scale = _check_positive_finite("scale", scale)
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
        value = _check_positive_finite("state_dict['scale']", state_dict["scale"])
        self._set_scale(_f32(value) if self._materialised else value)


class DynamicLossScaler(_ScalerBase):
    """The dynamic loss scaler: back off on overflow, grow after ``growth_interval`` clean steps.

    Defaults and rule are torch.amp.GradScaler's (exact parity with ``hysteresis=1``, no min/max);
    ``hysteresis=N`` backs off only on the N-th overflow in a row (DeepSpeed's ``hysteresis`` with
    ``consecutive_hysteresis=True``; every overflow step is still skipped); ``min_scale``/``max_scale`` clamp
    the scale (Apex's ``min_loss_scale``/``max_loss_scale``). See the module docstring for the rule.

    >>> s = DynamicLossScaler(init_scale=4.0, growth_interval=1, max_scale=8.0)
    >>> s.state_dict()["scale"], s.state_dict()["max_scale"]
    (4.0, 8.0)
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, hysteresis: int = 1, min_scale: float | None = None,
                 max_scale: float | None = None, *, track: str | torch.dtype | None = None,
                 record_history: bool = True):
        init_scale = _check_positive_finite("init_scale", init_scale)
        growth_factor = _check_positive_finite("growth_factor", growth_factor)
        if growth_factor <= 1.0:
            raise ValueError(f"growth_factor must be > 1 (the scale grows by it; torch's default 2.0); got {growth_factor!r}")
        backoff_factor = _check_positive_finite("backoff_factor", backoff_factor)
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1) (the scale shrinks by it; torch's default 0.5); "
                             f"got {backoff_factor!r}")
        growth_interval = _check_int("growth_interval", growth_interval)
        hysteresis = _check_int("hysteresis", hysteresis)
        lo = None if min_scale is None else _f32(_check_positive_finite("min_scale", min_scale))
        hi = None if max_scale is None else _f32(_check_positive_finite("max_scale", max_scale))
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_scale ({min_scale!r}) must be <= max_scale ({max_scale!r})")
        if (lo is not None and init_scale < lo) or (hi is not None and init_scale > hi):
            raise ValueError(f"init_scale ({init_scale!r}) must lie in [min_scale, max_scale] = [{min_scale!r}, {max_scale!r}]")
        super().__init__(init_scale, track=track, record_history=record_history)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._hysteresis = hysteresis
        self._min_scale = lo
        self._max_scale = hi
        self._growth_tracker = 0
        self._overflows_in_a_row = 0

    def __repr__(self) -> str:
        return (f"DynamicLossScaler(scale={self._scale!r}, growth_factor={self._growth_factor!r}, "
                f"backoff_factor={self._backoff_factor!r}, growth_interval={self._growth_interval}, "
                f"hysteresis={self._hysteresis}, min_scale={self._min_scale!r}, max_scale={self._max_scale!r})")

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def _next_scale(self, found_inf: bool) -> float:
        scale = self._scale
        if found_inf:
            self._growth_tracker = 0
            self._overflows_in_a_row += 1
            if self._overflows_in_a_row >= self._hysteresis:
                scale = _f32(scale * self._backoff_factor)
                if self._min_scale is not None and scale < self._min_scale:
                    scale = self._min_scale
        else:
            self._overflows_in_a_row = 0
            successful = self._growth_tracker + 1
            if successful == self._growth_interval:
                grown = _f32(scale * self._growth_factor)
                if math.isfinite(grown):
                    scale = grown if self._max_scale is None or grown < self._max_scale else self._max_scale
                self._growth_tracker = 0
            else:
                self._growth_tracker = successful
        return scale

    def state_dict(self) -> dict[str, Any]:
        """torch's five keys (so ``torch.amp.GradScaler.load_state_dict`` accepts it) plus ampkit's extras."""
        self._check_stage_for_state()
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
            "hysteresis": self._hysteresis,
            "_overflows_in_a_row": self._overflows_in_a_row,
            "min_scale": self._min_scale,
            "max_scale": self._max_scale,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state from :meth:`state_dict` or from ``torch.amp.GradScaler.state_dict()`` (same keys).

        A torch state leaves hysteresis and min/max as this scaler has them. Anything else raises a clear error.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict() takes a dict (from DynamicLossScaler.state_dict() or "
                            f"torch.amp.GradScaler.state_dict()); got {type(state_dict).__name__}")
        missing = [k for k in TORCH_STATE_KEYS if k not in state_dict]
        if missing:
            raise ValueError(
                f"not a loss-scaler state: missing keys {missing}; expected the keys of "
                f"torch.amp.GradScaler.state_dict() {list(TORCH_STATE_KEYS)} (plus optional hysteresis, "
                f"_overflows_in_a_row, min_scale, max_scale); got keys {sorted(map(str, state_dict))}")
        d = dict(state_dict)
        # validate everything on a scratch instance before touching self
        probe = DynamicLossScaler(
            init_scale=d["scale"], growth_factor=d["growth_factor"], backoff_factor=d["backoff_factor"],
            growth_interval=d["growth_interval"], hysteresis=d.get("hysteresis", self._hysteresis),
            min_scale=d.get("min_scale", self._min_scale), max_scale=d.get("max_scale", self._max_scale),
            record_history=False)
        tracker = _check_int("state_dict['_growth_tracker']", d["_growth_tracker"], minimum=0)
        in_a_row = _check_int("state_dict['_overflows_in_a_row']", d.get("_overflows_in_a_row", 0), minimum=0)
        self._growth_factor = probe._growth_factor
        self._backoff_factor = probe._backoff_factor
        self._growth_interval = probe._growth_interval
        self._hysteresis = probe._hysteresis
        self._min_scale = probe._min_scale
        self._max_scale = probe._max_scale
        self._growth_tracker = tracker
        self._overflows_in_a_row = in_a_row
        scale = float(d["scale"])
        self._set_scale(_f32(scale) if self._materialised else scale)
