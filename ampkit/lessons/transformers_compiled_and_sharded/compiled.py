"""``torch.compile`` under autocast: a compiled training step against the eager one, and what compiling costs.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. :func:`compile_vs_eager` trains two copies of the same
seeded decoder with the kit's one training step (:func:`ampkit.train.train_step`, level O1 from
:func:`ampkit.precision.apply_level`, bf16, or fp16 with a ``torch.amp.GradScaler``): one eager, one whose model is
``torch.compile``-d (handed to ``train_step`` as ``forward_loss``). It records both loss curves, the first step's
gradients (compared bit for bit) and the step times: the first compiled step (the compile, cold in this process),
the later steps of the same shape (no new compile) and one step at a new shape (a recompile). A counting backend
(a documented custom-backend callable that hands each graph on to the chosen backend) counts the graphs compiled;
with ``aot_eager`` it also records the ops of the backward graph that AOTAutograd traced.

The compiled backward is traced by AOTAutograd under the autocast state that
``torch._functorch.config.backward_pass_autocast`` names: ``"same_as_forward"`` (torch 2.13's default: the
forward's autocast) or ``"off"`` (no autocast, as eager autograd runs the backward of the kit's ``train_step``).
:func:`backward_autocast` sets it for a block; :func:`fp32_region_grad` runs the model of pytorch#153044, where the
difference turns an fp32 gradient into ``inf``. :func:`autocast_rules` says which of a graph's ops autocast has a
rule for on a device (the CPU's and CUDA's lists differ: CUDA's fp32 list holds ``sum``, the CPU's does not).

>>> BACKENDS
('eager', 'aot_eager', 'inductor')
"""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.diagnose import RecordingScaler
from ampkit.i18n import tr
from ampkit.lessons.transformers_compiled_and_sharded.task import decoder_batches, small_decoder
from ampkit.models import lm_loss
from ampkit.precision import apply_level
from ampkit.train import train_step

__all__ = ["BACKENDS", "BACKWARD_AUTOCAST", "CompileRun", "CountingBackend", "Fp32Region", "backward_autocast",
           "current_backward_autocast", "autocast_rules",
           "compile_vs_eager", "fp32_region_grad"]

#: The ``torch.compile`` backends :func:`compile_vs_eager` accepts.
BACKENDS: tuple[str, ...] = ("eager", "aot_eager", "inductor")

#: The values of ``torch._functorch.config.backward_pass_autocast`` the kit sets (the config also takes a list of
#: autocast keyword dicts).
BACKWARD_AUTOCAST: tuple[str, ...] = ("same_as_forward", "off")


class CountingBackend:
    """A ``torch.compile`` backend that counts the graphs it is given and hands each one to ``backend``:
    ``torch.compile(fn, backend=CountingBackend("eager"))``, then read ``.graphs``. With ``"aot_eager"`` it also
    records, in ``.backward_ops``, the distinct aten ops (``"aten::mm"``, ``"aten::sum.dim_IntList"``, ...) of each
    backward graph AOTAutograd traced (``aot_eager`` with a ``bw_compiler`` that reads the graph, then runs it as
    ``aot_eager``'s own ``boxed_nop`` does).

    >>> CountingBackend("aot_eager").graphs
    0
    """

    def __init__(self, backend: str = "aot_eager"):
        self.backend = check_choice("backend", backend, BACKENDS)
        self.graphs = 0
        self.backward_ops: list[str] = []

    def _read_backward(self, gm: torch.fx.GraphModule, example_inputs):
        from torch._dynamo.backends.debugging import boxed_nop

        for node in gm.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                name = node.target.name()
                if name not in self.backward_ops:
                    self.backward_ops.append(name)
        return boxed_nop(gm, example_inputs)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs += 1
        if self.backend == "aot_eager":
            from torch._dynamo.backends.debugging import aot_eager

            return aot_eager(gm, example_inputs, bw_compiler=self._read_backward)
        return torch._dynamo.lookup_backend(self.backend)(gm, example_inputs)


#: The dispatch keys that hold autocast's rules, per device.
_AUTOCAST_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def autocast_rules(ops, device: str = "cpu") -> tuple[str, ...]:
    """Those of ``ops`` (names such as ``"aten::mm"`` or ``"aten::sum.dim_IntList"``) that autocast has a rule for on
    ``device`` (``"cpu"`` or ``"cuda"``) in this torch: a kernel registered for its autocast dispatch key. Read from
    the dispatcher, so it works for CUDA on a CPU-only torch too.

    >>> autocast_rules(["aten::mm", "aten::sum.dim_IntList", "aten::gelu_backward"], "cpu")
    ('aten::mm',)
    >>> autocast_rules(["aten::mm", "aten::sum.dim_IntList", "aten::gelu_backward"], "cuda")
    ('aten::mm', 'aten::sum.dim_IntList')
    """
    key = _AUTOCAST_KEYS[check_choice("device", device, tuple(_AUTOCAST_KEYS))]
    return tuple(op for op in ops if torch._C._dispatch_has_kernel_for_dispatch_key(op, key))


