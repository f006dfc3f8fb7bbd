"""The isolated hub's pure parts (ampkit/classroom/isolation.py): names, limits, server options, the secrets' check,
the system-user commands and the config wiring. No user is created and no hub started here (tests/hub does both)."""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from ampkit.classroom import hub, isolation
from ampkit.classroom.hub import users

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "hub" / "jupyterhub_config.py"


def test_system_names_carry_the_prefix_and_fit_linux():
    assert isolation.system_name("ana-k") == "ampkit-ana-k"
    assert len(isolation.system_name("a" * 25)) == 32                      # Linux's longest user name
    for bad in ("a" * 26, "Ana", "1ana", "", "ana.k", "root "):
        with pytest.raises(ValueError, match="1 to 25 characters"):
            isolation.system_name(bad)


@pytest.mark.parametrize("raw, expected", [("3G", 3 * 2**30), ("3072M", 3 * 2**30), ("3072", 3 * 2**30),
                                           ("2.5GiB", int(2.5 * 2**30)), ("off", 0), ("0", 0)])
def test_mem_limit_sizes(raw, expected):
    assert isolation.parse_mem_limit(raw) == expected


@pytest.mark.parametrize("raw, match", [("lots", "such as 3G"), ("3T", "such as 3G"), ("100M", "at least 512M")])
def test_mem_limit_bad_sizes_name_the_valid_ones(raw, match):
    with pytest.raises(ValueError, match=match):
        isolation.parse_mem_limit(raw)


def test_default_limit_is_derived_from_the_committed_measurement():
    measured = json.loads((ROOT / "benchmarks" / "results" / "kernel_memory.json").read_text())
    peak = max(r["stages"]["notebook_done"]["VmPeak"] for r in measured["runs"])
    assert measured["peak_vm_mib"] == peak
    assert isolation.default_mem_limit(peak) == isolation.DEFAULT_MEM_LIMIT_GIB
    assert isolation.DEFAULT_MEM_LIMIT_GIB * 1024 >= peak * isolation.MEM_MARGIN
    assert isolation.default_mem_limit(1024, 1.5) == 2 and isolation.default_mem_limit(2048, 1.5) == 3


def test_limits_and_the_preexec_in_a_real_child():
    assert isolation.rlimits(0) == [("RLIMIT_CORE", 0)]
    assert isolation.rlimits(2**30) == [("RLIMIT_CORE", 0), ("RLIMIT_AS", 2**30)]
    assert isolation.rlimits(0, isolate=True) == [("RLIMIT_CORE", 0), ("RLIMIT_NPROC", isolation.MAX_PROCESSES)]
    calls = []
    preexec = isolation.limited_preexec(lambda: calls.append("inner"), isolation.rlimits(2**30))
    code = ("import resource\nprint(resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CORE))\n"
            "try:\n    bytearray(2**30)\nexcept MemoryError:\n    print('MemoryError')\n")
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=preexec, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split("\n")[:2] == [f"({2**30}, {2**30}) (0, 0)", "MemoryError"], out.stderr


def test_server_args_terminals_and_kernel_culling():
    default = isolation.server_args(False, 1800)
    assert "--ServerApp.terminals_enabled=False" in default
    assert {"--MappingKernelManager.cull_idle_timeout=1800", "--MappingKernelManager.cull_interval=60",
            "--MappingKernelManager.cull_connected=True"} <= set(default)
    assert isolation.server_args(True, 0) == []                     # terminals on, culling off


def test_secrets_are_made_private_and_checked(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    for name in ("room-password", "admin-password"):
        (state / name).write_text("x")
        (state / name).chmod(0o644)
    problems = isolation.privacy_problems(state)
    assert len(problems) == 3 and "room-password" in " ".join(problems) and "mode 711" in problems[0]
    isolation.make_private(state)
    assert isolation.privacy_problems(state) == []
    assert (state / "jupyterhub.sqlite").stat().st_mode & 0o777 == 0o600     # made before sqlite makes it 644
    assert (state / "users").stat().st_mode & 0o777 == 0o711
    assert isolation.privacy_problems(state, owner=os.geteuid() + 1)          # another owner is a problem too


def test_unreachable_follows_links_into_closed_folders():
    import shutil
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="ampkit-unreachable-"))   # /tmp itself: pytest's own folder is 700
    closed = tmp_path / "closed"
    (closed / "bin").mkdir(parents=True)
    (closed / "bin" / "python").write_text("")
    closed.chmod(0o700)
    tmp_path.chmod(0o755)
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(closed / "bin" / "python")
    try:
        [problem] = isolation.unreachable([venv / "python"])
        assert problem.startswith(f"{closed} (mode 700)") and "PYTHON=/usr/bin/python3" in problem
        closed.chmod(0o711)
        assert isolation.unreachable([venv / "python"]) == []
    finally:
        shutil.rmtree(tmp_path)


