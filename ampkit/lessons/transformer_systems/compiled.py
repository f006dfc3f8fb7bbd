"""``torch.compile`` under autocast: a compiled training step against the eager one, and what compiling costs.

Taught in ``08_transformers_compiled_and_sharded.ipynb``. :func:`compile_vs_eager` trains two copies of the same
seeded decoder with the kit's one training step (:func:`ampkit.train.train_step`, level O1 in bf16 from
:func:`ampkit.precision.apply_level`): one eager, one whose model is ``torch.compile``-d (handed to ``train_step``
as ``forward_loss``). It records both loss curves and the step times: the first compiled step (the compile, cold
in this process), the later steps of the same shape (no new compile) and one step at a new shape (a recompile).
A counting backend (a documented custom-backend callable that hands each graph on to the chosen backend) counts the
graphs compiled.

>>> BACKENDS
('eager', 'aot_eager', 'inductor')
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from ampkit._util import check_choice, check_int
from ampkit.i18n import tr
from ampkit.lessons.transformer_systems.task import decoder_batches, small_decoder
from ampkit.models import lm_loss
from ampkit.precision import apply_level
from ampkit.train import train_step

__all__ = ["BACKENDS", "CompileRun", "CountingBackend", "compile_vs_eager"]

#: The ``torch.compile`` backends :func:`compile_vs_eager` accepts.
BACKENDS: tuple[str, ...] = ("eager", "aot_eager", "inductor")


class CountingBackend:
    """A ``torch.compile`` backend that counts the graphs it is given and hands each one to ``backend``:
    ``torch.compile(fn, backend=CountingBackend("eager"))``, then read ``.graphs``.

    >>> CountingBackend("aot_eager").graphs
    0
    """

    def __init__(self, backend: str = "aot_eager"):
        self.backend = check_choice("backend", backend, BACKENDS)
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs += 1
        return torch._dynamo.lookup_backend(self.backend)(gm, example_inputs)


@dataclass(frozen=True)
class CompileRun:
    """Losses and step times (s) of an eager and a compiled run of the same steps; graph counts."""

    backend: str
    eager_losses: tuple[float, ...]
    compiled_losses: tuple[float, ...]
    eager_step_s: float          # median eager step, the first left out
    first_step_s: float          # the first compiled step: the compile (cold in this process) and one step
    warm_step_s: float           # median of the later compiled steps of the same shape
    new_shape_step_s: float      # the first compiled step at a new batch shape: a recompile and one step
    graphs_after_warm: int       # graphs compiled by the end of the same-shape steps
    graphs_after_new_shape: int  # graphs compiled after the step at a new shape

    @property
    def max_abs_diff(self) -> float:
        """The largest |compiled loss - eager loss| over the steps."""
        return max(abs(a - b) for a, b in zip(self.eager_losses, self.compiled_losses))

    @property
    def bitwise_equal(self) -> bool:
        """Whether every compiled loss is the same float as the eager one."""
        return self.eager_losses == self.compiled_losses


def _timed(mp, x, y, forward_loss=None) -> tuple[float, float]:
    t0 = time.perf_counter()
    value = train_step(mp, x, y, lm_loss, forward_loss=forward_loss).item()   # .item() waits for the step
    return value, time.perf_counter() - t0


def compile_vs_eager(steps: int = 6, backend: str = "aot_eager", dynamic: bool | None = False, seed: int = 0,
                     batch_size: int = 8, lr: float = 3e-3, **model_kw) -> CompileRun:
    """Train the small decoder ``steps`` steps eagerly and compiled with ``backend`` (level O1, bf16, AdamW at
    ``lr``); then one compiled step at half the batch and context (a new shape). ``dynamic=False`` makes each new
    shape a new static graph; ``None`` is ``torch.compile``'s default (the second shape is compiled with symbolic
    sizes, which takes longer). ``torch.compiler.reset()`` runs first, so the first compile is cold in this process
    (inductor may still find its graphs in its cache on disk from an earlier process)."""
    steps = check_int("steps", steps)
    backend = check_choice("backend", backend, BACKENDS)
    if dynamic not in (None, False, True):
        raise ValueError(tr("dynamic must be None, False or True (torch.compile's argument); got {dynamic!r}",
                            dynamic=dynamic))
    context = model_kw.get("context", 32)
    data = decoder_batches(steps, batch_size, context, seed)

    def level(model):
        return apply_level(model, torch.optim.AdamW(model.parameters(), lr=lr), "O1", "bf16")

    eager = level(small_decoder(seed, **model_kw))
    eager_runs = [_timed(eager, x, y) for x, y in data]

    torch.compiler.reset()
    model = small_decoder(seed, **model_kw)
    mp = level(model)
    counter = CountingBackend(backend)
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)

    def forward_loss(x, y):   # mp.forward with the compiled model: autocast around it, the output as fp32
        with mp.autocast():
            out = compiled(x)
        return lm_loss(out.float(), y)

    runs = [_timed(mp, x, y, forward_loss) for x, y in data]
    graphs_warm = counter.graphs
    x, y = data[0]
    half = max(1, context // 2)
    few = max(1, batch_size // 2)
    _, new_shape = _timed(mp, x[:few, :half], y[:few, :half], forward_loss)
    later = [t for _, t in runs[1:]] or [float("nan")]
    return CompileRun(backend, tuple(v for v, _ in eager_runs), tuple(v for v, _ in runs),
                      statistics.median([t for _, t in eager_runs[1:]] or [eager_runs[0][1]]), runs[0][1],
                      statistics.median(later), new_shape, graphs_warm, counter.graphs)
