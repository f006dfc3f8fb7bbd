"""The room's load test, without a real hub: its statistics and clean-up (tests/roomtools/loadtest.py) and its hub
client (tests/roomtools/hub_client.py) against a stand-in ``jupyterhub`` that serves the one API call it needs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from roomtools import hub_client, loadtest

ROOT = Path(__file__).resolve().parents[1]


def test_statistics():
    assert loadtest.median([5, 1, 3]) == 3 and loadtest.median([1, 2, 3, 4]) == 2.5
    assert loadtest.percentile(range(1, 11), 90) == pytest.approx(9.1)         # numpy's linear interpolation
    assert loadtest.percentile([7.0], 90) == 7.0
    with pytest.raises(ValueError, match="empty"):
        loadtest.median([])
    with pytest.raises(ValueError, match="0 to 100"):
        loadtest.percentile([1], 101)


def _run(k, med, ok=True):
    return {"k": k, "ok": ok, "update_ms": {"median": med, "n": 10}}


def test_max_k_under_200ms():
    assert loadtest.max_k_under([_run(1, 40), _run(2, 90), _run(5, 199.9), _run(10, 250)]) == 5
    assert loadtest.max_k_under([_run(10, 150), _run(1, 40)]) == 10                 # order does not matter
    assert loadtest.max_k_under([_run(1, 40), _run(2, 300), _run(5, 150)]) == 1     # the first K over the limit ends it
    assert loadtest.max_k_under([_run(1, 40), _run(2, 50, ok=False), _run(5, 60)]) == 1   # a failed run too
    assert loadtest.max_k_under([_run(1, 210)]) == 0 and loadtest.max_k_under([]) == 0
    assert loadtest.max_k_under([{"k": 1, "ok": True, "update_ms": {"n": 0}}]) == 0


def test_cleanup_runs_every_step_last_first_even_on_errors_and_sigterm():
    done = []

    def boom():
        raise RuntimeError("server already gone")

    with pytest.raises(KeyboardInterrupt):
        with loadtest.Cleanup() as cl:
            cl.add(done.append, "hub stopped")
            cl.add(boom)
            cl.add(done.append, "servers stopped")
            os.kill(os.getpid(), signal.SIGTERM)        # like `kill` on the load test: becomes KeyboardInterrupt
            time.sleep(5)
            done.append("not interrupted")
    assert done == ["servers stopped", "hub stopped"] and "server already gone" in cl.errors[0]
    assert signal.getsignal(signal.SIGTERM) is not loadtest.Cleanup._interrupt     # the old handler is back


def test_new_modules_import_neither_jupyterhub_nor_torch():
    code = ("import sys\n"
            "sys.path.insert(0, 'tests')\n"
            "from ampkit.classroom import hub\n"
            "from roomtools import hub_client, kernel_ws, loadtest, storm\n"
            "print(sorted(m for m in ('torch', 'jupyterhub', 'psutil', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"      # imported as bench_hub.py and hub/jupyterhub_config.py do


# a stand-in for `jupyterhub -f CONFIG`: it reads the load test's token from CONFIG, answers GET /hub/api/ with it
# (403 without), leaves a child process behind (as a stuck kernel would) and exits on SIGTERM without stopping it
FAKE_HUB = """\
import http.server, json, os, re, subprocess, sys
config = open(sys.argv[2]).read()
if "load_subconfig(" not in config:
    sys.exit(3)
