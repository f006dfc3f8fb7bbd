"""The Chinese edition is in step with the English by construction (ampkit/_i18ntools, `make translations`).

Every catalog: nothing missing, stale (fuzzy) or untranslated; every number, code span, formula and link kept; code
cells the same program; the glossary's terms used. The catalogs hold exactly the English that is there now; the
generated notebooks and the compiled catalog are what `make translations` would write.
"""
import ast
import json
import re
import unicodedata

import polib
import pytest

from ampkit._i18ntools import catalogs
from ampkit._i18ntools.catalogs import (
    PACKAGE_MO,
    PACKAGE_PO,
    _merge,
    code_literals,
    compiled_entries,
    english_notebooks,
    kept_by_hand,
    notebook_po,
)
from ampkit._i18ntools.checks import entry_problems, glossary_rows, glossary_terms
from ampkit._i18ntools.extract import Entry, notebook_entries, package_entries
from ampkit._i18ntools.generate import same_source, translated_notebook, zh_path

ROOT = catalogs.ROOT
NOTEBOOKS = english_notebooks()
CATALOGS = [notebook_po(p) for p in NOTEBOOKS] + [PACKAGE_PO]


def _keys(path):
    return {(e.msgctxt, e.msgid) for e in polib.pofile(str(path), wrapwidth=0) if not e.obsolete}


def test_every_english_notebook_has_a_catalog_and_a_chinese_notebook():
    assert len(NOTEBOOKS) >= 9
    for nb in NOTEBOOKS:
        assert notebook_po(nb).exists(), f"{nb.name}: no catalog (make translations)"
        assert zh_path(nb).exists(), f"{nb.name}: no Chinese notebook (make translations)"


def test_the_glossary_has_the_issue_terms_and_sources():
    text = (ROOT / "docs" / "glossary.md").read_text()
    for zh in ("自动混合精度", "损失缩放", "动态损失缩放", "上溢", "下溢", "次正规数", "白名单", "黑名单", "灰名单",
               "数据下沉", "图下沉", "循环下沉", "算子"):
        assert f"| {zh} |" in text, zh
    assert len(glossary_terms()) >= 25
    assert text.count("mindspore.cn") >= 2 and "paddlepaddle.org.cn" in text


# the terms issue #32 decided against the official Chinese documentation (English, Chinese), each checked (✓)
DECIDED = {"significand": "有效数", "machine epsilon": "机器 ε", "per-tensor scaling": "按张量缩放",
           "current scaling": "当前缩放", "delayed scaling": "延迟缩放", "block scaling": "按块缩放",
           "activation checkpointing": "重计算", "skipped step": "跳过更新",
           "widget": "控件", "the kit": "工具包", "backoff factor": "缩小乘数",
           # issue #39: one term per concept, each against a framework's page
           "hysteresis": "滞后次数", "clean step": "正常步", "growth interval": "增长间隔"}


def _glossary_problems(rows):
    """Each term row has a source; a row that changed an earlier choice ("changed (was …)") cites a page."""
    problems = []
    for cells in rows:
        if len(cells) < 4 or cells[0] in ("English", "") or set(cells[0]) <= set("-:"):
            continue
        source = cells[2]
        if not source:
            problems.append(f"{cells[0]}: no source")
        elif source.startswith("changed") and not re.search(r"https://[\w.-]+\.\w+/\S+", source):
            problems.append(f"{cells[0]}: changed from an earlier choice, but cites no page (https://…)")
        elif source.startswith("changed") and not re.search(r"\(was [^)]+\)", source):
            problems.append(f"{cells[0]}: changed, but does not say from what ('changed (was …)')")
    return problems


