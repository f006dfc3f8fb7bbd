"""Notebook 01's float explorer (``01_fp16_range.ipynb``), drawn in the browser (``js/floats.js``); the range map
beside it is :class:`RangeMap` (``ampkit.widgets.range_map``, re-exported here).

:class:`FloatExplorer`: type a number or drag a log slider and see how fp32, fp16, bf16 and the two fp8 formats
store it: bits coloured by field, stored value, error, ulp, neighbours, a formula; click a bit to flip it; notes on
what is special about the value. The slider has ~28 000 positions and five formats, too many states to send, so the
page does the trivial arithmetic itself on each format's limits as :func:`ampkit.formats.info` reports them (sent
once, :func:`explorer_formats`): the rounding (``kit.js`` ``roundTo``), the stored value's bit pattern, a flipped
pattern's value (fields, subnormals, inf/NaN as the format encodes them; e4m3fn has no inf and one NaN pattern per
sign), ulp and neighbours, and the reading of typed text. ``tests/browser/test_front_floats_arith_browser.py``
checks each of them against :func:`~ampkit.formats.decompose`, :func:`~ampkit.formats.toggle_bit` and
:func:`~ampkit.formats.parse_value` on random inputs in Chromium. The engine stays the truth: with a kernel every
change the page makes reaches :class:`FloatExplorer`, which recomputes ``.state`` with ``decompose``.

The notes are :func:`ampkit.formats.explain`'s words, never written in the page. A learner drags the slider
through the places where a format flushes, goes subnormal or overflows and expects the note to appear there, also
in a saved notebook read without a kernel; so the engine sends explain's own templates (the same catalog messages,
so the same translations) with each format's constants already printed by Python (:func:`explain_templates`):
one per verdict that explain comments on, the subnormal one, the "beyond every format" one, and explain's whole
answer for the values it answers without numbers (NaN, ±inf, ±0). The page picks a format's template by the
verdict it computed and fills in the value (``.3g``) and the relative error (``.1e``); the unit test and the
arithmetic test hold the result equal to ``explain()`` on random values (a change to explain's words or cases
fails them).

The range map is its own view (:class:`RangeMap`), rendered inside the explorer through anywidget's ``host`` (the
explorer's ``range_map`` trait names the map's model; the page asks the host for that view and model), and the page
moves the map's marker itself when the value changes, so the saved notebook moves both with no kernel; with a kernel,
:meth:`FloatExplorer.set_value` moves the Python map too. The still picture (:meth:`FloatExplorer.still`, for
renderers without JavaScript) is the bits, the table and the notes as HTML, and the map's picture.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

import ipywidgets as W
import traitlets

from ampkit.formats import (
    FORMATS,
    Decomposition,
    decompose,
    explain,
    format_name,
    from_bits,
    info,
    parse_value,
    toggle_bit,
)
from ampkit.formats.parse import real_value
from ampkit.i18n import mark, tr
from ampkit.widgets.front import VERDICT_COLOURS, FrontView, format_limits
from ampkit.widgets.range_map import RangeMap, format_label

__all__ = ["FloatExplorer", "RangeMap", "FIELD_COLOURS", "bits_row_html", "summary_table_html", "explorer_formats",
           "explain_templates", "fill_notes"]

#: Field colours: (background of a 0 bit, background of a 1 bit), the Float Toy convention.
FIELD_COLOURS = {"sign": ("#fde2e2", "#cf222e"), "exponent": ("#dbe9fb", "#0969da"),
                 "mantissa": ("#dcf2d3", "#1a7f37")}
#: The slider: log2|value| from -150 to 129 in steps of 0.01 (every fp32 magnitude, subnormals and overflow included).
LOG_MIN, LOG_MAX, LOG_STEP = -150.0, 129.0, 0.01
_KINDS = (mark("zero"), mark("subnormal"), mark("normal"), "inf", "nan")
_FIELDS = (mark("sign"), mark("exponent"), mark("mantissa"))
_FIELD = re.compile(r"\{(\w+)(![rsa])?(?::([^{}]*))?\}")


def _num(x: float, short: bool = False) -> str:
    """A float as the explorer prints it: exact (``repr``); ``short``: 4 significant digits, "—" for NaN."""
    if math.isnan(x):
        return "—" if short else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if short:
        return f"{x:.3e}" if x != 0 else "0"
    return repr(x)


def explorer_formats(fmts: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """What the page's arithmetic needs of each format, read from the engine: ``format_limits`` (the rounding) and
    the layout (bits, fields, bias, whether the all-ones exponent is inf) and the pattern torch stores for NaN, as
    :func:`ampkit.formats.info` and torch report them (±inf is cast as the format overflows: ``overflows_to``).

    >>> f = explorer_formats(["fp16"])[0]
    >>> f["bits"], f["exponent_bits"], f["bias"], f["has_inf"], hex(f["nan_pattern"]), f["overflows_to"]
    (16, 5, 15, True, '0x7e00', 'inf')
    """
    out = []
    for fmt in fmts:
        fi = info(fmt)
        out.append({**format_limits(fi.name), "label": format_label(fi.name),
                    "bits": fi.bits,
                    "exponent_bits": fi.exponent_bits, "bias": fi.bias, "has_inf": fi.has_inf,
                    **({} if fi.has_nan else {"has_nan": False}),   # E2M1 only: the saved views of 00/01 unchanged
                    "nan_pattern": decompose(math.nan, fi.name).pattern})
    return out


def _partial(template: str, **fields: Any) -> str:
    """``template`` with the given fields printed (``str.format`` rules); the other fields stay for the page."""
    def one(m: re.Match) -> str:
        name, conv, spec = m.groups()
        if name not in fields:
            return m.group(0)
        value = repr(fields[name]) if conv == "!r" else fields[name]
        return format(value, spec or "")
    return _FIELD.sub(one, template)


def explain_templates(fmts: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """:func:`ampkit.formats.explain`'s words as the page fills them: explain's answer for NaN, ±inf and ±0
    (``fixed``, keyed by the value's repr), its note for a value beyond every format (``beyond``, with float32's
    limits in ``widest``) and per format one template per verdict it comments on and one for a subnormal, each
    format's constants printed here; the page fills ``{v:.3g}`` and ``{rel:.1e}``.

    >>> t = explain_templates(["fp16"])
    >>> t["per"]["float16"]["flushed to zero"]
    'float16 flushes {v:.3g} to zero: it is below half the smallest subnormal (2.98e-08).'
    """
    per = {}
    for fmt in fmts:
        fi = info(fmt)
        per[fi.name] = {
            "flushed to zero": _partial(tr("{name} flushes {v:.3g} to zero: it is below half the smallest subnormal "
                                           "({t:.3g})."), name=fi.name, t=fi.flush_threshold),
            "overflow to inf": _partial(tr("{name} overflows to inf: {v:.3g} is past its max ({max:.6g})."),
                                        name=fi.name, max=fi.max),
            "overflow to nan": _partial(tr("{name} overflows to NaN: {v:.3g} is past its max ({max:.6g})."),
                                        name=fi.name, max=fi.max),
            "saturated to max": [_partial(tr("{name} saturates: {v:.3g} is past its max, and torch's cast clamps it "
                                             "to {clamp:g} (the format has no inf)."), name=fi.name,
                                          clamp=math.copysign(fi.max, sign)) for sign in (1.0, -1.0)],
            "subnormal": _partial(tr("{name} stores {v:.3g} as a subnormal: below its smallest normal "
                                     "({normal:.3g}), so fewer significant bits (relative error {rel:.1e})."),
                                  name=fi.name, normal=fi.smallest_normal)}
    widest = info("float32")
    return {"fixed": {repr(v): explain(v, fmts) for v in (math.nan, math.inf, -math.inf, 0.0, -0.0)},
            "beyond": _partial(tr("{v:.3g} is beyond every format's max (float32's max is {max:.3g}): all of them "
                                  "overflow."), max=widest.max),
            "widest": {"overflow_threshold": widest.overflow_threshold, "overflow_tie_up": widest.overflow_tie_up},
            "per": per, "none": tr("Every format just rounds this value.")}


def fill_notes(value: float, state: dict[str, Decomposition], templates: dict[str, Any]) -> list[str]:
    """The notes the page shows for ``value`` (what ``js/floats.js``'s ``notesFor`` does, in Python: the tests
    hold it equal to :func:`ampkit.formats.explain`)."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return templates["fixed"][repr(value)]
    w, a = templates["widest"], abs(value)
    out = []
    if a > w["overflow_threshold"] or (a == w["overflow_threshold"] and w["overflow_tie_up"]):
        out.append(_partial(templates["beyond"], v=value))
    for name, d in state.items():
        t = templates["per"][name]
        if d.verdict == "saturated to max":
            out.append(_partial(t[d.verdict][1 if value < 0 else 0], v=value))
        elif d.verdict in t:
            out.append(_partial(t[d.verdict], v=value))
        elif d.kind == "subnormal":
            out.append(_partial(t["subnormal"], v=value, rel=abs(d.stored - value) / a))
    return out


