"""A JupyterHub for the room, on one machine: the settings, the passwords, the first-login copy and the extras
check. It serves every notebook (``notebooks/``, or the learner copies in ``workshop/`` when
``make workshop`` made them); the operator's notes are ``hub/README.md``, the config ``hub/jupyterhub_config.py``.
``make hub LANG=zh_CN`` serves the Chinese edition (``notebooks/zh_CN/`` or ``workshop/zh_CN/``): learners open it,
their kernels run with ``AMPKIT_LANG=zh_CN`` (the views and messages in Chinese) and JupyterLab's menus are Chinese.

Standard library only at import time (nbformat is imported by the copy, JupyterHub never): the hub config and
``make hub`` import it as ``ampkit.classroom.hub``, and since ``import ampkit`` is lazy the hub process never
imports torch or widgets.
A package: the config here; the ``AMPKIT_HUB_*`` settings in ``settings.py`` (re-exported here), the extras check
(JupyterHub, the culler, configurable-http-proxy, Node.js) in ``extras.py``, the room's default limits in
``sizing.py``, the command line in ``cli.py``, the isolated hub's learner accounts (``make hub-users``) in
``users.py``. The load test (``benchmarks/bench_hub.py``) and the tests drive a hub with modules of their own, outside
the package: ``tests/roomtools/`` (a hub process and its REST API, a kernel over its websocket, the statistics).

>>> s = settings_from_env({}, "/kit")
>>> s.bind_url, s.idle_timeout
('http://127.0.0.1:8000/', 3600)
"""
from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from ampkit.classroom import isolation, tls
from ampkit.classroom.hub.extras import (  # noqa: F401  (re-exported: make hub, the benchmarks and tests use hub.*)
    CHP_PACKAGE,
    NODE_MIN,
    missing_extras,
    missing_message,
    node_problem,
    node_version,
)
from ampkit.classroom.hub.settings import (  # noqa: F401  (re-exported: hub/jupyterhub_config.py and tests use hub.*)
    HubSettings,
    exposure_problem,
    settings_from_env,
)
from ampkit.classroom.hub.sizing import (  # noqa: F401  (re-exported: the storm's tests read hub.LEARNER_MIB ...)
    LEARNER_MIB,
    RESERVED_MIB,
    SPAWN_CPU_S,
    default_max_servers,
    default_spawn_limit,
    machine_mib,
)

#: Learner names: lower-case letters, digits, ``-``/``_``; they become folder names under the users' directory.
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
#: SharedPasswordAuthenticator's minimum lengths (JupyterHub >= 5.3): learners' password, admin password.
MIN_USER_PASSWORD, MIN_ADMIN_PASSWORD = 8, 32
CULLER_SCOPES = ("list:users", "read:users:activity", "read:servers", "delete:servers")
#: The culler's entry point, with Ctrl-C restored: a hub started from a background shell (``make hub &``) passes
#: SIGINT on as "ignored", and the hub's stop would then wait for its timeouts before killing the culler.
CULLER_MAIN = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
               "from jupyterhub_idle_culler import main; main()")
#: The learner's first-login folder layout: notebooks in ``notebooks/``, the references they link
#: (``../docs/reference.md``) in ``docs/``.
NOTEBOOKS_DIR, DOCS_DIR = "notebooks", "docs"
_READABLE = "abcdefghjkmnpqrstuvwxyz23456789"


