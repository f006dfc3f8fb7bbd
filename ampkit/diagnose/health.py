"""Scaler health: record a loss scaler's history with a thin wrapper, then classify the run (:func:`classify_run`).

Taught in ``05_amp_in_practice.ipynb``. :class:`RecordingScaler` wraps ``torch.amp.GradScaler`` or any ampkit scaler
(the same calls) and records, per step: the scale used, whether the step was skipped (a non-finite gradient after
unscaling), the largest unscaled gradient magnitude and the fraction of non-zero gradient values that the scaled
fp16 gradient would hold below fp16's smallest normal (subnormal or flushed). :func:`classify_run` reads such a
:class:`ScalerHistory` (recorded, or built by hand) and returns a :class:`Diagnosis`:

- ``persistent``: the last steps are all skipped, so the scale halves on every step (torch's GradScaler has no
  floor: notebook 03's run of 30 overflowing steps ends at 2^-14). Every step makes inf/NaN whatever the scale, so no
  scale fixes it. Two causes give this picture: a forward overflow (a layer's output above fp16's max: a range
  problem of the forward pass, which the loss scale does not touch) or a NaN source in the model or loss (log of 0,
  division by a zero norm). The non-finite hunter tells them apart (a forward op in a layer, or an op in the loss).
- ``transient``: isolated skips that did not follow a growth of the scale (outlier batches). A rare one needs no
  fix; frequent ones step the scale down faster than it grows back.
- ``scale too low``: much of the gradient mass sits below fp16's smallest normal at the scale used.
- ``growth too slow``: the scale never grew although there was room (growth interval longer than the run).
- ``healthy``: none of these (skips while the scale calibrates at the start, or right after it grew, are normal).

>>> h = ScalerHistory(scales=[2.0**16 / 2**i for i in range(10)], skipped=[True] * 10)
>>> classify_run(h).kind
'persistent'
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import torch

from ampkit._util import check_int, check_number
from ampkit.formats import FP16_MAX, FP16_TINY
from ampkit.i18n import Word, mark, tr

__all__ = ["ScalerHistory", "RecordingScaler", "Diagnosis", "classify_run", "RUN_KINDS"]

RUN_KINDS: tuple[str, ...] = (mark("healthy"), mark("persistent"), mark("transient"), mark("scale too low"),
                              mark("growth too slow"))


@dataclass
class ScalerHistory:
    """Per step: ``scales`` (the scale the step used), ``skipped``, and optionally ``grad_max`` (largest unscaled
    |gradient|) and ``small_fraction`` (non-zero scaled gradient values below fp16's smallest normal)."""

    scales: list[float] = field(default_factory=list)
    skipped: list[bool] = field(default_factory=list)
    grad_max: list[float] = field(default_factory=list)
    small_fraction: list[float] = field(default_factory=list)

    def __post_init__(self):
        if len(self.scales) != len(self.skipped):
            raise ValueError(f"scales and skipped must have one entry per step; got {len(self.scales)} and "
                             f"{len(self.skipped)}")
        for name in ("grad_max", "small_fraction"):
            got = len(getattr(self, name))
            if got not in (0, len(self.scales)):
                raise ValueError(f"{name} must be empty or have one entry per step ({len(self.scales)}); got {got}")
        bad = [s for s in self.scales
               if isinstance(s, bool) or not isinstance(s, numbers.Real) or not (0 < s < math.inf)]
        if bad:
            raise ValueError(f"every scale must be a positive finite number (the scale a step used, e.g. 65536.0); "
                             f"got {bad[0]!r}")

    @property
    def steps(self) -> int:
        return len(self.scales)


class RecordingScaler:
    """``RecordingScaler(scaler)`` behaves like ``scaler`` (scale, unscale_, step, update, get_scale, is_enabled,
    state_dict, load_state_dict) and fills ``.history``. Costs one pass over the gradients per step (for the
    statistics)."""

    def __init__(self, scaler):
        for call in ("scale", "unscale_", "step", "update", "get_scale"):
            if not callable(getattr(scaler, call, None)):
                raise TypeError(f"RecordingScaler wraps a scaler with GradScaler's calls (scale, unscale_, step, "
                                f"update, get_scale); {type(scaler).__name__} has no {call}()")
        self.scaler = scaler
        self.history = ScalerHistory()
        self._unscaled: set[int] = set()

    def scale(self, loss):
        return self.scaler.scale(loss)

    def unscale_(self, optimizer) -> None:
        self.scaler.unscale_(optimizer)
        self._unscaled.add(id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        scale = float(self.scaler.get_scale())
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        grads = [p.grad.detach().float().abs().flatten() for g in optimizer.param_groups for p in g["params"]
                 if p.grad is not None]
        flat = torch.cat(grads) if grads else torch.zeros(0)
        finite = bool(torch.isfinite(flat).all())
        nz = flat[(flat > 0) & torch.isfinite(flat)]
        self.history.scales.append(scale)
        self.history.skipped.append(not finite)
        self.history.grad_max.append(float(nz.max()) if nz.numel() else 0.0)
        self.history.small_fraction.append(float((nz * scale < FP16_TINY).float().mean()) if nz.numel() else 0.0)
        return self.scaler.step(optimizer, *args, **kwargs)

    def update(self, new_scale=None) -> None:
        self._unscaled.clear()
        self.scaler.update(new_scale) if new_scale is not None else self.scaler.update()

    def is_enabled(self) -> bool:
        """The wrapped scaler's (one without ``is_enabled`` counts as enabled, as ``MixedPrecision`` reads it)."""
        return bool(getattr(self.scaler, "is_enabled", lambda: True)())

    def get_scale(self) -> float:
        return self.scaler.get_scale()

    @property
    def last_step_skipped(self) -> bool:
        """Whether the last step's gradients were not finite (what ``history.skipped`` records)."""
        return bool(self.history.skipped and self.history.skipped[-1])

    def state_dict(self):
        return self.scaler.state_dict()

    def load_state_dict(self, state) -> None:
        self.scaler.load_state_dict(state)


@dataclass(frozen=True)
class Diagnosis:
    """A class from :data:`RUN_KINDS`, the evidence (one sentence with numbers) and the suggested fix."""

    kind: str
    evidence: str
    fix: str

    def __post_init__(self) -> None:   # the class is shown: a Word (equal to its English name, shown translated)
        object.__setattr__(self, "kind", Word(self.kind))


_FIX = {
    "healthy": mark("nothing to fix."),
    "persistent": mark(
        "find the first inf/NaN with ampkit.diagnose.NonFiniteHunter; no scale fixes it. A forward op in "
        "a layer: a forward overflow, so use bf16 or run that layer in fp32. An op in the loss: fix the "
        "loss (log_softmax instead of log(softmax), clamp a norm before dividing by it)."),
    "transient": mark(
        "a rare skipped step needs no fix: it costs one step, and the scale grows back after "
        "growth_interval clean steps (2000 in torch.amp.GradScaler). Spikes more frequent than that step the "
        "scale down: find the outlier batches, or use a scaler with hysteresis (torch.amp.GradScaler has "
        "none; DeepSpeed's with consecutive_hysteresis=True, or ampkit.scaling.DynamicLossScaler("
        "hysteresis=2), backs off only after overflows in a row). With hysteresis a skipped step can leave "
        "the scale unchanged: count skips with an optimizer step hook, not from the scale."),
    "scale too low": mark(
        "raise the scale: use a dynamic scaler with its default init_scale 2**16 (torch.amp."
        "GradScaler) or a larger static scale, or train in bf16 (fp32's range)."),
    "growth too slow": mark("shorten growth_interval (e.g. 200 instead of 2000) or start from a higher init_scale."),
}


def _run_length(flags: list[bool]) -> int:
    n = 0
    for f in reversed(flags):
        if not f:
            break
        n += 1
    return n


def classify_run(history: ScalerHistory, persistent_steps: int = 5, small_threshold: float = 0.1) -> Diagnosis:
    """Classify a run from its scaler ``history`` (see the module docstring for the classes).

    ``persistent_steps`` (an int >= 1): how many skipped steps in a row at the end make a run ``persistent``
    (a run that skipped every step is persistent however short). ``small_threshold`` (a fraction in [0, 1]): the
    median share of gradient values below fp16's smallest normal above which the scale is too low.

    >>> one_skip = ScalerHistory(scales=[2.0**16] * 10, skipped=[False] * 4 + [True] + [False] * 5)
    >>> d = classify_run(one_skip)                   # the scale had not just grown: an outlier batch
    >>> d.kind, d.evidence
    ('transient', '1 isolated skipped step(s) (at [4]) not caused by a scale increase; the run recovers between them')
    """
    if not isinstance(history, ScalerHistory):
        raise TypeError(f"classify_run takes a ScalerHistory (RecordingScaler(...).history); "
                        f"got {type(history).__name__}")
    persistent_steps = check_int("persistent_steps", persistent_steps, minimum=1)
    small_threshold = check_number("small_threshold", small_threshold, example="0.1")
    if not 0.0 <= small_threshold <= 1.0:
        raise ValueError(tr("small_threshold must be a fraction between 0 and 1 (e.g. 0.1); got {value!r}",
                            value=small_threshold))
    n, s, sk = history.steps, history.scales, history.skipped
    if n == 0:
        raise ValueError(tr("the history is empty: run at least one step with a RecordingScaler"))
    tail = _run_length(sk)
    if tail >= min(persistent_steps, n) and (tail == n or tail >= persistent_steps):
        return Diagnosis("persistent", tr("the last {tail} of {n} steps were all skipped; the scale fell from "
                                          "2^{hi:.0f} to 2^{lo:.0f}", tail=tail, n=n, hi=math.log2(s[-tail]),
                                          lo=math.log2(s[-1])), tr(_FIX["persistent"]))
    # the first steps skipped in a row while the scale comes down to its level: calibration, normal
    calib = next((i for i, f in enumerate(sk) if not f), n)
    # a skip right after the scale grew is the dynamic scaler probing upward: normal. Others are spikes.
    spikes = [i for i in range(calib, n) if sk[i] and not (i > 0 and s[i] > s[i - 1])]
    if spikes:
        return Diagnosis("transient", tr("{n} isolated skipped step(s) (at {at}) not caused by a "
                                         "scale increase; the run recovers between them", n=len(spikes),
                                         at=spikes[:6]), tr(_FIX["transient"]))
    if history.small_fraction:
        frac = sorted(history.small_fraction)[len(history.small_fraction) // 2]
        if frac > small_threshold:
            return Diagnosis("scale too low", tr("median {frac:.0%} of the non-zero gradient values fall below "
                                                 "fp16's smallest normal ({tiny:.3g}) at scale 2^{k:.0f}", frac=frac,
                                                 tiny=FP16_TINY, k=math.log2(s[-1])),
                             tr(_FIX["scale too low"]))
    grew = any(s[i] > s[i - 1] for i in range(1, n))
    if not grew and history.grad_max and n >= 20:
        peak = max(history.grad_max)
        room = math.log2(FP16_MAX / (peak * s[-1])) if peak > 0 else math.inf
        if room >= 4:
            return Diagnosis("growth too slow", tr("no skip and no growth in {n} steps although the largest scaled "
                                                   "gradient is 2^{room:.0f} below fp16's max", n=n, room=room),
                             tr(_FIX["growth too slow"]))
    return Diagnosis("healthy", tr("{skipped} skipped of {n} steps: {calib} while the scale calibrated at the start, "
                                   "{probes} right after a scale increase", skipped=sum(sk), n=n, calib=calib,
                                   probes=sum(sk) - calib), tr(_FIX["healthy"]))
