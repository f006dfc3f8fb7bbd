"""ampkit.sinking.compile and .cache: the graph sink (compile_step, CompiledStep, the eager fallback with its
message) and the kit's compile cache (set only around the kit's compiles; ``python -m ampkit warmup``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ampkit import sinking
from ampkit.sinking import cache as compile_cache
from ampkit.sinking import compile as sink_compile
from ampkit.sinking import compile_step, compile_unavailable_reason
from ampkit.sinking import mode_runs as sink_bench


def test_compile_step_off_runs_eagerly():
    step = compile_step(lambda x: x * 2, enabled=False)
    assert not step.compiled and "eagerly" in step.message
    assert torch.equal(step(torch.ones(2)), torch.full((2,), 2.0))


def test_compile_unavailable_falls_back_with_message(monkeypatch):
    monkeypatch.setenv("AMPKIT_NO_COMPILE", "1")
    assert "AMPKIT_NO_COMPILE" in compile_unavailable_reason("cpu")
    with pytest.warns(RuntimeWarning, match="graph sink unavailable: .*AMPKIT_NO_COMPILE.*eagerly"):
        step = compile_step(lambda x: x + 1)
    assert not step.compiled and torch.equal(step(torch.zeros(1)), torch.ones(1))


def test_compile_failure_at_first_call_falls_back(monkeypatch):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("no compiler for this op")

    step = compile_step(lambda x: torch.tanh(x) * 3, backend=broken_backend)
    assert step.compiled
    with pytest.warns(RuntimeWarning, match="torch.compile failed .*no compiler for this op.*eagerly"):
        out = step(torch.ones(3))
    assert torch.allclose(out, torch.tanh(torch.ones(3)) * 3)
    assert not step.compiled and step(torch.zeros(1)).item() == 0.0


def test_no_cxx_compiler_is_reported(monkeypatch):
    monkeypatch.delenv("AMPKIT_NO_COMPILE", raising=False)
    monkeypatch.setattr(sink_compile.shutil, "which", lambda name: None)
    assert "no C++ compiler" in compile_unavailable_reason("cpu")


def test_bad_compile_mode():
    with pytest.raises(ValueError, match="mode must be one of 'auto'.*reduce-overhead"):
        compile_step(lambda x: x, mode="fastest")
    with pytest.raises(TypeError, match="fn must be callable"):
        compile_step(3)


def test_kit_cache_dir_is_the_repo_cache():
    assert sinking.kit_cache_dir().parts[-2:] == (".cache", "torchinductor")
    assert sinking.kit_cache_dir() == compile_cache.kit_cache_dir()
    repo = Path(__file__).resolve().parents[1]
    assert (repo / "pyproject.toml").exists() and sinking.kit_cache_dir() == repo / ".cache" / "torchinductor"


def test_importing_ampkit_leaves_the_environment_unchanged():
    """In a fresh interpreter without TORCHINDUCTOR_CACHE_DIR, importing the kit sets nothing."""
    code = ("import json, os; before = dict(os.environ); import ampkit, ampkit.sinking, ampkit.sinking.cache; "
            "after = dict(os.environ); print(json.dumps({k: [before.get(k), after.get(k)] "
            "for k in set(before) | set(after) if before.get(k) != after.get(k)}))")
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_kit_compile_cache_sets_the_variable_only_inside(monkeypatch):
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    with compile_cache.kit_compile_cache() as folder:
        assert os.environ[compile_cache.ENV_VAR] == str(folder) == str(compile_cache.kit_cache_dir())
        with compile_cache.kit_compile_cache() as inner:          # nested: nothing changes
            assert inner == folder and os.environ[compile_cache.ENV_VAR] == str(folder)
        assert os.environ[compile_cache.ENV_VAR] == str(folder)
    assert compile_cache.ENV_VAR not in os.environ                   # unset before, unset after
    with pytest.raises(RuntimeError):                                # restored on errors too
        with compile_cache.kit_compile_cache():
            raise RuntimeError("boom")
    assert compile_cache.ENV_VAR not in os.environ


def test_kit_compile_cache_respects_the_users_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path))
    assert compile_cache.compile_cache_dir() == tmp_path.resolve()
    with compile_cache.kit_compile_cache() as folder:
        assert folder == tmp_path.resolve()
    assert os.environ[compile_cache.ENV_VAR] == str(tmp_path)


def test_torchs_own_default_counts_as_unset(monkeypatch):
    """torch writes its default folder into the variable when it imports dynamo; the kit still uses its own."""
    # deferred: importing inductor writes its default folder into os.environ for the whole session
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    default = os.path.abspath(default_cache_dir())
    monkeypatch.setenv(compile_cache.ENV_VAR, default)
    assert compile_cache.compile_cache_dir() == compile_cache.kit_cache_dir()
    with compile_cache.kit_compile_cache() as folder:
        assert os.environ[compile_cache.ENV_VAR] == str(folder) != default
    assert os.environ[compile_cache.ENV_VAR] == default


def test_compiled_step_uses_the_kit_cache_only_while_compiling(monkeypatch):
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    seen = []
    step = sinking.CompiledStep(lambda x: x, lambda x: seen.append(os.environ.get(compile_cache.ENV_VAR)) or x,
                                None, "")
    for _ in range(4):
        step(torch.ones(1))
    kit = str(compile_cache.compile_cache_dir())
    assert seen == [kit] * step.COMPILING_CALLS + [None] * (4 - step.COMPILING_CALLS)
    assert compile_cache.ENV_VAR not in os.environ
    eager = compile_step(lambda x: x, enabled=False)
    assert isinstance(eager.cache_context(), __import__("contextlib").nullcontext)


def test_warmup_cli_warms_the_kit_compile_cache():
    out = subprocess.run([sys.executable, "-m", "ampkit", "warmup"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("[ OK ] warmup: compile cache warm in") or "runs eager" in line, line


def test_warm_compile_cache_reports_a_missing_compiler(monkeypatch):
    monkeypatch.setattr(sink_bench, "SinkBench", lambda **kw: (_ for _ in ()).throw(RuntimeError("no cc")))
    compiled, seconds, note = sinking.warm_compile_cache()
    assert not compiled and "no cc" in note and "eager" in note and seconds >= 0
