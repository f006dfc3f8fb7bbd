"""Notebook 05 §1.10's claim about FSDP, checked with real FSDP on 2 CPU processes (gloo): with FSDP's first API
(``FullyShardedDataParallel``) each rank's gradient shard is a plain tensor, so a plain ``torch.amp.GradScaler``
lets the ranks disagree; with FSDP2 (``fully_shard``) the shards are DTensors, and DTensor all-reduces the
``found_inf`` of ``_amp_foreach_non_finite_check_and_unscale_`` (``found_inf_reduce_handler`` in
``torch/distributed/tensor/_dispatch.py``), so the same plain scaler makes every rank skip."""
import json
import os
import time
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from ampkit._net import free_port

pytestmark = pytest.mark.slow


def _one_step(model, rank: int) -> dict:
    """One fp16 autocast step with a plain GradScaler; rank 0 poisons one entry of its own gradient shard."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    torch.manual_seed(1 + rank)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(torch.randn(4, 8)).float().mean()
    scaler.scale(loss).backward()
    grad = next(iter(model.parameters())).grad
    local = grad._local_tensor if hasattr(grad, "_local_tensor") else grad
    finite_before = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()
                        if not hasattr(p.grad, "_local_tensor")) and bool(torch.isfinite(local).all())
    if rank == 0:
        local.view(-1)[0] = float("inf")
    before = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    return {"grad_type": type(grad).__name__, "finite_before_poison": finite_before,
            "skipped": scaler.get_scale() < before}


def _worker(rank: int, port: int, out_dir: str) -> None:
    warnings.filterwarnings("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=60))
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
        result = {}
        torch.manual_seed(0)
        result["fsdp1"] = _one_step(FullyShardedDataParallel(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2)),
                                                             device_id=torch.device("cpu")), rank)
        torch.manual_seed(0)
        model2 = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
        fully_shard(model2, mesh=init_device_mesh("cpu", (2,)))
        result["fsdp2"] = _one_step(model2, rank)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.barrier()   # neither rank tears the group down while the other still talks to it (gloo aborts then)
    finally:
        dist.destroy_process_group()


def test_plain_grad_scaler_under_fsdp1_and_fsdp2(tmp_path):
    ctx = mp.spawn(_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=False)
    deadline = time.monotonic() + 150
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail("the 2 FSDP workers ran past 150 s")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for kind in ("fsdp1", "fsdp2"):
        assert all(r[kind]["finite_before_poison"] for r in ranks)      # only the poison overflows
    assert [r["fsdp1"]["grad_type"] for r in ranks] == ["Tensor", "Tensor"]
    assert [r["fsdp1"]["skipped"] for r in ranks] == [True, False]      # FSDP1: the ranks disagree
    assert [r["fsdp2"]["grad_type"] for r in ranks] == ["DTensor", "DTensor"]
    assert [r["fsdp2"]["skipped"] for r in ranks] == [True, True]       # FSDP2: DTensor all-reduces found_inf
