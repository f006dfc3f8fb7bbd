"""Notebook 06's second widget: per-tensor vs per-block scaling on a tensor with outliers, drawn in the browser.

A thin view over :mod:`ampkit.fp8.compare` (``compare_blocks``, ``compare_tiles``). Controls: the **scheme** — MX (an
E8M0 power-of-two scale per block of consecutive values, :mod:`ampkit.fp8.mx`), 1×128 tiles or 128×128 blocks with an
fp32 scale (Transformer Engine's ``Float8BlockScaling``, :mod:`ampkit.fp8.tiles`) —, for MX the block size
(per-tensor or a power of two dividing the last dimension; 32 is MX's) and the scale rule (OCP floor or Transformer
Engine round-up), for the fp32 tiles whether the scale is rounded down to a power of two (TE's default), and the
element format (e4m3 / e5m2). The upper panel is always one scale of the same kind for the whole tensor, so only the
number of values sharing a scale differs.

:class:`BlockScalingExplorer` is a :class:`~ampkit.widgets.front.FrontView` (``js/blocks.js``, SVG): when it starts,
the engine computes EVERY setting its controls reach (28 MX settings and 8 fp32-tile settings on the default tensor)
and sends, per setting, the readout's numbers as the engine prints them, which elements are flushed and saturated
(:func:`mask_code`: a list of flat indices, or a bit mask where many are) and every block's scale
(:func:`block_log2_scales`, :func:`scales_code`); the page SELECTS the setting's entry, so the saved notebook moves
every control with no kernel. Drawn: every element of the tensor, per-tensor on top and per block below, in the kit's
band colours (kept — each block shaded by its scale —, flushed, saturated crossed), block edges, and a readout
counting flushed / saturated / kept values and the mean relative error side by side. The still picture (renderers
without JavaScript) is the readout and a matplotlib figure of the log2 relative error of every element.
"""
from __future__ import annotations

import base64

import ipywidgets as W
import numpy as np
import torch
import traitlets
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
from ampkit.fp8.mx import ROUNDINGS, mx_exponents
from ampkit.fp8.tiles import BLOCK_128X128, TILE_1X128, tile_scales
from ampkit.i18n import mark, tr
from ampkit.widgets.front import FrontView
from ampkit.widgets.style import BAND_COLOURS, DPI, STATUS_COLOURS, new_figure, png_bytes

__all__ = ["BlockScalingExplorer", "blocks_readout_html", "ROUNDING_LABELS", "SCHEMES", "scheme_choices",
           "setting_key", "mask_code", "block_log2_scales", "scales_code"]

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
FORMATS = ("e4m3", "e5m2")
_EDGE = "#24292f"   # block edges: dark on the colour map's greens and yellows
#: A mask with at most this many elements set travels as their flat indices, otherwise as a bit mask.
_SPARSE = 600


def scheme_choices(shape: tuple[int, int]) -> tuple[str, ...]:
    """The schemes a ``rows × cols`` tensor allows: MX always, a tile scheme when its tile divides the shape.

    >>> scheme_choices((16, 128)), scheme_choices((128, 256))
    (('mx', '1x128'), ('mx', '1x128', '128x128'))
    """
    return tuple(k for k, (_, t) in SCHEMES.items() if t is None or (shape[0] % t[0] == 0 and shape[1] % t[1] == 0))


# port: js/blocks.js settingKey
def setting_key(scheme: str, block: int | str, fmt: str, rounding: str, power_of_two: bool) -> str:
    """The key of a setting in the view's state (``js/blocks.js`` builds the same): the controls that do not apply
    to the scheme are left out.

    >>> setting_key("mx", 32, "e4m3", "ocp", True), setting_key("1x128", 32, "e5m2", "te", False)
    ('mx|32|e4m3|ocp', '1x128|e5m2|0')
    """
    return f"mx|{block}|{fmt}|{rounding}" if scheme == "mx" else f"{scheme}|{fmt}|{int(power_of_two)}"


