"""Gradient magnitudes against a format's range: what a loss scale of ``2**k`` keeps, flushes and overflows.

Taught in notebook ``03_loss_scaling.ipynb`` (section 3, the visual loss scaler; section 4, partial underflow).
:func:`capture_gradients` records one fp32 backward pass; :func:`scale_report` / :func:`scale_sweep` classify the
values times ``2**k`` in a format with :func:`ampkit.formats.classify`; :func:`safe_window` is the range of ``k``
where nothing overflows and (almost) nothing flushes. Data only: :mod:`ampkit.widgets.scaling` draws it
(notebook 03's own experiments, such as ``gradient_agreement``, are in :mod:`ampkit.lessons.loss_scaling`).

>>> r = scale_report(torch.tensor([2.0**-30, 2.0**-10]), 8, "fp16"); r.flushed, r.normal
(0.0, 0.5)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ampkit._util import check_int, check_number
from ampkit.formats import Classification, classify

__all__ = ["capture_gradients", "log2_histogram", "ScaleReport", "scale_report", "scale_sweep", "safe_window",
           "SAFE_MAX_FLUSHED"]

#: :func:`safe_window`'s default: at most this fraction of the nonzero gradients may flush to zero (0.1 %).
SAFE_MAX_FLUSHED = 0.001

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def capture_gradients(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn | None = None,
                      *, loss_weight: float = 1.0, activations: bool = True) -> torch.Tensor:
    """All gradient values of one fp32 backward pass, flattened: parameter gradients and (by default) the
    gradients flowing out of every leaf module (activation gradients). The model is left with no grads.

    ``loss_fn`` defaults to cross-entropy; the loss is multiplied by ``loss_weight``.

    >>> m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    >>> g = capture_gradients(m, torch.ones(2, 4), torch.tensor([0, 1])); g.dtype, g.numel() > 59
    (torch.float32, True)
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    loss_fn = torch.nn.functional.cross_entropy if loss_fn is None else loss_fn
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise ValueError("capture_gradients needs an fp32 model (the point is to see gradients before any cast)")
    captured: list[torch.Tensor] = []
    handles = []

    def keep(grad: torch.Tensor) -> None:
        captured.append(grad.detach().reshape(-1).float().clone())

    def fwd_hook(module, args, out):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(keep)

    if activations:
        for mod in model.modules():
            if not list(mod.children()):
                handles.append(mod.register_forward_hook(fwd_hook))
    try:
        for p in model.parameters():
            p.grad = None
        loss = loss_fn(model(x), y) * loss_weight
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    grads = [p.grad.detach().reshape(-1).clone() for p in model.parameters() if p.grad is not None]
    for p in model.parameters():
        p.grad = None
    return torch.cat(grads + captured)


def log2_histogram(values: torch.Tensor, lo: int = -64, hi: int = 32, bins_per_octave: int = 2
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Histogram of log2|v| for the nonzero finite ``values``: ``(edges, fractions)``, fractions of ALL nonzero
    values (values outside ``[lo, hi)`` are clipped into the end bins).

    >>> edges, frac = log2_histogram(torch.tensor([1.0, 0.5, 0.0]), lo=-2, hi=2, bins_per_octave=1)
    >>> edges.tolist(), frac.tolist()
    ([-2.0, -1.0, 0.0, 1.0, 2.0], [0.0, 0.5, 0.5, 0.0])
    """
    lo = check_int("lo", lo, minimum=None)
    hi = check_int("hi", hi, minimum=lo + 1)
    bins_per_octave = check_int("bins_per_octave", bins_per_octave)
    v = values.detach().reshape(-1).double().abs()
    v = v[(v > 0) & torch.isfinite(v)]
    nbins = (hi - lo) * bins_per_octave
    edges = torch.linspace(lo, hi, nbins + 1, dtype=torch.float64)
    if v.numel() == 0:
        return edges, torch.zeros(nbins, dtype=torch.float64)
    idx = ((torch.log2(v) - lo) * bins_per_octave).floor().clamp(0, nbins - 1).long()
    counts = torch.bincount(idx, minlength=nbins).double()
    return edges, counts / v.numel()


@dataclass(frozen=True)
class ScaleReport:
    """What multiplying gradients by ``2**log2_scale`` and storing them in ``fmt`` does, as fractions of the
    NONZERO gradient values: ``flushed`` (become 0), ``subnormal`` (kept with fewer bits), ``normal``,
    ``overflow`` (become inf/NaN, or saturate for e4m3fn). ``classification`` is the raw
    :class:`ampkit.formats.Classification`."""

    fmt: str
    log2_scale: int
    flushed: float
    subnormal: float
    normal: float
    overflow: float
    classification: Classification


def scale_report(values: torch.Tensor, log2_scale: int, fmt: str | torch.dtype = "fp16") -> ScaleReport:
    """Classify ``values * 2**log2_scale`` in ``fmt`` with :func:`ampkit.formats.classify` (exact: a power-of-two
    scale only moves the exponent), as fractions of the nonzero finite values.

    >>> r = scale_report(torch.tensor([1e-9, 1e-6, 1.0, 0.0]), 0, "fp16"); round(r.flushed, 3)
    0.333
    """
    log2_scale = check_int("log2_scale", log2_scale, minimum=None)
    v = values.detach().reshape(-1).float()
    c = classify(torch.ldexp(v, torch.tensor(log2_scale)), fmt)
    live = 1.0 - c.zero - c.nonfinite
    if live <= 0:
        raise ValueError("all gradient values are zero or non-finite: nothing to scale")
    return ScaleReport(c.fmt, log2_scale, c.flushed / live, c.subnormal / live, c.normal / live,
                       c.overflow / live, c)


def scale_sweep(values: torch.Tensor, fmt: str | torch.dtype = "fp16", lo: int = -8, hi: int = 40
                ) -> dict[int, ScaleReport]:
    """:func:`scale_report` for every integer log2(scale) in ``[lo, hi]`` (what the visual scaler's slider spans).

    >>> sorted(scale_sweep(torch.tensor([1e-3]), "fp16", 0, 2))
    [0, 1, 2]
    """
    lo = check_int("lo", lo, minimum=None)
    hi = check_int("hi", hi, minimum=lo)
    return {k: scale_report(values, k, fmt) for k in range(lo, hi + 1)}


def safe_window(values: torch.Tensor, fmt: str | torch.dtype = "fp16", lo: int = -8, hi: int = 40,
                max_flushed: float = SAFE_MAX_FLUSHED, *, sweep: dict[int, ScaleReport] | None = None
                ) -> tuple[int, int] | None:
    """The range ``(a, b)`` of log2(scale) in ``[lo, hi]`` where nothing overflows and at most ``max_flushed``
    of the nonzero gradients flush to zero; ``None`` when no scale in range is safe. ``sweep``: reuse a
    :func:`scale_sweep` of the same values instead of computing it again.

    >>> safe_window(torch.tensor([2.0**-30, 1.0]), "fp16", lo=0, hi=20)
    (6, 15)
    """
    max_flushed = check_number("max_flushed", max_flushed, example="0.001")
    if not 0 <= max_flushed < 1:
        raise ValueError(f"max_flushed must be in [0, 1); got {max_flushed!r}")
    reports = scale_sweep(values, fmt, lo, hi) if sweep is None else sweep
    ok = [k for k, r in reports.items() if r.overflow == 0 and r.flushed <= max_flushed]
    if not ok:
        return None
    return ok[0], ok[-1]   # the conditions are monotone in k: the safe scales form one interval
