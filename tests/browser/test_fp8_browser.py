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


BLOCKS = ".ampkit-fp8-blocks-readout"
BLOCK_FLUSHED = ".ampkit-fp8-row-block .ampkit-fp8-n-flushed"
TENSOR_FLUSHED = ".ampkit-fp8-row-tensor .ampkit-fp8-n-flushed"


def test_block_size_buttons_move_the_flush_readout(lab):
    """Click "8" then "per-tensor" in the per-tensor vs per-block explorer, then the "1×128 tiles" scheme: the
    per-block row's flushed count follows, equal to :mod:`ampkit.fp8.compare` computed here (e4m3, OCP floor rule for
    MX, power-of-two fp32 scales for the tiles, the default 128 × 256 tensor)."""
    from ampkit.fp8.compare import compare_blocks, compare_tiles, outlier_tensor

    x = outlier_tensor(128, 256)
    expect = {b: compare_blocks(x, "e4m3", b, "ocp") for b in (32, 8, "per-tensor")}
    tiles = compare_tiles(x, "e4m3", (1, 128), True)
    page = lab.open_and_run("06_fp8_scaling.ipynb")
    start = lab.text(page, BLOCKS)
    assert "e4m3, OCP floor scale rule" in start and "blocks of 32" in start
    assert int(lab.text(page, BLOCK_FLUSHED)) == expect[32][1].n_flushed
    assert int(lab.text(page, TENSOR_FLUSHED)) == expect[32][0].n_flushed
    img = page.locator(".ampkit-fp8-blocks-plot img, img.ampkit-fp8-blocks-plot").first
    src0 = img.get_attribute("src")
    assert page.evaluate("(e) => e.naturalWidth", img.element_handle()) == 750
    lab.screenshot(page, "06_fp8_scaling-blocks-32", near=".ampkit-fp8-blocks-plot")

    buttons = page.locator(".ampkit-fp8-block-size button")
    buttons.filter(has_text=re.compile(r"^\s*8\s*$")).first.click()
    after = lab.wait_for_text(page, BLOCKS, "blocks of 8")
    assert after != start
    assert int(lab.text(page, BLOCK_FLUSHED)) == expect[8][1].n_flushed != expect[32][1].n_flushed
    assert img.get_attribute("src") != src0
    lab.screenshot(page, "06_fp8_scaling-blocks-8", near=".ampkit-fp8-blocks-plot")

    buttons.filter(has_text="per-tensor").first.click()
    lab.wait_for_text(page, BLOCKS, "same scaling on both rows")
    assert int(lab.text(page, BLOCK_FLUSHED)) == expect["per-tensor"][0].n_flushed
    lab.screenshot(page, "06_fp8_scaling-blocks-per-tensor", near=BLOCKS)

    src1 = img.get_attribute("src")
    page.locator(".ampkit-fp8-scheme button").filter(has_text="1×128 tiles").first.click()
    lab.wait_for_text(page, BLOCKS, "1×128 tiles")
    assert "rounded down to a power of two" in lab.text(page, BLOCKS)
    assert int(lab.text(page, BLOCK_FLUSHED)) == tiles[1].n_flushed
    assert int(lab.text(page, TENSOR_FLUSHED)) == tiles[0].n_flushed
    assert page.locator(".ampkit-fp8-block-size button").first.is_disabled()   # MX's block sizes do not apply
    assert img.get_attribute("src") != src1
    lab.screenshot(page, "06_fp8_scaling-blocks-tiles-1x128", near=".ampkit-fp8-blocks-plot")
    lab.assert_clean(page)
