"""Notebook 07_transformers_in_16_bits's exercises: the factor scaling q first buys, the overflow scale of a long
context, a written-out RMSNorm with an outlier, the share of zero logit gradients over 8192 positions, and which
updates move a bf16 weight of 0.5.

No state from the notebook. See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math

import torch

from ampkit.i18n import mark, tr
from ampkit.lessons import attention_overflow, overflow_threshold, predicted_zero_share, underflow_share
from ampkit.models import RMSNorm
from ampkit.precision import nearest_threshold

HEAD, TOKENS, LONG = 64, 64, 1024
EX3_OUTLIER = 300.0
EX4_POSITIONS = 8192
EX5_WEIGHT, EX5_UPDATES = 0.5, (0.001, -0.001, 0.0015, -0.0015, 0.003, -0.003)
BANDS = (("a", 0.01), ("b", 0.5), ("c", 0.9), ("d", 1.01))
TOLERANCE = {1: {"rel_tol": 0.02}, 2: {"rel_tol": 0.08}}
#: the kit's own solutions are held to a tighter bound than a learner's prediction
SOLUTION_TOLERANCE = {1: {"rel_tol": 0.02}, 2: {"rel_tol": 0.01}}

HINT_1 = mark("the matmul now stores (q/√d)·kᵀ instead of q·kᵀ: how many times smaller is it? That product grows like "
              "s², not like s")
HINT_2 = mark("the threshold is where the largest of N = n(n+1)/2 products reaches 65520, not where one product's "
              "spread s²·√d does; the largest grows like √(2 ln N) spreads, so s falls like one over the square root "
              "of that")
HINT_3 = mark("every output is x times the same 1/√mean(x²): follow 300² through fp16 and then the mean of all 64 "
              "squares")
HINT_4 = mark("an entry is p/N: compare 2⁻²⁵·8192 = 2⁻¹² with the average probability 1/32000, and remember that most "
              "probabilities are far below their average")
HINT_5 = mark("0.5 is a power of two, like 1.0: the gap above it and the gap below it differ by a factor 2; an update "
              "must pass half the gap on its own side")


def expected_1() -> float:
    """The lesson: both thresholds from the largest product, in fp32."""
    return (overflow_threshold(HEAD, TOKENS, scale_at="q") / overflow_threshold(HEAD, TOKENS, scale_at="logits"))


def _bisect(where: str) -> float:
    lo, hi = 1.0, 1000.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if attention_overflow(mid, HEAD, "fp16", where).overflowed else (mid, hi)
    return hi


def solution_1() -> float:
    t_logits, t_q = _bisect("logits"), _bisect("q")
    print(tr("bisection on the fp16 attention: it overflows from s = {a:.2f} (scale on the logits) and s = {b:.2f} "
             "(scale on q): factor {f:.3f}, about √8 = {r:.3f}", a=t_logits, b=t_q, f=t_q / t_logits,
             r=math.sqrt(math.sqrt(HEAD))))
    return t_q / t_logits


def expected_2() -> float:
    """The lesson: the overflow threshold at 1024 tokens."""
    return overflow_threshold(HEAD, LONG)


def solution_2() -> float:
    q, k = (t.to(torch.float16) for t in (torch.randn(LONG, HEAD, generator=torch.Generator().manual_seed(0)),
                                          torch.randn(LONG, HEAD, generator=torch.Generator().manual_seed(1))))
    products = (q.double() @ k.double().T).abs().tril()
    s_star = math.sqrt(65520 / float(products.max()))
    n = LONG * (LONG + 1) // 2
    print(tr("{n} products; the largest is {top:.2f} spreads (the rule √(2 ln N): {rule:.2f}); fp16 overflows from "
             "s = {s:.1f}", n=n, top=float(products.max()) / math.sqrt(HEAD), rule=math.sqrt(2 * math.log(n)),
             s=s_star))
    assert not attention_overflow(0.98 * s_star, HEAD, tokens=LONG).overflowed
    assert attention_overflow(1.02 * s_star, HEAD, tokens=LONG).overflowed
    return s_star


def expected_3() -> str:
    """By hand: the written-out norm, one fp16 rounding at a time."""
    def h(v: float) -> float:
        return float(torch.tensor(v, dtype=torch.float16))

    values = [1.0] * (HEAD - 1) + [EX3_OUTLIER]
    mean_sq = h(sum(h(h(v) * h(v)) for v in values) / len(values))
    out = h(h(values[0]) * h(1 / math.sqrt(mean_sq + 1e-6))) if math.isfinite(mean_sq) else 0.0
    return {1.0: "a", 0.0: "c"}.get(out, "b")


def solution_3() -> str:
    x = torch.tensor([[1.0] * (HEAD - 1) + [EX3_OUTLIER]], dtype=torch.float16)
    with torch.no_grad():
        written_out, in_fp32 = RMSNorm(HEAD)(x), RMSNorm(HEAD, stat_dtype=torch.float32)(x)
    print(tr("x² of the outlier in fp16: {sq}; the output at an entry that was 1: written out {a}, statistic in fp32 "
             "{b:.4f}", sq=float(x[0, -1] * x[0, -1]), a=float(written_out[0, 0]), b=float(in_fp32[0, 0])))
    value = float(written_out[0, 0])
    return "d" if written_out.isnan().any() else "a" if value == 1.0 else "c" if value == 0.0 else "b"


def expected_4() -> str:
    """The lesson's prediction from the probabilities' distribution, put in its band."""
    share = predicted_zero_share(1 / EX4_POSITIONS)
    return "a" if share < 0.01 else "b" if share < 0.5 else "c" if share < 0.9 else "d"


def solution_4() -> str:
    unscaled = underflow_share("gradient", "fp16", positions=EX4_POSITIONS)
    scaled = underflow_share("gradient", "fp16", positions=EX4_POSITIONS, scale=2.0**16)
    print(tr("measured, a mean over {n} positions: {a:.1f} % of the fp16 gradient entries are 0; with the loss "
             "times 2¹⁶: {b:.3f} %", n=EX4_POSITIONS, a=100 * unscaled, b=100 * scaled))
    assert scaled < 0.001
    return next(choice for choice, top in BANDS if unscaled < top)


def expected_5() -> set[float]:
    """torch's bf16 cast, round to nearest, update by update."""
    w16 = torch.tensor(EX5_WEIGHT, dtype=torch.bfloat16)
    return {u for u in EX5_UPDATES if (w16.float() + u).to(torch.bfloat16) != w16}


def solution_5() -> set[float]:
    ups = torch.tensor(EX5_UPDATES)
    half = nearest_threshold(torch.full((len(EX5_UPDATES),), EX5_WEIGHT, dtype=torch.bfloat16), ups)
    print(tr("half a gap on each update's side: {half}", half=half.tolist()))
    return {u for u, h in zip(EX5_UPDATES, half.tolist()) if abs(u) > h}