def bits_row_html(d: Decomposition) -> str:
    """The bits of ``d`` as coloured cells grouped by field (text ``0 01011 1001100110``), then the formula (the
    still picture's row; the page draws its own from the same numbers).

    >>> import re; re.sub("<[^>]+>", "", bits_row_html(decompose(0.1, "fp16")))
    '0 01011 1001100110= +1.1001100110₂ × 2-4'
    """
    cells = []
    for i, (bit, field) in enumerate(zip(d.bits, d.fields)):
        if i in (1, 1 + len(d.exponent)):
            cells.append("<span class='ampkit-gap'> </span>")
        c0, c1 = FIELD_COLOURS[field]
        style = f"background:{c1};color:white" if bit == "1" else f"background:{c0}"
        cells.append(f"<span class='ampkit-cell ampkit-{field}' style='{style}'>{bit}</span>")
    return (f"<span style='white-space:nowrap'><code class='ampkit-bitstring' data-bits='{d.bits}'>"
            f"{''.join(cells)}</code><span class='ampkit-formula'>= {_formula_html(d)}</span></span>")


def _formula_html(d: Decomposition) -> str:
    """``d.formula()`` written compactly: ``+1.1001100110₂ × 2<sup>-4</sup>``."""
    text = html.escape(d.formula())
    if " (binary) × 2^" not in text:
        return text
    mantissa, exponent = text.split(" (binary) × 2^")
    return f"{mantissa}₂ × 2<sup>{exponent}</sup>"