def _entry(name, comment, uid=4242):
    return pwd.struct_passwd((name, "x", uid, uid, comment, f"/home/{name}", "/bin/bash"))


def test_user_commands_and_only_the_kits_accounts(monkeypatch):
    assert isolation.useradd_argv("ana", "/s/users/ana") == [
        "useradd", "--no-create-home", "--home-dir", "/s/users/ana", "--shell", "/bin/bash", "--user-group",
        "--comment", "ampkit learner", "ampkit-ana"]
    assert isolation.userdel_argv("ana") == ["userdel", "ampkit-ana"]       # the home (the work) is kept
    accounts = [_entry("ampkit-ana", "ampkit learner"), _entry("ampkit-ops", "the ops team"),
                _entry("ana", "ampkit learner"), _entry("root", "root", 0)]
    monkeypatch.setattr(pwd, "getpwall", lambda: accounts)
    assert list(isolation.kit_users()) == ["ana"]
    ran = []
    assert isolation.remove_users(run=lambda argv, **kw: ran.append(argv) or subprocess.CompletedProcess(argv, 0)) \
        == ["ana"]
    assert ran == [["userdel", "ampkit-ana"]]
    with pytest.raises(ValueError, match="not a learner account of the kit: ops .*the kit's: ana"):
        isolation.remove_users(["ops"], run=lambda *a, **k: pytest.fail("must not run"))


def test_ensure_user_creates_once_and_never_takes_over(monkeypatch):
    accounts = {"ampkit-ops": _entry("ampkit-ops", "the ops team")}
    monkeypatch.setattr(pwd, "getpwall", lambda: list(accounts.values()))
    monkeypatch.setattr(pwd, "getpwnam", lambda n: accounts[n])
    ran = []

    def run(argv, **kw):
        ran.append(argv)
        accounts[argv[-1]] = _entry(argv[-1], "ampkit learner")
        return subprocess.CompletedProcess(argv, 0)

    assert isolation.ensure_user("ana", "/s/users/ana", run=run).pw_name == "ampkit-ana"
    assert isolation.ensure_user("ana", "/s/users/ana", run=run).pw_name == "ampkit-ana"
    assert len(ran) == 1                                                        # created once
    with pytest.raises(RuntimeError, match="not created by ampkit"):
        isolation.ensure_user("ops", "/s/users/ops", run=run)
    failing = lambda argv, **kw: subprocess.CompletedProcess(argv, 9, "", "useradd: no")   # noqa: E731
    with pytest.raises(RuntimeError, match="useradd ampkit-bo failed .9.: useradd: no"):
        isolation.ensure_user("bo", "/s/users/bo", run=failing)


def test_prepare_learner_copies_then_gives_the_home_to_the_learner(tmp_path, monkeypatch):
    me = _entry("ampkit-ana", "ampkit learner", os.getuid())
    monkeypatch.setattr(isolation, "ensure_user", lambda name, home: me)
    home = tmp_path / "users" / "ana"
    copied = []
    isolation.prepare_learner("ana", home, lambda: copied.append((home / "notebooks").mkdir(parents=True)))
    assert copied and (home / "notebooks").is_dir()
    assert home.stat().st_mode & 0o777 == 0o700 and home.stat().st_uid == os.getuid()


@pytest.mark.parametrize("env, match", [
    ({"AMPKIT_HUB_ISOLATE": "yes"}, "expected 1 .on. or 0"),
    ({"AMPKIT_HUB_TERMINALS": "true"}, "expected 1 .on. or 0"),
    ({"AMPKIT_HUB_MEM_LIMIT": "big"}, "such as 3G"),
    ({"AMPKIT_HUB_KERNEL_IDLE": "-1"}, "from 0 to"),
    ({"AMPKIT_HUB_KERNEL_CULL_EVERY": "1"}, "from 5 to"),
])
def test_bad_isolation_settings_name_the_valid_choices(env, match):
    with pytest.raises(ValueError, match=match):
        hub.settings_from_env(env, ROOT)


