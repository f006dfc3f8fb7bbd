"""Presenter mode: the kit's notebooks as Voilà dashboards (markdown, figures and live widgets; no code), for every
notebook in ``notebooks/`` (no notebook of its own). ``make present`` runs :func:`main`::

    make present                        # Voilà's file tree of notebooks/, pick one in the browser
    make present NB=03_loss_scaling     # just that notebook (also NB=03 or NB=03_loss_scaling.ipynb)
    make present NB=03 PRESENT_ARGS="--port=8870 --no-browser"
    python -m ampkit.classroom.present --list

It is bound to 127.0.0.1 (this machine only: the projector shows this machine's browser). Exposing it to the room
is deliberate: ``--ip=0.0.0.0`` (then a token is required, made up if not given). Voilà runs the notebook in a new
kernel for every visit (each open tab or reload is one kernel, started and run before the widgets appear), so a
dashboard opened by 30 learners is 30 kernels on this machine.

Nothing is loaded from outside this machine (a stalled venue network must not hold the projected page): Voilà runs
with the kit's template ``ampkit`` (``ampkit/classroom/jupyter/voila/templates/ampkit/``: Voilà's ``lab`` template
without its two Font Awesome links to a CDN; Voilà's own bundle already serves Font Awesome), found through
``JUPYTER_PATH`` (:func:`voila_env`).

The functions are pure (paths, command lines and environments); only :func:`main` starts a process. Voilà is not
imported here: it is run as ``python -m voila`` with this Python (the kit's venv under ``make``), whose ``python3``
kernel is the same venv.

>>> resolve_notebook("03").name
'03_loss_scaling.ipynb'
>>> cmd = voila_command("03", port=8870)
>>> cmd[1:3], Path(cmd[3]).name, "--Voila.ip=127.0.0.1" in cmd, "--port=8870" in cmd, "--no-browser" in cmd
(['-m', 'voila'], '03_loss_scaling.ipynb', True, True, False)
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ampkit._kit import LANGUAGES, ROOT

__all__ = ["ROOT", "NOTEBOOKS", "DEFAULT_IP", "DEFAULT_PORT", "TEMPLATE", "TEMPLATE_ROOT", "list_notebooks",
           "resolve_notebook", "voila_command", "voila_env", "served_url", "banner", "main", "LANGUAGES", "edition"]

NOTEBOOKS = ROOT / "notebooks"
DEFAULT_IP = "127.0.0.1"
DEFAULT_PORT = 8866  # Voilà's own default
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")
# JupyterLab add-ons that Voilà's page would load and that log errors there (they need JupyterLab's own parts, such as
# its file browser): Notebook 7's, and jupyter-archive's ("Download as an Archive", hub and test extras). No use in a
# dashboard.
VOILA_DENYLIST = ("@jupyter-notebook/lab-extension", "@hadim/jupyter-archive")
#: The kit's Voilà template (Voilà's ``lab`` with no request leaving this machine) and the Jupyter data folder that
#: holds it (``<TEMPLATE_ROOT>/voila/templates/<TEMPLATE>/``), put on ``JUPYTER_PATH`` by :func:`voila_env`.
TEMPLATE = "ampkit"
TEMPLATE_ROOT = Path(__file__).resolve().parent / "jupyter"


def list_notebooks(folder: str | Path = NOTEBOOKS) -> list[Path]:
    """The kit's lessons in ``folder``: every ``NN_name.ipynb``, sorted by number."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no notebooks folder at {folder}")
    return sorted(p for p in folder.iterdir() if _NAME.match(p.name))


def _choices(notebooks: list[Path]) -> str:
    return "\n".join(f"  {p.stem[:2]}  {p.stem}" for p in notebooks)


def resolve_notebook(name: str, folder: str | Path = NOTEBOOKS) -> Path:
    """The notebook ``name`` stands for: its number (``"03"``), its stem (``"03_loss_scaling"``), its file name
    (``"03_loss_scaling.ipynb"``) or that file's path (``"notebooks/03_loss_scaling.ipynb"``, as a shell completes it).

    Anything else raises ``ValueError`` listing every notebook."""
    if not isinstance(name, str):
        raise TypeError(f"a notebook name must be a string such as '03' or '03_loss_scaling'; got {name!r}")
    notebooks = list_notebooks(folder)
    wanted = name.strip()
    base = Path(wanted).name
    for nb in notebooks:
        if wanted and (base in (nb.name, nb.stem) or wanted == nb.stem[:2]):
            return nb
    shown = f"'{name}'" if wanted else "an empty name"
    raise ValueError(f"no notebook {shown} in {_relative(Path(folder))}/. The notebooks are (give the number or "
                     f"the name):\n{_choices(notebooks)}")


