"""The room's load test, its hub side: one JupyterHub process from ``hub/jupyterhub_config.py`` on 127.0.0.1 (free
ports, a temporary state folder, an API token for the load test as a hub service), its REST API, and the learner
servers and accounts made and removed through it. Used by ``benchmarks/bench_hub.py``; it serves the room (a
JupyterHub on one machine, ``hub/README.md``) and no notebook of its own.

Standard library only at import time (``psutil``, from the ``hub`` extra, is imported when a hub's processes are
looked at). Outside the package (``tests/roomtools/``): the tests and the benchmarks use it, learners never.

>>> 1024 <= free_port() <= 65535
True
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from ampkit._net import free_port

if TYPE_CHECKING:   # never at run time: a Cleanup is anything with ``add(fn, *args)``
    import psutil

    from roomtools.loadtest import Cleanup

#: The room's hub configuration, which every hub started here loads (``load_subconfig``) before its own additions.
CONFIG = Path(__file__).resolve().parents[2] / "hub" / "jupyterhub_config.py"


class HubError(RuntimeError):
    """The hub did not start, answer or do what the load test asked of it."""


def service_config(service: str, token: str, scopes: list[str], extra: str = "", config: Path = CONFIG) -> str:
    """A config file's text: the room's ``config``, plus a hub service ``service`` with API ``token`` and ``scopes``
    (the load test's and the hub tests' way to drive the hub through its REST API).

    >>> "'name': 'bench'" in service_config("bench", "t0k", ["admin:users"])
    True
    """
    return (f"c = get_config()  # noqa\nload_subconfig({str(config)!r})  # noqa\n"
            f"c.JupyterHub.services = list(c.JupyterHub.services) + [{{'name': {service!r}, 'api_token': {token!r}}}]\n"
            f"c.JupyterHub.load_roles = list(c.JupyterHub.load_roles) + [{{'name': {service!r}, 'services': "
            f"[{service!r}], 'scopes': {list(scopes)!r}}}]\n" + extra)


def loopback_env(port: int, state: Path, venv: Path, password: str, **settings: str) -> dict[str, str]:
    """This process's environment without its ``AMPKIT_HUB_*`` settings, plus a hub on 127.0.0.1: ``port`` for the
    room, free ports for the hub's API and the proxy's, ``state``, ``venv``, the room ``password``, and
    ``settings`` (more ``AMPKIT_HUB_*`` values)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AMPKIT_HUB_")},
            "AMPKIT_HUB_IP": "127.0.0.1", "AMPKIT_HUB_PORT": str(port), "AMPKIT_HUB_HUB_PORT": str(free_port()),
            "AMPKIT_HUB_PROXY_API_PORT": str(free_port()), "AMPKIT_HUB_STATE": str(state),
            "AMPKIT_HUB_VENV": str(venv), "AMPKIT_HUB_PASSWORD": password, **settings}


def wait_answering(proc: subprocess.Popen, api, log_tail, timeout: float = 90.0) -> None:
    """Wait until the hub's REST API answers ``GET /`` with 200 (``api(method, path, timeout=...)`` gives
    ``(status, body)``); a ``HubError`` with ``log_tail()`` when the hub exits first or ``timeout`` s pass."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise HubError(f"the hub exited with {proc.returncode}:\n{log_tail()}")
        try:
            if api("GET", "/", timeout=3)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise HubError(f"the hub did not answer within {timeout:.0f} s:\n{log_tail()}")


def stop_hub_process(proc: subprocess.Popen, wait: float = 45.0) -> None:
    """SIGTERM (the hub stops its servers, services and proxy), then SIGKILL to its process group after ``wait``
    seconds. Learners' servers and kernels run in sessions of their own: the caller kills what is left of them."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


