"""Notebook 06's second widget: per-tensor vs per-block scaling on a tensor with outliers.

A thin view over :mod:`ampkit.fp8.compare` (``compare_blocks``, ``compare_tiles``). Controls: the **scheme** — MX (an
E8M0 power-of-two scale per block of consecutive values, :mod:`ampkit.fp8.mx`), 1×128 tiles or 128×128 blocks with an
fp32 scale (Transformer Engine's ``Float8BlockScaling``, :mod:`ampkit.fp8.tiles`) —, for MX the block size
(per-tensor or a power of two dividing the last dimension; 32 is MX's) and the scale rule (OCP floor or Transformer
Engine round-up), for the fp32 tiles whether the scale is rounded down to a power of two (TE's default), and the
element format (e4m3 / e5m2). The upper panel is always one scale of the same kind for the whole tensor, so only the
number of values sharing a scale differs. Shown: the log2 relative error of every element, per-tensor on top and per
block below (block edges drawn, flushed values painted in the kit's "flushed" grey, saturated ones crossed in its
"overflow" colour), and a readout counting flushed / saturated / kept values and the mean relative error side by
side. The figure is laid out once and blitted; PNGs are cached per setting.
"""
from __future__ import annotations

import ipywidgets as W
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ampkit.fp8.compare import (
    LOG2_ERROR_FLOOR,
    PER_TENSOR,
    BlockStats,
    block_choices,
    compare_blocks,
    compare_tiles,
    log2_error,
    outlier_tensor,
    tile_label,
)
from ampkit.fp8.mx import ROUNDINGS
from ampkit.fp8.tiles import BLOCK_128X128, TILE_1X128
from ampkit.i18n import mark, tr
from ampkit.widgets.style import (
    BAND_COLOURS,
    DPI,
    STATUS_COLOURS,
    WidgetView,
    blit_background,
    blit_png,
    freeze_layout,
    new_figure,
)

__all__ = ["BlockScalingExplorer", "blocks_readout_html", "ROUNDING_LABELS", "SCHEMES", "scheme_choices"]

_WIDTH_IN, _HEIGHT_IN = 7.5, 5.6
_WIDTH_PX = int(_WIDTH_IN * DPI)
ROUNDING_LABELS = {"ocp": mark("OCP floor"), "te": mark("TE round-up"),
                   "power-of-two": mark("fp32 scale rounded down to a power of two"), "fp32": mark("exact fp32 scale")}
#: The schemes of the lower panel: value -> (button label, tile or None for MX).
SCHEMES: dict[str, tuple[str, tuple[int, int] | None]] = {
    "mx": (mark("MX: E8M0 scale per block"), None),
    "1x128": (mark("1×128 tiles, fp32 scale"), TILE_1X128),
    "128x128": (mark("128×128 blocks, fp32 scale"), BLOCK_128X128),
}
_EDGE = "#24292f"   # block edges: dark on the colour map's greens and yellows


def scheme_choices(shape: tuple[int, int]) -> tuple[str, ...]:
    """The schemes a ``rows × cols`` tensor allows: MX always, a tile scheme when its tile divides the shape.

    >>> scheme_choices((16, 128)), scheme_choices((128, 256))
    (('mx', '1x128'), ('mx', '1x128', '128x128'))
    """
    return tuple(k for k, (_, t) in SCHEMES.items() if t is None or (shape[0] % t[0] == 0 and shape[1] % t[1] == 0))


_SHORT_RULES = {"ocp": "OCP floor", "te": "TE round-up", "power-of-two": "power of two", "fp32": "exact"}


def _block_label(s: BlockStats) -> str:
    if s.block == PER_TENSOR:
        return PER_TENSOR
    if s.scheme == "tiles":
        assert isinstance(s.block, tuple)   # a tile scheme's block other than per-tensor is a (rows, cols) tile
        return f"{tile_label(s.block)} {'tiles' if s.block[0] == 1 else 'blocks'}"
    return f"blocks of {s.block}"


