"""`make frameworks` (make/frameworks.mk, issue #33) without installing anything: its pins agree with
constraints-frameworks.txt, the main venv and constraints.txt stay free of MindSpore and Paddle (`make test` and
`make lab` as light as before), the cross-checks are not collected by the main suite, and a platform with no wheel
gets one line and exit 0. The cross-checks themselves run in .venv-frameworks: `make test-frameworks`."""
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampkit._version import TORCH_TESTED

ROOT = Path(__file__).resolve().parents[1]
MK = (ROOT / "make" / "frameworks.mk").read_text()
_spec = importlib.util.spec_from_file_location("fwtools", ROOT / "tests_frameworks" / "fwtools.py")
fwtools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fwtools)


def _mk(var: str) -> str:
    match = re.search(rf"^{var} \?= (.+)$", MK, re.M)
    assert match, f"{var} not set in make/frameworks.mk"
    return match.group(1).strip()


def _pins(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in (ln.split("==") for ln in lines)}


def test_makefile_pins_agree_with_constraints_frameworks():
    pins = _pins(ROOT / "constraints-frameworks.txt")
    assert pins["mindspore"] == _mk("FW_MINDSPORE")
    assert pins["paddlepaddle"] == _mk("FW_PADDLE")
    assert pins["torch"] == TORCH_TESTED
    assert _mk("FW_NUMPY") == "numpy<2" and int(pins["numpy"].split(".")[0]) < 2
    for name in ("pytest", "nbval", "ipykernel"):       # the test extra and the kernel's package are pinned too
        assert name in pins
    assert all(re.fullmatch(r"[0-9][^\s+;]*", v) for v in pins.values())   # ==version, no local label


def test_the_wheel_table_knows_the_pinned_versions():
    assert _mk("FW_MINDSPORE") in fwtools.WHEELS["mindspore"]
    assert _mk("FW_PADDLE") in fwtools.WHEELS["paddlepaddle"]


def test_main_venv_and_constraints_have_no_framework():
    main = _pins(ROOT / "constraints.txt")
    assert not {"mindspore", "paddlepaddle", "paddlepaddle-gpu"} & set(main)
    for dist in ("mindspore", "paddlepaddle"):
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.distribution(dist)


def test_the_main_suite_does_not_collect_the_cross_checks():
    text = (ROOT / "pyproject.toml").read_text()
    testpaths = re.search(r"^testpaths = \[(.*)\]$", text, re.M).group(1)
    assert "tests_frameworks" not in testpaths and '"tests"' in testpaths


@pytest.mark.parametrize("python, system, machine, names", [
    ("3.11", "Darwin", "x86_64", "paddlepaddle 3.3.1 has no wheel for macOS on Intel"),
    ("3.11", "Linux", "aarch64", "paddlepaddle 3.3.1 has no wheel for Linux aarch64"),
    ("3.13", "Linux", "x86_64", "mindspore 2.10.0 has no wheel for Python 3.13"),
])
def test_no_wheel_is_one_line(python, system, machine, names):
    line = fwtools.reason(python, system, machine, "2.10.0", "3.3.1")
    assert names in line and "\n" not in line and line.startswith("make frameworks: skipped")


@pytest.mark.parametrize("python, system, machine", [("3.10", "Linux", "x86_64"), ("3.12", "Darwin", "arm64"),
                                                     ("3.11", "Windows", "AMD64")])
def test_a_platform_with_wheels_goes_ahead(python, system, machine):
    assert fwtools.reason(python, system, machine, "2.10.0", "3.3.1") == ""


def _make(*args: str) -> subprocess.CompletedProcess:
    if not shutil.which("make"):
        pytest.skip("make not installed")
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_install_order_and_pins(tmp_path):
    """torch first, then the frameworks with numpy<2, then the kit with its test extra: every pip with -c
    constraints-frameworks.txt (a dry run into a venv that does not exist)."""
    out = _make("-n", "frameworks-install", f"FW_VENV={tmp_path}/fw", f"VENV={tmp_path}/main")
    assert out.returncode == 0, out.stderr
    pips = [ln for ln in out.stdout.splitlines() if "-m pip install" in ln]
    assert len(pips) == 3 and all("-c constraints-frameworks.txt" in ln for ln in pips)
    assert f'"torch=={TORCH_TESTED}"' in pips[0]
    assert '"mindspore==2.10.0" "paddlepaddle==3.3.1" "numpy<2"' in pips[1]
    assert '-e ".[test]"' in pips[2]
    assert f"--prefix {tmp_path}/main --name ampkit-frameworks" in out.stdout
    assert '--display-name "ampkit + MindSpore + PaddlePaddle"' in out.stdout


