"""The Chinese edition in a real browser: JupyterLab with the official zh-CN language pack (as `make lab LANG=zh_CN`
sets it up) opens notebooks/zh_CN/03, runs it, moves the loss scaler's slider; the slider's label is Chinese and
the readout is Chinese and shows the engine's number. Screenshots to look at. `_english_left` is the check that every
view of every Chinese notebook, drawn from its saved state, shows no English label word: test_static_views_browser
runs it on each Chinese page (a saved notebook's views, no kernel), a picture of each view beside it.

The scaler is drawn in the browser (js/scaler.js) since #30; until notebooks/zh_CN/03 is rebuilt it may still hold
the ipywidgets view (a noUi slider): the test drives whichever of the two the notebook shows."""
import re

import pytest
from test_scaling_browser import PLOT, READOUT, expected_flushed, shown

from conftest import Lab, LabServer, find_chromium

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
    text = re.sub(r"\b(Host|Device) ?侧", "", text)     # the glossary's terms, as MindSpore's Chinese docs write them
    words = re.findall(r"[A-Za-z][\w-]*", text)         # a hyphenated or snake_case word is a name: mindspore-fixed
    return sorted({w for w in words if "-" not in w and "_" not in w and w.lower() in _ENGLISH_WORDS})


def test_the_english_check_finds_english():
    assert _english_left("scale 2**4 · flushed to zero 3 % · mindspore-fixed") == ["flushed", "scale"]
    assert _english_left("bf16 O2 下溢为零 3 % · fp16 最大值 65504 · amax · µs · log2(scale)") == []
    assert _english_left("加载器 · Host 侧 · 设备") == [] and _english_left("host · 设备") == ["host"]
