"""`make test-gpu`: on a machine without a CUDA GPU (this one) it prints one line saying so and exits 2 before running
anything; tests/gpu is collected without a GPU yet kept out of a plain `pytest`; the expectations the GPU tests
compare against (tests/gpu/_gpu_expect.py: compute capability -> tensor cores -> fast dtype, fp8 matmuls) agree with
the README and with ampkit.hardware's rule, checked here on the CPU. Serves issue 21 ("Ready for the first GPU")."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ampkit.device import DeviceReport
from ampkit.formats import format_name
from ampkit.hardware import cuda_native_dtypes

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "tests" / "gpu"
VENV = Path(sys.prefix)
NO_GPU_LINE = "make test-gpu needs a CUDA GPU; this machine has none: torch.cuda.is_available() is False"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_t3_{name}", GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


expect = _load("_gpu_expect")
needs_cuda = _load("needs_cuda")


def _no_plugins() -> dict[str, str]:
    return {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _make(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`make ARGS` in a copy of the Makefile, with this test's venv and its install stamps never remade."""
    if not shutil.which("make"):
        pytest.skip("make not installed")
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py", "tests/gpu/needs_cuda.py",
                 *[f"make/{p.name}" for p in (ROOT / "make").glob("*.mk")]):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    stamps = [f"-o{VENV / '.ampkit-installed'}", f"-o{VENV / '.ampkit-test-installed'}"]
    # as from a shell, also when the suite itself runs under `make test` (a nested make says "make[1]: ***")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", f"VENV={VENV}", *stamps, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU: `make test-gpu` would run it all")
def test_without_a_gpu_make_test_gpu_says_so_in_one_line_and_exits_2(tmp_path):
    out = _make("test-gpu", tmp_path=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    ours = [line for line in (out.stdout + out.stderr).splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(ours) == 1 and ours[0].startswith(NO_GPU_LINE), ours      # one line, and nothing ran after it
    build = "yes" if torch.version.cuda else "no"
    assert f"(torch {torch.__version__}, CUDA build: {build})" in ours[0]
    if build == "no":
        assert "needs a CUDA build of torch" in ours[0] and "make test-gpu VENV=" in ours[0]
    assert "pytest" not in out.stdout + out.stderr and not (tmp_path / ".venv").exists()


def test_the_target_checks_for_cuda_before_it_runs_tests_gpu_and_every_notebook(tmp_path):
    out = _make("-n", "test-gpu", tmp_path=tmp_path)
    lines = out.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if line.endswith("python tests/gpu/needs_cuda.py"))
    run = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert check < run and lines[run].split("-m pytest")[1].split()[:2] == ["tests/gpu", "notebooks"]
    listed = _make(tmp_path=tmp_path).stdout
    assert re.search(r"^  make test-gpu +\S.*CUDA", listed, re.M)


def test_tests_gpu_is_collected_here_without_a_gpu():
    # with the project's own options (doctests, nbval's flags); only the plugin those flags need is loaded (faster)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "nbval", "--collect-only", "-q", "tests/gpu"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=_no_plugins())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = out.stdout.splitlines()
    modules = {i.split("::")[0] for i in ids if i.startswith("tests/gpu/test_")}
    assert modules == {f"tests/gpu/{p.name}" for p in GPU.glob("test_*.py")} and len(modules) >= 4
    assert any("scaled_mm_agrees_with_the_simulation" in i for i in ids)


def test_a_plain_pytest_leaves_tests_gpu_out(tmp_path):
    """The real pyproject's testpaths and norecursedirs on a tiny tree: `pytest` skips tests/gpu (no skip noise),
    `pytest tests/gpu` collects it."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "tests/gpu" in ini["norecursedirs"] and ".*" in ini["norecursedirs"]   # pytest's defaults kept too
    dirs = ", ".join(f'"{d}"' for d in ini["norecursedirs"])
    (tmp_path / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
                                             f'norecursedirs = [{dirs}]\n')
    (tmp_path / "tests" / "gpu").mkdir(parents=True)
    (tmp_path / "tests" / "test_cpu_x.py").write_text("def test_cpu(): pass\n")
    (tmp_path / "tests" / "gpu" / "test_gpu_x.py").write_text("def test_gpu(): pass\n")

    def collected(*args: str) -> list[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60, env=_no_plugins())
        return [line for line in out.stdout.splitlines() if "::" in line]

    assert collected() == ["tests/test_cpu_x.py::test_cpu"]
    assert collected("tests/gpu") == ["tests/gpu/test_gpu_x.py::test_gpu"]


def test_the_no_gpu_line_names_torch_and_its_build():
    cpu = needs_cuda.no_cuda_message("2.13.0+cpu", None)
    cuda = needs_cuda.no_cuda_message("2.13.0+cu128", "12.8")
    assert cpu.startswith(NO_GPU_LINE) and cuda.startswith(NO_GPU_LINE)
    assert "(torch 2.13.0+cpu, CUDA build: no)" in cpu and "needs a CUDA build of torch" in cpu
    assert "(torch 2.13.0+cu128, CUDA build: yes, CUDA 12.8)" in cuda and "CUDA build of torch" not in cuda
    assert "\n" not in cpu + cuda


def test_needs_cuda_exits_0_with_a_gpu_and_2_without(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert needs_cuda.main() == 0 and capsys.readouterr().err == ""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert needs_cuda.main() == needs_cuda.NO_GPU == 2
    assert capsys.readouterr().err.count("\n") == 1


# --- the expectations tests/gpu compares the GPU with ----------------------------------------------------------------
def test_the_table_is_the_readme_rule():
    readme = " ".join((ROOT / "README.md").read_text().split())
    for fact in ("fp16 tensor cores came with Volta (compute capability 7.0), bf16 ones with Ampere (8.0)",
                 "Pascal (6.x) have none", "Turing (7.5) has them for fp16 only"):
        assert fact in readme, fact
    t = expect.expected_tensor_cores
    assert t((6, 1)) == () and t((7, 0)) == ("float16",) and t((7, 5)) == ("float16",)
    assert t((8, 0)) == t((9, 0)) == t((12, 0)) == ("bfloat16", "float16")
    assert t((11, 0)) == t((10, 0)) and t((5, 2)) == ()     # not in the table: the nearest older family


@pytest.mark.parametrize("cap", sorted(expect.ARCHITECTURES) + [(5, 0), (11, 0), (13, 1)])
def test_ampkit_hardware_decides_as_the_table_says(cap):
    native, cores = cuda_native_dtypes(cap)
    assert tuple(sorted(format_name(d) for d in native)) == expect.expected_tensor_cores(cap)
    assert cores.startswith(f"sm_{cap[0]}{cap[1]}: ")
    rep = DeviceReport(torch.device("cuda"), "a GPU", (torch.float16, torch.bfloat16), native=native,
                       tensor_cores=cores)
    fast = expect.expected_fast_dtype(cap)
    assert (format_name(rep.fast_dtype) if rep.fast_dtype else None) == fast
    assert rep.default_dtype == (rep.fast_dtype or torch.bfloat16)


def test_scaled_mm_from_compute_capability_8_9():
    assert [expect.expected_scaled_mm(c) for c in [(8, 0), (8, 6), (8, 9), (9, 0), (12, 0)]] == [
        False, False, True, True, True]


@pytest.mark.parametrize("bad", [(8,), (8, 0, 1), ("8", 0), (8, -1), (8.0, 0)])
def test_a_bad_capability_is_a_value_error_naming_the_form(bad):
    with pytest.raises(ValueError, match=r"\(major, minor\)"):
        expect.expected_tensor_cores(bad)
