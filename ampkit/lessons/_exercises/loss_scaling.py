"""Notebook 03_loss_scaling's exercises (section 14): the safe window's top, two scalers' floors, a moved edge,
clipping before unscaling, four presets' hysteresis and DeepSpeed's first growth after an overflow.

State from the notebook: ``grads`` (section 1's captured gradients). See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math

import torch

from ampkit.formats import info
from ampkit.i18n import mark, tr
from ampkit.scaling import PRESETS, MindSporeDynamicRule, TorchGradScalerRule, preset, replay_flags, scale_report

EX2_FLAGS = "oooo.."
EX5_FLAGS, EX5_PRESETS = "ooo.ooo", ("torch", "deepspeed", "deepspeed-consecutive", "paddle-2.2")
EX6_FLAGS, EX6_WINDOW = "o" + "." * 15, 3
TOLERANCE = {4: {"rel_tol": 1e-5}}

HINT_1 = mark("2**-20 * 2**k = 2**(k-20) must stay at or below 65504. fp16's largest value is not a power of two: "
              "2**16 = 65536 is already above it, so the largest power of two that fits is 2**15.")
HINT_2 = mark("each overflow halves both scales, but MindSpore's manager never goes below 1 while torch's has no "
              "floor; two clean steps then double each once.")
HINT_3 = mark("100 is not a power of two: the overflow edge moves by log2(100) = 6.64 binades, not by a whole number, "
              "so subtracting 6 or 7 from section 3's edge can miss. Compute log2(65520 / (100 * largest |gradient|)) "
              "(65520: fp16's overflow threshold) and round up.")
HINT_4 = mark("clip_grad_norm_ sees the still-scaled gradients: it compares 2**16 * 2**-10 = 64 with max_norm = 1 and "
              "shrinks them to norm 1; unscaling then divides by 2**16. (2**-10 is what the right order gives.)")
HINT_5 = mark("count the halvings over the six overflows: torch halves at every one; deepspeed at all but the first "
              "(nothing grows, so its hysteresis never comes back); deepspeed-consecutive at every overflow from the "
              "2nd of each run on; paddle-2.2 at every 2nd overflow of a run, its count restarting after each "
              "halving.")
HINT_6 = mark("the overflow halves 2**16 to 2**15. Then count the clean steps: the FIRST growth after an overflow "
              "needs loss_scale_window + 1 = 4 of them, each later growth 3 more. 20 would be torch's rule (or "
              "DeepSpeed up to v0.17.0); 18 gives every growth 4 steps.")


def expected_1() -> int:
    """The engine: the largest k at which 2**-20 * 2**k stores in fp16 without overflow."""
    return max(k for k in range(60) if scale_report(torch.tensor([2.0**-20]), k, "fp16").overflow == 0)


def solution_1() -> int:
    mantissa, exponent = math.frexp(info("fp16").max)
    top = exponent - 1
    print(tr("fp16's largest value {max} = {m} * 2**{e}: the largest power of two at or below it is 2**{top}",
             max=info("fp16").max, m=mantissa, e=exponent, top=top))
    k = top + 20
    print(tr("2**-20 * 2**k = 2**{top} gives k = {k}; one more (2**{next}) is above fp16's largest value",
             top=top, k=k, next=top + 1))
    return k


def expected_2() -> tuple[float, float]:
    """The engine: both rules replayed over ``EX2_FLAGS``."""
    return (replay_flags(TorchGradScalerRule(init_scale=4.0, growth_interval=2), EX2_FLAGS).final_scale,
            replay_flags(MindSporeDynamicRule(init_loss_scale=4.0, scale_window=2), EX2_FLAGS).final_scale)


def solution_2() -> tuple[float, float]:
    torch_s, ms_s = 4.0, 4.0
    for flag in EX2_FLAGS:
        if flag == "o":
            torch_s, ms_s = torch_s / 2, max(ms_s / 2, 1.0)
        print(tr("after {flag!r}: torch {t}, mindspore {m}", flag=flag, t=torch_s, m=ms_s))
    torch_s, ms_s = torch_s * 2, ms_s * 2
    print(tr("two clean steps are one growth window: both double, to ({t}, {m})", t=torch_s, m=ms_s))
    return torch_s, ms_s


def expected_3(grads: torch.Tensor) -> int:
    """The engine: the first static scale 2**k at which some gradient, 100 times larger, overflows in fp16."""
    return next(k for k in range(64) if scale_report(grads * 100, k, "fp16").overflow > 0)


def solution_3(grads: torch.Tensor) -> int:
    largest = float(grads.abs().max())
    exact = math.log2(info("fp16").overflow_threshold / (100 * largest))
    k = math.ceil(exact)
    print(tr("log2(65520 / (100 x largest |g| = {g:.3e})) = {exact:.2f}: 2**{below} still fits, the first "
             "overflowing k is {k}", g=largest, exact=exact, below=k - 1, k=k))
    return k


def _clip_scaled(scale: float, true_norm: float, max_norm: float) -> float:
    """Clip a still-scaled gradient with torch's ``clip_grad_norm_`` (the mistake), then unscale."""
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = torch.full((4,), true_norm / 2 * scale)
    torch.nn.utils.clip_grad_norm_([p], max_norm)
    return float(p.grad.norm()) / scale


