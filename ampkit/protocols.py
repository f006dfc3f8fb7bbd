"""The loss-scaler protocol: the one shape the engine's layers meet through (the ground floor of the kit).

Taught in notebook ``03_loss_scaling.ipynb`` ("ampkit's scalers and ``torch.amp.GradScaler`` are interchangeable:
same calls, same numbers"). :class:`Scaler` is a structural type (``typing.Protocol``): the eight calls of
``torch.amp.GradScaler`` that a training loop makes, plus ``last_step_skipped`` (was the last ``step()`` skipped,
read after ``update()``). ampkit's scalers (:mod:`ampkit.scaling`) have all nine; ``torch.amp.GradScaler`` has the
eight calls, and :func:`as_scaler` gives it the ninth (:class:`GradScalerSkips`), through its public calls only.
So ``precision`` (the levels) and ``scaling`` (the scalers) both import this module and never each other.

It is ``runtime_checkable``: ``isinstance(obj, Scaler)`` says whether ``obj`` has all nine members (not their
signatures).

>>> import torch
>>> isinstance(torch.amp.GradScaler("cpu"), Scaler), isinstance(as_scaler(torch.amp.GradScaler("cpu")), Scaler)
(False, True)
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["Scaler", "GradScalerSkips", "as_scaler"]


@runtime_checkable
class Scaler(Protocol):
    """The loss-scaler calls ampkit makes (``MixedPrecision.backward/step``, ``train``, ``SinkModel``, notebook 03).

    One step: ``scale(loss).backward()``; optionally ``unscale_(optimizer)`` before clipping; ``step(optimizer)``
    (skipped when a gradient is inf/NaN); ``update()``; then ``last_step_skipped`` says whether that step was
    skipped. ``get_scale``/``is_enabled`` read the state, ``state_dict``/``load_state_dict`` checkpoint it.
    """

    @property
    def last_step_skipped(self) -> bool:
        """Whether the last ``step()`` was skipped (inf/NaN gradients); valid after ``update()``."""
        ...

    def scale(self, outputs: torch.Tensor | Iterable[torch.Tensor]) -> torch.Tensor | Iterable[torch.Tensor]:
        """The loss (or tensors) multiplied by the current scale."""
        ...

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and note any inf/NaN."""
        ...

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless a gradient was inf/NaN."""
        ...

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """End the step: adjust the scale (or set it to ``new_scale``)."""
        ...

    def get_scale(self) -> float:
        """The current scale as a Python float."""
        ...

    def is_enabled(self) -> bool:
        """Whether this scaler scales at all."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state, for a checkpoint."""
        ...

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        ...


class GradScalerSkips:
    """``torch.amp.GradScaler`` with ``last_step_skipped``; the other calls pass through.

    torch's scaler forgets its inf/NaN check in ``update()``, and the only reader of that check is its private
    ``_found_inf_per_device``. This class is the one place in the kit that reads it (right after ``step()``,
    keeping the device tensor: no sync); ``last_step_skipped`` turns it into a bool when asked (one ``.item()``).
    So no caller needs ``hasattr`` or a private torch attribute. A fused optimizer's step is not skipped by the
    scaler but receives ``found_inf`` itself; it is reported the same way.

    >>> import torch
    >>> p = torch.nn.Parameter(torch.ones(1)); opt = torch.optim.SGD([p], lr=0.1)
    >>> s = as_scaler(torch.amp.GradScaler("cpu", init_scale=2.0**100))
    >>> s.scale(p.sum() * 2.0**100).backward(); _ = s.step(opt); s.update(); s.last_step_skipped, p.item()
    (True, 1.0)
    >>> opt.zero_grad(); s.scale(p.sum()).backward(); _ = s.step(opt); s.update(); s.last_step_skipped
    False
    """

    def __init__(self, scaler: torch.amp.GradScaler):
        if not isinstance(scaler, torch.amp.GradScaler):
            raise TypeError(f"scaler must be a torch.amp.GradScaler; got {type(scaler).__name__}")
        self.scaler = scaler
        self._found_inf: torch.Tensor | None = None

    @property
    def last_step_skipped(self) -> bool:
        """Whether the last ``step()`` found inf/NaN gradients (synchronises: ``.item()``)."""
        return self._found_inf is not None and bool(self._found_inf.item() > 0)

    def scale(self, outputs):
        return self.scaler.scale(outputs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        out = self.scaler.step(optimizer, *args, **kwargs)
        per_device = self.scaler._found_inf_per_device(optimizer) if self.scaler.is_enabled() else {}
        self._found_inf = sum(v.to(torch.float32) for v in per_device.values()) if per_device else None
        return out

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        self.scaler.update(new_scale)

    def get_scale(self) -> float:
        return self.scaler.get_scale()

    def is_enabled(self) -> bool:
        return self.scaler.is_enabled()

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict()

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.scaler.load_state_dict(dict(state_dict))   # torch's annotation asks for a dict; it only reads it

    def __repr__(self) -> str:
        return f"GradScalerSkips({self.scaler!r})"


def as_scaler(scaler: Any) -> Scaler:
    """``scaler`` as a :class:`Scaler`: torch's ``GradScaler`` wrapped in :class:`GradScalerSkips`, any other
    object with ``step()``, ``update()`` and ``last_step_skipped`` as it is (ampkit's scalers, a wrapper such as
    :class:`ampkit.diagnose.RecordingScaler`, a minimal scaler in a test); anything else is refused (TypeError).

    >>> import torch
    >>> type(as_scaler(torch.amp.GradScaler("cpu"))).__name__
    'GradScalerSkips'
    """
    if isinstance(scaler, torch.amp.GradScaler):
        return GradScalerSkips(scaler)
    missing = [n for n in ("step", "update", "last_step_skipped") if not hasattr(scaler, n)]
    if missing:
        raise TypeError(f"scaler must be an ampkit scaler, a torch.amp.GradScaler or an object with their step(), "
                        f"update() and last_step_skipped; {type(scaler).__name__} lacks {', '.join(missing)}")
    return scaler
