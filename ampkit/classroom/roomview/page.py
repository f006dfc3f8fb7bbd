"""The room view's page: one HTML document with its script, which asks ``api/room`` every 2 s and redraws.
Nothing is loaded from another address (the room's network may have no internet).

Its words are in the room's language: :data:`WORDS` holds each in every language of the kit (``ampkit._kit``),
the Chinese in the glossary's terms (docs/glossary.md). The service reads the language from ``$AMPKIT_LANG``,
which the hub sets for it from ``make hub LANG=zh_CN`` (``hubconfig.add_room_view``); unset: English.

>>> "api/room" in page_html("instructor", "token")
True
>>> "举手统计" in page_html("instructor", "token", lang="zh_CN")
True
"""
from __future__ import annotations

import html
import json
import os
import re

from ampkit._kit import LANGUAGES

__all__ = ["REFRESH_S", "WORDS", "page_html", "page_language"]

#: Seconds between two refreshes of the page.
REFRESH_S = 2
#: the environment variable the service reads its language from (the kit's own: ``ampkit.i18n.ENV_VAR``)
LANG_VAR = "AMPKIT_LANG"

#: Every word the page shows, by language: a key -> its text ({name}: a field the page fills in).
WORDS: dict[str, dict[str, str]] = {
    "en": {
        "html_lang": "en", "title": "Room view", "logged_in": "Logged in as {user}",
        "refreshed": "refreshed every {s} s", "waiting": "waiting…", "hands": "Show of hands",
        "latest": "the exercise of the latest check", "reveal": "mark correct answers",
        "no_exercise": "No exercise checked yet.", "learners": "Learners", "name": "name", "notebook": "notebook",
        "last_cell": "last cell", "last_report": "last report", "exercises": "exercises",
        "legend": "✓ correct · ✗ not yet · sol: ran the solution · grey: no report for over {quiet} s.",
        "sent": "What a learner's kernel sends is in their own folder (room-view-sent.jsonl).",
        "ago_s": "{n} s ago", "ago_min": "{n} min ago",
        "predictions": "{exercise}: {n} prediction(s) before the solution",
        "after": ", {n} answered only after it", "seen": "; {n} ran the solution.", "correct": "✓ correct",
        "count": "{n} · {stuck} with an error in their last cell", "exercises_of": "exercises of {nb}: ",
        "ran": "ran", "failing": "{error} · {cells} cell(s) in a row, since {ago}", "updated": "updated {time}",
        "not_updated": "not updated: {error}",
    },
    "zh_CN": {
        "html_lang": "zh-CN", "title": "教室视图", "logged_in": "登录用户：{user}",
        "refreshed": "每 {s} 秒刷新一次", "waiting": "等待中…", "hands": "举手统计",
        "latest": "最近一次检查的练习", "reveal": "标出正确答案",
        "no_exercise": "还没有人检查过练习。", "learners": "学习者", "name": "用户名", "notebook": "notebook",
        "last_cell": "最后一个单元格", "last_report": "最后一次报告", "exercises": "练习",
        "legend": "✓ 正确 · ✗ 尚未答对 · sol：运行了答案 · 灰色：超过 {quiet} 秒没有报告。",
        "sent": "学习者的内核发送了什么，记录在学习者自己的文件夹中（room-view-sent.jsonl）。",
        "ago_s": "{n} 秒前", "ago_min": "{n} 分钟前",
        "predictions": "{exercise}：在查看答案之前有 {n} 个预测",
        "after": "，{n} 个在查看答案之后才作答", "seen": "；{n} 人运行了答案。", "correct": "✓ 正确",
        "count": "{n} 人 · {stuck} 人的最后一个单元格出错", "exercises_of": "{nb} 的练习：",
        "ran": "已运行", "failing": "{error} · 连续 {cells} 个单元格出错，始于 {ago}", "updated": "已更新 {time}",
        "not_updated": "未更新：{error}",
    },
}


def page_language(environ: dict[str, str] | None = None) -> str:
    """The room's language from ``$AMPKIT_LANG`` (unset or empty: English); another value is a ``ValueError``
    naming the languages."""
    lang = (os.environ if environ is None else environ).get(LANG_VAR, "") or "en"
    if lang not in LANGUAGES:
        raise ValueError(f"{LANG_VAR}={lang!r}: the room view speaks {', '.join(LANGUAGES)}")
    return lang


