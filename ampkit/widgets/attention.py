"""Notebook 07's widget (``07_transformers_in_16_bits.ipynb``): where attention logits overflow.

A thin view over :func:`ampkit.lessons.transformers_in_16_bits.activations.attention_overflow`. Two sliders — the
activation scale of q and k, and the head size — and a choice of where the 1/√d scale is applied (on q before the
matmul, or on the logits after it). For fp32, bf16 and fp16 side by side: the largest output of the attention matmul
(q·kᵀ, or (q/√d)·kᵀ) against the format's largest finite number (log scale; one that overflowed is drawn as a hatched
bar to the top, marked "inf"), and the share of softmax rows that became NaN. The axes are laid out once; a move
redraws the bars only. The readout states s²·√d with its limits: it is the spread of one product of independent q and
k; the largest of the head's products is several spreads and grows with the context; correlated q and k reach d·s².
"""
from __future__ import annotations

import math

import ipywidgets as W
import torch

from ampkit.i18n import tr
from ampkit.lessons.transformers_in_16_bits.activations import DTYPES, AttentionOverflow, attention_overflow
from ampkit.widgets.style import (
    BAND_COLOURS,
    DPI,
    STATUS_COLOURS,
    WidgetView,
    blit_background,
    blit_png,
    dtype_colour,
    freeze_layout,
    new_figure,
)

__all__ = ["AttentionOverflowView", "HEAD_SIZES", "readout_html"]

#: The head sizes the slider offers (Hugging Face's default GPT2Config: 768 / 12 heads = 64; LlamaConfig:
#: 4096 / 32 = 128).
HEAD_SIZES = (16, 32, 64, 128, 256)
_WIDTH_IN, _HEIGHT_IN = 7.5, 3.6
_WIDTH_PX = int(_WIDTH_IN * DPI)
_TOP = 1e7             # the log axis' top: above fp16's largest number; bf16's and fp32's (3.4e38) are far above


def _product_text(r: AttentionOverflow) -> str:
    return "inf" if r.overflowed else f"{r.matmul_max:.3g}"


def readout_html(results: list[AttentionOverflow], tokens: int = 64) -> str:
    """The readout under the sliders: the spread of one q·k product and its limits (the largest of the head's
    products, measured in fp32; correlated q and k), then per format the largest matmul output (or inf) and the
    share of NaN rows."""
    first = results[0]
    s, d = first.act_scale, first.head_dim
    spread = s ** 2 * math.sqrt(d)
    ref = next((r for r in results if not r.overflowed), first)     # fp32 comes first and never overflows here
    largest = ref.matmul_max * (math.sqrt(d) if ref.scale_at == "q" else 1.0)    # the unscaled q·k
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
                ratio=largest / spread, corr=d * s ** 2)
    return f"<div class='ampkit-attn-readout'>{head}<br>{limits}<br>" + " · ".join(cells) + "</div>"


