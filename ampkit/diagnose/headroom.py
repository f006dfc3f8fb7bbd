"""Overflow headroom per layer: how far each layer's activations and gradients sit from a format's limits.

Taught in ``05_amp_in_practice.ipynb``. :func:`measure_headroom` runs a few fp32 steps (forward + backward, no
optimizer step) with hooks on every leaf module and records the largest activation and gradient magnitude and the
fraction of non-zero gradient values below the format's smallest normal. Against ``dtype``'s largest finite value
the margin is given in powers of two: ``overflow_bits = log2(max_finite / largest)``; negative means that layer
overflows in that format (the bf16-pretrained model whose feed-forward layer overflows in fp16).

>>> import torch
>>> lin = torch.nn.Linear(2, 2); _ = lin.weight.data.fill_(1e3); _ = lin.bias.data.zero_()
>>> rows = measure_headroom(lin, [(torch.full((1, 2), 100.0), torch.zeros(1, dtype=torch.long))],
...                         torch.nn.functional.cross_entropy, "fp16")
>>> rows[0].act_max, rows[0].status, rows[0].kind
(200000.0, 'overflow', 'Linear')
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ampkit._util import check_int, first_tensor
from ampkit.dtypes import short_name
from ampkit.formats import resolve_format
from ampkit.i18n import tr

__all__ = ["LayerHeadroom", "measure_headroom", "format_limits", "check_model", "check_scalar_loss", "module_kind"]

_MEASURED = ("fp16", "bf16", "fp32")   # short names (ampkit.dtypes), the formats headroom is measured against


def format_limits(dtype: str | torch.dtype) -> tuple[str, float, float]:
    """``(short name, largest finite, smallest normal)`` of fp16, bf16 or fp32.

    >>> format_limits("fp16")
    ('fp16', 65504.0, 6.103515625e-05)
    """
    name = short_name(dtype)
    if name not in _MEASURED:
        raise ValueError(f"headroom is measured against one of {', '.join(_MEASURED)}; got {dtype!r}")
    fi = torch.finfo(resolve_format(name))
    return name, float(fi.max), float(fi.tiny)


def check_model(model) -> nn.Module:
    """``model`` if it is an ``nn.Module`` with at least one parameter; else a clear error.

    >>> check_model(nn.Linear(2, 2))
    Linear(in_features=2, out_features=2, bias=True)
    >>> check_model(nn.ReLU())
    Traceback (most recent call last):
    ...
    ValueError: ReLU has no parameters: there is nothing to train or diagnose (build the model before passing ...
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"expected a torch.nn.Module; got {type(model).__name__}")
    if not any(True for _ in model.parameters()):
        raise ValueError(f"{type(model).__name__} has no parameters: there is nothing to train or diagnose "
                         "(build the model before passing it, e.g. ampkit.models.build_model('mlp'))")
    return model


def check_scalar_loss(loss) -> torch.Tensor:
    """``loss`` if it is a 0-d floating tensor; else a clear error (backward needs a scalar: reduce it first).

    >>> check_scalar_loss(torch.tensor(0.5))
    tensor(0.5000)
    >>> check_scalar_loss(torch.ones(4))
    Traceback (most recent call last):
    ...
    ValueError: the loss must be a scalar (0-d) tensor; got shape (4,) — reduce it with .mean() or .sum(), or ...
    """
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"the loss must be a torch.Tensor; got {type(loss).__name__}")
    if loss.dim() != 0:
        raise ValueError(f"the loss must be a scalar (0-d) tensor; got shape {tuple(loss.shape)} — reduce it with "
                         ".mean() or .sum(), or pass reduction='mean' to the loss function")
    return loss


def module_kind(module: nn.Module) -> str:
    """What a module is, in words for a figure: its class name, with "activation" added for torch's activation
    modules (``ReLU`` -> ``"ReLU activation"``), since their output is an activation, not a layer's.

    >>> module_kind(nn.Linear(2, 2)), module_kind(nn.ReLU()), module_kind(nn.LayerNorm(2))
    ('Linear', 'ReLU activation', 'LayerNorm')
    """
    name = type(module).__name__
    if type(module).__module__ == "torch.nn.modules.activation":
        return tr("{name} activation", name=name)       # in the kit's language: it is printed and drawn
    return name


