"""tests/hub's own hub runner (isolation and HTTPS tests): one JupyterHub from hub/jupyterhub_config.py on 127.0.0.1
(free ports, a temporary state folder, a service token with admin scopes), stopped with everything it started, and
the test's system users (``ampkit-hubtest-*``) removed, also when a test fails."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
from roomtools.hub_client import free_port, loopback_env, service_config, stop_hub_process, wait_answering

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "hub" / "jupyterhub_config.py"
VENV = ROOT / ".venv"
#: The only learner names these tests use: their system users are ampkit-hubtest-*.
TEST_PREFIX = "hubtest-"


class LoopbackHub:
    """A real hub on 127.0.0.1. ``env`` adds AMPKIT_HUB_* settings; ``https`` uses ``https://`` with ``cafile``."""

    def __init__(self, env: dict, https: bool = False, cafile: str | None = None, state: Path | None = None,
                 start: bool = True):
        self.tmp = Path(tempfile.mkdtemp(prefix="ampkit-hubtest-"))
        self.tmp.chmod(0o711)                     # learners' homes are below it: they must be able to enter
        self.state = state or self.tmp / "state"
        self.token, self.port = secrets.token_hex(32), free_port()
        self.url = f"{'https' if https else 'http'}://127.0.0.1:{self.port}"
        self.ctx = ssl.create_default_context(cafile=cafile) if https else None
        (self.tmp / "test_config.py").write_text(
            service_config("hubtest", self.token, ["admin:users", "admin:servers", "access:servers"], config=CONFIG))
        self.env = loopback_env(self.port, self.state, VENV, secrets.token_hex(8), **env)
        self.log_path = self.tmp / "hub.log"
        self._log, self.proc = None, None
        if start:
            self.start()

    def start(self, **env) -> None:
        self.env.update(env)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(self.tmp / "test_config.py")],
                                     cwd=self.tmp, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def request(self, method: str, path: str, body=None, timeout: float = 30.0, token: bool = True):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"token {self.token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ctx) as r:
                raw = r.read()
                return r.status, raw
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def api(self, method: str, path: str, body=None, timeout: float = 30.0):
        status, raw = self.request(method, "/hub/api" + path, body, timeout)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def wait_up(self, timeout: float = 90.0) -> None:
        wait_answering(self.proc, self.api, lambda: self.log()[-3000:], timeout)

    def start_server(self, name: str, timeout: float = 180.0) -> None:
        status, body = self.api("POST", f"/users/{name}")
        assert status in (201, 409), (status, body)
        status, body = self.api("POST", f"/users/{name}/server")
        assert status in (201, 202), (status, body, self.log()[-3000:])
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            status, user = self.api("GET", f"/users/{name}")
            if (user or {}).get("servers", {}).get("", {}).get("ready"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{name}'s server not ready after {timeout:.0f} s:\n{self.log()[-3000:]}")

    def stop(self) -> None:
        known = []
        if self.proc is None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        try:
            known = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        stop_hub_process(self.proc)
        # learners' servers run in sessions of their own: kill whatever the stop left (by the test users' uids too)
        uids = {p.pw_uid for p in _test_users()}
        left = [p for p in known if _alive(p)]
        left += [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=10)
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def learner_venv(tmp: Path) -> Path:
    """A venv the learners' system users can run. The kit's own when its Python is reachable by others; else (a
    pyenv Python under /root, mode 700, as on the kit's CI machine) a thin venv in ``tmp`` from the system's
    Python of the same version that reads the kit venv's packages (``site.addsitedir`` in a .pth file)."""
    from ampkit.classroom import isolation

    if not isolation.unreachable([VENV / "bin" / "python"]):
        return VENV
    [site] = sorted(VENV.glob("lib/python3*/site-packages"))
    system = Path("/usr/bin") / site.parent.name
    if not system.exists():
        raise RuntimeError(f"{VENV}'s Python is not reachable by other users and there is no {system} to make a "
                           "learners' venv from: make the venv from a system Python (make lab PYTHON=/usr/bin/python3)")
    shim = tmp / "learner-venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(shim)], check=True)
    [shim_site] = shim.glob("lib/python3*/site-packages")
    (shim_site / "zz-ampkit-venv.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    script = shim / "bin" / "jupyterhub-singleuser"
    script.write_text(f"#!{shim / 'bin' / 'python'}\nimport sys\nfrom jupyterhub.singleuser import main\n"
                      "sys.exit(main())\n")
    script.chmod(0o755)
    (shim / "hub-node").symlink_to(VENV / "hub-node")
    for path in [shim] + [Path(root) / d for root, dirs, _ in os.walk(shim) for d in dirs]:
        path.chmod(0o755)
    return shim


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _test_users():
    import pwd

    return [p for p in pwd.getpwall() if p.pw_name.startswith("ampkit-" + TEST_PREFIX)]


def remove_test_users() -> list[str]:
    """userdel every ampkit-hubtest-* account (only those: the kit's prefix and this suite's)."""
    from ampkit.classroom import isolation

    names = [p.pw_name[len(isolation.USER_PREFIX):] for p in _test_users()]
    if names:
        isolation.remove_users(names)
    return names