def test_every_glossary_row_has_a_source_and_each_changed_row_cites_a_page():
    rows = glossary_rows()
    assert _glossary_problems(rows) == []
    changed = [c[0] for c in rows if len(c) > 2 and c[2].startswith("changed")]
    assert len(changed) >= 6, changed
    # a planted fault of each kind is caught
    assert _glossary_problems([["fp16", "半精度", "", ""]]) == ["fp16: no source"]
    assert "cites no page" in _glossary_problems([["x", "甲", "changed (was 乙): common usage", ""]])[0]
    assert "from what" in _glossary_problems([["x", "甲", "changed: <https://a.org/b.html> 甲", ""]])[0]


def test_the_decided_terms_are_the_glossary_terms_and_are_checked():
    checked = {en: zh for en, zh, _ in glossary_terms()}
    for en, zh in DECIDED.items():
        assert checked.get(en) == zh, (en, checked.get(en), zh)
    chosen = {row[1] for row in glossary_rows() if len(row) > 1}
    for old in ("有效数字", "机器精度", "逐张量缩放", "分块缩放", "激活检查点", "跳过的步", "回退因子"):
        assert old not in chosen, old


def replaced_forms_used(text: str, rows=None) -> list[str]:
    """The forms in the glossary's "never" column that ``text`` uses, each as "form (term)"; a form inside a longer
    term of the glossary (矩阵乘 in 矩阵乘法) is not one."""
    rows = [r for r in (glossary_rows() if rows is None else rows) if len(r) == 5 and r[0] != "English"]
    terms = [t.strip() for r in rows for t in r[1].split("/") if t.strip()]
    found = []
    for row in rows:
        for form in (f.strip() for f in row[3].split(",") if f.strip() and not set(f.strip()) <= set("-:")):
            for m in re.finditer(re.escape(form), text):
                covered = any(text[m.start() - k:m.start() - k + len(t)] == t
                              for t in terms if len(t) > len(form) for k in range(len(t) - len(form) + 1))
                if not covered:
                    found.append(f"{form} ({row[1]})")
    return found


def test_no_translation_uses_a_form_the_glossary_replaced():
    used = {f"{path.name} [{e.msgctxt}]": replaced_forms_used(e.msgstr)
            for path in CATALOGS for e in polib.pofile(str(path), wrapwidth=0) if not e.obsolete}
    used = {k: v for k, v in used.items() if v}
    assert not used, f"forms the glossary replaced (its 'never' column), still in translations: {used}"
    rows = [["hysteresis", "滞后次数", "x", "滞后额度, 滞后计数", "✓"], ["m", "矩阵乘法", "x", "矩阵乘", ""]]
    assert replaced_forms_used("用掉了滞后额度；一次矩阵乘", rows) == ["滞后额度 (滞后次数)", "矩阵乘 (矩阵乘法)"]
    assert replaced_forms_used("剩余滞后次数；一次矩阵乘法", rows) == []


_WIDTH = re.compile(r"^(?:.?[<>^=])?[+\- ]?#?0?(\d+)")


def _columns(fstring: ast.JoinedStr) -> list[tuple[str, object, str]]:
    """An f-string as ("text", literal, "") and ("field", the field's node, its format spec) parts."""
    out: list[tuple[str, object, str]] = []
    for v in fstring.values:
        if isinstance(v, ast.Constant):
            out.append(("text", v.value, ""))
        else:
            spec = "".join(c.value for c in (v.format_spec.values if v.format_spec else [])
                           if isinstance(c, ast.Constant))
            out.append(("field", v.value, spec))
    return out


