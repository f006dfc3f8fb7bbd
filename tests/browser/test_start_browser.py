"""Notebook 00 in a real JupyterLab: the rounding slider is drawn in the browser (ampkit/widgets/js/rounding.js).

- Run All: the view renders; a key press moves the slider and the table follows; typing 70000 overflows fp16; the
  kernel's copy of the value follows the page (the engine's rows for it equal what the page shows).
- The saved notebook, opened and not run: the view comes back from the saved widget state and moves with no kernel
  behind it, showing for each key press what ampkit.formats.compare_formats computes for that value.
"""
import json

import pytest

from ampkit.formats import compare_formats

pytestmark = pytest.mark.browser

TABLE = ".ampkit-rounding"


def _shown_rows(lab, page) -> list[list[str]]:
    return json.loads(page.evaluate(
        """() => JSON.stringify([...document.querySelectorAll('.jp-OutputArea .ampkit-rounding-table tr')]
                 .slice(1).map(tr => [...tr.children].map(td => td.textContent.trim())))"""))


def _expected(value: float) -> list[list[str]]:
    return [[r.fmt, repr(r.stored), "—" if r.rel_error != r.rel_error else
             ("inf" if r.rel_error == float("inf") else f"{r.rel_error:.2e}"), r.verdict]
            for r in compare_formats(value)]


def test_start_here_slider_moves_and_table_follows(lab):
    page = lab.open_and_run("00_start_here.ipynb")
    assert lab.front_ranges(page).count() >= 1
    before = lab.text(page, TABLE)
    assert "float16" in before and "0.0999755859375" in before  # the slider starts at 0.1
    lab.screenshot(page, "00_start_here-before", near=TABLE)

    # keyboard: each press is one step of the log slider (x 10**0.05); 4 presses: 0.1 -> 10**-0.8 = 0.15848...
    lab.move_range(page, 0, "ArrowRight", presses=4)
    after_keys = lab.wait_for_text(page, TABLE, "0.1584893")
    assert "0.0999755859375" not in after_keys and "0.158447265625" in after_keys  # fp16's nearest value

    # typing into the readout: 70000 overflows fp16 but not bf16/fp32
    readout = page.locator(".jp-OutputArea .ampkit-front .ampkit-readout").first
    readout.fill("70000")
    readout.press("Enter")
    typed = lab.wait_for_change(page, TABLE, after_keys)
    assert "overflow to inf" in typed
    assert _shown_rows(lab, page) == _expected(70000.0)
    lab.screenshot(page, "00_start_here-after", near=TABLE)
    lab.assert_clean(page)


def test_start_here_moves_without_a_kernel(lab):
    """The saved notebook's view, with nothing run: every key press redraws from the page alone."""
    page = lab.open_saved("00_start_here.ipynb")
    assert "0.0999755859375" in lab.text(page, TABLE)
    shown = lab.text(page, TABLE)
    for presses in (3, 40, 80):
        lab.move_range(page, 0, "ArrowRight", presses=presses)
        shown = lab.wait_for_change(page, TABLE, shown)
        value = float(page.locator(".jp-OutputArea .ampkit-typed code").first.text_content())
        assert _shown_rows(lab, page) == _expected(value), value
    assert "overflow to inf" in shown                        # 0.1 * 10**(123 * 0.05) is past fp16's max
    lab.screenshot(page, "00_start_here-no-kernel", near=TABLE)
