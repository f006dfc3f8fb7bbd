"""Notebook 07's widget (``07_transformers_in_16_bits.ipynb``): where attention logits overflow.

A thin view over :func:`ampkit.lessons.transformers_in_16_bits.activations.attention_overflow`, drawn in the browser
(:class:`ampkit.widgets.front.FrontView`, ``js/attention.js``). Two sliders — the activation scale of q and k, and
the head size — and a choice of where the 1/√d scale is applied (on q before the matmul, or on the logits after it).
For fp32, bf16 and fp16 side by side: the largest output of the attention matmul (q·kᵀ, or (q/√d)·kᵀ) against the
format's largest finite number (log scale; one that overflowed is drawn as a hatched bar to the top, marked "inf"),
and the share of softmax rows that became NaN. The readout states s²·√d with its limits: it is the spread of one
product of independent q and k; the largest of the head's products is several spreads and grows with the context;
correlated q and k reach d·s².

Every reachable state of the controls (37 scales × 5 head sizes × 2 places of the scale, each in the three formats:
1110 runs of the engine, about 3 s) is computed when the view starts and sent as its state (:attr:`states`); the page
only SELECTS the state of the controls' position, so the saved notebook moves the view with no kernel.
"""
from __future__ import annotations

import math

import ipywidgets as W
import torch
import traitlets

from ampkit.i18n import tr
from ampkit.lessons.transformers_in_16_bits.activations import DTYPES, AttentionOverflow, attention_overflow
from ampkit.models import SCALE_AT
from ampkit.widgets.front import Control, FrontView
from ampkit.widgets.style import BAND_COLOURS, DPI, STATUS_COLOURS, dtype_colour, new_figure, png_bytes

__all__ = ["AttentionOverflowView", "HEAD_SIZES", "SCALES", "readout_html", "sent_state"]

#: The head sizes the slider offers (Hugging Face's default GPT2Config: 768 / 12 heads = 64; LlamaConfig:
#: 4096 / 32 = 128).
HEAD_SIZES = (16, 32, 64, 128, 256)
_WIDTH_IN, _HEIGHT_IN = 7.5, 3.6
_WIDTH_PX = int(_WIDTH_IN * DPI)
_TOP = 1e7             # the log axis' top: above fp16's largest number; bf16's and fp32's (3.4e38) are far above
#: The activation scales the slider offers: 2**0 … 2**9 in quarter octaves (37 positions), every one precomputed.
SCALES = tuple(2.0 ** (i / 4) for i in range(37))


def _product_text(r: AttentionOverflow) -> str:
    return "inf" if r.overflowed else f"{r.matmul_max:.3g}"


def _limits(results: list[AttentionOverflow]) -> tuple[float, float, float]:
    """s²·√d (the spread of one product), the largest unscaled q·k of the head (from the first format that did not
    overflow: fp32) and d·s² (correlated q and k)."""
    first = results[0]
    s, d = first.act_scale, first.head_dim
    ref = next((r for r in results if not r.overflowed), first)     # fp32 comes first and never overflows here
    largest = ref.matmul_max * (math.sqrt(d) if ref.scale_at == "q" else 1.0)    # the unscaled q·k
    return s ** 2 * math.sqrt(d), largest, d * s ** 2


def readout_html(results: list[AttentionOverflow], tokens: int = 64) -> str:
    """The readout under the sliders: the spread of one q·k product and its limits (the largest of the head's
    products, measured in fp32; correlated q and k), then per format the largest matmul output (or inf) and the
    share of NaN rows."""
    first = results[0]
    s, d = first.act_scale, first.head_dim
    spread, largest, corr = _limits(results)
    where = tr("on q, before the matmul") if first.scale_at == "q" else tr("on the logits, after the matmul")
    cells = []
    for r in results:
        colour = STATUS_COLOURS["bad"] if r.nan_rows else STATUS_COLOURS["good"]
        facts = tr("largest matmul output {largest}, NaN rows {pct:.0f} %", largest=_product_text(r),
                   pct=100 * r.nan_rows)
        cells.append(f"<span class='ampkit-attn-{r.dtype}' style='color:{colour}'><b>{r.dtype}</b>: {facts}</span>")
    head = tr("activation scale {s:.3g}, head size {d}, 1/√d {where}", s=s, d=d, where=where)
    limits = tr("one q·k of independent q and k spreads about s²·√d = {spread:.3g}; the largest of this head's "
                "{n} products is {largest:.3g} ({ratio:.1f} spreads, more for longer contexts); correlated q and k "
                "reach d·s² = {corr:.3g}", spread=spread, n=tokens * (tokens + 1) // 2, largest=largest,
                ratio=largest / spread, corr=corr)
    return f"<div class='ampkit-attn-readout'>{head}<br>{limits}<br>" + " · ".join(cells) + "</div>"




