"""Notebook 07, section 1: where a 16-bit run's loss difference from fp32 comes from.

:func:`loss_difference_parts` takes the runs of :func:`~ampkit.lessons.transformers_in_16_bits.train_side_by_side`
and splits each 16-bit run's loss difference from the fp32 run, after the last step, in two: where its weights went
(the run's weights evaluated with fp32 arithmetic, against the fp32 run's) and the arithmetic of its forward pass
(the same weights evaluated with the run's own 16-bit forward, against fp32 arithmetic).

>>> from ampkit.lessons.transformers_in_16_bits import train_side_by_side
>>> kw = dict(n_layers=1, d_model=16, context=16)
>>> parts = loss_difference_parts(train_side_by_side(steps=2, batch_size=2, n_samples=8, **kw), n_eval=4, **kw)
>>> sorted(parts), abs(parts["bf16"].total - parts["bf16"].weights - parts["bf16"].arithmetic) < 1e-12
(['bf16', 'fp16'], True)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ampkit._util import check_int
from ampkit.data import make_data
from ampkit.lessons.transformers_in_16_bits.activations import RECIPES, Run
from ampkit.models import build_model, lm_loss
from ampkit.precision import apply_level
from ampkit.train import make_optimizer

__all__ = ["LossParts", "loss_difference_parts"]


@dataclass(frozen=True)
class LossParts:
    """One 16-bit run against the fp32 run, after the last step, on the same sequences (losses in nats):
    ``total`` = its loss with its own 16-bit forward pass − the fp32 run's loss; ``weights`` = its weights evaluated
    with fp32 arithmetic − the fp32 run's loss (where the weights went); ``arithmetic`` = its weights with its own
    forward pass − the same weights in fp32 (the forward arithmetic's own error), so ``total = weights +
    arithmetic``; ``distance`` = |w − w_fp32| over all parameters; ``per_distance`` = ``weights / distance``, the
    loss change per unit of distance along the run's own weight difference (its direction)."""

    name: str
    total: float
    weights: float
    arithmetic: float
    distance: float

    @property
    def per_distance(self) -> float:
        return self.weights / self.distance if self.distance else 0.0


def _weights(run: Run) -> torch.Tensor:
    if run.weights is None:
        raise ValueError(f"run {run.name!r} holds no weights (Run.weights); train it with train_side_by_side")
    return run.weights


def _loss(run: Run, recipe: str, x: torch.Tensor, y: torch.Tensor, seed: int, model_kw: dict) -> float:
    """``run``'s weights after its last step, loaded into a fresh decoder, evaluated with ``recipe``'s forward."""
    model = build_model("decoder", seed=seed, **model_kw)
    torch.nn.utils.vector_to_parameters(_weights(run), model.parameters())
    level, dtype, _ = RECIPES[recipe]
    mp = apply_level(model, make_optimizer("adamw", model.parameters(), 1e-3), level, dtype)
    with torch.no_grad():
        return float(lm_loss(mp.forward(x), y))


def loss_difference_parts(runs: dict[str, Run], n_eval: int = 32, seed: int = 0, **model_kw) -> dict[str, LossParts]:
    """For each 16-bit run of ``runs`` (a :func:`train_side_by_side` result, same ``seed`` and ``model_kw``), its
    :class:`LossParts` on ``n_eval`` sequences of the decoder's data."""
    n_eval = check_int("n_eval", n_eval)
    missing = sorted(set(RECIPES) - set(runs))
    if missing:
        raise ValueError(f"runs must hold {sorted(RECIPES)} (train_side_by_side's result); missing {missing}")
    x, y = make_data("decoder", seed=seed, n_samples=n_eval, context=model_kw.get("context", 64))
    ref = _loss(runs["fp32"], "fp32", x, y, seed, model_kw)
    out = {}
    for name in RECIPES:
        if name == "fp32":
            continue
        in_fp32 = _loss(runs[name], "fp32", x, y, seed, model_kw)
        own = _loss(runs[name], name, x, y, seed, model_kw)
        distance = float((_weights(runs[name]) - _weights(runs["fp32"])).norm())
        out[name] = LossParts(name, own - ref, in_fp32 - ref, own - in_fp32, distance)
    return out