def header_misfits(source: str) -> list[str]:
    """Printed tables whose header does not end its columns where the rows do (a Chinese character is two columns):
    the header is an f-string whose fields are all string literals (f"{'损失':>8s} ..."), its rows the next f-string
    with as many fields, each with a width; one line per header field that ends elsewhere."""
    def dw(text: str) -> int:
        return len(text) + sum(unicodedata.east_asian_width(c) in "WF" for c in text)

    tables = [_columns(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.JoinedStr)]
    is_header = [sum(k == "field" for k, *_ in t) >= 3 and all(isinstance(v, ast.Constant) and isinstance(v.value, str)
                                                                for k, v, _ in t if k == "field") for t in tables]
    problems = []
    for i, head in enumerate(tables):
        n = sum(k == "field" for k, *_ in head)
        rows = [t for t, h in zip(tables[i + 1:], is_header[i + 1:]) if not h and sum(k == "field" for k, *_ in t) == n]
        if not is_header[i] or not rows:
            continue
        ends, pos = [], 0
        for kind, value, spec in rows[0]:
            width = _WIDTH.match(spec) if kind == "field" else None
            if kind == "field" and not width:
                break
            pos += dw(value) if kind == "text" else int(width.group(1))
            ends += [pos] if kind == "field" else []
        pos, k = 0, 0
        for kind, value, spec in head:
            if kind == "text":
                pos += dw(value)
                continue
            if k == len(ends):
                break
            pos += dw(format(value.value, spec))
            if pos != ends[k]:
                problems.append(f"{value.value!r} ends at column {pos}, its rows' column at {ends[k]}")
            k += 1
    return problems


def test_translated_table_headers_end_their_columns_where_the_rows_do():
    found = {f"{path.name} [{e.msgctxt}]": header_misfits(e.msgstr)
             for path in CATALOGS[:-1] for e in polib.pofile(str(path), wrapwidth=0)
             if not e.obsolete and (e.comment or "").startswith("code") and e.msgstr
             and not (e.tcomment or "").startswith("layout:")}   # a translator's note says how it lines up instead
    found = {k: v for k, v in found.items() if v}
    assert not found, f"misaligned headers (fit the format width to the label's display width): {found}"
    en = 'print(f"{\'loss\':>8s} {\'step\':>6s} {\'scale\':>7s}")\nprint(f"{x:8.3f} {n:6d} {s:7g}")'
    assert header_misfits(en) == []
    assert header_misfits(en.replace("'loss':>8s", "'损失':>8s")) == ["'损失' ends at column 10, its rows' column at 8",
                                                                    "'step' ends at column 17, its rows' column at 15",
                                                                    "'scale' ends at column 25, its rows' column at 23"]
    assert header_misfits(en.replace("'loss':>8s", "'损失':>6s")) == []


@pytest.mark.parametrize("edition", [ROOT / "notebooks", ROOT / "notebooks" / "zh_CN"], ids=["en", "zh_CN"])
def test_the_series_table_of_notebook_00_lists_every_notebook(edition):
    nb = json.loads((edition / "00_start_here.ipynb").read_text(encoding="utf-8"))
    tables = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown" and "| `00_start_here` |" in
              "".join(c["source"])]
    assert len(tables) == 1, "notebook 00 has one series table"
    listed = re.findall(r"^\| `(\d\d_\w+)` \|", tables[0], re.M)
    assert listed == [p.stem for p in NOTEBOOKS], listed


_ENGLISH_QUOTE = re.compile(r"“([^”]*)”")


def unglossed_quotes(text: str) -> list[str]:
    """English quoted in a Chinese text without its Chinese gloss. The edition's policy (docs/glossary.md): the English
    original in “…” (so a learner can search the source), then the gloss in （…）, or after “，即” where the quote
    already sits in parentheses."""
    return [m.group(0) for m in _ENGLISH_QUOTE.finditer(text)
            if len(re.findall(r"[A-Za-z]{2,}", m.group(1))) >= 3 and not text.startswith(("（", "，即"), m.end())]