def sent_state(results: list[AttentionOverflow]) -> str:
    """What the page gets of one position of the controls: the engine's numbers, the readout's printed as
    :func:`readout_html` prints them, in one line of words separated by spaces (a saved notebook stores each list
    item on a line of its own: 370 lines, not 10 000): ``spread largest ratio corr``, then per format
    ``largest-or-inf NaN-rows-% matmul_max-or-inf nan_rows`` (the last two as Python's repr, which JavaScript's
    ``Number`` reads back exactly).

    >>> from ampkit.lessons.transformers_in_16_bits.activations import attention_overflow
    >>> words = sent_state([attention_overflow(64.0, 64, f) for f in ("fp32", "fp16")]).split()
    >>> words[:4], words[4:8]
    (['3.28e+04', '1.17e+05', '3.6', '2.62e+05'], ['1.17e+05', '0', '117120.4296875', '0.0'])
    >>> words[8:]          # fp16: the matmul overflowed, 45 % of the rows are NaN
    ['inf', '45', 'inf', '0.453125']
    """
    spread, largest, corr = _limits(results)
    words = [f"{spread:.3g}", f"{largest:.3g}", f"{largest / spread:.1f}", f"{corr:.3g}"]
    for r in results:
        words += [_product_text(r), f"{100 * r.nan_rows:.0f}", repr(r.matmul_max), repr(r.nan_rows)]
    return " ".join(words)




