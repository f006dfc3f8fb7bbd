"""The kit's one launcher of local process groups: ``world_size`` ranks of one worker function on this machine
(a ``torch.distributed`` gloo group meets on 127.0.0.1), their results waited for with a timeout, and nothing left
running afterwards whatever happened (each rank is its own process group, killed at the end).

Used by ``ampkit.diagnose.distributed`` (notebook 05: AMP across data-parallel ranks) and
``ampkit.lessons.transformers_compiled_and_sharded.sharded`` (notebook 08: FSDP2's mixed-precision policies).

A worker is named ``"module:function"`` and called in each rank as ``function(cfg)``: ``cfg`` is the caller's
JSON-able dict plus ``rank``, ``world_size``, ``port`` (the rendezvous port on 127.0.0.1) and ``timeout``. What it
returns (JSON-able; ``None``: nothing) is written atomically to the rank's result file; the launcher returns the
results of the ranks it waits for. A rank's output (its prints, a traceback) goes to its log, which a failure
message quotes. ``start="fork"`` forks this process (torch already imported: the ranks start in milliseconds);
``"spawn"`` starts fresh interpreters (``python -c``, this Python or ``python``), each importing torch: seconds.

>>> default_start(python="/usr/bin/python3")   # another interpreter can only be spawned
'spawn'
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ampkit._net import free_port
from ampkit._util import check_choice, check_int
from ampkit.i18n import tr

__all__ = ["START_METHODS", "default_start", "check_start", "run_ranks", "rank_of"]

START_METHODS: tuple[str, ...] = ("fork", "spawn")
#: what a spawned rank runs (``python -c``, not ``-m``: runpy warns when ``-m`` re-runs a module already imported)
_RANK_CODE = "import json, sys; from ampkit._ranks import _rank_main; _rank_main(json.loads(sys.argv[1]))"


def default_start(python: str | None = None) -> str:
    """``"fork"`` where the system has it, the ranks run this Python, and torch sees no CUDA GPU; else ``"spawn"``.
    Where torch sees a GPU, a forked child fails in its own backward pass once the parent ran one (autograd then
    runs a thread per GPU; PyTorch wiki 'Autograd and Fork'), as found on the first GPU run.

    >>> default_start(python="/usr/bin/python3")   # ranks in another interpreter are always spawned
    'spawn'
    """
    can_fork = "fork" in multiprocessing.get_all_start_methods() and python is None
    return "fork" if can_fork and not torch.cuda.is_available() else "spawn"


def check_start(start: str | None, python: str | None = None) -> str:
    """``start`` checked (``None``: :func:`default_start`): a clear error for a method this system or this machine
    cannot use.

    >>> check_start("thread")
    Traceback (most recent call last):
    ...
    ValueError: start must be one of 'fork', 'spawn'; got 'thread'
    """
    start = check_choice("start", start or default_start(python), START_METHODS)
    if start == "fork" and python is not None:
        raise ValueError("python= picks the interpreter of spawned workers: use it with start='spawn'")
    if start not in multiprocessing.get_all_start_methods():
        raise ValueError(tr("start={start!r} is not available on this system; it has: {methods}", start=start,
                            methods=", ".join(multiprocessing.get_all_start_methods())))
    if start == "fork" and torch.cuda.is_available():
        raise ValueError("start='fork' on a machine with a CUDA GPU: a forked child can use neither CUDA nor autograd "
                         "once this process has run a backward pass (autograd then runs a thread per GPU; PyTorch "
                         "wiki 'Autograd and Fork'), so use start='spawn' (the default where torch sees a GPU)")
    return start


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kill(procs: list) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                if hasattr(os, "killpg"):
                    os.killpg(p.pid, signal.SIGKILL)
                else:                          # Windows: no process groups
                    p.kill()
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
            pass


class _Forked:
    """A rank forked from this process (no new interpreter, no second ``import torch``: starts in milliseconds),
    with the calls of ``subprocess.Popen`` that :func:`run_ranks` uses."""

    def __init__(self, cfg: dict, log: str):
        self._proc = multiprocessing.get_context("fork").Process(target=_forked_main, args=(cfg, log), daemon=True)
        self._proc.start()
        assert self._proc.pid is not None  # a started process has one
        self.pid: int = self._proc.pid

    def poll(self) -> int | None:
        return self._proc.exitcode

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def kill(self) -> None:
        self._proc.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            assert timeout is not None  # join(None) returns only once the rank has exited
            raise subprocess.TimeoutExpired("forked rank", timeout)
        return self._proc.exitcode


def _forked_main(cfg: dict, log: str) -> None:
    if hasattr(os, "setsid"):
        os.setsid()                               # its own process group, killed as one like a spawned rank
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # in a Jupyter kernel sys.stdout/sys.stderr are the kernel's streams, not fds 1 and 2: point them at the log too
    sys.stdout = sys.stderr = open(fd, "w", buffering=1, closefd=False)
    try:
        _rank_main(cfg)
    except BaseException:
        import traceback  # deferred: only on a failure in the child

        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def _rank_main(cfg: dict) -> None:
    """One rank: call the worker, write what it returns to the rank's result file (atomically: the parent never
    reads half a file). Runs in the rank's own process."""
    module, _, name = cfg["worker"].partition(":")
    result = getattr(importlib.import_module(module), name)(cfg)   # looked up now: a test may replace it
    if result is not None:
        tmp = Path(cfg["out"] + ".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(cfg["out"])


def rank_of(cfg: dict) -> int:
    """The smallest worker :func:`run_ranks` can run: it returns the rank it ran as (a check that every rank started
    and reported).

    >>> rank_of({"rank": 1, "world_size": 2})
    1
    """
    return int(cfg["rank"])


def _tail(log: Path, n: int) -> str:
    """The last ``n`` characters of a rank's log; a forked rank stopped before it opened its log has none yet."""
    return log.read_text()[-n:] if log.exists() else "(no output: the rank had not opened its log yet)"


def run_ranks(worker: str, world_size: int, cfg: dict[str, Any], *, timeout: float, start: str,
              python: str | None = None, port: int | None = None, results_from: Sequence[int] | None = None
              ) -> list[Any]:
    """Run ``worker`` (``"module:function"``) in ``world_size`` ranks; return the results of the ranks
    ``results_from`` (default: every rank), in that order. ``start``: a method :func:`check_start` returned.

    ``port``: the rendezvous port on 127.0.0.1 (a free one by default; a taken one is a ``RuntimeError`` saying
    so). ``timeout`` (s) bounds the whole run: past it every rank is killed and ``TimeoutError`` raised. A rank
    that cannot start, or exits before writing its result, is a ``RuntimeError`` quoting its log. Nothing is left
    running either way: the ranks still shutting down once the results are in are killed too.

    >>> run_ranks("ampkit._ranks:rank_of", 2, {}, timeout=60, start=check_start(None))
    [0, 1]
    """
    world_size = check_int("world_size", world_size, minimum=1)
    wanted = list(range(world_size)) if results_from is None else list(results_from)
    if port is None:
        port = free_port()
    else:
        port = check_int("port", port, minimum=1024, maximum=65535)
        if not _port_free(port):
            raise RuntimeError(f"port {port} on 127.0.0.1 is taken by another program: the ranks could not meet "
                               f"there. Pass port=None to pick a free one.")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    procs: list[subprocess.Popen | _Forked] = []
    with tempfile.TemporaryDirectory(prefix="ampkit-ranks-") as tmp:
        logs = [Path(tmp, f"rank{r}.log") for r in range(world_size)]
        outs = [Path(tmp, f"rank{r}.json") for r in range(world_size)]
        try:
            for r in range(world_size):
                rank_cfg = dict(cfg, worker=worker, rank=r, world_size=world_size, port=port, timeout=timeout,
                                out=str(outs[r]))
                if start == "fork":
                    procs.append(_Forked(rank_cfg, str(logs[r])))
                    continue
                with open(logs[r], "w") as log:
                    try:
                        procs.append(subprocess.Popen([python or sys.executable, "-c", _RANK_CODE,
                                                       json.dumps(rank_cfg)], stdout=log, stderr=subprocess.STDOUT,
                                                      env=env, start_new_session=True))
                    except OSError as e:
                        raise RuntimeError(f"could not start worker process {r} with {python or sys.executable!r}: "
                                           f"{e}") from None
            deadline = time.monotonic() + timeout
            while not all(outs[r].exists() for r in wanted):
                failed = [r for r, p in enumerate(procs) if p.poll() is not None and not outs[r].exists()
                          and (r in wanted or p.returncode != 0)]
                if failed:
                    r = failed[0]
                    raise RuntimeError(f"rank {r} failed (exit code {procs[r].returncode}); its output:\n"
                                       + _tail(logs[r], 2000))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the {world_size} ranks did not finish within {timeout:g} s; all were "
                                       f"stopped. Last output of rank 0:\n" + _tail(logs[0], 1000))
                time.sleep(0.02)
            return [json.loads(outs[r].read_text()) for r in wanted]
        finally:
            _kill(procs)
