"""Notebook 03's experiments: a task whose gradients underflow fp16, the run that shows it, one step's agreement.

Taught in notebook ``03_loss_scaling.ipynb`` (sections 1–2, 4–5, 9–10). :func:`underflow_task` builds a seeded
classification task whose loss is multiplied by a tiny ``loss_weight`` (and the learning rate divided by it), so
that in fp16 every gradient flushes to zero unless the loss is scaled; :func:`train_task` trains it at a precision
level with a loss scaler and records what the notebook plots (loss, zero gradients, largest gradient, skips);
:func:`gradient_agreement` compares one real fp16 step at scale ``2**k`` with fp32. A lesson, above the engine
(:mod:`ampkit.scaling`, :mod:`ampkit.train`): the engine does not know it.

>>> t = underflow_task(); run = train_task(t, "fp16", steps=2); run.zero_grads[0] > 0.99
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampkit._util import check_int, check_positive_finite
from ampkit.data import make_blobs
from ampkit.formats import resolve_format
from ampkit.i18n import tr
from ampkit.models import build_model
from ampkit.precision import MixedPrecision, apply_level
from ampkit.protocols import Scaler
from ampkit.scaling import log2_ceiling
from ampkit.train import evaluate, train_step

__all__ = ["UnderflowTask", "underflow_task", "TaskRun", "train_task", "GradAgreement", "gradient_agreement"]


@dataclass(frozen=True)
class UnderflowTask:
    """Notebook 03's task: classify Gaussian blobs with a small MLP, the loss multiplied by ``loss_weight`` and
    the learning rate divided by it — identical training in exact arithmetic, but gradients ``loss_weight``
    times smaller (as deep nets' activation gradients often are)."""

    X: torch.Tensor
    y: torch.Tensor
    loss_weight: float
    lr: float
    hidden: int
    batch_size: int
    seed: int

    def model(self) -> torch.nn.Module:
        """A fresh MLP with the same seeded initial weights every time (torch's global RNG left as it was)."""
        return build_model("mlp", seed=self.seed, in_features=self.X.shape[1], hidden=self.hidden,
                           out_features=int(self.y.max()) + 1, depth=2)


def underflow_task(loss_weight: float = 2.0**-18, *, n_samples: int = 2048, n_features: int = 32,
                   n_classes: int = 8, hidden: int = 64, batch_size: int = 128, lr: float = 0.05,
                   seed: int = 0) -> UnderflowTask:
    """Build the seeded task (widths <= 128: fp16 matmuls are slow on CPUs without fp16 units).

    >>> t = underflow_task(); t.X.shape, t.loss_weight == 2.0**-18
    (torch.Size([2048, 32]), True)
    """
    loss_weight = check_positive_finite("loss_weight", loss_weight)
    X, y = make_blobs(n_samples, n_features=n_features, n_classes=n_classes, spread=2.0, seed=seed, task_seed=seed)
    return UnderflowTask(X, y, loss_weight, lr, hidden, batch_size, seed)


@dataclass
class TaskRun:
    """Per step of :func:`train_task`: the (unweighted) loss, the fraction of gradient values that were exactly
    zero after backward, the largest |gradient| (unscaled, params and activations; ``inf`` where the scaled
    gradients overflowed: held an inf or a nan), whether it was skipped and the loss scale used (1.0 without a
    scaler); plus the scaler used and the final accuracy on the training set."""

    losses: list[float]
    zero_grads: list[float]
    grad_max: list[float]
    skipped: list[bool]
    scales: list[float]
    scaler: Scaler | None
    accuracy: float

    def final_loss(self, last: int = 20) -> float:
        """Mean loss of the last ``last`` steps."""
        tail = self.losses[-last:]
        return sum(tail) / len(tail)

    def log2_ceiling(self, fmt: str | torch.dtype = "fp16") -> list[float]:
        """Per step, log2 of the scale from which scale × *this run's own* largest gradient overflows ``fmt``
        (:func:`ampkit.scaling.log2_ceiling`). Where the scaled gradients overflowed, the gradient's size is not
        known, only that the scale used was already too large: the value there is log2 of that scale (an upper
        bound). So a step overflowed exactly where ``log2(scales[t]) >= ceiling[t]``.

        >>> from ampkit.scaling import StaticLossScaler
        >>> run = train_task(underflow_task(), "fp16", StaticLossScaler(2.0**40), steps=1)
        >>> run.grad_max, run.log2_ceiling()
        ([inf], [40.0])
        """
        known = log2_ceiling([g if math.isfinite(g) else 0.0 for g in self.grad_max], fmt)
        return [c if math.isfinite(g) else math.log2(s) for c, g, s in zip(known, self.grad_max, self.scales)]


def train_task(task: UnderflowTask, dtype: str | torch.dtype = "fp16", scaler: Scaler | None = None, steps: int = 150,
               *, level: str = "O1", clip_norm: float | None = None, unscale_before_clip: bool = True,
               scale_after_backward: float | None = None) -> TaskRun:
    """Train ``task`` for ``steps`` SGD steps at precision ``level``/``dtype`` (via
    :func:`ampkit.precision.apply_level`; ``dtype="fp32"`` means O0) with ``scaler`` (a :class:`Scaler`: ampkit's
    or ``torch.amp.GradScaler``; or None).

    Each step is :func:`ampkit.train.train_step` (the kit's one training step); between backward and the
    optimizer step its ``after_backward`` hook records the zero fraction and the largest |gradient|, and applies
    the options below.

    ``clip_norm``: clip the gradient norm — after ``scaler.unscale_`` (right) or, with
    ``unscale_before_clip=False``, on the still-scaled gradients (wrong). ``scale_after_backward=S``: the mistake
    of multiplying gradients by ``S`` *after* an unscaled backward and dividing back (recovers nothing).

    >>> run = train_task(underflow_task(), "fp32", steps=3); len(run.losses)
    3
    """
    steps = check_int("steps", steps)
    fp32 = dtype in ("fp32", "float32", torch.float32)
    model = task.model()
    opt = torch.optim.SGD(model.parameters(), lr=task.lr / task.loss_weight, momentum=0.9)
    mp = apply_level(model, opt, "O0" if fp32 else level, "bf16" if fp32 else dtype)
    gen = torch.Generator().manual_seed(task.seed + 1)
    acts: list[float] = []

    def fwd_hook(module, args, out):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda g: acts.append(float(g.detach().abs().max())))

    handles = [m.register_forward_hook(fwd_hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    losses, zeros, gmax, skipped, used = [], [], [], [], []
    params = [p for g in mp.optimizer.param_groups for p in g["params"]]
    n_values = sum(p.numel() for p in params)

    def weighted_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, y) * task.loss_weight

    def after_backward(mp: MixedPrecision) -> None:
        """Between backward and the optimizer step: the lesson's mistakes, its measurements, clipping."""
        if scale_after_backward is not None:
            with torch.no_grad():
                for p in params:
                    p.grad.mul_(scale_after_backward)
                    p.grad.div_(scale_after_backward)
        s = scaler.get_scale() if scaler is not None else 1.0
        zeros.append(sum(int((p.grad == 0).sum()) for p in params) / n_values)
        largest = [float(p.grad.abs().max()) for p in params] + acts
        gmax.append(max(largest) / s if all(math.isfinite(g) for g in largest) else math.inf)  # max() skips a nan
        used.append(s)
        if clip_norm is not None:
            if scaler is not None and unscale_before_clip:
                scaler.unscale_(mp.optimizer)
            torch.nn.utils.clip_grad_norm_(params, clip_norm)

    try:
        for _ in range(steps):
            idx = torch.randint(0, task.X.shape[0], (task.batch_size,), generator=gen)
            acts.clear()
            loss = train_step(mp, task.X[idx], task.y[idx], weighted_loss, scaler, after_backward=after_backward)
            skipped.append(mp.last_step_skipped())
            losses.append(float(loss) / task.loss_weight)
    finally:
        for h in handles:
            h.remove()
    return TaskRun(losses, zeros, gmax, skipped, used, scaler, evaluate(mp, task.X, task.y))


@dataclass(frozen=True)
class GradAgreement:
    """One step's parameter gradients under fp16 autocast at scale ``2**log2_scale`` (unscaled again), against
    the same step in fp32: the fraction that became exactly zero, the cosine between the two gradient vectors
    (nan when nothing survived) and the ratio of their norms."""

    log2_scale: int
    zero_fraction: float
    cosine: float
    norm_ratio: float


def gradient_agreement(task: UnderflowTask, log2_scale: int, dtype: str | torch.dtype = "fp16", batch: int = 128
                       ) -> GradAgreement:
    """Compare one backward pass of ``task`` (an :func:`underflow_task`) under autocast in
    ``dtype`` with the loss multiplied by ``2**log2_scale``, unscaled, against fp32 (same weights, same batch).

    >>> gradient_agreement(underflow_task(), 16).cosine > 0.999
    True
    """
    log2_scale = check_int("log2_scale", log2_scale, minimum=None)
    low = resolve_format(dtype)
    if low not in (torch.float16, torch.bfloat16):
        raise ValueError(tr("dtype must be fp16 or bf16 (what autocast runs in); got {dtype!r}", dtype=dtype))
    x, y = task.X[:batch], task.y[:batch]

    def grads(autocast_dtype: torch.dtype | None, scale: float) -> torch.Tensor:
        model = task.model()
        with torch.autocast("cpu", dtype=autocast_dtype or torch.float16, enabled=autocast_dtype is not None):
            out = model(x)
        loss = torch.nn.functional.cross_entropy(out.float(), y) * task.loss_weight
        (loss * scale).backward()
        parts = []
        for p in model.parameters():
            assert p.grad is not None  # the loss uses every parameter
            parts.append(p.grad.reshape(-1).float())
        return torch.cat(parts) / scale

    ref = grads(None, 1.0)
    got = grads(low, 2.0**log2_scale)
    zero = float((got == 0).float().mean())
    norm = float(got.norm())
    cos = float(torch.dot(got.double(), ref.double()) / (norm * float(ref.norm()))) if norm > 0 else math.nan
    return GradAgreement(log2_scale, zero, cos, norm / float(ref.norm()))
