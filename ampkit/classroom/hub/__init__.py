"""A JupyterHub for the room, on one machine: the settings, the passwords, the first-login copy and the extras
check. It serves every notebook (``notebooks/``, or the learner copies in ``workshop/`` when
``make workshop`` made them); the operator's notes are ``hub/README.md``, the config ``hub/jupyterhub_config.py``.

Standard library only at import time (nbformat is imported by the copy, JupyterHub never): the hub config and
``make hub`` import it as ``ampkit.classroom.hub``, and since ``import ampkit`` is lazy the hub process never
imports torch or widgets.
A package: the settings and the config here; the extras check (JupyterHub, the culler, configurable-http-proxy,
Node.js) in ``extras.py``, the room's default limits in ``sizing.py``, the command line in ``cli.py``. The load test
(``benchmarks/bench_hub.py``) has modules of its own: ``loadtest.py`` (its statistics and clean-up) and
``hub_client.py`` (a hub process and its REST API).

>>> s = settings_from_env({}, "/kit")
>>> s.bind_url, s.idle_timeout
('http://127.0.0.1:8000/', 3600)
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
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
@dataclass(frozen=True)
class HubSettings:
    """Everything ``hub/jupyterhub_config.py`` needs, resolved from ``AMPKIT_HUB_*`` environment variables."""

    repo: str
    ip: str = "127.0.0.1"
    port: int = 8000
    hub_port: int = 8081            # the hub's own API, always on 127.0.0.1
    proxy_api_port: int = 8001      # configurable-http-proxy's REST API, always on 127.0.0.1
    state_dir: str = ""             # sqlite db, cookie secret, passwords, users' folders
    venv: str = ""
    idle_timeout: int = 3600        # seconds without activity before the culler stops a learner's server
    cull_every: int = 300
    admins: tuple[str, ...] = ("instructor",)
    max_servers: int = 0            # 0: no limit on running learner servers (default: what memory holds)
    spawn_limit: int = 0            # servers starting at once (JupyterHub's concurrent_spawn_limit); 0: no limit
    ssl_cert: str = ""              # HTTPS: certificate and key files (both, or neither)
    ssl_key: str = ""
    kernel_threads: int = 1         # OMP/MKL threads per learner's kernel (0: torch's default, every core)
    allow_root: bool = False        # serve the room (not only this machine) from a hub running as root
    isolate: bool = False           # every learner a system user with a private home (isolation.py; needs root)
    mem_limit: int = 0              # bytes of address space per learner process (RLIMIT_AS); 0: none
    terminals: bool = False         # JupyterLab terminals for learners
    kernel_idle: int = isolation.DEFAULT_KERNEL_IDLE   # seconds before an idle kernel is stopped; 0: never
    kernel_cull_every: int = isolation.DEFAULT_KERNEL_CULL_EVERY
    room_view: bool = True          # the instructor's room view and the learners' reports (roomview/, report.py)
    room_view_port: int = 0         # the room view's port on 127.0.0.1 (0: a free port)

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.ip).is_loopback

    @property
    def bind_url(self) -> str:
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{'https' if self.ssl_cert else 'http'}://{host}:{self.port}/"

    @property
    def users_dir(self) -> str:
        return str(Path(self.state_dir) / "users")

    @property
    def proxy_command(self) -> str:
        return str(Path(self.venv) / "hub-node" / "node_modules" / ".bin" / "configurable-http-proxy")

    @property
    def notebook_source(self) -> Path:
        """``workshop/`` (outputs cleared, solutions hidden) when ``make workshop`` made it, else ``notebooks/``."""
        workshop = Path(self.repo) / "workshop"
        return workshop if any(workshop.glob("*.ipynb")) else Path(self.repo) / "notebooks"


def _int(env: dict, name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value}: expected an integer from {lo} to {hi}")
    return value


def settings_from_env(env: dict, repo: str | os.PathLike) -> HubSettings:
    """Read ``AMPKIT_HUB_IP`` (default 127.0.0.1), ``_PORT``, ``_HUB_PORT``, ``_PROXY_API_PORT``, ``_STATE``
    (default ``.cache/hub``), ``_VENV`` (default ``.venv``), ``_IDLE_TIMEOUT`` (s), ``_CULL_EVERY`` (s),
    ``_ADMINS`` (comma-separated, default ``instructor``), ``_MAX_SERVERS`` (default: ``default_max_servers``),
    ``_SPAWN_LIMIT`` (default: ``default_spawn_limit``), ``_SSL_CERT``/``_SSL_KEY`` (HTTPS),
    ``_KERNEL_THREADS`` (default 1), ``_ISOLATE``, ``_MEM_LIMIT``, ``_TERMINALS``, ``_KERNEL_IDLE`` (s),
    ``_KERNEL_CULL_EVERY`` (s), ``_HTTPS`` (the certificate of ``make hub-cert``), ``_ROOM_VIEW`` (default 1;
    0: no room view), ``_ROOM_VIEW_PORT``. Bad values raise ``ValueError``."""
    repo = Path(repo)
    ip = env.get("AMPKIT_HUB_IP", "") or "127.0.0.1"
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise ValueError(f"AMPKIT_HUB_IP={ip!r}: expected an IP address: 127.0.0.1 (this machine only, the "
                         "default), 0.0.0.0 (every interface) or one of this machine's addresses") from None
    cert, key = env.get("AMPKIT_HUB_SSL_CERT", ""), env.get("AMPKIT_HUB_SSL_KEY", "")
    state_dir = str(Path(env.get("AMPKIT_HUB_STATE", "") or repo / ".cache" / "hub").absolute())
    if _flag(env, "AMPKIT_HUB_HTTPS"):
        cert, key = tls.hub_cert_files(state_dir, given=(cert, key))
    isolate = _flag(env, "AMPKIT_HUB_ISOLATE")
    mem_raw = env.get("AMPKIT_HUB_MEM_LIMIT", "")
    mem_limit = (isolation.parse_mem_limit(mem_raw) if mem_raw
                 else isolation.DEFAULT_MEM_LIMIT_GIB * 2**30 if isolate else 0)
    if bool(cert) != bool(key):
        raise ValueError("HTTPS needs both AMPKIT_HUB_SSL_CERT and AMPKIT_HUB_SSL_KEY (files), or neither")
    for name, path in (("AMPKIT_HUB_SSL_CERT", cert), ("AMPKIT_HUB_SSL_KEY", key)):
        if path and not Path(path).is_file():
            raise ValueError(f"{name}={path!r}: no such file (a PEM certificate / key file)")
    admins = tuple(a.strip() for a in env.get("AMPKIT_HUB_ADMINS", "instructor").split(",") if a.strip())
    if not admins:
        raise ValueError("AMPKIT_HUB_ADMINS is empty: name at least one admin (the instructor), e.g. instructor")
    return HubSettings(
        repo=str(repo), ip=ip,
        port=_int(env, "AMPKIT_HUB_PORT", 8000, 1, 65535),
        hub_port=_int(env, "AMPKIT_HUB_HUB_PORT", 8081, 1, 65535),
        proxy_api_port=_int(env, "AMPKIT_HUB_PROXY_API_PORT", 8001, 1, 65535),
        state_dir=state_dir,
        venv=str(Path(env.get("AMPKIT_HUB_VENV", "") or repo / ".venv").absolute()),
        idle_timeout=_int(env, "AMPKIT_HUB_IDLE_TIMEOUT", 3600, 60, 7 * 24 * 3600),
        cull_every=_int(env, "AMPKIT_HUB_CULL_EVERY", 300, 10, 24 * 3600),
        admins=admins,
        max_servers=_int(env, "AMPKIT_HUB_MAX_SERVERS", default_max_servers(machine_mib()), 0, 100_000),
        spawn_limit=_int(env, "AMPKIT_HUB_SPAWN_LIMIT", default_spawn_limit(os.cpu_count() or 1), 0, 100_000),
        ssl_cert=str(Path(cert).absolute()) if cert else "", ssl_key=str(Path(key).absolute()) if key else "",
        kernel_threads=_int(env, "AMPKIT_HUB_KERNEL_THREADS", 1, 0, 1024),
        allow_root=_flag(env, "AMPKIT_HUB_ALLOW_ROOT"),
        isolate=isolate, mem_limit=mem_limit, terminals=_flag(env, "AMPKIT_HUB_TERMINALS"),
        kernel_idle=_int(env, "AMPKIT_HUB_KERNEL_IDLE", isolation.DEFAULT_KERNEL_IDLE, 0, 7 * 24 * 3600),
        kernel_cull_every=_int(env, "AMPKIT_HUB_KERNEL_CULL_EVERY", isolation.DEFAULT_KERNEL_CULL_EVERY, 5, 3600),
        room_view=env.get("AMPKIT_HUB_ROOM_VIEW", "") in ("", "1") or _flag(env, "AMPKIT_HUB_ROOM_VIEW"),
        room_view_port=_int(env, "AMPKIT_HUB_ROOM_VIEW_PORT", 0, 0, 65535))


def _flag(env: dict, name: str) -> bool:
    raw = env.get(name, "")
    if raw not in ("", "0", "1"):
        raise ValueError(f"{name}={raw!r}: expected 1 (on) or 0 (off)")
    return raw == "1"


def exposure_problem(s: HubSettings, euid: int | None = None) -> str | None:
    """Why this hub must not start as configured, or None. As root, every learner's code runs as root (the
    spawner does not change users): allowed on 127.0.0.1 (the instructor alone, as ``make lab`` as root), refused
    for the room unless ``AMPKIT_HUB_ALLOW_ROOT=1`` says the machine is disposable."""
    euid = (os.geteuid() if hasattr(os, "geteuid") else 1) if euid is None else euid
    if s.isolate:   # the spawner switches to each learner's system user: only root may
        return None if euid == 0 else ("HUB_ISOLATE=1 makes every learner a system user: the hub must run as root "
                                       "(sudo make hub HUB_ISOLATE=1 ...; hub/README.md, 'Isolation')")
    if euid == 0 and not s.loopback and not s.allow_root:
        return (f"refusing to serve {s.ip} as root: every learner's code would run as root on this machine. Run "
                "make hub as an ordinary user (recommended), or add HUB_ALLOW_ROOT=1 if this machine is a "
                "disposable VM or container for the day (hub/README.md, 'Isolation').")
    return None


def room_password(state_dir: str | os.PathLike, env: dict, *, admin: bool = False) -> tuple[str, Path]:
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
                        reference: str | os.PathLike | None = None) -> list[str]:
    """A learner's first login: copy ``source/*.ipynb`` into ``home/notebooks/`` with outputs cleared (and
    ``reference``, the kit's ``docs/reference.md``, into ``home/docs/``). A file already there is NEVER
    overwritten: a learner's work survives every later login; a deleted notebook comes back fresh. Returns the
    names copied this time."""
    import nbformat

    source, home = Path(source), Path(home)
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {source}: expected the kit's notebooks/ or workshop/ folder")
    (home / NOTEBOOKS_DIR).mkdir(parents=True, exist_ok=True)
    copied = []
    for path in notebooks:
        dest = home / NOTEBOOKS_DIR / path.name
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


def configure(c, s: HubSettings, env: dict | None = None) -> None:
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
    c.Spawner.default_url = "/lab/tree/notebooks"
    c.Spawner.start_timeout = 120
    c.Spawner.http_timeout = 90
    source, reference = s.notebook_source, Path(s.repo) / "docs" / "reference.md"

    def first_login_copy(spawner) -> None:
        copied = copy_notebooks_once(source, spawner.home_dir, reference)
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
    print(f"ampkit hub: {s.bind_url} — learners log in with a name of their choice and the room password "
          f"{user_pw!r} ({user_pw_file}); admins {', '.join(s.admins)} use {admin_pw_file}", file=sys.stderr)
    if s.ssl_cert:
        print(tls.fingerprint_notice(s.ssl_cert), file=sys.stderr)
    if not s.loopback and not s.ssl_cert:
        print(f"ampkit hub: WARNING: serving {s.ip} over plain HTTP: the room password and every notebook cross "
              "the network unencrypted. Only on a network you trust, behind a firewall; HTTPS: HUB_SSL_CERT and "
              "HUB_SSL_KEY (hub/README.md).", file=sys.stderr)


# the command line (python -m ampkit.classroom.hub), at the end: it uses the names above
from ampkit.classroom.hub.cli import main  # noqa: E402,F401
