"""The Chinese instructor guide (docs/instructor-guide.zh-CN.md) against the English one: every section has its
Chinese counterpart, in the same order; every generated region exists in both and is in sync with the JSON
(benchmarks/render_docs.py, text from benchmarks/render_docs_zh.py); each notebook's section names the same
exercises and links the Chinese notebook."""
from __future__ import annotations

import re

import pytest
from test_docs_generated import ROOT, _exercise_numbers, _load, hub_json, notebooks_json, offline_json

rd = _load("render_docs")
zh = _load("render_docs_zh")
EN, ZH = ROOT / rd.GUIDE, ROOT / rd.GUIDE_ZH


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each Markdown heading, outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.+)", line)):
            out.append((len(m.group(1)), m.group(2)))
    return out


def sections(text: str) -> dict[str, str]:
    """Each notebook's section (``### `NN_name` ...``) by notebook name."""
    parts = re.split(r"^### `(\d\d_\w+)`", text, flags=re.M)[1:]
    return dict(zip(parts[::2], parts[1::2]))


def test_every_english_section_has_its_chinese_counterpart_in_order():
    en, cn = headings(EN.read_text()), headings(ZH.read_text())
    assert [lvl for lvl, _ in cn] == [lvl for lvl, _ in en], (en, cn)       # same outline, same order
    for (_, e), (_, c) in zip(en, cn):
        code_e, code_c = re.findall(r"`([^`]+)`", e), re.findall(r"`([^`]+)`", c)
        assert code_e == code_c, (e, c)                                      # the notebook names match
        assert re.search(r"[\u4e00-\u9fff]", c), f"heading not in Chinese: {c!r}"
    assert len(ZH.read_text().splitlines()) > 0.8 * len(EN.read_text().splitlines())   # the whole guide


def test_chinese_anchors_the_guide_links_exist():
    text = ZH.read_text()

    def anchor(title: str) -> str:   # GitHub's rule: lower case, punctuation dropped, spaces to hyphens
        return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")

    anchors = {anchor(t) for _, t in headings(text)}
    for target in re.findall(r"\]\(#([^)]+)\)", text):
        assert target in anchors, target


def test_every_generated_region_exists_in_both_guides_and_is_in_sync():
    assert rd.region_names(ZH.read_text()) == rd.region_names(EN.read_text())
    rendered = {path.relative_to(ROOT).as_posix(): (old, new) for path, (old, new) in rd.render().items()}
    old, new = rendered[rd.GUIDE_ZH]
    assert old == new, "run `python benchmarks/render_docs.py`: the Chinese guide is out of date with the JSON"
    bodies = rd.region_bodies(rd.load_results())[rd.GUIDE_ZH]
    for name, body in bodies.items():
        assert "（英文原文）" not in body, f"region {name}: a benchmark's text has no Chinese in render_docs_zh.TEXT"
        assert "Not measured" not in body and "Measured on" not in body, name


def test_agendas_keep_the_english_clock():
    """The same plan and the same clock rule as the English agendas, on the Chinese notebooks' times."""
    nb = notebooks_json()
    for plan in (rd.HALF_DAY, rd.FULL_DAY):
        en = rd.agenda_table(plan, nb).splitlines()[2:len(plan) + 3]
        cn = zh.agenda_table(plan, nb, rd.DAY_START_MIN, "").splitlines()[2:len(plan) + 3]
        cols = [[c.strip() for c in row.split("|")] for row in en], [[c.strip() for c in row.split("|")] for row in cn]
        for e, c in zip(*cols):
            shown = c[5].replace("未测量", "not measured")
            assert (e[1], e[4], e[5], e[6]) == (c[1], c[4], shown, c[6])    # start, minutes, Run All, block
            assert e[2].strip("`*") == c[2].strip("`*") or e[2].startswith("*")
    assert "未测量" in zh.agenda_table(rd.HALF_DAY, None, rd.DAY_START_MIN, "x")


def test_chinese_tables_on_synthetic_json():
    assert "| **全部** | **26.0** | 34.0 | 90 | |" in zh.notebooks_table(notebooks_json())
    text = zh.hub_table(hub_json())
    assert "**5**" in text and "测于 2026-01-02，Test CPU（2 核，8.0 GiB 内存）" in text and "| 否（timeout） |" in text
    off = zh.offline_table({**offline_json(), "test_summary": "7 passed, 1 failed", "note": "a new remark"})
    assert "7 个通过, 1 个失败" in off and "a new remark（英文原文）" in off     # untranslated text is marked
    assert "（英文原文）" not in zh.offline_table(rd.load_results()["offline"])