class Fp32Region(nn.Module):
    """``module`` run in fp32 inside an autocast region: autocast disabled, the input cast to fp32 (the pattern of
    ``torch.autocast``'s docstring for forcing a subregion into one dtype)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):
            return self.module(x.float())


def current_backward_autocast():
    """The value of ``torch._functorch.config.backward_pass_autocast`` now."""
    import torch._functorch.config as functorch_config

    return functorch_config.backward_pass_autocast


@contextlib.contextmanager
def backward_autocast(setting: str | None) -> Iterator[None]:
    """``torch._functorch.config.backward_pass_autocast = setting`` inside the block (``None``: left as it is).
    The setting counts when a graph is compiled (AOTAutograd traces the backward then), not when it runs."""
    if setting is None:
        yield
        return
    setting = check_choice("backward_pass_autocast", setting, BACKWARD_AUTOCAST)
    import torch._functorch.config as functorch_config

    with functorch_config.patch(backward_pass_autocast=setting):
        yield


@dataclass(frozen=True)
class CompileRun:
    """Losses and step times (s) of an eager and a compiled run of the same steps; graph counts; what the first
    step's gradients say."""

    backend: str
    eager_losses: tuple[float, ...]
    compiled_losses: tuple[float, ...]
    eager_step_s: float          # median eager step, the first left out
    first_step_s: float          # the first compiled step: the compile (cold in this process) and one step
    warm_step_s: float           # median of the later compiled steps of the same shape
    new_shape_step_s: float      # the first compiled step at a new batch shape (nan when not run)
    graphs_after_warm: int       # graphs compiled by the end of the same-shape steps
    graphs_after_new_shape: int  # graphs compiled after the step at a new shape
    dtype: str = "bf16"
    backward_pass_autocast: str = "same_as_forward"   # the setting the compiled step was traced under
    eager_skipped: tuple[bool, ...] = ()               # steps the GradScaler skipped (fp16 only)
    compiled_skipped: tuple[bool, ...] = ()
    grads_differ: tuple[str, ...] = ()     # parameters whose first-step gradient differs from eager's (bits)
    nonfinite_grads: tuple[str, ...] = ()  # parameters with an inf/NaN in the compiled first-step gradient
    backward_ops: tuple[str, ...] = ()     # the distinct aten ops of the compiled backward graph(s) (aot_eager only)

    @property
    def max_abs_diff(self) -> float:
        """The largest |compiled loss - eager loss| over the steps."""
        return max(abs(a - b) for a, b in zip(self.eager_losses, self.compiled_losses))

    @property
    def bitwise_equal(self) -> bool:
        """Whether every compiled loss is the same float as the eager one."""
        return self.eager_losses == self.compiled_losses


def _timed(mp, x, y, scaler=None, forward_loss=None, after_backward=None) -> tuple[float, float]:
    t0 = time.perf_counter()
    value = train_step(mp, x, y, lm_loss, scaler, forward_loss=forward_loss,
                       after_backward=after_backward).item()   # .item() waits for the step
    return value, time.perf_counter() - t0


