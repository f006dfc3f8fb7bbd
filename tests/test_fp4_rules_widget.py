"""ampkit.widgets.fp4_rules: the ScaleRuleExplorer's state (every amax, every rule) is the engine's block_range, and
what each rule says about saturation and flushing is what quantizing such a block does."""
import json

import pytest
import torch
import traitlets

from ampkit.fp8 import SCALE_RULES, block_range, mx_fake_quantize
from ampkit.widgets.fp4_rules import AMAXES, RULE_LABELS, ScaleRuleExplorer, rule_rows_html


@pytest.fixture(scope="module")
def view():
    return ScaleRuleExplorer()


def test_every_state_is_the_engines_block_range(view):
    assert len(view.states) == len(AMAXES) == len(view.amaxes) and view.amax == 7.0
    assert set(RULE_LABELS) == set(SCALE_RULES)
    for amax, text, rows in zip(AMAXES, view.amaxes, view.states):
        assert float(text) == amax
        for st, rule in zip(rows, SCALE_RULES):
            r = block_range(amax, "e2m1", rule)
            assert (st["rule"], st["k"], st["saturates"]) == (rule, r.exponent, r.saturates)
            assert (float(st["largest"]), float(st["sat"]), float(st["flush"])) == \
                (r.largest, r.saturates_from, r.flush_below)


def test_the_state_says_what_quantizing_the_block_does(view):
    for amax, rows in zip(AMAXES[::5], view.states[::5]):
        for st in rows:
            x = torch.zeros(1, 32)
            x[0, 0], x[0, 1] = amax, float(st["flush"]) * 0.99
            q = mx_fake_quantize(x, "e2m1", 32, st["rule"])
            assert q[0, 1] == 0                                             # below the line: flushed
            assert (float(q[0, 0]) < amax - 1e-9 and float(q[0, 0]) == float(st["largest"])) or not st["saturates"]
            assert float(q[0, 0]) <= float(st["largest"])


def test_slider_moves_rows_and_readout(view):
    v = ScaleRuleExplorer(amax=6.0)
    assert not any(r.saturates for r in v.rows)
    v.index = AMAXES.index(7.0)
    assert [r.rounding for r in v.rows if r.saturates] == ["ocp", "floor"]
    html = v.readout_html
    assert "block amax: 7" in html and html.count("<tr class=") == len(SCALE_RULES)
    assert "saturates" in rule_rows_html(v.rows) and "2^1" in html
    with pytest.raises(traitlets.TraitError, match="index must be 0"):
        v.index = len(AMAXES)
    with pytest.raises(ValueError, match="amax must be one of"):
        ScaleRuleExplorer(amax=7.1)


def test_state_is_small_and_serialisable(view):
    assert len(json.dumps(view.states)) < 40_000
    assert view.grid == [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert set(view.text) >= {"amax", "title", "columns", "legend", "head", "xlabel"}


def test_readout_in_chinese():
    from ampkit import i18n

    i18n.set_language("zh_CN")
    try:
        v = ScaleRuleExplorer(amax=7.0)
        assert "块的 amax：7" in v.readout_html and "饱和" in v.readout_html
        assert v.labels["floor"].startswith("torchao FLOOR（") and v.text["xlabel"] == "绝对值（log2 坐标轴）"
    finally:
        i18n.set_language(None)
