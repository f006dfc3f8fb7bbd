"""``ampkit._nbexport``: the static page of a notebook (no browser here; tests/browser/test_static_views_browser.py
opens the pages offline and moves the views).

- nothing in the page is fetched from the web: no ``http(s)://`` script, style sheet, image or module import;
- every kit view of the notebook has its placeholder (with the still picture) and its whole saved model inlined,
  and the runtime (``ampkit/widgets/static/page.js``) once;
- a notebook without kit views exports fine: no runtime, no widget state, every other widget by its still picture.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ampkit._nbexport import RUNTIME, export_html, kit_views_only, main

ROOT = Path(__file__).resolve().parents[1]
STATE = "application/vnd.jupyter.widget-state+json"
VIEW = "application/vnd.jupyter.widget-view+json"
bs4 = pytest.importorskip("bs4")   # nbconvert's own dependency


def _soup(html: str):
    return bs4.BeautifulSoup(html, "html.parser")


def _fetched_from_the_web(html: str) -> list[str]:
    """Every reference that a browser would fetch from outside the page: script/img/iframe src, link href, ES
    imports inside scripts, url(...) in styles."""
    soup, found = _soup(html), []
    for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src")):
        found += [f"<{tag} {attr}={t[attr]}>" for t in soup.find_all(tag) if re.match(r"\s*(https?:)?//",
                                                                                        t.get(attr) or "")]
    for script in soup.find_all("script"):
        found += re.findall(r"""(?:import\s*\(|from)\s*["'](?:https?:)?//[^"']+""", script.string or "")
    for style in soup.find_all("style"):
        found += re.findall(r"url\(\s*[\"']?(?:https?:)?//[^)]+\)|@import\s+[\"'](?:https?:)?//[^\"']+",
                            style.string or "")
    return found


def _kit_models(nb: dict) -> dict:
    models = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
    return {m: model for m, model in models.items() if str(model["state"].get("_anywidget_id", "")).startswith(
        "ampkit.")}


@pytest.fixture(scope="module")
def page_00() -> str:
    return export_html(ROOT / "notebooks" / "00_start_here.ipynb")


def test_the_page_fetches_nothing_from_the_web(page_00):
    assert not _fetched_from_the_web(page_00)
    # what nbconvert's lab page would load from cdnjs and unpkg is gone (require.js, MathJax, mermaid, html-manager)
    for name in ("require.min.js", "mathjax", "mermaid.esm", "html-manager", "embed-amd.js"):
        assert name not in page_00.lower(), name


def test_the_checker_sees_what_a_default_export_fetches():
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_filename(str(ROOT / "notebooks" / "00_start_here.ipynb"))
    found = " ".join(_fetched_from_the_web(body))
    assert "require.min.js" in found and "mathjax" in found and "mermaid" in found


@pytest.mark.parametrize("path", ["00_start_here", "zh_CN/07_transformers_in_16_bits"])
def test_every_view_is_inlined_with_its_still_picture(path):
    nb_path = ROOT / "notebooks" / f"{path}.ipynb"
    nb = json.loads(nb_path.read_text())
    html = export_html(nb_path)
    soup = _soup(html)
    models = _kit_models(nb)
    assert models
    saved = json.loads(soup.find("script", type=STATE).string)["state"]
    for m, model in models.items():
        assert saved[m] == model                                # the whole model: module, css, look, words, data
    places = soup.select(".ampkit-static-view[data-model-id]")
    assert sorted(p["data-model-id"] for p in places) == sorted(models)
    assert all(p.select_one("img.ampkit-static-still[src^='data:image/png;base64,']") for p in places)
    modules = [s for s in soup.find_all("script", type="module") if "renderViews" in (s.string or "")]
    assert len(modules) == 1 and RUNTIME.read_text() in modules[0].string
    assert soup.html["lang"] == ("zh" if path.startswith("zh_CN") else "en")
    assert not _fetched_from_the_web(html)


@pytest.mark.parametrize("strip", [False, True], ids=["08", "00-without-state"])
def test_a_notebook_without_kit_views_exports_fine(strip, tmp_path):
    """Notebook 08 (no widget), and 00 with its saved state removed (as an older kit saved it: the view's output
    has a widget reference and its still picture, no model): no runtime, no state, the picture shown."""
    nb_path = ROOT / "notebooks" / ("00_start_here.ipynb" if strip else "08_transformers_compiled_and_sharded.ipynb")
    nb = json.loads(nb_path.read_text())
    if strip:
        del nb["metadata"]["widgets"]
        nb_path = tmp_path / "00_start_here.ipynb"
        nb_path.write_text(json.dumps(nb))
    html = export_html(nb_path)
    soup = _soup(html)
    assert not soup.select(".ampkit-static-view") and not soup.find("script", type=STATE)
    assert "renderViews" not in html and not _fetched_from_the_web(html)
    widget_outputs = sum(VIEW in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    pngs = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    assert len(soup.select("img[src^='data:image/png;base64,']")) == pngs >= widget_outputs == int(strip)


def test_other_widgets_state_is_left_out():
    """A notebook from elsewhere with another widget's state: the kit's view keeps its model, the other widget is
    shown by its picture (its model is not saved into the page)."""
    nb = {"metadata": {"widgets": {STATE: {"version_major": 2, "version_minor": 0, "state": {
        "v": {"model_module": "anywidget", "model_name": "AnyModel",
              "state": {"_anywidget_id": "ampkit.widgets.start.RoundingSlider", "_esm": "export default {}"}},
        "s": {"model_module": "@jupyter-widgets/controls", "model_name": "IntSliderModel", "state": {}}}}}},
        "cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {VIEW: {"model_id": m}}}]}
                  for m in ("v", "s")]}
    kept = kit_views_only(nb, "demo")
    models = kept["metadata"]["widgets"][STATE]["state"]
    assert [m["model_name"] for m in models.values()] == ["AnyModel"]
    assert nb["metadata"]["widgets"][STATE]["state"]["s"]            # the notebook itself is not changed


def test_the_command_line_writes_the_page(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main([str(ROOT / "notebooks" / "00_start_here.ipynb"), "-o", str(out)]) == 0
    assert "renderViews(document)" in out.read_text()
    assert re.search(r"-> .*page\.html: \d+ KB in [\d.]+ s", capsys.readouterr().out)


def test_a_site_can_share_one_runtime():
    """With ``runtime_url`` (a book's pages, one copy of page.js beside them) the page imports it instead."""
    html = export_html(ROOT / "notebooks" / "00_start_here.ipynb", runtime_url="../_static/page.js")
    assert 'import { renderViews } from "../_static/page.js";' in html
    assert RUNTIME.read_text()[:200] not in html and not _fetched_from_the_web(html)
