"""The room's work is never lost by accident (issue 22, item 1): ampkit.classroom.backup on a synthetic room (every
learner's file restored byte for byte, nothing outside users/ in the archive, symlinks not followed out of a
learner's folder), the guard that makes `make clean` refuse, and `make clean` / `make hub-backup` / `make hub-reset`
run for real by make in a temporary copy of the Makefile (never in this checkout)."""
from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ampkit.classroom import backup
from ampkit.classroom.backup import (
    CONFIRM_WORD,
    archive_name,
    guard_message,
    is_room,
    learner_entries,
    reset_problem,
    rooms_in,
    write_backup,
)

ROOT = Path(__file__).resolve().parents[1]
ADMIN_PASSWORD = "admin-" + "x7Qz" * 10
ROOM_PASSWORD = "room-pw-k3k3"
OUTSIDE_SECRET = b"outside-the-room: must never be archived"


def make_room(state: Path, outside: Path) -> dict[str, bytes]:
    """A room as `make hub` leaves it, with traps: the hub's secrets, caches, a kernel's connection file, symlinks
    out of a learner's folder. Returns the files a backup must hold, by their name in the archive."""
    state.mkdir(parents=True)
    (state / "admin-password").write_text(ADMIN_PASSWORD + "\n")
    (state / "room-password").write_text(ROOM_PASSWORD + "\n")
    (state / "jupyterhub_cookie_secret").write_bytes(os.urandom(32))
    (state / "jupyterhub.sqlite").write_bytes(b"SQLite format 3\x00" + ADMIN_PASSWORD.encode())
    (state / "tls").mkdir()
    (state / "tls" / "hub.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    outside.mkdir(parents=True)
    (outside / "secret.txt").write_bytes(OUTSIDE_SECRET)
    want = {
        "users/ana-k/notebooks/03_loss_scaling.ipynb": b'{"cells": []}\n' + os.urandom(2000),
        "users/ana-k/notebooks/my results.csv": b"step,loss\n1,0.5\n",
        "users/ana-k/docs/reference.md": "# r\u00e9f\u00e9rence\n".encode(),
        "users/bo/notebooks/.ipynb_checkpoints/00-checkpoint.ipynb": b"{}",
        "users/bo/data.bin": os.urandom(70_000),
    }
    for name, data in want.items():
        path = state / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (state / "users/bo/notebooks/empty").mkdir()
    (state / "users/bo/data.bin").chmod(0o640)
    # left out: caches, the kernels' connection files, links out of the folder, a fifo
    for name in ("users/ana-k/.cache/matplotlib/fontlist.json", "users/bo/.local/share/jupyter/runtime/kernel-1.json"):
        (state / name).parent.mkdir(parents=True, exist_ok=True)
        (state / name).write_text('{"key": "' + ADMIN_PASSWORD + '"}')
    (state / "users/bo/link-to-secret.txt").symlink_to(outside / "secret.txt")
    (state / "users/bo/link-to-outside").symlink_to(outside, target_is_directory=True)
    (state / "users/bo/link-to-admin-password").symlink_to(state / "admin-password")
    if hasattr(os, "mkfifo"):
        os.mkfifo(state / "users/ana-k/a-fifo")
    return want


def _extract(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")


def test_backup_restores_every_learner_file_byte_for_byte_and_nothing_else(tmp_path):
    state, outside = tmp_path / "hub", tmp_path / "outside"
    want = make_room(state, outside)
    made = write_backup(state, tmp_path / "backups", now=datetime.datetime(2026, 11, 24, 17, 5, 9))
    assert made.path == tmp_path / "backups" / "ampkit-room-20261124-170509.tar.gz"
    assert made.bytes == made.path.stat().st_size > 0 and made.learners == ["ana-k", "bo"]
    assert made.files == len(want) and not made.unreadable

    with tarfile.open(made.path) as tar:
        members = tar.getmembers()
    names = {m.name for m in members}
    assert all(n == "users" or n.startswith("users/") for n in names), names    # nothing outside users/
    assert {m.name for m in members if m.isfile()} == set(want)
    assert all(m.isfile() or m.isdir() for m in members)                          # no links, no fifo
    assert "users/bo/notebooks/empty" in names                                    # empty folders too

    restored = tmp_path / "restored"
    _extract(made.path, restored)
    for name, data in want.items():
        assert (restored / name).read_bytes() == data, name
    assert (restored / "users/bo/data.bin").stat().st_mode & 0o777 == 0o640      # modes kept

    # the hub's secrets, the file a link points to and the excluded files are nowhere in the archive's bytes
    with tarfile.open(made.path) as tar:
        blob = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    for secret in (ADMIN_PASSWORD.encode(), ROOM_PASSWORD.encode(), OUTSIDE_SECRET, b"PRIVATE KEY"):
        assert secret not in blob
    assert sorted(made.skipped) == sorted(["users/bo/link-to-secret.txt", "users/bo/link-to-outside",
                                           "users/bo/link-to-admin-password"]
                                          + (["users/ana-k/a-fifo"] if hasattr(os, "mkfifo") else []))
    summary = made.summary()
    assert str(made.path) in summary and "2 learners" in summary and "not in it" in summary


def test_learner_entries_leave_out_caches_and_kernel_connection_files(tmp_path):
    make_room(tmp_path / "hub", tmp_path / "outside")
    entries, _ = learner_entries(tmp_path / "hub")
    names = [n for n, _ in entries]
    assert not [n for n in names if "/.cache" in n or "/runtime" in n], names
    assert "users/bo/.local/share/jupyter" in names       # only the runtime folder itself is left out
    assert names.index("users/ana-k") < names.index("users/ana-k/notebooks/03_loss_scaling.ipynb")


def test_a_second_backup_in_the_same_second_gets_its_own_name(tmp_path):
    make_room(tmp_path / "hub", tmp_path / "outside")
    now = datetime.datetime(2026, 1, 2, 3, 4, 5)
    first = write_backup(tmp_path / "hub", tmp_path / "b", now=now)
    second = write_backup(tmp_path / "hub", tmp_path / "b", now=now)
    assert first.path.name == archive_name(now) and second.path.name == "ampkit-room-20260102-030405-2.tar.gz"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted([first.path.name, second.path.name])


def test_an_unreadable_file_is_reported_not_silently_dropped(tmp_path, monkeypatch, capsys):
    make_room(tmp_path / "hub", tmp_path / "outside")
    real_open = os.open

    def refuse(path, flags, *a, **kw):
        if str(path).endswith("data.bin"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(backup.os, "open", refuse)
    assert backup.main(["create", "--state", str(tmp_path / "hub"), "--to", str(tmp_path / "b")]) == 1
    out, err = capsys.readouterr()
    assert "users/bo/data.bin" in out and "NOT in the archive" in out and "some files were not backed up" in err


def test_no_room_is_a_clear_error(tmp_path, capsys):
    assert backup.main(["create", "--state", str(tmp_path / "nothing"), "--to", str(tmp_path / "b")]) == 2
    assert "no learners' folders to back up" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_is_room_and_rooms_in(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".cache" / "torchinductor").mkdir(parents=True)
    venv = repo / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib" / "jupyterhub.sqlite").write_text("")   # inside a venv: never searched
    assert rooms_in([repo / ".venv", repo / ".cache"], repo / ".cache" / "hub") == []
    make_room(repo / ".cache" / "hub", tmp_path / "outside")
    assert is_room(repo / ".cache" / "hub") and not is_room(repo / ".cache" / "torchinductor")
    assert rooms_in([repo / ".venv", repo / ".cache"], repo / ".cache" / "hub") == [repo / ".cache" / "hub"]
    # a room started with another HUB_STATE under a cleaned folder is found too, and one elsewhere is not in danger
    (repo / ".cache" / "rooms" / "tuesday").mkdir(parents=True)
    (repo / ".cache" / "rooms" / "tuesday" / "room-password").write_text("x")
    found = rooms_in([repo / ".cache", repo / "missing"], tmp_path / "elsewhere")
    assert sorted(found) == sorted([repo / ".cache" / "hub", repo / ".cache" / "rooms" / "tuesday"])
    assert rooms_in([repo / "artifacts"], repo / ".cache" / "hub") == []
    line = guard_message(found)
    assert "\n" not in line and "make hub-backup" in line and f"CONFIRM={CONFIRM_WORD}" in line


def test_reset_needs_the_word_and_a_stopped_hub(tmp_path):
    state = tmp_path / "hub"
    assert "no room here" in reset_problem(state, CONFIRM_WORD)
    make_room(state, tmp_path / "outside")
    assert f"make hub-reset CONFIRM={CONFIRM_WORD}" in reset_problem(state, "")
    assert "'yes' is not the word" in reset_problem(state, "yes")
    (state / "jupyterhub.pid").write_text(str(os.getpid()))        # a live process: the hub is running
    assert "still running" in reset_problem(state, CONFIRM_WORD)
    (state / "jupyterhub.pid").write_text("999999999")             # a stale pid file
    assert reset_problem(state, CONFIRM_WORD) is None
    (state / "jupyterhub.pid").write_text("1")                     # pid 1: running; as another user, a non-root
    assert backup.hub_pid(state) == 1                              # caller gets PermissionError: still running


def test_reset_backs_up_then_deletes(tmp_path, capsys):
    state = tmp_path / "hub"
    want = make_room(state, tmp_path / "outside")
    assert backup.main(["reset", "--state", str(state), "--to", str(tmp_path / "b")]) == 2
    assert state.is_dir()
    assert backup.main(["reset", "--state", str(state), "--to", str(tmp_path / "b"),
                        "--confirm", CONFIRM_WORD]) == 0
    assert not state.exists() and (tmp_path / "outside" / "secret.txt").read_bytes() == OUTSIDE_SECRET
    (archive,) = (tmp_path / "b").iterdir()
    _extract(archive, tmp_path / "restored")
    assert all((tmp_path / "restored" / n).read_bytes() == d for n, d in want.items())
    assert "deleted" in capsys.readouterr().out


# ---- make clean, make hub-backup, make hub-reset, run by make in a temporary copy of the Makefile ----

def _copy_kit(dest: Path) -> None:
    """What make needs to read the Makefile and run the room's tools: the Makefile, make/, ampkit's front file and
    ampkit/classroom (standard library only)."""
    shutil.copy(ROOT / "Makefile", dest / "Makefile")
    shutil.copytree(ROOT / "make", dest / "make")
    (dest / "ampkit").mkdir()
    for name in ("__init__.py", "_version.py"):
        shutil.copy(ROOT / "ampkit" / name, dest / "ampkit" / name)
    shutil.copytree(ROOT / "ampkit" / "classroom", dest / "ampkit" / "classroom",
                    ignore=shutil.ignore_patterns("__pycache__"))


def _make(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEFILES")}
    return subprocess.run(["make", "--no-print-directory", f"PYTHON={sys.executable}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_make_clean_with_a_room_loses_nothing_and_says_how_to_remove_it(tmp_path):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    kit = tmp_path / "kit"
    kit.mkdir()
    _copy_kit(kit)
    want = make_room(kit / ".cache" / "hub", tmp_path / "outside")
    (kit / ".cache" / "torchinductor").mkdir()
    (kit / ".cache" / "torchinductor" / "compiled.so").write_bytes(b"\x7fELF")
    (kit / ".venv" / "bin").mkdir(parents=True)
    (kit / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (kit / "artifacts").mkdir()
    before = _tree(kit / ".cache")

    out = _make(kit, "clean")
    assert out.returncode != 0
    refusal = [ln for ln in out.stderr.splitlines() if ln.startswith("make clean: refusing")]
    assert len(refusal) == 1 and "make hub-reset CONFIRM=delete-the-room" in refusal[0], out.stderr
    assert "rm -rf" not in out.stdout
    assert _tree(kit / ".cache") == before and (kit / ".venv" / "pyvenv.cfg").exists()   # nothing at all removed

    out = _make(kit, "hub-backup")
    assert out.returncode == 0, out.stderr
    (archive,) = (kit / "hub-backups").iterdir()
    assert str(Path("hub-backups") / archive.name) in out.stdout and "KiB" in out.stdout

    out = _make(kit, "hub-reset")          # without the word: refused, nothing deleted
    assert out.returncode != 0 and f"CONFIRM={CONFIRM_WORD}" in out.stderr and is_room(kit / ".cache" / "hub")
    out = _make(kit, "hub-reset", f"CONFIRM={CONFIRM_WORD}")
    assert out.returncode == 0, out.stderr
    assert not (kit / ".cache" / "hub").exists() and len(list((kit / "hub-backups").iterdir())) == 2

    out = _make(kit, "clean")              # no room left: the clean-up runs, and the backups stay
    assert out.returncode == 0, out.stderr
    assert not (kit / ".cache").exists() and not (kit / ".venv").exists() and not (kit / "artifacts").exists()
    for archive in (kit / "hub-backups").iterdir():
        _extract(archive, tmp_path / "restored" / archive.name)
        assert all((tmp_path / "restored" / archive.name / n).read_bytes() == d for n, d in want.items())
