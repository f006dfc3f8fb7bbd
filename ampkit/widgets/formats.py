"""Widgets for notebook 01 (``01_fp16_range.ipynb``): the float explorer (and the range map, re-exported).

Thin views over :mod:`ampkit.formats`: every number shown comes from ``decompose``, ``toggle_bit``, ``explain``,
``classify`` and ``range_bands``; the widgets only wire controls to them and redraw.

- :class:`FloatExplorer` — type a number (or drag a log-scale slider) and see how fp32, fp16, bf16 and the two
  fp8 formats store it: bits coloured by field, stored value, error, ulp and neighbours. Click a bit to flip it.
- :class:`RangeMap` (in ``ampkit.widgets.range_map``, importable from here) — every format on one log2 axis in the
  kit's band colours, with a marker for a value; optionally a histogram of gradients with a loss-scale slider.
  It is drawn in the browser (``js/rangemap.js``, from the engine's bands); the explorer's controls are still
  ipywidgets that the kernel answers.

A move sends little to the browser (the learner feels every millisecond between a key press and the redrawn
view): the range map receives only the new value (the page moves its marker); the bits are one HTML value per
format (coloured cells) with transparent buttons on top that take the clicks and never change; a value that did
not change is not re-sent.
"""
from __future__ import annotations

import html
import math
from functools import partial

import ipywidgets as W

from ampkit.formats import FORMATS, Decomposition, decompose, explain, format_name, info, parse_value, toggle_bit
from ampkit.i18n import mark, tr
from ampkit.widgets.range_map import RangeMap, format_label
from ampkit.widgets.style import WidgetView

__all__ = ["FloatExplorer", "RangeMap", "FIELD_COLOURS", "bits_row_html", "summary_table_html"]

#: Field colours: (background of a 0 bit, background of a 1 bit), the Float Toy convention.
FIELD_COLOURS = {"sign": ("#fde2e2", "#cf222e"), "exponent": ("#dbe9fb", "#0969da"),
                 "mantissa": ("#dcf2d3", "#1a7f37")}
BIT_PX, GAP_PX = 19, 5   # a bit cell's width and the gap between fields, shared by the cells and the buttons
# The bits are drawn as one HTML value per format (coloured cells, one message when they change); transparent
# buttons of the same size lie on top of the cells to take the clicks, and are never updated.
_BIT_CSS = ("<style>.ampkit-cell{display:inline-block;box-sizing:border-box;width:" f"{BIT_PX}px;height:24px;"
            "line-height:22px;text-align:center;vertical-align:top;border:1px solid white;border-radius:3px;"
            "font:13px/22px var(--jp-code-font-family,monospace)}.ampkit-gap{display:inline-block;width:"
            f"{GAP_PX}px}}.ampkit-formula{{color:#57606a;font-size:12px;line-height:24px;vertical-align:top;"
            "margin-left:8px}.jupyter-widgets.jupyter-button.ampkit-bit{opacity:0;cursor:pointer}"
            ".jupyter-widgets.jupyter-button.ampkit-bit:hover{opacity:0.3;background:#24292f}"
            + "".join(f".ampkit-cell.ampkit-{f}{{background:{c0};color:#24292f}}"
                      f".ampkit-cell.ampkit-{f}.ampkit-one{{background:{c1};color:white}}"
                      for f, (c0, c1) in FIELD_COLOURS.items()) + "</style>")

_KIND_COLOURS = {"flushed to zero": "#cf222e", "overflow to inf": "#cf222e", "overflow to nan": "#cf222e",
                 "saturated to max": "#bc4c00", "nan": "#8250df", "inf": "#8250df", "exact": "#1a7f37"}


def _num(x: float, short: bool = False) -> str:
    """A float as the explorer prints it: exact (``repr``); ``short``: 4 significant digits, "—" for NaN."""
    if math.isnan(x):
        return "—" if short else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if short:
        return f"{x:.3e}" if x != 0 else "0"
    return repr(x)


def bits_row_html(d: Decomposition) -> str:
    """The bits of ``d`` as coloured cells grouped by field (text ``0 01011 1001100110``), then the formula.

    Each cell has the classes ``ampkit-cell``, ``ampkit-<field>`` and, for a 1 bit, ``ampkit-one``.
    """
    cells = []
    for i, (bit, field) in enumerate(zip(d.bits, d.fields)):
        if i in (1, 1 + len(d.exponent)):
            cells.append("<span class='ampkit-gap'> </span>")
        one = " ampkit-one" if bit == "1" else ""
        cells.append(f"<span class='ampkit-cell ampkit-{field}{one}'>{bit}</span>")
    return (f"<span style='white-space:nowrap'><code class='ampkit-bitstring' data-bits='{d.bits}' "
            f"style='background:none;padding:0'>{''.join(cells)}</code><span class='ampkit-formula'>= "
            f"{_formula_html(d)}</span></span>")


