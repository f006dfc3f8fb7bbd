"""The room view's page: one HTML document with its script, which asks ``api/room`` every 2 s and redraws.
Nothing is loaded from another address (the room's network may have no internet).

>>> "api/room" in page_html("instructor", "token")
True
"""
from __future__ import annotations

import html

#: Seconds between two refreshes of the page.
REFRESH_S = 2

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Room view</title>
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
<h1>Room view</h1>
<div class="muted">Logged in as __USER__ · refreshed every __REFRESH__ s · <span id="status">waiting…</span></div>
<h2>Show of hands <select id="exercise"><option value="">the exercise of the latest check</option></select>
 <label class="muted"><input type="checkbox" id="reveal"> mark correct answers</label></h2>
<div id="hands-summary" class="muted">No exercise checked yet.</div>
<table id="hands"><tbody></tbody></table>
<h2>Learners <span id="count" class="muted"></span></h2>
<table id="learners"><thead><tr><th>name</th><th>notebook</th><th>last cell</th><th>last report</th>
<th id="exercise-heads">exercises</th></tr></thead><tbody></tbody></table>
<p class="muted">✓ correct · ✗ not yet · sol: ran the solution · grey: no report for over <span id="quiet"></span> s.
What a learner's kernel sends is in their own folder (room-view-sent.jsonl).</p>
<script>
"use strict";
const $ = (s) => document.querySelector(s);
const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                                                            "'": "&#39;"}[c]));
const ago = (s) => s < 90 ? `${Math.round(s)} s ago` : `${Math.round(s / 60)} min ago`;
const MARK = {correct: "✓", wrong: "✗", solution: "sol"};   // plain symbols: a projector's browser may lack emoji
let last = null;
const XSRF = document.querySelector('meta[name="xsrf"]').content;   // JupyterHub's check on a script's fetch

function drawHands(h) {
  const body = $("#hands tbody");
  if (!h) { body.innerHTML = ""; $("#hands-summary").textContent = "No exercise checked yet."; return; }
  $("#hands-summary").textContent = `${h.exercise}: ${h.predictions} prediction(s) before the solution` +
    (h.after_solution ? `, ${h.after_solution} answered only after it` : "") +
    `; ${h.solution_seen} ran the solution.`;
  const most = Math.max(1, ...h.counts.map((r) => r.count));
  const reveal = $("#reveal").checked;
  body.innerHTML = h.counts.map((r) => `<tr data-label="${esc(r.label)}"><td><code>${esc(r.label)}</code></td>` +
    `<td class="count">${r.count}</td><td><span class="bar${reveal && r.correct ? " correct" : ""}" ` +
    `style="width:${Math.round(240 * r.count / most)}px"></span>${reveal && r.correct ? " ✓ correct" : ""}</td></tr>`
  ).join("");
}

function draw(room) {
  last = room;
  const select = $("#exercise"), chosen = select.value;
  const options = ['<option value="">the exercise of the latest check</option>'].concat(room.exercises.map(
    (k) => `<option value="${esc(k)}"${k === chosen ? " selected" : ""}>${esc(k)}</option>`));
  if (select.options.length !== options.length) select.innerHTML = options.join("");
  drawHands(room.hands);
  $("#quiet").textContent = Math.round(room.quiet_after);
  $("#count").textContent = `${room.learners.length} · ${room.stuck} with an error in their last cell`;
  const nb = room.current ? room.current.split(" · ")[0] : null;
  const shown = room.exercises.filter((k) => nb && k.startsWith(nb + " · "));
  $("#exercise-heads").textContent = shown.length ? `exercises of ${nb}: ` +
    shown.map((k) => k.split(" · ")[1]).join(", ") : "exercises";
  $("#learners tbody").innerHTML = room.learners.map((w) => {
    const cell = w.error === null ? '<td class="ok">ran</td>' :
      `<td class="error">${esc(w.error)} · ${w.failing_cells} cell(s) in a row, since ${ago(w.failing_for)}</td>`;
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
    $("#status").textContent = "updated " + new Date().toLocaleTimeString();
    $("#status").className = "";
  } catch (e) {
    $("#status").textContent = "not updated: " + e.message;
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


def page_html(user: str, xsrf: str = "") -> str:
    """The page for the logged-in ``user`` (shown in its header); ``xsrf``: the token its script sends with each
    request (JupyterHub's OAuth cookie is accepted on a script's request only with it)."""
    return (_PAGE.replace("__USER__", html.escape(user)).replace("__REFRESH__", str(REFRESH_S))
            .replace("__XSRF__", html.escape(xsrf)))
