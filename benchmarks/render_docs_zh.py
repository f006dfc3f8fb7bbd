"""The measured tables of the Chinese instructor guide (docs/instructor-guide.zh-CN.md), in Chinese, from the same JSON
as the English ones — never typed by hand, never copied from the English page.

benchmarks/render_docs.py calls :func:`region_bodies` and writes its regions with the English ones
(``python benchmarks/render_docs.py``, ``--check``); this module only makes the text. Its regions are the English
guide's: ``notebooks``, ``agenda-half``, ``agenda-full``, ``offline``, ``hub`` and ``storm`` (the login storm, from
benchmarks/results/hub_storm.json; the English ``storm`` region is benchmarks/render_storm.py's). The agendas' plans
(minutes, blocks) are render_docs.HALF_DAY/FULL_DAY; what each block covers is translated in :data:`COVERS`.

The names the guide quotes from a Chinese page (a view's label, a scenario's name, a notebook's heading, the way the
notebooks call the exercises' check) are generated too, from what the Chinese pages are made of, never typed twice:
an inline ``<!-- name:KEY -->text<!-- /name -->`` holds the text :func:`shown_name` gives for KEY (:data:`NAME_KEYS`).

Free text that a benchmark writes into its JSON (the offline run's ``tests_run`` and ``note``) is translated in
:data:`TEXT`; a new text without a translation is shown in English, marked （英文原文）, and
tests/test_docs_generated.py fails until it is added here. Error messages of failed runs stay as the benchmark
wrote them (they are log lines); only the sentence around them is Chinese.
"""
from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

GUIDE_ZH = "docs/instructor-guide.zh-CN.md"
PACKAGE_PO = "ampkit/locale/zh_CN/LC_MESSAGES/ampkit.po"
ZH_NOTEBOOKS = "notebooks/zh_CN"

#: an inline name of the Chinese guide (``<!-- name:KEY -->text<!-- /name -->``); no line break inside
NAME = re.compile(r"<!-- name:(?P<key>[^\n]*?) -->(?P<text>[^\n]*?)<!-- /name -->")
#: the kinds of KEY, and where the text comes from
NAME_KEYS = {
    "view:MSGID": "what a view or message shows for MSGID: its msgstr in " + PACKAGE_PO,
    "heading:NN:PREFIX": "the heading of the Chinese notebook NN that starts with PREFIX, the rest of it (the stored "
                         "notebook, generated from translations/zh_CN/NN_*.po)",
    "room:KEY": "a word of the room view's page (ampkit/classroom/roomview/page.py WORDS), in the guide's language",
    "check": "how the Chinese notebooks call an exercise's check: the first check call of the stored "
             f"{ZH_NOTEBOOKS}/00_*.ipynb, its first argument kept and the rest shown as ...",
}

#: what each agenda block covers (render_docs.HALF_DAY / FULL_DAY), in Chinese
COVERS = {
    "doctor, device report, first slider; exercises 1 and 4": "doctor、设备报告、第一个滑块；练习 1 和 4",
    "doctor, device report, first slider; exercises 1 and 2": "doctor、设备报告、第一个滑块；练习 1 和 2",
    "float explorer, overflow, underflow, the gradient range map; exercises 1 and 4":
        "浮点数探索器、上溢、下溢、梯度范围图；练习 1 和 4",
    "op table, O0-O3 side by side, memory, O3's failure, the O-level picker":
        "算子表、O0-O3 并排比较、内存、O3 的失败、O 级别选择器",
    "visual loss scaler, static vs dynamic, the replay; exercises 1-3": "可视化损失缩放器、静态与动态、回放；练习 1-3",
    "questions; what to read next (04-06 alone)": "答疑；接下来读什么（04-06 自学）",
    "all sections; exercises 1-4": "全部小节；练习 1-4",
    "all sections; exercises 1-3": "全部小节；练习 1-3",
    "sections 1-9 taught, 10-13 as reading; exercises 1-5": "讲授第 1-9 节，第 10-13 节作为阅读材料；练习 1-5",
    "timeline simulator, the three sinks, calibration; exercises 1 and 3": "时间线模拟器、三种下沉、校准；练习 1 和 3",
    "recipes 1.1-1.6, troubleshooting, the AMP doctor; exercises 1, 3 and 4":
        "用法 1.1-1.6、问题排查、AMP 医生；练习 1、3 和 4",
    "recipes, HYBRID, delayed scaling, amax history, MX and 1x128 blocks; exercises 1, 3 and 4":
        "各种方案、HYBRID、延迟缩放、amax 历史、MX 块和 1x128 小块；练习 1、3 和 4",
    "questions; the reference page": "答疑；参考资料页",
    "": "",
}
#: the agenda's pauses
PAUSES = {"break": "休息", "lunch": "午餐", "wrap-up": "总结"}

