"""Presenter mode (ampkit.classroom.present): naming a notebook, the Voilà command line, the instructor's banner,
and `make present` with a bad name (the list of notebooks, exit 2, no traceback). The browser side (the dashboard
really runs and its slider moves) is tests/browser/test_present_browser.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ampkit._net import free_port as _free_port
from ampkit.classroom import present
from ampkit.classroom.present import (
    DEFAULT_PORT,
    NOTEBOOKS,
    TEMPLATE,
    TEMPLATE_ROOT,
    banner,
    list_notebooks,
    resolve_notebook,
    served_url,
    voila_command,
    voila_env,
)

ROOT = Path(__file__).resolve().parents[1]
STEMS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_lists_every_notebook_in_order():
    assert [p.stem for p in list_notebooks()] == STEMS and len(STEMS) >= 7
    assert "03_loss_scaling" in STEMS


@pytest.mark.parametrize("name", ["03", "03_loss_scaling", "03_loss_scaling.ipynb", "notebooks/03_loss_scaling.ipynb",
                                  " 03_loss_scaling "])
def test_resolves_number_stem_file_and_path(name):
    assert resolve_notebook(name) == NOTEBOOKS / "03_loss_scaling.ipynb"


@pytest.mark.parametrize("name", ["nope", "3", "99", "03_loss", "", "03_loss_scaling.py", "loss_scaling"])
def test_unknown_notebook_lists_every_notebook(name):
    with pytest.raises(ValueError) as e:
        resolve_notebook(name)
    for stem in STEMS:
        assert stem in str(e.value)


def test_notebook_name_must_be_a_string():
    with pytest.raises(TypeError, match="'03'"):
        resolve_notebook(3)


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no notebooks folder"):
        list_notebooks(tmp_path / "absent")


def test_command_serves_one_notebook_on_loopback_with_code_hidden():
    cmd = voila_command("03_loss_scaling", port=8870)
    assert cmd[:3] == [sys.executable, "-m", "voila"]          # this Python: the kit's venv under make
    assert Path(cmd[3]).resolve() == NOTEBOOKS / "03_loss_scaling.ipynb"
    assert "--Voila.ip=127.0.0.1" in cmd and "--port=8870" in cmd
    assert "--Voila.port_retries=0" in cmd                      # the URL printed is the one served
    assert not [a for a in cmd if "strip_sources" in a]  # Voilà's default: inputs hidden
    assert [a for a in cmd if "template" in a] == ["--template=ampkit"]  # the kit's offline template
    assert "--no-browser" not in cmd and not [a for a in cmd if "token" in a]


def test_command_without_a_notebook_serves_the_tree():
    cmd = voila_command(None)
    assert Path(cmd[3]).resolve() == NOTEBOOKS and f"--port={DEFAULT_PORT}" in cmd
    # the classic tree: the list is in the page Voila sends (the JupyterLab tree fetches it from script)
    assert "--VoilaConfiguration.classic_tree=True" in cmd
    assert "--VoilaConfiguration.classic_tree=True" not in voila_command("03")     # a notebook has no tree
    own = voila_command(None, extra_args=["--VoilaConfiguration.classic_tree=False"])
    assert [a for a in own if "classic_tree" in a] == ["--VoilaConfiguration.classic_tree=False"]  # the caller's wins


def test_command_options_and_pass_through():
    cmd = voila_command("00", port=9000, ip="0.0.0.0", open_browser=False, token="s3cret",
                        extra_args=["--theme=dark"], python="/venv/bin/python")
    assert cmd[0] == "/venv/bin/python"
    assert {"--Voila.ip=0.0.0.0", "--port=9000", "--no-browser", "--Voila.token=s3cret"} <= set(cmd)
    assert cmd[-1] == "--theme=dark"


@pytest.mark.parametrize("port, exc", [(0, ValueError), (70000, ValueError), ("8866", TypeError), (True, TypeError)])
def test_bad_port(port, exc):
    with pytest.raises(exc, match="port"):
        voila_command("00", port=port)


def test_bad_ip():
    with pytest.raises(ValueError, match="127.0.0.1"):
        voila_command("00", ip=" ")


def test_url_and_banner_say_where_and_what_it_costs():
    assert served_url(port=8870) == "http://127.0.0.1:8870/"
    assert served_url(port=8870, ip="0.0.0.0", token="t") == "http://127.0.0.1:8870/?token=t"
    local = banner("03", port=8870)
    assert "03_loss_scaling" in local and "http://127.0.0.1:8870/" in local
    assert "this machine only" in local and "--ip=0.0.0.0" in local       # how to expose it, deliberately
    assert "kernel" in local and "Ctrl-C" in local                       # one kernel per visit
    exposed = banner(None, port=8870, ip="0.0.0.0", token="t0k")
    assert "EXPOSED" in exposed and "token=t0k" in exposed and "this machine only" not in exposed
    assert "voila/render/00_start_here.ipynb?token=t0k" in exposed  # the tree: how to open one notebook directly


def test_main_lists(capsys):
    assert present.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(stem in out for stem in STEMS)


def test_main_rejects_a_second_positional(capsys):
    assert present.main(["03", "04"]) == 2
    assert "unexpected argument" in capsys.readouterr().err


def test_main_refuses_a_busy_port(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert present.main(["03", f"--port={port}", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert f"port {port}" in err and f"--port={port + 1}" in err


def test_bad_name_from_python_lists_notebooks_without_traceback():
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.present", "nope"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert "no notebook 'nope'" in out.stderr and all(stem in out.stderr for stem in STEMS)
    assert "Traceback" not in out.stderr + out.stdout


def _make_present(*args: str) -> subprocess.CompletedProcess:
    """`make ... present ARGS` in the repository, with this venv's Python and the install step taken as done."""
    if not shutil.which("make"):
        pytest.skip("make not installed")
    venv = Path(sys.executable).parent.parent
    return subprocess.run(["make", *args[:1], "-o", f"{venv}/.ampkit-installed", f"VENV={venv}", "present",
                           *args[1:]], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_make_present_with_a_bad_name_lists_notebooks_and_fails():
    """The real `make present NB=nope` (the install step is taken as done: -o the stamp; this venv's Python)."""
    out = _make_present("--no-print-directory", "NB=nope")
    assert out.returncode != 0
    assert "-m ampkit.classroom.present nope" in out.stdout          # make ran the presenter, not something else
    assert "no notebook 'nope'" in out.stderr and all(stem in out.stderr for stem in STEMS)
    assert "Traceback" not in out.stderr + out.stdout


def test_make_present_passes_the_notebook_and_the_extra_args():
    out = _make_present("-n", "NB=03_loss_scaling", "PRESENT_ARGS=--port=8870 --no-browser")
    assert out.returncode == 0, out.stderr
    venv = Path(sys.executable).parent.parent
    assert f"{venv}/bin/python -m ampkit.classroom.present 03_loss_scaling --port=8870 --no-browser" in out.stdout


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background-shell"])
def test_ctrl_c_stops_voila_cleanly(tmp_path, sigint_ignored):
    """Start presenter mode for real (no visit, so no kernel), wait for the banner, press Ctrl-C (SIGINT to the
    process group, as a terminal does): it stops, says so, exits 0, no traceback, and the port is free again.
    Also when started with SIGINT ignored, as a shell's background job (nohup, `&`, a CI runner) starts it."""
    pytest.importorskip("voila")
    port = _free_port()
    env = dict(os.environ)
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[var] = str(tmp_path / var.lower())
    proc = subprocess.Popen([sys.executable, "-m", "ampkit.classroom.present", "00", f"--port={port}", "--no-browser"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=_ignore_sigint if sigint_ignored else None)
    try:
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Open: " in line:
                break
        assert any(f"Open: http://127.0.0.1:{port}/" in s for s in seen), "".join(seen)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert "presenter mode stopped" in err and "Traceback" not in err + out
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing left listening


def test_main_says_what_to_install_without_voila(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "voila" else real(name, *a))
    assert present.main(["03", f"--port={_free_port()}", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "Voilà is not installed" in err and "make install" in err and "pip install voila" in err


# ---- nothing from outside this machine (issue 22, item 6); the browser test records every request of the page ----

VOILA_TEMPLATES = Path(sys.prefix) / "share" / "jupyter" / "voila" / "templates"
OURS = TEMPLATE_ROOT / "voila" / "templates" / TEMPLATE
URL = re.compile(r"""(?:src|href)\s*=\s*["'](https?://[^"']+)""")  # what a browser would fetch (not comments)


def test_a_template_of_your_own_replaces_the_kits():
    cmd = voila_command("03", extra_args=["--template=reveal"])
    assert [a for a in cmd if "template" in a] == ["--template=reveal"]  # Voilà takes one template, not two


def test_voila_env_puts_the_kits_template_first_and_keeps_the_rest():
    env = voila_env({"PATH": "/bin", "JUPYTER_PATH": os.pathsep.join(["/a", str(TEMPLATE_ROOT), "/b"])})
    assert env["JUPYTER_PATH"].split(os.pathsep) == [str(TEMPLATE_ROOT), "/a", "/b"] and env["PATH"] == "/bin"
    assert voila_env({})["JUPYTER_PATH"] == str(TEMPLATE_ROOT)
    assert (TEMPLATE_ROOT / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file()


def _removed_links() -> list[str]:
    return re.findall(r"replace\('(<link [^']+>)', ''\)", (OURS / "index.html.j2").read_text())


def test_the_kits_template_removes_every_cdn_link_of_voilas_lab_template():
    """Every URL of Voilà's installed lab/index.html.j2 is in a <link> that the kit's template removes, verbatim (a
    link Voilà changes or adds makes this fail before a stalled network finds it)."""
    pytest.importorskip("voila")
    lab = (VOILA_TEMPLATES / "lab" / "index.html.j2").read_text()
    removed = _removed_links()
    assert len(removed) == 2 and all(link in lab for link in removed)
    urls = URL.findall(lab)
    assert urls and all(any(u in link for link in removed) for u in urls), urls
    assert json.loads((OURS / "conf.json").read_text())["base_template"] == "lab"


def test_the_kits_page_html_is_voilas_without_its_cdn_link():
    """page.html (Voilà's tree and error pages) is Voilà's base/page.html with lab's stylesheets and no URL."""
    pytest.importorskip("voila")
    base = (VOILA_TEMPLATES / "base" / "page.html").read_text()
    ours = (OURS / "page.html").read_text()
    assert URL.findall(base) and not URL.findall(ours)
    body = [ln.strip() for ln in base.splitlines() if ln.strip() and "cdn.jsdelivr" not in ln]
    assert all(ln in ours for ln in body)
    assert 'include_css("static/index.css")' in ours