def compile_vs_eager(steps: int = 6, backend: str = "aot_eager", dynamic: bool | None = False, seed: int = 0,
                     batch_size: int = 8, lr: float = 3e-3, dtype: str = "bf16",
                     backward_pass_autocast: str | None = None, fp32_head: bool = False, new_shape: bool = True,
                     **model_kw) -> CompileRun:
    """Train the small decoder ``steps`` steps eagerly and compiled with ``backend`` (level O1 in ``dtype``, AdamW at
    ``lr``; ``"fp16"`` adds a ``torch.amp.GradScaler`` with its defaults to both runs); then, with ``new_shape``,
    one compiled step at half the batch and context (a new shape). ``dynamic=False`` makes each new shape a new
    static graph; ``None`` is ``torch.compile``'s default (the second shape is compiled with symbolic sizes, which
    takes longer). ``backward_pass_autocast``: ``"same_as_forward"`` or ``"off"`` while compiling (``None``: torch's
    setting as it is). ``fp32_head``: the LM head runs in an :class:`Fp32Region` in both runs.
    ``torch.compiler.reset()`` runs first, so the first compile is cold in this process (inductor may still find its
    graphs in its cache on disk from an earlier process)."""
    steps = check_int("steps", steps)
    backend = check_choice("backend", backend, BACKENDS)
    dtype = check_choice("dtype", dtype, ("bf16", "fp16"))
    if dynamic not in (None, False, True):
        raise ValueError(tr("dynamic must be None, False or True (torch.compile's argument); got {dynamic!r}",
                            dynamic=dynamic))
    if backward_pass_autocast is not None:
        backward_pass_autocast = check_choice("backward_pass_autocast", backward_pass_autocast, BACKWARD_AUTOCAST)
    context = model_kw.get("context", 32)
    data = decoder_batches(steps, batch_size, context, seed)

    def build():
        model = small_decoder(seed, **model_kw)
        if fp32_head:
            model.add_module("head", Fp32Region(model.head))   # replaces the child (models.py types it as a Linear)
        mp = apply_level(model, torch.optim.AdamW(model.parameters(), lr=lr), "O1", dtype)
        scaler = RecordingScaler(torch.amp.GradScaler("cpu")) if dtype == "fp16" else None
        return model, mp, scaler

    def first_grads(into: list):
        def read(mp) -> None:
            if not into:
                into.extend((n, p.grad.detach().clone()) for n, p in zip(names, mp.params))
        return read

    model, mp, scaler = build()
    names = [n for n, _ in model.named_parameters()]
    eager_grads: list = []
    eager_runs = [_timed(mp, x, y, scaler, after_backward=first_grads(eager_grads)) for x, y in data]
    eager_skipped = tuple(scaler.history.skipped) if scaler else ()

    torch.compiler.reset()
    model, mp, scaler = build()
    counter = CountingBackend(backend)
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)

    def forward_loss(x, y):   # mp.forward with the compiled model: autocast around it, the output as fp32
        with mp.autocast():
            out = compiled(x)
        return lm_loss(out.float(), y)

    comp_grads: list = []
    with backward_autocast(backward_pass_autocast):
        setting = current_backward_autocast()
        runs = [_timed(mp, x, y, scaler, forward_loss, first_grads(comp_grads)) for x, y in data]
        graphs_warm = counter.graphs
        new_shape_s = float("nan")
        if new_shape:
            x, y = data[0]
            half, few = max(1, context // 2), max(1, batch_size // 2)
            _, new_shape_s = _timed(mp, x[:few, :half], y[:few, :half], scaler, forward_loss)
    differ = tuple(n for (n, a), (_, b) in zip(eager_grads, comp_grads) if not torch.equal(a, b))
    nonfinite = tuple(n for n, g in comp_grads if not bool(torch.isfinite(g).all()))
    later = [t for _, t in runs[1:]] or [float("nan")]
    return CompileRun(backend, tuple(v for v, _ in eager_runs), tuple(v for v, _ in runs),
                      statistics.median([t for _, t in eager_runs[1:]] or [eager_runs[0][1]]), runs[0][1],
                      statistics.median(later), new_shape_s, graphs_warm, counter.graphs, dtype, str(setting),
                      eager_skipped, tuple(scaler.history.skipped[:steps]) if scaler else (), differ, nonfinite,
                      tuple(counter.backward_ops))


class _FP32Tail(nn.Module):
    """The model of pytorch#153044 on the CPU: ``y = x @ ones(4, 4)`` under autocast, then ``Linear(4, 1)`` in an
    autocast-disabled fp32 region."""

    ones: torch.Tensor   # a buffer

    def __init__(self):
        super().__init__()
        self.register_buffer("ones", torch.ones(4, 4))
        self.linear = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.ones
        with torch.autocast(x.device.type, enabled=False):
            return self.linear(y.float())


def fp32_region_grad(compiled: bool, backward_pass_autocast: str | None = None, factor: float = 16384.0,
                     dtype: str = "fp16") -> tuple[float, ...]:
    """pytorch#153044 on the CPU: the forward under ``torch.autocast("cpu", dtype)``, the loss
    ``factor * y`` outside it, backward outside it (as in AMP's recipe); return the fp32 ``Linear``'s weight
    gradient. ``x`` is ``ones(1, 4)``, so each entry is ``factor * 4`` exactly, in fp32. ``compiled``: the model
    through ``torch.compile(backend="aot_eager")``, traced under ``backward_pass_autocast`` (``None``: torch's
    setting as it is)."""
    dtype = check_choice("dtype", dtype, ("bf16", "fp16"))
    factor = check_positive_finite("factor", factor, example="16384.0")
    with torch.random.fork_rng(devices=[]):   # the same weights every call; torch's RNG left as it was
        torch.manual_seed(0)
        model = _FP32Tail()
    run: Callable[[torch.Tensor], torch.Tensor] = model
    if compiled:
        torch.compiler.reset()
        run = torch.compile(model, backend="aot_eager")
    with backward_autocast(backward_pass_autocast):
        with torch.autocast("cpu", dtype=torch.bfloat16 if dtype == "bf16" else torch.float16):
            y = run(torch.ones(1, 4))
        (y * factor).sum().backward()
    grad = model.linear.weight.grad
    assert grad is not None  # the backward pass above filled it
    return tuple(grad.flatten().tolist())