def _relative(path: Path) -> str:
    """``path`` relative to the current folder when it is below it (shorter command lines), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def voila_command(notebook: str | None = None, *, port: int = DEFAULT_PORT, ip: str = DEFAULT_IP,
                  open_browser: bool = True, token: str | None = None, extra_args: list[str] | tuple = (),
                  python: str = sys.executable, folder: str | Path = NOTEBOOKS) -> list[str]:
    """The Voilà command line for presenter mode: one notebook (``notebook`` resolved by :func:`resolve_notebook`)
    or, with ``notebook=None``, Voilà's tree of ``folder``. Bound to ``ip`` (loopback by default) on exactly ``port``
    (no silent move to another port: the URL printed is the one served); code hidden (Voilà's default, not changed).

    ``extra_args`` go to Voilà unchanged (e.g. ``--theme=dark``); a ``--template=NAME`` there replaces the kit's
    offline template :data:`TEMPLATE` (Voilà's own templates load Font Awesome from a CDN).

    The tree is Voilà's classic one (``classic_tree``): the list of notebooks is in the page Voilà sends. Voilà's
    JupyterLab tree fetches it from script after a dozen plugins start, and with both cores busy that page once stayed
    empty for 120 s (tests/browser/test_present_browser.py); the classic page lists them in about a second."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int between 1 and 65535; got {port!r}")
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be between 1 and 65535; got {port}")
    if not isinstance(ip, str) or not ip.strip():
        raise ValueError(f"ip must be an address such as {DEFAULT_IP} (this machine only) or 0.0.0.0; got {ip!r}")
    target = resolve_notebook(notebook, folder) if notebook else Path(folder)
    own_template = any(str(a).startswith(("--template", "--VoilaConfiguration.template")) for a in extra_args)
    cmd = [python, "-m", "voila", _relative(target), f"--Voila.ip={ip}", f"--port={port}", "--Voila.port_retries=0",
           *([] if own_template else [f"--template={TEMPLATE}"]),
           *(f"--VoilaConfiguration.extension_denylist={x}" for x in VOILA_DENYLIST)]
    if not notebook and not any(str(a).startswith("--VoilaConfiguration.classic_tree") for a in extra_args):
        cmd.append("--VoilaConfiguration.classic_tree=True")
    if not open_browser:
        cmd.append("--no-browser")
    if token:
        cmd.append(f"--Voila.token={token}")
    return cmd + [str(a) for a in extra_args]


def voila_env(env: dict) -> dict:
    """A copy of ``env`` for the Voilà process: :data:`TEMPLATE_ROOT` first on ``JUPYTER_PATH`` (Voilà finds
    templates under ``<each JUPYTER_PATH entry>/voila/templates/``), the caller's own entries kept after it.

    >>> voila_env({"JUPYTER_PATH": "/mine"})["JUPYTER_PATH"] == os.pathsep.join([str(TEMPLATE_ROOT), "/mine"])
    True
    """
    paths = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != str(TEMPLATE_ROOT)]
    return {**env, "JUPYTER_PATH": os.pathsep.join([str(TEMPLATE_ROOT), *paths])}


def served_url(notebook: str | None = None, *, port: int = DEFAULT_PORT, ip: str = DEFAULT_IP,
               token: str | None = None) -> str:
    """The address to open. Voilà serves a single notebook at ``/`` and its tree at ``/`` too (a notebook from the
    tree at ``/voila/render/NAME``). A wildcard ``ip`` (0.0.0.0, ::) is opened here as 127.0.0.1."""
    host = "127.0.0.1" if ip in ("0.0.0.0", "::", "") else ip
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


def banner(notebook: str | None = None, *, port: int = DEFAULT_PORT, ip: str = DEFAULT_IP,
           token: str | None = None, folder: str | Path = NOTEBOOKS) -> str:
    """What the instructor reads once the dashboard is up: the URL, who can reach it, and the cost of a visit."""
    what = f"notebook {resolve_notebook(notebook, folder).stem}" if notebook else "the notebooks (pick one in the tree)"
    url = served_url(notebook, port=port, ip=ip, token=token)
    lines = [f"Presenter mode: {what}, code hidden.", f"  Open: {url}"]
    if not notebook:
        first = list_notebooks(folder)[0].name
        lines.append(f"  (one notebook directly: {url.split('?')[0]}voila/render/{first}"
                     + (f"?token={token})" if token else ")"))
    if ip in LOOPBACK:
        lines.append(f"  Reachable from this machine only ({ip}). To show it on other devices, deliberately: "
                     "make present PRESENT_ARGS=--ip=0.0.0.0 (a token is then required).")
    else:
        lines.append(f"  EXPOSED on {ip}: anyone on this network with the URL and token can open it. "
                     f"From another device: http://{socket.gethostname()}:{port}/?token={token}")
    lines.append("  Each visit (tab, reload) starts its own kernel and re-runs the notebook before the widgets "
                 "appear: keep one tab open, close the others.")
    lines.append("  Stop with Ctrl-C.")
    return "\n".join(lines)


def _port_free(ip: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family) as s:
        try:
            s.bind((ip, port))
        except OSError:
            return False
    return True