def test_no_wheel_stops_make_frameworks_with_its_line_and_exit_0(tmp_path):
    """A Python the table has no wheel for (the version is faked by a wrapper script): one line, exit 0, no venv."""
    fake = tmp_path / "python3.13"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = tests_frameworks/fwtools.py ]; then\n"
                    f"  exec {sys.executable} -c 'import sys; sys.path.insert(0, \"tests_frameworks\"); import fwtools;"
                    f" print(fwtools.reason(\"3.13\", \"Linux\", \"x86_64\", \"2.10.0\", \"3.3.1\"))'\nfi\n"
                    f"exec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    for target in ("frameworks", "test-frameworks"):
        out = _make(target, f"FW_PYTHON={fake}", f"FW_VENV={tmp_path}/fw")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines() == [
            "make frameworks: skipped, mindspore 2.10.0 has no wheel for Python 3.13 (PyPI: Python 3.10-3.12); "
            "try FW_PYTHON=python3.12"]
    assert not (tmp_path / "fw").exists()


def test_torch_index_is_tried_once_and_pips_own_index_is_the_fallback(tmp_path):
    """#39: where PyTorch's CPU index is not reachable, pip retried it ~50 times before finding torch elsewhere.
    Now `make frameworks` asks it once (fwtools.py reachable, 10 s) and, if it does not answer, says so in one line
    and installs torch from pip's own index with no extra index; FW_TORCH_INDEX= skips the probe."""
    out = _make("-n", "frameworks-install", f"FW_VENV={tmp_path}/fw", f"VENV={tmp_path}/main",
                "FW_TORCH_INDEX=https://index.invalid/whl/cpu")
    torch_line = next(ln for ln in out.stdout.splitlines() if f'"torch=={TORCH_TESTED}"' in ln)
    probe = 'fwtools.py reachable "https://index.invalid/whl/cpu"; then idx="--extra-index-url https://index.invalid'
    assert probe in torch_line and "did not answer; torch from pip's own index" in torch_line
    assert "--extra-index-url" not in torch_line.split("then")[0]      # pip never gets the index before the probe
    plain = _make("-n", "frameworks-install", f"FW_VENV={tmp_path}/fw", f"VENV={tmp_path}/main", "FW_TORCH_INDEX=")
    torch_line = next(ln for ln in plain.stdout.splitlines() if f'"torch=={TORCH_TESTED}"' in ln)
    assert "reachable" not in torch_line and "--extra-index-url" not in torch_line


def test_reachable_answers_no_for_an_index_that_does_not_answer(tmp_path):
    (tmp_path / "torch").mkdir()
    assert fwtools.reachable(tmp_path.as_uri()) and not fwtools.reachable((tmp_path / "none").as_uri())
    assert not fwtools.reachable("http://127.0.0.1:9/simple", timeout=2)      # the discard port: refused at once


def test_notebook_09_opens_in_the_kernel_make_frameworks_installs():
    """`make lab` opens notebook 09 (both editions) in the kernel that has MindSpore and Paddle, not the default."""
    import json
    name = re.search(r"^FW_KERNEL := (.+)$", MK, re.M).group(1).strip()
    display = re.search(r"^FW_KERNEL_NAME := (.+)$", MK, re.M).group(1).strip()
    for nb in (ROOT / "notebooks" / "09_mindspore_and_paddle.ipynb",
               ROOT / "notebooks" / "zh_CN" / "09_mindspore_and_paddle.ipynb"):
        spec = json.loads(nb.read_text())["metadata"]["kernelspec"]
        assert (spec["name"], spec["display_name"]) == (name, display), nb
