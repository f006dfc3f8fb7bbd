"""The hub's isolated mode (``make hub HUB_ISOLATE=1``, hub/README.md "Isolation"): every learner is a system user
of this machine (``ampkit-NAME``) with a private home, started by JupyterHub's ``LocalProcessSpawner`` (the hub runs
as root and the spawner switches to the learner's user with setuid before it starts the learner's server), a
memory limit per process set by the operating system (``RLIMIT_AS``), secrets readable only by the hub, and the
single-user server's options for terminals and kernel culling (used in both modes).

Standard library only at import time: JupyterHub's spawner is imported when the hub builds its spawner class.

>>> system_name("ana-k")
'ampkit-ana-k'
>>> parse_mem_limit("6G") == 6 * 2**30
True
"""
from __future__ import annotations

import math
import os
import pwd
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Callable

#: Every system user the kit creates starts with this, and has USER_COMMENT as its comment (GECOS) field: the
#: kit lists, changes and removes only accounts that have both, never another account of the machine.
USER_PREFIX, USER_COMMENT = "ampkit-", "ampkit learner"
#: Learners' names in the isolated mode: the hub's pattern, shortened so that ``ampkit-NAME`` fits Linux's
#: 32 characters for a user name (useradd refuses longer ones).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,24}$"
#: RLIMIT_AS default: 1.5 times the largest address space a kernel had while running a lesson notebook
#: (benchmarks/results/kernel_memory.json, ``peak_vm_mib``), rounded up to whole GiB (``default_mem_limit``).
MEM_MARGIN = 1.5
DEFAULT_MEM_LIMIT_GIB = 3
#: Kernels with no activity for this many seconds are stopped (their notebook stays; its variables are lost).
DEFAULT_KERNEL_IDLE, DEFAULT_KERNEL_CULL_EVERY = 1800, 60
#: Processes and threads per learner's system user in the isolated mode (RLIMIT_NPROC): a server and a few kernels
#: use tens (a kernel with torch: 12 to 16 threads, benchmarks/results/kernel_memory.json).
MAX_PROCESSES = 512
#: The hub's secrets in its state folder: readable and writable by the hub's user only.
SECRET_FILES = ("room-password", "admin-password", "jupyterhub_cookie_secret", "jupyterhub.sqlite")
_UNITS = {"": 2**20, "M": 2**20, "G": 2**30}


def system_name(name: str) -> str:
    """The system user of hub user ``name``: ``ampkit-NAME``. A name the isolated mode cannot map raises."""
    if not re.match(USERNAME_PATTERN, name or ""):
        raise ValueError(f"{name!r}: a learner's name in the isolated hub is 1 to 25 characters: lower-case "
                         "letters, digits, '-' and '_', starting with a letter (e.g. ana-k)")
    return USER_PREFIX + name


def parse_mem_limit(raw: str) -> int:
    """``HUB_MEM_LIMIT``: ``6G``, ``6144M`` or ``6144`` (MiB) as bytes; ``0`` or ``off``: no limit (0)."""
    text = str(raw).strip().upper().removesuffix("B").removesuffix("I")
    if text in ("0", "OFF", "NONE"):
        return 0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MG]?)", text)
    if not m:
        raise ValueError(f"AMPKIT_HUB_MEM_LIMIT={raw!r}: expected a size such as 3G or 3072M (MiB when no unit), "
                         "or 0/off for no limit")
    value = int(float(m.group(1)) * _UNITS[m.group(2)])
    if value < 512 * 2**20:
        raise ValueError(f"AMPKIT_HUB_MEM_LIMIT={raw!r}: at least 512M (a kernel with torch needs more than "
                         "that to start), or 0/off for no limit")
    return value


def default_mem_limit(peak_vm_mib: float, margin: float = MEM_MARGIN) -> int:
    """The default limit in GiB from a measured peak address space in MiB: ``margin`` times it, rounded up."""
    return math.ceil(peak_vm_mib * margin / 1024)


def rlimits(mem_limit: int, isolate: bool = False) -> list[tuple[str, int]]:
    """The resource limits each learner's process gets (soft = hard, so the learner cannot raise them): the
    address space when ``mem_limit`` (bytes) is set, no core files (a killed kernel would write its memory into
    the learner's home), and with ``isolate`` at most ``MAX_PROCESSES`` processes and threads per learner (Linux
    counts them per user: a fork bomb stops there, not at the machine's limit)."""
    limits = [("RLIMIT_CORE", 0)]
    if mem_limit:
        limits.append(("RLIMIT_AS", mem_limit))
    if isolate:
        limits.append(("RLIMIT_NPROC", MAX_PROCESSES))
    return limits


def limited_preexec(inner: Callable[[], None] | None, limits: list[tuple[str, int]]) -> Callable[[], None]:
    """A ``preexec_fn``: set ``limits`` (while still root: a hard limit can be lowered, never raised again), then
    run ``inner`` (JupyterHub's setuid to the learner). Inherited by the server and every kernel it starts."""
    import resource

    resolved = [(getattr(resource, name), value) for name, value in limits]

    def preexec() -> None:
        for which, value in resolved:
            resource.setrlimit(which, (value, value))
        if inner is not None:
            inner()

    return preexec