def mask_code(mask: torch.Tensor) -> dict:
    """A boolean mask as the page reads it: ``{"i": "flat indices, comma-separated"}`` when few are set, else
    ``{"b": base64}`` of its bits, row-major, most significant bit first (numpy's ``packbits``). Strings: the saved
    notebook keeps each mask on one line.

    >>> mask_code(torch.tensor([[False, True], [False, True]]))
    {'i': '1,3'}
    >>> mask_code(torch.ones(700, dtype=torch.bool))["b"][:4]
    '////'
    """
    flat = mask.reshape(-1)
    if int(flat.sum()) <= _SPARSE:
        return {"i": ",".join(map(str, torch.nonzero(flat).flatten().tolist()))}
    return {"b": base64.b64encode(np.packbits(flat.numpy().astype(np.uint8)).tobytes()).decode("ascii")}


def block_log2_scales(x: torch.Tensor, s: BlockStats) -> torch.Tensor:
    """``k`` per block of a quantization ``s`` of ``x``: its values are stored as ``x / 2**k`` (shape: the grid of
    blocks, ``(1, 1)`` per-tensor). MX: the block's E8M0 exponent (:func:`~ampkit.fp8.mx.mx_exponents`); fp32
    tiles: ``-log2`` of the tile's fp32 scale (:func:`~ampkit.fp8.tiles.tile_scales`, which multiplies).

    >>> x = torch.tensor([[3.0, 0.5, 1.0, 100.0]])
    >>> block_log2_scales(x, compare_blocks(x, "e4m3", 2)[1]).tolist()       # floor(log2(amax)) - 8 per block
    [[-7.0, -2.0]]
    """
    x = x.detach().float()
    if s.scheme == "mx":
        flat, b = (x.reshape(1, -1), x.numel()) if s.block == PER_TENSOR else (x, s.block)
        assert isinstance(b, int)   # an MX block is a count of values
        return mx_exponents(flat, s.fmt, b, s.rounding).float()
    tile = tuple(x.shape) if s.block == PER_TENSOR else s.block
    return -torch.log2(tile_scales(x, tile, s.fmt, s.rounding == "power-of-two"))


def scales_code(k: torch.Tensor) -> dict:
    """Block scales as the page reads them: ``n`` (the grid's rows and columns), ``range`` (``"-9 … 6"`` as the
    engine prints it) and ``c`` (one character per integer k, ``chr(k + 80)``) or ``v`` (k to 2 decimals,
    comma-separated: one line in the saved notebook).

    >>> scales_code(torch.tensor([[-9.0, 6.0]]))
    {'n': [1, 2], 'range': '-9 … 6', 'c': 'GV'}
    """
    flat = k.reshape(-1)
    whole = bool((flat == flat.round()).all()) and bool((flat.abs() < 40).all())
    lo, hi = float(flat.min()), float(flat.max())
    text = (lambda v: f"{v:.0f}") if whole else (lambda v: f"{v:.2f}")
    code: dict = {"n": list(k.shape), "range": text(lo) if lo == hi else f"{text(lo)} … {text(hi)}"}
    if whole:
        code["c"] = "".join(chr(int(v) + 80) for v in flat.tolist())
    else:
        code["v"] = ",".join(f"{v:.2f}" for v in flat.tolist())
    return code


_SHORT_RULES = {"ocp": "OCP floor", "te": "TE round-up", "power-of-two": "power of two", "fp32": "exact"}


def _block_label(s: BlockStats) -> str:
    """A readout row's name in the kit's language: "per tensor", "1×128 tiles", "128×128 blocks", "blocks of 32"."""
    if s.block == PER_TENSOR:
        return tr("per tensor")
    if s.scheme == "tiles":
        assert isinstance(s.block, tuple)   # a tile scheme's block other than per-tensor is a (rows, cols) tile
        return tr("{tile} tiles", tile=tile_label(s.block)) if s.block[0] == 1 else \
            tr("{tile} blocks", tile=tile_label(s.block))
    return tr("blocks of {n}", n=s.block)


def _scales(s: BlockStats) -> str:
    return tr("({n} scales)", n=s.n_blocks) if s.n_blocks != 1 else tr("({n} scale)", n=s.n_blocks)


def _verdict(tensor: BlockStats, block: BlockStats) -> tuple[str, bool]:
    ratio = tensor.mean_rel_error / max(block.mean_rel_error, 1e-30)
    better = ratio >= 1.05
    return (tr("same scaling on both rows") if block.block == PER_TENSOR else
            tr("mean relative error {x:.1f}x smaller with blocks", x=ratio) if better else
            tr("about the same error either way") if ratio > 0.95 else
            tr("mean relative error {x:.1f}x larger with blocks", x=1 / ratio)), better


