"""Notebook 06's experiments: a small kit model trained in simulated fp8 next to bf16 and fp32, and a run's
per-step amaxes (with spikes) recorded for the amax-history explorer. Taught in ``06_fp8_scaling.ipynb``; a lesson,
above the engine (:mod:`ampkit.fp8`), which does not know it.

The model is :class:`ampkit.models.MLP` on :func:`ampkit.data.make_blobs`; the fp8 model is the same model with
every ``nn.Linear`` swapped for :class:`~ampkit.fp8.linear.Fp8Linear`. A "spike" multiplies one step's input batch
by ``spike_factor`` — the kind of outlier batch that makes a stale (delayed) amax saturate.

:func:`gemm_tensors` returns, for one batch, the three tensors a linear layer's GEMMs cast to fp8 in Transformer
Engine — its input activation ``X``, its weight ``W`` and the gradient of its output ``dY`` — and, for contrast,
the weight gradient ``dW``, which is a GEMM *output* and stays in higher precision. :func:`backward_operand_formats`
measures which fp8 format each operand of the two backward GEMMs was in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ampkit._util import check_choice, check_int, check_positive_finite
from ampkit.data import make_blobs
from ampkit.fp8.linear import Fp8Linear, Fp8Recipe, to_fp8
from ampkit.fp8.quantize import current_scale, fake_quantize, saturation_threshold
from ampkit.models import build_model
from ampkit.precision import MixedPrecision
from ampkit.train import train_step

__all__ = ["TRAIN_FORMATS", "RunResult", "train_mode", "AmaxRecording", "record_amax_run", "saturation_per_step",
           "flush_per_step", "make_task", "gemm_tensors", "backward_operand_formats"]

TRAIN_FORMATS = ("fp32", "bf16", "fp8")


def make_task(seed: int = 0, n_train: int = 2048, n_test: int = 1024):
    """Blobs (16 features, 4 classes, spread 1.5 so the task is not trivially separable): train and test split."""
    X, y = make_blobs(n_train, spread=1.5, seed=seed)
    Xt, yt = make_blobs(n_test, spread=1.5, seed=seed + 1000)
    return X, y, Xt, yt


def _model(mode: str, seed: int, recipe: Fp8Recipe | None) -> nn.Module:
    m = build_model("mlp", seed=seed, in_features=16, hidden=64, out_features=4, depth=2)
    if mode != "fp8":
        return m
    with torch.random.fork_rng(devices=[]):   # to_fp8's fresh layers draw weights it replaces: leave torch's RNG be
        return to_fp8(m, recipe or Fp8Recipe())


@dataclass
class RunResult:
    mode: str
    losses: list[float]
    accuracy: float
    model: nn.Module = field(repr=False)


def _step(model, mode, xb, yb, opt, loss_fn, loss_weight: float = 1.0):
    """One :func:`ampkit.train.train_step` of ``model`` as it is, the loss times ``loss_weight`` (a loss spike);
    returns that loss (only :func:`record_amax_run` weighs it, and it does not read the loss)."""
    def forward_loss(xb, yb):
        if mode == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(xb).float(), yb)
        else:
            loss = loss_fn(model(xb), yb)
        return loss * loss_weight
    return train_step(MixedPrecision.plain(model, opt), xb, yb, loss_fn, forward_loss=forward_loss)


def train_mode(mode: str, steps: int = 150, batch: int = 64, lr: float = 3e-3, seed: int = 0,
               recipe: Fp8Recipe | None = None, spikes: dict[int, float] | None = None,
               task=None) -> RunResult:
    """Train the MLP for ``steps`` Adam steps in ``mode`` (fp32 / bf16 autocast / simulated fp8); test accuracy."""
    mode = check_choice("mode", mode, TRAIN_FORMATS)
    steps, batch = check_int("steps", steps), check_int("batch", batch)
    X, y, Xt, yt = task or make_task(seed)
    model = _model(mode, seed, recipe)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    losses = []
    for t in range(steps):
        idx = torch.randint(0, X.shape[0], (batch,), generator=g)
        xb = X[idx] * (spikes or {}).get(t, 1.0)
        losses.append(float(_step(model, mode, xb, y[idx], opt, loss_fn)))
    with torch.no_grad():
        if mode == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(Xt).float()
        else:
            logits = model(Xt)
    return RunResult(mode=mode, losses=losses, accuracy=float((logits.argmax(1) == yt).float().mean()), model=model)


@dataclass
class AmaxRecording:
    """A recorded fp8 run: per step, the amax and the sorted magnitudes of two tensors — the second linear layer's
    input activation (the first hidden layer's ReLU output, cast to e4m3) and the last layer's output gradient
    ``dY`` (cast to e5m2)."""

    amax: dict[str, torch.Tensor]          # name -> (steps,)
    values: dict[str, torch.Tensor]        # name -> (steps, n) sorted |x| per step
    formats: dict[str, str]
    spikes: dict[int, float]
    grad_spikes: dict[int, float]

    @property
    def steps(self) -> int:
        return int(next(iter(self.amax.values())).numel())


def _check_spikes(spikes: dict[int, float] | None, default: dict[int, float]) -> dict[int, float]:
    spikes = dict(default) if spikes is None else dict(spikes)
    for k, v in spikes.items():
        check_int("spike step", k, minimum=0)
        check_positive_finite("spike factor", v, example="16.0")
    return spikes


def record_amax_run(steps: int = 120, spikes: dict[int, float] | None = None,
                    grad_spikes: dict[int, float] | None = None, seed: int = 0) -> AmaxRecording:
    """Train the fp8 MLP (HYBRID, delayed) for ``steps`` and keep each step's tensors' magnitudes.

    Default ``spikes`` (input batch scaled): steps 40 and 85 by 16 and 6; default ``grad_spikes`` (the loss scaled,
    so every gradient is — a loss spike; Adam's update barely changes): step 60 by 32."""
    steps = check_int("steps", steps)
    spikes = _check_spikes(spikes, {40: 16.0, 85: 6.0})
    grad_spikes = _check_spikes(grad_spikes, {60: 32.0})
    run_model = _model("fp8", seed, Fp8Recipe())
    layers = [m for m in run_model.modules() if isinstance(m, Fp8Linear)]
    first, last = layers[1], layers[-1]     # layers[1]'s input is a real activation (layers[0]'s is the data)
    first.keep_values = last.keep_values = True
    X, y, _, _ = make_task(seed)
    opt = torch.optim.Adam(run_model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    for t in range(steps):
        idx = torch.randint(0, X.shape[0], (64,), generator=g)
        _step(run_model, "fp8", X[idx] * spikes.get(t, 1.0), y[idx], opt, loss_fn, grad_spikes.get(t, 1.0))
    vals = {"activation": torch.stack(first.values["input"]), "gradient": torch.stack(last.values["grad_output"])}
    return AmaxRecording(amax={k: v[:, -1].clone() for k, v in vals.items()}, values=vals,
                         formats={"activation": first.recipe.formats["input"],
                                  "gradient": last.recipe.formats["grad_output"]},
                         spikes=spikes, grad_spikes=grad_spikes)


def gemm_tensors(model: nn.Module, X: torch.Tensor, y: torch.Tensor, layer: int = 1) -> dict[str, torch.Tensor]:
    """One forward and backward pass of ``model`` (fp32) on ``(X, y)``; for its ``layer``-th ``nn.Linear`` (0-based):
    ``{"X": input activation, "W": weight, "dY": gradient of the layer's output, "dW": weight gradient}``, detached
    copies. ``X``, ``W`` and ``dY`` are what Transformer Engine casts to fp8 (``dY`` in e5m2 under HYBRID); ``dW``
    is the output of the weight-gradient GEMM and is kept in higher precision. ``model``'s gradients are left
    zeroed (``None``).

    >>> t = gemm_tensors(build_model("mlp"), torch.randn(8, 16), torch.zeros(8, dtype=torch.long))
    >>> {k: tuple(v.shape) for k, v in t.items()}
    {'X': (8, 64), 'W': (64, 64), 'dY': (8, 64), 'dW': (64, 64)}
    """
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("model has no nn.Linear layer")
    layer = check_int("layer", layer, minimum=0, maximum=len(linears) - 1)
    lin = linears[layer]
    seen: dict[str, torch.Tensor] = {}

    def keep_output(_m, _inp, out):
        out.retain_grad()
        seen["Y"] = out

    def keep_input(_m, inp):
        seen["X"] = inp[0].detach().clone()

    hooks = [lin.register_forward_pre_hook(keep_input), lin.register_forward_hook(keep_output)]
    try:
        model.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(X), y).backward()
    finally:
        for h in hooks:
            h.remove()
    dY, dW = seen["Y"].grad, lin.weight.grad
    assert dY is not None and dW is not None  # retain_grad() on Y; W is trained
    out = {"X": seen["X"], "W": lin.weight.detach().clone(), "dY": dY.detach().clone(), "dW": dW.detach().clone()}
    model.zero_grad(set_to_none=True)
    return out


def backward_operand_formats(seed: int = 0) -> dict[str, tuple[str, str]]:
    """Which fp8 format each operand of an :class:`Fp8Linear`'s backward GEMMs was in, *measured*, not read from
    the recipe: one forward and backward pass (HYBRID, current scaling), then for every operand both formats are
    tried and the pair that reproduces the layer's result is kept. ``{"dgrad": (format of dY, format of W),
    "wgrad": (format of dY, format of X)}`` for dX = dY·W and dW = dYᵀ·X.

    >>> backward_operand_formats()["dgrad"][0]
    'e5m2'
    """
    g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    with torch.random.fork_rng(devices=[]):    # the layer's weights from torch's RNG as it stands, which stays put
        layer = Fp8Linear(64, 32, recipe=Fp8Recipe(scaling="current"))
    x = torch.randn(16, 64, generator=g).requires_grad_(True)
    dy = torch.randn(16, 32, generator=g)
    layer(x).backward(dy)

    def versions(t: torch.Tensor) -> dict[str, torch.Tensor]:
        return {f: fake_quantize(t, current_scale(t, f), f) for f in ("e4m3", "e5m2")}

    def which(result: torch.Tensor, a: dict, b: dict, gemm) -> tuple[str, str]:
        tol = 1e-5 * float(result.abs().max())
        hits = [(fa, fb) for fa in a for fb in b if float((gemm(a[fa], b[fb]) - result).abs().max()) <= tol]
        if len(hits) != 1:
            raise RuntimeError(f"the backward GEMM matches {len(hits)} format pairs, not one: {hits}")
        return hits[0]

    q_dy, q_w, q_x = versions(dy), versions(layer.weight.detach()), versions(x.detach())
    assert x.grad is not None and layer.weight.grad is not None  # both require grad; backward ran
    return {"dgrad": which(x.grad, q_dy, q_w, lambda a, b: a @ b),
            "wgrad": which(layer.weight.grad, q_dy, q_x, lambda a, b: a.t() @ b)}


def saturation_per_step(sorted_abs: torch.Tensor, scales: torch.Tensor, fmt: str) -> torch.Tensor:
    """Fraction of each step's values whose ``|x| * scale`` rounds beyond ``fp8_max`` (as :func:`quant_report`
    counts them; vectorised over steps: one searchsorted). ``sorted_abs``: (steps, n) magnitudes, sorted per row."""
    t, inclusive = saturation_threshold(fmt)
    thr = (t / scales.float()).unsqueeze(1).contiguous()
    above = sorted_abs.shape[1] - torch.searchsorted(sorted_abs.contiguous(), thr, right=not inclusive)
    return above.squeeze(1).float() / sorted_abs.shape[1]


def flush_per_step(sorted_abs: torch.Tensor, scales: torch.Tensor, min_subnormal: float) -> torch.Tensor:
    """Fraction of each step's values that are nonzero but have ``|x| * scale <= min_subnormal / 2`` (round to 0)."""
    thr = (0.5 * min_subnormal / scales.float()).unsqueeze(1).contiguous()
    s = sorted_abs.contiguous()
    below = torch.searchsorted(s, thr, right=True)
    zeros = torch.searchsorted(s, torch.zeros_like(thr), right=True)
    return (below - zeros).squeeze(1).float() / sorted_abs.shape[1]
