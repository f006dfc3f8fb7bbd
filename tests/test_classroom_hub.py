"""The room's JupyterHub (hub/jupyterhub_config.py, ampkit/classroom/hub/, make hub): no hub is started here."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from roomtools import kernel_ws

from ampkit.classroom import hub

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "hub" / "jupyterhub_config.py"


def _load_config(tmp_path, monkeypatch, **env):
    from traitlets.config.loader import PyFileConfigLoader

    for k in [k for k in os.environ if k.startswith("AMPKIT_HUB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AMPKIT_HUB_STATE", str(tmp_path / "state"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


def test_config_defaults_loopback_password_culler_venv(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch)
    assert c.JupyterHub.bind_url == "http://127.0.0.1:8000/"          # this machine only, by default
    assert c.JupyterHub.hub_ip == "127.0.0.1"
    assert c.ConfigurableHTTPProxy.api_url.startswith("http://127.0.0.1:")
    assert c.JupyterHub.authenticator_class == "shared-password"
    assert c.Authenticator.allow_all is True and c.Authenticator.admin_users == {"instructor"}
    assert len(c.SharedPasswordAuthenticator.user_password) >= 8
    assert len(c.SharedPasswordAuthenticator.admin_password) >= 32
    assert c.SharedPasswordAuthenticator.user_password != c.SharedPasswordAuthenticator.admin_password
    [culler] = [s for s in c.JupyterHub.services if s["name"] == "idle-culler"]
    assert "from jupyterhub_idle_culler import main" in culler["command"][2] and "--timeout=3600" in culler["command"]
    assert culler["command"][0] == str(ROOT / ".venv" / "bin" / "python")
    [role] = [r for r in c.JupyterHub.load_roles if r["services"] == ["idle-culler"]]
    assert set(role["scopes"]) == {"list:users", "read:users:activity", "read:servers", "delete:servers"}
    venv_bin = ROOT / ".venv" / "bin"
    assert c.Spawner.cmd == [str(venv_bin / "jupyterhub-singleuser")]        # the kit's venv: its kernel has ampkit
    assert c.Spawner.environment["PATH"].startswith(str(venv_bin))
    assert c.JupyterHub.spawner_class == "simple"
    assert c.JupyterHub.concurrent_spawn_limit == hub.default_spawn_limit(os.cpu_count() or 1)   # the room's
    assert c.JupyterHub.active_server_limit == hub.default_max_servers(hub.machine_mib())         # defaults
    assert c.SimpleLocalProcessSpawner.home_dir_template == str(tmp_path / "state" / "users" / "{username}")
    assert c.JupyterHub.db_url == f"sqlite:///{tmp_path / 'state' / 'jupyterhub.sqlite'}"
    assert c.ConfigurableHTTPProxy.command == [str(ROOT / ".venv" / "hub-node" / "node_modules" / ".bin" /
                                                   "configurable-http-proxy")]


def test_config_passwords_are_kept_not_regenerated_and_env_wins(tmp_path, monkeypatch):
    first = _load_config(tmp_path, monkeypatch).SharedPasswordAuthenticator.user_password
    assert _load_config(tmp_path, monkeypatch).SharedPasswordAuthenticator.user_password == first
    assert (tmp_path / "state" / "room-password").stat().st_mode & 0o077 == 0        # only the hub's user reads it
    c = _load_config(tmp_path, monkeypatch, AMPKIT_HUB_PASSWORD="room-42-secret")
    assert c.SharedPasswordAuthenticator.user_password == "room-42-secret"
    with pytest.raises(ValueError, match="at least 8"):
        _load_config(tmp_path, monkeypatch, AMPKIT_HUB_PASSWORD="short")


def test_config_exposed_and_timeout_from_env(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch, AMPKIT_HUB_IP="0.0.0.0", AMPKIT_HUB_PORT="9000",
                     AMPKIT_HUB_IDLE_TIMEOUT="600", AMPKIT_HUB_ADMINS="ann, bo", AMPKIT_HUB_ALLOW_ROOT="1")
    assert c.JupyterHub.bind_url == "http://0.0.0.0:9000/"
    assert c.JupyterHub.hub_ip == "127.0.0.1"        # the hub's own API never leaves the machine
    assert "--timeout=600" in c.JupyterHub.services[0]["command"]
    assert c.Authenticator.admin_users == {"ann", "bo"}


def test_config_https_and_kernel_threads(tmp_path, monkeypatch):
    cert, key = tmp_path / "hub.crt", tmp_path / "hub.key"
    cert.write_text("cert")
    key.write_text("key")
    c = _load_config(tmp_path, monkeypatch, AMPKIT_HUB_SSL_CERT=str(cert), AMPKIT_HUB_SSL_KEY=str(key),
                     AMPKIT_HUB_KERNEL_THREADS="2")
    assert c.JupyterHub.bind_url == "https://127.0.0.1:8000/"
    assert (c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key) == (str(cert), str(key))
    assert c.Spawner.environment["OMP_NUM_THREADS"] == "2"
    assert _load_config(tmp_path, monkeypatch).Spawner.environment["OMP_NUM_THREADS"] == "1"   # the default: one
    assert "OMP_NUM_THREADS" not in _load_config(tmp_path, monkeypatch,
                                                 AMPKIT_HUB_KERNEL_THREADS="0").Spawner.environment
    with pytest.raises(ValueError, match="both"):
        hub.settings_from_env({"AMPKIT_HUB_SSL_CERT": str(cert)}, ROOT)
    with pytest.raises(ValueError, match="no such file"):
        hub.settings_from_env({"AMPKIT_HUB_SSL_CERT": str(cert), "AMPKIT_HUB_SSL_KEY": "nope.key"}, ROOT)


def test_root_may_serve_this_machine_but_not_the_room_unless_told():
    local, room = hub.settings_from_env({}, ROOT), hub.settings_from_env({"AMPKIT_HUB_IP": "0.0.0.0"}, ROOT)
    assert hub.exposure_problem(local, euid=0) is None                       # like `make lab` as root
    assert hub.exposure_problem(room, euid=1000) is None                     # an ordinary user
    assert "as root" in hub.exposure_problem(room, euid=0) and "HUB_ALLOW_ROOT=1" in hub.exposure_problem(room, 0)
    told = hub.settings_from_env({"AMPKIT_HUB_IP": "0.0.0.0", "AMPKIT_HUB_ALLOW_ROOT": "1"}, ROOT)
    assert hub.exposure_problem(told, euid=0) is None
    assert hub.settings_from_env({"AMPKIT_HUB_IP": "::1"}, ROOT).bind_url == "http://[::1]:8000/"


@pytest.mark.parametrize("env, match", [
    ({"AMPKIT_HUB_IP": "localhost"}, "127.0.0.1"),
    ({"AMPKIT_HUB_PORT": "http"}, "integer from 1 to 65535"),
    ({"AMPKIT_HUB_PORT": "70000"}, "integer from 1 to 65535"),
    ({"AMPKIT_HUB_IDLE_TIMEOUT": "5"}, "from 60"),
    ({"AMPKIT_HUB_ADMINS": " , "}, "at least one admin"),
])
def test_bad_settings_name_the_valid_choices(env, match):
    with pytest.raises(ValueError, match=match):
        hub.settings_from_env(env, ROOT)


def _notebooks(src: Path) -> None:
    src.mkdir()
    for name in ("00_a.ipynb", "03_b.ipynb"):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("print(1)", execution_count=3)
        cell.outputs = [nbformat.v4.new_output("stream", text="1\n")]
        nb.cells = [nbformat.v4.new_markdown_cell("# hi"), cell]
        nb.metadata["widgets"] = {"state": {}}
        nbformat.write(nb, src / name)


def test_first_login_copies_cleared_notebooks_once(tmp_path):
    _notebooks(tmp_path / "src")
    ref = tmp_path / "reference.md"
    ref.write_text("# refs\n")
    home = tmp_path / "home"
    assert hub.copy_notebooks_once(tmp_path / "src", home, ref) == ["00_a.ipynb", "03_b.ipynb", "docs/reference.md"]
    nb = nbformat.read(home / "notebooks" / "03_b.ipynb", as_version=4)
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None and "widgets" not in nb.metadata
    assert (home / "docs" / "reference.md").read_text() == "# refs\n"     # the notebooks' ../docs links resolve
    # the learner edits one and deletes the other: a later login keeps the edit, brings back the deleted one
    nb.cells[1].source = "print('my work')"
    nbformat.write(nb, home / "notebooks" / "03_b.ipynb")
    (home / "notebooks" / "00_a.ipynb").unlink()
    assert hub.copy_notebooks_once(tmp_path / "src", home, ref) == ["00_a.ipynb"]
    assert "my work" in (home / "notebooks" / "03_b.ipynb").read_text()
    assert hub.copy_notebooks_once(tmp_path / "src", home, ref) == []


def test_first_login_without_notebooks_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no notebooks \(\*\.ipynb\)"):
        hub.copy_notebooks_once(tmp_path / "empty", tmp_path / "home")


def test_pre_spawn_hook_copies_into_the_spawners_home(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch)

    class FakeSpawner:
        home_dir = str(tmp_path / "state" / "users" / "ann")

        class log:
            @staticmethod
            def info(*a):
                pass

    c.Spawner.pre_spawn_hook(FakeSpawner)
    names = sorted(p.name for p in (Path(FakeSpawner.home_dir) / "notebooks").glob("*.ipynb"))
    assert names == sorted(p.name for p in hub.settings_from_env({}, ROOT).notebook_source.glob("*.ipynb"))
    assert "03_loss_scaling.ipynb" in names
    mtime = (Path(FakeSpawner.home_dir) / "notebooks" / "03_loss_scaling.ipynb").stat().st_mtime_ns
    c.Spawner.pre_spawn_hook(FakeSpawner)                                   # second login: nothing rewritten
    assert (Path(FakeSpawner.home_dir) / "notebooks" / "03_loss_scaling.ipynb").stat().st_mtime_ns == mtime


def test_workshop_copies_are_the_source_when_they_exist(tmp_path):
    (tmp_path / "notebooks").mkdir()
    assert hub.settings_from_env({}, tmp_path).notebook_source == tmp_path / "notebooks"
    (tmp_path / "workshop").mkdir()
    (tmp_path / "workshop" / "00_x.ipynb").write_text("{}")
    assert hub.settings_from_env({}, tmp_path).notebook_source == tmp_path / "workshop"


def test_missing_extras_message(tmp_path):
    empty = tmp_path / "venv"
    (empty / "bin").mkdir(parents=True)
    missing = hub.missing_extras(empty)
    assert missing == ["jupyterhub", "jupyterhub-singleuser", "jupyterhub-idle-culler", "configurable-http-proxy"]
    msg = hub.missing_message(missing, ".venv")
    assert "make hub-install" in msg and 'pip install -e ".[hub]"' in msg
    assert "install --prefix .venv/hub-node configurable-http-proxy@5" in msg
    only_node = hub.missing_message(["configurable-http-proxy"], ".venv")
    assert "pip install" not in only_node and "configurable-http-proxy@5" in only_node


def _kit_copy(tmp_path) -> Path:
    """The make files and the hub module in a scratch folder, with an installed-looking venv that lacks the hub."""
    for rel in ["Makefile", "pyproject.toml", "constraints.txt", "ampkit/__init__.py", "ampkit/_version.py",
                "ampkit/_kit.py", "ampkit/classroom/__init__.py",
                *[str(p.relative_to(ROOT)) for p in (ROOT / "ampkit/classroom/hub").glob("*.py")],
                "ampkit/classroom/isolation.py", "ampkit/classroom/tls.py",
                *[str(p.relative_to(ROOT)) for p in (ROOT / "make").glob("*.mk")]]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    venv = tmp_path / "fakevenv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".ampkit-installed").touch()     # newer than pyproject.toml: make does not reinstall
    return tmp_path


def test_make_hub_without_extras_says_what_to_install(tmp_path):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    kit = _kit_copy(tmp_path)
    out = subprocess.run(["make", "hub", "VENV=fakevenv"], cwd=kit, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "make hub needs JupyterHub's extras; missing: jupyterhub" in out.stderr
    assert "make hub-install" in out.stderr and "Traceback" not in out.stderr + out.stdout
    assert "jupyterhub -f" not in out.stdout                          # the hub itself was never started


def test_make_hub_plan(tmp_path):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    kit = _kit_copy(tmp_path)
    plan = subprocess.run(["make", "-n", "hub", "VENV=fakevenv", "HUB_IP=0.0.0.0", "HUB_IDLE_TIMEOUT=900"],
                          cwd=kit, capture_output=True, text=True, timeout=60).stdout
    assert (plan.index("-m ampkit.classroom.hub check") < plan.index("workshop")
            < plan.index("jupyterhub -f hub/jupyterhub_config.py"))
    assert "AMPKIT_HUB_IP=0.0.0.0" in plan and "AMPKIT_HUB_IDLE_TIMEOUT=900" in plan
    default = subprocess.run(["make", "-n", "hub", "VENV=fakevenv"], cwd=kit, capture_output=True, text=True,
                             timeout=60).stdout
    assert "AMPKIT_HUB_IP=127.0.0.1" in default
    install = subprocess.run(["make", "-n", "hub-install", "VENV=fakevenv"], cwd=kit, capture_output=True,
                             text=True, timeout=60).stdout
    assert 'pip install -q -c constraints.txt -e ".[hub]"' in install
    assert "--prefix fakevenv/hub-node configurable-http-proxy@5" in install


def test_hub_module_cli(tmp_path):
    empty = tmp_path / "venv"
    empty.mkdir()
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.hub", "check", "--venv", str(empty)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "make hub-install" in out.stderr and "Traceback" not in out.stderr
    bad = subprocess.run([sys.executable, "-m", "ampkit.classroom.hub", "check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env={**os.environ, "AMPKIT_HUB_PORT": "x"})
    assert bad.returncode == 2 and "make hub: AMPKIT_HUB_PORT='x'" in bad.stderr and "Traceback" not in bad.stderr
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.hub", "settings"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "AMPKIT_HUB_PORT": "8123"})
    assert json.loads(out.stdout)["bind_url"] == "http://127.0.0.1:8123/"


def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_hub", ROOT / "benchmarks" / "bench_hub.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_options_and_series():
    bench = _bench()
    quick = bench.parse_args(["--quick"])
    assert quick.ks == [1] and quick.updates == 5 and quick.json == bench.QUICK_JSON   # never the committed file
    assert bench.parse_args(["--k", "2,1,2"]).ks == [1, 2]
    assert bench.parse_args([]).ks is None and bench.parse_args([]).json == bench.DEFAULT_JSON
    for bad in ("0", "a,b", ""):
        with pytest.raises(SystemExit):
            bench.parse_args(["--k", bad])
    assert [bench.next_k(k) for k in (10, 15, 25, 30, 40)] == [15, 20, 30, 40, 50]


def test_bench_drives_the_scalers_view():
    """bench_hub (and the storm) find notebook 03's loss scaler by its class and set the trait its slider sets."""
    import importlib

    bench = _bench()
    module, name = bench.SLIDER["_anywidget_id"].rsplit(".", 1)
    view = getattr(importlib.import_module(module), name)
    assert name == "VisualLossScaler" and bench.TRAIT in view.class_traits(sync=True)


