"""The scalers' error classes (notebook ``03_loss_scaling.ipynb``: ampkit's scalers and ``torch.amp.GradScaler``
are interchangeable, errors included).

The five error classes are what ampkit's scalers raise where ``torch.amp.GradScaler`` raises an exception type
the kit's rule (wrong type: ``TypeError``, wrong value: ``ValueError``) would not pick: each derives from both,
so ``except AssertionError`` written for torch's scaler and ``except ValueError`` both catch it.

>>> from ampkit.scaling import DynamicLossScaler
>>> try:
...     DynamicLossScaler(growth_factor=0.5)
... except AssertionError as e:    # what torch's GradScaler raises here
...     print(type(e).__name__)
ScalerValueError
"""
from __future__ import annotations

__all__ = ["ScalerUsageError", "ScalerValueError", "ScalerTypeError", "ScalerStateError",
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