def room_password(state_dir: str | os.PathLike, env: Mapping[str, str], *, admin: bool = False) -> tuple[str, Path]:
    """The learners' (or with ``admin`` the instructor's) password and the file that keeps it.

    From ``AMPKIT_HUB_PASSWORD`` / ``AMPKIT_HUB_ADMIN_PASSWORD`` when set; else the one kept in the state folder
    (mode 600), generated on the first start. Never stored in the repository."""
    name, var, minimum = (("admin-password", "AMPKIT_HUB_ADMIN_PASSWORD", MIN_ADMIN_PASSWORD) if admin
                          else ("room-password", "AMPKIT_HUB_PASSWORD", MIN_USER_PASSWORD))
    path = Path(state_dir) / name
    password = env.get(var, "")
    if password and len(password) < minimum:
        raise ValueError(f"{var} is {len(password)} characters long: JupyterHub's shared-password login needs at "
                         f"least {minimum}")
    if not password:
        if path.is_file():
            return path.read_text().strip(), path
        # easy to read off a whiteboard: no 0/o, 1/l/i
        password = "".join(secrets.choice(_READABLE) for _ in range(40 if admin else 10))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(password + "\n")
        path.chmod(0o600)
    return password, path


def copy_notebooks_once(source: str | os.PathLike, home: str | os.PathLike,
                        reference: str | os.PathLike | None = None, into: str = NOTEBOOKS_DIR) -> list[str]:
    """A learner's first login: copy ``source/*.ipynb`` into ``home/notebooks/`` (``into``: ``notebooks/zh_CN``
    for the Chinese room) with outputs cleared (and ``reference``, the kit's ``docs/reference.md``, into
    ``home/docs/``). A file already there is NEVER overwritten: a learner's work survives every later login; a
    deleted notebook comes back fresh. Returns the names copied this time."""
    import nbformat

    source, home = Path(source), Path(home)
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {source}: expected the kit's notebooks/ or workshop/ folder")
    (home / into).mkdir(parents=True, exist_ok=True)
    copied = []
    for path in notebooks:
        dest = home / into / path.name
        if dest.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nb.metadata.pop("widgets", None)
        tmp = dest.with_name(f".{dest.name}.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(dest)      # never a half-written notebook, even if the hub dies mid-copy
        copied.append(path.name)
    if reference is not None and Path(reference).is_file():
        dest = home / DOCS_DIR / Path(reference).name
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(reference, dest)
            copied.append(f"{DOCS_DIR}/{dest.name}")
    return copied


def lab_settings_dir(home: str | os.PathLike, lang: str) -> Path:
    """The learner's JupyterLab settings folder for the room's edition (``JUPYTERLAB_SETTINGS_DIR``): JupyterLab's
    own default for English; for Chinese one of its own (as ``make lab LANG=zh_CN`` keeps ``.cache/lab-zh_CN/``),
    so that an English room on the same machine later opens in English again."""
    return Path(home) / ".jupyter" / "lab" / ("user-settings" if lang == "en" else f"user-settings-{lang}")


def select_lab_language(home: str | os.PathLike, lang: str) -> Path | None:
    """Choose JupyterLab's language (the language pack's locale, as ``make lab-language`` does) in the learner's
    settings for ``lang``, unless the learner has chosen one there already. Returns the file written, or None."""
    if lang == "en":
        return None
    path = (lab_settings_dir(home, lang) / "@jupyterlab" / "translation-extension" /
            "plugin.jupyterlab-settings")
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{"locale": "{lang}"}}\n')
    return path