def server_args(terminals: bool, kernel_idle: int, cull_every: int = DEFAULT_KERNEL_CULL_EVERY) -> list[str]:
    """The learner's single-user server options: terminals (Jupyter Server's ``ServerApp.terminals_enabled``) and
    kernel culling (``MappingKernelManager.cull_idle_timeout``/``cull_interval``/``cull_connected``: a kernel whose
    notebook is still open in a browser tab counts as idle too, when nothing runs in it)."""
    args = [] if terminals else ["--ServerApp.terminals_enabled=False"]
    if kernel_idle:
        args += [f"--MappingKernelManager.cull_idle_timeout={kernel_idle}",
                 f"--MappingKernelManager.cull_interval={cull_every}",
                 "--MappingKernelManager.cull_connected=True"]
    return args


# ---- the hub's secrets ------------------------------------------------------------------------------------------

def secret_paths(state_dir: str | os.PathLike) -> list[Path]:
    state = Path(state_dir)
    return [state / name for name in SECRET_FILES] + [state / "tls"]


def privacy_problems(state_dir: str | os.PathLike, owner: int | None = None) -> list[str]:
    """What in ``state_dir`` another user could read or change: secrets (and the ``tls`` folder) must be owned by
    ``owner`` (default: this process) with no group/other bits; the state folder itself may be entered by others
    (learners' homes are below it) but not listed or written."""
    owner = os.geteuid() if owner is None else owner
    problems = []
    state = Path(state_dir)
    if state.exists():
        st = state.stat()
        if st.st_uid != owner or st.st_mode & 0o066:
            problems.append(f"{state}: owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o} (want owner {owner}, "
                            "mode 711: others may enter, not list or write)")
    for path in secret_paths(state):
        if path.exists():
            st = path.stat()
            if st.st_uid != owner or st.st_mode & 0o077:
                problems.append(f"{path}: owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o} (want owner {owner}, "
                                f"mode {'700' if path.is_dir() else '600'})")
    return problems


def make_private(state_dir: str | os.PathLike) -> None:
    """Give the state folder mode 711 and every secret 600 (``tls/`` 700); the database file is created empty
    first, so sqlite (which gives its journal the database's mode) never makes it readable by others."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o711)
    (state / "jupyterhub.sqlite").touch(mode=0o600)
    for path in secret_paths(state):
        if path.exists():
            path.chmod(0o700 if path.is_dir() else 0o600)
    users = state / "users"
    users.mkdir(exist_ok=True)
    users.chmod(0o711)


def unreachable(paths: list[str | os.PathLike]) -> list[str]:
    """Which of ``paths`` (the venv's Python, the users' folder) another user cannot reach: a folder on the way
    (links followed) without the others' x bit. A venv made from a Python under ``/root`` (pyenv) is the usual one."""
    problems = []
    for path in map(Path, paths):
        path = path.resolve()     # a venv's python is a link to the Python it was made from: that one must be reachable
        for parent in reversed(path.parents):
            if parent.exists() and not parent.stat().st_mode & 0o001:
                problems.append(f"{parent} (mode {stat.S_IMODE(parent.stat().st_mode):o}) keeps learners out of "
                                f"{path}: make the hub's venv from a Python they can reach: sudo make hub HUB_ISOLATE=1"
                                " PYTHON=/usr/bin/python3 VENV=.venv-hub (hub/README.md, 'Isolation')")
                break
    return problems


# ---- the learners' system users ---------------------------------------------------------------------------------

def useradd_argv(name: str, home: str | os.PathLike) -> list[str]:
    """Debian's ``useradd`` for hub user ``name``: no home copied from /etc/skel (the kit fills it), a group of
    its own, a locked password (nobody logs in to the machine with it)."""
    return ["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--user-group",
            "--comment", USER_COMMENT, system_name(name)]


def userdel_argv(name: str) -> list[str]:
    """``userdel`` for hub user ``name``; the home (the learner's work) is kept."""
    return ["userdel", system_name(name)]


def kit_users() -> dict[str, pwd.struct_passwd]:
    """The system users the kit created, by hub name: prefix ``ampkit-`` and comment ``ampkit learner`` both."""
    return {p.pw_name[len(USER_PREFIX):]: p for p in pwd.getpwall()
            if p.pw_name.startswith(USER_PREFIX) and p.pw_gecos == USER_COMMENT}


def ensure_user(name: str, home: str | os.PathLike, run=subprocess.run) -> pwd.struct_passwd:
    """The system user of hub user ``name``, created if missing. An account of that name that the kit did not
    create is refused (never taken over)."""
    sysname = system_name(name)
    if sysname not in {p.pw_name for p in pwd.getpwall()}:
        out = run(useradd_argv(name, home), capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"useradd {sysname} failed ({out.returncode}): {out.stderr.strip()}")
    entry = pwd.getpwnam(sysname)
    if entry.pw_gecos != USER_COMMENT:
        raise RuntimeError(f"{sysname} exists and was not created by ampkit (comment {entry.pw_gecos!r}): "
                           "the kit leaves it alone; rename the learner")
    return entry


