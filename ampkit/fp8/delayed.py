"""Delayed scaling: the scale a step casts with comes from the amax *history* of earlier steps, so no extra pass over
the data is needed — at the risk of a stale amax when a value spikes. Taught in ``06_fp8_scaling.ipynb``.

Follows Transformer Engine's ``DelayedScaling`` recipe as its default, *fused* update runs it (TE's
``FP8GlobalStateManager.reduce_and_update_fp8_tensors``, in ``transformer_engine/pytorch/quantization.py`` since TE
2.9 and in ``fp8.py`` before, calls the CUDA kernel ``kernel_bulk`` of
``transformer_engine/common/recipe/delayed_scaling.cu``; read at TE 2.18, the zero-amax rule of step 2 since TE 1.6):

1. step *t* casts with the current scale and writes its amax (:func:`~ampkit.fp8.quantize.amax_of`: inf if the
   tensor holds ±inf, NaN elements skipped) into slot 0 of the history;
2. after the step, if that amax is **0** (the module did not run, or its tensor was all zeros or all NaN) nothing
   changes: no roll, same scale (TE ≥ 1.6, "Avoid amax roll for non-run modules"; TE's unfused path, used with
   ``NVTE_UNFUSED_FP8_UPDATE=1`` or a callable algorithm, rolls anyway — the kit does not follow it);
3. otherwise the amax to use is the largest of the whole window of ``history_len`` slots (``"max"``; NaN entries
   skipped, as ``fmaxf`` does) or the one just written (``"most_recent"``), and the scale becomes
   ``fp8_max * 2**-margin / amax`` — unless that amax is 0, inf or NaN: then the previous scale is kept. An inf
   therefore freezes the scale until it leaves the window ``history_len`` non-zero steps later;
4. the history rolls as TE rolls it (``torch.roll(history, -1)``, then slot 0 zeroed): slot 0 is free for the next
   step, slots 1 … ``history_len - 1`` hold the previous amaxes, oldest first.

So the scale used at step *t* sees the amaxes of the last ``history_len`` steps before *t* that had a non-zero amax;
the first step uses the initial scale (1.0, as TE initialises it).

:class:`DelayedScaling` walks that state one step at a time; :func:`delayed_scales` computes the scales of a whole
recorded run at once (vectorised, the same numbers), :func:`current_scales` the just-in-time ones.

>>> s = DelayedScaling("e4m3", history_len=2, algo="max")
>>> [s.step(torch.tensor([a])).scale for a in (4.0, 2.0, 1.0, 1.0)]
[1.0, 112.0, 112.0, 224.0]
>>> delayed_scales(torch.tensor([4.0, 2.0, 1.0, 1.0]), "e4m3", history_len=2).tolist()
[1.0, 112.0, 112.0, 224.0]
>>> delayed_scales(torch.tensor([4.0, 0.0, 2.0, 1.0]), "e4m3", history_len=2).tolist()   # step 1 did not run
[1.0, 112.0, 112.0, 112.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ampkit._util import check_choice, check_int
from ampkit.formats import FP32_MAX
from ampkit.fp8.quantize import (
    QuantReport,
    amax_of,
    check_margin,
    check_scale,
    compute_scale,
    fp8_max,
    fp8_name,
    one_number,
    quant_report,
    quantize,
)
from ampkit.i18n import tr

__all__ = ["ALGOS", "RECIPES", "recipe_formats", "DelayedScaling", "StepResult", "delayed_scales",
           "current_scales", "check_algo", "check_history_len", "check_amaxes"]

#: Transformer Engine's ``amax_compute_algo`` choices.
ALGOS = ("max", "most_recent")
#: Transformer Engine's ``Format`` values: which fp8 format forward tensors and backward gradients use.
RECIPES: dict[str, dict[str, str]] = {
    "HYBRID": {"forward": "e4m3", "backward": "e5m2"},
    "E4M3": {"forward": "e4m3", "backward": "e4m3"},
    "E5M2": {"forward": "e5m2", "backward": "e5m2"},
}


def recipe_formats(recipe: str) -> dict[str, str]:
    """Forward / backward fp8 formats of a recipe (``"HYBRID"``: e4m3 forward, e5m2 gradients).

    >>> recipe_formats("hybrid")
    {'forward': 'e4m3', 'backward': 'e5m2'}
    """
    if not isinstance(recipe, str):
        raise TypeError(tr("recipe must be one of {choices}; got {type}", choices=", ".join(RECIPES),
                           type=type(recipe).__name__))
    return dict(RECIPES[check_choice("recipe", recipe.strip().upper(), RECIPES)])


def check_algo(algo) -> str:
    """``algo`` if it is one of :data:`ALGOS` (TE's ``amax_compute_algo``); else ValueError naming them.

    >>> check_algo("most_recent")
    'most_recent'
    >>> check_algo("mean")
    Traceback (most recent call last):
    ...
    ValueError: amax_compute_algo must be one of 'max', 'most_recent'; got 'mean'
    """
    return check_choice("amax_compute_algo", algo, ALGOS)


def check_history_len(n) -> int:
    """``n`` as an int >= 1 (TE's ``amax_history_len``: how many past amaxes the scale is computed from).

    >>> check_history_len(16)
    16
    >>> check_history_len(0)
    Traceback (most recent call last):
    ...
    ValueError: history_len (amax_history_len) must be an int >= 1; got 0
    """
    return check_int("history_len (amax_history_len)", n, minimum=1)


@dataclass(frozen=True)
class StepResult:
    """One delayed-scaling step: the scale it cast with, the amax it recorded, what the cast did."""

    scale: float
    amax: float
    report: QuantReport


class DelayedScaling:
    """One tensor's delayed-scaling state: the amax history (Transformer Engine's layout: slot 0 is written by the
    current step, slots 1 … L-1 hold the previous amaxes, oldest first) and the scale.

    ``step(x)`` = cast ``x`` with the current scale, record its amax, then update: see the module docstring (a step
    whose amax is 0 changes nothing).
    """

    def __init__(self, fmt: str = "e4m3", history_len: int = 1024, algo: str = "max", margin: int = 0,
                 initial_scale: float = 1.0):
        self.fmt = fp8_name(fmt)
        self.history_len = check_history_len(history_len)
        self.algo = check_algo(algo)
        self.margin = check_margin(margin)
        self.scale = check_scale(initial_scale, "initial_scale")
        self.history = torch.zeros(self.history_len)   # [0] = the slot the next step writes

    def record(self, amax: float) -> None:
        """Write this step's amax into slot 0 (a tensor's amax, see :func:`~ampkit.fp8.quantize.amax_of`; a number
        ≥ 0, inf or NaN)."""
        self.history[0] = _check_amax(amax)

    def update(self) -> float:
        """TE's fused update: no change if slot 0 holds 0; otherwise recompute the scale from the window and roll the
        history (slot 0 zeroed). Returns the scale."""
        h = self.history
        last = float(h[0])
        if last == 0.0:         # a module that did not run (or an all-zero tensor): no roll, the scale stays
            return self.scale
        amax = last if self.algo == "most_recent" else float(torch.where(torch.isnan(h), 0.0, h).max())
        self.scale = compute_scale(amax, self.fmt, self.margin, previous=self.scale)
        self.history = torch.roll(h, -1)
        self.history[0] = 0.0
        return self.scale

    def quantize(self, x: torch.Tensor) -> torch.Tensor:
        """Cast ``x`` with the current scale and record its amax (call :meth:`update` after the step)."""
        self.record(amax_of(x))
        return quantize(x, self.scale, self.fmt)

    def step(self, x: torch.Tensor) -> StepResult:
        """Cast, record, report, update: one training step's worth for this tensor."""
        scale, amax = self.scale, amax_of(x)
        report = quant_report(x, scale, self.fmt)
        self.record(amax)
        self.update()
        return StepResult(scale=scale, amax=amax, report=report)

    def __repr__(self) -> str:
        return (f"DelayedScaling(fmt={self.fmt!r}, history_len={self.history_len}, algo={self.algo!r}, "
                f"margin={self.margin}, scale={self.scale:g})")


