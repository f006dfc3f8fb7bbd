"""Notebook 02_autocast_and_levels's exercises: the dtypes four unlisted ops return under CPU autocast, the bytes
O2 holds more than O0 with Adam, and the step of fp16 Adam with a raised ε.

State from the notebook: ``observed`` (section 2's probe: the group each op fell into). See :mod:`ampkit.exercises`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ampkit.dtypes import short_name
from ampkit.i18n import mark, tr
from ampkit.lessons import run_level
from ampkit.models import build_model
from ampkit.precision import adam_step_in

EX3_GRAD, EX3_EPS, EX3_LR = 1e-3, 1e-4, 2**-10
BETA1, BETA2 = 0.9, 0.999
TOLERANCE = {3: {"rel_tol": 0.02}}

HINT_1 = mark("lin(x) is already bf16, and an elementwise function such as tanh follows its input. A loss is kept "
              "in fp32 even when both of its inputs are bf16; baddbmm is a matrix product, lowered even from fp32.")
HINT_2 = mark("a negative answer counts only the halved weights: O2 keeps fp32 master weights and master gradients "
              "on top. Per parameter O0 holds 4 (weight) + 4 (grad) + 8 (Adam's two fp32 moments); O2 holds 2 + 2 "
              "+ 8 + 4 (master) + 4 (master grad). Multiply the difference by the parameter count.")
HINT_3 = mark("v = 0.001·g² = 1e-9 still rounds to 0 in fp16 (it is below 2**-25), so √v̂ = 0 and the denominator is "
              "eps alone: the step is lr · m̂ / eps, with m̂ = g after bias correction. Compare g / eps with 1.")


def expected_1() -> tuple[str, ...]:
    """The engine (torch's autocast): the four ops run under CPU bf16 autocast; their output dtypes."""
    gen = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x, t = torch.randn(4, 8, generator=gen), torch.randn(4, 8, generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = (torch.tanh(lin(x)), torch.tanh(x), F.smooth_l1_loss(lin(x), lin(t)),
                torch.baddbmm(torch.zeros(1, 4, 4), x[None], x.T[None]))
    return tuple(short_name(o.dtype) for o in outs)


def solution_1(observed: dict) -> tuple[str, ...]:
    rule = {"lower": lambda given: "bf16", "fp32": lambda given: "fp32", "unlisted": lambda given: given}
    group = {"tanh": "unlisted", "smooth_l1_loss": "fp32", "baddbmm": "lower"}
    lin_out = rule[observed["linear"]]("fp32")
    derived = (rule[group["tanh"]](lin_out), rule[group["tanh"]]("fp32"),
               rule[group["smooth_l1_loss"]](lin_out), rule[group["baddbmm"]]("fp32"))
    print(tr("tanh follows its input, smooth_l1_loss (a loss) is kept in fp32, baddbmm (a matrix product) is "
             "lowered; a Linear is lowered too, so lin(x) is {lin_out}: derived {derived}", lin_out=lin_out,
             derived=derived))
    return derived


def expected_2() -> int:
    """The engine: one Adam step of the MLP at O0 and at O2; the difference of their memory totals."""
    mem = {lv: run_level("mlp", lv, "bf16", steps=1, optimizer="adam", lr=1e-3).memory for lv in ("O0", "O2")}
    return mem["O2"].total - mem["O0"].total


def solution_2() -> int:
    n = sum(p.numel() for p in build_model("mlp").parameters())
    b32, b16 = (torch.finfo(dt).bits // 8 for dt in (torch.float32, torch.bfloat16))
    per_o0 = b32 + b32 + 2 * b32
    per_o2 = b16 + b16 + 2 * b32 + b32 + b32
    extra = n * (per_o2 - per_o0)
    print(tr("per parameter O0 holds {o0} bytes (weight, gradient, Adam's two moments), O2 {o2} (16-bit weight and "
             "gradient, fp32 moments, master weight and its gradient): {n} parameters x ({o2} - {o0}) = {extra} "
             "bytes more at O2", o0=per_o0, o2=per_o2, n=n, extra=extra))
    return extra


def expected_3() -> float:
    """The engine: one real torch.optim.Adam step on a weight of 1.0, fp16 with eps 1e-4 against fp32's default."""
    raised = adam_step_in("fp16", grads=[EX3_GRAD], lr=EX3_LR, eps=EX3_EPS)
    fp32 = adam_step_in("fp32", grads=[EX3_GRAD], lr=EX3_LR)
    return (1 - raised.weight[0]) / (1 - fp32.weight[0])


def _first_step(g: float, dtype: torch.dtype, eps: float) -> float:
    grad = torch.tensor(g, dtype=dtype)
    m, v = (1 - BETA1) * grad, (1 - BETA2) * grad * grad
    return ((m / (1 - BETA1)) / ((v / (1 - BETA2)).sqrt() + torch.tensor(eps, dtype=dtype))).item()


def solution_3() -> float:
    for g in (1e-5, EX3_GRAD, 1e-2):
        print(tr("g = {g:g}: Adam's first step m̂ / (√v̂ + eps) in fp16 with eps 1e-4: {h:.3g} x lr; in fp32 with "
                 "eps 1e-8: {f:.4g} x lr", g=g, h=_first_step(g, torch.float16, EX3_EPS),
                 f=_first_step(g, torch.float32, 1e-8)))
    return _first_step(EX3_GRAD, torch.float16, EX3_EPS) / _first_step(EX3_GRAD, torch.float32, 1e-8)
