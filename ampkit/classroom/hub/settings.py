"""The hub's settings: ``AMPKIT_HUB_*`` environment variables (what ``make hub`` passes on) resolved into one
:class:`HubSettings`, and whether the hub may start as configured. Read by the hub config (:mod:`ampkit.classroom.hub`),
its command line (``cli.py``), the learner accounts (``users.py``) and the room view (``roomview/hubconfig.py``).
Standard library only.

>>> s = settings_from_env({"AMPKIT_HUB_PORT": "8010"}, "/kit")
>>> s.bind_url, s.loopback
('http://127.0.0.1:8010/', True)
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from ampkit._kit import LANGUAGES  # the room's editions (make hub LANG=zh_CN)
from ampkit.classroom import isolation, tls
from ampkit.classroom.hub.sizing import default_max_servers, default_spawn_limit, machine_mib

__all__ = ["HubSettings", "LANGUAGES", "exposure_problem", "settings_from_env"]



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
    lang: str = "en"                # the room's edition: en (notebooks/) or zh_CN (notebooks/zh_CN/, all in Chinese)

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
    def edition_dir(self) -> str:
        """The edition's folder under ``notebooks/`` and ``workshop/``: ``""`` for English, ``"zh_CN"``."""
        return "" if self.lang == "en" else self.lang

    @property
    def notebook_source(self) -> Path:
        """``workshop/`` (outputs cleared, solutions hidden) when ``make workshop`` made it, else ``notebooks/``;
        for the Chinese room ``workshop/zh_CN/`` (``make workshop LANG=zh_CN``), else ``notebooks/zh_CN/``."""
        workshop = Path(self.repo) / "workshop" / self.edition_dir
        return workshop if any(workshop.glob("*.ipynb")) else Path(self.repo) / "notebooks" / self.edition_dir

    @property
    def learner_notebooks(self) -> str:
        """Where a learner's copies live in their home, and where their JupyterLab opens: ``notebooks`` (English),
        ``notebooks/zh_CN`` (so that the Chinese notebooks' ``../../docs/reference.md`` links resolve)."""
        return "/".join(p for p in ("notebooks", self.edition_dir) if p)


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
    0: no room view), ``_ROOM_VIEW_PORT``, ``_LANG`` (``en``, the default, or ``zh_CN``: ``make hub LANG=zh_CN``).
    Bad values raise ``ValueError``."""
    repo = Path(repo)
    lang = env.get("AMPKIT_HUB_LANG", "") or "en"
    if lang not in LANGUAGES:
        raise ValueError(f"AMPKIT_HUB_LANG={lang!r}: the kit's editions are {', '.join(LANGUAGES)} "
                         "(make hub LANG=zh_CN: the Chinese edition)")
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
        room_view_port=_int(env, "AMPKIT_HUB_ROOM_VIEW_PORT", 0, 0, 65535), lang=lang)


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
