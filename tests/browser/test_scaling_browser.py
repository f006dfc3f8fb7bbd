"""Notebook 03 in a real JupyterLab: move the visual loss scaler's slider, the % readout follows.

The scaler is drawn in the browser (ampkit/widgets/js/scaler.js) from the sweep of every slider position the engine
computed: run, and from the saved notebook with no kernel, every position the keyboard reaches shows the engine's
numbers (readout, safe window, where the bands and the histogram are drawn); every static figure is screenshotted.
The dynamic-scaler replay below it: tests/browser/test_replay_browser.py."""
import re

import pytest
import torch

pytestmark = pytest.mark.browser

READOUT = ".ampkit-scale-readout"
PLOT = ".ampkit-scale-plot"          # the scaler's SVG (an <img> in the ipywidgets view before #30)
SCALE_K = ".jp-OutputArea .ampkit-scaler input.ampkit-scale-k"   # the scaler's typed log2(scale)


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


def flushed(text: str) -> str:
    m = re.search(r"flushed to zero ([<\d.\s]+%)", text)
    assert m, text
    return m.group(1).strip()


def notebook_grads() -> torch.Tensor:
    """The gradients notebook 03 captures, computed here the way the notebook computes them."""
    from ampkit.lessons.loss_scaling import underflow_task
    from ampkit.scaling import capture_gradients

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the notebook does
    try:
        task = underflow_task()
        return capture_gradients(task.model(), task.X[:128], task.y[:128], loss_weight=task.loss_weight)
    finally:
        torch.set_num_threads(threads)


def expected_flushed(k: int) -> str:
    """What the readout must say at scale 2**k."""
    from ampkit.scaling import scale_report
    from ampkit.widgets.scaling import _pct

    return _pct(scale_report(notebook_grads(), k, "fp16").flushed)


def type_scale(page, k: int) -> None:
    """Type log2(scale) = k into the scaler's number box (select all, type, Enter)."""
    box = page.locator(SCALE_K).first
    box.scroll_into_view_if_needed()
    box.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(str(k))
    page.keyboard.press("Enter")


def test_scale_slider_moves_the_histogram_and_the_readout(lab):
    page = lab.open_and_run("03_loss_scaling.ipynb")
    start = shown(page, READOUT)
    assert "in float16" in start
    assert flushed(start) == expected_flushed(0)               # 98 % of the gradients flush at scale 1
    plot = page.locator(f".jp-OutputArea svg{PLOT}").first
    bars0 = plot.locator(".ampkit-scale-bars").get_attribute("d")
    assert page.evaluate("(e) => e.getBoundingClientRect().width", plot.element_handle()) == 700
    plot.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-scaler-before")

    lab.move_range(page, 0, "ArrowRight", presses=4)           # scale 2**4
    after = lab.wait_for_text(page, READOUT, "scale 24 in")    # the final state (2<sup>4</sup>), not the first press
    assert flushed(after) == expected_flushed(4) != flushed(start)
    assert plot.get_attribute("data-k") == "4" and plot.locator(".ampkit-scale-bars").get_attribute("d") != bars0

    type_scale(page, 16)                                       # inside the safe window
    typed = lab.wait_for_text(page, READOUT, "scale 216 in")
    assert flushed(typed) == expected_flushed(16)
    assert "overflow 0 %" in typed
    plot.scroll_into_view_if_needed()
    lab.screenshot(page, "03_loss_scaling-scaler-after")

    # the replay below it (drawn in the browser too): tests/browser/test_replay_browser.py
    # the notebook's own figures (static PNG outputs): each rendered, readable size, screenshotted to look at
    lab.check_figures(page, "03_loss_scaling", at_least=5)
    lab.assert_clean(page)


def _shown_scaler(page) -> dict:
    """What the scaler's page shows: position, readout parts, band rectangles, bars."""
    return page.evaluate("""() => {
        const v = document.querySelector('.jp-OutputArea .ampkit-scaler');
        const t = (sel) => v.querySelector(sel).textContent.trim();
        const svg = v.querySelector('svg.ampkit-scale-plot');
        const band = (n) => { const r = svg.querySelector('.ampkit-band-' + n);
                              return [Number(r.getAttribute('x')), Number(r.getAttribute('width'))]; };
        return {k: Number(v.querySelector('input.ampkit-scale-range').value), fmt: svg.dataset.fmt, dk: svg.dataset.k,
                flushed: t('.ampkit-flushed'), subnormal: t('.ampkit-subnormal'), overflow: t('.ampkit-overflow'),
                window: t('.ampkit-window'), head: t('.ampkit-scale-readout b'),
                bands: Object.fromEntries(['flushed', 'subnormal', 'normal', 'overflow'].map(n => [n, band(n)])),
                bars: svg.querySelector('.ampkit-scale-bars').getAttribute('d')};
    }""")