def test_storm_verdict_matches_the_english_one():
    storm = rd.load_results()["storm"]
    met, _, _ = rd.storm_goal(storm)          # the one rule, in render_docs; both pages say what it decides
    english = _load("render_storm").goal_text(storm)
    assert ("**met**" in english) == (met is True)
    assert ("**达到**" if met else "**未达到**") in zh.storm_table(storm, rd.storm_goal)
    assert not hasattr(zh, "storm_goal")      # no second copy of the rule in the Chinese renderer


def test_each_notebook_section_names_the_same_exercises_and_links_the_chinese_notebook():
    import nbformat

    en, cn = sections(EN.read_text()), sections(ZH.read_text())
    assert sorted(cn) == sorted(en)
    for name, text in cn.items():
        cn_ex = {int(n) for n in re.findall(r"练习 (\d+)", text)}
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        have = {int(n) for c in nb.cells if c.cell_type == "markdown"
                for n in re.findall(r"\*\*Exercise (\d+)\.\*\*", c.source)}
        assert _exercise_numbers(en[name]) <= cn_ex <= have, (name, cn_ex, have)
        link = f"../notebooks/zh_CN/{name}.ipynb"
        assert f"]({link})" in text and (ZH.parent / link).resolve().is_file(), name
        assert "**投影**" in text and "**结对练习：**" in text, name
    assert "](../notebooks/" not in re.sub(r"\]\(\.\./notebooks/zh_CN/", "", ZH.read_text())   # no English link


def test_chinese_guide_teaches_the_chinese_commands():
    text = ZH.read_text()
    for command in ("make lab LANG=zh_CN", "make present LANG=zh_CN", "make workshop LANG=zh_CN",
                    "make hub LANG=zh_CN"):
        assert command in text, command
    for banned in ("——", "小部件", "套件", "笔记本（", "取消缩放", "逐张量", "机器精度", "有效数字", "回退系数"):
        assert banned not in text, banned
    assert not re.search(r"\d %", text), "a space before % (67%, not 67 %)"


#: the views' labels the Chinese guide quotes (in *...* or **...**): each is what the Chinese view shows, a label of
#: ampkit/locale/zh_CN/LC_MESSAGES/ampkit.po (the start of one: "1×128 小块" of "1×128 小块，fp32 缩放因子")
QUOTED_LABELS = ["增长间隔", "预设", "应用修复后的运行", "1/√d 作用在 q 上", "历史长度", "方案", "OCP 向下取整",
                 "TE 向上取整", "低精度 dtype", "启动", "算子时间", "模式", "1×128 小块"]


def test_labels_the_guide_quotes_are_the_chinese_views_labels():
    import polib

    text = ZH.read_text()
    shown = [e.msgstr for e in polib.pofile(str(ROOT / "ampkit/locale/zh_CN/LC_MESSAGES/ampkit.po")) if e.msgstr]
    for label in QUOTED_LABELS:
        assert f"*{label}*" in text, label
        assert any(s == label or s.startswith(label + "（") or s.startswith(label + "，") for s in shown), label


#: words the guide quotes in code marks that are also msgids, shown as they are by the view: the timeline's mode key
#: `none` (ampkit/widgets/sink_timeline.py sends the key, the view prints it; the package's msgid "none" is the
#: device report's word)
SHOWN_AS_IS = {"none"}


def english_labels_quoted(text: str, catalog: dict[str, str]) -> list[str]:
    """The quoted names (``**x**``, ``*x*``, a backtick) outside the generated names that are msgids the Chinese
    pages translate: what the guide would quote in English while the Chinese view shows Chinese."""
    text = zh.NAME.sub("", text)
    quoted = [next(g for g in m.groups() if g) for m in
              re.finditer(r"\*\*`?([^*`\n]+?)`?\*\*|\*([^*\n]+?)\*|`([^`\n]+)`", text)]
    return [q for q in quoted if q not in SHOWN_AS_IS and catalog.get(q, q) != q]


def test_the_guide_quotes_no_english_label_that_a_chinese_view_translates():
    catalog = zh._package_catalog(str(ROOT))
    assert english_labels_quoted(ZH.read_text(), catalog) == []
    planted = "- **`log of zero`**：持续的。把 *history* 从 1 改为 16，`transient spikes`。"   # the old guide's form
    assert english_labels_quoted(planted, catalog) == ["log of zero", "history", "transient spikes"]