class AttentionOverflowView(WidgetView):
    """Activation scale and head size → largest attention logit and NaN rows in fp32, bf16 and fp16.

    ``tokens``: the sequence length (one head, causal). The state of the last move is in ``.results`` (one
    :class:`~ampkit.lessons.transformers_in_16_bits.activations.AttentionOverflow` per format).
    """

    def __init__(self, act_scale: float = 8.0, head_dim: int = 64, scale_at: str = "logits", tokens: int = 64):
        if head_dim not in HEAD_SIZES:
            raise ValueError(tr("head_dim must be one of {choices}; got {value!r}",
                                choices=", ".join(map(str, HEAD_SIZES)), value=head_dim))
        self.tokens = tokens
        self.scale = W.FloatLogSlider(value=act_scale, base=2, min=0, max=9, step=0.25, description=tr("act. scale"),
                                      readout_format=".3g", continuous_update=True, layout=W.Layout(width="480px"))
        self.head = W.SelectionSlider(options=list(HEAD_SIZES), value=head_dim, description=tr("head size"),
                                      continuous_update=True, layout=W.Layout(width="480px"))
        self.where = W.ToggleButtons(options=[(tr("1/√d on the logits"), "logits"), (tr("1/√d on q"), "q")],
                                     value=scale_at, description=tr("scale at"))
        self.where.add_class("ampkit-attn-where")
        self.image = W.Image(format="png", width=_WIDTH_PX)
        self.image.add_class("ampkit-attn-plot")
        self.readout = W.HTML()
        self._cache: dict[tuple, tuple[list[AttentionOverflow], bytes]] = {}
        self._build()
        for c in (self.scale, self.head, self.where):
            c.observe(self._on_change, names="value")
        self.widget = W.VBox([self.scale, self.head, self.where, self.readout, self.image])
        self._update()

    def _build(self) -> None:
        fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
        left, right = fig.subplots(1, 2, width_ratios=[3, 2])
        names = list(DTYPES)
        xs = range(len(names))
        colours = [dtype_colour(n) for n in names]
        self._bars = left.bar(xs, [1.0] * len(names), color=colours, width=0.6)
        self._limit_marks: list = []
        for x, n in zip(xs, names):
            top = torch.finfo(DTYPES[n]).max
            if top < _TOP:          # drawn after the bars on every redraw, so an overflowed bar never hides it
                self._limit_marks += [
                    left.hlines(top, x - 0.45, x + 0.45, colors=STATUS_COLOURS["bad"], linestyles="--", lw=2),
                    left.annotate(f"{n} max {top:.0f}", (x, top), textcoords="offset points", xytext=(0, 3),
                                  ha="center", fontsize=7, color=STATUS_COLOURS["bad"],
                                  bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))]
            else:
                left.annotate(f"max {top:.2g}\n(far above)", (x, _TOP), textcoords="offset points", xytext=(0, -4),
                              ha="center", va="top", fontsize=7, color=colours[x])
        self._labels = [left.text(x, 1.0, "", ha="center", va="bottom", fontsize=8, zorder=5,
                                  bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
                        for x in xs]
        left.set_yscale("log")
        left.set_ylim(1.0, _TOP)
        left.set_xticks(list(xs), names)
        left.set_ylabel("largest |q·k| the matmul gave (log scale)")
        left.set_title("the attention matmul's largest output vs the format's max", fontsize=9)
        self._nan_bars = right.bar(xs, [0.0] * len(names), color=BAND_COLOURS["overflow"], width=0.6)
        self._nan_labels = [right.text(x, 0.0, "", ha="center", va="bottom", fontsize=8) for x in xs]
        right.set_ylim(0, 110)
        right.set_xticks(list(xs), names)
        right.set_ylabel("% of softmax rows with NaN")
        right.set_title("rows that became NaN", fontsize=9)
        self.figure = fig
        self._moving = [*self._bars, *self._limit_marks, *self._labels, *self._nan_bars, *self._nan_labels]
        freeze_layout(fig)
        self._bg = blit_background(fig, self._moving)

    def _render(self, results: list[AttentionOverflow]) -> bytes:
        for bar, label, nan_bar, nan_label, r in zip(self._bars, self._labels, self._nan_bars, self._nan_labels,
                                                      results):
            height = _TOP if r.overflowed else max(r.matmul_max, 1.0)
            bar.set_height(height)
            bar.set_hatch("//" if r.overflowed else "")
            bar.set_edgecolor(STATUS_COLOURS["bad"] if r.overflowed else bar.get_facecolor())
            label.set_position((bar.get_x() + bar.get_width() / 2, height if not r.overflowed else 5e5))
            label.set_text("inf (overflow)" if r.overflowed else f"{r.matmul_max:.3g}")
            nan_bar.set_height(100 * r.nan_rows)
            nan_label.set_position((nan_bar.get_x() + nan_bar.get_width() / 2, 100 * r.nan_rows + 1))
            nan_label.set_text(f"{100 * r.nan_rows:.0f} %")
        return blit_png(self.figure, self._bg, self._moving)

    def _update(self) -> None:
        key = (float(self.scale.value), int(self.head.value), self.where.value)
        if key not in self._cache:
            results = [attention_overflow(key[0], key[1], name, key[2], tokens=self.tokens) for name in DTYPES]
            self._cache[key] = (results, self._render(results))
        self.results, png = self._cache[key]
        self.readout.value = readout_html(self.results, self.tokens)
        self.image.value = png
