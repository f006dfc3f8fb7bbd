"""environment.yml and pyproject.toml name the same packages; the Makefile, CI and README agree."""
import re
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    """The conda alternative to `make lab`: the runtime dependencies, none of the extras."""
    project = _pyproject()["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = set()
    pip_entries = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip_entries += dep["pip"]
            continue
        name = _name(dep)
        if name not in ("python", "pip"):
            conda.add(CONDA_NAMES.get(name, name))
    assert conda == wanted
    assert "-e ." in pip_entries


def test_python_floor_agrees():
    assert _pyproject()["project"]["requires-python"] == ">=3.10"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python>=3.10" in env["dependencies"]


def test_torch_range_floor_is_the_tested_release():
    from ampkit._version import TORCH_TESTED

    deps = _pyproject()["project"]["dependencies"]
    torch_req = next(r for r in deps if _name(r) == "torch")
    assert torch_req == f"torch>={'.'.join(TORCH_TESTED.split('.')[:2])}"  # a range, its floor the tested release
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"pytorch>={'.'.join(TORCH_TESTED.split('.')[:2])}" in env["dependencies"]


def _make_dry_run(tmp_path, *args):
    import shutil
    import subprocess

    if not shutil.which("make"):
        import pytest
        pytest.skip("make not installed")
    (tmp_path / "ampkit").mkdir(exist_ok=True)
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "make", tmp_path / "make", dirs_exist_ok=True)  # the Makefile includes make/*.mk
    shutil.copytree(ROOT / "tests" / "js", tmp_path / "tests" / "js", dirs_exist_ok=True)  # make/jscheck.mk's lock
    out = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_installs_the_tested_torch_first(tmp_path):
    from ampkit._version import TORCH_TESTED

    plan = _make_dry_run(tmp_path, "install")
    torch_line = f'pip install -q -c constraints.txt "torch=={TORCH_TESTED}"'
    assert torch_line in plan and plan.index(torch_line) < plan.index("pip install -q -c constraints.txt -e .")
    own = _make_dry_run(tmp_path, "install", "TORCH=")  # a learner's own torch: not installed, nor pinned
    assert '"torch' not in own and "grep -v '^torch==' constraints.txt" in own


def test_make_lab_installs_the_runtime_and_make_test_the_four_extras(tmp_path):
    extras = _pyproject()["project"]["optional-dependencies"]
    assert {"test", "browser", "lint", "site"} <= set(extras)
    assert "ruff" in map(_name, extras["lint"]) and "playwright" in map(_name, extras["browser"])
    assert not {"ruff", "playwright", "pytest"} & {_name(r) for r in _pyproject()["project"]["dependencies"]}
    lab = _make_dry_run(tmp_path, "lab")
    assert "pip install -q -c constraints.txt -e .\n" in lab and ".[" not in lab   # no extra for a learner
    test = _make_dry_run(tmp_path, "test")
    assert 'pip install -q -c constraints.txt -e ".[test,browser,lint,site]"' in test


def test_make_test_lints_then_runs_pytest(tmp_path):
    plan = _make_dry_run(tmp_path, "test")
    assert plan.index("ruff check") < plan.index("-m pytest")
    # the views' JavaScript type-checked first, by the tsc npm ci installed from the lock (make/jscheck.mk)
    assert plan.index("npm ci") < plan.index("tests/js/typecheck.py") < plan.index("ruff check")


def test_one_version():
    import ampkit
    from ampkit import _version

    assert ampkit.__version__ == _version.__version__
    assert "version" in _pyproject()["project"]["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ampkit._version.__version__"}


def test_ci_calls_make_test_and_readme_opens_with_the_two_commands():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    head = (ROOT / "README.md").read_text()[:1500]
    assert "make lab" in head and "make test" in head


def test_pytest_config_runs_notebooks_with_nbval():
    opts = _pyproject()["tool"]["pytest"]["ini_options"]
    assert "notebooks" in opts["testpaths"]
    assert "--nbval-lax" in opts["addopts"] and "--nbval-sanitize-with" in opts["addopts"]
    assert "--nbval-cell-timeout" in opts["addopts"]
    assert "--doctest-modules" in opts["addopts"] and "ampkit" in opts["testpaths"]


def test_make_refuses_old_python_with_one_clear_line(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("make"):
        import pytest
        pytest.skip("make not installed")
    fake = tmp_path / "python3.9"
    fake.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Python 3.9.2"; exit 0; fi\nexit 1\n')
    fake.chmod(0o755)
    (tmp_path / "ampkit").mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "make", tmp_path / "make", dirs_exist_ok=True)  # the Makefile includes make/*.mk
    shutil.copytree(ROOT / "tests" / "js", tmp_path / "tests" / "js", dirs_exist_ok=True)  # make/jscheck.mk's lock
    out = subprocess.run(["make", f"PYTHON={fake}", "test"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "ampkit needs Python >= 3.10" in out.stdout and "Python 3.9.2" in out.stdout
    assert not (tmp_path / ".venv").exists()  # stopped before creating anything


def test_every_file_of_the_package_that_is_not_python_ships_in_the_wheel():
    """A wheel holds the package's .py files and only the other files package-data names: a view's ES module left
    out would draw nothing in a learner's image installed from the wheelhouse."""
    import fnmatch
    import subprocess

    globs = _pyproject()["tool"]["setuptools"]["package-data"]["ampkit"]
    tracked = subprocess.run(["git", "ls-files", "ampkit"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    others = [f.removeprefix("ampkit/") for f in tracked if not f.endswith(".py")]
    assert any(f.startswith("widgets/js/") for f in others)
    missing = [f for f in others if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missing, f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"
