"""Notebook 05's experiments: the broken runs the AMP doctor offers, each reproduced on a kit model, diagnosed by
the kit's tools (:mod:`ampkit.diagnose`), and re-run with its fix applied. A lesson, above the engine.

Taught in ``05_amp_in_practice.ipynb`` (and shown by ``ampkit.widgets.amp_doctor``). :func:`run_scenario` returns a
:class:`DoctorReport`: the diagnosis (one sentence with the evidence's numbers), the fix, the evidence series for a
plot, and ``healthy`` (whether the run trained cleanly). ``"my model"`` diagnoses a model the learner passes in.

>>> sorted(SCENARIOS)[:2]
['adam eps in fp16', 'fp16 forward overflow']
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ampkit._util import check_int
from ampkit.data import make_blobs
from ampkit.diagnose.headroom import check_model, check_scalar_loss, measure_headroom
from ampkit.diagnose.health import RecordingScaler, ScalerHistory, classify_run
from ampkit.diagnose.hunter import NonFiniteEvent, NonFiniteHunter
from ampkit.dtypes import short_name
from ampkit.i18n import Word, mark, tr
from ampkit.models import build_model
from ampkit.precision import MixedPrecision, apply_level
from ampkit.scaling import DynamicLossScaler
from ampkit.train import train_step

__all__ = ["DoctorReport", "SCENARIOS", "run_scenario", "diagnose_model", "scenario_names", "outlier_run", "OutlierRun",
           "SPIKE_FACTOR"]


@dataclass
class DoctorReport:
    """What the doctor found for one run. ``evidence``: ``{"kind": "scales" | "headroom" | "losses", ...}``."""

    scenario: str
    fixed: bool
    healthy: bool
    diagnosis: str
    fix: str
    evidence: dict = field(default_factory=dict)


def _task(seed: int = 0):
    X, y = make_blobs(64, n_features=8, n_classes=3, seed=seed)
    return build_model("mlp", seed=seed, in_features=8, hidden=32, out_features=3, depth=2), X, y


SPIKE_FACTOR = 100.0
"""An outlier batch's inputs are this many times their usual size: the forward pass and the loss stay finite (the
largest value of the fp16 forward pass is a few hundred), but the gradients grow with the inputs, and times the
scale 2**16 they pass fp16's max in the backward pass (notebook 05 §2.2 measures both)."""


def _train(model, X, y, steps, dtype, scaler=None, loss_fn: Callable = F.cross_entropy, optimizer=None,
           poison: frozenset = frozenset(), probe: Callable | None = None):
    """A canonical autocast + scaler loop (``dtype=None``: no autocast); returns (losses, recorder or None).
    Each step is :func:`ampkit.train.train_step` of the model as it is (``MixedPrecision.plain``), its
    ``forward_loss`` the autocast forward pass and the loss, the scaler wrapped in a
    :class:`~ampkit.diagnose.RecordingScaler`. (Not ``apply_level``'s O1: that would warn about a scaler with bf16,
    which the "fp16 forward overflow" fix keeps on purpose.)
    ``poison``: steps whose batch is an outlier (inputs x :data:`SPIKE_FACTOR`). ``probe(step, xb, yb, run)``, if
    given, is called at each poisoned step with ``run()``, the step itself, and must call it once."""
    opt = optimizer or torch.optim.SGD(model.parameters(), lr=0.05)
    mp = MixedPrecision.plain(model, opt)
    rec = RecordingScaler(scaler) if scaler is not None else None
    losses = []

    def forward_loss(xb, yb):
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(xb)
        loss = check_scalar_loss(loss_fn(out.float(), yb))
        losses.append(float(loss.detach()))   # read before the backward pass, as the hunter's op count expects
        return loss

    for step in range(steps):
        xb, yb = X[(step * 16) % 64:(step * 16) % 64 + 16], y[(step * 16) % 64:(step * 16) % 64 + 16]
        if step in poison:
            xb = xb * SPIKE_FACTOR                     # an outlier batch: one spike

        def run(xb=xb, yb=yb):
            train_step(mp, xb, yb, loss_fn, rec, forward_loss=forward_loss)
        if probe is not None and step in poison:
            probe(step, xb, yb, run)
        else:
            run()
    return losses, rec


def _scales(rec, losses) -> dict:
    h = rec.history
    return {"kind": "scales", "scales": list(h.scales), "skipped": list(h.skipped), "losses": losses,
            "grad_max": list(h.grad_max), "small_fraction": list(h.small_fraction)}


def _headroom_evidence(rows) -> dict:
    return {"kind": "headroom", "names": [r.name for r in rows], "kinds": [r.kind for r in rows],
            "bits": [r.overflow_bits for r in rows], "dtype": rows[0].dtype}


