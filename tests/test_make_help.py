"""`make` with no target prints a short help: every target of the Makefile and make/*.mk, one line each, generated
from the `## ` comment on its line (so it cannot go stale). Serves every notebook's set-up (README)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy(tmp_path) -> Path:
    if not shutil.which("make"):
        pytest.skip("make not installed")
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py",
                 *[f"make/{p.name}" for p in (ROOT / "make").glob("*.mk")]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _phony(root: Path) -> set[str]:
    names = set()
    for path in [root / "Makefile", *sorted((root / "make").glob("*.mk"))]:
        for line in path.read_text().splitlines():
            if line.startswith(".PHONY:"):
                names.update(line.split(":", 1)[1].split())
    return names


def _help(root: Path) -> tuple[str, dict[str, str]]:
    out = subprocess.run(["make", "--no-print-directory"], cwd=root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = dict(re.findall(r"^  make (\S+) +(.+)$", out.stdout, re.M))
    return out.stdout, listed


def test_make_alone_lists_every_phony_target_once_with_a_line_each(tmp_path):
    root = _copy(tmp_path)
    text, listed = _help(root)
    phony = _phony(root)
    assert {"lab", "test", "lock", "wheelhouse", "hub", "present", "help"} <= phony
    assert sorted(phony - set(listed)) == [], "a .PHONY target lacks its `## ` comment"
    assert len(re.findall(r"^  make ", text, re.M)) == len(listed)  # once each
    assert all(len(line) <= 120 for line in text.splitlines()) and all(listed.values())
    assert not (root / ".venv").exists()  # help checks nothing and installs nothing


def test_a_planted_target_without_a_comment_is_caught(tmp_path):
    root = _copy(tmp_path)
    with open(root / "make" / "workshop.mk", "a") as f:
        f.write("\n.PHONY: secret\nsecret:\n\t@true\n")
    _, listed = _help(root)
    assert sorted(_phony(root) - set(listed)) == ["secret"]
