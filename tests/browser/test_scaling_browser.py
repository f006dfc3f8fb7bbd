"""Notebook 03 in a real JupyterLab: move the visual loss scaler's slider, the % readout follows; same for the replay.
The widget images are shown at the figure's own pixel width (100 dpi); every static figure is screenshotted."""
import re

import pytest
import torch

pytestmark = pytest.mark.browser

READOUT = ".ampkit-scale-readout"
REPLAY = ".ampkit-replay-readout"
PLOT = ".ampkit-scale-plot"
PRESETS = ".ampkit-preset-readout"


def shown(page, selector: str) -> str:
    """Text of the first match, scrolled into view (JupyterLab does not render text of off-screen cells).

    An HTML widget replaces its content on every update, so the element can go away mid-scroll: retry."""
    for attempt in range(5):
        loc = page.locator(selector).first
        try:
            loc.scroll_into_view_if_needed(timeout=5_000)
            return (loc.text_content(timeout=5_000) or "").strip()
        except Exception:
            if attempt == 4:
                raise
            page.wait_for_timeout(200)
    raise AssertionError("unreachable")


def wait_for_text(page, selector: str, old: str, timeout_ms: int = 30_000) -> str:
    page.wait_for_function(
        "([sel, old]) => { const e = document.querySelector(sel); return e && e.textContent.trim() !== old; }",
        arg=[selector, old], timeout=timeout_ms)
    return shown(page, selector)


def flushed(text: str) -> str:
    m = re.search(r"flushed to zero ([<\d.\s]+%)", text)
    assert m, text
    return m.group(1).strip()


def expected_flushed(k: int) -> str:
    """What the readout must say at scale 2**k, computed here the way the notebook computes it."""
    from ampkit.lessons.loss_scaling import underflow_task
    from ampkit.scaling import capture_gradients, scale_report
    from ampkit.widgets.scaling import _pct

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the notebook does
    try:
        task = underflow_task()
        grads = capture_gradients(task.model(), task.X[:128], task.y[:128], loss_weight=task.loss_weight)
    finally:
        torch.set_num_threads(threads)
    return _pct(scale_report(grads, k, "fp16").flushed)


def test_scale_slider_moves_the_histogram_and_the_readout(lab):
    page = lab.open_and_run("03_loss_scaling.ipynb")
    start = shown(page, READOUT)
    assert "in float16" in start
    assert flushed(start) == expected_flushed(0)               # 98 % of the gradients flush at scale 1
    img = page.locator(f"{PLOT} img, img{PLOT}").first
    src0 = img.get_attribute("src")
    assert page.evaluate("(e) => [e.naturalWidth, e.getAttribute('width')]", img.element_handle()) == [700, "700"]
    img.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-scaler-before")

    lab.move_slider(page, 0, "ArrowRight", presses=4)          # scale 2**4
    after = lab.wait_for_text(page, READOUT, "scale 24 in")    # the final state (2<sup>4</sup>), not the first press
    assert flushed(after) == expected_flushed(4) != flushed(start)
    assert img.get_attribute("src") != src0                    # the histogram moved

    lab.set_readout(page, 0, "16")                             # inside the safe window
    typed = lab.wait_for_text(page, READOUT, "scale 216 in")
    assert flushed(typed) == expected_flushed(16)
    assert "overflow 0 %" in typed
    img.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-scaler-after")

    # the replay: a growth interval of 1 climbs much faster and overflows more often
    replay_before = shown(page, REPLAY)
    lab.set_readout(page, 2, "1")                              # sliders: scale, log2(init), growth every, ...
    replay_after = wait_for_text(page, REPLAY, replay_before)
    skipped = int(re.search(r"skipped steps \(overflow\): (\d+)", replay_after).group(1))
    before = int(re.search(r"skipped steps \(overflow\): (\d+)", replay_before).group(1))
    assert skipped > before
    replay_img = page.locator(".ampkit-replay-plot img, img.ampkit-replay-plot").first
    replay_img.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-replay-after")

    # the preset control: pick two frameworks' rules, the readout lists them and the plot changes
    presets_before = shown(page, PRESETS)
    assert "no framework preset selected" in presets_before
    src_before = replay_img.get_attribute("src")
    select = page.locator(".ampkit-preset-select select").first
    select.scroll_into_view_if_needed()
    select.select_option(value=["torch: PyTorch torch.amp.GradScaler",
                                "deepspeed: DeepSpeed fp16",
                                "mindspore-fixed-apply: MindSpore FixedLossScaleManager(drop_overflow_update=False)"])
    picked = wait_for_text(page, PRESETS, presets_before)
    for name in ("torch", "deepspeed", "mindspore-fixed-apply"):
        assert name in picked, picked
    assert "overflow APPLIED 0" in picked                        # at its own 128, the fixed scale never overflows
    page.wait_for_function(                                     # the trajectories are drawn (a new image)
        "([sel, old]) => { const e = document.querySelector(sel); return e && e.getAttribute('src') !== old; }",
        arg=[".ampkit-replay-plot img, img.ampkit-replay-plot", src_before], timeout=30_000)
    # every preset starts at log2(init) = 40: each step overflows; the fixed manager APPLIES all of them
    page.locator(".ampkit-preset-at-init input").first.check()
    lab.set_readout(page, 1, "40")
    high = lab.wait_for_text(page, PRESETS, "overflow APPLIED 150")
    steps = int(re.search(r" of (\d+)", shown(page, REPLAY)).group(1))
    assert steps == 150 and "torch" in high and "deepspeed" in high
    replay_img.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-replay-presets")

    # the notebook's own figures (static PNG outputs): each rendered, readable size, screenshotted to look at
    lab.check_figures(page, "03_loss_scaling", at_least=5)
    lab.assert_clean(page)
