"""Reading the number a learner gives: typed text (:func:`parse_value`) or any real number (:func:`real_value`).

Taught in notebook ``01_fp16_range.ipynb`` (the float explorer's text box). Unlike ``ampkit._util.check_number``,
inf, -inf, NaN and -0.0 are valid here: they are what the explorer shows.

>>> parse_value("2^-24") == 2**-24, real_value(10**400)
(True, inf)
"""
from __future__ import annotations

import math
import numbers
import re

import torch

from ampkit.i18n import tr

__all__ = ["parse_value", "real_value"]

_POW = re.compile(r"^\s*([+-]?)\s*(\d+(?:\.\d*)?)\s*(?:\*\*|\^)\s*\(?\s*([+-]?\d+)\s*\)?\s*$")


def real_value(value: object) -> float:
    """``value`` as a float64: a real number (numpy and ``fractions`` too) or a one-element real tensor.

    Non-finite values are kept; an int beyond float64 becomes ``±inf``. Anything else is a ``TypeError``.

    >>> real_value(torch.tensor(0.1, dtype=torch.float16))     # the fp16 value exactly, not 0.1
    0.0999755859375
    >>> real_value(10**400), real_value(float("nan"))
    (inf, nan)
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(tr("value must be a single number, got a tensor of shape {shape}",
                               shape=tuple(value.shape)))
        if value.is_complex() or value.dtype == torch.bool:
            raise TypeError(tr("value must be a real number, got a {dtype} tensor", dtype=value.dtype))
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = tr(" (use parse_value() for text)") if isinstance(value, str) else ""
        raise TypeError(tr("value must be a real number, got {type}{hint}", type=type(value).__name__, hint=hint))
    try:
        return float(value)
    except OverflowError:  # an int beyond float64
        return -math.inf if value < 0 else math.inf   # not 0: float(0) cannot overflow


# port: js/floats.js parseTyped
def parse_value(text: str) -> float:
    """Read a number typed by a learner: ``0.1``, ``1e-8``, ``-0``, ``inf``, ``nan``, ``2^-24``, ``2**-24``,
    ``0x1p-24``.

    Raises ``ValueError`` with a message saying what is accepted (a number that is not text goes through
    :func:`real_value`).

    >>> parse_value("2^-24") == 2**-24, parse_value(" -1e-8 ")
    (True, -1e-08)
    """
    if not isinstance(text, str):
        return real_value(text)
    s = text.strip().replace("_", "").replace("−", "-")
    if not s:
        raise ValueError(tr("type a number, e.g. 0.1, 1e-8, -0, inf, nan, 2^-24"))
    try:
        return float(s)
    except ValueError:
        pass
    if s.lower().startswith(("0x", "-0x", "+0x")):
        try:
            return float.fromhex(s)
        except (ValueError, OverflowError):
            pass
    m = _POW.match(s)
    if m:
        sign, base, exp = m.groups()
        try:
            v = float(base) ** int(exp)
        except OverflowError:
            v = math.inf
        except ZeroDivisionError:
            raise ValueError(tr("{text!r} divides by zero; try e.g. 0.1, 1e-8, 2^-24", text=text)) from None
        return -v if sign == "-" else v
    raise ValueError(tr("{text!r} is not a number; try e.g. 0.1, 1e-8, -0, inf, nan, 2^-24 or 0x1p-24", text=text))