def test_every_english_quote_has_its_chinese_gloss():
    found = {f"{path.name} [{e.msgctxt}]": unglossed_quotes(e.msgstr)
             for path in CATALOGS for e in polib.pofile(str(path), wrapwidth=0)
             if not e.obsolete and not (e.comment or "").startswith(("code", "figure")) and e.msgctxt != "figure"}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"English quotes without a Chinese gloss: {found}"
    assert unglossed_quotes("文档写道：“Keep the weights in fp32”。") == ["“Keep the weights in fp32”"]
    assert unglossed_quotes("文档写道：“Keep the weights in fp32”（权重保持 fp32）。") == []
    assert unglossed_quotes("（文档：“Keep the weights in fp32”，即权重保持 fp32）") == []


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_catalog_has_no_missing_stale_or_wrong_translation(path):
    terms = glossary_terms()
    problems = [p for e in polib.pofile(str(path), wrapwidth=0) if not e.obsolete for p in entry_problems(e, terms)]
    assert not problems, (f"{len(problems)} problems (python -m ampkit._i18ntools check {path}):\n"
                          + "\n".join(problems[:30]))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_catalog_holds_exactly_the_english_of_now(nb):
    english = json.loads(nb.read_text())
    wanted = {(e.msgctxt, e.msgid) for e in notebook_entries(english, nb.name)}
    literals = code_literals(english)
    po = polib.pofile(str(notebook_po(nb)), wrapwidth=0)
    have = {(e.msgctxt, e.msgid) for e in po if not e.obsolete and not kept_by_hand(e, literals)}
    assert not wanted - have, f"English not in the catalog (make translations): {sorted(wanted - have)[:3]}"
    assert not have - wanted, f"entries whose English is gone (make translations): {sorted(have - wanted)[:3]}"


def test_package_catalog_holds_exactly_the_messages_of_now():
    entries, problems = package_entries(ROOT / "ampkit")
    assert not problems
    wanted = {(e.msgctxt, e.msgid) for e in entries}
    have = _keys(PACKAGE_PO)
    assert wanted == have, (sorted(wanted - have)[:3], sorted(have - wanted)[:3])


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_chinese_notebook_is_what_make_translations_writes(nb):
    committed = json.loads(zh_path(nb).read_text())
    assert same_source(committed, translated_notebook(nb)), \
        f"notebooks/zh_CN/{nb.name} differs from its English and catalog: run make translations"


def test_compiled_catalog_is_up_to_date_and_consistent():
    po, conflicts = compiled_entries()
    assert not conflicts, conflicts
    want = {(e.msgctxt, e.msgid): e.msgstr for e in po}
    have = {(e.msgctxt, e.msgid): e.msgstr for e in polib.mofile(str(PACKAGE_MO))}
    assert have == want, "ampkit.mo is stale: make translations"


# --- the checks themselves (each planted fault is caught) -----------------------------------------------------

def _e(msgid, msgstr, kind="markdown", ctx="c1", **kw):
    e = polib.POEntry(msgctxt=ctx, msgid=msgid, msgstr=msgstr, comment=f"{kind}: x", **kw)
    return entry_problems(e, glossary_terms())


def test_each_planted_fault_is_caught():
    en = "fp16's largest value is 65504 (`info(\"fp16\").max`, $2^{16}$), see [docs](../docs/reference.md)."
    good = "fp16 的最大值是 65504（`info(\"fp16\").max`，$2^{16}$），见 [文档](../docs/reference.md)。"
    assert _e(en, good) == []
    assert any("missing" in p for p in _e(en, ""))
    assert any("stale" in p for p in _e(en, good, flags=["fuzzy"]))
    same = "The scale doubles after clean steps."
    assert any("untranslated" in p for p in _e(same, same))
    for broken in (good.replace("65504", "65,504"), good.replace("`info(\"fp16\").max`", "`info()`"),
                   good.replace("$2^{16}$", "2^16"), good.replace("../docs/reference.md", "reference.md")):
        assert any("tokens" in p for p in _e(en, broken)), broken
    assert any("glossary" in p for p in _e("Loss scaling keeps gradients.", "损失放大让梯度保留下来。"))
    assert _e("Loss scaling keeps gradients.", "损失缩放让梯度保留下来。") == []
    # a code block's comments may be translated, its code may not; a MindSpore page may become its Chinese page
    block = "Run:\n\n```python\nx = f(1)   # the loss\n```\n"
    assert _e(block, "运行：\n\n```python\nx = f(1)   # 损失\n```\n") == []
    assert any("tokens" in p for p in _e(block, "运行：\n\n```python\nx = f(2)   # 损失\n```\n"))
    ms = "See [sinking](https://www.mindspore.cn/docs/en/r2.4.10/model_train/train_process/optimize/sink_mode.html)."
    assert _e(ms, ms.replace("See [sinking]", "见[下沉模式]").replace("/en/", "/zh-CN/")) == []
    assert any("tokens" in p for p in _e(ms, "见[下沉模式](https://www.mindspore.cn/docs/zh-CN/r2.4.10/other.html)。"))
    pytest.importorskip("markdown_it")
    bold = "The kit teaches **automatic mixed precision (AMP)** on a CPU."
    assert any("bold shown as '**'" in p for p in _e(bold, "本工具包讲解**自动混合精度（AMP）**的用法。"))
    assert _e(bold, "本工具包讲解**自动混合精度**（AMP）的用法。") == []