@dataclass(frozen=True)
class OutlierRun:
    """:func:`outlier_run`'s record. ``history``: the scaler's (``skipped``: the scaled gradients held inf/NaN);
    ``losses``: the loss of every step (unscaled). Per outlier step: ``first_inf``, the first inf/NaN the hunter
    found in that training step (or ``None``); ``act_max``, the largest magnitude the step's fp16 autocast forward
    pass holds (the batch, which autocast casts to fp16 at the first linear layer, and every module's output);
    ``grad_max``, the largest |gradient| of the same batch in an fp16 autocast backward *without* the scale
    (``inf`` if that already overflowed)."""

    history: ScalerHistory
    losses: list[float]
    first_inf: dict[int, NonFiniteEvent | None]
    act_max: dict[int, float]
    grad_max: dict[int, float]


def outlier_run(scaler, steps: int = 16, outliers: tuple[int, ...] = (5, 11), seed: int = 0) -> OutlierRun:
    """The "transient spikes" run with any scaler: ``steps`` fp16 steps of the doctor's MLP; the batches at
    ``outliers`` are outliers (inputs x :data:`SPIKE_FACTOR`): their loss is finite, their gradients are large,
    and at the scale 2**16 the *scaled* gradients pass fp16's max in the backward pass. The case hysteresis is for.

    >>> r = outlier_run(torch.amp.GradScaler("cpu"), steps=8, outliers=(5,))
    >>> r.history.skipped.index(True), r.history.scales[5] / r.history.scales[6], math.isfinite(r.losses[5])
    (5, 2.0, True)
    >>> r.first_inf[5].phase
    'backward'
    """
    steps = check_int("steps", steps, minimum=1)
    if not isinstance(outliers, (tuple, list, set, frozenset)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < steps for i in outliers):
        raise ValueError(f"outliers must be a tuple of step numbers in 0..{steps - 1}; got {outliers!r}")
    model, X, y = _task(check_int("seed", seed, minimum=0))
    first_inf: dict[int, NonFiniteEvent | None] = {}
    act_max: dict[int, float] = {}
    grad_max: dict[int, float] = {}

    def probe(step, xb, yb, run):
        outs = [float(xb.abs().max())]
        hooks = [m.register_forward_hook(lambda m, a, o: outs.append(float(o.detach().abs().max())))
                 for m in model.net]
        with torch.autocast("cpu", dtype=torch.float16):       # the same batch, backward without the scale
            loss = F.cross_entropy(model(xb).float(), yb)
        for hk in hooks:
            hk.remove()
        act_max[step] = max(outs)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        grad_max[step] = max(float(g.abs().max()) for g in grads)
        with NonFiniteHunter(model) as h:                      # the training step itself, watched op by op
            run()
        first_inf[step] = h.first
    losses, rec = _train(model, X, y, steps, torch.float16, scaler, poison=frozenset(outliers), probe=probe)
    return OutlierRun(rec.history, losses, first_inf, act_max, grad_max)


def _forward_overflow(fixed: bool) -> DoctorReport:
    model, X, y = _task()
    with torch.no_grad():
        model.net[2].weight.mul_(1e5)              # a large-activation layer (as in bf16-pretrained models) ...
        model.net[4].weight.mul_(1e-5)             # ... whose output layer brings the logits back to size
    rows = measure_headroom(model, [(X[:16], y[:16])], F.cross_entropy, "bf16" if fixed else "fp16", steps=1)
    dtype = torch.bfloat16 if fixed else torch.float16
    with NonFiniteHunter(model) as h:
        with torch.autocast("cpu", dtype=dtype):
            out = model(X[:16])
        F.cross_entropy(out.float(), y[:16]).backward()
    model.zero_grad()
    # fine-tuning a "pretrained" model: a small learning rate
    losses, rec = _train(model, X, y, 6, dtype, torch.amp.GradScaler("cpu"),
                         optimizer=torch.optim.SGD(model.parameters(), lr=1e-6))
    over = [r.name for r in rows if r.status == "overflow"]
    ev = _headroom_evidence(rows)
    if fixed:
        return DoctorReport("fp16 forward overflow", fixed, all(map(math.isfinite, losses)),
                            tr("bf16 autocast: no inf/NaN in {n} ops (bf16 has fp32's range); "
                               "skipped steps: {skipped} of 6", n=h.n_ops, skipped=sum(rec.history.skipped)),
                            tr("applied: autocast dtype=bf16"), ev)
    assert h.first is not None  # fp16's forward overflows
    return DoctorReport("fp16 forward overflow", fixed, False,
                        tr("{first}. Layer(s) above fp16's max: {over}. "
                           "Every step is skipped ({skipped} of 6): GradScaler cannot fix a "
                           "forward overflow.", first=h.first.describe(), over=", ".join(over),
                           skipped=sum(rec.history.skipped)),
                        tr("autocast with dtype=torch.bfloat16, or run that layer in fp32 "
                           "(torch.autocast(..., enabled=False) + .float()), or rescale it"), ev)


