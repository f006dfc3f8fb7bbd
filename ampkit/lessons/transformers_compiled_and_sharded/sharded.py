"""Sharded training with FSDP2's ``MixedPrecisionPolicy`` on 2 CPU processes (gloo): gradient reduction in fp32
against reduction in bf16, both measured against an fp32 run.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. :func:`sharded_gradients` starts ``world_size`` worker
processes through the kit's launcher (``ampkit._ranks.run_ranks``: forked where the system can fork, else spawned;
a gloo group on 127.0.0.1, a free port, a bounded timeout; every worker is its own process group where the system
has them, and is killed at the end, whatever happened). Each rank builds the same seeded decoder, applies
``torch.distributed.fsdp.fully_shard`` to every block and to the whole model, and takes one step of the kit's
training step (:func:`ampkit.train.train_step`) on its own batch. Three runs: no policy (fp32 everywhere: the
reference), ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` and ``(param_dtype=bf16,
reduce_dtype=bf16)``. Rank 0 gathers each run's full averaged gradient (``DTensor.full_tensor()``) and measures it
against the reference. Inside the forward, a ``TorchFunctionMode`` records the dtype that ``F.layer_norm`` and
``torch.softmax`` return and a hook the dtype of the logits the model returns (before the kit's ``train_step``
casts them to fp32 for the loss): the policy works per module, so what runs inside a module runs in
``param_dtype``. A run that fails (e.g. a torch whose gloo cannot reduce-scatter bf16) is reported with its error
message instead of numbers.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ampkit._ranks import check_start, run_ranks
from ampkit._util import check_int, check_positive_finite
from ampkit.dtypes import short_name
from ampkit.lessons.transformers_compiled_and_sharded.task import decoder_batches, small_decoder
from ampkit.models import DecoderBlock, lm_loss
from ampkit.train import train_step

__all__ = ["POLICIES", "ShardedRun", "ShardedGrads", "sharded_gradients"]

#: The runs: name -> (param_dtype, reduce_dtype); ``None``: no MixedPrecisionPolicy (fp32, the reference).
POLICIES: dict[str, tuple[torch.dtype, torch.dtype] | None] = {
    "fp32 (no policy)": None,
    "bf16 params, fp32 reduce": (torch.bfloat16, torch.float32),
    "bf16 params, bf16 reduce": (torch.bfloat16, torch.bfloat16),
}


@dataclass(frozen=True)
class ShardedRun:
    """One policy's run, seen from rank 0. ``error``: empty when it ran."""

    name: str
    error: str = ""
    forward_param_dtype: str = ""      # the dtype of a Linear's weight inside forward (after FSDP's cast)
    grad_dtype: str = ""               # the dtype of a sharded parameter's .grad after backward
    norm_dtype: str = ""               # what F.layer_norm returned inside forward (the blocks' and the final norm)
    softmax_dtype: str = ""            # what torch.softmax returned inside forward (attention)
    logits_dtype: str = ""             # the model's output, before train_step's cast to fp32
    rel_error: float = float("nan")    # ||g - g_ref|| / ||g_ref|| over all parameters
    max_abs_error: float = float("nan")
    grad: tuple[float, ...] = field(default=(), repr=False)   # the full averaged gradient, flattened


@dataclass(frozen=True)
class ShardedGrads:
    """The runs of :data:`POLICIES` and how long the processes took (start to results, s)."""

    world_size: int
    runs: dict[str, ShardedRun]
    seconds: float

    def reduce_only_rel(self) -> float:
        """||g(bf16 reduce) - g(fp32 reduce)|| / ||g(fp32 reduce)||: what reducing in bf16 alone changes."""
        a = torch.tensor(self.runs["bf16 params, bf16 reduce"].grad)
        b = torch.tensor(self.runs["bf16 params, fp32 reduce"].grad)
        return float((a - b).norm() / b.norm())


