"""What each O-level does to a model and its optimizer: :func:`apply_level` and the :class:`MixedPrecision` it
returns (forward under the level, scaled backward, fp32 master weights, optimizer step).

Taught in ``02_autocast_and_levels.ipynb`` (the levels themselves are described in :mod:`ampkit.precision.levels`).

>>> import torch
>>> from ampkit.models import build_model
>>> model = build_model("mlp_ln")
>>> mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.1), "O2", "bf16")
>>> model.net[0].weight.dtype, model.net[1].weight.dtype, mp.masters[0].dtype
(torch.bfloat16, torch.float32, torch.float32)
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampkit._util import map_tensors
from ampkit.device import check_autocast_dtype
from ampkit.formats import format_name
from ampkit.i18n import tr
from ampkit.precision.levels import NORM_TYPES, resolve_level
from ampkit.protocols import Scaler, as_scaler

__all__ = ["MixedPrecision", "apply_level"]

#: The attribute apply_level leaves on a model and its optimizer (the level), so a level is never applied twice.
LEVEL_ATTR = "_ampkit_precision_level"


def cast_floats(obj: Any, dtype: torch.dtype) -> Any:
    """``obj`` (a tensor or a nested tuple/list/dict) with every floating tensor cast to ``dtype``."""
    return map_tensors(obj, lambda t: t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t)


class MixedPrecision:
    """What one training step needs for a level; made by :func:`apply_level` (or :meth:`plain`), not directly.

    Attributes: ``level``, ``dtype`` (the low dtype; O0 ignores it), ``device``, ``model``, ``optimizer``
    (the same optimizer object; under O2 its param groups hold the fp32 ``masters``), ``masters`` (O2 only, else
    empty), ``params`` (the model's trainable parameters, in optimizer order).

    A *scaler* below is any object with ``torch.amp.GradScaler``'s calls (``scale``, ``step``, ``update``)
    — a :class:`ampkit.protocols.Scaler` (the kit's scalers; torch.amp.GradScaler through ``as_scaler``).

    >>> import torch; from ampkit.models import build_model
    >>> m = build_model("mlp"); mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O1")
    >>> mp.forward(torch.zeros(2, 16)).dtype
    torch.float32
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, level: str, dtype: torch.dtype,
                 device: torch.device, params: list[nn.Parameter], masters: list[nn.Parameter],
                 hooks: list) -> None:
        self.model = model
        self.optimizer = optimizer
        self.level = level
        self.dtype = dtype
        self.device = device
        self.params = params
        self.masters = masters
        self._hooks = hooks
        self._stepped_with: Scaler | None = None
        self._warned_bf16 = False

    @classmethod
    def plain(cls, model: nn.Module, optimizer: torch.optim.Optimizer) -> MixedPrecision:
        """An O0 step for ``model`` and ``optimizer`` as they are: no level applied, nothing cast, checked or
        marked (unlike :func:`apply_level`). The model's output is still handed to the loss as fp32.

        >>> import torch; lin = torch.nn.Linear(2, 2)
        >>> MixedPrecision.plain(lin, torch.optim.SGD(lin.parameters(), lr=0.1)).level
        'O0'
        """
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}")
        params = [p for g in optimizer.param_groups for p in g["params"]]
        device = params[0].device if params else torch.device("cpu")
        return cls(model, optimizer, "O0", torch.float32, device, params, [], [])

    def __repr__(self) -> str:
        return (f"MixedPrecision(level={self.level!r}, dtype={format_name(self.dtype)}, device={self.device.type}, "
                f"masters={len(self.masters)})")

    @property
    def optimizer_params(self) -> list[nn.Parameter]:
        """The tensors the optimizer steps: the fp32 masters under O2, the model's parameters otherwise.
        Clip these (after ``scaler.unscale_(mp.optimizer)``): ``clip_grad_norm_(mp.optimizer_params, 1.0)``."""
        return self.masters if self.level == "O2" else self.params

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the matmuls run in: float32 for O0, the low dtype otherwise."""
        return torch.float32 if self.level == "O0" else self.dtype

    def autocast(self) -> contextlib.AbstractContextManager:
        """``torch.autocast(device, dtype)`` for O1; a no-op context for the other levels."""
        if self.level == "O1":
            return torch.autocast(self.device.type, dtype=self.dtype)
        return contextlib.nullcontext()

    def forward(self, x, *args, **kwargs) -> torch.Tensor:
        """Run the model under the level; return its output as fp32 (what the loss should see).

        O2/O3 cast floating inputs to the low dtype first (integer tokens pass through).
        """
        if self.level in ("O2", "O3"):
            x, args, kwargs = cast_floats(x, self.dtype), cast_floats(args, self.dtype), \
                cast_floats(kwargs, self.dtype)
        with self.autocast():
            out = self.model(x, *args, **kwargs)
        return cast_floats(out, torch.float32)

    __call__ = forward

    def _warn_bf16_scaler(self, scaler: Scaler | torch.amp.GradScaler | None) -> None:
        if (scaler is not None and self.level != "O0" and self.dtype == torch.bfloat16 and not self._warned_bf16
                and getattr(scaler, "is_enabled", lambda: True)()):
            warnings.warn(tr("bf16 has fp32's exponent range and rarely needs loss scaling; the scaler is used anyway "
                             "(pass scaler=None to skip it)"), UserWarning, stacklevel=3)
            self._warned_bf16 = True

    def backward(self, loss: torch.Tensor, scaler: Scaler | torch.amp.GradScaler | None = None) -> None:
        """``scaler.scale(loss).backward()`` (or ``loss.backward()``); under O2 then copy the low-precision grads
        into fp32 master grads, so that ``scaler.unscale_`` / ``scaler.step`` act on fp32 masters."""
        self._warn_bf16_scaler(scaler)
        scaled = scaler.scale(loss) if scaler is not None else loss
        assert isinstance(scaled, torch.Tensor)  # a scaled loss tensor is a tensor
        scaled.backward()
        if self.level == "O2":
            with torch.no_grad():
                for p, m in zip(self.params, self.masters):
                    m.grad = None if p.grad is None else p.grad.detach().to(torch.float32)

    def step(self, scaler: Scaler | torch.amp.GradScaler | None = None) -> None:
        """``scaler.step(optimizer)`` + ``scaler.update()`` (or ``optimizer.step()``); under O2 then copy the
        updated fp32 masters back into the low-precision model. Does not synchronise with the device."""
        self._stepped_with = None
        if scaler is None:
            self.optimizer.step()
        else:
            scaler = as_scaler(scaler)   # torch's GradScaler gains last_step_skipped
            scaler.step(self.optimizer)
            scaler.update()
            self._stepped_with = scaler   # read when asked: torch's answer waits for the device
        if self.level == "O2":
            with torch.no_grad():
                for p, m in zip(self.params, self.masters):
                    p.copy_(m)

    def last_step_skipped(self) -> bool:
        """Whether the last :meth:`step` was skipped by the scaler (inf/NaN grads): the scaler's own
        ``last_step_skipped`` (:class:`ampkit.protocols.Scaler`). Synchronises for torch's GradScaler."""
        return self._stepped_with is not None and bool(self._stepped_with.last_step_skipped)

    def zero_grad(self) -> None:
        """Drop the grads of the model (and of the fp32 masters under O2)."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.level == "O2":  # the model's 16-bit params are not the optimizer's (those are the masters)
            self.model.zero_grad(set_to_none=True)

    def remove_hooks(self) -> None:
        """Remove the O2 norm-casting hooks (the model keeps its dtypes)."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()


