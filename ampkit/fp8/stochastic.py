"""Stochastic rounding onto E2M1, with a seeded generator. Taught in ``10_fp4.ipynb``.

A value ``x`` between its two E2M1 neighbours ``lo < hi`` rounds up with probability ``(x - lo) / (hi - lo)`` and
down otherwise, so its expected value is ``x`` itself: unbiased, where round-to-nearest always moves ``x`` the same
way. The price is noise: one draw is off by up to a whole step ``hi - lo`` (round-to-nearest: half a step), its
variance ``(x - lo)(hi - x)``. The NVFP4 recipe rounds only the gradients stochastically (Transformer Engine's
``NVFP4BlockScaling``: ``fp4_quant_bwd_grad`` has ``stochastic_rounding=True``): a gradient's small values are
summed over many steps, where a bias adds up and noise averages out.

Transformer Engine's kernels draw the random bits on the GPU; the kit draws ``u ~ U[0, 1)`` from a
``torch.Generator`` the caller seeds and rounds the magnitude up (away from zero) where ``u < (|x| - down) / step``
(``down`` the E2M1 magnitude just below ``|x|``, ``step`` the grid's spacing there): the same distribution, not the
same draws, so the tests check the statistics (mean of many draws closer to ``x`` than round-to-nearest, as
Transformer Engine's ``tests/pytorch/nvfp4/test_nvfp4_sr_quantize.py`` does; and unbiased within a bound), never a
draw bit for bit.

>>> g = torch.Generator().manual_seed(0)
>>> x = torch.full((10000,), 2.5)                               # halfway between 2 and 3
>>> v = stochastic_round_e2m1(x, g)
>>> sorted(set(v.tolist())), round(v.mean().item(), 2)
([2.0, 3.0], 2.5)
"""
from __future__ import annotations

import torch

from ampkit.formats.e2m1 import E2M1_MAX, e2m1_encode, e2m1_neighbours, e2m1_step

__all__ = ["stochastic_e2m1", "stochastic_round_e2m1", "round_up_probability", "sr_mean_bound"]


def round_up_probability(x: torch.Tensor) -> torch.Tensor:
    """``(x - lo) / (hi - lo)`` for each ``x`` in [-6, 6] (0 where ``x`` is an E2M1 value).

    >>> round_up_probability(torch.tensor([2.25, 5.0, 4.0])).tolist()
    [0.25, 0.5, 0.0]
    """
    lo, hi = e2m1_neighbours(x)
    gap = hi - lo
    return torch.where(gap > 0, (x.float() - lo) / torch.where(gap > 0, gap, torch.ones_like(gap)),
                       torch.zeros_like(gap))


def stochastic_round_e2m1(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``x`` (values already scaled into [-6, 6]) rounded stochastically onto E2M1 with ``generator``, as fp32
    values; :func:`stochastic_e2m1` gives their codes. One ``torch.rand`` draw per element, in the tensor's order,
    so a seed repeats a run exactly. NaN gives 0, as :func:`ampkit.formats.e2m1.e2m1_encode` does; a value that
    rounds to zero keeps its sign, as round-to-nearest does.

    >>> g = torch.Generator().manual_seed(1)
    >>> stochastic_round_e2m1(torch.tensor([4.0, -6.0, 0.0]), g).tolist()      # values on the grid stay
    [4.0, -6.0, 0.0]
    """
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a seeded torch.Generator (torch.Generator().manual_seed(0))")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor")
    xf = torch.nan_to_num(x.float(), nan=0.0)
    a = xf.abs()
    if a.numel() and float(a.max()) > E2M1_MAX:
        raise ValueError("stochastic rounding needs values in [-6, 6]: scale and clamp them first")
    step = e2m1_step(a)
    down = torch.floor(a / step) * step                        # the magnitude just below-or-at |x|
    u = torch.rand(xf.shape, generator=generator, dtype=torch.float32)
    up = (u < (a - down) / step).to(torch.float32)             # away from zero with probability (|x| - down) / step
    return torch.copysign(down + up * step, xf)


def stochastic_e2m1(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """E2M1 codes (uint8) of :func:`stochastic_round_e2m1`.

    >>> stochastic_e2m1(torch.tensor([4.0, -6.0, 0.0]), torch.Generator().manual_seed(1)).tolist()
    [6, 15, 0]
    """
    return e2m1_encode(stochastic_round_e2m1(x, generator))


def sr_mean_bound(x: torch.Tensor, draws: int, sigmas: float = 6.0) -> torch.Tensor:
    """How far the mean of ``draws`` independent stochastic roundings of ``x`` may lie from ``x``: ``sigmas``
    standard deviations of that mean, ``sigmas · sqrt((x - lo)(hi - x) / draws)``.

    One draw is ``lo + (hi - lo)·B`` with ``B ~ Bernoulli(p)``, ``p = (x - lo)/(hi - lo)``: mean ``x``, variance
    ``(hi - lo)² p (1 - p) = (x - lo)(hi - x)``. The mean of ``n`` draws has variance ``(x - lo)(hi - x) / n``; by
    Chebyshev a deviation beyond ``k`` standard deviations has probability at most ``1/k²`` for any one element,
    and by the normal approximation (``n`` large) about ``2·Φ(-k)`` — ``k = 6``: about 2e-9 per element.

    >>> sr_mean_bound(torch.tensor([2.5, 3.0]), draws=100).tolist()             # on the grid: no spread at all
    [0.30000001192092896, 0.0]
    """
    lo, hi = e2m1_neighbours(x)
    return sigmas * torch.sqrt((x.float() - lo) * (hi - x.float()) / draws)

