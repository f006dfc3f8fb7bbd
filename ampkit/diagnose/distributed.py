"""AMP across processes: a 2-process data-parallel run on the CPU (gloo, loopback only), started and cleaned up here.

Taught in ``05_amp_in_practice.ipynb``. :func:`run_data_parallel` starts ``world_size`` Python processes (this
module's ``_worker``), each a rank of a ``torch.distributed`` gloo group on 127.0.0.1, through the kit's launcher
(``ampkit._ranks.run_ranks``: results waited for with a timeout, nothing left running).

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

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ampkit._ranks import check_start, run_ranks
from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.data import make_blobs
from ampkit.models import build_model

__all__ = ["RankResult", "run_data_parallel", "STRATEGIES", "SCALERS"]

STRATEGIES: tuple[str, ...] = ("ddp", "sharded")
SCALERS: tuple[str, ...] = ("torch", "sharded")


@dataclass(frozen=True)
class RankResult:
    """One rank's record: the scale before each step, which steps it skipped, its final parameters (flat)."""

    rank: int
    scales: list[float]
    skipped: list[bool]
    params: list[float]


def run_data_parallel(steps: int = 3, mode: str = "ddp", scaler: str = "torch", world_size: int = 2,
                      poison_rank: int | None = 0, poison_step: int = 1, port: int | None = None,
                      timeout: float = 60.0, start: str | None = None, python: str | None = None
                      ) -> list[RankResult]:
    """Run the data-parallel recipe in ``world_size`` local processes; return one :class:`RankResult` per rank.

    ``poison_rank`` multiplies its loss by inf at step ``poison_step`` (``None``: a clean run). ``port``: the
    rendezvous port on 127.0.0.1 (a free one by default; a taken one is a ``RuntimeError`` saying so).
    ``timeout`` (s) bounds the whole run: past it every worker is killed and ``TimeoutError`` raised. A worker
    that fails or cannot start is a ``RuntimeError`` with its error output; nothing is left running either way
    (the kit's launcher, ``ampkit._ranks.run_ranks``). ``start``: ``"fork"`` (the default where the OS has it and
    torch sees no CUDA GPU: the workers start at once, with torch already imported) or ``"spawn"`` (fresh
    interpreters, ``python`` or this one, each importing torch: seconds; the default where torch sees a GPU: after a
    backward pass, autograd runs a thread per GPU, and a forked child fails in its own backward pass, as found on
    the first GPU run).

    >>> run_data_parallel(world_size=1)            # checked before any process starts (a real run takes ~1.5 s)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be an int >= 2 and <= 8; got 1
    """
    start = check_start(start, python)
    steps = check_int("steps", steps)
    mode = check_choice("mode", mode, STRATEGIES)
    scaler = check_choice("scaler", scaler, SCALERS)
    world_size = check_int("world_size", world_size, minimum=2, maximum=8)
    poison_step = check_int("poison_step", poison_step, minimum=0)
    if poison_rank is not None:
        poison_rank = check_int("poison_rank", poison_rank, minimum=0, maximum=world_size - 1)
    timeout = check_positive_finite("timeout", timeout, example="60")
    cfg = dict(steps=steps, mode=mode, scaler=scaler, poison_rank=poison_rank, poison_step=poison_step)
    results = run_ranks("ampkit.diagnose.distributed:_worker", world_size, cfg, timeout=timeout, start=start,
                        python=python, port=port)
    return [RankResult(**r) for r in results]


def _worker(cfg: dict) -> dict:
    """One rank (runs in its own process): its :class:`RankResult` as a dict."""

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
        return dict(rank=rank, scales=scales, skipped=skipped, params=params)
    finally:
        dist.destroy_process_group()
