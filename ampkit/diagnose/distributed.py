"""AMP across processes: a 2-process data-parallel run on the CPU (gloo, loopback only), started and cleaned up here.

Taught in ``05_amp_in_practice.ipynb``. :func:`run_data_parallel` starts ``world_size`` Python processes (this
module's ``_worker``), each a rank of a ``torch.distributed`` gloo group on 127.0.0.1, waits for their results
with a timeout and always leaves nothing running (each worker is its own process group, killed on any failure).

Modes:

- ``"ddp"``: the gradients are all-reduced (averaged) after backward, as ``DistributedDataParallel`` does (written
  out here: DDP's constructor imports ``torch._dynamo``, seconds per process), so every rank's ``GradScaler`` sees
  the same gradients: one rank's inf (``poison_rank`` at ``poison_step``) makes *every* rank skip, the scales agree, the
  parameters stay identical.
- ``"sharded"``: each rank keeps only its own gradients (as with sharded gradients, FSDP/ZeRO), poison on one
  rank. ``scaler="torch"`` (plain GradScaler): only the poisoned rank skips — the scales disagree.
  ``scaler="sharded"`` (FSDP's ``ShardedGradScaler``, which all-reduces ``found_inf``): every rank skips.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ampkit._net import free_port
from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.data import make_blobs
from ampkit.models import build_model

__all__ = ["RankResult", "run_data_parallel", "STRATEGIES", "SCALERS"]

#: what a spawned worker runs (``python -c``, not ``-m``: the package face imports this module, and runpy warns
#: when ``-m`` re-runs a module that is already imported)
_WORKER_CODE = "import json, sys; from ampkit.diagnose.distributed import _worker; _worker(json.loads(sys.argv[1]))"

STRATEGIES: tuple[str, ...] = ("ddp", "sharded")
SCALERS: tuple[str, ...] = ("torch", "sharded")


@dataclass(frozen=True)
class RankResult:
    """One rank's record: the scale before each step, which steps it skipped, its final parameters (flat)."""

    rank: int
    scales: list[float]
    skipped: list[bool]
    params: list[float]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kill(procs: list[subprocess.Popen | _Forked]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
            pass


class _Forked:
    """A worker forked from this process (no new interpreter, no second ``import torch``: starts in milliseconds),
    with the calls of ``subprocess.Popen`` that :func:`run_data_parallel` uses."""

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

    def wait(self, timeout: float | None = None) -> int | None:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            assert timeout is not None  # join(None) returns only once the worker has exited
            raise subprocess.TimeoutExpired("forked worker", timeout)
        return self._proc.exitcode


def _forked_main(cfg: dict, log: str) -> None:
    os.setsid()                                   # its own process group, killed as one like a spawned worker
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # in a Jupyter kernel sys.stdout/sys.stderr are the kernel's streams, not fds 1 and 2: point them at the log too
    sys.stdout = sys.stderr = open(fd, "w", buffering=1, closefd=False)
    try:
        _worker(cfg)
    except BaseException:
        import traceback  # deferred: only on a failure in the child

        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def _tail(log: Path, n: int) -> str:
    """The last ``n`` characters of a rank's log; a forked rank stopped before it opened its log has none yet."""
    return log.read_text()[-n:] if log.exists() else "(no output: the rank had not opened its log yet)"


def run_data_parallel(steps: int = 3, mode: str = "ddp", scaler: str = "torch", world_size: int = 2,
                      poison_rank: int | None = 0, poison_step: int = 1, port: int | None = None,
                      timeout: float = 60.0, start: str | None = None, python: str | None = None
                      ) -> list[RankResult]:
    """Run the data-parallel recipe in ``world_size`` local processes; return one :class:`RankResult` per rank.

    ``poison_rank`` multiplies its loss by inf at step ``poison_step`` (``None``: a clean run). ``port``: the
    rendezvous port on 127.0.0.1 (a free one by default; a taken one is a ``RuntimeError`` saying so).
    ``timeout`` (s) bounds the whole run: past it every worker is killed and ``TimeoutError`` raised. A worker
    that fails or cannot start is a ``RuntimeError`` with its error output; nothing is left running either way.
    ``start``: ``"fork"`` (the default where the OS has it and torch sees no CUDA GPU: the workers start at once,
    with torch already imported) or ``"spawn"`` (fresh interpreters, ``python`` or this one, each importing torch:
    seconds; the default where torch sees a GPU: after a backward pass, autograd runs a thread per GPU, and a
    forked child fails in its own backward pass, as found on the first GPU run).

    >>> run_data_parallel(world_size=1)            # checked before any process starts (a real run takes ~1.5 s)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be an int >= 2 and <= 8; got 1
    """
    can_fork = "fork" in multiprocessing.get_all_start_methods() and python is None
    start = check_choice("start", start or ("fork" if can_fork and not torch.cuda.is_available() else "spawn"),
                         ("fork", "spawn"))
    if start == "fork" and python is not None:
        raise ValueError("python= picks the interpreter of spawned workers: use it with start='spawn'")
    if start == "fork" and torch.cuda.is_available():
        raise ValueError("start='fork' on a machine with a CUDA GPU: a forked child can use neither CUDA nor autograd "
                         "once this process has run a backward pass (autograd then runs a thread per GPU; PyTorch "
                         "wiki 'Autograd and Fork'), so use start='spawn' (the default where torch sees a GPU)")
    steps = check_int("steps", steps)
    mode = check_choice("mode", mode, STRATEGIES)
    scaler = check_choice("scaler", scaler, SCALERS)
    world_size = check_int("world_size", world_size, minimum=2, maximum=8)
    poison_step = check_int("poison_step", poison_step, minimum=0)
    if poison_rank is not None:
        poison_rank = check_int("poison_rank", poison_rank, minimum=0, maximum=world_size - 1)
    timeout = check_positive_finite("timeout", timeout, example="60")
    if port is None:
        port = free_port()
    else:
        port = check_int("port", port, minimum=1024, maximum=65535)
        if not _port_free(port):
            raise RuntimeError(f"port {port} on 127.0.0.1 is taken by another program: the ranks could not meet "
                               f"there. Pass port=None to pick a free one.")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    procs: list[subprocess.Popen | _Forked] = []
    with tempfile.TemporaryDirectory(prefix="ampkit-ddp-") as tmp:
        logs = [Path(tmp, f"rank{r}.log") for r in range(world_size)]
        outs = [Path(tmp, f"rank{r}.json") for r in range(world_size)]
        try:
            for r in range(world_size):
                cfg = dict(rank=r, world_size=world_size, port=port, steps=steps, mode=mode, scaler=scaler,
                           poison_rank=poison_rank, poison_step=poison_step, out=str(outs[r]),
                           timeout=timeout)
                if start == "fork":
                    procs.append(_Forked(cfg, str(logs[r])))
                    continue
                with open(logs[r], "w") as log:
                    try:
                        procs.append(subprocess.Popen([python or sys.executable, "-c", _WORKER_CODE, json.dumps(cfg)],
                                                      stdout=log, stderr=subprocess.STDOUT, env=env,
                                                      start_new_session=True))
                    except OSError as e:
                        raise RuntimeError(f"could not start worker process {r} with {python or sys.executable!r}: "
                                           f"{e}") from None
            deadline = time.monotonic() + timeout
            # done when every rank has written its result: a rank still shutting down its process group after
            # that (it may wait on rank 0's store, which has gone) is killed in ``finally``
            while not all(o.exists() for o in outs):
                failed = [r for r, p in enumerate(procs) if p.poll() is not None and not outs[r].exists()]
                if failed:
                    r = failed[0]
                    raise RuntimeError(f"rank {r} failed (exit code {procs[r].returncode}); its output:\n"
                                       + _tail(logs[r], 2000))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the {world_size} ranks did not finish within {timeout:g} s; all were "
                                       f"stopped. Last output of rank 0:\n" + _tail(logs[0], 1000))
                time.sleep(0.02)
            return [RankResult(**json.loads(o.read_text())) for o in outs]
        finally:
            _kill(procs)


