"""The pieces of :mod:`ampkit.diagnose.watch` that know torch's internals: one fused finiteness check, tensor copies
kept in buffers allocated once, and the state of a loss scaler (kept, restored, and its own found_inf read).

Private to the kit. Sources: ``torch._foreach_norm`` is what ``torch.nn.utils.clip_grad_norm_`` uses to take every
gradient's norm in one call (``torch/nn/utils/clip_grad.py``); a scaler records each step's ``found_inf`` per
optimizer (``torch.amp.GradScaler._per_optimizer_states``, filled by ``unscale_``/``step`` and replaced by a new dict
in ``update()``, ``torch/amp/grad_scaler.py``; ampkit's scalers: ``_per_opt``).

>>> bool(all_finite([torch.ones(2), torch.tensor([1.0, float("nan")])]))
False
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

__all__ = ["all_finite", "exactly_finite", "Slots", "save_object", "restore_object", "per_optimizer_states",
           "found_inf_tensors"]


def all_finite(tensors: list[torch.Tensor]) -> torch.Tensor | bool:
    """One fused check: every tensor's 2-norm in fp32 (``torch._foreach_norm``, one call per device), then
    ``isfinite().all()``; returns a tensor (no device sync). An inf or NaN anywhere makes its norm inf or NaN; a
    finite tensor whose norm passes fp32's range (values near 1e19 and above) is a false alarm, which
    :func:`exactly_finite` then clears.

    >>> big = torch.full((4,), 1e19)      # finite, but its 2-norm (2e19) squares past fp32's range on the way
    >>> bool(all_finite([big])), exactly_finite([big])
    (False, True)
    """
    tensors = [t for t in tensors if t.is_floating_point() and t.numel()]
    if not tensors:
        return True
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    dev = tensors[0].device
    if all(t.device == dev for t in tensors):
        by_device[dev] = tensors
    else:
        for t in tensors:
            by_device.setdefault(t.device, []).append(t)
    flags = [torch.stack(torch._foreach_norm(ts, 2, dtype=torch.float32)).isfinite().all()
             for ts in by_device.values()]
    return flags[0] if len(flags) == 1 else torch.stack([f.cpu() for f in flags]).all()


def exactly_finite(tensors: list[torch.Tensor]) -> bool:
    """Element by element (only on a step the fused check flagged).

    >>> exactly_finite([torch.ones(2), torch.tensor([1.0, float("inf")])]), exactly_finite([torch.tensor([1, 2])])
    (False, True)
    """
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point() and t.numel())


class Slots:
    """Copies of a list of tensors in buffers allocated once: ``save`` is one ``_foreach_copy_`` while the
    shapes stay the same (a new allocation when they change)."""

    def __init__(self) -> None:
        self.copies: list[torch.Tensor] = []
        self._sig: tuple = ()

    def save(self, tensors: list[torch.Tensor]) -> None:
        sig = tuple((t.shape, t.dtype, t.device) for t in tensors)
        if sig != self._sig:
            self.copies, self._sig = [t.detach().clone() for t in tensors], sig
        elif tensors:
            with torch.no_grad():
                torch._foreach_copy_(self.copies, [t.detach() for t in tensors])

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.copies)


def _frozen(v: Any) -> bool:
    """A frozen dataclass (a scaler's rule): a value, replaced whole, never changed in place."""
    cls = type(v)
    return dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]  # typeshed's DataclassInstance declares only __dataclass_fields__


def save_object(obj: Any, depth: int = 0) -> dict:
    """The state of a small Python object (a loss scaler): tensors cloned, lists by length (they only grow during
    a step, e.g. a history), dicts and sets copied, nested plain objects (a wrapped scaler, a history) recursively.

    >>> from types import SimpleNamespace
    >>> scaler = SimpleNamespace(scale=torch.tensor(8.0), history=[1], opts={})
    >>> saved = save_object(scaler)
    >>> {name: kind for name, (kind, _, _) in saved.items()}       # how each attribute will be put back
    {'scale': 'tensor', 'history': 'list', 'opts': 'copy'}
    """
    saved: dict[str, tuple[str, Any, Any]] = {}   # name: (kind, the value, what restores it: by kind)
    for k, v in vars(obj).items():
        if isinstance(v, torch.Tensor):
            saved[k] = ("tensor", v, v.detach().clone())
        elif isinstance(v, list):
            saved[k] = ("list", v, len(v))
        elif isinstance(v, (dict, set)):
            saved[k] = ("copy", v, v.copy())
        elif depth < 2 and hasattr(v, "__dict__") and not isinstance(v, (nn.Module, torch.optim.Optimizer, type)) \
                and not callable(v) and not _frozen(v):
            saved[k] = ("object", v, save_object(v, depth + 1))
        else:
            saved[k] = ("value", v, None)
    return saved


def restore_object(obj: Any, saved: dict) -> None:
    """Put ``obj`` back to what :func:`save_object` saved: tensors copied back in place, lists cut to their saved
    length, dicts and sets refilled, attributes added since removed.

    >>> from types import SimpleNamespace
    >>> scaler = SimpleNamespace(scale=torch.tensor(8.0), history=[1])
    >>> saved = save_object(scaler)
    >>> _ = scaler.scale.mul_(0.5); scaler.history.append(2); scaler.extra = "added"     # one step's changes
    >>> restore_object(scaler, saved)
    >>> scaler.scale, scaler.history, hasattr(scaler, "extra")
    (tensor(8.), [1], False)
    """
    for k in [k for k in vars(obj) if k not in saved]:
        delattr(obj, k)
    for k, (kind, v, extra) in saved.items():
        if kind == "tensor":
            with torch.no_grad():
                v.copy_(extra)
        elif kind == "list":
            del v[extra:]
        elif kind == "copy":
            v.clear()
            v.update(extra)
        elif kind == "object":
            restore_object(v, extra)
        setattr(obj, k, v)


def per_optimizer_states(scaler: Any) -> dict | None:
    """The scaler's per-optimizer record of this step's found_inf (torch: ``_per_optimizer_states``, ampkit:
    ``_per_opt``; a wrapper such as RecordingScaler: its ``.scaler``'s). ``update()`` replaces it by a new dict.

    >>> from types import SimpleNamespace
    >>> torch_scaler = torch.amp.GradScaler("cpu")
    >>> per_optimizer_states(torch_scaler) == {}, per_optimizer_states(object()) is None
    (True, True)
    >>> per_optimizer_states(SimpleNamespace(scaler=torch_scaler)) is per_optimizer_states(torch_scaler)  # a wrapper
    True
    """
    for _ in range(3):
        for name in ("_per_optimizer_states", "_per_opt"):
            d = getattr(scaler, name, None)
            if isinstance(d, dict):
                return d
        scaler = getattr(scaler, "scaler", None)
        if scaler is None:
            return None
    return None


def found_inf_tensors(states: dict) -> list[torch.Tensor]:
    """Every ``found_inf`` tensor in a scaler's per-optimizer record (:func:`per_optimizer_states`): torch's
    ``found_inf_per_device`` dicts or ampkit's ``found_inf`` attributes.

    >>> found_inf_tensors({0: {"found_inf_per_device": {"cpu": torch.tensor(1.0)}}, 1: {}})
    [tensor(1.)]
    """
    out: list[torch.Tensor] = []
    for st in states.values():
        found = st.get("found_inf_per_device", {}) if isinstance(st, dict) else getattr(st, "found_inf", {})
        out.extend(t for t in found.values() if isinstance(t, torch.Tensor))
    return out
