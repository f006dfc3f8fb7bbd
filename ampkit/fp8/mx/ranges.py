"""What one MX block can hold once a scale rule has chosen its exponent (:class:`BlockRange`): where it saturates
and below what it flushes, per rule. Taught in ``10_fp4.ipynb`` (MXFP4's scale rules) on the rule of
:mod:`ampkit.fp8.mx.rule`.

>>> block_range(14.0, rounding="ocp").saturates
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampkit.formats.e2m1 import E2M1_SATURATION
from ampkit.fp8.mx.rule import MX_BLOCK, elem_max, elem_name, mx_exponents
from ampkit.fp8.quantize import fp8_min_subnormal, saturation_threshold

__all__ = ["BlockRange", "block_range"]


@dataclass(frozen=True)
class BlockRange:
    """What one MX block can hold once its scale is chosen: ``scale = 2**exponent``; values up to ``largest``
    (elem_max · scale) are kept, at or above ``saturates_from`` they saturate; below ``flush_below`` (half the
    smallest non-zero element times the scale) they flush to zero."""

    amax: float
    rounding: str
    exponent: int
    scale: float
    largest: float
    saturates_from: float
    flush_below: float
    tie_saturates: bool = True     # an amax exactly at saturates_from saturates (E2M1, e5m2) or rounds down (e4m3)

    @property
    def saturates(self) -> bool:
        """Whether the block's own amax saturates under this rule."""
        return self.amax > self.saturates_from or (self.amax == self.saturates_from and self.tie_saturates)


def block_range(amax: float, fmt: str = "e2m1", rounding: str = "ocp") -> BlockRange:
    """The :class:`BlockRange` a block of amax ``amax`` gets under ``rounding`` (E2M1 elements: smallest non-zero
    0.5, saturation from 7 = where rounding would pass 6; fp8: the format's own thresholds).

    >>> [(r.rounding, r.exponent, r.saturates, r.flush_below) for r in (block_range(7.0, rounding=k)
    ...  for k in ("floor", "ceil", "rceil"))]
    [('floor', 0, True, 0.25), ('ceil', 1, False, 0.5), ('rceil', 1, False, 0.5)]
    """
    name = elem_name(fmt)
    x = torch.zeros(1, MX_BLOCK)
    x[0, 0] = float(amax)
    e = int(mx_exponents(x, name, MX_BLOCK, rounding)[0, 0])
    scale = math.ldexp(1.0, e)
    if name == "e2m1":
        smallest, (sat, tie) = 0.5, (E2M1_SATURATION, True)
    else:
        smallest, (sat, tie) = fp8_min_subnormal(name), saturation_threshold(name)
    return BlockRange(amax=float(amax), rounding=rounding, exponent=e, scale=scale, largest=elem_max(name) * scale,
                      saturates_from=sat * scale, flush_below=smallest / 2 * scale, tie_saturates=tie)