def _worker(cfg: dict) -> None:
    """One rank (runs in its own process)."""

    torch.set_num_threads(1)
    rank, ws = cfg["rank"], cfg["world_size"]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['port']}", rank=rank, world_size=ws,
                            timeout=timedelta(seconds=max(5.0, cfg["timeout"])))
    try:
        model = build_model("mlp", seed=0, in_features=8, hidden=16, out_features=3, depth=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if cfg["scaler"] == "sharded":
            # deferred: FSDP's package takes seconds to import; only this mode needs it
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
            scaler: torch.amp.GradScaler = ShardedGradScaler("cpu")
        else:
            scaler = torch.amp.GradScaler("cpu")
        X, y = make_blobs(16 * ws * cfg["steps"], n_features=8, n_classes=3, seed=0)
        X, y = X[rank::ws], y[rank::ws]   # each rank its own shard of the data
        scales, skipped = [], []
        for step in range(cfg["steps"]):
            xb, yb = X[step * 16:(step + 1) * 16], y[step * 16:(step + 1) * 16]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(xb)
            loss = F.cross_entropy(out.float(), yb)
            if rank == cfg["poison_rank"] and step == cfg["poison_step"]:
                loss = loss * float("inf")
            before = float(scaler.get_scale())
            scaler.scale(loss).backward()
            if cfg["mode"] == "ddp":   # what DistributedDataParallel does during backward: average the gradients
                for p in model.parameters():
                    dist.all_reduce(p.grad)
                    p.grad /= ws
            scaler.step(opt)
            scaler.update()
            scales.append(before)
            skipped.append(float(scaler.get_scale()) < before)
        params = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
        tmp = Path(cfg["out"] + ".tmp")
        tmp.write_text(json.dumps(dict(rank=rank, scales=scales, skipped=skipped, params=params)))
        tmp.replace(cfg["out"])   # atomic: the parent never reads half a file
    finally:
        dist.destroy_process_group()