class AttentionOverflowView(FrontView):
    """Activation scale and head size → largest attention logit and NaN rows in fp32, bf16 and fp16, drawn in the
    browser (``js/attention.js``) from every state of the controls, computed by the engine when the view starts.

    ``tokens``: the sequence length (one head, causal). The state of the controls' position is in ``.results`` (one
    :class:`~ampkit.lessons.transformers_in_16_bits.activations.AttentionOverflow` per format); the traits
    ``act_scale`` (one of :data:`SCALES`: another value snaps to the nearest), ``head_dim`` and ``scale_at`` are
    the controls (``.scale``, ``.head``, ``.where`` hold them as ``.value`` too).

    >>> v = AttentionOverflowView(act_scale=64.0)
    >>> v.results[2].overflowed, v.states["logits"][2][24].split()[-4:-2]
    (True, ['inf', '45'])
    >>> v.where.value = "q"; v.results[2].overflowed
    False
    """

    _front = "attention"
    act_scale = traitlets.Float(8.0).tag(sync=True)
    head_dim = traitlets.Int(64).tag(sync=True)
    scale_at = traitlets.Unicode("logits").tag(sync=True)
    scales: traitlets.List[float] = traitlets.List(list(SCALES)).tag(sync=True)
    scale_labels: traitlets.List[str] = traitlets.List([f"{s:.3g}" for s in SCALES]).tag(sync=True)
    head_sizes: traitlets.List[int] = traitlets.List(list(HEAD_SIZES)).tag(sync=True)
    formats: traitlets.List[dict] = traitlets.List().tag(sync=True)
    top = traitlets.Float(_TOP).tag(sync=True)
    tokens = traitlets.Int(64).tag(sync=True)
    products = traitlets.Int(64 * 65 // 2).tag(sync=True)     # the causal head's q·k products: tokens·(tokens+1)/2
    states = traitlets.Dict().tag(sync=True)

    def __init__(self, act_scale: float = 8.0, head_dim: int = 64, scale_at: str = "logits", tokens: int = 64):
        if head_dim not in HEAD_SIZES:
            raise ValueError(tr("head_dim must be one of {choices}; got {value!r}",
                                choices=", ".join(map(str, HEAD_SIZES)), value=head_dim))
        self._results: dict[tuple[float, int, str], list[AttentionOverflow]] = {}
        for where in SCALE_AT:           # every position of the controls, computed once, sent as the view's state
            for d in HEAD_SIZES:
                for s in SCALES:
                    self._results[(s, d, where)] = [attention_overflow(s, d, name, where, tokens=tokens)
                                                    for name in DTYPES]
        states = {where: [[sent_state(self._results[(s, d, where)]) for s in SCALES] for d in HEAD_SIZES]
                  for where in SCALE_AT}
        formats = []
        for name, dt in DTYPES.items():
            top = torch.finfo(dt).max
            label = ([tr("{fmt} max {top}", fmt=name, top=f"{top:.0f}")] if top < _TOP
                     else [tr("max {top}", top=f"{top:.2g}"), tr("(far above)")])
            formats.append({"name": name, "max": top, "label": label})     # label: its lines
        self.scale, self.head, self.where = Control(self, "act_scale"), Control(self, "head_dim"), \
            Control(self, "scale_at")
        super().__init__(tokens=tokens, products=tokens * (tokens + 1) // 2, states=states, formats=formats,
                         head_dim=head_dim, scale_at=scale_at, act_scale=act_scale)
        self._select(None)

    @traitlets.validate("act_scale")
    def _on_the_grid(self, proposal: dict) -> float:
        s = proposal["value"]
        if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
            raise traitlets.TraitError(tr("act_scale must be a positive number; got {value!r}", value=s))
        return min(SCALES, key=lambda g: abs(math.log2(g) - math.log2(s)))

    @traitlets.validate("head_dim")
    def _valid_head(self, proposal: dict) -> int:
        if proposal["value"] not in HEAD_SIZES:
            raise traitlets.TraitError(tr("head_dim must be one of {choices}; got {value!r}",
                                          choices=", ".join(map(str, HEAD_SIZES)), value=proposal["value"]))
        return proposal["value"]

    @traitlets.validate("scale_at")
    def _valid_where(self, proposal: dict) -> str:
        if proposal["value"] not in SCALE_AT:
            raise traitlets.TraitError(tr("scale_at must be one of {choices}; got {value!r}",
                                          choices=", ".join(SCALE_AT), value=proposal["value"]))
        return proposal["value"]

    @traitlets.observe("act_scale", "head_dim", "scale_at")
    def _select(self, change: dict | None) -> None:
        if getattr(self, "_results", None):
            self.results: list[AttentionOverflow] = self._results[(self.act_scale, self.head_dim, self.scale_at)]

    @property
    def readout_html(self) -> str:
        """The readout of the current position, as the page shows it (for the still picture and the tests)."""
        return readout_html(self.results, self.tokens)

    def words(self) -> dict:
        return {"scale": tr("act. scale"), "head": tr("head size"), "at": tr("scale at"),
                "where": [["logits", tr("1/√d on the logits")], ["q", tr("1/√d on q")]],
                "where_long": {"q": tr("on q, before the matmul"), "logits": tr("on the logits, after the matmul")},
                "line": tr("activation scale {s:.3g}, head size {d}, 1/√d {where}"),
                "limits": tr("one q·k of independent q and k spreads about s²·√d = {spread:.3g}; the largest of "
                             "this head's {n} products is {largest:.3g} ({ratio:.1f} spreads, more for longer "
                             "contexts); correlated q and k reach d·s² = {corr:.3g}"),
                "facts": tr("largest matmul output {largest}, NaN rows {pct:.0f} %"),
                "inf": tr("inf (overflow)"), "ylabel": tr("largest |q·k| the matmul gave (log scale)"),
                "title": tr("the attention matmul's largest output vs the format's max"),
                "nan_ylabel": tr("% of softmax rows with NaN"), "nan_title": tr("rows that became NaN"),
                "percent": tr("{value} %")}

    def still(self) -> W.Widget:
        return W.VBox([W.HTML(self.readout_html), W.Image(value=_still_png(self.results), format="png",
                                                          width=_WIDTH_PX)])


def _still_png(results: list[AttentionOverflow]) -> bytes:
    """The two bar charts of one state as a PNG (renderers without JavaScript)."""
    fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    names = [r.dtype for r in results]
    xs = range(len(names))
    for x, r in zip(xs, results):
        colour = dtype_colour(r.dtype)
        height = _TOP if r.overflowed else max(r.matmul_max, 1.0)
        left.bar(x, height, color=colour, width=0.6, hatch="//" if r.overflowed else "",
                 edgecolor=STATUS_COLOURS["bad"] if r.overflowed else colour)
        left.text(x, 5e5 if r.overflowed else height, "inf (overflow)" if r.overflowed else f"{r.matmul_max:.3g}",
                  ha="center", va="bottom", fontsize=8, zorder=5,
                  bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
        if r.fmt_max < _TOP:
            left.hlines(r.fmt_max, x - 0.45, x + 0.45, colors=STATUS_COLOURS["bad"], linestyles="--", lw=2)
            left.annotate(f"{r.dtype} max {r.fmt_max:.0f}", (x, r.fmt_max), textcoords="offset points",
                          xytext=(0, 3), ha="center", fontsize=7, color=STATUS_COLOURS["bad"],
                          bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
        else:
            left.annotate(f"max {r.fmt_max:.2g}\n(far above)", (x, _TOP), textcoords="offset points",
                          xytext=(0, -4), ha="center", va="top", fontsize=7, color=colour)
        right.bar(x, 100 * r.nan_rows, color=BAND_COLOURS["overflow"], width=0.6)
        right.text(x, 100 * r.nan_rows + 1, f"{100 * r.nan_rows:.0f} %", ha="center", va="bottom", fontsize=8)
    left.set_yscale("log")
    left.set_ylim(1.0, _TOP)
    left.set_xticks(list(xs), names)
    left.set_ylabel("largest |q·k| the matmul gave (log scale)")
    left.set_title("the attention matmul's largest output vs the format's max", fontsize=9)
    right.set_ylim(0, 110)
    right.set_xticks(list(xs), names)
    right.set_ylabel("% of softmax rows with NaN")
    right.set_title("rows that became NaN", fontsize=9)
    return png_bytes(fig)