#: free text the benchmarks write into their JSON
TEXT = {
    "pytest notebooks/ (make test's notebook part: every notebook run by nbval-lax, the repository's config)":
        "pytest notebooks/（`make test` 的 notebook 部分：每个 notebook 都由 nbval-lax 按仓库的配置运行）",
    "one run: timings vary from run to run; this machine's pip configuration adds a local wheel mirror, so the "
    "download is faster here than over the internet":
        "只运行了一次：每次运行的耗时都有出入；这台机器的 pip 配置加了一个本地 wheel 镜像，"
        "所以这里的下载比通过互联网更快",
}

#: the run times are the Chinese notebooks' own (benchmarks/results/notebooks_zh_CN.json)
ZH_RUN_NOTE = "运行时间是中文 notebook（`notebooks/zh_CN/`）的实测值，每个 notebook 取 3 次 Run All 的中位数。"


@lru_cache(maxsize=4)
def _package_catalog(root: str) -> dict[str, str]:
    import polib

    return {e.msgid: e.msgstr for e in polib.pofile(str(Path(root) / PACKAGE_PO)) if e.msgstr and not e.obsolete}


def _zh_notebook(root: Path, nn: str, lang: str = "zh_CN") -> dict:
    folder = ZH_NOTEBOOKS if lang == "zh_CN" else "notebooks"
    found = sorted((root / folder).glob(f"{nn}_*.ipynb"))
    if not found:
        raise ValueError(f"no notebook {nn}_*.ipynb in {folder}/")
    return json.loads(found[0].read_text(encoding="utf-8"))


def _cells(nb: dict, kind: str) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == kind]


def shown_name(key: str, root: Path, lang: str = "zh_CN") -> str:
    """The text for an inline name's KEY (:data:`NAME_KEYS`), from the files under ``root``; ``lang="en"``: the
    English pages' (a view's msgid itself, the English notebooks), for the English guide's names."""
    kind, _, rest = key.partition(":")
    if kind == "view" and lang == "en":
        return rest
    if kind == "view":
        shown = _package_catalog(str(root)).get(rest)
        if shown is None:
            raise ValueError(f"name {key!r}: no translated msgid {rest!r} in {PACKAGE_PO}")
        return shown
    if kind == "room":
        from ampkit.classroom.roomview.page import WORDS  # the room view's page: standard library only

        if rest not in WORDS[lang]:
            raise ValueError(f"name {key!r}: the room view's page has no word {rest!r}")
        return WORDS[lang][rest]
    if kind == "heading":
        nn, _, prefix = rest.partition(":")
        for cell in _cells(_zh_notebook(root, nn, lang), "markdown"):
            for line in cell.splitlines():
                title = line.lstrip("#").strip()
                if line.startswith("#") and title.startswith(prefix):
                    return title[len(prefix):].strip()
        raise ValueError(f"name {key!r}: no heading starting with {prefix!r} in the Chinese notebook {nn}")
    if kind == "check" and not rest:
        for cell in _cells(_zh_notebook(root, "00", lang), "code"):
            m = re.search(r"^([\w.]*\bcheck)\(([^,()]+),", cell, re.M)
            if m:
                return f"{m.group(1)}({m.group(2).strip()}, ...)"
        raise ValueError(f"name {key!r}: no check call in the Chinese notebook 00")
    raise ValueError(f"name {key!r}: unknown kind; the kinds are {', '.join(NAME_KEYS)}")