def blocks_readout_html(tensor: BlockStats, block: BlockStats) -> str:
    """The readout: flushed / saturated / kept and mean relative error, per-tensor vs per-block, side by side."""
    n = tensor.rel_error.numel()

    def row(s: BlockStats, cls: str) -> str:
        scales = tr("({n} scales)", n=s.n_blocks) if s.n_blocks != 1 else tr("({n} scale)", n=s.n_blocks)
        return (f"<tr class='{cls}'><td><b>{_block_label(s)}</b> {scales}</td>"
                f"<td class='ampkit-fp8-n-flushed' style='color:{BAND_COLOURS['flushed']}'>{s.n_flushed}</td>"
                f"<td class='ampkit-fp8-n-saturated' style='color:{BAND_COLOURS['overflow']}'>{s.n_saturated}</td>"
                f"<td class='ampkit-fp8-n-kept'>{s.n_kept}</td>"
                f"<td class='ampkit-fp8-mean-err'>{s.mean_rel_error:.4f}</td></tr>")

    ratio = tensor.mean_rel_error / max(block.mean_rel_error, 1e-30)
    better = ratio >= 1.05
    verdict = (tr("same scaling on both rows") if block.block == PER_TENSOR else
               tr("mean relative error {x:.1f}x smaller with blocks", x=ratio) if better else
               tr("about the same error either way") if ratio > 0.95 else
               tr("mean relative error {x:.1f}x larger with blocks", x=1 / ratio))
    colour = STATUS_COLOURS["good"] if better else STATUS_COLOURS["neutral"]
    rule = (tr("{rule} scale rule", rule=tr(ROUNDING_LABELS[tensor.rounding])) if tensor.scheme == "mx"
            else tr(ROUNDING_LABELS[tensor.rounding]))
    head = tr("<b>{fmt}, {rule}</b>, {n} values:", fmt=tensor.fmt, rule=rule, n=n)
    columns = tr("<tr><th></th><th>flushed to 0</th><th>saturated</th><th>kept</th><th>mean relative error</th></tr>")
    return (f"<div class='ampkit-fp8-blocks-readout'>{head}"
            "<table style='border-spacing:14px 2px'>"
            f"{columns}{row(tensor, 'ampkit-fp8-row-tensor')}"
            f"{row(block, 'ampkit-fp8-row-block')}</table>"
            f"<span style='color:{colour}'>{verdict}</span></div>")