class _OutputDtypes(TorchFunctionMode):
    """Records the dtype each watched torch function returns (the first call of each)."""

    WATCHED = {F.layer_norm: "layer_norm", torch.softmax: "softmax"}

    def __init__(self):
        super().__init__()
        self.seen: dict[str, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = self.WATCHED.get(func)
        if name is not None and isinstance(out, torch.Tensor):
            self.seen.setdefault(name, short_name(out.dtype))
        return out


def _one_run(policy, rank: int, x, y, seed: int) -> tuple[torch.Tensor, str, str, dict[str, str]]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # deferred: seconds to import

    model = small_decoder(seed)
    # a CPU mesh, said out loud: FSDP2's default mesh is on the GPU where torch sees one (the H100 run moved the
    # model to CUDA while the batch stayed on the CPU)
    kw: dict = {"mesh": init_device_mesh("cpu", (dist.get_world_size(),))}
    if policy is not None:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=policy[0], reduce_dtype=policy[1])
    for block in model.blocks:
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    seen: list[str] = []
    block0 = model.blocks[0]
    assert isinstance(block0, DecoderBlock)   # fully_shard keeps the class (as a subclass)
    lin = block0.attn.qkv
    handle = lin.register_forward_pre_hook(lambda mod, args: seen.append(short_name(mod.weight.dtype)))
    dtypes = _OutputDtypes()

    def record_logits(mod, args, out) -> None:   # a forward hook that returns a value would replace the output
        dtypes.seen.setdefault("logits", short_name(out.dtype))

    out_handle = model.register_forward_hook(record_logits)
    grads: list[torch.Tensor] = []

    def read(mp) -> None:
        grads.extend(p.grad.full_tensor().detach().float().flatten() for p in mp.params)
        seen.append(short_name(mp.params[0].grad.dtype))

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with dtypes:
        train_step(model, x, y, lm_loss, optimizer=opt, after_backward=read)
    handle.remove()
    out_handle.remove()
    return torch.cat(grads), seen[0], seen[-1], dtypes.seen


def _worker(cfg: dict) -> dict | None:
    """One rank (in its own process, started by ``ampkit._ranks.run_ranks``): every policy's run; rank 0 returns
    them (name -> (gradient, param dtype, grad dtype, output dtypes, error))."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, world_size = cfg["rank"], cfg["world_size"]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['port']}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=cfg["timeout"]))
    x, y = decoder_batches(1, batch_size=4, seed=cfg["seed"] + 1 + rank)[0]   # each rank its own batch
    result: dict[str, tuple[Sequence[float], str, str, dict[str, str], str]] = {}
    for name, policy in POLICIES.items():
        try:
            grad, p_dtype, g_dtype, dtypes = _one_run(policy, rank, x, y, cfg["seed"])
            result[name] = (grad.tolist(), p_dtype, g_dtype, dtypes, "")
        except Exception as e:   # shown to the learner as the run's error, not a traceback
            result[name] = ((), "", "", {}, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            if name == "fp32 (no policy)":
                raise
    dist.barrier()
    dist.destroy_process_group()
    return result if rank == 0 else None


def sharded_gradients(world_size: int = 2, timeout: float = 60.0, seed: int = 0,
                      start: str | None = None) -> ShardedGrads:
    """Run :data:`POLICIES` on ``world_size`` CPU processes (gloo on 127.0.0.1, a free port); return rank 0's
    :class:`ShardedGrads`. Past ``timeout`` seconds every worker is killed and ``TimeoutError`` raised; a worker
    that fails is a ``RuntimeError`` with its error. Nothing is left running either way (the kit's launcher,
    ``ampkit._ranks.run_ranks``). ``start``: ``"fork"`` (the default where the system has it and torch sees no CUDA
    GPU: the workers start at once, with torch already imported) or ``"spawn"`` (fresh interpreters that import
    torch again: seconds; the only choice on Windows)."""
    world_size = check_int("world_size", world_size, minimum=2, maximum=4)
    timeout = check_positive_finite("timeout", timeout, example="60")
    start = check_start(start)
    import torch.distributed.fsdp as _fsdp  # noqa: F401  (imported once here, before a fork, not once per worker)

    t0 = time.perf_counter()
    payload, = run_ranks("ampkit.lessons.transformers_compiled_and_sharded.sharded:_worker", world_size,
                         {"seed": seed}, timeout=timeout, start=start, results_from=[0])
    seconds = time.perf_counter() - t0
    ref = torch.tensor(payload["fp32 (no policy)"][0])
    runs = {}
    for name, (grad, p_dtype, g_dtype, dtypes, error) in payload.items():
        if error:
            runs[name] = ShardedRun(name, error)
            continue
        g = torch.tensor(grad)
        runs[name] = ShardedRun(name, "", p_dtype, g_dtype, dtypes.get("layer_norm", ""), dtypes.get("softmax", ""),
                                dtypes.get("logits", ""), float((g - ref).norm() / ref.norm()),
                                float((g - ref).abs().max()), tuple(grad))
    return ShardedGrads(world_size, runs, seconds)