def own_home(home: str | os.PathLike, uid: int, gid: int) -> None:
    """The learner's home and everything in it owned by them; the home itself mode 700 (nobody else enters)."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    for root, dirs, files in os.walk(home):
        for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
            os.lchown(entry, uid, gid)
    home.chmod(0o700)


def remove_users(names: list[str] | None = None, run=subprocess.run) -> list[str]:
    """Remove the kit's system users (``names``, or all of them); homes stay. Returns the hub names removed."""
    users = kit_users()
    chosen = sorted(users) if names is None else names
    unknown = [n for n in chosen if n not in users]
    if unknown:
        raise ValueError(f"not a learner account of the kit: {', '.join(unknown)} (the kit's: "
                         f"{', '.join(sorted(users)) or 'none'})")
    for name in chosen:
        out = run(userdel_argv(name), capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"userdel {system_name(name)} failed ({out.returncode}): {out.stderr.strip()}")
    return chosen


def spawner_class(isolate: bool, limits: list[tuple[str, int]], users_dir: str):
    """JupyterHub's spawner for the room: ``LocalProcessSpawner`` switching to the learner's system user
    (``isolate``), or ``SimpleLocalProcessSpawner`` (the hub's own user); both with ``limits`` on every process."""
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner, set_user_setuid

    if not isolate:
        class AmpkitSharedSpawner(SimpleLocalProcessSpawner):
            def make_preexec_fn(self, name):
                return limited_preexec(super().make_preexec_fn(name), limits)
        return AmpkitSharedSpawner

    class AmpkitSystemUserSpawner(LocalProcessSpawner):
        """Each learner's server as their system user ``ampkit-NAME``, home ``users/NAME``, with ``limits``; the
        compile cache of notebook 04 (``TORCHINDUCTOR_CACHE_DIR``) in the home: the kit's shared cache is the hub
        user's, and a cache shared between learners would let one plant compiled code that another one loads."""

        @property
        def home_dir(self) -> str:
            return str(Path(users_dir) / self.user.name)

        def make_preexec_fn(self, name):
            return limited_preexec(set_user_setuid(system_name(name)), limits)

        def user_env(self, env):
            env.update(USER=system_name(self.user.name), HOME=self.home_dir, SHELL="/bin/bash",
                       TORCHINDUCTOR_CACHE_DIR=str(Path(self.home_dir) / ".cache" / "torchinductor"))
            return env

    return AmpkitSystemUserSpawner


def start_problem(s) -> str | None:
    """Why the isolated hub cannot start on this machine (``make hub``'s check, nothing changed), or None."""
    if not s.isolate:
        return None
    if not shutil.which("useradd"):
        return ("HUB_ISOLATE=1 creates system users with useradd, which is not on PATH (Linux only; on Debian/Ubuntu "
                "it is in the passwd package, /usr/sbin)")
    problems = unreachable([Path(s.venv) / "bin" / "python"])
    return "the isolated hub will not start: " + "; ".join(problems) if problems else None


def check_isolated(s, stream=None) -> None:
    """At the isolated hub's start (``hub.configure``): the secrets made private and checked, the venv and the
    users' folder reachable by the learners' users, ``useradd`` present. A problem raises ``ValueError``."""
    problem = start_problem(s)
    if problem:
        raise ValueError(problem)
    make_private(s.state_dir)
    problems = privacy_problems(s.state_dir) + unreachable([Path(s.venv) / "bin" / "python", s.users_dir])
    if problems:
        raise ValueError("the isolated hub will not start:\n  " + "\n  ".join(problems))
    if stream is not None:
        limit = f"{s.mem_limit / 2**30:g} GiB of address space per process" if s.mem_limit else "no memory limit"
        print(f"ampkit hub: isolated: each learner is the system user {USER_PREFIX}NAME, home "
              f"{s.users_dir}/NAME (mode 700); secrets mode 600; {limit}", file=stream)


def configure_spawner(c, s, first_login_copy: Callable) -> None:
    """The spawner part of ``hub.configure`` for the isolated mode or a memory limit: the spawner class, and in
    the isolated mode the shorter name pattern and a pre-spawn hook that creates the learner's system user."""
    c.JupyterHub.spawner_class = spawner_class(s.isolate, rlimits(s.mem_limit, s.isolate), s.users_dir)
    if s.isolate:
        c.Authenticator.username_pattern = USERNAME_PATTERN

        def create_and_copy(spawner) -> None:
            prepare_learner(spawner.user.name, spawner.home_dir, lambda: first_login_copy(spawner))

        c.Spawner.pre_spawn_hook = create_and_copy


def prepare_learner(name: str, home: str | os.PathLike, copy: Callable[[], object]) -> pwd.struct_passwd:
    """Before a learner's server starts (the hub's pre-spawn hook): their system user, the first-login copy
    (``copy``), then the home made theirs."""
    entry = ensure_user(name, home)
    Path(home).mkdir(parents=True, exist_ok=True)
    copy()
    own_home(home, entry.pw_uid, entry.pw_gid)
    return entry
