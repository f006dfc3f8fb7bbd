"""The Chinese edition in a real browser: JupyterLab with the official zh-CN language pack (as `make lab LANG=zh_CN`
sets it up) opens notebooks/zh_CN/03, runs it, moves the loss scaler's slider; the slider's label is Chinese and
the readout is Chinese and shows the engine's number. Screenshots to look at.

The scaler is drawn in the browser (js/scaler.js) since #30; until notebooks/zh_CN/03 is rebuilt it may still hold
the ipywidgets view (a noUi slider): the test drives whichever of the two the notebook shows."""
import re

import pytest
from test_scaling_browser import PLOT, READOUT, expected_flushed, shown

from conftest import ROOT, Lab, LabServer, find_chromium

pytestmark = pytest.mark.browser

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory, browser, request):
    if not find_chromium():
        pytest.fail("CI must run the browser tests but no chromium was found")
    server = LabServer(tmp_path_factory.mktemp("jupyterlab-zh"), edition="zh_CN", locale="zh_CN")
    server.start()
    session = Lab(server, browser)
    try:
        yield session
    finally:
        session.close()
        server.stop()


def _percent(text: str) -> str:
    m = re.search(r"(<?\s*[\d.]+\s*%)", text)
    assert m, text
    return m.group(1).replace(" ", "")


def test_chinese_notebook_in_chinese_jupyterlab(lab_zh):
    page = lab_zh.open_and_run("03_loss_scaling.ipynb", run_menu="运行")
    menus = page.locator(".lm-MenuBar-item").all_inner_texts()
    assert "文件" in menus and "运行" in menus, menus                 # JupyterLab itself is in Chinese
    heading = lab_zh.text(page, ".jp-MarkdownOutput h1")
    assert CJK.search(heading), heading                               # the lesson is in Chinese

    front = page.locator(".jp-OutputArea .ampkit-scaler").count() > 0       # drawn in the browser (#30), or not yet
    label = lab_zh.text(page, ".jp-OutputArea .ampkit-scaler label span" if front else
                        ".jp-OutputArea .widget-slider .widget-label")
    assert CJK.search(label) or label.startswith("log2"), label
    start = shown(page, READOUT)
    assert CJK.search(start), start                                    # the readout is Chinese ...
    assert _percent(start) == expected_flushed(0).replace(" ", "")   # ... and shows the kernel's number
    page.locator(PLOT).first.scroll_into_view_if_needed()
    lab_zh.screenshot(page, "zh_CN-03-scaler-before")

    (lab_zh.move_range if front else lab_zh.move_slider)(page, 0, "ArrowRight", presses=4)   # scale 2**4
    after = lab_zh.wait_for_text(page, READOUT, "24")
    assert CJK.search(after) and _percent(after) == expected_flushed(4).replace(" ", "") != _percent(start)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    lab_zh.screenshot(page, "zh_CN-03-scaler-after")
    lab_zh.check_figures(page, "zh_CN-03", at_least=5)
    lab_zh.assert_clean(page)



_ZH_WITH_VIEWS = sorted(p.name for p in (ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb")
                        if '"model_module": "anywidget"' in p.read_text(encoding="utf-8"))
# English words of the kit's views' labels and readouts: none may be left in a Chinese view (names stay Latin:
# formats, levels, APIs, units, "notebook", and are not in this list; code (a layer's name) and a picker's
# options (the scenario names the code passes: AmpDoctor("fp16 forward overflow")) are left out)
_ENGLISH_WORDS = {"format", "stored", "error", "value", "flushed", "overflow", "subnormal", "scale", "gradients",
                  "fraction", "values", "step", "steps", "loss", "training", "memory", "level", "reference", "run",
                  "runs", "computed", "machine", "kernel", "compute", "headroom", "module", "bits",
                  "skipped", "saturated", "saturates", "delayed", "history", "tensor", "block", "blocks", "rounding",
                  "previous", "next", "kind", "click", "flip", "measure", "simulated", "device", "host", "loader",
                  "time", "since", "first", "began", "scenario", "fixed", "broken", "again", "same", "report",
                  "safe", "window", "range", "bands", "octave", "magnitude", "largest", "keeps", "just",
                  "waiting", "presets", "start", "growth", "backoff", "interval", "final", "applied", "what",
                  "typed", "relative", "absolute", "exact", "rounded", "weights", "grads", "state", "missing"}


def _english_left(text: str) -> list[str]:
    from ampkit.lessons import SCENARIOS

    for name in SCENARIOS:                                # the doctor's scenarios are named as the code names them
        text = text.replace(name, "")
    text = re.sub(r"\b\w+\([^()]*\)", "", text)      # a formula's name, as code writes it: log2(scale)
    words = re.findall(r"[A-Za-z][\w-]*", text)         # a hyphenated or snake_case word is a name: mindspore-fixed
    return sorted({w for w in words if "-" not in w and "_" not in w and w.lower() in _ENGLISH_WORDS})


def test_the_english_check_finds_english():
    assert _english_left("scale 2**4 · flushed to zero 3 % · mindspore-fixed") == ["flushed", "scale"]
    assert _english_left("bf16 O2 下溢为零 3 % · fp16 最大值 65504 · amax · µs · log2(scale)") == []


def test_every_view_of_the_chinese_edition_draws_in_chinese_without_a_kernel(lab_zh):
    """Each Chinese notebook with kit views, opened as committed (trusted, nothing run) in Chinese JupyterLab:
    every view draws from its saved state, and what it shows is Chinese (Latin text only for names: formats,
    levels, APIs, units). A screenshot of each view, to look at."""
    assert len(_ZH_WITH_VIEWS) >= 8, _ZH_WITH_VIEWS
    for name in _ZH_WITH_VIEWS:
        expected = (ROOT / "notebooks" / "zh_CN" / name).read_text(encoding="utf-8").count(
            '"application/vnd.jupyter.widget-view+json"')
        page = lab_zh.open_saved(name, edition="zh_CN")
        views = page.locator(".jp-OutputArea .ampkit-front")
        for i in range(expected):
            lab_zh.scroll_until(page, ".jp-OutputArea .ampkit-front", i + 1)
            view = views.nth(i)
            view.scroll_into_view_if_needed()
            page.wait_for_timeout(200)
            text = view.evaluate("""(v) => { const c = v.cloneNode(true);
                                          c.querySelectorAll('code, select').forEach((e) => e.remove());
                                          document.body.append(c); const t = c.innerText; c.remove(); return t; }""")
            assert CJK.search(text), (name, i, text[:300])
            assert not _english_left(text), (name, i, _english_left(text), text[:300])
            lab_zh.screenshot(page, f"zh_CN-saved-{name[:2]}-view{i}")
        lab_zh.assert_clean(page)