class BlockScalingExplorer(WidgetView):
    """Scheme, block size, format and scale rule → error maps and counts, per-tensor vs per-block.

    ``x``: a 2-D finite tensor (default :func:`~ampkit.fp8.compare.outlier_tensor` of 128 × 256 values with five
    outliers, all in the first 16 rows and 128 columns: one 128×128 block holds them all).
    """

    def __init__(self, x: torch.Tensor | None = None, block: int | str = 32, fmt: str = "e4m3",
                 rounding: str = "ocp", scheme: str = "mx", power_of_two: bool = True):
        self.x = outlier_tensor(128, 256) if x is None else x
        if not isinstance(self.x, torch.Tensor) or self.x.dim() != 2:
            raise TypeError(tr("x must be a 2-D tensor (rows × values); the error map is an image"))
        rows, cols = self.x.shape   # 2-D, checked above
        choices, schemes = block_choices(self.x.shape[-1]), scheme_choices((rows, cols))
        if block not in choices:
            raise ValueError(tr("block must be one of {choices}; got {value!r}", choices=", ".join(map(repr, choices)),
                                value=block))
        if scheme not in schemes:
            raise ValueError(tr("scheme must be one of {choices} for a tensor of shape {shape}; got {value!r}",
                                choices=", ".join(map(repr, schemes)), shape=tuple(self.x.shape), value=scheme))
        if not isinstance(power_of_two, bool):
            raise TypeError(tr("power_of_two must be True or False; got {value!r}", value=power_of_two))
        compare_blocks(self.x, fmt, block, rounding)   # validates x, fmt and rounding before any widget is built
        self.scheme = W.ToggleButtons(options=[(tr(SCHEMES[k][0]), k) for k in schemes], value=scheme,
                                      description=tr("scheme"))
        self.scheme.add_class("ampkit-fp8-scheme")
        self.block = W.ToggleButtons(options=[(str(c), c) for c in choices], value=block, description=tr("block size"))
        self.block.add_class("ampkit-fp8-block-size")
        self.fmt = W.ToggleButtons(options=["e4m3", "e5m2"], value=fmt, description=tr("format"))
        self.rounding = W.ToggleButtons(options=[(tr(ROUNDING_LABELS[r]), r) for r in ROUNDINGS], value=rounding,
                                        description=tr("scale rule"))
        self.pow2 = W.Checkbox(value=power_of_two,
                               description=tr("fp32 scale rounded down to a power of two (TE default)"),
                               indent=False, layout=W.Layout(width="auto"))
        self.pow2.add_class("ampkit-fp8-pow2")
        self.image = W.Image(format="png", width=_WIDTH_PX)
        self.image.add_class("ampkit-fp8-blocks-plot")
        self.readout = W.HTML()
        self._cache: dict[tuple, tuple[tuple[BlockStats, BlockStats], bytes]] = {}
        self._build()
        for c in (self.scheme, self.block, self.fmt, self.rounding, self.pow2):
            c.observe(self._on_change, names="value")
        self.widget = W.VBox([self.scheme, self.block, W.HBox([self.fmt, self.rounding]), self.pow2, self.readout,
                              self.image])
        self._update()

    def _build(self) -> None:
        rows, cols = self.x.shape
        fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
        axes = fig.subplots(2, 1, sharex=True)
        blank = torch.zeros(rows, cols).numpy()
        self._flush_rgba = torch.tensor(to_rgba(BAND_COLOURS["flushed"]))
        self._images, self._flush_layers, self._sat_marks, self._titles = [], [], [], []
        extent = (-0.5, cols - 0.5, rows - 0.5, -0.5)
        for ax in axes:
            im = ax.imshow(blank, cmap="viridis", vmin=LOG2_ERROR_FLOOR, vmax=0, aspect="auto",
                           interpolation="nearest", extent=extent)
            # flushed values: one grey pixel each, as an RGBA layer (cheap to draw however many there are)
            fl = ax.imshow(torch.zeros(rows, cols, 4).numpy(), aspect="auto", interpolation="nearest", extent=extent)
            sm, = ax.plot([], [], ls="none", marker="x", ms=6, color=BAND_COLOURS["overflow"], mew=1.6)
            ax.set_ylabel("row")
            ax.set_title(" ", fontsize=9, y=1.0, pad=4)   # a fixed y: not re-placed while blitting
            self._images.append(im)
            self._flush_layers.append(fl)
            self._sat_marks.append(sm)
            self._titles.append(ax.title)
        axes[1].set_xlabel("position along the last dimension (index)")
        self._edges = LineCollection([], colors=_EDGE, linewidths=1.2)
        axes[1].add_collection(self._edges)
        cb = fig.colorbar(self._images[0], ax=list(axes), shrink=0.9)
        cb.set_label(f"log2 relative error |x̂ − x| / |x|\n({LOG2_ERROR_FLOOR:g} or less = exact or nearly; "
                     "0 = value lost)")
        fig.legend(handles=[Patch(color=BAND_COLOURS["flushed"], label="flushed to zero"),
                            Line2D([], [], ls="none", marker="x", color=BAND_COLOURS["overflow"], label="saturated"),
                            Line2D([], [], color=_EDGE, lw=1.2, label="block edges (lower panel)")],
                   loc="outside lower center", ncols=3, fontsize=8)
        fig.suptitle("Per-tensor vs per-block scaling: the error of every element", fontsize=10)
        self.figure = fig
        self._moving = [*self._images, *self._flush_layers, *self._sat_marks, *self._titles, self._edges]
        freeze_layout(fig)
        self._bg = blit_background(fig, self._moving)

    def _render(self, stats: tuple[BlockStats, BlockStats]) -> bytes:
        rows, cols = self.x.shape
        for i, s in enumerate(stats):
            self._images[i].set_data(log2_error(s).numpy())
            self._flush_layers[i].set_data((s.flushed.unsqueeze(-1).float() * self._flush_rgba).numpy())
            sr, sc = torch.nonzero(s.saturated, as_tuple=True)
            self._sat_marks[i].set_data(sc.numpy(), sr.numpy())
            scale = "E8M0" if s.scheme == "mx" else "fp32"
            self._titles[i].set_text(f"{_block_label(s)} ({s.fmt}, {scale} scale, {_SHORT_RULES[s.rounding]}): "
                                     f"{s.n_flushed} flushed, {s.n_saturated} saturated, "
                                     f"mean rel. error {s.mean_rel_error:.4f}")
        b = stats[1].block
        if b == PER_TENSOR:
            edges = []
        else:
            assert not isinstance(b, str)   # PER_TENSOR is the only block given as a string
            tr, tc = b if isinstance(b, tuple) else (1, b)
            edges = [[(e - 0.5, -0.5), (e - 0.5, rows - 0.5)] for e in range(tc, cols, tc)]
            if tr > 1:      # 2-D blocks: horizontal edges too (1-D tiles and MX blocks: every row is its own)
                edges += [[(-0.5, e - 0.5), (cols - 0.5, e - 0.5)] for e in range(tr, rows, tr)]
        self._edges.set_segments(edges)
        return blit_png(self.figure, self._bg, self._moving)

    def _key(self) -> tuple:
        """The setting, with the controls that do not apply to the scheme left out (one cache entry per picture)."""
        if self.scheme.value == "mx":
            return ("mx", self.block.value, self.fmt.value, self.rounding.value)
        return (self.scheme.value, self.fmt.value, self.pow2.value)

    def _stats(self, key: tuple) -> tuple[BlockStats, BlockStats]:
        if key[0] == "mx":
            return compare_blocks(self.x, key[2], key[1], key[3])
        tile = SCHEMES[key[0]][1]
        assert tile is not None   # every scheme but MX has a tile, and MX returned above
        return compare_tiles(self.x, key[1], tile, key[2])

    def _update(self) -> None:
        mx = self.scheme.value == "mx"
        self.block.disabled = self.rounding.disabled = not mx     # MX's controls
        self.pow2.disabled = mx                                     # the fp32 tiles' control
        key = self._key()
        if key not in self._cache:
            stats = self._stats(key)
            self._cache[key] = (stats, self._render(stats))
        self.stats, png = self._cache[key]
        self.readout.value = blocks_readout_html(*self.stats)
        self.image.value = png
