"""Tile and block scaling with an fp32 scale: one scale per 1×128 tile (activations, gradients) or per 128×128
block (weights), elements in fp8 (e4m3 by default). Taught in ``06_fp8_scaling.ipynb`` (section 5).

This is the scheme of DeepSeek-V3's FP8 training (arXiv:2412.19437, §3.3) as Transformer Engine implements it in its
``Float8BlockScaling`` recipe (``transformer_engine/common/recipe/__init__.py``; the docs'
``features/low_precision_training/fp8_blockwise_scaling``):

- a tile is ``tile = (rows, cols)`` consecutive values: ``(1, 128)`` is a 1-D tile along a row, ``(128, 128)`` a 2-D
  block; the tile shape must divide the tensor's last two dimensions (no padding);
- each tile's scale is ``fp8_max / amax_tile`` in fp32 (TE's ``compute_scale_from_amax``): an amax of 0, inf or NaN
  gives scale 1, a quotient that overflows fp32 becomes fp32's largest value;
- ``power_of_two=True`` (TE's default for this recipe) keeps only the sign and exponent bits of that scale: it is
  rounded *down* to a power of two, so ``amax_tile * scale <= fp8_max`` still holds and nothing saturates;
- quantize = cast ``x * scale`` (saturated to ±fp8_max) to fp8; dequantize = multiply by ``scale_inv = 1 / scale``
  (fp32), the inverse TE stores next to the data.

Unlike MX (:mod:`ampkit.fp8.mx`) the scale is a full fp32 number, not an 8-bit power of two, unless
``power_of_two`` asks for one.

>>> x = torch.tensor([[1.0, 3.5, -2.0, 0.25]])
>>> tile_scales(x, (1, 4), power_of_two=False).tolist(), tile_scales(x, (1, 4)).tolist()
([[128.0]], [[128.0]])
>>> tile_scales(torch.tensor([[3.0, 1.0]]), (1, 2), power_of_two=False).item(), \
tile_scales(torch.tensor([[3.0, 1.0]]), (1, 2)).item()
(149.3333282470703, 128.0)
"""
from __future__ import annotations

import torch

from ampkit._util import check_int
from ampkit.formats import FP32_MAX
from ampkit.fp8.quantize import fp8_dtype, fp8_max, fp8_name, fp8_to_float

__all__ = ["TILE_1X128", "BLOCK_128X128", "check_tile", "tile_scales", "scales_from_amax", "tile_quantize",
           "tile_dequantize", "tile_fake_quantize", "transpose_mismatch"]

#: Transformer Engine's ``Float8BlockScaling`` shapes: 1-D tiles (activations, gradients) and 2-D blocks (weights).
TILE_1X128 = (1, 128)
BLOCK_128X128 = (128, 128)


