"""The root conftest's retry of a notebook kernel that died at its start (a TCP port taken between jupyter_client
picking it and the kernel binding it, with two pytest-xdist workers starting kernels at once)."""
import pytest

nbval_kernel = pytest.importorskip("nbval.kernel")


def _starts(monkeypatch, failures: list[Exception]) -> list[int]:
    calls = []

    def fake_start(**kwargs):
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "km", "kc"

    monkeypatch.setattr(nbval_kernel, "start_new_kernel", fake_start)
    monkeypatch.setattr(nbval_kernel.RunningKernel, "_ensure_iopub_up", lambda self: None)
    return calls


def test_a_kernel_that_died_at_its_start_is_started_again(monkeypatch, capsys):
    died = RuntimeError("Kernel died before replying to kernel_info")
    calls = _starts(monkeypatch, [died, died])
    kernel = nbval_kernel.RunningKernel("python3")
    assert (kernel.km, kernel.kc, len(calls)) == ("km", "kc", 3)
    assert capsys.readouterr().out.count("starting it again") == 2


def test_three_deaths_or_another_error_fail_the_notebook(monkeypatch):
    died = RuntimeError("Kernel died before replying to kernel_info")
    calls = _starts(monkeypatch, [died, died, died])
    with pytest.raises(RuntimeError, match="Kernel died"):
        nbval_kernel.RunningKernel("python3")
    assert len(calls) == 3
    calls = _starts(monkeypatch, [RuntimeError("No such kernel named python9")])
    with pytest.raises(RuntimeError, match="python9"):
        nbval_kernel.RunningKernel("python9")
    assert len(calls) == 1
