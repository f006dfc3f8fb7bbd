"""Notebook 10's view: one MXFP4 block (E2M1 elements, an E8M0 power-of-two scale) under each MX scale rule, as its
amax moves: which scale each rule picks, the values the block can then hold, where it saturates and below what its
small values flush. Taught in ``10_fp4.ipynb``.

A thin view over :func:`ampkit.lessons.fp4.rule_table` (the engine's :func:`ampkit.fp8.mx.block_range` per rule).
:class:`ScaleRuleExplorer` is a :class:`~ampkit.widgets.front.FrontView` (``js/fp4rules.js``, SVG): when it starts,
the engine computes every amax the slider reaches (0.25 … 16 in steps of 0.25) under every rule and sends, per amax
and rule, the scale's exponent and the block's limits as the engine prints them; the page SELECTS the slider's
entry and draws it, so the saved notebook moves with no kernel. Drawn: a row per rule on one log2 axis — the values
the block can hold (E2M1's magnitudes times the rule's scale), the flushed zone below half the smallest, the
saturated zone from the saturation line up, and the block's amax, marked as kept or saturated. The still picture
(renderers without JavaScript) is the readout table.
"""
from __future__ import annotations

import ipywidgets as W
import traitlets

from ampkit.formats.e2m1 import E2M1_VALUES
from ampkit.fp8.mx import SCALE_RULES, BlockRange
from ampkit.i18n import mark, tr
from ampkit.lessons.fp4 import rule_table
from ampkit.widgets.front import FrontView

__all__ = ["ScaleRuleExplorer", "AMAXES", "RULE_LABELS", "rule_rows_html", "rule_state"]

#: the slider's block amaxes: 0.25 … 16 in steps of 0.25 (exact in binary)
AMAXES = tuple(k / 4 for k in range(1, 65))
#: each scale rule as the view names it (the OCP and TE rules of notebook 06, torchao's four)
RULE_LABELS = {"ocp": mark("OCP floor"), "te": mark("TE round-up"), "floor": mark("torchao FLOOR"),
               "ceil": mark("torchao CEIL"), "even": mark("torchao EVEN"), "rceil": mark("torchao RCEIL")}


def rule_state(r: BlockRange) -> dict:
    """One rule at one amax as the page shows it: the exponent and the limits as the engine prints them (``:g``),
    and whether the block's amax saturates.

    >>> from ampkit.fp8.mx import block_range
    >>> rule_state(block_range(7.0, "e2m1", "floor"))
    {'rule': 'floor', 'k': 0, 'largest': '6', 'sat': '7', 'flush': '0.25', 'saturates': True}
    """
    return {"rule": r.rounding, "k": r.exponent, "largest": f"{r.largest:g}", "sat": f"{r.saturates_from:g}",
            "flush": f"{r.flush_below:g}", "saturates": r.saturates}


def rule_rows_html(rows: list[BlockRange]) -> str:
    """The readout: per rule, the scale, the largest value kept, where it saturates and below what it flushes."""
    head = "".join(f"<th>{tr(c)}</th>" for c in ("scale rule", "scale", "largest kept", "saturates from",
                                                   "flushed below", "the block's amax"))
    body = "".join(
        f"<tr class='ampkit-fp4-rule-{r.rounding}'><td>{tr(RULE_LABELS[r.rounding])}</td><td>2^{r.exponent}</td>"
        f"<td>{r.largest:g}</td><td>{r.saturates_from:g}</td><td>{r.flush_below:g}</td>"
        f"<td>{tr('saturates') if r.saturates else tr('kept')}</td></tr>" for r in rows)
    amax = tr("block amax: {amax}", amax=f"{rows[0].amax:g}") if rows else ""
    return f"<div class='ampkit-fp4-rules-readout'><b>{amax}</b><table><tr>{head}</tr>{body}</table></div>"


class ScaleRuleExplorer(FrontView):
    """A block amax slider and, per MX scale rule, the E8M0 scale it picks and what the block then holds, drawn in
    the browser (``js/fp4rules.js``) from every amax the engine computed when the view started. :attr:`rows` is the
    engine's :class:`~ampkit.fp8.mx.BlockRange` per rule for the current amax.

    >>> v = ScaleRuleExplorer(amax=7.0)
    >>> [(r.rounding, r.saturates) for r in v.rows][:3]
    [('ocp', True), ('te', False), ('floor', True)]
    """

    _front = "fp4rules"
    index = traitlets.Int(0).tag(sync=True)
    amaxes: traitlets.List[str] = traitlets.List().tag(sync=True)
    states: traitlets.List[list] = traitlets.List().tag(sync=True)
    grid: traitlets.List[float] = traitlets.List().tag(sync=True)
    labels = traitlets.Dict().tag(sync=True)

    def __init__(self, amax: float = 7.0):
        if amax not in AMAXES:
            raise ValueError(tr("amax must be one of 0.25, 0.5, … 16 (steps of 0.25); got {value!r}", value=amax))
        self._rows = [rule_table([a]) for a in AMAXES]
        super().__init__(index=AMAXES.index(amax), amaxes=[f"{a:g}" for a in AMAXES],
                         states=[[rule_state(r) for r in rows] for rows in self._rows],
                         grid=[v for v in E2M1_VALUES[1:8]], labels={r: tr(RULE_LABELS[r]) for r in SCALE_RULES})

    @traitlets.validate("index")
    def _valid(self, proposal: dict) -> int:
        value = proposal["value"]
        if not 0 <= value < len(AMAXES):
            raise traitlets.TraitError(tr("index must be 0 … {last}; got {value!r}", last=len(AMAXES) - 1,
                                          value=value))
        return value

    @property
    def amax(self) -> float:
        """The block amax the slider is at."""
        return AMAXES[self.index]

    @property
    def rows(self) -> list[BlockRange]:
        """The engine's block range per rule at the current amax."""
        return self._rows[self.index]

    @property
    def readout_html(self) -> str:
        return rule_rows_html(self.rows)

    def words(self) -> dict:
        return {"amax": tr("block amax"), "title": tr("One MXFP4 block under each scale rule"),
                "columns": [tr("scale rule"), tr("scale"), tr("largest kept"), tr("saturates from"),
                            tr("flushed below"), tr("the block's amax")],
                "saturates": tr("saturates"), "kept": tr("kept"), "head": tr("block amax: {amax}"),
                "legend": [["normal", tr("values the block can hold")], ["flushed", tr("flushed to zero")],
                           ["overflow", tr("saturated")]],
                "xlabel": tr("magnitude (log2 axis)")}

    def still(self) -> W.Widget:
        return W.HTML(self.readout_html)
