"""The numerical checks behind notebook 02's claims about O3 and evaluation (``02_autocast_and_levels.ipynb``).

- :func:`adam_step_in`: one real ``torch.optim.Adam`` step on weights stored in fp16/bf16 (what O3 does), showing
  where Adam's second moment ``v = (1 - beta2) g^2`` underflows to 0 and the update ``m / (sqrt(v) + eps)``
  becomes inf (tiny gradient) or NaN (zero gradient: 0/0, with ``eps = 1e-8`` itself rounding to 0 in fp16).
- :func:`evaluate_under_autocast`: the same fp32 model evaluated with and without ``torch.autocast``: how far the
  logits move and whether any prediction changes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ampkit.device import check_autocast_dtype, pick_device
from ampkit.formats import format_name, resolve_format
from ampkit.i18n import tr

__all__ = ["EvalGap", "evaluate_under_autocast", "AdamStep", "adam_step_in"]


@dataclass(frozen=True)
class EvalGap:
    """The same fp32 model evaluated twice, plainly and under ``torch.autocast``: how far the logits move and
    whether any prediction changes."""

    dtype: str
    max_abs_diff: float
    mean_abs_diff: float
    accuracy_fp32: float
    accuracy_autocast: float
    n_changed: int
    n: int


def _model_device(model: nn.Module, device: str | torch.device | None) -> torch.device:
    """The device ``model`` lives on (the inputs go there); ``device``, when given, must name that same device."""
    param = next(model.parameters(), None)
    if param is None:
        return pick_device(device)
    if device is not None and pick_device(device).type != param.device.type:
        raise ValueError(tr("device={device!r} but the model's parameters are on {param}: move the model "
                            "there first (model.to({device!r})), or leave device out to use the model's device",
                            device=str(device), param=param.device))
    return param.device


def evaluate_under_autocast(model: nn.Module, X: torch.Tensor, y: torch.Tensor, dtype: str | torch.dtype = "bf16",
                            device: str | torch.device | None = None) -> EvalGap:
    """Run fp32 ``model`` on ``X`` in eval mode without autocast and under ``torch.autocast(device, dtype)``;
    ``device`` is the model's own (the kit's default device may be a GPU while a model trained on the CPU stays
    there); compare logits and argmax accuracy against ``y``. The model's training mode is restored.

    >>> from ampkit.models import build_model; from ampkit.data import make_data
    >>> X, y = make_data("mlp", 64); gap = evaluate_under_autocast(build_model("mlp"), X, y)
    >>> gap.n, gap.max_abs_diff > 0
    (64, True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    dev = _model_device(model, device)
    low = check_autocast_dtype(dtype, dev)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ref = model(X.to(dev)).float()
            with torch.autocast(dev.type, dtype=low):
                out = model(X.to(dev)).float()
    finally:
        model.train(was_training)
    diff = (ref - out).abs()
    y = y.to(dev)
    return EvalGap(format_name(low), float(diff.max()), float(diff.mean()),
                   float((ref.argmax(-1) == y).float().mean()), float((out.argmax(-1) == y).float().mean()),
                   int((ref.argmax(-1) != out.argmax(-1)).sum()), len(y))


@dataclass(frozen=True)
class AdamStep:
    """One ``torch.optim.Adam`` step on weights of 1.0 stored in ``dtype``, one weight per gradient in ``grads``
    (ascending, 0 first): the moments and the weight after the step."""

    dtype: str
    beta2: float
    eps: float
    grads: list[float]
    exp_avg: list[float]
    exp_avg_sq: list[float]
    weight: list[float]

    def _largest(self, keep) -> float:
        return max((g for g, k in zip(self.grads, keep) if g > 0 and k), default=0.0)

    @property
    def v_zero_up_to(self) -> float:
        """The largest gradient > 0 whose second moment ``v = (1 - beta2) g^2`` came out exactly 0."""
        return self._largest(v == 0 for v in self.exp_avg_sq)

    @property
    def v_nonzero_from(self) -> float:
        """The smallest gradient whose ``v`` is non-zero."""
        return min((g for g, v in zip(self.grads, self.exp_avg_sq) if v != 0), default=float("nan"))

    @property
    def m_zero_up_to(self) -> float:
        """The largest gradient > 0 whose first moment ``m = (1 - beta1) g`` came out exactly 0."""
        return self._largest(m == 0 for m in self.exp_avg)

    def ranges(self) -> list[tuple[str, float, float]]:
        """Contiguous runs of the same outcome over the tried gradients: ``[("nan", 0.0, 2.98e-07), ...]``."""
        out: list[tuple[str, float, float]] = []
        for g, w in zip(self.grads, self.weight):
            kind = "nan" if math.isnan(w) else "inf" if math.isinf(w) else "finite"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1], g)
            else:
                out.append((kind, g, g))
        return out

    def outcome(self, grad: float) -> str:
        """``"nan"``, ``"inf"`` or ``"finite"``: what the weight became for the tried gradient nearest ``grad``."""
        i = min(range(len(self.grads)), key=lambda k: abs(self.grads[k] - grad))
        w = self.weight[i]
        return "nan" if math.isnan(w) else "inf" if math.isinf(w) else "finite"


def adam_step_in(dtype: str | torch.dtype = "fp16", grads=None, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> AdamStep:
    """Take one real ``torch.optim.Adam`` step on parameters stored in ``dtype`` (what O3 does) and record it.

    ``grads`` defaults to every non-negative value a 16-bit ``dtype`` can hold up to 1 (so thresholds are exact),
    or to 0 plus 901 log-spaced values from 1e-9 to 1 for wider formats; given values are rounded to ``dtype``.

    >>> s = adam_step_in("fp16", grads=[0.0, 1e-3, 1e-2])
    >>> s.exp_avg_sq[1], s.outcome(0.0), s.outcome(1e-3), s.outcome(1e-2)
    (0.0, 'nan', 'inf', 'finite')
    """
    dt = resolve_format(dtype)
    if grads is None and dt.itemsize == 2:  # every non-negative value the format has, up to 1
        g = torch.arange(0, 2**15 - 1, dtype=torch.int32).to(torch.int16).view(dt)
        g = g[torch.isfinite(g) & (g <= 1)]
    else:
        if grads is None:
            grads = [0.0] + torch.logspace(-9, 0, 901, dtype=torch.float64).tolist()
        g = torch.tensor(sorted(set(torch.tensor(list(grads), dtype=torch.float64).to(dt).tolist())), dtype=dt)
    if not g.numel() or bool((g < 0).any()) or not bool(torch.isfinite(g).all()):
        raise ValueError("grads must be finite, non-negative numbers")
    w = nn.Parameter(torch.ones_like(g))
    opt = torch.optim.Adam([w], lr=lr, betas=betas, eps=eps)
    w.grad = g.clone()
    opt.step()
    st = opt.state[w]
    return AdamStep(format_name(dt), betas[1], eps, g.double().tolist(), st["exp_avg"].double().tolist(),
                    st["exp_avg_sq"].double().tolist(), w.detach().double().tolist())