def _norm_pre_hook(module: nn.Module, args: tuple) -> tuple:
    return cast_floats(args, torch.float32)


def _make_norm_post_hook(dtype: torch.dtype) -> Callable:
    def hook(module: nn.Module, args: tuple, out):
        return cast_floats(out, dtype)
    return hook


def _check_pair(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[nn.Parameter]:
    """The optimizer's parameters, after checking that ``model`` and ``optimizer`` can take a level."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}")
    if hasattr(model, LEVEL_ATTR):
        raise ValueError(tr("level {level} was already applied to this model; apply_level "
                            "expects a fresh fp32 model (build a new one, e.g. build_model(...))",
                            level=getattr(model, LEVEL_ATTR)))
    if getattr(optimizer, LEVEL_ATTR, None) is not None:
        raise ValueError(tr("this optimizer was already given level {level}; make a new one",
                            level=getattr(optimizer, LEVEL_ATTR)))
    all_params = list(model.parameters())
    if not all_params:
        raise ValueError(tr("{model} has no parameters: there is nothing to train in mixed precision",
                            model=type(model).__name__))
    bad = sorted({str(p.dtype) for p in all_params if p.dtype != torch.float32})
    if bad:
        raise ValueError(tr("apply_level expects an fp32 model; found parameters in {dtypes}", dtypes=", ".join(bad)))
    trainable = {id(p) for p in all_params if p.requires_grad}
    opt_params = [p for g in optimizer.param_groups for p in g["params"]]
    opt_ids = {id(p) for p in opt_params}
    model_ids = {id(p) for p in all_params}
    if not opt_ids <= model_ids:
        raise ValueError(tr("the optimizer holds {n} tensor(s) that are not parameters of this "
                            "model; build it from model.parameters()", n=len(opt_ids - model_ids)))
    if not trainable <= opt_ids:
        raise ValueError(tr("the optimizer does not hold {n} of the model's trainable "
                            "parameters; build it from model.parameters()", n=len(trainable - opt_ids)))
    return opt_params


def apply_level(model: nn.Module, optimizer: torch.optim.Optimizer, level: str,
                dtype: str | torch.dtype = "bf16") -> MixedPrecision:
    """Apply precision ``level`` (``"O0"``…``"O3"``) with low dtype ``dtype`` (``"bf16"``/``"fp16"`` or a torch dtype)
    to a fresh fp32 ``model`` and the ``optimizer`` holding its parameters. Modifies both in place (O2/O3 cast the
    model; O2 swaps the optimizer's parameters for fp32 masters) and returns the :class:`MixedPrecision` to train with.

    Errors: unknown level or a dtype autocast cannot use on the model's device (``ValueError`` naming the valid
    ones); a model with no parameters, not in fp32, or already given a level; an optimizer that does not hold
    exactly the model's trainable parameters; O2/O3 on an optimizer that has already stepped.

    >>> import torch; from ampkit.models import build_model
    >>> m = build_model("mlp"); mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O3", "fp16")
    >>> {p.dtype for p in m.parameters()}
    {torch.float16}
    """
    level = resolve_level(level)
    params = _check_pair(model, optimizer)
    device = next(model.parameters()).device
    low = check_autocast_dtype(dtype, device)
    if level in ("O2", "O3") and len(optimizer.state):
        raise ValueError(tr("{level} changes the parameters' dtype: apply it before the optimizer's first step "
                            "(this optimizer already has state)", level=level))
    hooks: list = []
    masters: list[nn.Parameter] = []
    if level == "O2":
        # fp32 masters are exact copies of the fp32 weights, taken before the model is cast
        lookup = {}
        for p in params:
            m = nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad)
            lookup[id(p)] = m
            masters.append(m)
        for group in optimizer.param_groups:
            group["params"] = [lookup[id(p)] for p in group["params"]]
        for module in model.modules():
            if isinstance(module, NORM_TYPES):
                hooks.append(module.register_forward_pre_hook(_norm_pre_hook))
                hooks.append(module.register_forward_hook(_make_norm_post_hook(low)))
                continue
            with torch.no_grad():
                for p in module.parameters(recurse=False):
                    p.data = p.data.to(low)
                for name, b in module.named_buffers(recurse=False):
                    if b.is_floating_point():
                        setattr(module, name, b.to(low))
    elif level == "O3":
        model.to(low)
    setattr(model, LEVEL_ATTR, level)
    setattr(optimizer, LEVEL_ATTR, level)
    return MixedPrecision(model, optimizer, level, low, device, list(params), masters, hooks)