def configure(c, s: HubSettings, env: Mapping[str, str] | None = None) -> None:
    """Fill a JupyterHub config object ``c`` (``get_config()`` in ``hub/jupyterhub_config.py``) from ``s``."""
    env = os.environ if env is None else env
    problem = exposure_problem(s)
    if problem:
        raise ValueError(problem)
    state = Path(s.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    if s.isolate:
        isolation.check_isolated(s, sys.stderr)
    user_pw, user_pw_file = room_password(state, env)
    admin_pw, admin_pw_file = room_password(state, env, admin=True)
    bin_dir = Path(s.venv) / "bin"

    c.JupyterHub.bind_url = s.bind_url
    if s.ssl_cert:
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = s.ssl_cert, s.ssl_key
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = s.hub_port
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
    c.JupyterHub.active_server_limit = s.max_servers
    c.JupyterHub.concurrent_spawn_limit = s.spawn_limit   # above it: 429 "Too many users trying to log in right now"
    c.ConfigurableHTTPProxy.command = [s.proxy_command]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")

    # one room password for every learner (any name they choose), a longer one for the admins
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = user_pw
    c.SharedPasswordAuthenticator.admin_password = admin_pw
    c.Authenticator.admin_users = set(s.admins)
    c.Authenticator.allow_all = True
    c.Authenticator.username_pattern = USERNAME_PATTERN

    # every learner is a process of the hub's own OS user, with a folder of their own (hub/README.md: isolation)
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(Path(s.users_dir) / "{username}")
    c.Spawner.notebook_dir = str(Path(s.users_dir) / "{username}")
    c.Spawner.cmd = [str(bin_dir / "jupyterhub-singleuser")]
    as_root = not s.isolate and hasattr(os, "geteuid") and os.geteuid() == 0
    c.Spawner.args = (["--ServerApp.allow_root=True"] if as_root else []) + isolation.server_args(
        s.terminals, s.kernel_idle, s.kernel_cull_every)
    c.Spawner.environment = {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
                             "VIRTUAL_ENV": s.venv}
    if s.kernel_threads:   # many learners on few cores: one thread pool each of `kernel_threads`, not of every core
        c.Spawner.environment.update({v: str(s.kernel_threads) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    if s.lang != "en":   # the room's edition: the kernels' views and messages, JupyterLab's own menus
        c.Spawner.environment["AMPKIT_LANG"] = s.lang
        c.Spawner.environment["JUPYTERLAB_SETTINGS_DIR"] = lambda spawner: str(
            lab_settings_dir(spawner.home_dir, s.lang))
    c.Spawner.default_url = f"/lab/tree/{s.learner_notebooks}"
    c.Spawner.start_timeout = 120
    c.Spawner.http_timeout = 90
    source, reference = s.notebook_source, Path(s.repo) / "docs" / "reference.md"

    def first_login_copy(spawner) -> None:
        select_lab_language(spawner.home_dir, s.lang)
        copied = copy_notebooks_once(source, spawner.home_dir, reference, s.learner_notebooks)
        if copied:
            spawner.log.info("ampkit: copied %d files from %s into %s", len(copied), source, spawner.home_dir)

    c.Spawner.pre_spawn_hook = first_login_copy
    if s.isolate or s.mem_limit:   # system users (isolation.py) and/or a memory limit on every learner process
        isolation.configure_spawner(c, s, first_login_copy)

    # idle culling: the server stops (the learner's files stay); the next login starts it again
    c.JupyterHub.services = [{
        "name": "idle-culler",
        "command": [str(bin_dir / "python"), "-c", CULLER_MAIN, f"--timeout={s.idle_timeout}",
                    f"--cull-every={s.cull_every}"]}]
    c.JupyterHub.load_roles = [{"name": "idle-culler", "scopes": list(CULLER_SCOPES), "services": ["idle-culler"]}]
    if s.room_view:   # the instructor's live page of the room (hub/README.md, "The room view")
        from ampkit.classroom.roomview.hubconfig import add_room_view

        add_room_view(c, s)
    if s.lang != "en":
        print(f"ampkit hub: the {s.lang} edition: learners open {s.learner_notebooks}/ (copied from "
              f"{source}), kernels with AMPKIT_LANG={s.lang}, JupyterLab in {s.lang}", file=sys.stderr)
    print(f"ampkit hub: {s.bind_url} — learners log in with a name of their choice and the room password "
          f"{user_pw!r} ({user_pw_file}); admins {', '.join(s.admins)} use {admin_pw_file}", file=sys.stderr)
    if s.ssl_cert:
        print(tls.fingerprint_notice(s.ssl_cert), file=sys.stderr)
    if not s.loopback and not s.ssl_cert:
        print(f"ampkit hub: WARNING: serving {s.ip} over plain HTTP: the room password and every notebook cross "
              "the network unencrypted. Only on a network you trust, behind a firewall; HTTPS: HUB_SSL_CERT and "
              "HUB_SSL_KEY (hub/README.md).", file=sys.stderr)