def test_decode_frame_reads_jupyter_servers_binary_messages():
    from jupyter_server.services.kernels.connection.base import serialize_binary_message

    msg = {"header": {"msg_type": "comm_msg"}, "parent_header": {}, "metadata": {}, "content": {"x": 1},
           "buffers": [b"\x89PNG-one", b"two"]}
    back = kernel_ws.decode_frame(serialize_binary_message(msg))
    assert back["content"] == {"x": 1} and back["buffers"] == [b"\x89PNG-one", b"two"]
    assert kernel_ws.decode_frame(serialize_binary_message({**msg, "buffers": []}))["buffers"] == []
    with pytest.raises(kernel_ws.KernelError, match="not a kernel message"):
        kernel_ws.decode_frame(b"\x00\x00\x00\x05")


class _FakeWS:
    """Replays kernel messages; answers every sent comm_msg with ``reply(msg_id)``."""

    def __init__(self, frames, reply=None):
        self.frames, self.reply, self.sent = list(frames), reply, []

    def settimeout(self, t):
        pass

    def send(self, text):
        self.sent.append(json.loads(text))
        if self.reply:
            self.frames += self.reply(self.sent[-1]["header"]["msg_id"])

    def recv(self):
        return json.dumps(self.frames.pop(0))


def _m(msg_type, content, parent=""):
    return {"msg_type": msg_type, "content": content, "parent_header": {"msg_id": parent}}