def _formula_html(d: Decomposition) -> str:
    """``d.formula()`` written compactly: ``+1.1001100110₂ × 2<sup>-4</sup>``."""
    text = html.escape(d.formula())
    if " (binary) × 2^" not in text:
        return text
    mantissa, exponent = text.split(" (binary) × 2^")
    return f"{mantissa}₂ × 2<sup>{exponent}</sup>"


def summary_table_html(state: dict[str, Decomposition]) -> str:
    """One table row per format: stored value, kind, what happened, errors, ulp and the two neighbours."""
    head = tr("<tr><th>format</th><th>stored value</th><th>kind</th><th>what happened</th><th>abs error</th>"
              "<th>rel error</th><th>ulp</th><th>previous</th><th>next</th></tr>")
    rows = []
    for name, d in state.items():
        colour = _KIND_COLOURS.get(d.verdict, "#57606a")
        rows.append(
            f"<tr class='ampkit-row-{name}'><td><b>{format_label(name)}</b></td>"
            f"<td class='ampkit-stored'><code>{_num(d.stored)}</code></td><td>{tr(d.kind)}</td>"
            f"<td style='color:{colour}'><b>{html.escape(tr(d.verdict))}</b></td>"
            f"<td>{_num(d.abs_error, True)}</td><td>{_num(d.rel_error, True)}</td><td>{_num(d.ulp, True)}</td>"
            f"<td><code>{_num(d.prev)}</code></td><td><code>{_num(d.next)}</code></td></tr>"
        )
    return f"<table class='ampkit-explorer-table'>{head}{''.join(rows)}</table>"


def _message_html(notes: list[str], error: str | None = None) -> str:
    if error:
        return f"<div class='ampkit-error' style='color:#cf222e'>⚠️ {html.escape(error)}</div>"
    if not notes:
        return f"<div class='ampkit-note' style='color:#57606a'>{tr('Every format just rounds this value.')}</div>"
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"<ul class='ampkit-note' style='margin:2px 0'>{items}</ul>"