def _x(v: float) -> float:
    """scaler.js's x position of log2 value v (700 px wide, margins 62 and 12, x from -72 to 40)."""
    return 62 + (min(max(v, -72), 40) + 72) / 112 * (700 - 62 - 12)


def _expected_scaler(view, fmt: str, k: int) -> dict:
    from ampkit.widgets.scaling import _pct

    view.fmt, view.log2_scale = fmt, k
    r, w = view.state, view.window
    bands = {n: [_x(lo), max(0.0, _x(hi) - _x(lo))] for n, (lo, hi) in view.sweep[fmt]["bands"].items()}
    first = next(i for i, f in enumerate(view.hist["frac"]) if f > 0 and view.hist["edges"][i + 1] + k > -72)
    return {"k": k, "fmt": fmt, "dk": str(k), "flushed": f"flushed to zero {_pct(r.flushed)}",
            "subnormal": f"subnormal {_pct(r.subnormal)}", "overflow": f"overflow {_pct(r.overflow)}",
            "window": "none in range — no power-of-two scale keeps every gradient" if w is None
            else f"2{w[0]} … 2{w[1]}", "head": f"scale 2{k} in {fmt}", "bands": bands,
            "first_bar": _x(view.hist["edges"][first] + k)}


def _check_scaler(page, view, fmt: str, k: int) -> None:
    shown = _shown_scaler(page)
    want = _expected_scaler(view, fmt, k)
    first_bar = want.pop("first_bar")
    for name, (x, width) in want.pop("bands").items():
        assert shown["bands"][name] == pytest.approx([x, width], abs=1e-6), (name, fmt, k)
    assert float(re.match(r"M([-\d.e]+),", shown.pop("bars")).group(1)) == pytest.approx(first_bar, abs=1e-6)
    shown.pop("bands")
    assert shown == want


def test_scaler_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: the keyboard moves the scaler, and every position shows the engine's numbers
    for it (computed here from the same gradients), in every format."""
    import random

    from ampkit.widgets.scaling import VisualLossScaler

    view = VisualLossScaler(notebook_grads())
    page = lab.open_saved("03_loss_scaling.ipynb")
    page.locator(f".jp-OutputArea svg{PLOT}").first.scroll_into_view_if_needed()
    _check_scaler(page, view, "float16", 0)
    rng = random.Random(3)
    k = 0
    for _ in range(12):
        presses = rng.randint(1, 9)
        key = "ArrowRight" if rng.random() < 0.6 else "ArrowLeft"
        lab.move_range(page, 0, key, presses=presses)
        k = max(view.min_log2, min(view.max_log2, k + (presses if key == "ArrowRight" else -presses)))
        lab.wait_for_text(page, READOUT, f"scale 2{k} in")
        _check_scaler(page, view, "float16", k)
    lab.move_range(page, 0, "End")
    lab.wait_for_text(page, READOUT, "scale 240 in")
    k = 40
    _check_scaler(page, view, "float16", k)                      # far past the window: overflow shown
    lab.screenshot(page, "03_loss_scaling-scaler-no-kernel-end", near=f".jp-OutputArea svg{PLOT}")
    for label, fmt in (("bf16", "bfloat16"), ("fp8 e4m3", "float8_e4m3fn"), ("fp8 e5m2", "float8_e5m2")):
        page.locator(f".jp-OutputArea .ampkit-scaler button[data-fmt='{fmt}']").first.click()
        lab.wait_for_text(page, READOUT, f"in {fmt}")
        _check_scaler(page, view, fmt, k)                        # a new format keeps the slider's position
        targets = (rng.randint(-8, 40), -8 if k == 40 else 40)
        for k in targets:
            type_scale(page, k)
            lab.wait_for_text(page, READOUT, f"scale 2{k} in {fmt}")
            _check_scaler(page, view, fmt, k)
        assert page.locator(f".jp-OutputArea .ampkit-scaler button[data-fmt='{fmt}']").first.get_attribute(
            "aria-pressed") == "true", label
    lab.screenshot(page, "03_loss_scaling-scaler-no-kernel-fp8", near=f".jp-OutputArea svg{PLOT}")
    lab.assert_clean(page)
