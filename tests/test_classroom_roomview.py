"""The room view (ampkit/classroom/roomview/, ampkit/classroom/report.py, the hook in ampkit.exercises.check):
the room's state and its show of hands, the reports and what the learner sees of them, the access rules, and the
service's routes against a stand-in for the hub's API (the real hub: tests/hub/test_roomview_hub.py)."""
from __future__ import annotations

import io
import json
import threading
import time
from types import SimpleNamespace

import pytest

from ampkit.classroom import report
from ampkit.classroom.hub import configure, settings_from_env
from ampkit.classroom.roomview import REPORT_SCOPE, SERVICE, VIEW_SCOPE
from ampkit.classroom.roomview.auth import has_scope, report_problem, view_problem
from ampkit.classroom.roomview.hubconfig import kernel_report_url
from ampkit.classroom.roomview.room import ReportError, Room, distribution, label, parse_report


def cell(notebook="03.ipynb", error=None):
    return {"v": 1, "user": "x", "kind": "cell", "notebook": notebook, "error": error, "at": None}


def chk(answer, correct=False, exercise="exercise 1", notebook="03.ipynb"):
    return {"v": 1, "user": "x", "kind": "check", "notebook": notebook, "exercise": exercise, "answer": answer,
            "correct": correct, "at": None}


# ---- the room's state -------------------------------------------------------------------------------------

def test_last_error_is_the_last_cell_and_a_run_of_errors_keeps_its_start():
    room = Room()
    room.add("ana", cell(), now=0)
    room.add("ana", cell(error="ZeroDivisionError"), now=10)
    room.add("ana", cell(error="NameError"), now=25)
    [row] = room.snapshot(now=30)["learners"]
    assert (row["error"], row["failing_cells"], row["failing_for"]) == ("NameError", 2, 20.0)
    assert room.snapshot(now=30)["stuck"] == 1
    room.add("ana", cell(), now=40)                      # a cell that runs through clears it
    [row] = room.snapshot(now=41)["learners"]
    assert (row["error"], row["failing_cells"], row["failing_for"]) == (None, 0, None)
    room.add("ana", cell(error="TypeError"), now=50)     # a new run of errors starts anew
    assert room.snapshot(now=55)["learners"][0]["failing_for"] == 5.0


def test_quiet_after_no_report_and_notebook_follows_the_latest_report():
    room = Room(quiet_after=60)
    room.add("ana", cell("01.ipynb"), now=0)
    room.add("ben", cell("02.ipynb"), now=0)
    room.add("ben", chk(3, notebook="03.ipynb"), now=50)
    rows = {r["name"]: r for r in room.snapshot(now=100)["learners"]}
    assert rows["ana"]["quiet"] and not rows["ben"]["quiet"]
    assert (rows["ana"]["seen_ago"], rows["ben"]["seen_ago"]) == (100.0, 50.0)
    assert rows["ben"]["notebook"] == "03.ipynb"


def test_predictions_are_answers_before_the_solution_and_the_room_follows_the_latest_check():
    room = Room()
    room.add("ana", chk(30), now=1)
    room.add("ana", chk(35, True), now=2)                 # a changed mind: the last answer before the solution
    room.add("ben", chk(16), now=3)
    room.add("ben", chk(35, True, "exercise 1 (solution)"), now=4)   # ben runs the solution...
    room.add("ben", chk(35, True), now=5)                 # ...then copies it: not a prediction
    room.add("cy", chk(35, True, "exercise 1 (solution)"), now=6)    # cy never predicted
    room.add("cy", chk(35, True), now=7)
    hands = room.snapshot(now=8)["hands"]
    assert hands["exercise"] == "03.ipynb · exercise 1"
    assert [(r["label"], r["count"], r["correct"]) for r in hands["counts"]] == [("16", 1, 0), ("35", 1, 1)]
    assert (hands["predictions"], hands["after_solution"], hands["solution_seen"]) == (2, 1, 2)
    rows = {r["name"]: r["checks"] for r in room.snapshot(now=8)["learners"]}
    assert rows == {"ana": {"03.ipynb · exercise 1": "correct"}, "ben": {"03.ipynb · exercise 1": "correct"},
                    "cy": {"03.ipynb · exercise 1": "correct"}}
    room.add("ana", chk("torch", exercise="exercise 5"), now=9)
    snap = room.snapshot(now=10)
    assert snap["current"] == "03.ipynb · exercise 5"            # the latest check: the exercise the room is on
    assert snap["exercises"] == ["03.ipynb · exercise 1", "03.ipynb · exercise 5"]
    assert room.snapshot(now=10, exercise="03.ipynb · exercise 1")["hands"]["predictions"] == 2
    with pytest.raises(ReportError, match="no exercise 'nope' yet; the room has: 03.ipynb · exercise 1"):
        room.snapshot(now=10, exercise="nope")


