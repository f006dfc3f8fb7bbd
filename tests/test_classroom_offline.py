"""The offline room (ampkit/classroom/offline.py, make/offline.mk) and the learner image's postBuild: cheap checks.

The heavy proofs are scripts, not tests: benchmarks/offline_install.py (wheelhouse, fresh venv with no index, the
notebook tests) and benchmarks/learner_image_check.py (the image's install steps in a fresh venv).
"""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from ampkit._version import TORCH_TESTED
from ampkit.classroom import offline

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text()
# pip 23's own words when a requirement has no wheel in the --find-links folder (as run by the test below)
PIP_MISSING = ("ERROR: Could not find a version that satisfies the requirement nbval>=0.11 (from ampkit[test]) "
               "(from versions: none)\nERROR: No matching distribution found for nbval>=0.11\n")
HERE = {"python": "3.11", "platform": "linux-x86_64"}


def _name(req):
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


# --- the wheelhouse's requirements ------------------------------------------------------------------------------
def test_requirements_cover_runtime_test_and_build_backend_with_torch_pinned():
    project = tomllib.loads(PYPROJECT)
    reqs = offline.requirements(PYPROJECT, f"torch=={TORCH_TESTED}")
    wanted = (project["project"]["dependencies"] + project["project"]["optional-dependencies"]["test"]
              + project["build-system"]["requires"])
    assert {_name(r) for r in reqs} == {_name(r) for r in wanted}
    assert f"torch=={TORCH_TESTED}" in reqs and not any(r.startswith("torch>") for r in reqs)
    assert any(r.startswith("setuptools") for r in reqs)  # the editable install's build backend, offline
    assert "tomli>=2.0" in reqs  # no marker: the learner image (conda, no markers) installs it on every Python
    assert "torch>=2.13" in offline.requirements(PYPROJECT, "")  # make wheelhouse TORCH=: pyproject's range


def test_requirements_refuse_a_pin_that_is_not_torch_and_an_unknown_extra():
    with pytest.raises(ValueError, match="torch=="):
        offline.requirements(PYPROJECT, "numpy==2.0")
    with pytest.raises(ValueError, match="no extra 'nope'; its extras: .*test"):
        offline.requirements(PYPROJECT, "", ("test", "nope"))


def test_requirements_with_another_extra_add_its_packages():
    optional = tomllib.loads(PYPROJECT)["project"]["optional-dependencies"]
    other = sorted(set(optional) - {"test"})
    if not other:
        pytest.skip("pyproject has only the test extra")
    reqs = offline.requirements(PYPROJECT, "", ("test", other[0]))
    assert set(optional[other[0]]) <= set(reqs) and set(offline.requirements(PYPROJECT)) < set(reqs)


def test_toml_fallback_reads_the_same_lists_as_tomllib():
    project = tomllib.loads(PYPROJECT)
    assert offline._toml_array(PYPROJECT, "project", "dependencies") == project["project"]["dependencies"]
    assert (offline._toml_array(PYPROJECT, "project.optional-dependencies", "test")
            == project["project"]["optional-dependencies"]["test"])
    assert offline._toml_array(PYPROJECT, "build-system", "requires") == project["build-system"]["requires"]
    for extra, reqs in project["project"]["optional-dependencies"].items():  # arrays with trailing comments too
        assert offline._toml_array(PYPROJECT, "project.optional-dependencies", extra) == reqs
    text = '[a]\nx = [\n  "p>=1",  # note "q"\n  "r; python_version < \'3.11\'",\n]\n[b]\nx = ["s"]\n'
    assert offline._toml_array(text, "a", "x") == ["p>=1", "r; python_version < '3.11'"]
    assert offline._toml_array(text, "c", "x") == []


def test_requirements_text_names_python_and_platform():
    text = offline.requirements_text(["torch==2.13.0", "numpy>=1.24"], HERE)
    assert "python 3.11, linux-x86_64" in text.splitlines()[0]
    assert [line for line in text.splitlines() if not line.startswith("#")] == ["torch==2.13.0", "numpy>=1.24"]


# --- pip's failure -> the kit's one line --------------------------------------------------------------------------
def test_index_args_and_bad_input():
    assert offline.index_args("wheelhouse") == ["--no-index", "--find-links", "wheelhouse"]
    with pytest.raises(ValueError, match="wheelhouse"):
        offline.index_args(" ")


def test_missing_requirements_from_pip_errors():
    assert offline.missing_requirements(PIP_MISSING) == ["nbval>=0.11"]
    assert offline.missing_requirements("Successfully installed x-1.0") == []