def _socket(frames, reply=None):
    ks = kernel_ws.KernelSocket.__new__(kernel_ws.KernelSocket)
    ks.session, ks.comms, ks.ws, ks._timeout_error = "s", {}, _FakeWS(frames, reply), TimeoutError
    return ks


def test_kernel_socket_tracks_widgets_and_times_a_slider_move():
    opened = [_m("comm_open", {"comm_id": "s1", "data": {"state": {"_model_name": "IntSliderModel",
                                                                   "description": "log2(scale)", "value": 0}}}),
              _m("comm_open", {"comm_id": "im", "data": {"state": {"_model_name": "ImageModel"}}}),
              _m("comm_msg", {"comm_id": "im", "data": {"method": "update",
                                                        "state": {"_dom_classes": ["ampkit-scale-plot"]}}})]

    def redraw(msg_id):
        return [_m("status", {"execution_state": "busy"}, msg_id),
                _m("comm_msg", {"comm_id": "s1", "data": {"method": "echo_update", "state": {"value": 5}}}, msg_id),
                _m("comm_msg", {"comm_id": "im", "data": {"method": "update", "state": {}}}, msg_id),
                _m("status", {"execution_state": "idle"}, msg_id)]

    ks = _socket(opened, redraw)
    for _ in opened:
        ks.recv(time.monotonic() + 5)
    slider = ks.find_widget({"_model_name": "IntSliderModel", "description": "log2(scale)"})   # a kernel-drawn view
    image = ks.find_widget(dom_class="ampkit-scale-plot")           # known from the update after comm_open
    assert (slider, image) == ("s1", "im")
    assert ks.move(slider, image, 5, timeout=5) >= 0
    assert ks.ws.sent[-1]["content"] == {"comm_id": "s1", "data": {"method": "update", "state": {"value": 5},
                                                                   "buffer_paths": []}}
    assert ks.comms["s1"]["value"] == 5
    with pytest.raises(kernel_ws.KernelError, match="no widget model"):
        ks.find_widget(dom_class="nowhere")