def _rule(tensor: BlockStats) -> str:
    return (tr("{rule} scale rule", rule=tr(ROUNDING_LABELS[tensor.rounding])) if tensor.scheme == "mx"
            else tr(ROUNDING_LABELS[tensor.rounding]))


def blocks_readout_html(tensor: BlockStats, block: BlockStats) -> str:
    """The readout: flushed / saturated / kept and mean relative error, per-tensor vs per-block, side by side."""
    def row(s: BlockStats, cls: str) -> str:
        return (f"<tr class='{cls}'><td><b>{_block_label(s)}</b> {_scales(s)}</td>"
                f"<td class='ampkit-fp8-n-flushed' style='color:{BAND_COLOURS['flushed']}'>{s.n_flushed}</td>"
                f"<td class='ampkit-fp8-n-saturated' style='color:{BAND_COLOURS['overflow']}'>{s.n_saturated}</td>"
                f"<td class='ampkit-fp8-n-kept'>{s.n_kept}</td>"
                f"<td class='ampkit-fp8-mean-err'>{s.mean_rel_error:.4f}</td></tr>")

    verdict, better = _verdict(tensor, block)
    colour = STATUS_COLOURS["good"] if better else STATUS_COLOURS["neutral"]
    head = tr("<b>{fmt}, {rule}</b>, {n} values:", fmt=tensor.fmt, rule=_rule(tensor), n=tensor.rel_error.numel())
    columns = tr("<tr><th></th><th>flushed to 0</th><th>saturated</th><th>kept</th><th>mean relative error</th></tr>")
    return (f"<div class='ampkit-fp8-blocks-readout'>{head}"
            "<table style='border-spacing:14px 2px'>"
            f"{columns}{row(tensor, 'ampkit-fp8-row-tensor')}"
            f"{row(block, 'ampkit-fp8-row-block')}</table>"
            f"<span style='color:{colour}'>{verdict}</span></div>")