def _log_of_zero(fixed: bool) -> DoctorReport:
    model, X, y = _task()

    def naive(out, target):   # an entropy bonus with p*log(p) on fp16 probabilities: p underflows to 0, 0*log(0) = NaN
        p = torch.softmax(out.half() * 50, dim=1)
        return F.cross_entropy(out, target) - 0.01 * (p * torch.log(p)).sum(1).mean().float()

    def stable(out, target):  # the same bonus from log_softmax in fp32: finite for every p
        z = out * 50
        return F.cross_entropy(out, target) - 0.01 * (torch.softmax(z, 1) * torch.log_softmax(z, 1)).sum(1).mean()
    losses, rec = _train(model, X, y, 12, torch.float16, torch.amp.GradScaler("cpu"), stable if fixed else naive)
    d = classify_run(rec.history)
    return DoctorReport("log of zero", fixed, d.kind == "healthy",
                        tr("{kind}: {evidence}", kind=tr(d.kind), evidence=d.evidence),
                        tr("applied: log_softmax") if fixed else
                        tr("compute log-probabilities with torch.log_softmax in fp32, "
                           "never log(softmax(x)) in fp16; ") + d.fix, _scales(rec, losses))


def _transient(fixed: bool) -> DoctorReport:
    model, X, y = _task()
    # torch's GradScaler has no hysteresis; this is DeepSpeed's rule with consecutive_hysteresis=True (DeepSpeed's
    # default, False, refills the count only when the scale grows, so the second spike would still halve it)
    scaler = DynamicLossScaler(hysteresis=2, consecutive_hysteresis=True) if fixed else torch.amp.GradScaler("cpu")
    losses, rec = _train(model, X, y, 16, torch.float16, scaler, poison=frozenset({5, 11}))
    d = classify_run(rec.history)
    drops = sum(1 for a, b in zip(rec.history.scales, rec.history.scales[1:]) if b < a)
    often = (tr("; 2 spikes in 16 steps come far more often than the scale grows back (growth_interval=2000), so "
                "each one lowers it for good") if drops else tr("; the skipped steps left the scale unchanged"))
    return DoctorReport("transient spikes", fixed, drops == 0,
                        tr("{kind}: {evidence}", kind=tr(d.kind), evidence=d.evidence)
                        + tr("; the scale backed off {drops} time(s)", drops=drops) + often,
                        tr("applied: ampkit.scaling.DynamicLossScaler(hysteresis=2, consecutive_hysteresis=True), "
                           "DeepSpeed's consecutive hysteresis (torch.amp.GradScaler has no hysteresis); the outlier "
                           "steps are still skipped") if fixed else d.fix,
                        _scales(rec, losses) | {"drops": drops})


def _scale_too_low(fixed: bool) -> DoctorReport:
    model, X, y = _task()
    scaler = torch.amp.GradScaler("cpu") if fixed else torch.amp.GradScaler("cpu", init_scale=1.0,
                                                                             growth_interval=10 ** 6)
    losses, rec = _train(model, X, y, 12, torch.float16, scaler, lambda o, t: F.cross_entropy(o, t) * 1e-4)
    d = classify_run(rec.history)
    return DoctorReport("scale too low", fixed, d.kind == "healthy",
                        tr("{kind}: {evidence}", kind=tr(d.kind), evidence=d.evidence),
                        tr("applied: torch.amp.GradScaler('cpu') defaults (init_scale 2**16)") if fixed else d.fix,
                        _scales(rec, losses))


def _half_model(fixed: bool) -> DoctorReport:
    model, X, y = _task()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    if fixed:
        mp = apply_level(model, opt, "O2", "fp16")   # fp16 model, fp32 master weights for the optimizer
        losses = [float(train_step(mp, X[:16], y[:16], F.cross_entropy, scaler)) for _ in range(6)]
        return DoctorReport("model.half() + GradScaler", True, all(map(math.isfinite, losses)),
                            tr("O2: fp16 model, fp32 master weights; 6 steps, final loss {loss:.3f}",
                               loss=losses[-1]),
                            tr("applied: ampkit.precision.apply_level(model, opt, 'O2', 'fp16')"),
                            {"kind": "losses", "losses": losses})
    model.half()
    loss = F.cross_entropy(model(X[:16].half()).float(), y[:16])
    scaler.scale(loss).backward()
    try:
        scaler.step(opt)
        msg = "no error"
    except ValueError as e:
        msg = str(e)
    return DoctorReport("model.half() + GradScaler", False, False,
                        tr("GradScaler refused: {msg!r} — the parameters (and so their gradients) are fp16", msg=msg),
                        tr("keep fp32 parameters (autocast, O1) or fp32 master weights (O2: apply_level)"),
                        {"kind": "losses", "losses": [float(loss.detach())]})