def _check_amax(amax) -> float:
    """One recorded amax: a number ≥ 0, inf or NaN (TypeError / ValueError otherwise)."""
    amax = one_number(amax, "amax must be a number >= 0, inf or NaN")
    if amax < 0:
        raise ValueError(f"amax must be a number >= 0, inf or NaN (a largest magnitude); got {amax!r}")
    return float(amax)


def check_amaxes(amaxes, name: str = "amaxes") -> torch.Tensor:
    """A recorded run's amaxes as a 1-D fp32 tensor: one per step, at least one, each ≥ 0, inf or NaN.

    >>> check_amaxes([1, 2.0, float("inf")])                 # inf is a valid amax (the tensor held an inf)
    tensor([1., 2., inf])
    >>> check_amaxes([1.0, -2.0])
    Traceback (most recent call last):
    ...
    ValueError: amaxes must be a 1-D tensor or list of numbers (one amax per step, each >= 0, inf or NaN); got a ...
    """
    want = f"{name} must be a 1-D tensor or list of numbers (one amax per step, each >= 0, inf or NaN)"
    if isinstance(amaxes, torch.Tensor):
        if amaxes.is_complex() or amaxes.dtype == torch.bool:
            raise TypeError(f"{want}; got a {amaxes.dtype} tensor")
        a = amaxes.detach().to(torch.float32)
    else:
        try:
            a = torch.as_tensor(amaxes, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{want}; got {type(amaxes).__name__}") from None
    if a.dim() > 1:
        raise ValueError(f"{want}; got shape {tuple(a.shape)}")
    a = a.reshape(-1)
    if a.numel() == 0:
        raise ValueError(f"{want}; got none (an empty run has no steps to scale)")
    if bool((a < 0).any()):
        raise ValueError(f"{want}; got a negative value {float(a[a < 0][0])!r}")
    return a


def _forward_fill(values: torch.Tensor, valid: torch.Tensor, initial: float) -> torch.Tensor:
    """Each position takes the latest valid value at or before it (``initial`` before the first one)."""
    idx = torch.where(valid, torch.arange(1, len(values) + 1), torch.zeros(len(values), dtype=torch.long))
    last = torch.cummax(idx, dim=0).values
    padded = torch.cat([torch.tensor([initial], dtype=values.dtype), values])
    return padded[last]


def _target(fmt: str, margin: int) -> torch.Tensor:
    return torch.tensor(fp8_max(fmt), dtype=torch.float32) * torch.tensor(2.0 ** -margin, dtype=torch.float32)


def _scales_from(amax: torch.Tensor, fmt: str, margin: int, initial: float) -> torch.Tensor:
    """``compute_scale`` over a vector of amaxes, the invalid ones keeping the previous scale."""
    valid = torch.isfinite(amax) & (amax > 0)
    raw = _target(fmt, margin) / torch.where(valid, amax, torch.ones_like(amax))
    raw = torch.where(torch.isinf(raw), torch.full_like(raw, FP32_MAX), raw)
    return _forward_fill(raw, valid, initial)


def delayed_scales(amaxes: torch.Tensor, fmt: str = "e4m3", history_len: int = 1024, algo: str = "max",
                   margin: int = 0, initial_scale: float = 1.0) -> torch.Tensor:
    """The scale each step of a recorded run casts with under delayed scaling (fp32, one per step).

    Same numbers as stepping :class:`DelayedScaling` through the run, computed at once: the steps whose amax is 0
    are taken out (they change nothing), then for ``"max"`` a sliding-window maximum over the last ``history_len``
    remaining amaxes (NaN skipped, inf kept: it makes the window's scale keep the previous one).

    >>> amaxes = torch.tensor([2.0, 2.0, 8.0, 2.0, 2.0])        # a spike at step 2
    >>> delayed_scales(amaxes, history_len=2).tolist()       # step 2 casts 8 at scale 224: 1792 saturates at 448
    [1.0, 224.0, 224.0, 56.0, 56.0]
    >>> delayed_scales(torch.tensor([2.0, 0.0, 4.0]), history_len=1).tolist()    # amax 0: the module did not run
    [1.0, 224.0, 224.0]
    """
    fmt, algo = fp8_name(fmt), check_algo(algo)
    history_len, margin = check_history_len(history_len), check_margin(margin)
    initial = check_scale(initial_scale, "initial_scale")
    a = check_amaxes(amaxes)
    ran = a != 0                        # NaN != 0 too: a NaN amax rolls the history, as in TE's kernel
    r = a[ran]
    if algo == "max" and r.numel():
        r = torch.where(torch.isnan(r), 0.0, r)
        padded = torch.cat([torch.zeros(history_len - 1), r])
        r = padded.unfold(0, history_len, 1).max(dim=1).values   # window ending at each step, newest included
    after_ran = _scales_from(r, fmt, margin, initial)             # the scale after each step that ran
    after = torch.full_like(a, initial)
    after[ran] = after_ran
    after = _forward_fill(after, ran, initial)                    # a step that did not run keeps the scale
    return torch.cat([torch.tensor([initial]), after[:-1]])       # step t uses the scale computed after step t-1


def current_scales(amaxes: torch.Tensor, fmt: str = "e4m3", margin: int = 0) -> torch.Tensor:
    """Just-in-time scaling: each step's scale from its own amax (amax 0, inf or NaN → 1.0, as Transformer Engine's
    ``compute_scale_from_amax``).

    >>> current_scales(torch.tensor([2.0, 2.0, 8.0, 2.0, 2.0])).tolist()    # each step its own amax: the spike fits
    [224.0, 224.0, 56.0, 224.0, 224.0]
    >>> current_scales(torch.tensor([0.0, float("inf")])).tolist()          # no information: 1.0
    [1.0, 1.0]
    """
    fmt, margin = fp8_name(fmt), check_margin(margin)
    a = check_amaxes(amaxes)
    valid = torch.isfinite(a) & (a > 0)
    raw = _target(fmt, margin) / torch.where(valid, a, torch.ones_like(a))
    raw = torch.where(torch.isinf(raw), torch.full_like(raw, FP32_MAX), raw)
    return torch.where(valid, raw, torch.ones_like(raw))
