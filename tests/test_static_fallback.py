"""A notebook read where no JavaScript runs (GitHub, an HTML export without the widget state) shows a picture for
every view's cell.

The committed notebooks carry the kit views' state, which a page that runs the views' JavaScript draws and moves
(tests/test_front_views.py, the browser tests); a renderer that runs none has nothing to draw the view
(``application/vnd.jupyter.widget-view+json``) with, so every kit view publishes a still PNG beside it
(``ampkit.widgets.snapshot``), built from the view's ``still()``.
"""
import base64
import io
import json
import re
from pathlib import Path

import ipywidgets as W
import nbformat
import pytest
from nbconvert import HTMLExporter
from PIL import Image

from ampkit.widgets import snapshot

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"


def _widget_cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if c["cell_type"] == "code"
            and any(WIDGET in o.get("data", {}) for o in c.get("outputs", []))]


def _png_size(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def _text(data: dict) -> str:
    text = data.get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


_TQDM_BAR = re.compile(r"\d+/\d+ \[")   # "O2 fp16:   0%|          | 0/30 [00:00<?, ?it/s]"


def _is_kit_view(cell: dict) -> bool:
    # a tqdm progress bar (train(..., progress=True)) is tqdm's widget, not a kit view; its cell shows the live
    # loss plot's PNG instead (checked by the HTML test below)
    return any(not _TQDM_BAR.search(_text(o["data"])) for o in cell["outputs"] if WIDGET in o.get("data", {}))


def test_every_notebook_with_a_view_is_checked():
    with_views = [p.name for p in NOTEBOOKS if any(_is_kit_view(c) for c in _widget_cells(p))]
    assert len(with_views) >= 7, with_views


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_widget_output_carries_a_still_png(path):
    for cell in filter(_is_kit_view, _widget_cells(path)):
        outputs = [o for o in cell["outputs"] if WIDGET in o.get("data", {}) and not _TQDM_BAR.search(_text(o["data"]))]
        for o in outputs:
            assert "image/png" in o["data"], f"{path.name}: a widget without a still picture:\n{cell['source']}"
            w, h = _png_size(o["data"]["image/png"])
            assert w >= 400 and h >= 40, (path.name, w, h)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_html_export_without_widget_state_shows_an_image_for_every_widget_cell(path):
    nb = nbformat.read(path, as_version=4)
    # the committed notebooks carry only the browser-drawn views' state (tests/test_front_views.py); a renderer
    # that runs no JavaScript, or an export made without that state, must still show a picture
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter()
    for cell in nb.cells:
        if cell.cell_type != "code" or not any(WIDGET in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        single = nbformat.v4.new_notebook(cells=[cell], metadata=nb.metadata)
        html, _ = exporter.from_notebook_node(single)
        body = html[html.index("<body"):]
        assert "<img" in body and "data:image/png;base64," in body, f"{path.name}: no picture for\n{cell.source}"


def test_snapshot_lists_texts_images_and_tables_in_order():
    from ampkit.widgets.style import new_figure, png_bytes

    fig = new_figure(5, 2)
    fig.subplots().plot([0, 1], [1, 0])
    img = W.Image(value=png_bytes(fig), format="png", width=100)   # a still tree is never shown: pasted whole
    still = W.VBox([W.HBox([W.HTML("format: bf16"), W.Label("scale: 1024")]), img,
                    W.HTML("<table><tr><th>a</th><th>bb</th></tr><tr><td>1</td><td>2</td></tr></table>")])
    items = snapshot.snapshot_items(still)
    assert [k for k, _ in items] == ["text", "text", "image", "text", "text"]
    assert items[0][1] == "format: bf16" and items[1][1] == "scale: 1024"
    assert items[2][1] == img.value
    assert [v for _, v in items[3:]] == ["a  bb", "1  2"]
    before = img.value
    png = snapshot.snapshot_png(still)
    picture = Image.open(io.BytesIO(png))
    assert picture.width >= Image.open(io.BytesIO(img.value)).width   # the figure is pasted whole
    assert img.value == before    # nothing in the tree changed


def test_a_control_in_a_still_tree_is_refused_by_name():
    with pytest.raises(TypeError, match="IntSlider"):
        snapshot.snapshot_items(W.VBox([W.HTML("n"), W.IntSlider(1, description="n")]))


def test_registered_still_replaces_or_hides_a_part():
    a, b = W.HTML("overlay text"), W.Image(value=b"\x89PNG-not-read", format="png")
    snapshot.register_still(a, lambda: None)
    snapshot.register_still(b, lambda: b"replacement")
    assert snapshot.snapshot_items(W.VBox([a, b])) == [("image", b"replacement")]


def test_html_text_reads_tables_entities_and_superscripts():
    assert snapshot.html_text("x &lt; 2<sup>-24</sup><br>next") == ["x < 2^-24", "next"]
    assert snapshot.html_text("<style>.a{}</style><p>kept</p>") == ["kept"]


def test_every_view_displays_its_widget_with_a_still_png(monkeypatch):
    from ampkit.widgets.start import RoundingSlider

    published = []
    monkeypatch.setattr(snapshot, "ipy_display", lambda obj, raw=False: published.append((obj, raw)))
    view = RoundingSlider(value=1e-8)
    view._ipython_display_()
    (bundle, raw), = published
    assert raw and bundle[WIDGET]["model_id"] == view.widget.model_id
    assert _png_size(bundle["image/png"])[0] >= 400