class BlockScalingExplorer(FrontView):
    """Scheme, block size, format and scale rule → which elements are flushed / saturated / kept, and the counts,
    per-tensor vs per-block, drawn in the browser (``js/blocks.js``) from every setting the engine computed when the
    view started. :attr:`stats` is the engine's ``(per-tensor, per-block)`` pair for the current setting.

    ``x``: a 2-D finite tensor (default :func:`~ampkit.fp8.compare.outlier_tensor` of 128 × 256 values with five
    outliers, all in the first 16 rows and 128 columns: one 128×128 block holds them all).

    >>> v = BlockScalingExplorer(outlier_tensor(), block=8)
    >>> v.stats[1].n_flushed < v.stats[0].n_flushed
    True
    >>> v.scheme = "1x128"; v.stats[1].n_blocks
    16
    """

    _front = "blocks"
    _stats: dict[str, tuple[BlockStats, BlockStats]] = {}
    scheme = traitlets.Unicode("mx").tag(sync=True)
    block = traitlets.Union([traitlets.Int(), traitlets.Unicode()], default_value=32).tag(sync=True)
    fmt = traitlets.Unicode("e4m3").tag(sync=True)
    rounding = traitlets.Unicode("ocp").tag(sync=True)
    power_of_two = traitlets.Bool(True).tag(sync=True)
    shape: traitlets.List[int] = traitlets.List().tag(sync=True)
    choices = traitlets.Dict().tag(sync=True)
    states = traitlets.Dict().tag(sync=True)
    masks: traitlets.List[dict] = traitlets.List().tag(sync=True)

    def __init__(self, x: torch.Tensor | None = None, block: int | str = 32, fmt: str = "e4m3",
                 rounding: str = "ocp", scheme: str = "mx", power_of_two: bool = True):
        self.x = outlier_tensor(128, 256) if x is None else x
        if not isinstance(self.x, torch.Tensor) or self.x.dim() != 2:
            raise TypeError(tr("x must be a 2-D tensor (rows × values); the error map is an image"))
        rows, cols = self.x.shape   # 2-D, checked above
        blocks, schemes = block_choices(self.x.shape[-1]), scheme_choices((rows, cols))
        if block not in blocks:
            raise ValueError(tr("block must be one of {choices}; got {value!r}", choices=", ".join(map(repr, blocks)),
                                value=block))
        if scheme not in schemes:
            raise ValueError(tr("scheme must be one of {choices} for a tensor of shape {shape}; got {value!r}",
                                choices=", ".join(map(repr, schemes)), shape=tuple(self.x.shape), value=scheme))
        if not isinstance(power_of_two, bool):
            raise TypeError(tr("power_of_two must be True or False; got {value!r}", value=power_of_two))
        compare_blocks(self.x, fmt, block, rounding)   # validates x, fmt and rounding before anything is swept
        self._stats = {}
        masks: dict[str, int] = {}
        codes: list[dict] = []
        states = {}
        for key, pair in self._sweep(blocks, schemes):   # every setting the controls reach, computed once
            self._stats[key] = pair
            states[key] = self._state(self.x, pair, masks, codes)
        self.stats: tuple[BlockStats, BlockStats] = self._stats[setting_key(scheme, block, fmt, rounding,
                                                                           power_of_two)]
        super().__init__(scheme=scheme, block=block, fmt=fmt, rounding=rounding, power_of_two=power_of_two,
                         shape=[rows, cols], states=states, masks=codes,
                         choices={"scheme": [[k, tr(SCHEMES[k][0])] for k in schemes],
                                  "block": [[b, str(b)] for b in blocks], "fmt": [[f, f] for f in FORMATS],
                                  "rounding": [[r, tr(ROUNDING_LABELS[r])] for r in ROUNDINGS]})

    def _sweep(self, blocks: tuple, schemes: tuple):
        for fmt in FORMATS:
            for rounding in ROUNDINGS:
                for b in blocks:
                    yield setting_key("mx", b, fmt, rounding, True), compare_blocks(self.x, fmt, b, rounding)
            for scheme in schemes[1:]:
                tile = SCHEMES[scheme][1]
                assert tile is not None   # every scheme but MX has a tile
                for p2 in (True, False):
                    yield setting_key(scheme, 0, fmt, "", p2), compare_tiles(self.x, fmt, tile, p2)

    @staticmethod
    def _state(x: torch.Tensor, pair: tuple[BlockStats, BlockStats], masks: dict[str, int], codes: list[dict]
               ) -> dict:
        """One setting as the page shows it: the readout's words and numbers as the engine prints them, the block's
        shape (for its edges) and which elements are flushed / saturated (indices into ``masks``, shared)."""
        def ref(mask: torch.Tensor) -> int:
            code = mask_code(mask)
            k = repr(code)
            if k not in masks:
                masks[k] = len(codes)
                codes.append(code)
            return masks[k]

        tensor, block = pair
        b = block.block
        shape = None if b == PER_TENSOR else list(b) if isinstance(b, tuple) else [1, b]
        verdict, better = _verdict(tensor, block)
        return {"fmt": tensor.fmt, "rule": _rule(tensor), "n": tensor.rel_error.numel(), "verdict": verdict,
                "better": better, "edges": shape,
                "rows": [{"label": _block_label(s), "scales": _scales(s), "flushed": s.n_flushed,
                          "saturated": s.n_saturated, "kept": s.n_kept, "err": f"{s.mean_rel_error:.4f}",
                          "k": scales_code(block_log2_scales(x, s)), "f": ref(s.flushed), "s": ref(s.saturated)}
                         for s in pair]}

    @traitlets.validate("scheme", "block", "fmt", "rounding")
    def _valid(self, proposal: dict):
        name, value = proposal["trait"].name, proposal["value"]
        if self.choices and value not in [c[0] for c in self.choices[name]]:
            raise traitlets.TraitError(tr("{name} must be one of {choices}; got {value!r}", name=name, value=value,
                                          choices=", ".join(repr(c[0]) for c in self.choices[name])))
        return value

    @traitlets.observe("scheme", "block", "fmt", "rounding", "power_of_two")
    def _select(self, change: dict | None) -> None:
        pair = self._stats.get(setting_key(self.scheme, self.block, self.fmt, self.rounding, self.power_of_two))
        if pair is not None:   # (None only while the traits are set one by one in __init__)
            self.stats = pair

    @property
    def readout_html(self) -> str:
        """The readout of the current setting, as the page shows it (for the still picture and the tests)."""
        return blocks_readout_html(*self.stats)

    def words(self) -> dict:
        return {"scheme": tr("scheme"), "block": tr("block size"), "fmt": tr("format"), "rounding": tr("scale rule"),
                "pow2": tr("fp32 scale rounded down to a power of two (TE default)"),
                "head": tr("<b>{fmt}, {rule}</b>, {n} values:"),
                "columns": [tr("flushed to 0"), tr("saturated"), tr("kept"), tr("mean relative error")],
                "k": tr("stored as x / 2^k, k: {range}"),
                "legend": [["normal", tr("kept (darker: larger k)")], ["flushed", tr("flushed to zero")],
                           ["overflow", tr("saturated")], ["edge", tr("block edges (lower panel)")]],
                "xlabel": tr("position along the last dimension (index)"), "ylabel": tr("row"),
                "title": tr("Per-tensor vs per-block scaling: what became of every element")}

    def still(self) -> W.Widget:
        return W.VBox([W.HTML(self.readout_html), W.Image(value=_still_png(self), format="png", width=_WIDTH_PX)])