def test_same_exercise_name_in_two_notebooks_is_two_exercises():
    room = Room()
    room.add("ana", chk(1, notebook="01.ipynb"), now=0)
    room.add("ana", chk(2, notebook="02.ipynb"), now=1)
    assert room.exercises() == ["01.ipynb · exercise 1", "02.ipynb · exercise 1"]


# ---- the show of hands ------------------------------------------------------------------------------------

def test_few_distinct_answers_are_counted_one_by_one():
    rows = distribution([(35, True), (35.0, True), (16, False), ("Torch ", False), ("torch", True), (None, False),
                         ([0.5, 2.0], False)])
    assert [(r["label"], r["count"], r["correct"]) for r in rows] == [
        ("16", 1, 0), ("35", 2, 2), ("torch", 2, 1), ("(0.5, 2)", 1, 0), ("None", 1, 0)]


def test_many_numbers_spanning_powers_of_two_are_binned_by_octave():
    values = [2.0 ** -k for k in range(10, 30)]           # 20 distinct answers from 2^-29 to 2^-10
    rows = distribution([(v, v == 2.0 ** -16) for v in values])
    assert len(rows) <= 8 and sum(r["count"] for r in rows) == 20
    assert rows[0]["label"].startswith("2^-29") and all(r["label"].startswith("2^") for r in rows)
    assert sum(r["correct"] for r in rows) == 1


def test_many_numbers_in_a_narrow_range_get_round_equal_bins():
    rows = distribution([(float(v), False) for v in range(30, 60)] + [("nan", False)])
    numeric = rows[:-1]
    assert [r["label"] for r in numeric][:2] == ["30 – 35", "35 – 40"]
    assert sum(r["count"] for r in numeric) == 30 and rows[-1] == {"label": "nan", "count": 1, "correct": 0}


def test_labels():
    assert [label(v) for v in (3.0, 2.0 ** -16, True, [1], "  A ")] == ["3", "1.526e-05", "True", "(1,)", "a"]


# ---- reports: what is sent is what the learner sees ------------------------------------------------------