def test_code_cells_must_stay_the_same_program():
    en = 'x = 1   # the answer\nprint(f"{x} steps skipped")\nax.set_title("loss")\n'
    ok = 'x = 1   # 答案\nprint(f"跳过了 {x} 步")\nax.set_title("loss")\n'
    assert _e(en, ok, kind="code") == []
    assert any("same program" in p for p in _e(en, ok.replace("x = 1", "y = 1"), kind="code"))
    assert any("same program" in p for p in _e(en, ok.replace('set_title("loss")', 'set_title("损失")'), kind="code"))
    assert any("parse" in p for p in _e(en, ok.replace("print(", "print(("), kind="code"))
    assert any("untranslated code" in p for p in _e(en, en, kind="code"))
    assert _e(en, en, kind="code", tcomment="same: nothing a reader sees") == []


def test_messages_and_figure_templates_keep_their_fields():
    assert _e("{n} steps skipped", "跳过了 {n} 步", kind="message", ctx=None) == []
    assert any("fields" in p for p in _e("{n} steps skipped", "跳过了 {m} 步", kind="message", ctx=None))
    assert _e("static 2^{}: final loss {}", "静态 2^{0}：最终损失 {1}", kind="figure", ctx="figure") == []
    assert any("fields" in p for p in _e("static 2^{}: final loss {}", "静态 2^{0}", kind="figure", ctx="figure"))


def test_update_marks_a_changed_cell_stale_and_keeps_its_old_english():
    po = polib.POFile(wrapwidth=0)
    po.append(polib.POEntry(msgctxt="c1", msgid="Old text.", msgstr="旧文本。"))
    po.append(polib.POEntry(msgctxt="c2", msgid="Same.", msgstr="相同。"))
    po.append(polib.POEntry(msgctxt="c3", msgid="Gone.", msgstr="删除。"))
    new = _merge(po, [Entry("c1", "New text.", "markdown"), Entry("c2", "Same.", "markdown"),
                      Entry("c4", "Added.", "markdown")], "t")
    by = {e.msgctxt: e for e in new}
    assert by["c1"].msgstr == "旧文本。" and "fuzzy" in by["c1"].flags and by["c1"].previous_msgid == "Old text."
    assert by["c2"].msgstr == "相同。" and "fuzzy" not in by["c2"].flags
    assert by["c4"].msgstr == "" and "c3" not in by
    hand = polib.POEntry(msgctxt="figure", msgid="outliers (transient)", msgstr="离群批次（暂时）",
                         tcomment="by hand: a dict key the figure shows")
    po.append(hand)
    assert "outliers (transient)" in {e.msgid for e in _merge(po, [], "t", literals={"outliers (transient)"})}
    assert "outliers (transient)" not in {e.msgid for e in _merge(po, [], "t", literals=set())}   # English gone
    assert any("stale" in p for p in entry_problems(by["c1"]))