class FloatExplorer(WidgetView):
    """Type a number or drag the log slider; see how each format stores it, bit by bit. Click a bit to flip it.

    ``.text`` (the text box), ``.slider`` (log2 scale, magnitudes 2^-150 … 2^129), ``.bitstrings[fmt]`` (the
    bits shown as coloured cells and the formula, one HTML per format), ``.buttons[fmt]`` (one transparent
    button per bit over the cells, sign first: ``.click()`` flips that bit), ``.message`` (notes or an error),
    ``.table``; ``.state[fmt]`` holds the :class:`~ampkit.formats.Decomposition` shown; ``.range_map`` the
    linked :class:`RangeMap` (or None).

    >>> ex = FloatExplorer(value=0.1, show_map=False)
    >>> ex.state["float16"].bits
    '0010111001100110'
    >>> ex.text.value = "65504"; ex.state["float16"].verdict
    'exact'
    """

    def __init__(self, value: float = 0.1, fmts=tuple(FORMATS), show_map: bool = True):
        self.fmts = [format_name(f) for f in fmts]
        self.value = float(value)
        self.error: str | None = None
        self.state: dict[str, Decomposition] = {}
        self._syncing = False
        self.text = W.Text(value=_num(self.value), description=tr("value"), continuous_update=False,
                           placeholder="0.1, 1e-8, 2^-24, -0, inf, nan", layout=W.Layout(width="300px"))
        self.text.add_class("ampkit-explorer-text")
        self.slider = W.FloatLogSlider(value=abs(self.value) if self.value else 1.0, base=2, min=-150, max=129,
                                       step=0.01, description="|value|", readout_format=".4g",
                                       continuous_update=True, layout=W.Layout(width="620px"))
        self.slider.add_class("ampkit-explorer-slider")
        self.message = W.HTML()
        self.message.add_class("ampkit-explorer-message")
        self.table = W.HTML()
        self.table.add_class("ampkit-explorer-summary")
        self.buttons: dict[str, list[W.Button]] = {}
        self.bitstrings: dict[str, W.HTML] = {}
        rows = []
        for name in self.fmts:
            i = info(name)
            fields = [mark("sign")] + [mark("exponent")] * i.exponent_bits + [mark("mantissa")] * i.mantissa_bits
            buttons, hits = [], []
            for pos, field in enumerate(fields):
                b = W.Button(description="", tooltip=tr("{fmt} bit {pos} ({field}): click to flip", fmt=name, pos=pos,
                                                         field=tr(field)),
                             layout=W.Layout(width=f"{BIT_PX}px", height="24px", padding="0", margin="0"))
                b.add_class("ampkit-bit")
                b.on_click(partial(self._on_bit, name, pos))
                buttons.append(b)
                if pos in (1, 1 + i.exponent_bits):  # the same gap between fields as the cells below
                    hits.append(W.Box(layout=W.Layout(width=f"{GAP_PX}px", min_width=f"{GAP_PX}px", margin="0")))
                hits.append(b)
            self.buttons[name] = buttons
            self.bitstrings[name] = W.HTML(layout=W.Layout(margin="0", height="24px", grid_area="bits"))
            width = len(fields) * BIT_PX + 2 * GAP_PX
            stack = W.GridBox([self.bitstrings[name], W.HBox(hits, layout=W.Layout(
                margin="0", width=f"{width}px", height="24px", grid_area="bits", overflow="hidden"))],
                layout=W.Layout(grid_template_areas='"bits"', margin="1px 0"))
            box = W.HBox([W.HTML(f"<b>{format_label(name)}</b>", layout=W.Layout(width="70px")), stack],
                         layout=W.Layout(align_items="center"))
            box.add_class(f"ampkit-bits-{name}")
            rows.append(box)
        self.range_map = RangeMap(self.fmts, value=self.value) if show_map else None
        self.text.observe(self._on_text, names="value")
        self.slider.observe(self._on_slider, names="value")
        legend = W.HTML(_BIT_CSS + "<span style='font-size:90%'>"
                        + tr("bits: <b style='color:#cf222e'>sign</b> · <b style='color:#0969da'>exponent</b> · "
                             "<b style='color:#1a7f37'>mantissa</b> (click a bit to flip it)") + "</span>")
        parts = [W.HBox([self.text, legend]), self.slider, *rows, self.table, self.message]
        if self.range_map is not None:
            parts.append(self.range_map.widget)
        self.widget = W.VBox(parts)
        self.widget.add_class("ampkit-explorer")
        self.set_value(self.value)

    # -- controls
    def _on_text(self, change: dict) -> None:
        if self._syncing:
            return
        try:
            value = parse_value(change["new"])
        except ValueError as exc:
            self.error = str(exc)
            self.message.value = _message_html([], self.error)
            return
        self.set_value(value)

    def _on_slider(self, change: dict) -> None:
        if self._syncing:
            return
        cur = abs(self.value)
        if math.isfinite(cur) and cur > 0 and change["new"] > 0:
            # The browser snaps a log slider's value to its step grid when it renders or syncs; such a nudge
            # (never more than half a step) is not a move by the learner and must not change the value shown.
            if abs(math.log2(change["new"]) - math.log2(cur)) <= self.slider.step / 2 + 1e-12:
                return
        sign = -1.0 if math.copysign(1.0, self.value) < 0 else 1.0
        self.set_value(sign * change["new"])

    def _on_bit(self, name: str, position: int, _button=None) -> None:
        self.flip(name, position)

    def flip(self, fmt: str, position: int) -> None:
        """Flip bit ``position`` (0 = sign) of ``fmt``'s stored pattern; the explorer moves to the new value."""
        name = format_name(fmt)
        d = toggle_bit(self.state[name], position)
        self.set_value(d.stored, keep={name: d})

    def set_value(self, value: float, keep: dict[str, Decomposition] | None = None) -> None:
        """Show ``value`` in every format (``keep``: decompositions to show as they are, e.g. a flipped NaN)."""
        keep = keep or {}
        self.value = float(value)
        self.error = None
        for name in self.fmts:
            d = keep.get(name) or decompose(self.value, name)
            self.state[name] = d
            self.bitstrings[name].value = bits_row_html(d)   # sent only when it changed
        self.table.value = summary_table_html(self.state)
        self.message.value = _message_html(explain(self.value, self.fmts))
        self._syncing = True
        try:
            self.text.value = _num(self.value)
            if math.isfinite(self.value) and self.value != 0:
                self.slider.value = abs(self.value)
        finally:
            self._syncing = False
        if self.range_map is not None:
            self.range_map.set_value(self.value)

