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
    # PyPI's Windows wheel lists the Linux CUDA wheels too (behind platform_system == "Linux"): it is a CPU build
    win = _wheel(pypi, "torch", "2.13.0", tag="cp311-cp311-win_amd64",
                 requires=['nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"'])
    assert offline.torch_build(win) == "cpu"


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
    # as from a shell: under `make test` the outer make's MAKELEVEL/MAKEFLAGS would add "make[1]: Entering ..." lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
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


# --- a mixed room: a wheelhouse per OS, CPU and Python, built here (ampkit.classroom.platforms) -------------------
from ampkit.classroom import platforms  # noqa: E402


def test_platform_names_pythons_and_folders():
    assert platforms.pip_platforms("win_amd64") == ["win_amd64"]
    assert platforms.pip_platforms("macosx_arm64")[-1] == "macosx_10_13_universal2"
    assert platforms.pip_platforms("manylinux_2_28_x86_64") == ["manylinux_2_28_x86_64"]  # a pip tag as it is
    for bad in ("win64", "windows", "", "linux_x86_64 ; rm -rf /"):
        with pytest.raises(ValueError, match="expected one of win_amd64, win_arm64, macosx_arm64"):
            platforms.pip_platforms(bad)
    assert platforms.check_python("3.12") == "3.12" and platforms.check_python("3.11.9") == "3.11.9"
    for bad in ("3.9", "311", "python3.11", "3", ""):
        with pytest.raises(ValueError, match="3.10 or newer, written like 3.11"):
            platforms.check_python(bad)
    assert platforms.default_folder("win_amd64", "3.11.9") == "wheelhouse-win_amd64-py3.11.9"
    win, mac, linux = (platforms.target_env(p, "3.11") for p in ("win_amd64", "macosx_arm64", "manylinux_aarch64"))
    assert (win["sys_platform"], win["os_name"], win["platform_system"]) == ("win32", "nt", "Windows")
    assert (mac["sys_platform"], mac["platform_machine"]) == ("darwin", "arm64")
    assert (linux["platform_system"], linux["platform_machine"]) == ("Linux", "aarch64")
    assert platforms.target_env("manylinux_x86_64", "3.12.4")["python_full_version"] == "3.12.4"


def test_download_command_asks_pip_for_the_target_without_dependencies():
    cmd = platforms.download_command("macosx_arm64", "3.12.3", "wh", ["numpy==2.4.6", "tqdm>=4.60"],
                                     constraints="constraints.txt", python_exe="py")
    assert cmd[:5] == ["py", "-m", "pip", "download", "--no-deps"] and "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.12.3" and cmd[cmd.index("--abi") + 1] == "cp312"
    assert cmd[cmd.index("--implementation") + 1] == "cp" and cmd[cmd.index("-c") + 1] == "constraints.txt"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"] == platforms.PLATFORMS["macosx_arm64"]
    assert cmd[-2:] == ["numpy==2.4.6", "tqdm>=4.60"] and cmd[cmd.index("-d") + 1] == "wh"
    assert "--index-url" not in cmd


def test_torch_comes_from_the_cpu_index_for_linux_x86_64_only():
    linux = platforms.torch_command("manylinux_x86_64", "3.11", "wh", "torch==2.13.0")
    assert linux[linux.index("--index-url") + 1] == platforms.TORCH_CPU_INDEX and linux[-1] == "torch==2.13.0"
    for other in ("win_amd64", "macosx_arm64", "manylinux_aarch64"):
        assert "--index-url" not in platforms.torch_command(other, "3.11", "wh", "torch==2.13.0")
    assert "--index-url" not in platforms.torch_command("manylinux_x86_64", "3.11", "wh", "torch", torch_index="")


def test_needed_reads_markers_for_the_target_not_for_this_machine():
    wheels = {"torch": ["filelock", 'triton==3.7.1; platform_system == "Linux" and python_version < "3.15"',
                        'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"', 'pyyaml; extra == "pyyaml"'],
              "ipython": ['colorama>=0.4.4; sys_platform == "win32"', 'pexpect>4.3; sys_platform != "win32"'],
              "jupyter-server": ["pywinpty>=2.0.1; os_name == 'nt'", "pytest>=7; extra == 'test'"],
              "filelock": [], "tomli-w": []}
    wanted = {"torch": set(), "ipython": set(), "jupyter-server": set()}
    win = platforms.needed(wheels, dict(wanted), platforms.target_env("win_amd64", "3.11"))
    assert win == {"colorama": "colorama>=0.4.4", "pywinpty": "pywinpty>=2.0.1"}
    linux = platforms.needed(wheels, dict(wanted), platforms.target_env("manylinux_x86_64", "3.11"))
    assert set(linux) == {"triton", "nvidia-nccl-cu13", "pexpect"}
    asked = {"jupyter-server": {"test"}}
    assert "pytest" in platforms.needed(wheels, asked, platforms.target_env("win_amd64", "3.11"))  # extras asked