def check_tile(x: torch.Tensor, tile) -> tuple[int, int]:
    """``tile`` as ``(rows, cols)`` positive ints dividing ``x``'s last two dimensions (``x`` is at least 2-D).

    >>> check_tile(torch.zeros(4, 256), TILE_1X128)
    (1, 128)
    >>> check_tile(torch.zeros(4, 100), TILE_1X128)
    Traceback (most recent call last):
    ...
    ValueError: tile 1×128 does not divide the tensor's last two dimensions 4×100; no padding is done — ...
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2:
        raise TypeError("x must be a floating-point tensor with at least two dimensions (rows × values)")
    if (not isinstance(tile, (tuple, list)) or len(tile) != 2
            or any(isinstance(t, bool) or not isinstance(t, int) for t in tile)):
        raise TypeError(f"tile must be a pair of ints (rows, cols), e.g. {TILE_1X128} or {BLOCK_128X128}; "
                        f"got {tile!r}")
    tr, tc = check_int("tile rows", tile[0]), check_int("tile cols", tile[1])
    rows, cols = x.shape[-2], x.shape[-1]
    if rows % tr or cols % tc:
        raise ValueError(f"tile {tr}×{tc} does not divide the tensor's last two dimensions {rows}×{cols}; no "
                         f"padding is done — tile rows must divide {rows}, tile cols must divide {cols}")
    return tr, tc


def to_tiles(x: torch.Tensor, tr: int, tc: int) -> torch.Tensor:
    """View ``(..., R, C)`` as ``(..., R/tr, C/tc, tr, tc)``: one tile per trailing pair of dimensions."""
    *lead, rows, cols = x.shape
    return x.reshape(*lead, rows // tr, tr, cols // tc, tc).transpose(-3, -2)


def from_tiles(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return t.transpose(-3, -2).reshape(shape)


def scales_from_amax(amax: torch.Tensor, fmt: str = "e4m3", power_of_two: bool = True) -> torch.Tensor:
    """Transformer Engine's ``compute_scale_from_amax`` on a tensor of amaxes (fp32): ``fp8_max / amax``; 1 for an
    amax of 0, inf or NaN; fp32's max where the quotient overflows; with ``power_of_two`` the mantissa bits cleared.

    >>> scales_from_amax(torch.tensor([448.0, 3.0, 0.0, float("inf"), 1e-39]), power_of_two=False).tolist()[:4]
    [1.0, 149.3333282470703, 1.0, 1.0]
    >>> scales_from_amax(torch.tensor([3.0, 1e-39])).tolist()
    [128.0, 1.7014118346046923e+38]
    """
    if not isinstance(power_of_two, bool):
        raise TypeError(f"power_of_two must be True or False; got {power_of_two!r}")
    a = torch.as_tensor(amax, dtype=torch.float32)
    valid = torch.isfinite(a) & (a > 0)   # TE: amax below epsilon (0) counts as 0
    s = torch.tensor(fp8_max(fp8_name(fmt)), dtype=torch.float32) / torch.where(valid, a, torch.ones_like(a))
    s = torch.where(torch.isinf(s), torch.full_like(s, FP32_MAX), s)
    s = torch.where(valid, s, torch.ones_like(s))
    if power_of_two:   # keep sign and exponent: 0xFF800000, as TE does on the fp32 bit pattern
        s = (s.view(torch.int32) & torch.tensor(-8388608, dtype=torch.int32)).view(torch.float32)
    return s


def _check_finite(x: torch.Tensor) -> torch.Tensor:
    xf = x.detach().float()
    if not bool(torch.isfinite(xf).all()):
        raise ValueError("x must be finite: a tile holding inf or NaN has no meaningful amax "
                         "(Transformer Engine then uses scale 1 for it; see scales_from_amax)")
    return xf


def tile_scales(x: torch.Tensor, tile=TILE_1X128, fmt: str = "e4m3", power_of_two: bool = True) -> torch.Tensor:
    """The fp32 scale of every tile: shape ``(..., rows / tile_rows, cols / tile_cols)``.

    >>> x = torch.tensor([[0.01, 0.02, 100.0, 300.0]])
    >>> tile_scales(x, (1, 2)).tolist()                          # 448 / 0.02 and 448 / 300, rounded down to 2**k
    [[16384.0, 1.0]]
    """
    tr, tc = check_tile(x, tile)
    amax = to_tiles(_check_finite(x), tr, tc).abs().amax(dim=(-2, -1))
    return scales_from_amax(amax, fmt, power_of_two)


def _expand(scales: torch.Tensor) -> torch.Tensor:
    return scales.unsqueeze(-1).unsqueeze(-1)


def tile_quantize(x: torch.Tensor, tile=TILE_1X128, fmt: str = "e4m3", power_of_two: bool = True
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scales)``: ``q`` = ``x * scale`` of its tile, saturated to ±fp8_max, cast to fp8 (round to nearest even).

    >>> q, scales = tile_quantize(torch.tensor([[0.01, 0.02, 100.0, 300.0]]), (1, 2))
    >>> q.float().tolist(), scales.tolist()                     # each tile scaled up to near e4m3's max, 448
    ([[160.0, 320.0, 96.0, 288.0]], [[16384.0, 1.0]])
    """
    tr, tc = check_tile(x, tile)
    name = fp8_name(fmt)
    xf = _check_finite(x)
    scales = scales_from_amax(to_tiles(xf, tr, tc).abs().amax(dim=(-2, -1)), name, power_of_two)
    m = fp8_max(name)
    scaled = (to_tiles(xf, tr, tc) * _expand(scales)).clamp(-m, m)
    return from_tiles(scaled, xf.shape).to(fp8_dtype(name)), scales