def test_hint_names_the_wheel_the_platform_and_the_command():
    line = offline.hint(PIP_MISSING, "wheelhouse", HERE)
    assert "\n" not in line
    assert "wheelhouse/ lacks a wheel for nbval>=0.11" in line and "python 3.11, linux-x86_64" in line
    assert "`make wheelhouse`" in line and "made for" not in line
    other = offline.hint(PIP_MISSING, "wheelhouse", HERE, {"python": "3.12", "platform": "macosx-14.0-arm64"})
    assert "made for python 3.12, macosx-14.0-arm64" in other
    assert offline.hint("ERROR: some other failure", "wheelhouse", HERE) is None
    old_linux = {**HERE, "glibc": "2.31"}
    newer = offline.hint(PIP_MISSING, "wheelhouse", old_linux, {**HERE, "glibc_floor": {"glibc": "2.34"}})
    assert "its wheels need glibc >= 2.34, this machine has 2.31" in newer
    assert "glibc" not in offline.hint(PIP_MISSING, "wheelhouse", {**HERE, "glibc": "2.36"},
                                       {**HERE, "glibc_floor": {"glibc": "2.34"}})


def test_hint_for_a_wheelhouse_folder_that_is_not_there():
    pip_says = ("WARNING: Location 'nowhere' is ignored: it is either a non-existing path or lacks a specific "
                "scheme.\n" + PIP_MISSING)
    line = offline.hint(pip_says, "nowhere", HERE)
    assert line.startswith("ampkit: WHEELS=nowhere: no such folder") and "`make wheelhouse`" in line


