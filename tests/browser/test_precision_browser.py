"""Notebook 02 in a real JupyterLab: Run All, move the O-level slider O0 -> O2, the dtype table and figure follow."""
import pytest

pytestmark = pytest.mark.browser

TABLE = ".ampkit-precision-table"
SUMMARY = ".ampkit-precision-summary"
FIGURE = "img.ampkit-precision-figure"
CAPTION = ".ampkit-precision-caption"


def test_olevel_slider_to_o2_changes_table_and_figure(lab):
    page = lab.open_and_run("02_autocast_and_levels.ipynb", timeout_ms=180_000)
    sliders = lab.sliders(page)
    assert sliders.count() == 1  # the picker's O-level slider is the notebook's only slider
    before = lab.text(page, TABLE)
    assert "O0 with" in before and "LayerNorm" in before
    assert "bf16" not in before.split("dtypes per layer", 1)[1]  # O0: every layer fp32
    src_before = page.locator(FIGURE).first.get_attribute("src")
    assert "figure: O0" in lab.text(page, CAPTION)
    lab.screenshot(page, "02_autocast_and_levels-O0")

    lab.move_slider(page, 0, "ArrowRight", presses=2)  # O0 -> O1 -> O2
    after = lab.wait_for_change(page, TABLE, before, timeout_ms=60_000)
    if "O1 with" in after:  # the first press was rendered on its own: wait for the second
        after = lab.wait_for_change(page, TABLE, after, timeout_ms=60_000)
    assert "O2 with" in after
    assert "kept fp32" in after  # O2 keeps the LayerNorms in fp32 ...
    assert "bf16" in after       # ... and the Linear layers in bf16
    assert "O2" in lab.text(page, SUMMARY)
    # the figure is redrawn after the table: wait for its caption to name O2, then compare the image itself
    page.wait_for_function("(sel) => document.querySelector(sel).innerText.includes('figure: O2 bf16')",
                           arg=CAPTION, timeout=30_000)
    lab.wait_idle(page)
    assert page.locator(FIGURE).first.get_attribute("src") != src_before
    assert page.locator(".widget-readout").first.inner_text().strip() == "O2"
    lab.screenshot(page, "02_autocast_and_levels-O2")
    lab.assert_clean(page)
