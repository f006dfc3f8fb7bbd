"""Notebook 08_transformers_compiled_and_sharded's exercises: a compiled fp32 head's gradients, graphs per input
size, forward hooks under checkpointing, bf16 reduction's largest change, the dtype FSDP2 hands the logits over in,
and the smallest LayerNorm gain at which q·kᵀ overflows.

State from the notebook: ``head_run`` (the compiled one-block decoder with an fp32 head), ``n_params`` (its
parameter tensors), ``calls3`` (the forward hooks of the checkpointed 4-block decoder), ``sg`` (§7's sharded runs)
and ``bad`` (§8's hunted run at gain 400). See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from ampkit.dtypes import short_name
from ampkit.formats import FP16_MAX
from ampkit.i18n import mark, tr
from ampkit.lessons import CountingBackend, linear_calls, overflow_gain

EX2_SIZES = (3, 4, 1, 5, 1, 2)
EX3_LAYERS = 4
EX6_GAIN = 400.0
TOLERANCE = {6: {"rel_tol": 0.01}}

HINT_1 = mark("Backward runs from the loss down, and the head is the first layer it meets. Its backward has two "
              "matmuls: one for its weight gradient, one for the gradient of its input, which flows on into norm_f "
              "and every block below. Under 'same_as_forward' both were traced under autocast.")
HINT_2 = mark("Size 3 gives a static graph, and size 4 a graph with a symbolic size, as above. But a symbolic size "
              "does not stand for every size: dynamo specialises the sizes 0 and 1.")
HINT_3 = mark("Every block runs its forward again during backward, but the recomputation stops as soon as the last "
              "tensor the block saved for backward is back. Which Linear saves the last one, and does its forward "
              "get to return?")
HINT_4 = mark("Rounding to nearest moves a number by at most half the gap between its two bf16 neighbours. With 8 "
              "significant bits, how large is that gap next to a number just above a power of two, relative to the "
              "number?")
HINT_5 = mark("The policy casts each module's inputs and gathers its parameters in param_dtype. What does it do with "
              "a module's outputs unless you ask for it? MixedPrecisionPolicy has one more field than the two used "
              "here.")
HINT_6 = mark("q and k are both proportional to the gain (the LayerNorm's output is, and the qkv biases start at 0), "
              "so q·kᵀ grows with the square of the gain, not linearly.")


def expected_1(head_run: Any) -> int:
    """The engine: the first-step gradients of the compiled run that differ, bit for bit, from eager's."""
    return len(head_run.grads_differ)


def solution_1(head_run: Any, n_params: int) -> int:
    assert head_run.nonfinite_grads == ()
    print(tr("the head's input gradient flows through norm_f into every block: every one of the {n} parameter "
             "tensors is computed after the head's fp16 backward matmuls (none is non-finite)", n=n_params))
    return n_params


def _graphs(dynamic: bool | None) -> int:
    counter = CountingBackend("eager")
    f = torch.compile(lambda x: torch.softmax(x * 2.0, dim=-1), backend=counter, dynamic=dynamic)
    for n in EX2_SIZES:
        f(torch.ones(n))
    return counter.graphs


def expected_2() -> int:
    """The engine: torch.compile with ``dynamic=None`` called on the sizes, its graphs counted by the backend."""
    return _graphs(None)


def solution_2() -> int:
    graphs: list[tuple[str, int | None]] = [("static", EX2_SIZES[0])]
    for n in EX2_SIZES[1:]:
        fits = any(size == n if kind == "static" else n >= 2 for kind, size in graphs)
        if not fits:
            graphs.append(("static", n) if n in (0, 1) else ("symbolic", None))
    print(tr("graphs by the rule (a failed guard recompiles, symbolic unless the size is 0 or 1): {graphs}",
             graphs=graphs))
    return len(graphs)


def expected_3(calls3: Any) -> int:
    """The engine: the forward hooks counted in one step of the checkpointed decoder."""
    return calls3.total_finished