def expected_4() -> float:
    """The engine: torch's clip_grad_norm_ run on a still-scaled gradient, then unscaled."""
    return _clip_scaled(2.0**16, 2.0**-10, 1.0)


def solution_4() -> float:
    scale, true_norm, max_norm = 2.0**16, 2.0**-10, 1.0
    seen = scale * true_norm
    coefficient = min(1.0, max_norm / (seen + 1e-6))
    received = seen * coefficient / scale
    print(tr("clip_grad_norm_ sees the scaled norm {seen} > {max_norm}: it multiplies by {c:.6f} "
             "(max_norm / (norm + 1e-6)), then unscaling divides by 2**16", seen=seen, max_norm=max_norm,
             c=coefficient))
    print(tr("received norm {r:.6e} = 2**{log2:.4f}, instead of 2**-10", r=received, log2=math.log2(received)))
    return received


def expected_5() -> str:
    """The engine: the four presets replayed over ``EX5_FLAGS``; the one with the highest final scale."""
    final = {n: replay_flags(PRESETS[n].make(**PRESETS[n].with_log2_init(16)), EX5_FLAGS).final_scale
             for n in EX5_PRESETS}
    top, second = sorted(final.values())[-2:][::-1]
    assert top > second, final   # one clear winner
    return max(final, key=lambda n: final[n])


def solution_5() -> str:
    runs = EX5_FLAGS.split(".")
    n_over = EX5_FLAGS.count("o")
    halvings = {"torch": n_over,
                "deepspeed": n_over - 1,
                "deepspeed-consecutive": sum(len(run) - 1 for run in runs),
                "paddle-2.2": sum(len(run) // 2 for run in runs)}
    final_log2 = {n: 16 - h for n, h in halvings.items()}
    best = max(final_log2, key=lambda n: final_log2[n])
    print(tr("halvings: {halvings} | final log2(scale): {final} -> {best}", halvings=halvings, final=final_log2,
             best=best))
    return best


def expected_6() -> float:
    """The engine: log2 of the ``deepspeed`` preset's final scale, replayed over ``EX6_FLAGS``."""
    rule = preset("deepspeed", initial_scale_power=16, loss_scale_window=EX6_WINDOW, hysteresis=1)
    return math.log2(replay_flags(rule, EX6_FLAGS).final_scale)


def solution_6() -> int:
    log2_scale = 16 - EX6_FLAGS.count("o")
    clean = EX6_FLAGS.count(".")
    first, later = EX6_WINDOW + 1, EX6_WINDOW
    growths = 0 if clean < first else 1 + (clean - first) // later
    print(tr("the overflow halves 2**16 to 2**{s}; {clean} clean steps = the first growth after {first}, then one "
             "every {later}: {growths} growths", s=log2_scale, clean=clean, first=first, later=later,
             growths=growths))
    print(tr("log2 of the final scale: {s} + {growths} = {total}", s=log2_scale, growths=growths,
             total=log2_scale + growths))
    return log2_scale + growths
