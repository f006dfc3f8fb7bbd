"""The login storm without a real hub: the login form's parsing (xsrf, refused logins), the hub's answers (429's
Retry-After, the spawn-pending page's event stream), the arrival schedule, the core-count derivation, the room's
defaults against the committed measurements, a learner's HTTP traffic against a stand-in hub, and the doc
generator (benchmarks/render_storm.py) on synthetic and committed JSON."""
from __future__ import annotations

import copy
import http.server
import importlib.util
import json
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from roomtools import loadtest, storm

ROOT = Path(__file__).resolve().parents[1]

#: The form as JupyterHub's templates/login.html renders it (jupyterhub 5.x), trimmed to the tags that matter.
LOGIN_PAGE = """<html><body><div id="login-main">
<form action="/hub/login?next=%2Fhub%2F" method="post" role="form">
  <div class="auth-form-header"><h1>Sign in</h1></div>
  <div class="auth-form-body m-auto">
    {error}
    <input type="hidden" name="_xsrf" value="{xsrf}" />
    <label for="username_input">Username:</label>
    <input id="username_input" type="text" autocapitalize="off" class="form-control" name="username" value=""
           autofocus="autofocus" />
    <label for="password_input">Password:</label>
    <div class="input-group"><input id="password_input" type="password" class="form-control"
         autocomplete="current-password" name="password" /></div>
    <input id="login_submit" type="submit" class="btn btn-jupyter" value="Sign in" tabindex="3" />
  </div>
</form></div></body></html>"""


def page(xsrf="2|abc|def|123", error=""):
    return LOGIN_PAGE.replace("{xsrf}", xsrf).replace("{error}", error)


# --- the form and the hub's answers -----------------------------------------------------------------------------

def test_login_form_gives_action_xsrf_and_fields():
    form = storm.parse_login_form(page())
    assert form.action == "/hub/login?next=%2Fhub%2F" and form.xsrf == "2|abc|def|123"
    assert {"username", "password", "_xsrf"} <= set(form.fields)


def test_login_form_without_xsrf_or_not_a_login_page_is_a_clear_error():
    with pytest.raises(storm.StormError, match="no _xsrf"):
        storm.parse_login_form(page(xsrf=""))
    with pytest.raises(storm.StormError, match="found GET /search"):
        storm.parse_login_form('<form action="/search"><input name="q"></form>')
    with pytest.raises(storm.StormError, match="no form"):
        storm.parse_login_form("<h1>502 Bad Gateway</h1>")


def test_refused_login_is_detected_and_a_plain_page_is_not():
    assert storm.login_error(page(error='<p class="login_error">Invalid username or password</p>')) == \
        "Invalid username or password"
    assert storm.login_error(page()) is None
    assert storm.login_error("<p class='other'>Invalid</p>") is None


def test_retry_after_reads_the_header_else_the_default():
    assert storm.retry_after({"Retry-After": "42"}) == 42.0
    assert storm.retry_after({}) == 30.0 and storm.retry_after(None, default=5) == 5
    assert storm.retry_after({"Retry-After": "Wed, 21 Oct 2015"}, default=7) == 7


def test_spawn_pending_page_stream_and_its_events():
    html = 'var evtSource = new EventSource("/hub/api/users/ana/server/progress?_xsrf=a&amp;b=1");'
    assert storm.progress_url(html) == "/hub/api/users/ana/server/progress?_xsrf=a&b=1"
    assert storm.progress_url("<p>no stream</p>") is None
    events = storm.progress_events(["data: {\"progress\": 50}", "", ": keepalive",
                                    "data: {\"progress\": 100, \"ready\": true, \"url\": \"/user/ana/\"}"])
    assert [e["progress"] for e in events] == [50, 100] and events[-1]["ready"] is True