# --- tiny wheels, for the manifest and a real pip run -------------------------------------------------------------
def _wheel(folder: Path, name: str, version: str = "1.0", requires=(), tag: str = "py3-none-any") -> Path:
    """A minimal valid wheel (one module, METADATA, WHEEL, RECORD)."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {f"{name.replace('-', '_')}.py": "VALUE = 1\n",
             f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
                 name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)),
             f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record + [f"{dist}.dist-info/RECORD,,"]) + "\n"
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_, text in files.items():
            zf.writestr(name_, text)
    return path


def test_manifest_counts_wheels_and_tells_cpu_from_cuda_torch(tmp_path):
    _wheel(tmp_path, "tqdm", "4.70.1")
    cpu = _wheel(tmp_path, "torch", "2.13.0+cpu", tag="cp311-cp311-manylinux_2_28_x86_64")
    (tmp_path / "oddity-1.0.tar.gz").write_bytes(b"sdist")
    m = offline.manifest(tmp_path, HERE)
    assert m["n_wheels"] == 2 and m["source_archives"] == ["oddity-1.0.tar.gz"] and m["made_for"] == HERE
    assert m["torch"] == [{"file": cpu.name, "build": "cpu"}]
    assert m["glibc_floor"] == {"glibc": "2.28", "set_by": cpu.name}  # learners' Linux needs glibc >= 2.28
    assert offline.glibc_floor(["x-1-py3-none-any.whl"]) is None
    assert offline.glibc_floor(["y-1-cp311-cp311-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
                                "z-1-cp311-cp311-manylinux2014_x86_64.whl"])[0] == "2.17"
    pypi = tmp_path / "pypi"
    pypi.mkdir()
    assert offline.torch_build(_wheel(pypi, "torch", "2.13.0", requires=["nvidia-cublas==13.1.1.3"])) == "cuda"
    assert offline.torch_build(_wheel(pypi, "torch", "2.12.0")) == "cpu"
    assert offline.torch_build(pypi / "torch-2.13.0+cu126-cp311-cp311-linux_x86_64.whl") == "cuda"  # by name only


def _isolated_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", https_proxy="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9")
    return env


def test_a_wheelhouse_missing_a_wheel_shows_pips_error_and_the_hint(tmp_path):
    """For real: pip install --no-index from a tiny wheelhouse into a tmp venv, first without a dependency's wheel
    (pip's error + the kit's line), then with it (installs)."""
    wheels, venv = tmp_path / "wheelhouse", tmp_path / "venv"
    wheels.mkdir()
    _wheel(wheels, "ampkit-demo", requires=["ampkit-demo-dep>=1"])
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    cmd = [sys.executable, "-m", "ampkit.classroom.offline", "pip", str(wheels),
           "--python", str(venv / "bin" / "python"), "install", *offline.index_args(str(wheels)), "ampkit-demo"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=_isolated_env())
    assert out.returncode != 0
    assert "No matching distribution found for ampkit-demo-dep>=1" in out.stderr  # pip's own error, shown
    hints = [line for line in out.stderr.splitlines() if line.startswith("ampkit: ")]
    assert len(hints) == 1 and "lacks a wheel for ampkit-demo-dep>=1" in hints[0] and "make wheelhouse" in hints[0]
    _wheel(wheels, "ampkit-demo-dep", "1.2")
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=_isolated_env())
    assert out.returncode == 0, out.stderr
    assert "ampkit:" not in out.stderr
    assert list(venv.glob("lib/python*/site-packages/ampkit_demo_dep-1.2.dist-info"))


# --- make targets (make -n) ---------------------------------------------------------------------------------------
def _make_n(tmp_path, *args):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py", *[f"make/{p.name}" for p in
                                                                        (ROOT / "make").glob("*.mk")]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    out = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_wheelhouse_gets_the_cpu_torch_first_then_everything_else(tmp_path):
    plan = _make_n(tmp_path, "wheelhouse")
    torch_line = next(line for line in plan.splitlines() if "--no-deps" in line)
    assert f'"torch=={TORCH_TESTED}"' in plan and "pip wheel" in torch_line
    if os.uname().sysname == "Linux":
        assert "--index-url https://download.pytorch.org/whl/cpu" in plan
    rest = plan.index("-r wheelhouse/requirements.txt")
    assert plan.index("--no-deps") < rest < plan.index("ampkit.classroom.offline manifest wheelhouse")
    assert "--find-links wheelhouse" in plan[plan.rfind("\n", 0, rest):rest]  # keeps the torch it has
    assert "--index-url" not in _make_n(tmp_path, "wheelhouse", "TORCH_INDEX=")
    assert "--no-deps" not in _make_n(tmp_path, "wheelhouse", "TORCH=")  # a learner's own torch: pyproject's range


def test_make_install_from_a_wheelhouse_uses_no_index_on_both_pip_lines(tmp_path):
    plan = _make_n(tmp_path, "install", "WHEELS=wheelhouse", "VENV=v")
    lines = [line for line in plan.splitlines() if "pip" in line and "install" in line]
    assert len(lines) == 2 and all("install --no-index --find-links wheelhouse" in line for line in lines)
    assert all("-m ampkit.classroom.offline pip wheelhouse" in line for line in lines)  # the hint on failure
    assert "--no-index" not in _make_n(tmp_path, "install", "VENV=v")  # without WHEELS: the network, as before


# --- the learner image (repo2docker layout) -----------------------------------------------------------------------
def _env_yml():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def test_postbuild_is_an_executable_bash_script_that_stops_on_error_and_warms_up():
    post = ROOT / "postBuild"
    assert os.access(post, os.X_OK), "repo2docker runs postBuild as a program: chmod +x postBuild"
    lines = [line.strip() for line in post.read_text().splitlines()]
    assert lines[0] == "#!/bin/bash"
    commands = [line for line in lines[1:] if line and not line.startswith("#")]
    assert commands[0].startswith("set -e")  # repo2docker does not stop on an error by itself
    assert "python -m ampkit warmup" in commands


def test_no_binder_folder_hides_the_root_files():
    assert not (ROOT / "binder").exists() and not (ROOT / ".binder").exists()
    assert (ROOT / "environment.yml").exists() and (ROOT / "postBuild").exists()


def test_environment_yml_provides_what_postbuild_runs():
    conda, pip = offline.conda_to_pip(_env_yml()["dependencies"])
    provided = {_name(r) for r in conda} | ({"ampkit", "torch"} if "-e ." in pip else set())
    modules = re.findall(r"python -m ([A-Za-z_][\w.]*)", (ROOT / "postBuild").read_text())
    assert modules
    for module in modules:
        assert _name(module.split(".")[0]) in provided, f"postBuild runs {module}; environment.yml lacks it"
    assert "torch" in {_name(r) for r in conda}  # the warmup compiles with torch


def test_image_steps_follow_environment_yml():
    steps = offline.image_steps(_env_yml()["dependencies"], "py", "wh")
    assert [name for name, _ in steps][-1] == "postBuild"
    conda_cmd, pip_cmd = steps[0][1], steps[1][1]
    assert conda_cmd[:6] == ["py", "-m", "pip", "install", "--no-index", "--find-links"]
    assert any(a.startswith("torch>=") for a in conda_cmd) and not any(a.startswith("pytorch") for a in conda_cmd)
    assert pip_cmd[-2:] == ["-e", "."]
    assert "--no-index" not in offline.image_steps(_env_yml()["dependencies"], "py")[0][1]


def test_results_json_when_present_has_the_agreed_keys():
    for name, keys in {"offline_install.json": {"date", "host", "command", "platform", "wheelhouse_mib", "n_wheels",
                                                "download_s", "install_s", "test_s", "test_summary", "tests_run"},
                       "learner_image.json": {"date", "host", "command", "steps", "ok"}}.items():
        path = ROOT / "benchmarks" / "results" / name
        if path.exists():
            data = json.loads(path.read_text())
            assert keys <= set(data), f"{name} lacks {keys - set(data)}"