def _head() -> list[str]:
    return [tr("format"), tr("stored value"), tr("kind"), tr("what happened"), tr("abs error"), tr("rel error"),
            tr("ulp"), tr("previous"), tr("next")]


def summary_table_html(state: dict[str, Decomposition]) -> str:
    """One table row per format: stored value, kind, what happened, errors, ulp and the two neighbours.

    >>> "0.0999755859375" in summary_table_html({"float16": decompose(0.1, "fp16")})
    True
    """
    head = "".join(f"<th>{w}</th>" for w in _head())
    rows = []
    for name, d in state.items():
        colour = VERDICT_COLOURS.get(d.verdict, VERDICT_COLOURS["rounded"])
        rows.append(
            f"<tr class='ampkit-row-{name}'><td><b>{format_label(name)}</b></td>"
            f"<td class='ampkit-stored'><code>{_num(d.stored)}</code></td><td>{tr(d.kind)}</td>"
            f"<td style='color:{colour}'><b>{html.escape(tr(d.verdict))}</b></td>"
            f"<td>{_num(d.abs_error, True)}</td><td>{_num(d.rel_error, True)}</td><td>{_num(d.ulp, True)}</td>"
            f"<td><code>{_num(d.prev)}</code></td><td><code>{_num(d.next)}</code></td></tr>"
        )
    return f"<table class='ampkit-explorer-table'><tr>{head}</tr>{''.join(rows)}</table>"