def test_the_names_the_guide_quotes_are_generated_from_the_chinese_pages():
    text = ZH.read_text()
    names = {m["key"]: m["text"] for m in zh.NAME.finditer(text)}
    # 05's scenarios as the AMP doctor shows them, 07's attention controls, 08's sections, the exercises' check call
    for key in ("view:log of zero", "view:transient spikes", "view:fp16 forward overflow", "view:head size",
                "view:1/√d on q", "heading:08:§8", "check", "room:reveal"):
        assert key in names, key
    assert names["view:log of zero"] == "**对 0 取对数**" and names["heading:08:§8"].startswith("在解码器上")
    assert names["room:reveal"] == "标出正确答案"                      # the room view's page word (page.WORDS)
    assert '"exercise' not in text and "'exercise" not in text
    # a planted stale name is rewritten from the catalog; an unknown key names the kinds; a name may not start a line
    stale = "场景 <!-- name:view:log of zero -->**log of zero**<!-- /name -->："
    assert zh.fill_names(stale, ROOT) == "场景 <!-- name:view:log of zero -->**对 0 取对数**<!-- /name -->："
    with pytest.raises(ValueError, match="the kinds are view:MSGID"):
        zh.fill_names("x <!-- name:label:x -->y<!-- /name -->", ROOT)
    with pytest.raises(ValueError, match="no translated msgid"):
        zh.fill_names("x <!-- name:view:no such label -->y<!-- /name -->", ROOT)
    with pytest.raises(ValueError, match="starts a line"):
        zh.fill_names("- <!-- name:check -->`x`<!-- /name --> 打印", ROOT)


def test_the_check_call_is_read_from_the_stored_chinese_notebooks(tmp_path):
    import json

    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("check(\"no\", 1)"),
                                         nbformat.v4.new_code_cell("x = 1\nex.check(1, answer_1)\n")])
    (tmp_path / "notebooks" / "zh_CN").mkdir(parents=True)
    (tmp_path / "notebooks" / "zh_CN" / "00_start_here.ipynb").write_text(json.dumps(nb))
    assert zh.shown_name("check", tmp_path) == "ex.check(1, ...)"        # the call as the notebook writes it
    stored = zh.shown_name("check", ROOT)
    nb0 = nbformat.read(next((ROOT / "notebooks" / "zh_CN").glob("00_*.ipynb")), as_version=4)
    code = "\n".join(c.source for c in nb0.cells if c.cell_type == "code")
    assert stored.endswith(", ...)") and stored[:-len(" ...)")] in code, stored
    assert "exercise" not in stored, stored
    english = zh.shown_name("check", ROOT, "en")          # the English guide's row, from English notebook 00
    # both editions call ex.check(N, answer_N): the exercise's name (and its hint) live in the package
    assert f"<!-- name:check -->`{english}`<!-- /name -->" in EN.read_text() and english == stored == "ex.check(1, ...)"


def test_the_chinese_tables_time_the_chinese_notebooks():
    results = rd.load_results()
    zh_nb, en_nb = results["notebooks_zh"], results["notebooks"]
    assert zh_nb is not None, "run: " + rd.SOURCES["notebooks_zh"][1]
    assert "--lang zh_CN" in zh_nb["command"] and {n["name"] for n in zh_nb["notebooks"]} <= {
        p.stem for p in (ROOT / "notebooks" / "zh_CN").glob("*.ipynb")}
    for n in zh_nb["notebooks"]:    # each time the median of the runs kept beside it
        runs = sorted(n["run_all_runs_s"])
        assert len(runs) >= 3 and n["run_all_s"] == runs[len(runs) // 2], n
    bodies = rd.region_bodies(results)[rd.GUIDE_ZH]
    first = zh_nb["notebooks"][0]
    assert f"| `{first['name']}` | {first['run_all_s']:.1f} |" in bodies["notebooks"]
    assert zh.ZH_RUN_NOTE in bodies["agenda-half"] and "英文 notebook" not in ZH.read_text()
    load = zh_nb["load_avg"]                   # the shared machine's load during the measurement, said with it
    assert f"开始时 {load['start'][0]:.1f}，结束时 {load['end'][0]:.1f}" in bodies["notebooks"]
    assert "Load average (1 min) on the machine: 2.0 at the start" in rd.measured_line(
        {**en_nb, "load_avg": {"start": [2.0, 1, 1], "end": [1.0, 1, 1]}}) and "Load" not in rd.measured_line(en_nb)
    # a planted English file in its place would show: the two measurements differ
    assert [n["run_all_s"] for n in zh_nb["notebooks"]] != [n["run_all_s"] for n in en_nb["notebooks"]]


def test_the_benchmark_times_the_notebooks_this_python_can_run():
    import importlib.util

    from test_docs_generated import bench_notebooks

    zh_dir = ROOT / "notebooks" / "zh_CN"
    assert bench_notebooks.runs_here(next(zh_dir.glob("00_*.ipynb")))
    nine = next(zh_dir.glob("09_*.ipynb"))          # needs MindSpore and Paddle (its English source says so)
    assert bench_notebooks.runs_here(nine) == all(importlib.util.find_spec(m) for m in ("mindspore", "paddle"))