def test_kernel_socket_moves_a_view_drawn_in_the_browser():
    """The loss scaler as bench_hub drives it: its log2_scale set, done when the kernel is idle (no image back)."""
    bench = _bench()
    opened = [_m("comm_open", {"comm_id": "v1", "data": {"state": {"_model_name": "AnyModel", **bench.SLIDER,
                                                                   bench.TRAIT: 0}}})]
    ks = _socket(opened, lambda i: [_m("status", {"execution_state": "busy"}, i),
                                    _m("status", {"execution_state": "idle"}, i)])
    ks.recv(time.monotonic() + 5)
    view = ks.find_widget(bench.SLIDER)
    assert view == "v1" and ks.move(view, None, 7, timeout=5, trait=bench.TRAIT) >= 0
    assert ks.ws.sent[-1]["content"]["data"]["state"] == {bench.TRAIT: 7}


def test_kernel_socket_idle_without_redraw_and_cell_errors_raise():
    ks = _socket([], lambda i: [_m("status", {"execution_state": "idle"}, i)])
    with pytest.raises(kernel_ws.KernelError, match="idle without a new image"):
        ks.move("s1", "im", 3, timeout=5)
    ks = _socket([])
    ks.ws.reply = None
    ks.ws.send = lambda text: ks.ws.frames.extend(
        [_m("execute_reply", {"status": "error", "ename": "ZeroDivisionError", "evalue": "x"},
            json.loads(text)["header"]["msg_id"]),
         _m("status", {"execution_state": "idle"}, json.loads(text)["header"]["msg_id"])])
    with pytest.raises(kernel_ws.KernelError, match="cell failed: ZeroDivisionError"):
        ks.execute("1/0", timeout=5)
    with pytest.raises(kernel_ws.KernelError, match="timed out"):
        _socket([]).recv(time.monotonic() - 1)