def solution_3(calls3: Any) -> int:
    plain = linear_calls(n_layers=EX3_LAYERS, checkpointed=False)
    full = linear_calls(n_layers=EX3_LAYERS, checkpointed=True, early_stop=False)
    cut_short = [n for n in calls3.finished if calls3.started[n] > calls3.finished[n]]
    assert cut_short == [f"blocks.{b}.mlp.2" for b in range(EX3_LAYERS)]
    print(tr("no checkpointing: {plain} hooks; every block recomputed to its end (early_stop=False): {full}; the "
             "recomputation stops at the last saved tensor, so mlp.2's forward never returns in {cut} blocks: "
             "{full} - {cut} = {total}", plain=plain.total_finished, full=full.total_finished, cut=len(cut_short),
             total=full.total_finished - len(cut_short)))
    return full.total_finished - len(cut_short)


def expected_4(sg: Any) -> int:
    """The runs: the largest relative change per element, bf16 reduce vs fp32 reduce; k with it in [2^-(k+1), 2^-k]."""
    a = torch.tensor(sg.runs["bf16 params, bf16 reduce"].grad)
    b = torch.tensor(sg.runs["bf16 params, fp32 reduce"].grad)
    nz = b != 0
    return math.floor(-math.log2(float(((a - b).abs()[nz] / b.abs()[nz]).max())))


def solution_4(sg: Any) -> int:
    p = 1 - int(math.log2(torch.finfo(torch.bfloat16).eps))
    fp32_reduce = torch.tensor(sg.runs["bf16 params, fp32 reduce"].grad)
    change = (torch.tensor(sg.runs["bf16 params, bf16 reduce"].grad) - fp32_reduce).abs()
    rel = change[fp32_reduce != 0] / fp32_reduce[fp32_reduce != 0].abs()
    largest = float(rel.max())
    print(tr("bf16 has p = {p} significant bits: rounding to nearest moves a number by at most 2^-p = {u:.3e} of "
             "its size; measured over {n} gradient elements: {largest:.3e}", p=p, u=2.0**-p, n=rel.numel(),
             largest=largest))
    assert 2.0 ** -(p + 1) < largest <= 2.0**-p
    return p


def expected_5(sg: Any) -> str:
    """The runs: the dtype rank 0 recorded for the logits of the bf16-policy model."""
    return sg.runs["bf16 params, fp32 reduce"].logits_dtype


def solution_5() -> str:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    print(policy)
    handed_over = policy.output_dtype or policy.param_dtype
    assert handed_over is not None
    print(tr("output_dtype is {out}: FSDP does not cast a module's outputs, the head computes in param_dtype",
             out=policy.output_dtype))
    try:
        torch.nn.functional.linear(torch.ones(1, 2), torch.ones(2, 2, dtype=torch.bfloat16))
        mixed = "accepted"
    except RuntimeError as e:
        mixed = f"RuntimeError: {e}"
    print(tr("F.linear(fp32 input, bf16 weight): {mixed}", mixed=mixed))
    assert mixed.startswith("RuntimeError")
    return short_name(handed_over)


def expected_6() -> float:
    """The engine: the smallest gain at which the hunter names aten.bmm, by bisection."""
    return overflow_gain("logits", lo=100.0, hi=1000.0, rel_tol=5e-3)


def solution_6(bad: Any) -> float:
    fp16_max = FP16_MAX
    predicted = EX6_GAIN * math.sqrt(fp16_max / bad.raw_logit_max)
    print(tr("q·kᵀ grows with the gain squared: 400 · √({max:.0f} / {top:.4g}) = {predicted:.1f}; the linear guess "
             "would be {linear:.0f}", max=fp16_max, top=bad.raw_logit_max, predicted=predicted,
             linear=EX6_GAIN * fp16_max / bad.raw_logit_max))
    return predicted
