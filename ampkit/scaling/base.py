"""The machinery all three loss scalers share: torch.amp.GradScaler's calls, per-optimizer stages, history.

Taught in notebook ``03_loss_scaling.ipynb``; the scalers themselves (and the dynamic rule) are in
:mod:`ampkit.scaling.scalers`. Arithmetic is torch's: the scale is a float32 (:func:`~ampkit.formats.to_fp32`), the
reciprocal is taken in float64 and rounded to float32, gradients are unscaled and checked by
``torch._amp_foreach_non_finite_check_and_unscale_`` — so a scaler built on this class matches
``torch.amp.GradScaler`` bit for bit. A subclass says what it does with ``_multiply`` (scale the loss or not),
``_skip_nonfinite`` (skip an overflowing step or not) and ``_next_scale`` (the rule).

>>> to_fp32(0.1) == 0.1, to_fp32(2.0**200)
(False, inf)
"""
from __future__ import annotations

import inspect
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, overload

import torch

from ampkit.formats import Classification, classify, resolve_format, to_fp32
from ampkit.i18n import mark, tr
from ampkit.scaling.errors import ScaleInputError, ScalerTypeError, ScalerUsageError, ScalerValueError

__all__ = ["StepRecord"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"

_O2_HINT = mark(
    "Attempting to unscale FP16 gradients: parameter {name} of the optimizer has a float16 .grad. A loss "
    "scaler divides gradients by the scale and checks them for inf/NaN, which must happen in float32 (in fp16 "
    "the small unscaled gradients would flush to zero again, and the large scaled ones are already inf). "
    "Give the optimizer fp32 master weights instead: O2 keeps an fp32 copy of every parameter that the optimizer "
    "steps (ampkit.precision.apply_level(model, optimizer, 'O2', 'fp16')), or use O1 (torch.autocast with fp32 "
    "parameters). Pure fp16 training (O3, model.half()) has no master weights and can only use NoLossScaler().")
_PASS_ITSELF = (
    "GradScaler is going to stop passing itself as a keyword argument to the passed optimizer (torch's own "
    "FutureWarning, raised by ampkit's scaler too): the optimizer will get grad_scale and found_inf tensors.")
_BF16_WARNING = mark(
    "a loss scaler with bfloat16: bf16 has fp32's 8 exponent bits (smallest normal 2**-126), so gradients do not "
    "underflow and a loss scaler is unnecessary — train bf16 without one (NoLossScaler() or scaler=None).")


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
    fractions: Classification | list[Classification | None] | None = None


@dataclass
class _OptState:
    stage: str = _READY
    found_inf: dict = field(default_factory=dict)   # device -> 0-dim float32 tensor (1.0 when inf/NaN seen)
    found_inf_value: bool | None = None            # host copy once synced
    skipped: bool = False

class ScalerBase:
    """Machinery shared by the three scalers: per-optimizer stages, unscale, skip, history.

    ``_active`` False is torch's ``enabled=False``: every call is a no-op and ``step`` just steps.
    """

    _skip_nonfinite: bool = True
    _multiply: bool = True

    def __init__(self, scale: float, *, track: str | torch.dtype | None = None, record_history: bool = True,
                 active: bool = True, device: str | None = None):
        self._active = active
        self._device = device               # a device type ("cpu", "cuda") or None: wherever the loss is
        self._scale = scale                 # Python float; float32-exact once materialised
        self._scale_t: torch.Tensor | None = None
        self._materialised = False
        self._scaled = False                # scale() has run (torch: its _scale tensor exists)
        self._per_opt: dict[int, _OptState] = defaultdict(_OptState)
        self._warned_bf16 = False
        self._step_count = 0
        self._pending_fractions: list[Classification | None] = []
        self.last_step_skipped: bool = False
        self.record_history = bool(record_history)
        self.history: list[StepRecord] = []
        self.track = None if track is None else resolve_format(track)

    # -- torch.amp.GradScaler's calls -----------------------------------------------------------------
    def is_enabled(self) -> bool:
        """True: this scaler scales (:class:`NoLossScaler` and ``enabled=False`` say False, like torch's)."""
        return self._active

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled; no device sync: ampkit keeps it on the host)."""
        return self._scale if self._active else 1.0

    def _materialise(self, device: torch.device) -> torch.Tensor:
        if not self._materialised:
            self._scale = to_fp32(self._scale)
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

    def _require_scaled(self, call: str) -> None:
        if self._multiply and not self._scaled:
            raise ScalerUsageError(tr(
                "{call}() before any scale(): the gradients were not multiplied by the scale, so dividing them by "
                "it would be wrong. Write scaler.scale(loss).backward() (not loss.backward()) before "
                "{call}() — torch.amp.GradScaler raises here too.", call=call))

    def _opt_state(self, call: str, optimizer: Any) -> _OptState:
        """The optimizer's stage this iteration, once ``scale()`` has run and ``optimizer`` is an optimizer."""
        self._require_scaled(call)
        if not hasattr(optimizer, "param_groups") or not callable(getattr(optimizer, "step", None)):
            raise ScalerTypeError(f"{call}() takes an optimizer (an object with param_groups and step(), e.g. "
                                  f"torch.optim.SGD); got {type(optimizer).__name__}")
        return self._per_opt[id(optimizer)]

    def _maybe_warn_bf16(self, dtype: torch.dtype | None, device_type: str | None) -> None:
        if self._warned_bf16:
            return
        bf16 = dtype == torch.bfloat16
        if not bf16 and device_type is not None:
            try:
                bf16 = (torch.is_autocast_enabled(device_type)
                        and torch.get_autocast_dtype(device_type) == torch.bfloat16)
            except (RuntimeError, TypeError):  # a device type autocast does not know
                bf16 = False
        if bf16:
            self._warned_bf16 = True
            warnings.warn(tr(_BF16_WARNING), UserWarning, stacklevel=4)

    @overload
    def scale(self, outputs: torch.Tensor) -> torch.Tensor: ...
    @overload
    def scale(self, outputs: Iterable[torch.Tensor]) -> Iterable[torch.Tensor]: ...

    def scale(self, outputs: torch.Tensor | Iterable[torch.Tensor]) -> torch.Tensor | Iterable[torch.Tensor]:
        """Multiply a loss (or a nested list/tuple/iterable of tensors) by the current scale, as torch's.

        Lists and tuples come back as lists and tuples (nested ones too), other iterables as a lazy ``map``.

        >>> from ampkit.scaling import DynamicLossScaler
        >>> DynamicLossScaler(init_scale=8.0).scale([torch.tensor(0.5), (torch.tensor(1.0),)])
        [tensor(4.), (tensor(8.),)]
        """
        if not self._active:
            return outputs
        if isinstance(outputs, torch.Tensor):
            self._maybe_warn_bf16(outputs.dtype, outputs.device.type)
            if not self._multiply:
                return outputs
            self._scaled = True
            return outputs * self._materialise(outputs.device)
        if isinstance(outputs, (str, bytes)) or not isinstance(outputs, Iterable):
            raise ScaleInputError(f"scale() takes a tensor (the loss) or a list/tuple/iterable of tensors; "
                                  f"got {type(outputs).__name__}")
        scaled = map(self.scale, outputs)
        return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled

    def _grads_by_device_dtype(self, optimizer: Any, allow_fp16: bool) -> dict:
        groups: dict = defaultdict(lambda: defaultdict(list))
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                g = p.grad
                if g is None:
                    continue
                if g.dtype == torch.float16 and not allow_fp16:
                    raise ValueError(tr(_O2_HINT, name=tr("#{pi} of param group {gi} (shape {shape})", pi=pi, gi=gi,
                                                          shape=tuple(p.shape))))
                if g.is_sparse:
                    if g.dtype is torch.float16:
                        p.grad = g = g.coalesce()
                    g = g._values()
                groups[g.device][g.dtype].append(g)
        return groups

    def _unscale_groups(self, groups: dict, inv_master: torch.Tensor | None) -> dict:
        """Divide (multiply by ``inv_master``, or 1) every gradient and check it, per device: {device: found_inf}."""
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
        return found

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place and note whether any is inf/NaN.

        Call it at most once per step, after all backward passes and before clipping:
        ``scaler.unscale_(opt); clip_grad_norm_(params, 1.0); scaler.step(opt); scaler.update()``.
        Any object with ``param_groups`` and ``step()`` is an optimizer here, as in torch.
        """
        if not self._active:
            return
        state = self._opt_state("unscale_", optimizer)
        if state.stage == _UNSCALED:
            raise RuntimeError(tr(
                "unscale_() has already been called on this optimizer since the last update(): the gradients are "
                "already divided by the scale, a second call would divide them again. Call it once per step "
                "(before clipping), then step() and update()."))
        if state.stage == _STEPPED:
            raise RuntimeError(tr("unscale_() is being called after step(); call update() first "
                                  "(it starts the next step)."))
        groups = self._grads_by_device_dtype(optimizer, allow_fp16=not self._multiply)
        if self.track is not None:
            self._pending_fractions.append(self._classify(groups))
        inv_master = (self._materialise(next(iter(groups), torch.device("cpu"))).double().reciprocal().float()
                      if self._multiply else None)             # as torch: the reciprocal in float64
        state.found_inf = self._unscale_groups(groups, inv_master)
        state.found_inf_value = None
        state.stage = _UNSCALED

    def _check_inf_per_device(self, optimizer: torch.optim.Optimizer) -> dict:
        """As torch's private helper: check (not divide) the gradients; a scaler that never skips answers zeros."""
        self._require_scaled("_check_inf_per_device")
        state = self._per_opt[id(optimizer)]
        state.found_inf = self._unscale_groups(self._grads_by_device_dtype(optimizer, allow_fp16=True), None)
        state.found_inf_value = None
        return self._found_inf_for_optimizer(state)

    def _found_inf_for_optimizer(self, state: _OptState) -> dict:   # zeros when this scaler never skips
        return state.found_inf if self._skip_nonfinite else {d: torch.zeros_like(t) for d, t in state.found_inf.items()}

    def _get_scale_async(self) -> torch.Tensor | None:
        """As torch's private helper: the scale tensor (None before the first ``scale()``)."""
        return self._scale_t if self._scaled else None

    def _classify(self, groups: dict) -> Classification | None:
        assert self.track is not None  # called only when the scaler tracks a format
        flat = [g.detach().reshape(-1).float()
                for per_dtype in groups.values() for gs in per_dtype.values() for g in gs]
        if not flat:
            return None
        return classify(torch.cat([f.cpu() for f in flat]), self.track)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless done already), then ``optimizer.step()`` — skipped when a gradient is inf/NaN.

        Sets ``last_step_skipped``. Returns what ``optimizer.step`` returned (None when skipped). An optimizer
        that declares ``_step_supports_amp_scaling`` (fused Adam/SGD) unscales and skips by itself: it gets this
        scaler as ``grad_scaler=`` (if its ``step`` takes it) or ``grad_scale``/``found_inf`` set on it, as in torch.
        """
        if not self._active:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError(tr("closures are not supported with a loss scaler (as with torch.amp.GradScaler): "
                                  "compute the loss, scale(loss).backward(), then step(optimizer) without a closure."))
        state = self._opt_state("step", optimizer)
        if state.stage == _STEPPED:
            raise RuntimeError(tr("step() has already been called since the last update(); call update() once per "
                                  "step."))
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._step_amp_aware(optimizer, state, args, kwargs)
        if state.stage == _READY:
            self.unscale_(optimizer)
        if not state.found_inf:
            raise ScalerUsageError(tr("the optimizer has no gradients: call scaler.scale(loss).backward() before "
                                      "step()."))
        found = bool(sum(v.item() for v in state.found_inf.values()))
        state.found_inf_value = found
        skip = found and self._skip_nonfinite
        state.skipped = skip
        self.last_step_skipped = skip
        state.stage = _STEPPED
        return None if skip else optimizer.step(*args, **kwargs)

    def _step_amp_aware(self, optimizer: Any, state: _OptState, args: tuple, kwargs: dict) -> Any:
        """torch's contract with an optimizer that unscales and skips itself; NoLossScaler: a plain ``step()``."""
        hands_itself = self._multiply and "grad_scaler" in inspect.signature(optimizer.step).parameters
        sets_attributes = self._multiply and not hands_itself
        if hands_itself:
            warnings.warn(_PASS_ITSELF, FutureWarning, stacklevel=3)
            kwargs = {**kwargs, "grad_scaler": self}
        elif state.stage == _READY:
            self._check_inf_per_device(optimizer)
        if sets_attributes:
            scale_t = self._scale_t
            assert scale_t is not None  # scale() made it before the backward that gave these gradients
            optimizer.grad_scale = (getattr(optimizer, "grad_scale", None) if state.stage == _UNSCALED
                                    else scale_t * getattr(optimizer, "grad_scale", 1))
            optimizer.found_inf = sum([t.to(scale_t.device) for t in self._found_inf_for_optimizer(state).values()])
        retval = optimizer.step(*args, **kwargs)
        state.stage = _STEPPED
        if sets_attributes:
            del optimizer.grad_scale
            del optimizer.found_inf
        state.found_inf_value = bool(sum(v.item() for v in state.found_inf.values())) if state.found_inf else False
        state.skipped = self.last_step_skipped = state.found_inf_value and self._skip_nonfinite
        return retval

    def _found_inf_this_step(self) -> tuple[bool, bool]:
        if not self._per_opt or not any(s.found_inf for s in self._per_opt.values()):
            raise ScalerUsageError(tr("update() before any inf check: call scaler.step(optimizer) (or unscale_) "
                                      "first, once per step: scale(loss).backward(); step(optimizer); update()."))
        found = False
        skipped = False
        for s in self._per_opt.values():
            if s.found_inf_value is None and s.found_inf:
                s.found_inf_value = bool(sum(v.item() for v in s.found_inf.values()))
            found = found or bool(s.found_inf_value)
            skipped = skipped or s.skipped
        return found, skipped

    def _next_scale(self, found_inf: bool) -> float:
        """The scale after a step that did (or did not) find inf/NaN: the rule (here: unchanged)."""
        return self._scale

    def _check_new_scale(self, value: float) -> float:
        """A scale set by hand (``update(new_scale)``), checked by the subclass (here: any float, as torch)."""
        return value

    def _new_scale_value(self, new_scale: Any) -> float:
        """torch's rules for ``update(new_scale)``: a Python float, or a 1-element tensor without grad."""
        if isinstance(new_scale, float):
            return new_scale
        if not isinstance(new_scale, torch.Tensor):
            raise ScalerTypeError(f"update(new_scale=...) takes a Python float or a 1-element tensor, as torch's "
                                  f"(which refuses an int too: write {new_scale!r}.0); got {type(new_scale).__name__}")
        device = self._device or (self._scale_t.device.type if self._scale_t is not None else new_scale.device.type)
        if new_scale.device.type != device or new_scale.numel() != 1 or new_scale.requires_grad:
            raise ScalerValueError(f"update(new_scale=tensor) takes a 1-element tensor on {device!r} with "
                                   f"requires_grad=False; got shape {tuple(new_scale.shape)} on "
                                   f"{new_scale.device.type!r}, requires_grad={new_scale.requires_grad}")
        return float(new_scale.detach().reshape(()).item())

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """End the step: adjust the scale (dynamic rule, see the module docstring) and record history.

        ``new_scale`` sets the scale by hand, as in torch (a float or a 1-element tensor; 0 and inf accepted).
        """
        if not self._active:
            return
        self._require_scaled("update")
        if new_scale is not None and not any(s.found_inf for s in self._per_opt.values()):
            found = skipped = False          # torch allows setting the scale without a step
        else:
            found, skipped = self._found_inf_this_step()
        used = self._scale
        if new_scale is not None:
            self._set_scale(to_fp32(self._check_new_scale(self._new_scale_value(new_scale))))
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

    # -- pickling: as torch, only between iterations ----------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        if self._active and self._per_opt:
            raise ScalerUsageError("a loss scaler may only be pickled (or deep-copied) at the start of an iteration "
                                   "or after update(), as torch.amp.GradScaler: between step() and update() the "
                                   "inf checks of this step would be lost.")
        state = self.__dict__.copy()
        state["_scale_t"] = None             # as torch: the scale tensor is rebuilt by the next scale()
        state["_scaled"] = False
        return state

    # -- history helpers ------------------------------------------------------------------------------
    @property
    def scales(self) -> list[float]:
        """The scale of every recorded step (``[r.scale for r in history]``)."""
        return [r.scale for r in self.history]

    @property
    def skipped_steps(self) -> list[int]:
        """Indices of the steps whose optimizer step was skipped."""
        return [r.step for r in self.history if r.skipped]