@dataclass(frozen=True)
class LayerHeadroom:
    """One leaf module: largest |activation| and |gradient of its output|, fraction of non-zero gradient values
    below the smallest normal, the margins in powers of two against the format, and what the module is
    (``kind``: ``"Linear"``, ``"ReLU activation"``, ... from :func:`module_kind`)."""

    name: str
    act_max: float
    grad_max: float
    grad_small_fraction: float
    dtype: str
    overflow_bits: float        # log2(max_finite / act_max); < 0: overflows
    grad_overflow_bits: float   # log2(max_finite / grad_max) (unscaled gradients)
    kind: str = ""              # "Linear", "ReLU activation", ... (module_kind)

    @property
    def status(self) -> str:
        """``"overflow"`` (activation above the format's max), ``"tight"`` (< 2 powers of two left),
        ``"flushes"`` (more than 10% of the gradient values below the smallest normal) or ``"ok"``."""
        if self.overflow_bits < 0:
            return "overflow"
        if self.overflow_bits < 2:
            return "tight"
        if self.grad_small_fraction > 0.1:
            return "flushes"
        return "ok"


def _bits(limit: float, value: float) -> float:
    return math.inf if value == 0 else math.log2(limit / value)


def measure_headroom(model: nn.Module, batches: Iterable, loss_fn: Callable, dtype: str | torch.dtype = "fp16",
                     steps: int = 3) -> list[LayerHeadroom]:
    """Run up to ``steps`` fp32 forward+backward passes of ``model`` on ``batches`` (``(x, y)`` pairs) and return
    one :class:`LayerHeadroom` per leaf module (in forward order), measured against ``dtype``. Gradients are left
    zeroed afterwards; the parameters are not changed.

    ``steps`` must be an int >= 1 and ``batches`` must give at least one ``(x, y)`` pair: otherwise there is
    nothing to measure, and a ``ValueError`` says so (never an empty list).

    >>> lin = nn.Linear(2, 2); _ = lin.weight.data.fill_(1e3); _ = lin.bias.data.zero_()
    >>> batch = (torch.full((1, 2), 100.0), torch.zeros(1, dtype=torch.long))      # outputs of 2e5: above fp16's max
    >>> [round(measure_headroom(lin, [batch], nn.functional.cross_entropy, d)[0].overflow_bits, 1)
    ...  for d in ("fp16", "bf16")]                  # log2(max / 2e5): negative = overflows in that format
    [-1.6, 110.4]
    """
    check_model(model)
    name_fmt, fmax, tiny = format_limits(dtype)
    steps = check_int("steps", steps, minimum=1)
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable as loss_fn(output, y) -> scalar tensor (e.g. "
                        f"torch.nn.functional.cross_entropy); got {type(loss_fn).__name__}")
    if isinstance(batches, (torch.Tensor, str)) or not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable of (x, y) pairs, e.g. [(x, y)] or a DataLoader; got "
                        f"{type(batches).__name__}")
    stats: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    handles = []

    def grad_hook(name):
        def hook(g):
            a = g.detach().abs().float()
            nz = a[a > 0]
            s = stats[name]
            s[1] = max(s[1], float(a.max()) if a.numel() else 0.0)
            s[2] += float((nz < tiny).sum())
            s[3] += float(nz.numel())
        return hook

    def fwd_hook(name):
        def hook(module, args, out):
            t = first_tensor(out)
            if t is None or not t.is_floating_point():
                return
            s = stats.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            s[0] = max(s[0], float(t.detach().abs().max()) if t.numel() else 0.0)
            if t.requires_grad:
                t.register_hook(grad_hook(name))
        return hook

    for name, mod in model.named_modules():
        if not list(mod.children()):
            label = name or type(mod).__name__
            kinds[label] = module_kind(mod)
            handles.append(mod.register_forward_hook(fwd_hook(label)))
    done = 0
    try:
        for batch in batches:
            if done >= steps:
                break
            if not isinstance(batch, (tuple, list)) or len(batch) != 2:
                raise TypeError(f"each batch must be an (x, y) pair; got {type(batch).__name__}"
                                + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
            x, y = batch
            model.zero_grad(set_to_none=True)
            check_scalar_loss(loss_fn(model(x), y)).backward()
            done += 1
    finally:
        for h in handles:
            h.remove()
        model.zero_grad(set_to_none=True)
    if done == 0:
        raise ValueError("batches gave no (x, y) pair: there is nothing to measure; pass at least one, e.g. "
                         "[(x, y)]")
    return [LayerHeadroom(name, a, g, (small / total) if total else 0.0, name_fmt, _bits(fmax, a), _bits(fmax, g),
                          kinds.get(name, ""))
            for name, (a, g, small, total) in stats.items()]
