"""The room's work is never lost by accident: one archive of every learner's folder (``make hub-backup``), a clean-up
that refuses while a room exists (``make clean``), and a reset that is done only on purpose and backs up first
(``make hub-reset CONFIRM=delete-the-room``). hub/README.md, "Keeping the room's work", says when to use which.

- :func:`learner_entries` lists what a backup holds: everything under ``STATE/users/`` (each learner's folder), with
  symlinks and special files left out (a link is never followed out of the folder) and caches left out
  (:data:`EXCLUDED`). The hub's secrets and database (``room-password``, ``admin-password``,
  ``jupyterhub_cookie_secret``, ``jupyterhub.sqlite``) are never in it: the archive can be handed to learners or
  copied to a USB stick, and nothing a learner made lives in the database.
- :func:`write_backup` writes it: one ``.tar.gz`` named by the time (:func:`archive_name`), names inside start with
  ``users/NAME/`` (restore: ``tar -xzf ARCHIVE -C STATE``).
- :func:`rooms_in` finds the rooms that a clean-up of some paths would delete; :func:`guard_message` is the one line
  ``make clean`` prints when it refuses.
- :func:`reset_problem` says why a reset must not go ahead (no confirmation word, the hub still running).

Standard library only (run with ``python -m ampkit.classroom.backup`` from the checkout; torch is not needed).

>>> archive_name(datetime.datetime(2026, 11, 24, 17, 5, 9))
'ampkit-room-20261124-170509.tar.gz'
>>> excluded("ana-k/.cache/matplotlib/fontlist.json"), excluded("ana-k/notebooks/03.ipynb")
(True, False)
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import stat
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["USERS", "SECRETS", "EXCLUDED", "CONFIRM_WORD", "is_room", "excluded", "learner_entries", "archive_name",
           "write_backup", "Backup", "rooms_in", "guard_message", "hub_pid", "reset_problem", "human_size", "main"]

USERS = "users"
#: The hub's own files in the state folder: never in a learner-work archive.
SECRETS = ("room-password", "admin-password", "jupyterhub_cookie_secret", "jupyterhub.sqlite", "jupyterhub.pid",
           "proxy.pid")
#: Left out of every learner's folder (relative to it): caches that are made again, and the kernels' connection
#: files (each holds the key that signs that kernel's messages).
EXCLUDED = (".cache", ".local/share/jupyter/runtime")
#: What ``make hub-reset`` needs as CONFIRM= before it deletes the room.
CONFIRM_WORD = "delete-the-room"


def is_room(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds a hub's state: its database, a password or cookie secret, or learners' folders."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    if any((folder / name).exists() for name in SECRETS[:4]):
        return True
    users = folder / USERS
    return users.is_dir() and any(users.iterdir())


def excluded(relative: str) -> bool:
    """True for a path (relative to ``users/``: ``NAME/...``) that a backup leaves out (:data:`EXCLUDED`)."""
    parts = Path(relative).parts[1:]
    return any(parts[:len(Path(e).parts)] == Path(e).parts for e in EXCLUDED)


def learner_entries(state_dir: str | os.PathLike) -> tuple[list[tuple[str, Path]], list[str]]:
    """What a backup of ``state_dir`` holds: ``[(name in the archive, path)]`` for every folder and regular file
    under ``users/`` (folders first, in sorted order), and the names left out because they are symlinks or special
    files. Symlinks are never followed: a link to a file outside the learner's folder does not bring that file in."""
    users = Path(state_dir) / USERS
    entries: list[tuple[str, Path]] = []
    skipped: list[str] = []
    if not users.is_dir():
        return entries, skipped
    for root, dirs, files in os.walk(users, followlinks=False):
        root_path = Path(root)
        rel_root = root_path.relative_to(users)
        keep = []
        for d in sorted(dirs):
            rel = (rel_root / d).as_posix()
            if (root_path / d).is_symlink():
                skipped.append(f"{USERS}/{rel}")
            elif not excluded(rel):
                keep.append(d)
        dirs[:] = keep
        if rel_root.parts:
            entries.append((f"{USERS}/{rel_root.as_posix()}", root_path))
        for f in sorted(files):
            path, rel = root_path / f, (rel_root / f).as_posix()
            if excluded(rel):
                continue
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                entries.append((f"{USERS}/{rel}", path))
            else:  # a symlink, a socket, a fifo: left out
                skipped.append(f"{USERS}/{rel}")
    return entries, skipped


