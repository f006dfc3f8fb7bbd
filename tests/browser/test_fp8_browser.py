"""Notebook 06 in a real JupyterLab: move the amax-history explorer's history slider, the saturation readout follows
(checked against the number computed here the way the widget computes it); every static figure is screenshotted."""
import re

import pytest
import torch

pytestmark = pytest.mark.browser

READOUT = ".ampkit-fp8-readout"


def saturating_steps(text: str) -> int:
    m = re.search(r"saturated at (\d+) of (\d+) steps", text)
    assert m, text
    return int(m.group(1))


def expected_steps(history_len: int) -> int:
    """What the readout must say for the activation, algorithm "max", margin 0, computed like the widget does."""
    from ampkit.lessons.fp8_scaling import record_amax_run
    from ampkit.widgets.fp8 import explorer_state

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the notebook does
    try:
        rec = record_amax_run()
    finally:
        torch.set_num_threads(threads)
    return explorer_state(rec, "activation", history_len, "max", 0).saturating_steps


def test_history_slider_moves_the_saturation_readout(lab):
    page = lab.open_and_run("06_fp8_scaling.ipynb")
    start = lab.text(page, READOUT)
    assert "history 16" in start and "activation in e4m3" in start
    assert saturating_steps(start) == expected_steps(16)
    img = page.locator(".ampkit-fp8-plot img, img.ampkit-fp8-plot").first
    src0 = img.get_attribute("src")
    assert page.evaluate("(e) => [e.naturalWidth, e.getAttribute('width')]", img.element_handle()) == [750, "750"]
    img.scroll_into_view_if_needed()
    lab.screenshot(page, "06_fp8_scaling-explorer-before")

    lab.move_slider(page, 0, "ArrowLeft", presses=15)             # history 16 -> 1
    after = lab.wait_for_text(page, READOUT, "history 1,")
    assert saturating_steps(after) == expected_steps(1) != saturating_steps(start)
    assert img.get_attribute("src") != src0
    img.scroll_into_view_if_needed()
    lab.screenshot(page, "06_fp8_scaling-explorer-after")

    lab.check_figures(page, "06_fp8_scaling", at_least=3)
    lab.assert_clean(page)


# the per-tensor vs per-block explorer (drawn in the browser): tests/browser/test_fp8_blocks_browser.py