class Hub:
    """One JupyterHub from hub/jupyterhub_config.py on 127.0.0.1, with this script's token, in a temp folder.
    ``cleanup`` gets the steps that undo it: stopping the hub (and every process it left), removing the folder."""

    def __init__(self, cleanup: Cleanup, venv: Path, config: Path = CONFIG, extra_config: str = "",
                 env: dict | None = None, room_timeouts: bool = False):
        self.tmp = Path(tempfile.mkdtemp(prefix="ampkit-hub-bench-"))
        cleanup.add(shutil.rmtree, self.tmp, True)
        self.venv, self.token = venv, secrets.token_hex(32)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (self.tmp / "bench_config.py").write_text(service_config(
            "ampkit-bench", self.token, ["admin:users", "admin:servers", "access:servers"],
            ("" if room_timeouts else   # the login storm keeps the room's own spawn timeouts (what learners get)
             "c.Spawner.start_timeout = c.Spawner.http_timeout = 600   # K servers start at once on a few cores\n")
            + extra_config, config))
        self.password = secrets.token_hex(8)     # the room password (the login storm types it into the form)
        # this process's own AMPKIT_HUB_* settings stay (the load test runs the room as configured) unless set here
        env = {**os.environ, **loopback_env(self.port, self.tmp / "state", venv, self.password,
                                            AMPKIT_HUB_IDLE_TIMEOUT="3600"), **(env or {})}
        self.log_path = self.tmp / "hub.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "jupyterhub"), "-f", str(self.tmp / "bench_config.py")], cwd=self.tmp, env=env,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # a background shell ignores SIGINT
        self.known: dict[int, psutil.Process] = {}
        cleanup.add(self.stop)

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def api(self, method: str, path: str, body=None, timeout: float = 30.0, base: str = "/hub/api"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + base + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")[:300]

    def wait_up(self, timeout: float = 90.0) -> None:
        wait_answering(self.proc, self.api, self.log_tail, timeout)

    def remember_processes(self) -> None:
        """Every process under the hub (proxy, culler, servers, kernels), to kill what a stop leaves behind."""
        import psutil

        try:
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                self.known.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def processes(self) -> list[psutil.Process]:
        self.remember_processes()
        return [p for p in self.known.values() if _alive(p)]

    def stop(self) -> None:
        import psutil

        self.remember_processes()
        stop_hub_process(self.proc)
        left = [p for p in self.known.values() if _alive(p)]
        names = []
        for p in left:
            try:
                names.append(" ".join(p.cmdline()[:3])[-60:])
            except psutil.Error:
                pass
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(left, timeout=10)
        self._log.close()
        print(f"   clean-up: hub stopped (exit {self.proc.returncode}), {len(left)} leftover process(es) killed "
              f"{names}; removing {self.tmp}", flush=True)


def _alive(p: psutil.Process) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# ---- learner servers and accounts, through the hub's REST API ----------------------------------------------------

def wait_servers(h: Hub, names: list[str], timeout: float) -> None:
    deadline, pending = time.monotonic() + timeout, set(names)
    while pending:
        for n in sorted(pending):
            status, user = h.api("GET", f"/users/{n}")
            server = (user or {}).get("servers", {}).get("", {}) if status == 200 else {}
            if server.get("ready"):
                pending.discard(n)
        if pending and time.monotonic() > deadline:
            raise HubError(f"servers not ready after {timeout:.0f} s: {sorted(pending)}\n{h.log_tail()}")
        time.sleep(0.5)


def stop_servers(h: Hub, names: list[str]) -> None:
    print(f"   clean-up: stopping {len(names)} learner server(s) through the API", flush=True)
    for n in names:
        h.api("DELETE", f"/users/{n}/server", timeout=60)
    deadline = time.monotonic() + 60 + 5 * len(names)
    for n in names:
        while time.monotonic() < deadline:
            status, user = h.api("GET", f"/users/{n}")
            if status != 200 or not user.get("servers"):
                break
            time.sleep(0.5)


def delete_accounts(h: Hub, names: list[str]) -> None:
    print(f"   clean-up: deleting {len(names)} learner account(s) through the API", flush=True)
    for n in names:
        status, body = h.api("DELETE", f"/users/{n}", timeout=60)
        if status not in (204, 404):
            raise HubError(f"could not delete {n} ({status}: {body})")
