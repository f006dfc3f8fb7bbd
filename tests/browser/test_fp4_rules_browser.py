"""Notebook 10's scale-rule explorer (ScaleRuleExplorer, ampkit/widgets/js/fp4rules.js) in a real JupyterLab: the
amax slider is moved with the keyboard, and for each amax reached every rule's row (its scale's exponent, whether
the block saturates, where its flushed and saturated zones end) and the readout equal the engine's block_range
computed here. The view is shown in a notebook of its own, written into the server's folder by this test."""
import json
import re

import pytest

pytestmark = pytest.mark.browser

VIEW = ".jp-OutputArea .ampkit-fp4-rules"
NOTEBOOK = "fp4_rules_view.ipynb"
RIGHT, WIDTH, LO, HI = 14, 700, -7, 6        # fp4rules.js's axis (its left end: the plot's data-left)


def _x(v: float, left: float) -> float:
    import math

    t = (min(max(math.log2(v), LO), HI) - LO) / (HI - LO)
    return left + t * (WIDTH - left - RIGHT)


def _write_notebook(root) -> None:
    cell = {"cell_type": "code", "execution_count": None, "id": "view", "metadata": {}, "outputs": [],
            "source": "from ampkit.widgets import ScaleRuleExplorer\nScaleRuleExplorer(amax=6.0)"}
    nb = {"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                       "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    (root / NOTEBOOK).write_text(json.dumps(nb))


def _shown(page) -> dict:
    return page.evaluate("""(sel) => {
        const v = document.querySelector(sel);
        const rows = [...v.querySelectorAll('g.ampkit-fp4-row')].map(g => ({
            k: Number(g.dataset.k), saturates: g.dataset.saturates === 'true',
            flushEnd: Number(g.querySelector('.ampkit-fp4-flushed').getAttribute('width')),
            satStart: Number(g.querySelector('.ampkit-fp4-saturated').getAttribute('x'))}));
        const cells = [...v.querySelectorAll('.ampkit-fp4-rules-readout tr')].slice(1)
            .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent.trim()));
        const plot = v.querySelector('svg.ampkit-fp4-rules-plot');
        return {amax: plot.dataset.amax, left: Number(plot.dataset.left), rows, cells};
    }""", VIEW)


def _check(page, amax: float) -> None:
    """What the page draws and reads out at ``amax`` equals the engine's block range per rule (the verdict in the
    kit's current language)."""
    from ampkit.fp8 import SCALE_RULES, block_range
    from ampkit.i18n import tr

    shown = _shown(page)
    assert float(shown["amax"]) == amax
    assert len(shown["rows"]) == len(SCALE_RULES) == len(shown["cells"])
    for row, cells, rule in zip(shown["rows"], shown["cells"], SCALE_RULES):
        r = block_range(amax, "e2m1", rule)
        assert (row["k"], row["saturates"]) == (r.exponent, r.saturates), (amax, rule)
        assert row["flushEnd"] == pytest.approx(_x(r.flush_below, shown["left"]) - shown["left"], abs=1e-6)
        assert row["satStart"] == pytest.approx(_x(r.saturates_from, shown["left"]), abs=1e-6)
        assert cells[1:5] == [f"2^{r.exponent}", f"{r.largest:g}", f"{r.saturates_from:g}", f"{r.flush_below:g}"]
        assert cells[5] == tr("saturates" if r.saturates else "kept"), (amax, rule, cells)


def test_amax_slider_moves_every_rule_as_the_engine_computes(lab):
    _write_notebook(lab.server.root)
    page = lab.open_and_run(NOTEBOOK)
    page.wait_for_selector(f"{VIEW} svg", state="attached")
    _check(page, 6.0)
    assert _shown(page)["left"] == 130                   # the English rules' names fit the narrowest margin
    assert re.search(r"block amax: 6\b", lab.text(page, ".ampkit-fp4-rules-readout"))
    lab.screenshot(page, "10_fp4-rules-6", near=f"{VIEW} svg")
    lab.move_range(page, 0, presses=4)                   # 6 → 7: the floor rules saturate
    page.wait_for_function("(sel) => document.querySelector(sel).dataset.amax === '7'",
                           arg=f"{VIEW} svg.ampkit-fp4-rules-plot")
    _check(page, 7.0)
    lab.screenshot(page, "10_fp4-rules-7", near=f"{VIEW} svg")
    lab.move_range(page, 0, key="End")
    page.wait_for_function("(sel) => document.querySelector(sel).dataset.amax === '16'",
                           arg=f"{VIEW} svg.ampkit-fp4-rules-plot")
    _check(page, 16.0)
    lab.move_range(page, 0, key="Home")
    page.wait_for_function("(sel) => document.querySelector(sel).dataset.amax === '0.25'",
                           arg=f"{VIEW} svg.ampkit-fp4-rules-plot")
    _check(page, 0.25)
    lab.assert_clean(page)
