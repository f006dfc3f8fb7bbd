"""The views drawn in the browser (ampkit/widgets/front.py, ampkit/widgets/js/): what they are sent, and what the
stored notebooks carry of them.

- one look: the colours a front end reads are the Python figures' own (ampkit.widgets.style), not a copy;
- each view's module is kit.js followed by its own file, and a bad name is a clear error naming the views;
- every saved view in a committed notebook (both editions) carries today's module and look, so a page rendered from
  the saved notebook draws with the code the tests checked (re-execute the notebook after changing a front end);
  its words are in the notebook's language, and it stays under the size limit (ampkit._nbtools.MAX_VIEW_BYTES).
"""
from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from ampkit._nbtools import MAX_VIEW_BYTES, view_state_problems
from ampkit.widgets import style
from ampkit.widgets.front import JS_DIR, esm, format_limits, look

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb"))
STATE = "application/vnd.jupyter.widget-state+json"


def _saved_views(path: Path) -> list[dict]:
    models = json.loads(path.read_text()).get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
    return [m["state"] for m in models.values() if m.get("model_module") == "anywidget"]


def test_one_look_for_figures_and_front_ends():
    colours = look()["colours"]
    assert colours["band"] == style.BAND_COLOURS and colours["dtype"] == style.DTYPE_COLOURS
    assert colours["status"] == style.STATUS_COLOURS
    assert set(colours["verdict"].values()) <= set(style.STATUS_COLOURS.values()) | {"#8250df"}


def test_each_module_is_the_kit_and_its_own_file():
    for path in JS_DIR.glob("*.js"):
        if path.stem != "kit":
            module = esm(path.stem)
            assert module.startswith((JS_DIR / "kit.js").read_text()) and module.endswith(path.read_text())
            assert module.count("export default") == 1
    with pytest.raises(ValueError, match="the views' modules: (.*, )?rounding"):
        esm("no-such-view")


def test_format_limits_are_the_engines():
    from ampkit.formats import info

    for fmt in ("fp32", "bf16", "fp16"):
        lim, fi = format_limits(fmt), info(fmt)
        assert (lim["max"], lim["emin"], lim["mantissa_bits"]) == (fi.max, fi.emin, fi.mantissa_bits)
    assert not format_limits("fp32")["via_float32"] and format_limits("bf16")["via_float32"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_saved_views_carry_todays_front_end(path):
    assert not view_state_problems(json.loads(path.read_text()))
    for state in _saved_views(path):
        module, name = state["_anywidget_id"].rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        assert state["_esm"] == esm(cls._front), f"{name}: re-execute {path.name} (its front end changed)"
        assert state["look"] == look()
        words = json.dumps(state["text"], ensure_ascii=False)
        chinese = any("\u4e00" <= ch <= "\u9fff" for ch in words)
        assert chinese == (path.parent.name == "zh_CN"), f"{name} in {path.name}: words in the wrong language"
        assert len(json.dumps(state)) <= MAX_VIEW_BYTES


def test_the_hygiene_check_refuses_other_widgets_state():
    nb = {"metadata": {"widgets": {STATE: {"state": {
        "a": {"model_module": "@jupyter-widgets/controls", "model_name": "IntSliderModel", "state": {}}}}}}}
    assert view_state_problems(nb) == ["stored widget state of IntSliderModel a: only the kit's views are saved"]
    big = {"model_module": "anywidget", "model_name": "AnyModel",
           "state": {"_anywidget_id": "ampkit.widgets.start.RoundingSlider", "x": "0" * MAX_VIEW_BYTES}}
    assert "carries" in view_state_problems({"metadata": {"widgets": {STATE: {"state": {"v": big}}}}})[0]



_KIT_NAMES = set(re.findall(r"^export (?:function|const|let|class) (\w+)", (JS_DIR / "kit.js").read_text(), re.M))
_DECLARED = re.compile(r"\b(?:const|let|var|function|class)\s+(\w+)|\(\s*(\w+)\s*(?:,[^()]*)?\)\s*=>")


def _redeclared(source: str) -> set[str]:
    """The names kit.js exports that ``source`` declares again (a variable, function, class or arrow parameter)."""
    return {a or b for a, b in _DECLARED.findall(source)} & _KIT_NAMES


def test_no_view_module_redeclares_a_kit_name():
    """kit.js and a view's file are one module: a view that declares a name kit.js exports (``const svg = svg(…)``)
    either fails to load or throws in render (the temporal dead zone), and the view never draws."""
    assert {"svg", "h", "roundTo", "fillMarkup"} <= _KIT_NAMES
    for path in sorted(JS_DIR.glob("*.js")):
        if path.stem != "kit":
            assert not _redeclared(path.read_text()), f"{path.name} declares {sorted(_redeclared(path.read_text()))}"


def test_the_redeclaration_check_catches_a_shadowed_kit_name():
    assert _redeclared('function render() { const svg = svg("svg"); }') == {"svg"}
    assert _redeclared("rows.map((h, i) => h + i)") == {"h"}
    assert _redeclared('const plot = svg("svg"); function draw(value) {}') == set()
