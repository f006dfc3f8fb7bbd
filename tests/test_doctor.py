import subprocess
import sys

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
    assert "plain text" in c.fix and "jupyterlab_widgets" in c.fix


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
