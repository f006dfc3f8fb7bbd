"""Notebook 05_amp_in_practice's exercises: clipping without ``unscale_``, a checkpoint that forgot the scaler's
state, how far an outlier batch can grow before the fp16 forward pass overflows, and DeepSpeed's hysteresis over
isolated spikes.

State from the notebook: its ``fresh``, ``batch``, ``params_of``, ``run`` and ``burst`` (§1), exercise 2's
checkpointed run (``model2``, ``opt2``, ``saved2``: the scale it reached), exercise 3's ``model3`` and batch ``x3``
and its ``largest_values`` (the largest |value| of the batch and of each module's output in the fp16 forward pass).
See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ampkit.diagnose import RecordingScaler
from ampkit.formats import info
from ampkit.i18n import mark, tr
from ampkit.lessons.amp_in_practice import outlier_run
from ampkit.scaling import DynamicLossScaler, preset, replay_flags

HYSTERESIS2, RESUMED_STEPS2, WEIGHT2 = 2, 14, 3000.0
EX4_SPIKES, EX4_STEPS = (5, 11, 17, 23), 24
TOLERANCE = {1: {"rel_tol": 0.01}, 3: {"rel_tol": 0.1}}

HINT_1 = mark("The clip sees the true norm times 2^16 and shrinks the gradients to norm 1.0; then scaler.step divides "
              "them by 2^16. The correct loop does not clip at all when the true norm is below 1.0.")
HINT_2 = mark("A fresh scaler starts at 2^16 with a full hysteresis count of 2. Every resumed step overflows until the "
              "scale is back where the run was, but the first overflow only lowers the count from 2 to 1 and leaves "
              "the scale; only from the second overflow in a row on does each one halve it. One skip per halving is "
              "torch's rule, without hysteresis.")
HINT_3 = mark("This ReLU network's forward pass grows in proportion to its input (the biases aside), so every value "
              "printed above grows with the factor, and the first to pass 65504 makes the first inf. Which one is "
              "largest? Not only the modules' outputs count: autocast casts the batch itself to fp16 when the first "
              "linear layer runs.")
HINT_4 = mark("With consecutive_hysteresis false the count is refilled only when the scale grows, and growing takes "
              "loss_scale_window (1000) clean steps: six clean steps between spikes do not refill it. The first spike "
              "lowers the count from 2 to 1 and keeps the scale; after that the count stays at 1 and every spike "
              "halves the scale.")


def _clipped_update(fresh: Callable, batch: Callable, params_of: Callable, unscale: bool) -> float:
    """The length of one fp16 SGD update clipped to norm 1, with or without ``unscale_`` before the clip."""
    m = fresh()
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    s = torch.amp.GradScaler("cpu")
    before = params_of(m)
    xb, yb = batch(4)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(m(xb), yb)
    s.scale(loss).backward()
    if unscale:
        s.unscale_(o)
    torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0)
    s.step(o)
    s.update()
    return float((params_of(m) - before).norm())


def expected_1(fresh: Callable, batch: Callable, params_of: Callable) -> float:
    """The engine: both loops run; how many times longer the correct update is."""
    return _clipped_update(fresh, batch, params_of, True) / _clipped_update(fresh, batch, params_of, False)


def solution_1(fresh: Callable, batch: Callable) -> float:
    model = fresh()
    scaler = torch.amp.GradScaler("cpu")
    xb, yb = batch(4)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(xb), yb)
    scaler.scale(loss).backward()
    scale = scaler.get_scale()
    true_norm = float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])) / scale
    assert true_norm < 1.0
    factor = true_norm * scale / 1.0
    print(tr("the true norm {norm:.4f} is below max_norm = 1, so the correct loop does not clip; without unscale_ "
             "the clip sees {norm:.4f} x 2^{k:.0f} and multiplies by 1 / {factor:.0f}", norm=true_norm,
             k=math.log2(scale), factor=factor))
    return factor


def expected_2(run: Callable, burst: Callable, model2: torch.nn.Module, opt2: torch.optim.Optimizer) -> int:
    """The engine: the checkpointed run resumed with a fresh scaler; the skips in a row right after resuming."""
    resumed = RecordingScaler(DynamicLossScaler(hysteresis=HYSTERESIS2))
    run(model2, opt2, resumed, 12, RESUMED_STEPS2, weight=WEIGHT2)
    return burst(resumed.history.skipped)


def solution_2(saved2: float) -> int:
    halvings = round(math.log2(2.0**16 / saved2))
    skips = halvings + (HYSTERESIS2 - 1)
    print(tr("halvings from 2^16 down to 2^{saved:.0f}: {halvings}; plus the overflow that used up the hysteresis "
             "count: {skips} skipped steps in a row", saved=math.log2(saved2), halvings=halvings, skips=skips))
    return skips


def expected_3(model3: torch.nn.Module, x3: torch.Tensor) -> float:
    """The engine: bisection on the fp16 forward pass for the factor at which it first holds an inf."""
    def finite(factor: float) -> bool:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            return bool(torch.isfinite(model3(x3 * factor)).all())

    lo, hi = 1.0, 1e9
    assert finite(lo) and not finite(hi)
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if finite(mid) else (lo, mid)
    return hi


def solution_3(largest_values: Callable) -> float:
    values = largest_values()
    first, biggest = max(values.items(), key=lambda kv: kv[1])
    threshold = info("fp16").overflow_threshold
    print(tr("the largest value of the fp16 forward pass at factor 1: {first} ({biggest:.3f}); it becomes inf from "
             "{threshold:.0f} on (values up to it round down to 65504): {threshold:.0f} / {biggest:.3f} = "
             "{factor:.0f}", first=first, biggest=biggest, threshold=threshold, factor=threshold / biggest))
    return threshold / biggest


def expected_4() -> float:
    """The engine: DeepSpeed's update_scale (the preset ``deepspeed``) replayed over the spikes."""
    flags = [step in EX4_SPIKES for step in range(EX4_STEPS)]
    return math.log2(replay_flags(preset("deepspeed"), flags).final_scale)


def solution_4() -> int:
    halvings = len(EX4_SPIKES) - (HYSTERESIS2 - 1)
    print(tr("no growth in {n} steps (it takes 1000 clean steps), so the hysteresis count is never refilled: the "
             "first spike uses it up, each of the {later} later spikes halves the scale: log2 = 16 - {later} = "
             "{log2}", n=EX4_STEPS, later=halvings, log2=16 - halvings))
    rules: dict[str, DynamicLossScaler | torch.amp.GradScaler] = {
        "consecutive_hysteresis=True": DynamicLossScaler(hysteresis=2),
        "torch.amp.GradScaler": torch.amp.GradScaler("cpu")}
    for label, scaler in rules.items():
        outlier_run(scaler, steps=EX4_STEPS, outliers=EX4_SPIKES)
        print(tr("beside it, trained: {label} ends at log2(scale) {log2:.0f}", label=label,
                 log2=math.log2(scaler.get_scale())))
    return 16 - halvings