# --- the schedule -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 10, 30])
def test_schedule_k_arrivals_within_the_window_spread_and_seeded(k):
    times = storm.schedule(k, 60.0, seed=3)
    assert len(times) == k and times == sorted(times) and 0 <= times[0] and times[-1] < 60.0
    assert all(i * 60 / k <= t < (i + 1) * 60 / k for i, t in enumerate(times))   # one arrival in each slot
    assert storm.schedule(k, 60.0, seed=3) == times                                 # the same seed, the same storm
    if k > 1:
        assert storm.schedule(k, 60.0, seed=4) != times


def test_schedule_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        storm.schedule(0)
    with pytest.raises(ValueError, match="positive"):
        storm.schedule(3, window_s=0)


# --- the cores a room needs -------------------------------------------------------------------------------------

def test_recommended_cores_takes_the_largest_need():
    c = storm.recommended_cores(30, run_all_cpu_s=12.0, spawn_cpu_s=2.0, slider_share=0.1)
    assert (c.by_run_all, c.by_slider, c.by_login, c.cores) == (3, 3, 1, 3)
    c = storm.recommended_cores(30, run_all_cpu_s=20.0, spawn_cpu_s=2.0, slider_share=2 / 30)
    assert (c.by_run_all, c.by_slider, c.cores, c.limiting) == (5, 2, 5, "Run All")
    assert storm.recommended_cores(30, 12.0, 2.0, 0.1).limiting == "Run All and slider"   # a tie names both
    c = storm.recommended_cores(30, run_all_cpu_s=4.0, spawn_cpu_s=9.0, slider_share=0.05)
    assert (c.by_login, c.cores, c.limiting) == (5, 5, "login")
    assert storm.recommended_cores(30, 1.0, 1.0, None).cores == 30              # no K met the slider target
    assert storm.recommended_cores(1, 0.1, 0.1, 0.01).cores == 1                # never below one core


def test_recommended_cores_rejects_bad_input():
    with pytest.raises(ValueError, match="learners"):
        storm.recommended_cores(0, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="run_all_cpu_s"):
        storm.recommended_cores(30, 0.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="slider_share"):
        storm.recommended_cores(30, 1.0, 1.0, 0.0)


def test_summary_statistics():
    assert loadtest.summary([10, 30, 20, 40]) == {"median": 25.0, "p90": 37.0, "max": 40.0, "n": 4}
    assert loadtest.summary([]) == {"median": None, "p90": None, "max": None, "n": 0}


# --- a learner's HTTP traffic against a stand-in hub ------------------------------------------------------------

