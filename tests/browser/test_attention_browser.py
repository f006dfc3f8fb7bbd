"""Notebook 07 in a real JupyterLab: move the attention widget's activation-scale slider with the keyboard until fp16
overflows, switch the scale to q with a click, move the head-size slider; the readout follows each move and says what
ampkit.lessons.attention_overflow computes here for that setting. Every figure is screenshotted."""
import re

import pytest

pytestmark = pytest.mark.browser

READOUT = ".ampkit-attn-readout"
NOTEBOOK = "07_transformers_in_16_bits.ipynb"


def fp16_text(act_scale: float, head_dim: int, where: str) -> str:
    """What the readout must say for fp16, computed the way the widget computes it."""
    from ampkit.lessons.transformers_in_16_bits.activations import attention_overflow

    r = attention_overflow(act_scale, head_dim, "fp16", where)
    largest = "inf" if r.overflowed else f"{r.matmul_max:.3g}"
    return f"fp16: largest matmul output {largest}, NaN rows {100 * r.nan_rows:.0f} %"


def test_attention_widget_follows_sliders_and_buttons(lab):
    page = lab.open_and_run(NOTEBOOK)
    start = lab.text(page, READOUT)
    assert "activation scale 8, head size 64" in start and fp16_text(8.0, 64, "logits") in start
    img = page.locator(".ampkit-attn-plot img, img.ampkit-attn-plot").first
    src0 = img.get_attribute("src")
    assert page.evaluate("(e) => e.naturalWidth", img.element_handle()) == 750
    lab.screenshot(page, "07_transformers-attention-start", near=".ampkit-attn-plot")

    lab.move_slider(page, 0, "PageUp", presses=1)              # a page: a tenth of the range up
    lab.wait_for_change(page, READOUT, start)
    # the readout's first line must name the new scale (not only differ from ``start`` in some other way)
    page.wait_for_function("(sel) => { const m = /activation scale ([\\d.e+]+),/.exec("
                           "document.querySelector(sel)?.textContent ?? ''); return m && m[1] !== '8'; }",
                           arg=READOUT, timeout=30_000)
    moved = lab.text(page, READOUT)
    shown = float(re.search(r"activation scale ([\d.e+]+)", moved).group(1))   # 3 significant digits
    # the slider moves 2**exponent in steps of 0.25 (FloatLogSlider, base 2): the value it holds is the grid point
    # that prints as ``shown`` (19.03 prints as 19; recomputing at 19.0 can round the readout's product differently)
    scale = min((2.0 ** (k / 4) for k in range(0, 37)), key=lambda v: abs(v - shown))
    assert f"{scale:.3g}" == f"{shown:.3g}"
    assert scale > 8.0 and fp16_text(scale, 64, "logits") in moved
    lab.set_readout(page, 0, "64")                              # type the value: fp16 overflows
    after = lab.wait_for_text(page, READOUT, "activation scale 64,")
    assert fp16_text(64.0, 64, "logits") in after and "largest matmul output inf" in after
    assert img.get_attribute("src") != src0
    lab.screenshot(page, "07_transformers-attention-overflow", near=".ampkit-attn-plot")

    page.locator(".ampkit-attn-where button").filter(has_text="on q").first.click()
    on_q = lab.wait_for_text(page, READOUT, "1/√d on q")
    assert fp16_text(64.0, 64, "q") in on_q and "NaN rows 0 %" in on_q.split("fp16:")[1]
    lab.move_slider(page, 1, "End")                             # head size 256
    big = lab.wait_for_text(page, READOUT, "head size 256")
    assert fp16_text(64.0, 256, "q") in big
    lab.screenshot(page, "07_transformers-attention-q-256", near=".ampkit-attn-plot")

    lab.check_figures(page, "07_transformers", at_least=2)
    lab.assert_clean(page)
