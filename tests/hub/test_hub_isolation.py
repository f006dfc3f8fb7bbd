"""The isolated hub for real (``make hub HUB_ISOLATE=1``, as root, on 127.0.0.1): two learners as system users;
from learner A's own kernel, learner B's files and the hub's secrets cannot be read; terminals are off; a kernel
that allocates past its memory limit fails alone while the hub and learner B keep serving; an idle kernel is
culled. The test's system users (ampkit-hubtest-*) and every folder are removed at the end, also on failure."""
from __future__ import annotations

import json
import os
import pwd
import stat
import time
from pathlib import Path

import pytest
from roomtools import kernel_ws

from ampkit.classroom import isolation
from conftest import TEST_PREFIX, LoopbackHub, learner_venv, remove_test_users

A, B = TEST_PREFIX + "a", TEST_PREFIX + "b"
KERNEL_IDLE, CULL_EVERY = 40, 5      # short, so that the culling test waits under a minute


@pytest.fixture(scope="module")
def room():
    remove_test_users()                       # a previous run killed before its clean-up
    h = LoopbackHub({"AMPKIT_HUB_ISOLATE": "1", "AMPKIT_HUB_PASSWORD": "",   # the password file is made
                     "AMPKIT_HUB_KERNEL_IDLE": str(KERNEL_IDLE),
                     "AMPKIT_HUB_KERNEL_CULL_EVERY": str(CULL_EVERY)}, start=False)
    try:
        h.start(AMPKIT_HUB_VENV=str(learner_venv(h.tmp)))
        h.wait_up()
        for name in (A, B):
            h.start_server(name)
        yield h
    finally:
        h.stop()
        removed = remove_test_users()
        print(f"clean-up: hub stopped, system users removed: {removed}")
    assert not [p for p in pwd.getpwall() if p.pw_name.startswith("ampkit-" + TEST_PREFIX)]


def kernel(h: LoopbackHub, name: str) -> kernel_ws.KernelSocket:
    status, body = h.request("POST", f"/user/{name}/api/kernels", {"name": "python3"})
    assert status == 201, (status, body)
    kid = json.loads(body)["id"]
    ks = kernel_ws.KernelSocket(f"ws://127.0.0.1:{h.port}/user/{name}/api/kernels/{kid}/channels", h.token, 60)
    ks.kernel_id = kid
    ks.wait_ready(120)
    return ks


def test_learners_are_system_users_with_private_homes(room):
    users = isolation.kit_users()
    for name in (A, B):
        entry = users[name]
        home = Path(room.state) / "users" / name
        st = home.stat()
        assert entry.pw_name == "ampkit-" + name and entry.pw_uid != 0
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (entry.pw_uid, 0o700)
        notebooks = sorted((home / "notebooks").glob("*.ipynb"))
        assert notebooks and all(p.stat().st_uid == entry.pw_uid for p in notebooks)
    assert isolation.privacy_problems(room.state) == []
    for secret in ("room-password", "admin-password", "jupyterhub_cookie_secret", "jupyterhub.sqlite"):
        assert stat.S_IMODE((Path(room.state) / secret).stat().st_mode) == 0o600, secret


def test_a_kernel_cannot_read_b_or_the_hubs_secrets(room):
    b_home = Path(room.state) / "users" / B
    (b_home / "notebooks" / "private.txt").write_text("B's answer\n")     # written as root: B's folder, B's file
    targets = {"B's file": str(b_home / "notebooks" / "private.txt"), "B's notebook":
               str(next((b_home / "notebooks").glob("*.ipynb"))), "room password": str(room.state / "room-password"),
               "admin password": str(room.state / "admin-password"),
               "cookie secret": str(room.state / "jupyterhub_cookie_secret"),
               "database": str(room.state / "jupyterhub.sqlite")}
    ks = kernel(room, A)
    try:
        ks.execute(f"""
import os, pwd
assert pwd.getpwuid(os.getuid()).pw_name == "ampkit-{A}", pwd.getpwuid(os.getuid())
readable = []
for what, path in {targets!r}.items():
    try:
        open(path, "rb").read(1)
        readable.append(what)
    except PermissionError:
        pass
for what, folder in {{"B's home": {str(b_home)!r}, "the users' folder": {str(b_home.parent)!r},
                     "the hub's state": {str(room.state)!r}}}.items():
    try:
        os.listdir(folder)
        readable.append(what)
    except PermissionError:
        pass
assert not readable, f"learner A could read: {{readable}}"
open(os.path.expanduser("~/notebooks/mine.txt"), "w").write("A's own file")   # A's own home is writable
from ampkit.sinking.cache import compile_cache_dir            # notebook 04's compile cache: A's own, writable
cache = compile_cache_dir()
assert str(cache).startswith(os.path.expanduser("~") + "/"), cache
cache.mkdir(parents=True, exist_ok=True)
(cache / "probe").write_text("ok")
""", timeout=60)
    finally:
        ks.close()
    assert (Path(room.state) / "users" / A / "notebooks" / "mine.txt").stat().st_uid == pwd.getpwnam(
        "ampkit-" + A).pw_uid