token = re.search(r"'api_token': '([0-9a-f]+)'", config).group(1)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open("child.pid", "w").write(str(child.pid))

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "token " + token and self.path == "/hub/api/"
        body = json.dumps({"version": "fake"} if ok else {"message": "forbidden"}).encode()
        self.send_response(200 if ok else 403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        print("fake hub:", *a, flush=True)

print("fake hub on", os.environ["AMPKIT_HUB_PORT"], flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["AMPKIT_HUB_PORT"])), H).serve_forever()
"""


def _fake_venv(tmp_path, script: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "jupyterhub"
    exe.write_text(f"#!{sys.executable}\n" + script)
    exe.chmod(0o755)
    return venv


def test_hub_starts_answers_with_its_token_and_cleans_up_after_itself(tmp_path):
    with loadtest.Cleanup() as cleanup:
        h = hub_client.Hub(cleanup, _fake_venv(tmp_path, FAKE_HUB))
        config = (h.tmp / "bench_config.py").read_text()
        assert f"load_subconfig({str(ROOT / 'hub' / 'jupyterhub_config.py')!r})" in config   # the room's config
        assert h.url.startswith("http://127.0.0.1:") and h.token in config
        h.wait_up(30)
        assert h.api("GET", "/") == (200, {"version": "fake"})
        h.token = "not-the-token"
        assert h.api("GET", "/")[0] == 403                       # an HTTP error comes back as (status, text)
        child = psutil.Process(int((h.tmp / "child.pid").read_text()))
        assert child in h.processes()
        tmp = h.tmp
    assert cleanup.errors == []
    assert h.proc.returncode is not None and not tmp.exists()
    assert not hub_client._alive(child)                          # the stop killed what the hub left behind


def test_hub_for_the_storm_keeps_the_rooms_timeouts_and_takes_extra_settings(tmp_path):
    with loadtest.Cleanup() as cleanup:
        bench = hub_client.Hub(cleanup, _fake_venv(tmp_path, FAKE_HUB))
        storm_hub = hub_client.Hub(cleanup, _fake_venv(tmp_path / "s", FAKE_HUB), room_timeouts=True,
                                   extra_config="c.JupyterHub.concurrent_spawn_limit = 2\n",
                                   env={"AMPKIT_HUB_SPAWN_LIMIT": "2"})
        assert "start_timeout = c.Spawner.http_timeout = 600" in (bench.tmp / "bench_config.py").read_text()
        config = (storm_hub.tmp / "bench_config.py").read_text()
        assert "600" not in config and config.endswith("c.JupyterHub.concurrent_spawn_limit = 2\n")
        assert len(storm_hub.password) >= 8 and storm_hub.password != bench.password   # the room password
        storm_hub.wait_up(30)
        environ = psutil.Process(storm_hub.proc.pid).environ()
        assert environ["AMPKIT_HUB_SPAWN_LIMIT"] == "2" and environ["AMPKIT_HUB_PASSWORD"] == storm_hub.password
    assert cleanup.errors == []


def test_hub_that_exits_at_once_is_a_clear_error_with_its_log(tmp_path):
    with loadtest.Cleanup() as cleanup:
        h = hub_client.Hub(cleanup, _fake_venv(tmp_path, "print('no such config option'); raise SystemExit(3)\n"))
        with pytest.raises(hub_client.HubError, match=r"the hub exited with 3:\nno such config option"):
            h.wait_up(30)
    assert cleanup.errors == [] and not h.tmp.exists()


class _FakeHub:
    """Answers the REST calls the load test makes from a script: {(method, path): [answers, last one repeats]}."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def api(self, method, path, body=None, timeout=30.0):
        self.calls.append((method, path))
        queue = self.answers[(method, path)]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def log_tail(self):
        return "hub log"


def test_wait_servers_until_ready_or_a_clear_timeout():
    ready = (200, {"servers": {"": {"ready": True}}})
    h = _FakeHub({("GET", "/users/ann"): [(200, {"servers": {"": {"ready": False}}}), ready],
                  ("GET", "/users/bo"): [ready]})
    hub_client.wait_servers(h, ["ann", "bo"], timeout=10)
    assert h.calls.count(("GET", "/users/ann")) == 2 and h.calls.count(("GET", "/users/bo")) == 1
    h = _FakeHub({("GET", "/users/ann"): [(200, {"servers": {}})], ("GET", "/users/bo"): [(404, "no such user")]})
    with pytest.raises(hub_client.HubError, match=r"servers not ready after 0 s: \['ann', 'bo'\]\nhub log"):
        hub_client.wait_servers(h, ["ann", "bo"], timeout=0)


def test_stop_servers_and_delete_accounts_through_the_api():
    h = _FakeHub({("DELETE", "/users/ann/server"): [(202, None)],
                  ("GET", "/users/ann"): [(200, {"servers": {"": {}}}), (200, {"servers": {}})]})
    hub_client.stop_servers(h, ["ann"])
    assert h.calls == [("DELETE", "/users/ann/server"), ("GET", "/users/ann"), ("GET", "/users/ann")]
    h = _FakeHub({("DELETE", "/users/ann"): [(204, None)], ("DELETE", "/users/bo"): [(404, "gone already")],
                  ("DELETE", "/users/cy"): [(500, "database locked")]})
    hub_client.delete_accounts(h, ["ann", "bo"])
    with pytest.raises(hub_client.HubError, match=r"could not delete cy \(500: database locked\)"):
        hub_client.delete_accounts(h, ["cy"])
