import re
import subprocess
import sys

import pytest

from ampkit import doctor


def test_python_check():
    assert doctor.check_python((3, 11, 7)).status == "OK"
    bad = doctor.check_python((3, 9, 1))
    assert bad.status == "FAIL" and "need >= 3.10" in bad.detail


def test_missing_required_package_fails_with_fix():
    c = doctor.check_package("surely_not_a_module_xyz", "surely-not-a-dist", "1.0")
    assert c.status == "FAIL" and c.required
    assert "make lab" in c.line()


def test_missing_optional_package_warns():
    c = doctor.check_package("surely_not_a_module_xyz", "surely-not-a-dist", "1.0", required=False)
    assert c.status == "WARN" and not c.required


def test_too_old_package_fails():
    c = doctor.check_package("torch", "torch", "999.0")
    assert c.status == "FAIL" and "too old" in c.detail


def test_widgets_extension_missing_is_explained(monkeypatch, tmp_path):
    import jupyter_core.paths

    monkeypatch.setattr(jupyter_core.paths, "jupyter_path", lambda *a: [str(tmp_path)])
    c = doctor.check_widgets_extension()
    assert c.status == "FAIL"
    assert "still picture" in c.fix and "jupyterlab_widgets" in c.fix


def test_version_tuple():
    assert doctor._version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert doctor._version_tuple("8.1.9rc1") == (8, 1, 9)
    assert doctor._version_tuple("2.4") < doctor._version_tuple("2.13")


