"""What the room view's reporter costs a learner's cell (hub/README.md, "The room view").

Writes benchmarks/results/room_view.json. In one IPython shell (the shell a kernel runs), it times ``run_cell`` of a
one-line cell with and without the reporter's ``post_run_cell`` event, a cell that raises (every error is
reported: a line appended to the learner's file and a report queued), and ``ampkit.exercises.check`` outside the hub
and inside it (reporting). Reports go to a stand-in service on 127.0.0.1, a process of its own, that answers 204
as the room view does. The timed reporter cells also register and unregister the event each round: an upper bound.
The calls are interleaved round by round (``_timing.interleaved``), so that each sees the same load.

    python benchmarks/bench_room_view.py [--rounds 300]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import interleaved

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "room_view.json"


#: The stand-in service, in a process of its own (as the room view is): answers every POST with 204.
SERVICE = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.timeout = 600
s.serve_forever()
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=300)
    a = p.parse_args()
    from IPython.core.interactiveshell import InteractiveShell

    from ampkit.classroom import report
    from ampkit.exercises import check

    server = subprocess.Popen([sys.executable, "-c", SERVICE], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    home = Path(tempfile.mkdtemp(prefix="ampkit-roomview-bench-"))
    env = {report.URL_VAR: f"http://127.0.0.1:{port}/services/room-view/api/report",
           "JUPYTERHUB_API_TOKEN": "bench", "JUPYTERHUB_USER": "bench", "HOME": str(home),
           "JPY_SESSION_NAME": "/home/bench/notebooks/03_loss_scaling.ipynb"}
    saved = {k: os.environ.get(k) for k in env}
    shell = InteractiveShell.instance()
    sink = io.StringIO()
    try:
        os.environ.update(env)
        report._reporter = report.Reporter(report.config_from_env(os.environ), out=sink)

        def cell(with_hook: bool, code: str):
            def run():
                if with_hook:
                    shell.events.register("post_run_cell", report._after_cell)
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    shell.run_cell(code, store_history=False)
                if with_hook:
                    shell.events.unregister("post_run_cell", report._after_cell)
            return run

        def checked(inside: bool):
            def run():
                if not inside:
                    os.environ.pop(report.URL_VAR)
                with contextlib.redirect_stdout(sink):
                    check("exercise 1", 35, 35)
                os.environ[report.URL_VAR] = env[report.URL_VAR]
            return run

        t = interleaved({"cell": cell(False, "x = 1"), "cell_reporter": cell(True, "x = 1"),
                         "error_cell": cell(False, "1/0"), "error_cell_reporter": cell(True, "1/0"),
                         "check_outside_hub": checked(False), "check_in_hub": checked(True)},
                        rounds=a.rounds, warmup=5)
        sent = len((home / report.SENT_FILE).read_text().splitlines())
        r = report._reporter
        r.queue.join()
        delivered, failed, dropped = r.delivered, r.failed, r.dropped
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        report._reporter = None
        server.kill()
        server.wait(10)
    us = {k: {"median_us": round(v.median * 1e6, 1), "p90_us": round(v.percentile(0.9) * 1e6, 1)}
          for k, v in t.items()}
    result = {
        "what": "time of one IPython run_cell / one check() in a learner's kernel, without and with the room "
                "view's reporter (a stand-in service, its own process on 127.0.0.1, answers 204); the reporter's cells "
                "include registering and unregistering its event each round (an upper bound)",
        "rounds": a.rounds, "timings": us,
        "reporter_added_us": {
            "cell_without_error": round(us["cell_reporter"]["median_us"] - us["cell"]["median_us"], 1),
            "cell_with_error": round(us["error_cell_reporter"]["median_us"] - us["error_cell"]["median_us"], 1),
            "check": round(us["check_in_hub"]["median_us"] - us["check_outside_hub"]["median_us"], 1)},
        "reports": {"lines_written": sent, "delivered": delivered, "failed": failed, "dropped": dropped},
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "load_avg_1min": round(os.getloadavg()[0], 2)},
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