_PAGE = r"""<!doctype html>
<html lang="{{html_lang}}"><head><meta charset="utf-8"><title>{{title}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="xsrf" content="__XSRF__">
<style>
 body { font: 15px system-ui, sans-serif; margin: 1.2em 2em; color: #222; }
 h1 { font-size: 1.4em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1.2em 0 .4em; }
 .muted { color: #777; } table { border-collapse: collapse; }
 th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
 tr.quiet td { color: #999; } td.error { color: #b00020; font-weight: 600; } td.ok { color: #2e7d32; }
 .bar { display: inline-block; height: .9em; background: #5c7cfa; vertical-align: middle; }
 .bar.correct { background: #2e7d32; } #status.stale { color: #b00020; }
 .mark { font-size: 1.05em; }
</style></head>
<body>
<h1>{{title}}</h1>
<div class="muted">{{logged_in}} · {{refreshed}} · <span id="status">{{waiting}}</span></div>
<h2>{{hands}} <select id="exercise"><option value="">{{latest}}</option></select>
 <label class="muted"><input type="checkbox" id="reveal"> {{reveal}}</label></h2>
<div id="hands-summary" class="muted">{{no_exercise}}</div>
<table id="hands"><tbody></tbody></table>
<h2>{{learners}} <span id="count" class="muted"></span></h2>
<table id="learners"><thead><tr><th>{{name}}</th><th>{{notebook}}</th><th>{{last_cell}}</th><th>{{last_report}}</th>
<th id="exercise-heads">{{exercises}}</th></tr></thead><tbody></tbody></table>
<p class="muted"><span id="legend"></span>
{{sent}}</p>
<script>
"use strict";
const $ = (s) => document.querySelector(s);
const T = __WORDS__;   // the page's words in the room's language (page.py WORDS)
const fill = (key, fields) => T[key].replace(/\{(\w+)\}/g, (m, k) => String(fields[k]));
const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                                                            "'": "&#39;"}[c]));
const ago = (s) => s < 90 ? fill("ago_s", {n: Math.round(s)}) : fill("ago_min", {n: Math.round(s / 60)});
const MARK = {correct: "✓", wrong: "✗", solution: "sol"};   // plain symbols: a projector's browser may lack emoji
let last = null;
const XSRF = document.querySelector('meta[name="xsrf"]').content;   // JupyterHub's check on a script's fetch

function drawHands(h) {
  const body = $("#hands tbody");
  if (!h) { body.innerHTML = ""; $("#hands-summary").textContent = T.no_exercise; return; }
  $("#hands-summary").textContent = fill("predictions", {exercise: h.exercise, n: h.predictions}) +
    (h.after_solution ? fill("after", {n: h.after_solution}) : "") + fill("seen", {n: h.solution_seen});
  const most = Math.max(1, ...h.counts.map((r) => r.count));
  const reveal = $("#reveal").checked;
  body.innerHTML = h.counts.map((r) => `<tr data-label="${esc(r.label)}"><td><code>${esc(r.label)}</code></td>` +
    `<td class="count">${r.count}</td><td><span class="bar${reveal && r.correct ? " correct" : ""}" ` +
    `style="width:${Math.round(240 * r.count / most)}px"></span>` +
    `${reveal && r.correct ? " " + esc(T.correct) : ""}</td></tr>`
  ).join("");
}

function draw(room) {
  last = room;
  const select = $("#exercise"), chosen = select.value;
  const options = [`<option value="">${esc(T.latest)}</option>`].concat(room.exercises.map(
    (k) => `<option value="${esc(k)}"${k === chosen ? " selected" : ""}>${esc(k)}</option>`));
  if (select.options.length !== options.length) select.innerHTML = options.join("");
  drawHands(room.hands);
  $("#legend").textContent = fill("legend", {quiet: Math.round(room.quiet_after)});
  $("#count").textContent = fill("count", {n: room.learners.length, stuck: room.stuck});
  const nb = room.current ? room.current.split(" · ")[0] : null;
  const shown = room.exercises.filter((k) => nb && k.startsWith(nb + " · "));
  $("#exercise-heads").textContent = shown.length ? fill("exercises_of", {nb}) +
    shown.map((k) => k.split(" · ")[1]).join(", ") : T.exercises;
  $("#learners tbody").innerHTML = room.learners.map((w) => {
    const failing = () => fill("failing", {error: w.error, cells: w.failing_cells, ago: ago(w.failing_for)});
    const cell = w.error === null ? `<td class="ok">${esc(T.ran)}</td>` : `<td class="error">${esc(failing())}</td>`;
    const marks = shown.map((k) => `<span class="mark" title="${esc(k)}">${MARK[w.checks[k]] || "·"}</span>`);
    return `<tr data-name="${esc(w.name)}" class="${w.quiet ? "quiet" : ""}"><td>${esc(w.name)}</td>` +
      `<td class="notebook">${esc(w.notebook)}</td>${cell}<td>${ago(w.seen_ago)}</td>` +
      `<td class="checks">${marks.join(" ")}</td></tr>`;
  }).join("");
}

async function refresh() {
  const exercise = $("#exercise").value;
  try {
    const r = await fetch("api/room" + (exercise ? "?exercise=" + encodeURIComponent(exercise) : ""),
                          {credentials: "same-origin", cache: "no-store", headers: {"X-XSRFToken": XSRF}});
    if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
    draw(await r.json());
    $("#status").textContent = fill("updated", {time: new Date().toLocaleTimeString(T.html_lang)});
    $("#status").className = "";
  } catch (e) {
    $("#status").textContent = fill("not_updated", {error: e.message});
    $("#status").className = "stale";
  }
}
$("#exercise").addEventListener("change", refresh);
$("#reveal").addEventListener("change", () => last && drawHands(last.hands));
refresh();
setInterval(refresh, __REFRESH__ * 1000);
</script>
</body></html>
"""


def page_html(user: str, xsrf: str = "", lang: str = "en") -> str:
    """The page for the logged-in ``user`` (shown in its header), in ``lang`` (:data:`WORDS`); ``xsrf``: the token
    its script sends with each request (JupyterHub's OAuth cookie is accepted on a script's request only with it)."""
    if lang not in WORDS:
        raise ValueError(f"lang={lang!r}: the room view speaks {', '.join(WORDS)}")
    words = WORDS[lang]
    shown = {k: v.replace("{user}", "__USER__").replace("{s}", "__REFRESH__") for k, v in words.items()}
    page = re.sub(r"\{\{(\w+)\}\}", lambda m: html.escape(shown[m.group(1)], quote=False), _PAGE)
    return (page.replace("__WORDS__", json.dumps(words, ensure_ascii=False).replace("</", "<\\/"))
            .replace("__USER__", html.escape(user)).replace("__REFRESH__", str(REFRESH_S))
            .replace("__XSRF__", html.escape(xsrf)))