def test_doctor_cli_all_ok_in_the_kit_env():
    out = subprocess.run([sys.executable, "-m", "ampkit", "doctor"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[FAIL]" not in out.stdout
    for name in ("python", "torch", "ipywidgets", "JupyterLab widgets extension", "matplotlib", "nbval", "device",
                 "autocast dtypes"):
        assert f"[ OK ] {name}" in out.stdout


def test_doctor_cli_fails_when_required_missing(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "check_widgets_extension",
                        lambda: doctor.Check("JupyterLab widgets extension", "FAIL", "missing", True, "install it"))
    monkeypatch.setattr(doctor, "check_device", lambda probe=True: [])
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] JupyterLab widgets extension" in out and "make lab" in out


def test_cli_usage():
    out = subprocess.run([sys.executable, "-m", "ampkit", "nonsense"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "doctor" in out.stderr


# --- device lines: decided from hardware (native), measured as explanation; fake reports stand in for a GPU -----

import torch  # noqa: E402

from ampkit.device import DeviceReport, Ratio  # noqa: E402
from ampkit.hardware import cuda_native_dtypes  # noqa: E402

BF16, FP16 = torch.bfloat16, torch.float16
NO_FLAGS = {"avx512_bf16": False, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False}


def _lines(checks):
    return {c.name: c for c in checks}


def test_device_lines_on_a_cpu_without_bf16_instructions():
    rep = DeviceReport(torch.device("cpu"), "Old Xeon", (FP16, BF16), {FP16: 0.02, BF16: 0.25}, 256, native={},
                       ratios={FP16: Ratio(0.02, 0.0125, 0.025, 5), BF16: Ratio(0.25, 0.2, 0.5, 5)})
    c = _lines(doctor.check_device(report=rep, capabilities=NO_FLAGS))
    assert c["device"].detail == "cpu (Old Xeon); no GPU needed"
    assert c["CPU flags"].detail.startswith("avx512_bf16 no, amx_bf16 no, avx512_fp16 no, amx_fp16 no")
    assert "tensor cores" not in c
    assert c["bfloat16"].detail.startswith("not native here (needs AVX512-BF16 or AMX-BF16")
    # speed readouts say what the ratio is, never "0.25x"
    assert "4.0x slower than float32 (median of 5 repeats; range 2.0-5.0x slower)" in c["bfloat16"].detail
    assert "50x slower than float32" in c["float16"].detail and "0.02x" not in c["float16"].detail
    assert "256x256 matmul" in c["float16"].detail
    assert c["default low dtype"].detail == "bfloat16 (no 16-bit dtype is native here; bf16 needs no loss scaler)"
    assert all(x.status == "INFO" for n, x in c.items() if n not in ("device", "autocast dtypes"))


def test_device_lines_on_a_cpu_with_avx512_bf16_ignore_a_slow_timing():
    flags = dict(NO_FLAGS, avx512_bf16=True)
    # a loaded machine measured native bf16 slower than fp32: the line still says native, the default is still bf16
    rep = DeviceReport(torch.device("cpu"), "EPYC", (FP16, BF16), {}, 256, native={BF16: "AVX512-BF16"},
                       ratios={FP16: Ratio(0.03, 0.02, 0.04, 5), BF16: Ratio(0.8, 0.5, 2.5, 5)})
    c = _lines(doctor.check_device(report=rep, capabilities=flags))
    assert "avx512_bf16 yes" in c["CPU flags"].detail
    assert c["bfloat16"].detail.startswith("native here (AVX512-BF16)")
    assert "1.2x slower than float32" in c["bfloat16"].detail
    assert "range 2.0x slower to 2.5x faster" in c["bfloat16"].detail
    assert c["default low dtype"].detail.startswith("bfloat16 (native here")


@pytest.mark.parametrize("cc, line, default", [
    ((8, 6), "sm_86: bfloat16, float16 tensor cores",
     "bfloat16 (native here; preferred because bf16 needs no loss scaler)"),
    ((7, 5), "sm_75: float16 tensor cores",
     "float16 (native here; fp16 training needs a loss scaler (torch.amp.GradScaler))"),
    ((6, 1), "sm_61: none (tensor cores arrived with compute capability 7.0)",
     "bfloat16 (no 16-bit dtype is native here; bf16 needs no loss scaler)"),
])
def test_tensor_core_line_on_cuda(cc, line, default):
    native, cores = cuda_native_dtypes(cc)
    dtypes = (FP16, BF16)  # bf16 autocast may run on a Turing or Pascal GPU, without tensor cores for it
    rep = DeviceReport(torch.device("cuda"), "Fake GPU", dtypes, {}, 1024, native=native,
                       ratios={dt: Ratio(3.0, 2.5, 3.5, 5) for dt in dtypes}, tensor_cores=cores)
    c = _lines(doctor.check_device(report=rep))
    assert c["device"].detail == "cuda (Fake GPU)"
    assert c["tensor cores"].detail == line
    assert "CPU flags" not in c
    assert c["default low dtype"].detail == default
    for dt in dtypes:
        name = str(dt).removeprefix("torch.")
        assert c[name].detail.startswith("native here" if dt in native else "not native here (needs ")
        assert "3.0x faster than float32" in c[name].detail and "1024x1024 matmul" in c[name].detail


def test_cpu_flags_detail_lists_arm_bf16_when_reported():
    assert doctor.cpu_flags_detail({"bf16": True}).endswith("amx_fp16 no, bf16 yes")
    assert doctor.cpu_flags_detail({"amx_bf16": True, "amx_fp16": True}) == \
        "avx512_bf16 no, amx_bf16 yes, avx512_fp16 no, amx_fp16 yes"


def test_doctor_cli_prints_the_device_decision_and_measurement():
    out = subprocess.run([sys.executable, "-m", "ampkit", "doctor"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "[INFO] default low dtype: " in text
    assert "measured 256x256 matmul: " in text or "measured 1024x1024 matmul: " in text
    assert " than float32 (median of 5 repeats; range " in text
    assert not re.search(r"\b0\.\d+x\b", text)  # no "0.25x": slower is said as "4.0x slower"


def test_torch_features_are_found_by_trying_them():
    checks = {c.name: c for c in doctor.check_torch_features()}
    assert checks["torch release"].status == "OK"  # this environment runs the tested release
    for name in ("CPU fp16 autocast", "torch.amp.GradScaler('cpu')", "fp8 dtypes (float8_e4m3fn, float8_e5m2)",
                 "torch.compile"):
        assert checks[name].status == "OK", checks[name]


def test_a_missing_torch_feature_names_the_notebooks_and_the_fix():
    def broken():
        raise RuntimeError("not in this build")

    probes = [("fp8 dtypes", "01, 06", lambda: False), ("torch.compile", "04", broken)]
    checks = doctor.check_torch_features(probes)
    fp8, compile_ = checks[1], checks[2]
    assert fp8.status == "WARN" and "notebooks 01, 06 need it" in fp8.detail and "make lab" in fp8.fix
    assert compile_.status == "WARN" and "RuntimeError" in compile_.name and "notebooks 04" in compile_.detail
    assert not fp8.required  # a missing feature costs some notebooks, not the workshop


def test_torch_release_older_or_newer_than_tested(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    old = doctor.check_torch_features([])[0]
    assert old.status == "WARN" and "older than the tested" in old.detail
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    new = doctor.check_torch_features([])[0]
    assert new.status == "INFO" and "newer than the tested" in new.detail