@pytest.mark.parametrize("bad, match", [
    ({"v": 1, "kind": "chat"}, "'kind': expected one of cell, check"),
    ({**cell(), "source": "x = secret"}, r"unknown field\(s\) \['source'\]"),
    ({**cell(), "v": 2}, "'v': expected 1"),
    ({**cell(), "notebook": ""}, "'notebook': expected a non-empty string"),
    ({**chk(1), "correct": "yes"}, "'correct': expected true or false"),
    ({**chk("x" * 2000)}, "'answer': at most 1000 characters"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_reports_name_the_field_and_the_valid_choices(bad, match):
    with pytest.raises(ReportError, match=match):
        parse_report(bad)


def test_what_the_kernel_builds_is_what_the_service_accepts():
    for r in (report.cell_report("03.ipynb", "ZeroDivisionError", user="ana"),
              report.check_report("03.ipynb", "exercise 2", (0.5, float("inf")), False, user="ana", at="t")):
        assert parse_report(json.loads(report.encode(r)))["kind"] == r["kind"]
    assert report.json_answer((0.5, float("nan"), {3, 1}, object)) == [0.5, "nan", [1, 3], "<class 'object'>"]


def test_outside_the_hub_nothing_is_configured_and_check_sends_nothing(tmp_path, monkeypatch, capsys):
    from ampkit.exercises import check

    assert report.config_from_env({"JUPYTERHUB_API_TOKEN": "t", "JUPYTERHUB_USER": "ana"}) is None  # no service
    assert report.config_from_env({report.URL_VAR: "http://x", "JUPYTERHUB_USER": "ana"}) is None   # no token
    monkeypatch.delenv(report.URL_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check("fp16 max", 65504, 65504) is True
    assert capsys.readouterr().out == "✅ fp16 max: correct.\n"          # the verdict, and nothing else
    assert list(tmp_path.iterdir()) == []


class Collector:
    """A stand-in for the service: records each POST (its token and body) on a real socket."""

    def __init__(self, status=204):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        got = self.got = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                got.append((self.headers["Authorization"], self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/{SERVICE}/api/report"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, n, timeout=10.0):
        end = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < end:
            time.sleep(0.02)
        return self.got


def test_each_report_is_written_to_the_learners_file_exactly_as_sent(tmp_path):
    service = Collector()
    try:
        config = report.Config(url=service.url, token="tok-ana", user="ana", sent_file=tmp_path / report.SENT_FILE)
        out = io.StringIO()
        r = report.Reporter(config, out=out)
        r.cell("03.ipynb", "ZeroDivisionError", now=0.0)
        r.check("03.ipynb", "exercise 1", 35, False)
        got = service.wait(2)
    finally:
        service.server.shutdown()
    lines = (tmp_path / report.SENT_FILE).read_bytes().splitlines()
    assert [body for _, body in got] == lines                   # byte for byte what the learner can read
    assert {auth for auth, _ in got} == {"token tok-ana"}      # the learner's own token
    assert [json.loads(x)["kind"] for x in lines] == ["cell", "check"]
    assert "room-view-sent.jsonl" in out.getvalue() and out.getvalue().count("\n") == 1   # said once
    assert r.delivered == 2


def test_cells_are_sent_on_change_every_error_and_a_heartbeat():
    send = report.should_send_cell
    assert send(None, "a.ipynb", None, 0)
    assert not send(("a.ipynb", None, 0), "a.ipynb", None, 10)      # nothing new
    assert send(("a.ipynb", None, 0), "a.ipynb", None, 30)          # heartbeat
    assert send(("a.ipynb", None, 0), "b.ipynb", None, 1)           # another notebook
    assert send(("a.ipynb", "E", 0), "a.ipynb", None, 1)            # fixed
    assert send(("a.ipynb", "E", 0), "a.ipynb", "E", 1)             # every error: its time matters


def test_a_report_never_blocks_or_raises_when_the_service_is_down(tmp_path):
    import socket

    with socket.socket() as silent:            # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1000)
        config = report.Config(url=f"http://127.0.0.1:{silent.getsockname()[1]}/x", token="t", user="ana",
                               sent_file=tmp_path / report.SENT_FILE)
        r = report.Reporter(config, out=io.StringIO())
        for i in range(report.MAX_QUEUE + 50):   # more than the queue holds: the rest are dropped, not waited for
            r.check("03.ipynb", "exercise 1", i, False)
        assert r.dropped > 0 and r.delivered == 0
    assert len((tmp_path / report.SENT_FILE).read_text().splitlines()) == report.MAX_QUEUE + 50
    bad = report.Reporter(report.Config(url="http://x", token="t", user="a", sent_file=tmp_path / "no" / "f"))
    assert bad.check("03.ipynb", "exercise 1", 1, False)       # the file cannot be written: nothing is queued
    assert bad.queue.qsize() == 0


def test_show_prints_the_lines_sent(tmp_path):
    out = io.StringIO()
    (tmp_path / report.SENT_FILE).write_text('{"kind":"cell"}\n')
    report.show({"HOME": str(tmp_path), report.URL_VAR: "http://h/x", "JUPYTERHUB_API_TOKEN": "t",
                 "JUPYTERHUB_USER": "ana"}, out=out)
    assert "reports go to http://h/x as 'ana'" in out.getvalue() and '  {"kind":"cell"}' in out.getvalue()
    out = io.StringIO()
    report.show({"HOME": str(tmp_path / "none")}, out=out)
    assert "not configured here" in out.getvalue() and "nothing sent yet" in out.getvalue()


def test_the_ipython_extension_reports_the_cells_exception_class():
    registered = []
    ip = SimpleNamespace(events=SimpleNamespace(register=lambda ev, f: registered.append((ev, f))))
    saved = report._reporter
    try:
        report.load_ipython_extension(ip)
        outside = list(registered)
        calls = []
        report._reporter = SimpleNamespace(cell=lambda nb, err: calls.append((nb, err)))
        monkey_env = {report.URL_VAR: "http://x", "JUPYTERHUB_API_TOKEN": "t", "JUPYTERHUB_USER": "a"}
        import os
        old = {k: os.environ.get(k) for k in monkey_env}
        os.environ.update(monkey_env)
        try:
            report.load_ipython_extension(ip)
            report._after_cell(SimpleNamespace(error_before_exec=None, error_in_exec=ZeroDivisionError("x")))
            report._after_cell(SimpleNamespace(error_before_exec=None, error_in_exec=None))
            report._after_cell(None)                                 # never raises into the notebook
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    finally:
        report._reporter = saved
    assert outside == [] and [ev for ev, _ in registered] == ["post_run_cell"]
    assert [err for _, err in calls] == ["ZeroDivisionError", None]


# ---- who may see, who may report --------------------------------------------------------------------------

ADMIN = {"name": "instructor", "kind": "user", "admin": True, "scopes": ["access:services", "admin-ui"]}
ANA = {"name": "ana", "kind": "user", "scopes": ["read:users!user=ana", REPORT_SCOPE]}


def test_only_the_admins_scope_opens_the_page():
    assert view_problem(ADMIN) is None
    assert view_problem({**ANA, "scopes": [VIEW_SCOPE]}) is None
    assert "is for the hub's admins" in view_problem(ANA)
    assert "is for the hub's admins" in view_problem({"name": "x", "kind": "service", "scopes": [VIEW_SCOPE]})
    assert view_problem(None) == "not logged in to the hub"
    assert has_scope(["access:services"], VIEW_SCOPE) and not has_scope(["access:services!service=other"], VIEW_SCOPE)


def test_a_learner_reports_only_as_themselves_and_only_with_the_scope():
    assert report_problem(ANA, {"user": "ana"}) is None and report_problem(ANA, {}) is None
    assert "a learner reports only as themselves" in report_problem(ANA, {"user": "ben"})
    assert "lacks the scope" in report_problem({**ANA, "scopes": ["read:users!user=ana"]}, {"user": "ana"})
    assert "only a learner's own kernel" in report_problem({"name": "s", "kind": "service",
                                                            "scopes": [REPORT_SCOPE]}, {})
    assert "no valid hub token" in report_problem(None, {})


# ---- the hub's settings -----------------------------------------------------------------------------------

def test_hub_config_registers_the_service_scopes_and_kernelspec(tmp_path, monkeypatch):
    from traitlets.config import Config

    env = {"AMPKIT_HUB_STATE": str(tmp_path / "state"), "AMPKIT_HUB_VENV": str(tmp_path / "venv"),
           "AMPKIT_HUB_ROOM_VIEW_PORT": "18999"}
    s = settings_from_env(env, tmp_path)
    c = Config()
    configure(c, s, env)
    [svc] = [x for x in c.JupyterHub.services if x["name"] == SERVICE]
    assert svc["url"] == "http://127.0.0.1:18999" and svc["command"][-3:] == ["-m", "ampkit.classroom.roomview",
                                                                             "--port=18999"]
    assert c.JupyterHub.services[0]["name"] == "idle-culler"
    assert c.JupyterHub.extra_user_scopes == {REPORT_SCOPE} and REPORT_SCOPE in c.JupyterHub.custom_scopes
    assert REPORT_SCOPE in c.Spawner.server_token_scopes and "access:servers!server" in c.Spawner.server_token_scopes
    assert c.Spawner.environment[report.URL_VAR] == "http://127.0.0.1:8000/services/room-view/api/report"
    assert c.Spawner.environment["JUPYTER_PATH"] == str(tmp_path / "hub" / "room-view")   # the kit's kernelspec
    off = Config()
    configure(off, settings_from_env({**env, "AMPKIT_HUB_ROOM_VIEW": "0"}, tmp_path), env)
    assert [x["name"] for x in off.JupyterHub.services] == ["idle-culler"]
    assert report.URL_VAR not in off.Spawner.environment
    with pytest.raises(ValueError, match="AMPKIT_HUB_ROOM_VIEW='off': expected 1"):
        settings_from_env({"AMPKIT_HUB_ROOM_VIEW": "off"}, tmp_path)


def test_the_kits_kernelspec_loads_the_reporter():
    from pathlib import Path

    spec = json.loads((Path(__file__).resolve().parents[1] / "hub" / "room-view" / "kernels" / "python3" /
                       "kernel.json").read_text())
    assert spec["argv"][:3] == ["python", "-m", "ipykernel_launcher"]
    assert "--ext=ampkit.classroom.report" in spec["argv"]


@pytest.mark.parametrize("env, url", [
    ({}, "http://127.0.0.1:8000/services/room-view/api/report"),
    ({"AMPKIT_HUB_IP": "::", "AMPKIT_HUB_PORT": "9000"}, "http://[::1]:9000/services/room-view/api/report"),
    ({"AMPKIT_HUB_IP": "10.0.0.5"}, "http://10.0.0.5:8000/services/room-view/api/report"),
])
def test_kernels_reach_the_service_through_the_hubs_own_address(env, url):
    assert kernel_report_url(settings_from_env(env, "/kit")) == url

