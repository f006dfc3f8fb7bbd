"""What a Chinese page displays is Chinese (issue 32): the classes of English that came back before, kept out.

- No output of any notebooks/zh_CN notebook (nor its saved view state) shows gettext's catalog header
  (``tr("")`` once returned it: 02's O-level table printed ``Project-Id-Version: ...`` in every row).
- The English words a Chinese notebook displays (text, HTML and Markdown outputs; widget placeholders aside), outside
  an explicit allow-list of code, API names, units and format names, stay at or below the count measured when this
  test was written (``ENGLISH_AT_MOST``); a failure lists the words, so a new English table or message is seen.
- The figure text the kit's own figure functions draw in Chinese (the doctor's headroom bars, the loss-scale plot)
  has no English word outside the allow-list.
- No line of a Chinese Markdown cell ends and the next begins with a Chinese character inside one paragraph
  (issue 39: a browser shows that line break as a space, "来自 MindSpore 的 文档"); checked on the stored notebooks,
  by the generator's rule and by CommonMark's own parse (markdown-it's soft breaks).

Each check is shown to fail on a small fake of the bug it guards.
"""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ZH = ROOT / "notebooks" / "zh_CN"

#: gettext header fields: none of them is ever displayed
METADATA = ("Project-Id-Version", "MIME-Version", "Content-Type: text/plain", "Content-Transfer-Encoding",
            "Plural-Forms", "Report-Msgid-Bugs-To", "POT-Creation-Date", "Language-Team")

#: English words a Chinese page may show: code and API names, framework and library names, units, format and
#: dtype names, abbreviations. Kept short and explicit; a word with a digit, an underscore, a dot or inner capitals
#: (CamelCase) counts as code and is allowed without being listed.
ALLOWED = frozenset("""
ampkit torch numpy matplotlib ipywidgets anywidget jupyterlab tqdm nbval playwright python pytorch paddle paddlepaddle
mindspore apex deepspeed keras jax jmp nvidia triton inductor aten cuda cpu gpu amd epyc intel amx avx
autocast gradscaler adam adamw sgd relu gelu softmax linear layernorm rmsnorm batchnorm mlp sdpa gemm matmul
dtype dtypes fp bf tf float half inf nan nans true false none ok info warn fail eps ulp amax amin log exp sqrt sum
max min mean std ms µs kib mib gib nats step steps bits bias mant exp
logits loss eager default static symbolic dynamic notebook tensor core cores args amp host margin cell epoch dense
add mul cat stack pow cumsum prod bmm addmm prelu addcmul dot concat
""".split())

#: English words displayed per notebook, measured on 2026-11-27 (15:40 UTC) after issue 32's fixes, on the zh_CN
#: notebooks as committed then. What is left is mostly torch's own warnings and errors quoted verbatim, literal text in
#: code cells (translated in translations/zh_CN/NN_*.po). 09 and 03 were lowered at 16:12 UTC: 09's 118 are Paddle's
#: and MindSpore's own messages quoted verbatim (the scaler's "Found inf or nan", the CPU warnings, the refusals), the
#: network source it prints and class names. 04 has 2 more for the other branch of a timing-dependent word. A notebook
#: not listed gets DEFAULT_AT_MOST. Lower a number when a page gets more Chinese; never raise one to let English in.
#: Lowered on 2026-12-08 (issue 39) after 05's scenario names, 07's dtype-mismatch cases and 03's legacy-spelling
#: advice became Words, quotes were counted apart (QUOTED), and Cell, Dense and epoch (names MindSpore's Chinese docs
#: keep) joined the allow-list; 04 keeps 2 for its timing-dependent word; 09's refusals table shows MindSpore's messages
#: as code (quoted verbatim), 9.0% English.
#: 10 (2026-12-08, new): the MX scale rules' names as the kit and torchao take them (rounding="floor", "ceil", "even",
#: "rceil", "ocp": 21), the Hadamard cases' names exercise 4's answer is written in, and "token" (as 07 writes it).
ENGLISH_AT_MOST = {"00": 3, "01": 1, "02": 26, "03": 49, "04": 37, "05": 37, "06": 11, "07": 36, "08": 30, "09": 87,
                   "10": 28}