def test_settings_defaults_and_who_may_start_it():
    shared = hub.settings_from_env({}, ROOT)
    assert (shared.isolate, shared.mem_limit, shared.terminals, shared.kernel_idle) == (False, 0, False, 1800)
    iso = hub.settings_from_env({"AMPKIT_HUB_ISOLATE": "1", "AMPKIT_HUB_IP": "0.0.0.0"}, ROOT)
    assert iso.mem_limit == isolation.DEFAULT_MEM_LIMIT_GIB * 2**30
    assert hub.exposure_problem(iso, euid=0) is None                          # root, on purpose: learners are not
    assert "must run as root" in hub.exposure_problem(iso, euid=1000)
    assert hub.settings_from_env({"AMPKIT_HUB_MEM_LIMIT": "4G"}, ROOT).mem_limit == 4 * 2**30   # shared mode too


def _load_config(tmp_path, monkeypatch, **env):
    from traitlets.config.loader import PyFileConfigLoader

    for k in [k for k in os.environ if k.startswith("AMPKIT_HUB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AMPKIT_HUB_STATE", str(tmp_path / "state"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


def test_config_wiring_isolated(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    monkeypatch.setattr(isolation, "unreachable", lambda paths: [])
    monkeypatch.setattr(isolation.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(isolation, "spawner_class", lambda *a: built.append(a) or "ampkit-spawner")
    c = _load_config(tmp_path, monkeypatch, AMPKIT_HUB_ISOLATE="1", AMPKIT_HUB_TERMINALS="1",
                     AMPKIT_HUB_KERNEL_IDLE="900")
    assert c.JupyterHub.spawner_class == "ampkit-spawner"
    assert built == [(True, [("RLIMIT_CORE", 0), ("RLIMIT_AS", 3 * 2**30), ("RLIMIT_NPROC", 512)],
                      str(tmp_path / "state" / "users"))]
    assert c.Authenticator.username_pattern == isolation.USERNAME_PATTERN
    assert c.Spawner.pre_spawn_hook.__name__ == "create_and_copy"
    assert "--ServerApp.allow_root=True" not in c.Spawner.args                # the learners are not root
    assert "--ServerApp.terminals_enabled=False" not in c.Spawner.args
    assert "--MappingKernelManager.cull_idle_timeout=900" in c.Spawner.args
    assert isolation.privacy_problems(tmp_path / "state") == []                # checked and made private at start


def test_config_shared_mode_keeps_its_spawner_and_culls_kernels(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch)
    assert c.JupyterHub.spawner_class == "simple"
    assert "--ServerApp.terminals_enabled=False" in c.Spawner.args
    assert "--MappingKernelManager.cull_idle_timeout=1800" in c.Spawner.args
    with pytest.raises(ValueError, match="must run as root"):
        monkeypatch.setattr(hub.os, "geteuid", lambda: 1000)
        _load_config(tmp_path, monkeypatch, AMPKIT_HUB_ISOLATE="1")


def test_users_cli_refuses_without_root_or_names(monkeypatch, capsys):
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    assert users.main(["add", "ana"]) == 2 and "needs root" in capsys.readouterr().err
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 0)
    assert users.main(["add"]) == 2 and "NAMES=" in capsys.readouterr().err


def test_start_problem_is_one_line_before_anything_starts(tmp_path, monkeypatch):
    shared = hub.settings_from_env({"AMPKIT_HUB_VENV": str(tmp_path)}, ROOT)
    assert isolation.start_problem(shared) is None
    iso = hub.settings_from_env({"AMPKIT_HUB_ISOLATE": "1", "AMPKIT_HUB_VENV": str(tmp_path / "venv")}, ROOT)
    monkeypatch.setattr(isolation, "unreachable", lambda paths: [f"{paths[0]} is closed"])
    monkeypatch.setattr(isolation.shutil, "which", lambda name: f"/usr/sbin/{name}")
    assert isolation.start_problem(iso) == f"the isolated hub will not start: {tmp_path / 'venv' / 'bin' / 'python'} " \
        "is closed"
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    assert "useradd, which is not on PATH" in isolation.start_problem(iso)


def test_make_test_hub_says_in_one_line_what_is_missing(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("needs_hub", ROOT / "tests" / "hub" / "needs_hub.py")
    needs_hub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(needs_hub)
    empty = tmp_path / "venv"
    (empty / "bin").mkdir(parents=True)
    msg = needs_hub.problem(str(empty), None, 0, True, True)
    assert msg.startswith("make test-hub needs the hub extra; missing: jupyterhub") and "\n" not in msg
    assert "make hub-install" in msg
    venv = ROOT / ".venv"
    if not hub.missing_extras(venv):          # with the extra installed: root, useradd and openssl are checked
        assert "needs root and useradd" in needs_hub.problem(str(venv), None, 1000, True, True)
        assert "openssl" in needs_hub.problem(str(venv), None, 0, True, False)
        assert needs_hub.problem(str(venv), None, 0, True, True) is None