def test_terminals_are_off(room):
    for method, body in (("GET", None), ("POST", {})):
        status, _ = room.request(method, f"/user/{A}/api/terminals", body)
        assert status in (403, 404), (method, status)
    status, _ = room.request("GET", f"/user/{A}/api/kernels")          # while the server itself answers
    assert status == 200


def test_a_kernel_past_its_limit_fails_alone(room):
    b = kernel(room, B)
    a = kernel(room, A)
    try:
        b.execute("import torch\nassert float(torch.ones(3).sum()) == 3.0", timeout=180)  # torch fits the limit
        limit = isolation.DEFAULT_MEM_LIMIT_GIB * 2**30
        a.execute(f"import resource\nassert resource.getrlimit(resource.RLIMIT_AS) == ({limit}, {limit})\n"
                  f"assert resource.getrlimit(resource.RLIMIT_NPROC) == ({isolation.MAX_PROCESSES},) * 2", 60)
        with pytest.raises(kernel_ws.KernelError, match="MemoryError"):   # one allocation past the limit
            a.execute(f"x = bytearray({limit})", timeout=60)
        with pytest.raises(kernel_ws.KernelError, match="MemoryError"):   # memory really filled, 256 MiB at a time
            a.execute("chunks = []\nwhile True:\n    chunks.append(bytearray(256 * 2**20))", timeout=120)
        a.execute("del chunks[:]\nassert 1 + 1 == 2", timeout=60)       # A's kernel lives on, its memory freed
        b.execute("assert float(torch.ones(2).sum()) == 2.0", timeout=60)  # B is served
        assert room.api("GET", "/")[0] == 200                            # and the hub
        hub_limits = Path(f"/proc/{room.proc.pid}/limits").read_text()   # only the learners are limited
        assert [line for line in hub_limits.splitlines() if line.startswith("Max address space")][0].split()[3] \
            == "unlimited"
    finally:
        a.close()
        b.close()


def test_an_idle_kernel_is_culled(room):
    ks = kernel(room, B)
    kid = ks.kernel_id
    ks.close()                                  # the tab closed; cull_connected culls open tabs' kernels as well
    deadline = time.monotonic() + KERNEL_IDLE + 10 * CULL_EVERY + 30
    while time.monotonic() < deadline:
        status, body = room.request("GET", f"/user/{B}/api/kernels")
        assert status == 200
        if kid not in {k["id"] for k in json.loads(body)}:
            break
        time.sleep(2)
    else:
        pytest.fail(f"kernel {kid} still running after {KERNEL_IDLE} s idle and the culler's checks")
    status, _ = room.request("GET", f"/user/{B}/api/contents/notebooks")   # the server and files stay
    assert status == 200


def test_server_processes_run_as_the_learners(room):
    import psutil

    uids = {pwd.getpwnam("ampkit-" + n).pw_uid for n in (A, B)}
    servers = [p for p in psutil.process_iter(["cmdline", "uids"])
               if any("jupyterhub-singleuser" in part for part in (p.info["cmdline"] or []))
               and p.info["uids"].real in uids]
    assert {p.info["uids"].real for p in servers} == uids
    assert all(p.info["uids"].effective != 0 for p in servers)
    assert os.geteuid() == 0          # the hub (this test's child) is root; the learners are not