def _adam_eps(fixed: bool) -> DoctorReport:
    model, X, y = _task()
    model.half()
    eps = 1e-4 if fixed else 1e-8
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=eps)
    mp = MixedPrecision.plain(model, opt)            # the fp16 model as it is: its logits go to the loss as fp32

    def small(out, target):
        return F.cross_entropy(out, target) * 1e-3                  # small gradients
    with NonFiniteHunter(model) as h:
        losses = [float(train_step(mp, X[:16].half(), y[:16], small)) for _ in range(4)]
    in_fp16 = float(torch.tensor(eps, dtype=torch.float16))
    finite = all(math.isfinite(float(p.detach().float().abs().max())) for p in model.parameters())
    where = h.first.describe() if h.first else tr("no inf/NaN")
    return DoctorReport("adam eps in fp16", fixed, finite,
                        tr("eps={eps:g} is {in_fp16:g} in fp16; parameters finite after 4 steps: {finite}; {where}",
                           eps=eps, in_fp16=in_fp16, finite=finite, where=where),
                        tr("applied: eps=1e-4 (representable in fp16)") if fixed else
                        tr("keep fp32 master weights (O2) or use an eps that fp16 does not round to 0 (the fix uses "
                           "1e-4)"),
                        {"kind": "losses", "losses": losses})


SCENARIOS: dict[str, Callable[[bool], DoctorReport]] = {
    "fp16 forward overflow": _forward_overflow,
    "log of zero": _log_of_zero,
    "transient spikes": _transient,
    "scale too low": _scale_too_low,
    "model.half() + GradScaler": _half_model,
    "adam eps in fp16": _adam_eps,
}
#: the scenarios' names are keys (English in every language); where a page shows one it shows tr(name)
_SCENARIO_WORDS = (mark("fp16 forward overflow"), mark("log of zero"), mark("transient spikes"), mark("scale too low"),
                   mark("model.half() + GradScaler"), mark("adam eps in fp16"), mark("my model"))


def scenario_names() -> list[str]:
    """The doctor's scenarios, then ``"my model"``."""
    return list(SCENARIOS) + ["my model"]


def diagnose_model(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable = F.cross_entropy,
                   dtype: str = "fp16") -> DoctorReport:
    """Diagnose one of your own models on one batch: headroom per layer against ``dtype`` and a hunted fp16/bf16
    autocast forward+backward."""
    check_model(model)
    if (short_name(dtype) if isinstance(dtype, (str, torch.dtype)) else None) not in ("fp16", "bf16"):
        raise ValueError(tr("diagnose_model checks an autocast dtype: one of fp16, bf16; got {dtype!r}", dtype=dtype))
    rows = measure_headroom(model, [(x, y)], loss_fn, dtype, steps=1)
    cast = torch.float16 if rows[0].dtype == "fp16" else torch.bfloat16
    with NonFiniteHunter(model) as h:
        with torch.autocast("cpu", dtype=cast):
            out = model(x)
        check_scalar_loss(loss_fn(out.float(), y)).backward()
    model.zero_grad(set_to_none=True)
    bad = [r.name for r in rows if r.status in ("overflow", "tight", "flushes")]
    text = h.first.describe() if h.first else tr("no inf/NaN in {n} ops", n=h.n_ops)
    watch = tr("; layers to watch in {dtype}: {names}", dtype=rows[0].dtype, names=", ".join(bad)) if bad else ""
    return DoctorReport("my model", False, h.first is None and not bad, text + watch,
                        tr("see the troubleshooting cases in 05_amp_in_practice.ipynb") if bad or h.first else
                        tr("nothing to fix"), _headroom_evidence(rows))


def run_scenario(name: str, fixed: bool = False, model: nn.Module | None = None, batch=None) -> DoctorReport:
    """Run scenario ``name`` (see :func:`scenario_names`), broken or with its fix. ``"my model"`` needs
    ``model`` and ``batch=(x, y)``."""
    if not isinstance(name, str) or name not in scenario_names():
        raise ValueError(tr("unknown scenario {scenario!r}; the doctor knows: {names}", scenario=name,
                              names=", ".join(scenario_names())))
    if name == "my model":
        if model is None or batch is None:
            raise ValueError(tr("'my model' needs model= (an nn.Module) and batch=(x, y)"))
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(f"'my model' needs batch=(x, y), a pair of an input and a target; got "
                            f"{type(batch).__name__}" + (f" of length {len(batch)}" if isinstance(batch, (tuple, list))
                                                         else ""))
        report = diagnose_model(model, *batch)
    else:
        report = SCENARIOS[name](bool(fixed))
    report.scenario = Word(report.scenario)   # printed in the page's language; equal to (and a key as) its English
    return report