class StandIn(http.server.BaseHTTPRequestHandler):
    """Just enough of JupyterHub: the login page with an _xsrf, the POST (right password and xsrf, else the
    error), one 429 with Retry-After 0 on the first spawn, the spawn-pending page and its event stream."""

    throttled: set = set()

    def log_message(self, *a):
        pass

    def _send(self, status, body="", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        data = body.encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/hub/login"):
            self._send(200, page(xsrf="XS"), [("Set-Cookie", "_xsrf=XS; Path=/hub/")])
        elif self.path == "/hub/spawn":
            if "throttle" in self.headers.get("Cookie", "") and "once" not in self.throttled:
                self.throttled.add("once")
                self._send(429, "<h1>429 : Too Many Requests</h1><p>Too many users trying to log in right now. "
                                "Try again in 10 seconds.</p>", [("Retry-After", "0")])
            else:
                self._send(302, headers=[("Location", "/hub/spawn-pending/ana")])
        elif self.path == "/hub/spawn-pending/ana":
            self._send(200, 'x = new EventSource("/hub/api/users/ana/server/progress?_xsrf=XS");')
        elif self.path.startswith("/hub/api/users/ana/server/progress"):
            self._send(200, 'data: {"progress": 50}\n\ndata: {"progress": 100, "ready": true, "url": "/user/ana/"}'
                            "\n\n", [("Content-Type", "text/event-stream")])
        elif self.path.startswith("/user/ana/"):
            self._send(200, "<title>JupyterLab</title>")
        else:
            self._send(404, "<h1>404 : Not Found</h1>")

    def do_POST(self):
        form = dict(p.split("=", 1) for p in self.rfile.read(int(self.headers["Content-Length"])).decode().split("&"))
        if form.get("_xsrf") != "XS":
            self._send(403, "<h1>403 : Forbidden</h1><p>'_xsrf' argument missing from POST</p>")
        elif form.get("password") != "room-pass":
            self._send(200, page(error='<p class="login_error">Invalid username or password</p>'))
        else:
            cookies = [("Set-Cookie", "jupyterhub-hub-login=ok; Path=/hub/")]
            if form["username"] == "throttle":
                cookies.append(("Set-Cookie", "throttle=1; Path=/hub/"))
            self._send(302, headers=[("Location", "/hub/spawn"), *cookies])


@pytest.fixture()
def stand_in():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    StandIn.throttled = set()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_learner_logs_in_waits_for_the_stream_and_lands_on_the_server(stand_in):
    learner = storm.HttpLearner(stand_in, "ana", timeout=5)
    url = learner.login("room-pass", time.monotonic() + 10)
    assert url.endswith("/hub/spawn-pending/ana") and learner.retries == 0
    assert learner.cookie("jupyterhub-hub-login") == "ok"
    assert learner.wait_ready(url, time.monotonic() + 10).endswith("/user/ana/")


def test_learner_with_a_wrong_password_is_a_failed_login(stand_in):
    with pytest.raises(storm.StormError, match="Invalid username or password"):
        storm.HttpLearner(stand_in, "ana", timeout=5).login("wrong-pass", time.monotonic() + 10)


def test_learner_told_to_retry_waits_and_retries(stand_in):
    learner = storm.HttpLearner(stand_in, "throttle", timeout=5)
    url = learner.login("room-pass", time.monotonic() + 10)
    assert learner.retries == 1 and url.endswith("/hub/spawn-pending/ana")


# --- the room's defaults, from the measurements -----------------------------------------------------------------

STORM_JSON = ROOT / "benchmarks" / "results" / "hub_storm.json"


def test_room_defaults_cover_what_the_storm_measured():
    hub = pytest.importorskip("ampkit.classroom.hub")
    doc = json.loads(STORM_JSON.read_text())
    mem = [r["mem_per_learner_mib"]["median"] for r in doc["runs"] if r["mem_per_learner_mib"]["n"]]
    spawn = [r["server_cpu_s"]["median"] for r in doc["runs"] if r["server_cpu_s"]["n"]]
    assert mem and spawn, "hub_storm.json holds no measured learner"
    assert hub.LEARNER_MIB >= max(mem) and hub.LEARNER_MIB % 64 == 0     # one learner, rounded up to 64 MiB
    assert hub.SPAWN_CPU_S >= max(spawn)
    assert all(r["settings"]["kernel_threads"] == 1 for r in doc["runs"])    # the storm ran the room's defaults
    assert all(r["kernel_threads_seen"] in ([], ["1"]) for r in doc["runs"])  # and the kernels got one thread
    assert hub.default_max_servers(24064) == (24064 - hub.RESERVED_MIB) // hub.LEARNER_MIB
    assert hub.default_max_servers(1000) == 1 and hub.default_max_servers(0) == 0
    assert hub.default_spawn_limit(2) == int(2 * 45 / hub.SPAWN_CPU_S) and hub.default_spawn_limit(1000) == 100
    s = hub.settings_from_env({}, ROOT)
    assert s.kernel_threads == 1 and s.spawn_limit == hub.default_spawn_limit(__import__("os").cpu_count() or 1)


# --- the doc generator ------------------------------------------------------------------------------------------

def _load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rs = _load("render_storm")


def _learner(i, cpu=12.0, spawn=2.0):
    return {"name": f"storm{i:03d}", "kernel_cpu_s": cpu, "server_cpu_s": spawn}


def _run(k, median=80.0, ok=True, cpu=12.0):
    d = {"median": 1.0, "p90": 2.0, "max": 3.0, "n": k}
    return {"k": k, "load_avg_at_start": [1.5, 1.0, 0.5], "window_s": 60.0, "browsers": 2, "ok": ok, "errors": [],
            "settings": {"spawn_limit": 30, "max_servers": 38, "kernel_threads": 1},
            "failed_logins": 0, "failed_spawns": 0, "failed_kernels": 0 if ok else 1, "failed_sliders": 0,
            "failed_kernel_why": [] if ok else ["KernelError: timed out waiting for the kernel"], "retries_429": 0,
            "ready_s": d, "first_widget_s": d, "run_all_s": d, "update_ms": {**d, "median": median},
            "update_ms_browser": {**d, "median": median + 20}, "mem_per_learner_mib": {**d, "median": 550.0},
            "peak_mem_gib": 10.0, "learners": [_learner(i, cpu) for i in range(k)]}


def storm_json(runs=None):
    return {"date": "2026-01-02T03:04:05+00:00", "command": "python benchmarks/bench_storm.py", "limit_ms": 200.0,
            "host": {"cpu": "Test CPU", "cores": 2, "mem_gib": 8.0, "python": "3.11.7", "torch": "2.13.0+cpu"},
            "updates_per_learner": 10, "runs": runs if runs is not None else [_run(10), _run(20, 150.0),
                                                                                _run(30, 260.0)]}


def test_cores_derivation_from_a_synthetic_storm():
    cores, f = rs.derivation(storm_json())
    assert f["max_k"] == 20 and f["share"] == pytest.approx(0.1)      # K = 30 broke the 200 ms median
    assert (cores.by_run_all, cores.by_slider, cores.by_login, cores.cores) == (3, 3, 1, 3)
    text = rs.cores_text(storm_json())
    assert "**Cores for a room of 30: 3**" in text and "2 cores / K = 20" in text and "Test CPU" in text
    failed = storm_json([_run(10, ok=False)])
    assert rs.derivation(failed)[0].by_slider == 30 and "no K met the target" in rs.cores_text(failed)
    assert "largest K tried" in rs.cores_text(storm_json([_run(10), _run(30)]))


def test_storm_table_rows_and_failures():
    text = rs.storm_table(storm_json([_run(10), _run(30, ok=False)]))
    assert "| 10 | 1.50 | 0 / 0 / 0 / 0 | 0 |" in text and "| yes |" in text
    assert "0 / 0 / 1 / 0" in text and "timed out waiting for the kernel" in text
    assert "K = 10: 100 ms" in text                          # the browsers' own slider median
    assert "did not run K = 30" in rs.storm_table(storm_json([_run(10)]))
    assert "**not met** — 0 failed logins, spawns or kernels, median slider update 260 ms" in \
        rs.storm_table(storm_json())                                          # K = 30 at 260 ms
    assert "**met**" in rs.storm_table(storm_json([_run(30, 190.0)]))
    assert "**not met** — 1 failed" in rs.storm_table(storm_json([_run(30, 190.0, ok=False)]))


def test_throttled_storm_sentence():
    run = _run(10)
    run.update(settings={"spawn_limit": 2, "max_servers": 38, "kernel_threads": 1}, retries_429=7,
               ready_s={"median": 41.0, "p90": 70.0, "max": 88.5, "n": 10},
               learners=[{**_learner(i), "retries": 1 if i < 5 else 0} for i in range(10)])
    text = rs.throttle_text(storm_json([run]))
    assert "`HUB_SPAWN_LIMIT=2`" in text and "7 answers of 429 to 5 of the 10 learners" in text
    assert "0 failed logins, spawns or kernels" in text and "median 41.0 s, max 88.5 s" in text
    assert "Not measured yet" in rs.region_bodies(storm_json(), None)[rs.CLASSROOM]["storm-throttle"]


def test_render_and_check_on_synthetic_json(tmp_path):
    for rel in (rs.CLASSROOM, rs.GUIDE):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    path = tmp_path / "hub_storm.json"
    paths = ["--root", str(tmp_path), "--json", str(path), "--throttled", str(tmp_path / "none.json")]
    assert rs.main([*paths, "--check"]) in (0, 1)
    rs.main(paths)
    assert "Not measured yet" in (tmp_path / rs.CLASSROOM).read_text()
    path.write_text(json.dumps(storm_json()))
    assert rs.main([*paths, "--check"]) == 1
    rs.main(paths)
    assert rs.main([*paths, "--check"]) == 0
    assert "**Cores for a room of 30: 3**" in (tmp_path / rs.CLASSROOM).read_text()
    changed = copy.deepcopy(storm_json())
    changed["runs"][0]["retries_429"] = 7
    path.write_text(json.dumps(changed))
    assert rs.main([*paths, "--check"]) == 1


def test_committed_docs_match_committed_storm_json():
    assert STORM_JSON.exists(), "benchmarks/results/hub_storm.json is not committed"
    stale = [str(p.relative_to(ROOT)) for p, (old, new) in rs.render().items() if old != new]
    assert not stale, f"run `python benchmarks/render_storm.py`: out of date: {stale}"


def test_readme_states_the_defaults_the_code_has():
    hub = pytest.importorskip("ampkit.classroom.hub")
    readme = (ROOT / "hub" / "README.md").read_text()
    assert f"(memory − 2 GiB) / {hub.LEARNER_MIB} MiB" in readme and hub.RESERVED_MIB == 2048
    assert f"cores × {45 / hub.SPAWN_CPU_S:g} (4 to 100)" in readme
    # JupyterHub's own words for a throttled login (jupyterhub/handlers/base.py), quoted in the README
    assert "Too many users trying to log in right now. Try again in" in readme
    assert "Active user limit exceeded. Try again in a few minutes." in readme


def test_the_quoted_429_texts_are_jupyterhubs_own():
    jupyterhub = pytest.importorskip("jupyterhub", reason="the hub extra (make hub-install) is not installed")
    source = (Path(jupyterhub.__file__).parent / "handlers" / "base.py").read_text()
    assert 'f"Too many users trying to log in right now. Try again in {human_retry_time}."' in source
    assert '"Active user limit exceeded. Try again in a few minutes."' in source
    assert "'Retry-After': retry_time" in source


def test_storm_driver_picks_browsers_spread_and_checks_its_arguments():
    pytest.importorskip("psutil")
    bs = _load("bench_storm")
    assert bs.browser_indices(30, 2) == {7, 22} and bs.browser_indices(10, 3) == {1, 5, 8}
    assert bs.browser_indices(1, 2) == {0} and bs.browser_indices(10, 0) == set()
    a = bs.parse_args(["--k", "30,10,20"])
    assert a.ks == [10, 20, 30] and a.browsers == 2 and a.window == 60.0
    for bad in (["--k", "ten"], ["--k", "0"], ["--browsers", "9"]):
        with pytest.raises(SystemExit):
            bs.parse_args(bad)


def test_the_kernel_environment_the_hub_sets_gives_torch_one_thread(tmp_path):
    """HUB_KERNEL_THREADS reaches torch: the environment configure() gives each learner's server (and so its
    kernels) makes torch.get_num_threads() equal to it, where torch alone would use every core."""
    pytest.importorskip("torch")
    hub = pytest.importorskip("ampkit.classroom.hub")
    import os
    import subprocess

    class Section(dict):
        def __getattr__(self, name):
            return self.setdefault(name, Section())

        def __setattr__(self, name, value):
            self[name] = value

    settings = hub.settings_from_env({"AMPKIT_HUB_STATE": str(tmp_path / "state"),
                                      "AMPKIT_HUB_PASSWORD": "room-pass-1",
                                      "AMPKIT_HUB_ADMIN_PASSWORD": "a" * 32}, ROOT)
    c = Section()
    hub.configure(c, settings, env={"PATH": os.environ.get("PATH", ""), "AMPKIT_HUB_PASSWORD": "room-pass-1",
                                    "AMPKIT_HUB_ADMIN_PASSWORD": "a" * 32})
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(c.Spawner.environment)
    code = "import torch; print(torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert settings.kernel_threads == 1 and out.stdout.strip() == "1"
