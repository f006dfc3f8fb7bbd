"""The graph sink: the training step compiled once with ``torch.compile`` (notebook ``04_data_sinking``).

:func:`compile_step` wraps a step function in a :class:`CompiledStep`: compiled at its first call (CUDA graphs via
``mode="reduce-overhead"`` on CUDA), or the eager function with a one-line message saying why not
(:func:`compile_unavailable_reason`: no compiler, no Triton, ``AMPKIT_NO_COMPILE``, or a compile that failed). The
compiling calls run inside :func:`ampkit.sinking.cache.kit_compile_cache`, so a second run finds the kernels built.

>>> step = compile_step(lambda x: (x * 2).sum(), enabled=False)
>>> step.compiled, step(torch.ones(3)).item()
(False, 6.0)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ampkit._util import check_choice, map_tensors
from ampkit.i18n import tr
from ampkit.sinking.cache import kit_compile_cache

__all__ = ["compile_unavailable_reason", "CompiledStep", "compile_step", "COMPILE_MODES"]

#: ``torch.compile`` modes :func:`compile_step` accepts (``None`` also: torch's default); ``"auto"`` picks one.
COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_unavailable_reason(device: str | torch.device | None = None) -> str | None:
    """Why ``torch.compile`` cannot run here (a sentence), or ``None`` when it should work.

    Checks: ``AMPKIT_NO_COMPILE`` set, no ``torch.compile``, TorchDynamo unsupported on this Python, no C++
    compiler (CPU inductor), no Triton (CUDA inductor).

    >>> compile_unavailable_reason("cpu") is None or isinstance(compile_unavailable_reason("cpu"), str)
    True
    """
    if os.environ.get("AMPKIT_NO_COMPILE", "").strip() not in ("", "0"):
        return tr("graph sink disabled by the AMPKIT_NO_COMPILE environment variable")
    if not hasattr(torch, "compile"):
        return tr("torch {version} has no torch.compile (needs torch >= 2.0)", version=torch.__version__)
    try:
        with kit_compile_cache():   # importing torch._dynamo writes torch's default cache folder into os.environ
            import torch._dynamo as dynamo  # deferred: heavy, and only needed when a graph sink is asked for
        if hasattr(dynamo, "is_dynamo_supported") and not dynamo.is_dynamo_supported():
            return tr("TorchDynamo (torch.compile) does not support this Python version / platform")
    except Exception as exc:  # pragma: no cover - broken installs
        return f"TorchDynamo cannot be imported ({type(exc).__name__}: {exc})"
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cpu":
        cxx = os.environ.get("CXX")
        if not any(shutil.which(c) for c in ([cxx] if cxx else []) + ["g++", "c++", "clang++", "cl"]):
            return tr("no C++ compiler found (inductor needs g++ or clang++ to compile CPU kernels)")
    if dev.type == "cuda":
        try:
            import triton  # noqa: F401  deferred: an optional dependency, present only with CUDA builds
        except Exception:
            return tr("Triton is not installed (inductor needs it for CUDA kernels)")
    return None


class CompiledStep:
    """A step function compiled once (graph sink), or the eager function with :attr:`message` saying why not.

    Attributes: ``compiled`` (whether calls run the compiled graph), ``mode`` (``torch.compile`` mode),
    ``message`` (what happened, one line), ``compile_seconds`` (wall time of the first call, which compiles),
    ``calls``. On CUDA with ``mode="reduce-overhead"`` (CUDA graphs) each call marks a new step and clones tensor
    outputs, because a graph replay overwrites the previous outputs. The first ``COMPILING_CALLS`` calls (those
    that compile) run inside :func:`ampkit.sinking.cache.kit_compile_cache`; see :meth:`cache_context`.
    """

    COMPILING_CALLS = 2

    def __init__(self, fn: Callable, compiled_fn: Callable | None, mode: str | None, message: str):
        self.fn = fn
        self._compiled_fn = compiled_fn
        self.compiled = compiled_fn is not None
        self.mode = mode
        self.message = message
        self.compile_seconds: float | None = None
        self.calls = 0

    def __repr__(self) -> str:
        return f"CompiledStep(compiled={self.compiled}, mode={self.mode!r}, message={self.message!r})"

    def _fallback(self, exc: BaseException) -> None:
        cause = getattr(exc, "inner_exception", None) or exc.__cause__ or exc
        first = (str(cause).strip().splitlines() or [""])[0][:200]
        if cause is not exc:
            first = f"{type(cause).__name__}: {first}"
        self.message = tr("graph sink unavailable: torch.compile failed ({error}: {first}); "
                          "running the step eagerly", error=type(exc).__name__, first=first)
        self.compiled = False
        self._compiled_fn = None
        warnings.warn(self.message, RuntimeWarning, stacklevel=3)

    def cache_context(self) -> contextlib.AbstractContextManager:
        """The kit's compile cache while the next call may still compile (the first ``COMPILING_CALLS`` calls;
        wrap the backward of those steps too: AOTAutograd compiles the backward graph at the first backward)."""
        if self._compiled_fn is not None and self.calls < self.COMPILING_CALLS:
            return kit_compile_cache()
        return contextlib.nullcontext()

    def record_compile(self, seconds: float, what: str) -> None:
        """Replace the first call's time by the caller's measure of everything that compiled (``what``)."""
        self.compile_seconds = seconds
        self.message = tr("compiled with torch.compile (mode={mode}) in {seconds:.1f} s ({what})",
                          mode=self.mode or "default", seconds=seconds, what=what)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.cache_context():
            return self._call(*args, **kwargs)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self._compiled_fn is None:
            return self.fn(*args, **kwargs)
        if self.mode == "reduce-overhead" and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
            torch.compiler.cudagraph_mark_step_begin()
        if self.compile_seconds is None:
            t0 = time.perf_counter()
            try:
                out = self._compiled_fn(*args, **kwargs)
            except Exception as exc:  # compile failed: fall back (the function is pure, nothing ran twice)
                self._fallback(exc)
                return self.fn(*args, **kwargs)
            self.record_compile(time.perf_counter() - t0, tr("first call"))
        else:
            out = self._compiled_fn(*args, **kwargs)
        if self.mode == "reduce-overhead":
            out = map_tensors(out, lambda t: t.clone())
        return out


def _eager(fn: Callable, message: str, warn: bool = True) -> CompiledStep:
    if warn:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    return CompiledStep(fn, None, None, message)


def compile_step(fn: Callable, *, device: str | torch.device | None = None, mode: str | None = "auto",
                 backend: str | Callable = "inductor", enabled: bool = True, **compile_kwargs: Any) -> CompiledStep:
    """Graph sink: compile ``fn`` once with ``torch.compile``; fall back to eager (with a message) where that fails.

    ``mode="auto"`` picks ``"reduce-overhead"`` (CUDA graphs) on CUDA and the default elsewhere; the other choices
    are :data:`COMPILE_MODES` and ``None``. Compilation happens at the first call (``compile_seconds``). Give it a
    *pure* function (e.g. forward + loss): if compiling fails at the first call, the eager function runs instead, so
    side effects must not have happened yet. The compiling calls use
    :func:`ampkit.sinking.cache.compile_cache_dir` (set only around them), so a second run reuses the kernels.

    >>> compile_step(lambda x: x, mode="fastest")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: mode must be one of 'auto', 'default', ..., 'max-autotune-no-cudagraphs'; got 'fastest' (or None: ...)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    if mode is not None:
        check_choice("mode", mode, COMPILE_MODES, hint=" (or None: torch's default)")
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if mode == "auto":
        mode = "reduce-overhead" if dev.type == "cuda" else None
    if not enabled:
        return _eager(fn, tr("graph sink off: the step runs eagerly, op by op"), warn=False)
    reason = compile_unavailable_reason(dev) if backend == "inductor" else None
    if reason is not None:
        return _eager(fn, tr("graph sink unavailable: {reason}; running the step eagerly", reason=reason))
    try:
        with kit_compile_cache():   # torch.compile itself reads (and, unset, writes) TORCHINDUCTOR_CACHE_DIR
            compiled = torch.compile(fn, mode=mode, backend=backend, **compile_kwargs)
    except Exception as exc:
        return _eager(fn, tr("graph sink unavailable: torch.compile refused ({error}: {exc}); "
                             "running the step eagerly", error=type(exc).__name__, exc=exc))
    return CompiledStep(fn, compiled, mode, tr("compiles at the first call"))