def fill_names(text: str, root: Path, lang: str = "zh_CN") -> str:
    """``text`` with every inline name holding what :func:`shown_name` gives for its key, inside the Markdown
    emphasis or code marks it had (``*...*``, ``**...**``, a backtick). A name never starts a line: there
    CommonMark would read its comment as the start of an HTML block, and the line would lose its Markdown."""
    def fill(m: re.Match) -> str:
        lead = m["text"][:len(m["text"]) - len(m["text"].lstrip("*`"))]   # the marks around it, the same both ends
        trail = lead[::-1] if len(m["text"]) > 2 * len(lead) and m["text"].endswith(lead[::-1]) else ""
        lead = lead if trail else ""
        return f"<!-- name:{m['key']} -->{lead}{shown_name(m['key'], root, lang)}{trail}<!-- /name -->"

    starts = [line for line in text.splitlines() if re.match(r"\s*(?:[-*+]\s+|\d+\.\s+)?<!-- name:", line)]
    if starts:
        raise ValueError(f"a name starts a line (CommonMark would read an HTML block): {starts[0][:80]!r}")
    return NAME.sub(fill, text)


def text(english: str) -> str:
    """The Chinese for a text a benchmark wrote, or the English marked as such (a test lists the missing ones)."""
    return TEXT.get(english, f"{english}（英文原文）")


def measured_line(doc: dict) -> str:
    """Where and when a JSON file's figures were measured, and how to measure them again (render_docs.measured_line
    in Chinese)."""
    h = doc.get("host", {})
    return (f"*测于 {str(doc.get('date', '?'))[:10]}，{h.get('cpu', '?')}（{h.get('cores', '?')} 核，"
            f"{h.get('mem_gib', '?')} GiB 内存），Python {h.get('python', '?')}，torch {h.get('torch', '?')}；"
            f"用 `{doc.get('command', '?')}` 复现。其他机器上的数字会不同。{load_note(doc)}*")


def load_note(doc: dict) -> str:
    """render_docs.load_note in Chinese."""
    load = doc.get("load_avg")
    return (f"测量期间机器的 1 分钟负载均值：开始时 {load['start'][0]:.1f}，结束时 {load['end'][0]:.1f}："
            "还有其他工作在共用 CPU 核。") if load else ""


def missing(command: str, file: str) -> str:
    return (f"*尚未测量：运行 `{command}`（写入 benchmarks/results/{file}），"
            "然后运行 `python benchmarks/render_docs.py`。*")