def archive_name(now: datetime.datetime | None = None) -> str:
    """``ampkit-room-YYYYMMDD-HHMMSS.tar.gz`` (local time: the one on the instructor's clock)."""
    now = now or datetime.datetime.now()
    return f"ampkit-room-{now:%Y%m%d-%H%M%S}.tar.gz"


def human_size(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


@dataclass
class Backup:
    """What :func:`write_backup` wrote."""
    path: Path
    bytes: int
    learners: list[str]
    files: int
    skipped: list[str] = field(default_factory=list)      # symlinks and special files, left out
    unreadable: list[str] = field(default_factory=list)   # files the hub's user could not read

    def summary(self) -> str:
        lines = [f"{self.path}  {human_size(self.bytes)}: {len(self.learners)} learners' folders, {self.files} files "
                 f"(the hub's passwords and database are not in it)"]
        if self.skipped:
            lines.append(f"left out, not followed: {len(self.skipped)} symlinks or special files "
                         f"({', '.join(self.skipped[:5])}{', ...' if len(self.skipped) > 5 else ''})")
        if self.unreadable:
            lines.append(f"WARNING: {len(self.unreadable)} files could not be read and are NOT in the archive: "
                         f"{', '.join(self.unreadable[:5])}{', ...' if len(self.unreadable) > 5 else ''}")
        return "\n".join(lines)


def write_backup(state_dir: str | os.PathLike, dest_dir: str | os.PathLike,
                 now: datetime.datetime | None = None) -> Backup:
    """One ``.tar.gz`` in ``dest_dir`` of every learner's folder in ``state_dir`` (see :func:`learner_entries`),
    written under a temporary name and renamed when complete. A ValueError when there is no room to back up."""
    state_dir, dest_dir = Path(state_dir), Path(dest_dir)
    if not (state_dir / USERS).is_dir():
        raise ValueError(f"{state_dir}/{USERS}/: no learners' folders to back up (is HUB_STATE the room's folder? "
                         "make hub creates it when the first learner logs in)")
    entries, skipped = learner_entries(state_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    name = archive_name(now)
    target, n = dest_dir / name, 1
    while target.exists():
        n += 1
        target = dest_dir / name.replace(".tar.gz", f"-{n}.tar.gz")
    partial = target.with_name(f".{target.name}.partial")
    unreadable: list[str] = []
    files = 0
    try:
        with tarfile.open(partial, "w:gz") as tar:
            for arcname, path in entries:
                if path.is_dir():
                    tar.add(path, arcname, recursive=False)
                    continue
                try:  # O_NOFOLLOW: a file swapped for a symlink since it was listed is refused, not followed
                    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                    with os.fdopen(fd, "rb") as fh:
                        tar.addfile(tar.gettarinfo(arcname=arcname, fileobj=fh), fh)
                    files += 1
                except OSError:
                    unreadable.append(arcname)
        partial.chmod(0o600)  # learners' work: readable by the one who made the backup only
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    learners = sorted(p.name for p in (state_dir / USERS).iterdir() if p.is_dir() and not p.is_symlink())
    return Backup(target, target.stat().st_size, learners, files, skipped, unreadable)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def rooms_in(paths: list[str | os.PathLike], state_dir: str | os.PathLike | None = None,
             depth: int = 3) -> list[Path]:
    """The rooms that deleting ``paths`` would delete: ``state_dir`` (the hub's HUB_STATE) when it is one of them or
    inside one, and any folder up to ``depth`` levels down that :func:`is_room` (a room started with another
    HUB_STATE). Python venvs are not searched (nothing of a room is kept in one)."""
    found: list[Path] = []
    roots = [Path(p) for p in paths if Path(p).exists()]
    if state_dir is not None and any(_inside(Path(state_dir), r) for r in roots) and is_room(state_dir):
        found.append(Path(state_dir))
    for root in roots:
        if not root.is_dir() or root.is_symlink():
            continue
        level = [root]
        for _ in range(depth + 1):
            nxt = []
            for folder in level:
                if (folder / "pyvenv.cfg").exists():
                    continue
                if is_room(folder) and not any(folder.resolve() == f.resolve() for f in found):
                    found.append(folder)
                    continue
                try:
                    nxt += [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
                except OSError:
                    continue
            level = nxt
    return found


def guard_message(rooms: list[Path]) -> str:
    """The one line ``make clean`` prints when it refuses."""
    where = ", ".join(str(r) for r in rooms)
    return (f"make clean: refusing: {where} holds the room (learners' work, passwords, the hub's database). Back it up "
            f"with `make hub-backup`, or delete it on purpose with `make hub-reset CONFIRM={CONFIRM_WORD}` (it backs "
            "up first), then run make clean again.")


def hub_pid(state_dir: str | os.PathLike) -> int | None:
    """The pid of a hub still running on ``state_dir`` (from its ``jupyterhub.pid``), else None."""
    try:
        pid = int((Path(state_dir) / "jupyterhub.pid").read_text().strip())
        os.kill(pid, 0)
    except PermissionError:  # running, as another user (the isolated hub runs as root)
        return pid
    except (OSError, ValueError):
        return None
    return pid


def reset_problem(state_dir: str | os.PathLike, confirm: str) -> str | None:
    """Why ``make hub-reset`` must not delete ``state_dir`` now, or None."""
    if not is_room(state_dir):
        return f"{state_dir}: no room here (nothing to reset)"
    if confirm != CONFIRM_WORD:
        shown = f"CONFIRM={confirm!r} is not the word" if confirm else "it needs CONFIRM"
        return (f"make hub-reset deletes {state_dir}: every learner's folder, the passwords and the hub's database "
                f"(a backup is written first). {shown}: make hub-reset CONFIRM={CONFIRM_WORD}")
    pid = hub_pid(state_dir)
    if pid:
        return f"the hub is still running on {state_dir} (pid {pid}): stop it (Ctrl-C in its terminal) first"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.backup", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    create = sub.add_parser("create", help="one archive of every learner's folder (make hub-backup)")
    guard = sub.add_parser("guard", help="exit 2 with one line if deleting PATHS would delete a room (make clean)")
    reset = sub.add_parser("reset", help="back up, then delete the room (make hub-reset CONFIRM=...)")
    for sp in (create, guard, reset):
        sp.add_argument("--state", default=".cache/hub", help="the room's folder (HUB_STATE)")
    for sp in (create, reset):
        sp.add_argument("--to", default="hub-backups", help="folder for the archive (HUB_BACKUPS)")
    guard.add_argument("paths", nargs="*")
    reset.add_argument("--confirm", default="")
    a = p.parse_args(argv)
    if a.cmd == "guard":
        rooms = rooms_in(a.paths, a.state)
        if rooms:
            print(guard_message(rooms), file=sys.stderr)
            return 2
        return 0
    if a.cmd == "reset":
        problem = reset_problem(a.state, a.confirm)
        if problem:
            print(f"make hub-reset: {problem}", file=sys.stderr)
            return 2
    try:
        made = write_backup(a.state, a.to)
    except ValueError as err:
        if a.cmd == "create":
            print(f"make hub-backup: {err}", file=sys.stderr)
            return 2
        made = None  # a room with no learners yet: nothing to keep
    if made:
        print(made.summary())
        if made.unreadable:
            print(f"make {'hub-backup' if a.cmd == 'create' else 'hub-reset'}: some files were not backed up "
                  "(above); run it as a user who can read every learner's folder"
                  + ("; the room was NOT deleted" if a.cmd == "reset" else ""), file=sys.stderr)
            return 1
    if a.cmd == "reset":
        shutil.rmtree(a.state)
        print(f"deleted {a.state}: the next `make hub` starts an empty room with new passwords")
    return 0


if __name__ == "__main__":
    sys.exit(main())