def _wait_up(proc: subprocess.Popen, ip: str, port: int, timeout: float) -> bool:
    """True once the server accepts a connection; False if it exited first or did not listen in time. A TCP connect,
    not an HTTP request: a GET of Voilà's page would start a kernel and run the notebook."""
    host = "127.0.0.1" if ip in ("0.0.0.0", "") else "::1" if ip == "::" else ip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return True
        except OSError:
            time.sleep(0.3)
    return False


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ampkit.classroom.present",
        description="Serve the kit's notebooks as Voilà dashboards (code hidden). Other --options go to Voilà.")
    p.add_argument("notebook", nargs="?", default="", help="03, 03_loss_scaling or 03_loss_scaling.ipynb; "
                   "none: Voilà's tree of notebooks/")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--ip", default=DEFAULT_IP, help=f"address to listen on (default {DEFAULT_IP}: this machine only; "
                   "0.0.0.0 exposes it to the network, with a token)")
    p.add_argument("--token", default=None, help="require this token (made up when --ip is not loopback)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--list", action="store_true", help="list the notebooks and exit")
    p.add_argument("--lang", default="en", choices=LANGUAGES,
                   help="en: notebooks/; zh_CN: the Chinese edition, notebooks/zh_CN/, its kernels in Chinese")
    return p


def edition(lang: str) -> tuple[Path, dict[str, str]]:
    """The notebooks folder of an edition and what its kernels' environment adds.

    >>> edition("zh_CN")[0].name, edition("zh_CN")[1]
    ('zh_CN', {'AMPKIT_LANG': 'zh_CN'})
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; the editions are {', '.join(LANGUAGES)}")
    return (NOTEBOOKS, {}) if lang == "en" else (NOTEBOOKS / lang, {"AMPKIT_LANG": lang})


def main(argv: list[str] | None = None) -> int:
    """Run presenter mode until Ctrl-C. Exit 2, with the list of notebooks and no traceback, on a bad name."""
    args, extra = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    stray = [a for a in extra if not a.startswith("-")]
    if stray:
        print(f"present: unexpected argument(s) {stray}: give one notebook, and Voilà options as --name=value",
              file=sys.stderr)
        return 2
    folder, lang_env = edition(args.lang)
    if args.list:
        print(_choices(list_notebooks(folder)))
        return 0
    token = args.token or (None if args.ip in LOOPBACK else secrets.token_urlsafe(16))
    try:
        cmd = voila_command(args.notebook or None, port=args.port, ip=args.ip, open_browser=not args.no_browser,
                            token=token, extra_args=extra, folder=folder)
    except (ValueError, TypeError) as e:
        print(f"present: {e}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("voila") is None:
        print(f"present: Voilà is not installed in {sys.executable}. `make install-test` installs it with the "
              "kit's test extra (or: pip install voila).", file=sys.stderr)
        return 2
    if not _port_free(args.ip, args.port):
        print(f"present: port {args.port} on {args.ip} is in use (another `make present` still running?). Stop it, "
              f"or choose another port: make present PRESENT_ARGS=--port={args.port + 1}", file=sys.stderr)
        return 2
    print("$ " + shlex.join(cmd), flush=True)
    # Voilà ignores the terminal's Ctrl-C (it shares this process group): a SIGINT that lands while its loop runs a
    # callback surfaces as a KeyboardInterrupt traceback, whereas SIGTERM, which _stop sends, stops its loop cleanly
    # from a signal handler (voila/app.py, _handle_signal_stop)
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if os.name == "posix" else None
    proc = subprocess.Popen(cmd, env=voila_env({**os.environ, **lang_env}), preexec_fn=ignore)
    # Ctrl-C and `kill` stop it, however it was started: a shell that runs a job in the background (nohup, `&`, CI
    # runners) starts it with SIGINT *ignored*, and Python then keeps ignoring it unless told otherwise
    previous = _on_signals(_interrupt)
    try:
        if _wait_up(proc, args.ip, args.port, timeout=120):
            shown = banner(args.notebook or None, port=args.port, ip=args.ip, token=token, folder=folder)
            print("\n" + shown + "\n", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        return_code = _stop(proc)
        print("presenter mode stopped", file=sys.stderr, flush=True)
        return 0 if return_code in (0, -signal.SIGINT, -signal.SIGTERM, 130) else return_code
    finally:
        _stop(proc)
        _on_signals(previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _on_signals(handlers):
    """Install a handler for SIGINT and SIGTERM (one function for both, or a dict per signal as returned); return
    the previous ones (``None`` where signals cannot be set: not the main thread)."""
    if handlers is None:
        return None
    try:
        return {sig: signal.signal(sig, handlers[sig] if isinstance(handlers, dict) else handlers)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        return None


def _stop(proc: subprocess.Popen) -> int:
    """Let Voilà stop its kernels and exit: SIGTERM, which it handles by stopping its loop; SIGKILL as the last
    resort."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: go on to the next, firmer step
            continue
    return proc.returncode if proc.returncode is not None else proc.wait()


if __name__ == "__main__":
    sys.exit(main())
