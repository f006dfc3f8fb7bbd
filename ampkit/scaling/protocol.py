"""The scaling package's shapes: the replayed rules' :class:`ScaleRule` and the scalers' error classes.

Taught in notebook ``03_loss_scaling.ipynb`` ("ampkit's scalers and ``torch.amp.GradScaler`` are interchangeable:
same calls, same numbers"). :class:`Scaler` itself lives on the ground floor, :mod:`ampkit.protocols` (the levels
in :mod:`ampkit.precision` use it too); it is re-exported here. :class:`ScaleRule` is the smaller shape of the
replayed rules (:mod:`ampkit.scaling.rules`).

The five error classes are what ampkit's scalers raise where ``torch.amp.GradScaler`` raises an exception type
the kit's rule (wrong type: ``TypeError``, wrong value: ``ValueError``) would not pick: each derives from both,
so ``except AssertionError`` written for torch's scaler and ``except ValueError`` both catch it.

>>> from ampkit.scaling import DynamicLossScaler
>>> isinstance(DynamicLossScaler(), Scaler), isinstance(object(), Scaler)
(True, False)
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ampkit.protocols import Scaler

__all__ = ["Scaler", "ScaleRule", "ScalerUsageError", "ScalerValueError", "ScalerTypeError", "ScalerStateError",
           "ScaleInputError"]


class ScalerUsageError(RuntimeError, AssertionError):
    """A scaler call out of order: ``step()``/``unscale_()``/``update()`` before any ``scale()``, ``update()``
    before any inf check, pickling between ``step()`` and ``update()`` (torch: ``AssertionError``)."""


class ScalerValueError(ValueError, AssertionError):
    """A bad setting or ``update(new_scale)`` tensor where torch asserts (``growth_factor <= 1``,
    a ``new_scale`` that requires grad, ...)."""


class ScalerTypeError(TypeError, AttributeError):
    """A wrong type where torch fails on a missing attribute (``update(new_scale=2)``, ``unscale_("sgd")``)."""


class ScalerStateError(ValueError, KeyError, RuntimeError):
    """A state dict that cannot be loaded: torch raises ``KeyError`` (missing key) or ``RuntimeError`` (``{}``)."""

    __str__ = Exception.__str__       # not KeyError's quoted repr


class ScaleInputError(ValueError, TypeError):
    """``scale()`` of something that is not a tensor or a (nested) list/tuple/iterable of tensors
    (torch: ``ValueError``)."""


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