def _panel_title(s: BlockStats) -> str:
    scale = "E8M0" if s.scheme == "mx" else "fp32"
    return (f"{_block_label(s)} ({s.fmt}, {scale} scale, {_SHORT_RULES[s.rounding]}): {s.n_flushed} flushed, "
            f"{s.n_saturated} saturated, mean rel. error {s.mean_rel_error:.4f}")


def _still_png(v: BlockScalingExplorer) -> bytes:
    """The log2 relative error of every element, per-tensor on top and per block below (flushed values in the kit's
    "flushed" grey, saturated ones crossed in its "overflow" colour, block edges), as a PNG."""
    rows, cols = v.x.shape
    fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
    axes = fig.subplots(2, 1, sharex=True)
    extent = (-0.5, cols - 0.5, rows - 0.5, -0.5)
    grey = torch.tensor(to_rgba(BAND_COLOURS["flushed"]))
    im = None
    for ax, s in zip(axes, v.stats):
        im = ax.imshow(log2_error(s).numpy(), cmap="viridis", vmin=LOG2_ERROR_FLOOR, vmax=0, aspect="auto",
                       interpolation="nearest", extent=extent)
        ax.imshow((s.flushed.unsqueeze(-1).float() * grey).numpy(), aspect="auto", interpolation="nearest",
                  extent=extent)
        sr, sc = torch.nonzero(s.saturated, as_tuple=True)
        ax.plot(sc.numpy(), sr.numpy(), ls="none", marker="x", ms=6, color=BAND_COLOURS["overflow"], mew=1.6)
        ax.set_ylabel("row")
        ax.set_title(_panel_title(s), fontsize=9)
    edges = v.states[setting_key(v.scheme, v.block, v.fmt, v.rounding, v.power_of_two)]["edges"]
    if edges:
        tr_, tc = edges
        for e in range(tc, cols, tc):
            axes[1].axvline(e - 0.5, color=_EDGE, lw=1.2)
        for e in range(tr_, rows, tr_) if tr_ > 1 else ():
            axes[1].axhline(e - 0.5, color=_EDGE, lw=1.2)
    axes[1].set_xlabel("position along the last dimension (index)")
    assert im is not None   # two panels were drawn
    cb = fig.colorbar(im, ax=list(axes), shrink=0.9)
    cb.set_label(f"log2 relative error |x̂ − x| / |x|\n({LOG2_ERROR_FLOOR:g} or less = exact or nearly; "
                 "0 = value lost)")
    fig.legend(handles=[Patch(color=BAND_COLOURS["flushed"], label="flushed to zero"),
                        Line2D([], [], ls="none", marker="x", color=BAND_COLOURS["overflow"], label="saturated"),
                        Line2D([], [], color=_EDGE, lw=1.2, label="block edges (lower panel)")],
               loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle("Per-tensor vs per-block scaling: the error of every element", fontsize=10)
    return png_bytes(fig)