def tile_dequantize(q: torch.Tensor, scales: torch.Tensor, tile=TILE_1X128) -> torch.Tensor:
    """fp32 values: each fp8 element times its tile's ``scale_inv = 1 / scale`` (fp32).

    >>> q, scales = tile_quantize(torch.tensor([[0.01, 0.02, 100.0, 300.0]]), (1, 2))
    >>> tile_dequantize(q, scales, (1, 2)).tolist()
    [[0.009765625, 0.01953125, 96.0, 288.0]]
    """
    if not isinstance(q, torch.Tensor) or q.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError("q must be a float8_e4m3fn or float8_e5m2 tensor (from tile_quantize)")
    values = fp8_to_float(q)
    tr, tc = check_tile(values, tile)
    expected = (*values.shape[:-2], values.shape[-2] // tr, values.shape[-1] // tc)
    if not isinstance(scales, torch.Tensor) or tuple(scales.shape) != expected:
        raise ValueError(f"scales must have shape {expected} (one per {tr}×{tc} tile); "
                         f"got {tuple(scales.shape) if isinstance(scales, torch.Tensor) else type(scales).__name__}")
    scale_inv = 1.0 / scales.float()
    return from_tiles(to_tiles(values, tr, tc) * _expand(scale_inv), values.shape)


def tile_fake_quantize(x: torch.Tensor, tile=TILE_1X128, fmt: str = "e4m3", power_of_two: bool = True
                       ) -> torch.Tensor:
    """What tile-scaled fp8 storage leaves of ``x``, in fp32.

    >>> from ampkit.fp8.quantize import current_scale, fake_quantize
    >>> x = torch.tensor([[0.0001, 0.0003, 100.0, 300.0]])
    >>> fake_quantize(x, current_scale(x))[0, :2].tolist()      # one scale for the tensor: the small tile flushes
    [0.0, 0.0]
    >>> tile_fake_quantize(x, (1, 2))[0, :2].tolist()           # a scale per tile keeps it
    [9.918212890625e-05, 0.00030517578125]
    """
    q, scales = tile_quantize(x, tile, fmt, power_of_two)
    return tile_dequantize(q, scales, tile)


def transpose_mismatch(x: torch.Tensor, tile=TILE_1X128, fmt: str = "e4m3", power_of_two: bool = True) -> float:
    """Fraction of the elements of 2-D ``x`` where *quantize, then transpose* differs from *transpose, then quantize*.

    The backward pass needs the transpose of a tensor; with 1-D tiles along rows, the transposed tensor's tiles run
    along the original columns — other groups of values, other scales. 0 for a 2-D square block (the same values
    share a scale either way). ``x`` must be 2-D and both shapes must be tiled: the tile transposed for ``x.T``.

    With fp32 scales nearly every element differs. With power-of-two scales far fewer do: multiplying by a power of
    two only moves the exponent, so a value in the normal range rounds to the same digits under either scale; the two
    results differ only where one of the scalings puts the value among the subnormals (fewer bits) or flushes it.

    >>> x = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))
    >>> transpose_mismatch(x, (1, 128), power_of_two=False) > 0.9, transpose_mismatch(x, (128, 128), power_of_two=False)
    (True, 0.0)
    """
    if isinstance(x, torch.Tensor) and x.dim() != 2:
        raise TypeError(f"x must be a 2-D tensor (the transpose of a matrix); got {x.dim()} dimensions")
    tr, tc = check_tile(x, tile)
    check_tile(x.t(), (tr, tc))
    row_then_t = tile_fake_quantize(x, (tr, tc), fmt, power_of_two).t()
    t_then_row = tile_fake_quantize(x.t().contiguous(), (tr, tc), fmt, power_of_two)
    return float((row_then_t != t_then_row).float().mean())
