"""Per-tensor vs per-block scaling, element by element: what each value became. Taught in ``06_fp8_scaling.ipynb``
(section 5, the per-tensor vs per-block widget).

Two families of block scaling, each compared with one scale for the whole tensor *of the same kind*:

- **MX** (:func:`compare_blocks`): an E8M0 power-of-two scale (:mod:`ampkit.fp8.mx`, ``"ocp"`` floor or ``"te"``
  round-up) per ``block`` consecutive values along the last dimension (``block="per-tensor"``: one for all);
- **fp32 tiles** (:func:`compare_tiles`): an fp32 scale ``fp8_max / amax`` per 1×128 tile or 128×128 block
  (:mod:`ampkit.fp8.tiles`, Transformer Engine's ``Float8BlockScaling``), optionally rounded down to a power of two;
  the per-tensor side is then one fp32 scale for all (``Float8CurrentScaling``).

So on each side the only difference is how many values share one scale. Every nonzero element ends up in exactly
one of three groups:

- **flushed**: nonzero input that comes back as 0 (below half the smallest subnormal after scaling);
- **saturated**: ``|x / 2**e|`` past the point where it would round beyond fp8_max
  (:func:`~ampkit.fp8.quantize.saturation_threshold`), so it is clamped to ±fp8_max;
- **kept**: everything else (rounded to the format's precision, maybe as a subnormal).

>>> x = outlier_tensor()
>>> tensor, block = compare_blocks(x, "e4m3", 32, "ocp")
>>> block.n_flushed < tensor.n_flushed
True
>>> tensor.n_flushed + tensor.n_saturated + tensor.n_kept == x.numel()
True
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ampkit.fp8.mx import ROUNDINGS, check_block, mx_exponents, mx_fake_quantize
from ampkit.fp8.quantize import fp8_name, saturates
from ampkit.fp8.tiles import check_tile, from_tiles, tile_fake_quantize, tile_scales, to_tiles
from ampkit.i18n import tr

__all__ = ["PER_TENSOR", "LOG2_ERROR_FLOOR", "BlockStats", "block_choices", "block_stats", "compare_blocks",
           "tile_stats", "compare_tiles", "tile_label", "outlier_tensor", "log2_error"]

PER_TENSOR = "per-tensor"
#: The error map's floor: a value stored exactly (relative error 0) is shown as 2**-12 ("below the colour bar").
LOG2_ERROR_FLOOR = -12.0


@dataclass(frozen=True)
class BlockStats:
    """One quantization of a tensor: per-element relative error and group masks, and their counts.

    ``scheme`` is ``"mx"`` (E8M0 scale; ``rounding`` = ``"ocp"`` / ``"te"``; ``block`` an int or ``"per-tensor"``)
    or ``"tiles"`` (fp32 scale; ``rounding`` = ``"power-of-two"`` / ``"fp32"``; ``block`` a ``(rows, cols)`` tile
    or ``"per-tensor"``)."""

    fmt: str
    block: int | str | tuple[int, int]
    rounding: str
    n_blocks: int
    rel_error: torch.Tensor     # |x̂ − x| / |x| per element (0 where x == 0)
    flushed: torch.Tensor       # bool masks, the shape of x
    saturated: torch.Tensor
    scheme: str = "mx"

    @property
    def n_flushed(self) -> int:
        return int(self.flushed.sum())

    @property
    def n_saturated(self) -> int:
        return int(self.saturated.sum())

    @property
    def n_kept(self) -> int:
        return self.rel_error.numel() - self.n_flushed - self.n_saturated

    @property
    def mean_rel_error(self) -> float:
        """Mean of the per-element relative error (a flushed value counts as 1: all of it lost)."""
        return float(self.rel_error.mean())


def block_choices(n: int, smallest: int = 8) -> tuple[int | str, ...]:
    """``"per-tensor"`` then every power of two ≥ ``smallest`` that divides ``n`` (the last dimension).

    >>> block_choices(128)
    ('per-tensor', 8, 16, 32, 64, 128)
    """
    out: list[int | str] = [PER_TENSOR]
    b = smallest
    while b <= n:
        if n % b == 0:
            out.append(b)
        b *= 2
    return tuple(out)


def tile_label(tile: tuple[int, int]) -> str:
    """``"1×128"`` for ``(1, 128)``.

    >>> tile_label((128, 128))
    '128×128'
    """
    return f"{tile[0]}×{tile[1]}"


def _check_x(x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor with at least one dimension")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite (inf/NaN blocks decode to NaN in MX; nothing to compare)")
    return x.detach().float()


def block_stats(x: torch.Tensor, fmt: str = "e4m3", block: int | str = 32, rounding: str = "ocp") -> BlockStats:
    """Quantize finite ``x`` with one power-of-two scale per ``block`` values (or ``"per-tensor"``: one for all).

    >>> s = block_stats(torch.tensor([[1e-4, 3e-4, 100.0, 300.0]]), block=2)
    >>> s.n_blocks, s.n_flushed, s.n_saturated, s.rel_error.max().item() < 0.05
    (2, 0, 0, True)
    """
    x = _check_x(x)
    name = fp8_name(fmt)
    if rounding not in ROUNDINGS:
        raise ValueError(tr("rounding must be one of {choices}; got {rounding!r}",
                            choices=", ".join(map(repr, ROUNDINGS)), rounding=rounding))
    if block == PER_TENSOR:
        flat, b = x.reshape(1, -1), x.numel()
    elif isinstance(block, str):
        raise ValueError(tr("block must be {per_tensor!r} or a positive int dividing the last dimension; got "
                            "{block!r}", per_tensor=PER_TENSOR, block=block))
    else:
        flat, b = x, check_block(x, block)
    deq = mx_fake_quantize(flat, name, b, rounding).reshape(x.shape)
    blocks = flat.reshape(*flat.shape[:-1], flat.shape[-1] // b, b)
    e = mx_exponents(flat, name, b, rounding)
    scaled = torch.ldexp(blocks, (-e).unsqueeze(-1).float()).abs().reshape(x.shape)
    nonzero = x != 0
    flushed = nonzero & (deq == 0)
    saturated = nonzero & saturates(scaled, name)
    return BlockStats(fmt=name, block=block if block == PER_TENSOR else b, rounding=rounding, n_blocks=int(e.numel()),
                      rel_error=_rel_error(x, deq), flushed=flushed, saturated=saturated)


def _rel_error(x: torch.Tensor, deq: torch.Tensor) -> torch.Tensor:
    nonzero = x != 0
    return torch.where(nonzero, (deq - x).abs() / x.abs().clamp_min(torch.finfo(torch.float32).tiny),
                       torch.zeros_like(x))


TILE_ROUNDINGS = ("power-of-two", "fp32")


def tile_stats(x: torch.Tensor, fmt: str = "e4m3", tile: tuple[int, int] | str = (1, 128),
               power_of_two: bool = True) -> BlockStats:
    """Quantize finite 2-D ``x`` with one fp32 scale per ``tile`` (or ``"per-tensor"``: one for all) and count.

    >>> s = tile_stats(outlier_tensor(), "e4m3", (1, 128))
    >>> s.n_blocks, s.n_saturated, s.rounding
    (16, 0, 'power-of-two')
    """
    x = _check_x(x)
    if x.dim() != 2:
        raise TypeError(f"x must be a 2-D tensor (rows × values) for tile scaling; got {x.dim()} dimensions")
    name = fp8_name(fmt)
    if tile == PER_TENSOR:
        t = (x.shape[0], x.shape[1])
    elif isinstance(tile, str):
        raise ValueError(tr("tile must be {per_tensor!r} or a (rows, cols) pair such as (1, 128); got {tile!r}",
                            per_tensor=PER_TENSOR, tile=tile))
    else:
        t = check_tile(x, tile)
    deq = tile_fake_quantize(x, t, name, power_of_two)
    scales = tile_scales(x, t, name, power_of_two)
    scaled = from_tiles((to_tiles(x, *t) * scales.unsqueeze(-1).unsqueeze(-1)).abs(), x.shape)
    nonzero = x != 0
    return BlockStats(fmt=name, block=tile if tile == PER_TENSOR else t,
                      rounding=TILE_ROUNDINGS[0] if power_of_two else TILE_ROUNDINGS[1], n_blocks=int(scales.numel()),
                      rel_error=_rel_error(x, deq), flushed=nonzero & (deq == 0),
                      saturated=nonzero & saturates(scaled, name), scheme="tiles")


def compare_tiles(x: torch.Tensor, fmt: str = "e4m3", tile: tuple[int, int] = (1, 128), power_of_two: bool = True
                  ) -> tuple[BlockStats, BlockStats]:
    """``(per-tensor, per-tile)`` statistics with fp32 scales (``Float8CurrentScaling`` vs ``Float8BlockScaling``).

    >>> tensor, tiles = compare_tiles(torch.tensor([[1e-4, 3e-4, 100.0, 300.0]]), tile=(1, 2))
    >>> tensor.n_flushed, tiles.n_flushed       # one fp32 scale flushes the small pair; one per tile keeps it
    (2, 0)
    """
    return tile_stats(x, fmt, PER_TENSOR, power_of_two), tile_stats(x, fmt, tile, power_of_two)


def compare_blocks(x: torch.Tensor, fmt: str = "e4m3", block: int | str = 32, rounding: str = "ocp"
                   ) -> tuple[BlockStats, BlockStats]:
    """``(per-tensor, per-block)`` statistics of the same tensor, format and scale rule.

    >>> tensor, blocks = compare_blocks(torch.tensor([[1e-4, 3e-4, 100.0, 300.0]]), block=2)
    >>> (tensor.n_blocks, tensor.n_flushed), (blocks.n_blocks, blocks.n_flushed)
    ((1, 2), (2, 0))
    """
    return block_stats(x, fmt, PER_TENSOR, rounding), block_stats(x, fmt, block, rounding)


def log2_error(stats: BlockStats, floor: float = LOG2_ERROR_FLOOR) -> torch.Tensor:
    """``log2`` of the relative error per element, clamped to ``[floor, 0]`` (0 = the value is lost, e.g. flushed).

    >>> s = block_stats(torch.tensor([[1.0, 1e-9, 3.3, 0.0]]), "e4m3", 4)
    >>> log2_error(s).tolist()[0][:2], float(log2_error(s)[0, 3])
    ([-12.0, 0.0], -12.0)
    """
    return torch.log2(stats.rel_error.clamp_min(2.0 ** floor)).clamp(floor, 0.0)


def outlier_tensor(rows: int = 16, cols: int = 128, seed: int = 0) -> torch.Tensor:
    """A seeded ``rows × cols`` tensor: values ~ N(0, 0.5²) plus five large outliers (up to 31000 ≈ 1.9·2**14;
    the OCP floor rule saturates the ones whose mantissa is above 1.75 in e4m3).

    >>> x = outlier_tensor(); tuple(x.shape), float(x.abs().max())
    ((16, 128), 31000.0)
    """
    if rows < 16 or cols < 128:
        raise ValueError(f"outlier_tensor needs rows >= 16 and cols >= 128 (the outliers' positions); "
                         f"got {rows} x {cols}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * 0.5
    for (r, c), v in {(2, 10): 30000.0, (5, 70): -20000.0, (9, 33): 12000.0, (12, 100): -31000.0,
                      (14, 50): 9000.0}.items():
        x[r, c] = v
    return x
