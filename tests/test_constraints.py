"""constraints.txt (ampkit/classroom/lock.py, `make lock`): it pins every package the kit installs, with ==, and
every pip install the Makefile runs passes it, except `make test LATEST=1`, which tries the newest versions in a venv
of its own. Serves the install of every notebook (README, "For developers": the upgrade procedure)."""
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampkit._version import TORCH_TESTED
from ampkit.classroom.lock import constraint_lines

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s+;]*)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> dict[str, str]:
    """name -> version of every line of a constraints file; a line that is neither a comment nor `name==version`
    (no local label such as +cpu) fails the test."""
    pins = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"constraints.txt: not an exact pin without a local label: {line!r}"
        pins[_norm(match.group(1))] = match.group(2)
    return pins


def _installed_requirements() -> list[str]:
    """The names of pyproject's runtime dependencies and of every extra, those installed in this venv."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    # a requirement whose marker leaves it out of this Python (tomli below 3.11) is not this venv's to pin, even
    # where some other test has put a copy of it on sys.path
    names = {_norm(r.name) for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})}
    out = []
    for name in sorted(names):
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra not installed here (the hub's, or tomli on Python 3.11+): a missing pin floats
        out.append(name)
    return out


def test_constraints_pin_every_installed_dependency_and_extra_exactly():
    pins = _pins((ROOT / "constraints.txt").read_text())
    installed = _installed_requirements()
    assert {"torch", "numpy", "jupyterlab", "pytest", "nbval", "ruff", "playwright"} <= set(installed)
    missing = [name for name in installed if name not in pins]
    assert not missing, f"constraints.txt lacks {missing}: run `make lock` in the venv where `make test` passed"
    assert pins["torch"] == TORCH_TESTED  # 2.13.0, no +cpu: the same line serves PyPI's wheel on macOS/Windows
    assert "ampkit" not in pins  # the kit itself is never pinned (an editable install of this checkout)


def test_a_planted_loose_or_missing_pin_fails():
    with pytest.raises(AssertionError, match="not an exact pin"):
        _pins("numpy>=1.24\n")
    with pytest.raises(AssertionError, match="not an exact pin"):
        _pins("torch==2.13.0+cpu\n")
    assert "numpy" not in _pins("# header\ntorch==2.13.0\n")


def test_lock_drops_local_labels_and_sorts_by_name():
    assert constraint_lines("torch==2.13.0+cpu\nargon2-cffi-bindings==1\nargon2-cffi==2\n") == [
        "argon2-cffi==2", "argon2-cffi-bindings==1", "torch==2.13.0"]
    with pytest.raises(ValueError, match="not pinned by version"):
        constraint_lines("-e git+https://example.org/x.git#egg=x\n")


def _make_n(tmp_path, *args) -> str:
    if not shutil.which("make"):
        pytest.skip("make not installed")
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py",
                 *[f"make/{p.name}" for p in (ROOT / "make").glob("*.mk")]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    out = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _pip_lines(plan: str) -> list[str]:
    return [line for line in plan.splitlines() if re.search(r"pip (install|wheel)|offline pip", line)]


@pytest.mark.parametrize("target", [("install",), ("test",), ("wheelhouse",), ("hub-install",),
                                    ("test", "WHEELS=wheelhouse")])
def test_every_pip_install_of_the_makefile_passes_the_constraints(tmp_path, target):
    lines = _pip_lines(_make_n(tmp_path, *target))
    assert lines, f"make -n {' '.join(target)} runs no pip install"
    for line in lines:
        assert "-c constraints.txt" in line, f"make {' '.join(target)}: unconstrained: {line}"
        assert "--upgrade" not in line and ".venv-latest" not in line


def test_a_learners_own_torch_is_installed_with_the_other_pins_only(tmp_path):
    plan = _make_n(tmp_path, "install", "TORCH=")
    assert "grep -v '^torch==' constraints.txt > .venv/constraints-own-torch.txt" in plan
    assert all("-c .venv/constraints-own-torch.txt" in line for line in _pip_lines(plan))


def test_make_test_latest_uses_its_own_venv_and_no_constraints(tmp_path):
    plan = _make_n(tmp_path, "test", "LATEST=1")
    lines = _pip_lines(plan)
    assert len(lines) >= 2 and all(".venv-latest/bin/python -m pip install" in line for line in lines)
    assert all("--upgrade" in line and "-c " not in line for line in lines)
    assert ".venv-latest/bin/ruff check" in plan and ".venv-latest/bin/python -m pytest" in plan
    assert ".venv/" not in plan.replace(".venv-latest/", "")
    assert ".venv-latest/" in (ROOT / ".gitignore").read_text().split()


def test_make_lock_writes_the_file_from_the_chosen_venv(tmp_path):
    assert ".venv/bin/python -m ampkit.classroom.lock -o constraints.txt" in _make_n(tmp_path, "lock")
    assert ".venv-latest/bin/python -m ampkit.classroom.lock" in _make_n(tmp_path, "lock", "LATEST=1")
    readme = (ROOT / "README.md").read_text()
    assert "make test LATEST=1" in readme and "make lock LATEST=1" in readme  # the upgrade procedure