def _num(x, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def notebooks_table(nb: dict) -> str:
    rows = ["| notebook | 一次 Run All，全新内核（s） | 作为测试，`pytest --nbval-lax`（s） | 预算（s） | 测试 |",
            "|---|---:|---:|---:|---|"]
    for n in nb["notebooks"]:
        budget = f"{n['budget_s']:.0f}" if n.get("budget_s") else "—"
        rows.append(f"| `{n['name']}` | {n['run_all_s']:.1f} | {n['nbval_s']:.1f} | {budget} | "
                    f"{'通过' if n['passed'] else '**失败**'} |")
    rows.append(f"| **全部** | **{nb['total_run_all_s']:.1f}** | {sum(n['nbval_s'] for n in nb['notebooks']):.1f} |"
                f" {nb.get('total_budget_s', 90):.0f} | |")
    return "\n".join(rows) + "\n\n" + measured_line(nb)


def agenda_table(plan: list[tuple[str, int, str]], nb: dict | None, start_min: int, missing_note: str) -> str:
    """render_docs.agenda_table in Chinese: the same clock, the same sums."""
    run_s = {n["name"]: n["run_all_s"] for n in nb["notebooks"]} if nb else {}
    rows = ["| 开始时间 | 时间块 | 内容 | 讲授 + 练习（计划，min） | 一次 Run All（实测，s） | 时间块（min） |",
            "|---|---|---|---:|---:|---:|"]
    t, planned, measured = start_min, 0, 0.0
    for block, minutes, covers in plan:
        if covers not in COVERS:
            raise ValueError(f"no Chinese for the agenda's {covers!r}: add it to COVERS in "
                             "benchmarks/render_docs_zh.py")
        is_nb = block[:2].isdigit()
        secs = run_s.get(block) if is_nb else None
        extra = math.ceil(secs / 60) if secs is not None else 0
        label = f"`{block}`" if is_nb else f"*{PAUSES[block]}*"
        shown = f"{secs:.1f}" if secs is not None else ("未测量" if is_nb else "")
        rows.append(f"| {t // 60:02d}:{t % 60:02d} | {label} | {COVERS[covers]} | {minutes} | {shown} | "
                    f"{minutes + extra} |")
        t += minutes + extra
        planned += minutes
        measured += secs or 0.0
    rows.append(f"| {t // 60:02d}:{t % 60:02d} | *结束* | | {planned} | {measured:.1f} | {t - start_min} |")
    note = f"*{ZH_RUN_NOTE}*\n\n" + measured_line(nb) if nb else missing_note
    return "\n".join(rows) + "\n\n" + note


def offline_table(off: dict) -> str:
    platform = off["platform"] if isinstance(off["platform"], str) else ", ".join(off["platform"])
    summary = re.sub(r"(\d+) passed", r"\1 个通过", re.sub(r"(\d+) failed", r"\1 个失败", off["test_summary"]))
    rows = ["| 平台 | wheelhouse | wheel 数 | 下载（s） | 安装：全新 venv，`--no-index`（s） | 测试（s） | 结果 |",
            "|---|---:|---:|---:|---:|---:|---|",
            f"| `{platform}` | {off['wheelhouse_mib']:.0f} MiB | {off['n_wheels']} | {off['download_s']:.0f} | "
            f"{off['install_s']:.0f} | {off['test_s']:.0f} | {summary} |"]
    note = f"运行说明：{text(off['note'])}。" if off.get("note") else ""
    return "\n".join(rows) + f"\n\n运行的测试：{text(off['tests_run'])}。{note}\n\n" + measured_line(off)


def _errors(errors: list[str]) -> str:
    first_hand = [e for e in errors if "another learner failed" not in e] or errors
    rest = len(errors) - len(first_hand)
    return "；".join(first_hand[:3]) + (f"；另有 {rest} 名学习者因此停止" if rest else "")


def hub_table(hub: dict) -> str:
    rows = ["| 学习者数 K | notebook 03 的 Run All，中位数 / 最大值（s） | 滑块更新，中位数 / p90（ms） | 更新次数 |"
            " 每名学习者内存（MiB） | hub（MiB） | 全部正常 |", "|---:|---:|---:|---:|---:|---:|---|"]
    for r in hub["runs"]:
        errors = f"（{_errors(r['errors'])}）" if r.get("errors") else ""
        nb, up = r.get("notebook_s") or {}, r.get("update_ms") or {}
        rows.append(f"| {r['k']} | {_num(nb.get('median'), 1)} / {_num(nb.get('max'), 1)} | "
                    f"{_num(up.get('median'), 0)} / {_num(up.get('p90'), 0)} | {up.get('n', 0)} | "
                    f"{_num(r.get('mem_per_learner_mib'), 0)} | {_num(r.get('hub_mem_mib'), 0)} | "
                    f"{'是' if r['ok'] else '否'}{errors} |")
    k = hub.get("max_k_under_200ms") or 0
    verdict = (f"滑块更新的中位数保持在 200 ms 以下的最大 K：**{k}**。" if k else
               "这里没有哪个 K 能让滑块更新的中位数保持在 200 ms 以下。")
    if k and k >= max(r["k"] for r in hub["runs"]):
        verdict += "这已是测过的最大 K：这台机器也许还能容纳更多学习者。"
    ok = {r["k"]: r for r in hub["runs"] if r.get("ok") and (r.get("notebook_s") or {}).get("median") is not None}
    if k and k in ok and min(ok) != k:
        alone, at_k = ok[min(ok)]["notebook_s"]["median"], ok[k]["notebook_s"]["median"]
        verdict += (f"K = {k} 时滑块仍然流畅，但全场在同一时刻开始的 Run All 要分享 CPU 核：K = {k} 时 notebook 03 "
                    f"每人耗时 {at_k:.0f} s，K = {min(ok)} 时为 {alone:.0f} s。请错开 Run All（在开场介绍时就让全场"
                    "运行这个 notebook），或者每台机器少安排一些学习者。")
    return ("\n".join(rows) + f"\n\n每名学习者先完整运行 `{hub.get('notebook', '03_loss_scaling')}`，再做 "
            f"{hub.get('updates_per_learner', '?')} 次滑块更新，所有学习者同时进行。{verdict}\n\n" + measured_line(hub))


def _dist(d: dict | None) -> str:
    d = d or {}
    return " / ".join(_num(d.get(q), 1) for q in ("median", "p90", "max"))


def storm_table(doc: dict, storm_goal, learners: int = 30) -> str:
    """The login storm's table and verdict; ``storm_goal``: render_docs.storm_goal (the one rule)."""
    rows = ["| K | 开始时的负载均值 | 登录 / 启动服务器 / 内核 / 滑块失败数 | 重试的 429 | "
            "从登录到服务器就绪，中位数 / p90 / 最大值（s） | 到第一个控件出现，中位数 / p90 / 最大值（s） | "
            "notebook 03 的 Run All，中位数 / 最大值（s） | 滑块更新，中位数 / p90（ms） | "
            "每名学习者内存（MiB） | 机器的内存峰值（GiB） | 全部正常 |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in doc["runs"]:
        up, ra, mem = r.get("update_ms") or {}, r.get("run_all_s") or {}, r.get("mem_per_learner_mib") or {}
        failed = " / ".join(str(r.get(f"failed_{s}s", 0)) for s in ("login", "spawn", "kernel", "slider"))
        why = [w for s in ("login", "spawn", "kernel", "slider") for w in r.get(f"failed_{s}_why", [])] + r["errors"]
        note = f"（{'；'.join(why[:2])}）" if not r["ok"] and why else ""
        rows.append(f"| {r['k']} | {r['load_avg_at_start'][0]:.2f} | {failed} | {r.get('retries_429', 0)} | "
                    f"{_dist(r.get('ready_s'))} | {_dist(r.get('first_widget_s'))} | {_num(ra.get('median'), 1)} / "
                    f"{_num(ra.get('max'), 1)} | {_num(up.get('median'), 0)} / {_num(up.get('p90'), 0)} | "
                    f"{_num(mem.get('median'), 0)} | {_num(r.get('peak_mem_gib'), 1)} | "
                    f"{'是' if r['ok'] else '否'}{note} |")
    first = doc["runs"][0]
    s = first.get("settings", {})
    browser = [(r["k"], r.get("update_ms_browser") or {}) for r in doc["runs"]]
    bnote = "；".join(f"K = {k}：{_num(b.get('median'), 0)} ms" for k, b in browser if b.get("n"))
    met, failed, median = storm_goal(doc, learners)
    limit = doc.get("limit_ms", 200.0)
    goal = (f"K = {learners} 没有运行：{learners} 人教室的目标尚未测量。" if met is None else
            f"这台机器上 {learners} 人教室的目标（没有失败的登录或内核，滑块更新的中位数不超过 {limit:.0f} ms）："
            f"**{'达到' if met else '未达到'}**。登录、启动服务器或内核失败 {failed} 次，滑块更新的中位数为 "
            f"{_num(median, 0)} ms。")
    return ("\n".join(rows) + f"\n\n每个 K：一个按教室默认设置全新启动的 hub（同时启动的服务器最多 "
            f"{s.get('spawn_limit')} 个，同时运行的最多 {s.get('max_servers')} 个，每名学习者的内核 "
            f"{s.get('kernel_threads')} 个线程）；K 名学习者在 {first.get('window_s', 60):.0f} s 内按固定随机种子的"
            f"时刻到达，通过登录表单登录，等待各自的服务器，运行 notebook 03，并移动它的滑块 "
            f"{doc.get('updates_per_learner', '?')} 次。其中 {first.get('browsers', 0)} 人使用无头 Chromium（在浏览器中"
            f"看到的滑块中位数，含页面重绘：{bnote or '未测量'}），其余的通过 HTTP 和内核的 websocket。开始时的负载均值"
            f"（1 分钟）反映当时机器上的其他工作。{goal}\n\n" + measured_line(doc))


def region_bodies(results: dict, half: list, full: list, start_min: int, sources: dict,
                  storm_goal=None) -> dict[str, str]:
    """Region name -> Chinese body for docs/instructor-guide.zh-CN.md. ``results``: render_docs.load_results
    (with ``storm``: hub_storm.json or None); ``sources``: render_docs.SOURCES (how to measure what is missing)."""
    nb, off, hub, storm = results.get("notebooks_zh"), results["offline"], results["hub"], results.get("storm")

    def gap(name: str) -> str:
        file, command = sources[name]
        return missing(command, file)

    return {"notebooks": notebooks_table(nb) if nb else gap("notebooks_zh"),      # the Chinese notebooks' times
            "agenda-half": agenda_table(half, nb, start_min, gap("notebooks_zh")),
            "agenda-full": agenda_table(full, nb, start_min, gap("notebooks_zh")),
            "offline": offline_table(off) if off else gap("offline"),
            "hub": hub_table(hub) if hub else gap("hub"),
            "storm": (storm_table(storm, storm_goal) if storm else
                      missing("python benchmarks/bench_storm.py --k 10,20,30", "hub_storm.json"))}