def test_build_downloads_until_every_target_dependency_is_there(tmp_path):
    """build() with a fake pip that 'downloads' small wheels: torch first, then the requirements, then what their
    markers ask for on Windows, round after round; every command --no-deps; no Linux-only wheel comes in."""
    metadata = {"torch": ["filelock", 'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"'],
                "ipython": ['colorama; sys_platform == "win32"', "traitlets>=5"], "traitlets": ["tiny-dep"],
                "filelock": [], "colorama": [], "tiny-dep": []}
    calls = []

    def fake_run(cmd):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        for req in cmd[cmd.index("-d") + 2:]:
            if req.startswith("-") or req == "constraints.txt":
                continue
            name = re.split(r"[<>=!~\[;]", req)[0]
            _wheel(dest, name, "1.0", requires=metadata[name])
        return subprocess.CompletedProcess(cmd, 0)

    done = platforms.build("win_amd64", "3.11", tmp_path, ["torch==2.13.0", "ipython>=8"], torch="torch==2.13.0",
                           constraints="constraints.txt", run=fake_run)
    assert len(done) == len(calls) == 4 and all("--no-deps" in c for c in calls)
    assert calls[0][-1] == "torch==2.13.0" and calls[1][-1] == "ipython>=8"          # torch alone, first
    assert calls[2][-3:] == ["colorama", "filelock", "traitlets>=5"] and calls[3][-1] == "tiny-dep"  # round by round
    names = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.whl"))
    assert names == ["colorama", "filelock", "ipython", "tiny_dep", "torch", "traitlets"]  # no nvidia wheel

    def failing(cmd):
        return subprocess.CompletedProcess(cmd, 1)

    with pytest.raises(RuntimeError, match="pip could not download for win_amd64, Python 3.11"):
        platforms.build("win_amd64", "3.11", tmp_path / "x", ["tqdm"], run=failing)


def test_make_wheelhouse_for_another_platform_runs_the_kits_resolver(tmp_path):
    plan = _make_n(tmp_path, "wheelhouse", "PLATFORM=win_amd64", "PYVER=3.11.9")
    line = " ".join(plan.split("\\\n"))
    assert "-m ampkit.classroom.platforms build --platform \"win_amd64\" --python \"3.11.9\"" in line
    assert "-o wheelhouse-win_amd64-py3.11.9" in line and f'--torch "torch=={TORCH_TESTED}"' in line
    assert "--constraints constraints.txt" in line and "pip wheel" not in plan  # not this machine's wheels
    assert "--torch-index" not in line  # chosen per platform, not this machine's TORCH_INDEX
    mine = " ".join(_make_n(tmp_path, "wheelhouse", "PLATFORM=win_amd64", "PYVER=3.11", "WHEELHOUSE=win").split())
    assert "-o win " in mine


def test_platforms_cli_refuses_a_bad_platform_in_one_line(capsys):
    assert platforms.main(["plan", "--platform", "windows", "--python", "3.11"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("make wheelhouse: PLATFORM='windows': expected one of win_amd64")
    assert platforms.main(["plan", "--platform", "win_amd64", "--python", "3.11", "--torch", "torch==2.13.0"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.endswith("torch==2.13.0") and "--no-deps" in first and "numpy>=1.24" in second


# --- the hub with no network: make hub-install WHEELS=..., and Node.js >= 20 --------------------------------------
def test_make_hub_install_from_a_wheelhouse_uses_no_network(tmp_path):
    plan = _make_n(tmp_path, "-o", ".venv/.ampkit-installed", "hub-install", "WHEELS=wheelhouse")
    lines = plan.splitlines()
    assert lines[0].endswith("-m ampkit.classroom.hub node")  # Node.js checked before anything is installed
    pip = next(ln for ln in lines if '-e ".[hub]"' in ln)
    assert "install --no-index --find-links wheelhouse" in pip and "ampkit.classroom.offline pip wheelhouse" in pip
    npm = next(ln for ln in lines if ln.startswith("npm install"))
    assert f"--offline --cache {tmp_path}/wheelhouse/npm-cache" in npm and npm.endswith("configurable-http-proxy@5")
    online = _make_n(tmp_path, "-o", ".venv/.ampkit-installed", "hub-install")
    assert "--no-index" not in online and "--offline" not in online


def test_make_wheelhouse_with_the_hub_fills_an_npm_cache(tmp_path):
    plan = _make_n(tmp_path, "wheelhouse", "WHEELHOUSE_EXTRAS=hub")
    npm = next(ln for ln in plan.splitlines() if ln.startswith("npm install"))
    assert f"--cache {tmp_path}/wheelhouse/npm-cache" in npm and "configurable-http-proxy@5" in npm
    assert "--extra hub" in plan and "npm" not in _make_n(tmp_path, "wheelhouse")


def test_node_older_than_20_is_refused_in_one_line():
    from ampkit.classroom import hub

    assert hub.NODE_MIN == 20
    assert hub.node_problem("v20.0.0") is None and hub.node_problem("v22.12.0\n") is None
    for found, says in (("v18.19.1", "this machine has v18.19.1"), (None, "node was not found"),
                        ("weird", "this machine has weird")):
        msg = hub.node_problem(found)
        assert "\n" not in msg and "needs Node.js >= 20" in msg and says in msg and "make hub-install" in msg


def test_the_guide_gives_the_install_lines_for_sh_and_powershell(tmp_path):
    """The instructor guide's offline install by hand: the same pip options in both shells, and the PowerShell block
    names the folder that `make wheelhouse PLATFORM=win_amd64 PYVER=3.11.9` makes."""
    guide = (ROOT / "docs" / "instructor-guide.md").read_text()
    sh = re.search(r"```sh\n# Linux, macOS\n(.*?)```", guide, re.S).group(1)
    ps = re.search(r"```powershell\n(.*?)```", guide, re.S).group(1)
    assert "pip install --no-index --find-links wheelhouse -r wheelhouse/requirements.txt -e ." in sh
    folder = platforms.default_folder("win_amd64", "3.11.9")
    assert f"-m pip install --no-index --find-links {folder} -r {folder}\\requirements.txt -e ." in ps
    assert ".venv\\Scripts\\python" in ps and "py -3.11 -m venv .venv" in ps
    plan = _make_n(tmp_path, "wheelhouse", "PLATFORM=win_amd64", "PYVER=3.11.9")
    assert f"-o {folder} " in plan
