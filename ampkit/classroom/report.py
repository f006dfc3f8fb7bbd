"""The learner's side of the room view: what a learner's kernel tells the instructor's page, and how the learner
sees it. Standard library only; it never raises into the notebook and never makes a cell wait.

Inside the room's JupyterHub (``make hub``), two things report, each in the learner's own kernel:

- an IPython extension (this module, loaded by the hub's kernelspec with ``--ext``): after each cell, the
  notebook's file name and whether the cell raised (the exception's class name, never its message or the code);
- ``ampkit.exercises.check``: the exercise's name, the learner's answer (their prediction) and whether it was
  correct.

Each report is one JSON line, posted with the learner's own hub token (``JUPYTERHUB_API_TOKEN``) to the room view
service (``AMPKIT_ROOMVIEW_URL``, through the hub's proxy) on a background thread with a short timeout, and the
very same line is appended first to ``~/room-view-sent.jsonl`` in the learner's folder. The first report of a
kernel prints one line saying so. ``python -m ampkit.classroom.report --show`` prints what was sent.

Outside the hub (no ``JUPYTERHUB_API_TOKEN``, ``JUPYTERHUB_USER`` or ``AMPKIT_ROOMVIEW_URL``) nothing is
reported, written or printed.

>>> config_from_env({}) is None
True
>>> encode(cell_report("03_loss_scaling.ipynb", None, user="ana"))
b'{"at":null,"error":null,"kind":"cell","notebook":"03_loss_scaling.ipynb","user":"ana","v":1}'
"""
from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import queue
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

VERSION = 1
URL_VAR, CA_VAR = "AMPKIT_ROOMVIEW_URL", "AMPKIT_ROOMVIEW_CA"
SENT_FILE = "room-view-sent.jsonl"
#: Seconds a report may take on its background thread before it is given up (the cell never waits for it).
TIMEOUT = 3.0
#: A run of cells without errors in one notebook is reported at most once per this many seconds.
HEARTBEAT = 30.0
MAX_QUEUE = 200
NOTE = ("ℹ️ room view: this kernel tells the instructor's page your notebook's name, whether a cell raised an "
        "error, and your exercise answers. Everything sent is in ~/{file}; run "
        "`!python -m ampkit.classroom.report --show` to read it.")


@dataclass(frozen=True)
class Config:
    """Where reports go and who sends them (all from the environment the hub gives the learner's server)."""

    url: str
    token: str
    user: str
    sent_file: Path
    ca: str = ""          # HTTPS: the hub's certificate (PEM text), trusted as it is


def config_from_env(env) -> Config | None:
    """The reporter's settings from ``env``, or ``None`` (nothing is reported) when not in the room's hub."""
    url, token, user = env.get(URL_VAR, ""), env.get("JUPYTERHUB_API_TOKEN", ""), env.get("JUPYTERHUB_USER", "")
    if not (url and token and user):
        return None
    home = Path(env.get("HOME") or ".")
    return Config(url=url, token=token, user=user, sent_file=home / SENT_FILE, ca=env.get(CA_VAR, ""))


def notebook_name(env) -> str:
    """The notebook's file name, from ``JPY_SESSION_NAME`` (Jupyter Server gives each kernel its notebook's
    path); ``"(console)"`` for a kernel without a notebook."""
    return Path(env.get("JPY_SESSION_NAME", "")).name or "(console)"


def json_answer(answer):
    """An answer as JSON: numbers (numpy's too), strings, booleans and ``None`` as they are; nan and infinities
    as the strings ``"nan"``, ``"inf"``, ``"-inf"``; tuples, lists and sets as lists; anything else as its
    ``repr`` (at most 200 characters)."""
    if answer is None or isinstance(answer, (bool, str)):
        return answer[:200] if isinstance(answer, str) else answer
    if isinstance(answer, numbers.Integral):
        return int(answer)
    if isinstance(answer, numbers.Real):
        value = float(answer)
        return value if math.isfinite(value) else repr(value)
    if isinstance(answer, (tuple, list)):
        return [json_answer(a) for a in answer[:20]]
    if isinstance(answer, (set, frozenset)):
        return sorted((json_answer(a) for a in answer), key=repr)[:20]
    return repr(answer)[:200]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cell_report(notebook: str, error: str | None, *, user: str, at: str | None = None) -> dict:
    """A finished cell: the notebook's name and the exception's class name (``None`` when it ran through)."""
    return {"v": VERSION, "user": user, "kind": "cell", "notebook": notebook, "error": error, "at": at}


def check_report(notebook: str, exercise: str, answer, correct: bool, *, user: str, at: str | None = None) -> dict:
    """An exercise's self-check: its name, the learner's answer (as :func:`json_answer`) and the verdict."""
    return {"v": VERSION, "user": user, "kind": "check", "notebook": notebook, "exercise": str(exercise)[:200],
            "answer": json_answer(answer), "correct": bool(correct), "at": at}


