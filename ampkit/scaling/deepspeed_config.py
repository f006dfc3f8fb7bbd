"""DeepSpeed's ``fp16`` config values as DeepSpeed reads them: what its pydantic model turns into an int or a bool.

Used by :class:`ampkit.scaling.framework_rules.DeepSpeedDynamicRule` (preset ``"deepspeed"``, taught in notebook
``03_loss_scaling.ipynb``, section "Every framework's scaler as a preset"), so that the preset accepts exactly the
values DeepSpeed's own config accepts. ``DeepSpeedFP16Config`` (``deepspeed/runtime/precision_config.py`` at
v0.19.5) declares ``initial_scale_power: int``, ``loss_scale_window: int``, ``hysteresis: int``,
``min_loss_scale: int`` and ``consecutive_hysteresis: bool`` on a pydantic model in its default *lax* mode
(``DeepSpeedConfigModel``, ``deepspeed/runtime/config_utils.py``), which converts:

- to an int: an int; a bool (True -> 1); a float, ``Decimal`` or ``Fraction`` with no fractional part (16.0 ->
  16; 0.25, inf and NaN are refused, and so is a float beyond the 64-bit integer range); a string or bytes of
  digits with optional sign, ``_`` separators, surrounding whitespace and a fractional part of zeros (``"16"``,
  ``" 16 "``, ``"1_6"``, ``"16.0"``; not ``"1e2"`` or ``"0x10"``);
- to a bool: a bool, 0 / 1 (int, float, ``Decimal``, ``Fraction``), and the strings ``"0" "off" "f" "false" "n"
  "no"`` / ``"1" "on" "t" "true" "y" "yes"`` in any case (no surrounding whitespace).

``loss_scale_window`` and ``min_loss_scale`` pass a stricter validator first (``_reject_non_integer_scale_params``,
DeepSpeed PR #8050, in v0.19.5): a bool, an infinite or NaN float, and anything ``int()`` cannot convert (so
``"16.0"``) are refused. ``DeepSpeedConfigModel.__init__`` drops every key whose value is ``"auto"``, so
``"auto"`` means the default. Measured with pydantic 2.14.4 on ``DeepSpeedFP16Config`` as v0.19.5 declares it
(the table is pinned in ``tests/test_scaling_deepspeed_config.py``).

>>> deepspeed_int("min_loss_scale", 16.0, default=1, strict=True), deepspeed_int("hysteresis", "2", default=2)
(16, 2)
>>> deepspeed_int("min_loss_scale", 0.25, default=1, strict=True)
Traceback (most recent call last):
...
ValueError: min_loss_scale must be an int (DeepSpeed's fp16 config: 16, 16.0, '16' or 'auto'; not a bool, a \
string with a decimal point, inf or NaN); got 0.25, which has a fractional part
"""
from __future__ import annotations

import decimal
import math
import numbers
import re
from typing import Any

import numpy as np

__all__ = ["deepspeed_int", "deepspeed_bool"]

#: pydantic's lax str -> int: ASCII digits, optional sign, ``_`` between digits, an optional ``.000`` tail.
_INT_STRING = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?", re.ASCII)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_I64 = 2.0**63


def _valid(name: str, strict: bool) -> str:
    if strict:
        return (f"{name} must be an int (DeepSpeed's fp16 config: 16, 16.0, '16' or 'auto'; not a bool, a string "
                f"with a decimal point, inf or NaN)")
    return f"{name} must be an int (DeepSpeed's fp16 config: 16, 16.0, '16', '16.0', True or 'auto'; not inf or NaN)"


def _text(value: Any) -> str | None:
    """A str, or bytes as UTF-8 text; None for anything else (or bytes that are not UTF-8)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def deepspeed_int(name: str, value: Any, default: int, strict: bool = False) -> int:
    """``value`` as DeepSpeed's fp16 config turns it into an int (see the module docstring); ``strict``: the field
    also passes v0.19.5's ``_reject_non_integer_scale_params`` (``loss_scale_window``, ``min_loss_scale``).
    A value DeepSpeed refuses raises TypeError (not a number or a string; a bool where refused) or ValueError.

    >>> deepspeed_int("hysteresis", "2", 2), deepspeed_int("hysteresis", 16.0, 2), deepspeed_int("hysteresis", True, 2)
    (2, 16, 1)
    >>> deepspeed_int("hysteresis", "auto", 2), deepspeed_int("loss_scale_window", "1_000", 1000)
    (2, 1000)
    >>> deepspeed_int("hysteresis", 2.5, 2)
    Traceback (most recent call last):
    ...
    ValueError: hysteresis must be an int (DeepSpeed's fp16 config: ...); got 2.5, which has a fractional part
    """
    if isinstance(value, str) and value == "auto":
        return default
    want = _valid(name, strict)
    got = f"got {type(value).__name__} {value!r}"
    if isinstance(value, bool):
        if strict:
            raise TypeError(f"{want}; {got} (DeepSpeed: 'must be an integer, not bool')")
        return int(value)
    if isinstance(value, numbers.Integral | np.bool_):      # numpy's bool passes DeepSpeed's bool check
        return int(value)
        return int(value)
    text = _text(value)
    if text is not None:
        digits = text.strip()
        if not _INT_STRING.fullmatch(digits) or (strict and "." in digits):
            raise ValueError(f"{want}; got the string {value!r}, which is not one")
        return int(digits.split(".")[0].replace("_", ""))
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        if isinstance(value, decimal.Decimal):
            finite = value.is_finite()
        else:
            finite = isinstance(value, numbers.Rational) or math.isfinite(float(value))
        if not finite:
            raise ValueError(f"{want}; got {value!r}")
        if value != int(value):  # type: ignore[arg-type]  # typeshed: Real.__trunc__ gives a protocol; int() takes any Real
            raise ValueError(f"{want}; got {value!r}, which has a fractional part")
        if not isinstance(value, numbers.Rational | decimal.Decimal) and not -_I64 < float(value) < _I64:
            raise ValueError(f"{want}; got {value!r}, beyond the 64-bit range pydantic converts from a float")
        return int(value)  # type: ignore[arg-type]  # typeshed: Real.__trunc__ gives a protocol; int() takes any Real
    raise TypeError(f"{want}; {got}")


def deepspeed_bool(name: str, value: Any, default: bool) -> bool:
    """``value`` as DeepSpeed's fp16 config turns it into a bool (pydantic's lax bool; ``"auto"``: ``default``).

    >>> deepspeed_bool("consecutive_hysteresis", "yes", False), deepspeed_bool("consecutive_hysteresis", 0, True)
    (True, False)
    """
    if isinstance(value, str) and value == "auto":
        return default
    want = (f"{name} must be True or False (DeepSpeed's fp16 config also takes 0 / 1, 'true' / 'false', 'yes' / "
            f"'no', 'on' / 'off', 't' / 'f', 'y' / 'n' or 'auto')")
    if isinstance(value, bool | np.bool_):
        return bool(value)
    text = _text(value)
    if text is not None:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"{want}; got the string {value!r}")
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        if value in (0, 1):
            return bool(value == 1)
        raise ValueError(f"{want}; got {value!r}")
    raise TypeError(f"{want}; got {type(value).__name__} {value!r}")