class _Slider:
    """``explorer.slider``: the log slider as the notebook's code sees it (``.value`` is |value|)."""

    min, max, step = 2.0 ** LOG_MIN, 2.0 ** LOG_MAX, LOG_STEP

    def __init__(self, explorer: FloatExplorer) -> None:
        self._ex = explorer

    @property
    def value(self) -> float:
        v = abs(self._ex.value)
        return v if math.isfinite(v) and v else 1.0

    @value.setter
    def value(self, magnitude: float) -> None:
        """Move the slider: the value's magnitude, its sign kept (as the page's slider does)."""
        sign = -1.0 if math.copysign(1.0, self._ex.value) < 0 else 1.0
        self._ex.set_value(sign * float(magnitude))


class _Bit:
    """One bit of the page's bit rows: ``.click()`` flips it, as a click on the page does."""

    def __init__(self, explorer: FloatExplorer, fmt: str, position: int) -> None:
        self._ex, self.fmt, self.position = explorer, fmt, position

    def click(self) -> None:
        self._ex.flip(self.fmt, self.position)


class FloatExplorer(FrontView):
    """Type a number or drag the log slider; see how each format stores it, bit by bit. Click a bit to flip it.
    Drawn in the browser (``js/floats.js``) from each format's limits; the engine's answer is ``.state``.

    ``.value`` (the number shown), ``.state[fmt]`` (its :class:`~ampkit.formats.Decomposition`, from
    ``decompose``/``toggle_bit``), ``.notes`` (``explain``'s), ``.error`` (the message for text that is not a number,
    or None); ``.typed = "65504"`` types text as the learner does, :meth:`set_value` and :meth:`flip` move it,
    ``.slider.value`` is the log slider (magnitude), ``.buttons[fmt][pos].click()`` flips a bit; ``.range_map`` the
    :class:`RangeMap` shown beside it (or None).

    >>> ex = FloatExplorer(value=0.1, show_map=False)
    >>> ex.state["float16"].bits
    '0010111001100110'
    >>> ex.typed = "65504"; ex.state["float16"].verdict
    'exact'
    """

    _front = "floats"
    formats: traitlets.List[dict] = traitlets.List().tag(sync=True)
    field_colours = traitlets.Dict().tag(sync=True)
    note_templates = traitlets.Dict().tag(sync=True)   # explain_templates(fmts)
    value_repr = traitlets.Unicode("0.1").tag(sync=True)    # the value shown, as Python's repr (nan, -0.0, inf)
    typed = traitlets.Unicode("0.1").tag(sync=True)         # the text in the box
    flipped = traitlets.Dict().tag(sync=True)               # {"fmt", "pattern"}: a flipped pattern shown as it is
    error_text = traitlets.Unicode("").tag(sync=True)       # why the typed text is not a number ("" when it is)
    log_min = traitlets.Float(LOG_MIN).tag(sync=True)
    log_max = traitlets.Float(LOG_MAX).tag(sync=True)
    log_step = traitlets.Float(LOG_STEP).tag(sync=True)
    range_map = traitlets.Instance(RangeMap, allow_none=True).tag(sync=True, **W.widget_serialization)

    def __init__(self, value: float = 0.1, fmts: tuple[str, ...] | list[str] = tuple(FORMATS), show_map: bool = True):
        self.fmts = [format_name(f) for f in fmts]
        self.value = real_value(value)
        self.state: dict[str, Decomposition] = {}
        self._syncing = False
        super().__init__(formats=explorer_formats(self.fmts), field_colours={k: list(v) for k, v in
                                                                             FIELD_COLOURS.items()},
                         note_templates=explain_templates(self.fmts),
                         range_map=RangeMap(self.fmts, value=self.value) if show_map else None)
        self.observe(self._on_page, names=["typed", "value_repr", "flipped"])
        self.set_value(self.value)

    def words(self) -> dict[str, Any]:
        return {"value": tr("value"), "slider": tr("|value| (log scale)"), "bits": tr("bits:"),
                "click": tr("(click a bit to flip it)"),
                "kernel": tr("run the notebook to compute this on your machine (Python's ** rounds this power)"),
                "fields": {k: tr(k) for k in _FIELDS},
                "flip": tr("{fmt} bit {pos} ({field}): click to flip"), "head": _head(),
                "kinds": {k: tr(k) for k in _KINDS}, "verdicts": {v: tr(v) for v in VERDICT_COLOURS},
                "errors": {"empty": tr("type a number, e.g. 0.1, 1e-8, -0, inf, nan, 2^-24"),
                           "bad": tr("{text!r} is not a number; try e.g. 0.1, 1e-8, -0, inf, nan, 2^-24 or 0x1p-24"),
                           "zero": tr("{text!r} divides by zero; try e.g. 0.1, 1e-8, 2^-24")}}

    # -- the Python API
    @property
    def error(self) -> str | None:
        """Why the text typed last is not a number (None when it is)."""
        return self.error_text or None

    @property
    def notes(self) -> list[str]:
        """:func:`ampkit.formats.explain`'s notes on the value shown (what the page shows under the table)."""
        return explain(self.value, self.fmts)

    @property
    def slider(self) -> _Slider:
        """The log slider (``.value``: the magnitude shown; setting it keeps the sign)."""
        return _Slider(self)

    @property
    def buttons(self) -> dict[str, list[_Bit]]:
        """Per format, one clickable bit per position (sign first), as drawn on the page."""
        return {name: [_Bit(self, name, p) for p in range(info(name).bits)] for name in self.fmts}

    def flip(self, fmt: str, position: int) -> None:
        """Flip bit ``position`` (0 = sign) of ``fmt``'s stored pattern; the explorer moves to the new value."""
        name = format_name(fmt)
        if name not in self.state:
            raise ValueError(tr("this explorer shows {shown}; {fmt!r} is not one of them", shown=", ".join(self.fmts),
                                fmt=fmt))
        d = toggle_bit(self.state[name], position)
        self.set_value(d.stored, keep={name: d})

    def set_value(self, value: float, keep: dict[str, Decomposition] | None = None) -> None:
        """Show ``value`` in every format (``keep``: one flipped decomposition to show as it is, e.g. a NaN)."""
        flipped = next(({"fmt": d.fmt, "pattern": d.pattern} for d in keep.values()), {}) if keep else {}
        self._show(real_value(value), flipped)
        self._syncing = True
        try:
            with self.hold_sync():
                self.value_repr = repr(self.value)
                self.typed = repr(self.value)
                self.flipped = flipped
                self.error_text = ""
        finally:
            self._syncing = False

    def _show(self, value: float, flipped: dict) -> None:
        """The engine's state of ``value``: decompose in every format (the flipped pattern through from_bits)."""
        self.value = value
        for name in self.fmts:
            if flipped.get("fmt") == name:
                self.state[name] = from_bits(flipped["pattern"], name)
            else:
                self.state[name] = decompose(value, name)
        if self.range_map is not None:
            self.range_map.set_value(value)

    def _on_page(self, change: dict) -> None:
        """A change the page (or code) made: typed text is read by the engine; a value or flip is decomposed."""
        if self._syncing:
            return
        if change["name"] == "typed" and self.typed != self.value_repr:   # text typed, not a value the page set
            try:
                value = parse_value(change["new"])
            except ValueError as exc:
                self.error_text = str(exc)
                return
            self.set_value(value)
        else:
            self._show(float(self.value_repr), dict(self.flipped))

    def still(self) -> W.Widget:
        """The still picture: the value, every format's bits and the table as HTML, the notes, the map's picture."""
        notes = self.notes
        rows = "".join(f"<div><b>{format_label(n)}</b> {bits_row_html(d)}</div>" for n, d in self.state.items())
        items = "".join(f"<li>{html.escape(n)}</li>" for n in notes) or html.escape(tr("Every format just rounds "
                                                                                      "this value."))
        parts: list[W.Widget] = [W.HTML(f"{tr('value')}: {html.escape(self.typed)}"), W.HTML(rows),
                                 W.HTML(summary_table_html(self.state)), W.HTML(f"<ul>{items}</ul>")]
        if self.range_map is not None:
            parts.append(W.Image(value=self.range_map.png(), format="png"))
        return W.VBox(parts)