DEFAULT_AT_MOST = 10

WORD = re.compile(r"[A-Za-z][A-Za-z_.'0-9]*")


def _code_like(word: str) -> bool:
    return (any(c.isdigit() or c in "_." for c in word) or re.search(r"[a-z][A-Z]", word) is not None
            or len(word) < 3)


def english_words(text: str) -> list[str]:
    """The English words of ``text`` that are neither code-like nor on the allow-list.

    >>> english_words("设备：cpu（AMD EPYC）；不需要 GPU")
    []
    >>> english_words("step 0: inf/NaN in loss (the scaler found inf)")
    ['the', 'scaler', 'found']
    """
    out = []
    for w in WORD.findall(text):
        w = w.strip(".'")
        if w and not _code_like(w) and w.lower() not in ALLOWED:
            out.append(w)
    return out


def _strip_html(markup: str) -> str:
    markup = re.sub(r"<(style|script)\b.*?</\1>", " ", markup, flags=re.S | re.I)
    markup = re.sub(r"<code\b.*?</code>", " ", markup, flags=re.S | re.I)        # code is code in any language
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def displayed_texts(nb: dict) -> list[tuple[str, str]]:
    """(cell id, text) for every text a reader sees in the outputs: streams, text/html (tags and code removed),
    text/markdown, else text/plain; a widget's text/plain placeholder and images are not text a reader reads."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        for o in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            cid = cell.get("id", str(i))
            if o.get("output_type") == "stream":
                out.append((cid, "".join(o.get("text", ""))))
            elif o.get("output_type") in ("execute_result", "display_data"):
                data = o.get("data", {})
                if "application/vnd.jupyter.widget-view+json" in data or "image/png" in data:
                    continue
                for mime, clean in (("text/html", _strip_html), ("text/markdown", str), ("text/plain", str)):
                    if mime in data:
                        text = data[mime]
                        out.append((cid, clean("".join(text) if isinstance(text, list) else text)))
                        break
            elif o.get("output_type") == "error":
                out.append((cid, f"{o.get('ename', '')}: {o.get('evalue', '')}"))
    return out


def metadata_in(nb: dict) -> list[str]:
    """Where a catalog header field appears in the notebook's outputs or its saved widget state."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        blob = json.dumps(cell.get("outputs", []), ensure_ascii=False)
        found += [f"cell {cell.get('id', i)}: {m}" for m in METADATA if m in blob]
    state = json.dumps(nb.get("metadata", {}).get("widgets", {}), ensure_ascii=False)
    found += [f"widget state: {m}" for m in METADATA if m in state]
    return found


#: what a Chinese page quotes on purpose, counted apart: a Markdown code span or block (code, or a framework's message
#: quoted verbatim; an HTML output's <code> is removed the same way) and text in Chinese quotation marks “…” (the
#: edition's quotation policy: the English original, so that a learner can search the source, beside a Chinese gloss)
QUOTED = re.compile(r"```.*?```|``.+?``|`[^`\n]+`|“[^”]*”", re.S)
CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
#: the English share of what a page displays: English words (outside quotes and the allow-list) over all displayed
#: words, a Chinese word counted as two characters (modern Chinese words are shorter on average, so this counts fewer
#: Chinese words than there are and overstates the English share). Issue 39: at most a tenth on every page.
SHARE_AT_MOST = 0.10


def english_count(nb: dict) -> tuple[int, Counter]:
    words = Counter(w for _cid, text in displayed_texts(nb) for w in english_words(QUOTED.sub(" ", text)))
    return sum(words.values()), words


def quoted_count(nb: dict) -> int:
    """English words inside the page's quotes (see QUOTED): shown, but not counted against the page."""
    return sum(len(english_words(m.group(0))) for _cid, text in displayed_texts(nb) for m in QUOTED.finditer(text))


def displayed_words(nb: dict) -> float:
    """Every word the outputs display: each Latin word, and one per two Chinese characters."""
    texts = [text for _cid, text in displayed_texts(nb)]
    return sum(len(WORD.findall(t)) + len(CJK_CHAR.findall(t)) / 2 for t in texts)