def encode(report: dict) -> bytes:
    """The exact bytes sent, and written as one line of the learner's ``room-view-sent.jsonl``."""
    return json.dumps(report, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def should_send_cell(last: tuple[str, str | None, float] | None, notebook: str, error: str | None,
                     now: float, heartbeat: float = HEARTBEAT) -> bool:
    """Whether a finished cell is news for the room view. ``last`` is (notebook, error, time) of the last cell
    report sent. Every error is sent (its time matters); a cell without error is sent when the notebook or the
    error state changed, or ``heartbeat`` seconds after the last report."""
    if error is not None or last is None:
        return True
    last_notebook, last_error, last_at = last
    return notebook != last_notebook or last_error is not None or now - last_at >= heartbeat


class Reporter:
    """Sends reports on one background thread; :meth:`send` only writes the line and queues it."""

    def __init__(self, config: Config, out=None):
        self.config = config
        self.out = out
        self.queue: queue.Queue[bytes] = queue.Queue(MAX_QUEUE)
        self.last_cell: tuple[str, str | None, float] | None = None
        self.noted = False
        self.delivered = self.failed = self.dropped = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send(self, report: dict) -> bytes:
        """Append the report's line to the learner's file, queue it for the service, say so once; never raises
        (a full queue drops the report; a file that cannot be written sends nothing)."""
        body = encode(report)
        try:
            with open(self.config.sent_file, "ab") as f:
                f.write(body + b"\n")
        except OSError:
            return body                   # the learner could not see it: it is not sent
        if not self.noted:
            self.noted = True
            print(NOTE.format(file=self.config.sent_file.name), file=self.out or sys.stdout)
        try:
            self.queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ampkit-room-view", daemon=True)
                self._thread.start()
        return body

    def cell(self, notebook: str, error: str | None, now: float | None = None) -> bytes | None:
        now = time.monotonic() if now is None else now
        if not should_send_cell(self.last_cell, notebook, error, now):
            return None
        self.last_cell = (notebook, error, now)
        return self.send(cell_report(notebook, error, user=self.config.user, at=_now()))

    def check(self, notebook: str, exercise: str, answer, correct: bool) -> bytes:
        return self.send(check_report(notebook, exercise, answer, correct, user=self.config.user, at=_now()))

    def _context(self) -> ssl.SSLContext | None:
        if not self.config.url.startswith("https:"):
            return None
        ctx = ssl.create_default_context()
        if self.config.ca:   # the hub's own certificate, trusted as it is; reached by loopback address
            ctx.load_verify_locations(cadata=self.config.ca)
            ctx.check_hostname = False
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        return ctx

    def post(self, body: bytes) -> int:
        """POST one report; returns the HTTP status (0 when the service could not be reached)."""
        req = urllib.request.Request(self.config.url, data=body, method="POST", headers={
            "Authorization": f"token {self.config.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT, context=self._context()) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (OSError, ValueError):
            return 0

    def _run(self) -> None:
        while True:
            body = self.queue.get()
            status = self.post(body)
            if 200 <= status < 300:
                self.delivered += 1
            else:
                self.failed += 1
            self.queue.task_done()


_reporter: Reporter | None = None


def reporter(env=None) -> Reporter | None:
    """This kernel's reporter, made on first use; ``None`` outside the room's hub."""
    global _reporter
    if _reporter is None:
        config = config_from_env(os.environ if env is None else env)
        if config is None:
            return None
        _reporter = Reporter(config)
    return _reporter


def report_check(exercise: str, answer, correct: bool) -> None:
    """Called by ``ampkit.exercises.check``: report the check when inside the room's hub; never raises."""
    try:
        r = reporter()
        if r is not None:
            r.check(notebook_name(os.environ), exercise, answer, correct)
    except Exception:   # a report must never break the learner's notebook
        pass


def _after_cell(result) -> None:
    try:
        r = reporter()
        if r is not None:
            exc = result.error_before_exec or result.error_in_exec
            r.cell(notebook_name(os.environ), None if exc is None else type(exc).__name__)
    except Exception:
        pass


def load_ipython_extension(ip) -> None:
    """IPython extension (``--ext ampkit.classroom.report``): report each finished cell, inside the hub only."""
    if config_from_env(os.environ) is not None:
        ip.events.register("post_run_cell", _after_cell)


def unload_ipython_extension(ip) -> None:
    """``%unload_ext ampkit.classroom.report``: cells are no longer reported (checks still are)."""
    try:
        ip.events.unregister("post_run_cell", _after_cell)
    except ValueError:
        pass


def show(env, out=None, last: int = 20) -> int:
    """What ``--show`` prints: whether this environment reports, where to, and the last ``last`` lines sent."""
    out = out or sys.stdout
    config = config_from_env(env)
    if config is None:
        print("room view: not configured here (not a learner's server in the room's hub): nothing is sent.",
              file=out)
        sent_file = Path(env.get("HOME") or ".") / SENT_FILE
    else:
        print(f"room view: reports go to {config.url} as {config.user!r} (your own hub token).", file=out)
        sent_file = config.sent_file
    try:
        lines = sent_file.read_text().splitlines()
    except OSError:
        print(f"nothing sent yet ({sent_file} does not exist).", file=out)
        return 0
    print(f"{len(lines)} report(s) sent, listed in {sent_file}; the last {min(last, len(lines))}:", file=out)
    for line in lines[-last:]:
        print("  " + line, file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.report --show [--last N]``: what this kernel's environment sends to the
    room view, and the reports already sent (the lines of ``~/room-view-sent.jsonl``)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.report", description=main.__doc__)
    p.add_argument("--show", action="store_true", required=True, help="print what was sent to the room view")
    p.add_argument("--last", type=int, default=20, help="how many of the last reports to print (default 20)")
    a = p.parse_args(argv)
    return show(os.environ, last=a.last)


if __name__ == "__main__":
    sys.exit(main())
