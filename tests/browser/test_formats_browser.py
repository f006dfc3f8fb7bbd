"""Notebook 01 in a real JupyterLab: type values into the float explorer, click a bit, check the bits shown."""
import pytest

pytestmark = pytest.mark.browser

FP16_BITS = ".ampkit-bits-float16 .ampkit-bitstring"
BF16_BITS = ".ampkit-bits-bfloat16 .ampkit-bitstring"
TEXT_INPUT = ".ampkit-explorer-text input"
MESSAGE = ".ampkit-explorer-message"
FP16_ROW = ".ampkit-explorer-summary .ampkit-row-float16"


def shown(page, selector: str) -> str:
    """Text of the first match, scrolled into view (JupyterLab does not render text of off-screen cells)."""
    loc = page.locator(selector).first
    loc.scroll_into_view_if_needed()
    return (loc.text_content() or "").strip()


def wait_for_text(page, selector: str, old: str, timeout_ms: int = 30_000) -> str:
    """Wait until the first match's textContent differs from ``old``; return it."""
    page.wait_for_function(
        "([sel, old]) => { const e = document.querySelector(sel); return e && e.textContent.trim() !== old; }",
        arg=[selector, old], timeout=timeout_ms)
    return shown(page, selector)


def type_value(page, text: str) -> None:
    box = page.locator(TEXT_INPUT).first
    box.scroll_into_view_if_needed()
    box.fill(text)
    box.press("Enter")


def test_explorer_shows_the_bits_of_a_typed_value(lab):
    page = lab.open_and_run("01_fp16_range.ipynb")
    start = shown(page, FP16_BITS)
    assert start == "0 01011 1001100110"  # 0.1 in fp16
    assert shown(page, BF16_BITS) == "0 01111011 1001101"
    lab.screenshot(page, "01_fp16_range-explorer-0.1")

    # fp16's largest number: exponent 11110, mantissa all ones
    row = shown(page, FP16_ROW)
    type_value(page, "65504")
    bits = wait_for_text(page, FP16_BITS, start)
    row = wait_for_text(page, FP16_ROW, row)
    assert bits == "0 11110 1111111111"
    assert "65504.0" in row and "exact" in row

    # one more ulp's worth overflows: inf is exponent all ones, mantissa zero
    type_value(page, "70000")
    bits = wait_for_text(page, FP16_BITS, bits)
    row = wait_for_text(page, FP16_ROW, row)
    assert bits == "0 11111 0000000000"
    assert "overflow to inf" in row

    # clicking fp16's sign bit flips it: -inf
    page.locator(".ampkit-bits-float16 .ampkit-bit").first.click()
    bits = wait_for_text(page, FP16_BITS, bits)
    assert bits == "1 11111 0000000000"
    assert page.locator(TEXT_INPUT).first.input_value() == "-inf"

    # text that is not a number: a message in the widget, no traceback, bits unchanged
    before_msg = shown(page, MESSAGE)
    type_value(page, "abc")
    msg = wait_for_text(page, MESSAGE, before_msg)
    assert "not a number" in msg
    assert shown(page, FP16_BITS) == bits
    lab.screenshot(page, "01_fp16_range-explorer-after")
    lab.assert_clean(page)


def test_loss_scale_slider_moves_the_gradient_histogram(lab):
    page = lab.open_and_run("01_fp16_range.ipynb")
    maps = page.locator(".ampkit-range-map")
    assert maps.count() == 2  # the explorer's range map and the gradient map
    grad_img = maps.nth(1)
    grad_img.scroll_into_view_if_needed()
    before = grad_img.get_attribute("src")
    # sliders in DOM order: the explorer's |value| slider, then the loss-scale slider
    lab.move_slider(page, 1, "ArrowRight", presses=8)
    page.wait_for_function(
        "([i, old]) => document.querySelectorAll('.ampkit-range-map')[i].getAttribute('src') !== old",
        arg=[1, before], timeout=30_000)
    readout = lab.sliders(page).nth(1).locator(".widget-readout").first.inner_text()
    assert readout.strip() == "256"
    # the kernel has processed all eight presses when its summary line says 2^8
    page.wait_for_function(
        "() => (document.querySelector('.ampkit-scale-summary') || {}).textContent?.includes('= 2^8 ')",
        timeout=30_000)
    summary = shown(page, ".ampkit-scale-summary")
    assert summary.startswith("scale 256 = 2^8 · fp16: flushed")
    lab.screenshot(page, "01_fp16_range-gradient-map")
    lab.assert_clean(page)