def english_share(nb: dict) -> float:
    return english_count(nb)[0] / max(displayed_words(nb), 1.0)


ZH_NOTEBOOKS = sorted(ZH.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_no_catalog_metadata_in_outputs(path):
    found = metadata_in(json.loads(path.read_text(encoding="utf-8")))
    assert not found, f"{path.name} shows gettext's catalog header (tr('') or a catalog dump): {found}"


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_english_displayed_stays_below_threshold(path):
    total, words = english_count(json.loads(path.read_text(encoding="utf-8")))
    limit = ENGLISH_AT_MOST.get(path.name[:2], DEFAULT_AT_MOST)
    assert total <= limit, (f"{path.name}: {total} English words displayed (at most {limit}); translate them with "
                            f"tr()/Word or in the catalog, or add a code/API name to ALLOWED: "
                            f"{', '.join(f'{w} x{n}' for w, n in words.most_common(60))}")


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_english_is_at_most_a_tenth_of_what_a_page_displays(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    total, words = english_count(nb)
    share = english_share(nb)
    assert share <= SHARE_AT_MOST, (f"{path.name}: {share:.1%} of the displayed words are English ({total} of "
                                    f"{displayed_words(nb):.0f}; {quoted_count(nb)} more quoted): "
                                    f"{', '.join(f'{w} x{n}' for w, n in words.most_common(40))}")


def test_quotes_are_counted_apart_and_the_share_bites():
    quoted = _fake([{"output_type": "stream", "name": "stdout",
                     "text": "Paddle 说：“AmpScaler can only be enabled on CUDAPlace”（只能在 CUDA 上启用）\n"}])
    assert english_count(quoted)[0] == 0 and quoted_count(quoted) == 4       # can only enabled CUDAPlace
    table = _fake([{"output_type": "display_data", "metadata": {},
                    "data": {"text/markdown": "| 调用 | 报错 |\n|---|---|\n| `f()` | ``Error: `None` on CPU`` |"}}])
    assert english_count(table)[0] == 0
    english = _fake([{"output_type": "stream", "name": "stdout", "text": "the scaler found inf and skipped 损失\n"}])
    assert english_count(english)[0] == 5 and displayed_words(english) == 6 + 1   # "inf" is allowed
    assert english_share(english) > SHARE_AT_MOST


def _fake(outputs: list[dict]) -> dict:
    return {"cells": [{"cell_type": "code", "id": "fake", "source": "", "outputs": outputs}], "metadata": {}}


def test_the_checks_fail_on_fakes_of_the_bugs():
    header = "Project-Id-Version: ampkit\nLanguage: zh_CN\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8"
    table = _fake([{"output_type": "display_data", "metadata": {},
                    "data": {"text/html": f"<table><tr><td>net.0</td><td>{header}</td></tr></table>"}}])
    assert metadata_in(table) and "cell fake: Project-Id-Version" in metadata_in(table)
    state = {"cells": [], "metadata": {"widgets": {"state": {"m": {"rows": [{"note": header}]}}}}}
    assert metadata_in(state) == [f"widget state: {m}" for m in METADATA if m in header]
    english = _fake([{"output_type": "stream", "name": "stdout",
                      "text": "step 0: inf/NaN in loss, gradients (the scaler found inf and skipped the step)\n"
                              "status on this machine: DISABLED\n"}])
    total, words = english_count(english)
    assert total == 11 and words == Counter(["gradients", "the", "the", "scaler", "found", "and", "skipped", "status",
                                             "this", "machine", "DISABLED"])
    chinese = _fake([{"output_type": "stream", "name": "stdout",
                      "text": "第 0 步：损失、梯度中出现 inf/NaN；"
                              "torch.amp.GradScaler 跳过了这一步的更新（fp16，2^16）\n"}])
    assert english_count(chinese) == (0, Counter())
    assert metadata_in(chinese) == []


def _figure_texts(fig) -> list[str]:
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def kit_figures(lang: str = "zh_CN") -> dict[str, list[str]]:
    """The text of the kit's own figures drawn in ``lang``: 05's doctor (headroom bars, loss scale per step), 00's
    device speed bars, 04's timelines and measured runs. A sink mode's name (``data+graph``) is code: removed."""
    import torch

    from ampkit.device import DeviceReport, Ratio
    from ampkit.i18n import set_language
    from ampkit.sinking import ModeMeasurement
    from ampkit.timeline import GPU_LIKE, SINK_MODES, simulate_all
    from ampkit.widgets.amp_doctor import headroom_figure, scales_figure
    from ampkit.widgets.sinking import gantt_figure, measured_figure
    from ampkit.widgets.start import device_speed_figure

    set_language(lang)
    try:
        from torch import nn

        from ampkit.diagnose.headroom import module_kind

        kinds = [module_kind(m) for m in (nn.Linear(2, 2), nn.ReLU(), nn.LayerNorm(2))]
        head = headroom_figure(["net.0", "net.1", "net.2"], {"fp16": [3.0, -1.5, 12.0], "bf16": [120.0, 118.0, 119.0]},
                               kinds=kinds)
        runs = {"log of zero (persistent)": {"scales": [2.0**16, 2.0**15, 2.0**14], "skipped": [True, True, True]},
                "outlier batches, GradScaler (transient)": {"scales": [2.0**16] * 3, "skipped": [False, True, False]}}
        scales = scales_figure(runs, "Loss scale per step: a persistent NaN source vs transient spikes")
        report = DeviceReport(torch.device("cpu"), "x", (torch.bfloat16, torch.float16),
                              native={torch.bfloat16: "AMX-BF16"}, probe_size=8,
                              ratios={torch.bfloat16: Ratio(2.0, 1.5, 2.5, 3),
                                      torch.float16: Ratio(0.02, 0.01, 0.03, 3)})
        measured = {"none": ModeMeasurement("none", 2e-4, 16, 16, 0.0, (2e-4, 2.2e-4, 1.9e-4))}
        figs = {"headroom": head, "scales": scales, "speed": device_speed_figure(report),
                "timelines": gantt_figure(simulate_all(GPU_LIKE, steps=2)),
                "measured": measured_figure(measured, {"none": 2.1e-4})}
        texts = {name: _figure_texts(fig) for name, fig in figs.items()}
    finally:
        set_language(None)
    for mode in sorted(SINK_MODES, key=len, reverse=True):
        texts = {name: [t.replace(mode, " ") for t in got] for name, got in texts.items()}
    return texts


def test_kit_figures_draw_no_english_words():
    from ampkit.widgets.figtext import cjk_font

    if cjk_font() is None:
        pytest.skip("no CJK font here: figure text stays English by design (fonts-noto-cjk)")
    texts = kit_figures()
    left = {name: [w for t in got for w in english_words(t)] for name, got in texts.items()}
    assert not any(left.values()), f"English words in figures drawn in Chinese: {left}"
    english = {w for got in kit_figures("en").values() for t in got for w in english_words(t)}   # the check bites
    assert {"activation", "OVERFLOW", "skipped", "persistent", "faster", "native", "loader", "lane"} <= english
    assert any("ReLU" in t and re.search(r"[\u4e00-\u9fff]", t) for t in texts["headroom"])   # "ReLU 激活"


def view_labels(lang: str = "zh_CN") -> dict[str, list[str]]:
    """The words (labels, readout templates, tooltips) every view of ampkit.widgets that needs no data sends to the
    page, in ``lang``, with markup and ``{fields}`` removed."""
    import inspect

    import ampkit.widgets as widgets
    from ampkit.i18n import set_language
    from ampkit.widgets.front import FrontView

    def strings(x):
        if isinstance(x, str):
            yield re.sub(r"\{[^{}]*\}", " ", re.sub(r"<[^>]+>", " ", x))
        elif isinstance(x, dict):
            for v in x.values():
                yield from strings(v)
        elif isinstance(x, (list, tuple)):
            if len(x) == 2 and all(isinstance(v, str) for v in x) and re.fullmatch(r"[a-z_]+", x[0]):
                x = x[1:]                                  # a [key, label] pair (a legend's entry): the key is code
            for v in x:
                yield from strings(v)

    out = {}
    set_language(lang)
    try:
        for name in sorted(dir(widgets)):
            cls = getattr(widgets, name)
            if not (inspect.isclass(cls) and issubclass(cls, FrontView) and cls is not FrontView):
                continue
            needs = [p for p in inspect.signature(cls).parameters.values()
                     if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if not needs:                                  # ScalerReplay and VisualLossScaler need recorded data
                out[name] = list(strings(cls().words()))
    finally:
        set_language(None)
    return out


def test_view_labels_have_no_english_words():
    labels = view_labels()
    assert len(labels) >= 8, sorted(labels)
    left = {name: [w for t in texts for w in english_words(t)] for name, texts in labels.items()}
    assert not any(left.values()), f"English words in the views' labels: { {k: v for k, v in left.items() if v} }"
    english = {w for texts in view_labels("en").values() for t in texts for w in english_words(t)}   # the check bites
    assert {"scale", "scenario", "broken"} <= english


_WIDE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2014\u2026\u201c\u201d\u2018\u2019]")


def soft_breaks_between_chinese(markdown: str) -> list[str]:
    """The soft line breaks CommonMark finds in ``markdown`` between two Chinese characters (emphasis marks and
    inline HTML aside), each as ``"字⏎字"``; what a browser shows as a stray space."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type != "inline":
            continue
        flat = "".join("\0" if c.type == "softbreak" else c.content if c.type in ("text", "code_inline") else ""
                       for c in token.children or [])
        found += [f"{m.group(1)}⏎{m.group(2)}" for m in re.finditer(r"(.)\0(.)", flat)
                  if _WIDE.match(m.group(1)) and _WIDE.match(m.group(2))]
    return found


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_no_line_break_between_chinese_characters(path):
    from ampkit._i18ntools.generate import cjk_line_breaks

    cells = ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "markdown"]
    found = [b for text in cells for b in cjk_line_breaks(text)]
    assert not found, f"{path.name}: line breaks between Chinese characters (shown as a space): {found[:5]}"
    pytest.importorskip("markdown_it")
    found = [b for text in cells for b in soft_breaks_between_chinese(text)]
    assert not found, f"{path.name}: CommonMark soft breaks between Chinese characters: {found[:5]}"


def test_the_line_break_checks_fail_on_a_wrapped_paragraph():
    from ampkit._i18ntools.generate import cjk_line_breaks, join_cjk_lines

    wrapped = "来自 MindSpore 的\n文档。\n\n- 列表，**加粗**\n  续行\n\n```\n# 代码\n# 注释\n```\n## 标题\n正文"
    assert cjk_line_breaks(wrapped) == [" MindSpore 的⏎文档。", "- 列表，**加粗**⏎  续行"]
    assert join_cjk_lines(wrapped).startswith("来自 MindSpore 的文档。\n\n- 列表，**加粗**续行\n\n```\n# 代码\n# 注释")
    assert cjk_line_breaks(join_cjk_lines(wrapped)) == []
    pytest.importorskip("markdown_it")
    assert soft_breaks_between_chinese(wrapped) == ["的⏎文", "粗⏎续"]
    assert soft_breaks_between_chinese(join_cjk_lines(wrapped)) == []


def test_a_curve_note_is_figure_text_with_its_label():
    """03's "2⁴⁰ unchecked: inf/NaN from step N" stayed English: the label went into the note's template as a field
    with ": " glued on, so no figure entry matched it. mark_nonfinite writes the note as two templates."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from ampkit.i18n import set_language
    from ampkit.widgets.figtext import translate_figure_text
    from ampkit.widgets.style import mark_nonfinite

    ax = Figure().add_subplot()
    mark_nonfinite(ax, [1.0, 2.0, math.nan], label="$2^{40}$ unchecked")
    note = ax.texts[-1].get_text()
    assert note == "$2^{40}$ unchecked: inf/NaN from step 2"
    set_language("zh_CN")
    try:
        shown = translate_figure_text(note)
    finally:
        set_language(None)
    assert english_words(shown) == [] and "2⁴⁰" in shown, shown
