"""Notebook 10's experiments: E2M1's number line, MXFP4's scale rules per block amax, NVFP4's two levels against
E8M0 scales on the same blocks, 2D weight blocks, the Hadamard transform on gradients where it helps and where it
does not, stochastic rounding's bias and spread, and the recipe end to end on the toy decoder of notebook 07.
Taught in ``10_fp4.ipynb``; a lesson, above the engine (:mod:`ampkit.fp8`, :mod:`ampkit.formats.e2m1`), which does
not know it. Every number here is computed by the engine; this module only chooses the inputs and tabulates.

The Hadamard cases (:func:`hadamard_cases`): the transform is orthogonal, so the error it leaves on a block is the
error of quantizing the *rotated* block; it helps when rotating makes a block easier for E2M1, and hurts when it
makes it harder. E2M1 with the block's amax mapped to 6 likes a block whose values spread over 0 … 6 (a Gaussian
block, amax about 2-3× its root-mean-square: its *crest factor*); a block of values bunched near its amax (a common
offset, crest near 1) loses their differences in the coarse steps 4 → 6, and the transform spreads them out; a block
with one outlier (crest near 4 = √16) keeps the outlier exact and flushes the rest, and the transform flattens it
into 16 values of about outlier/4 that round alike, which is no better.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ampkit._util import check_int
from ampkit.data import make_data
from ampkit.formats import round_trip
from ampkit.formats.e2m1 import E2M1_MIDPOINTS, e2m1_neighbours
from ampkit.fp8.fp4_linear import NVFP4Recipe, to_nvfp4
from ampkit.fp8.hadamard import rht
from ampkit.fp8.linear import to_fp8
from ampkit.fp8.mx import SCALE_RULES, BlockRange, block_range, mx_fake_quantize
from ampkit.fp8.nvfp4 import nvfp4_fake_quantize, nvfp4_quantize
from ampkit.fp8.stochastic import sr_mean_bound, stochastic_round_e2m1
from ampkit.models import build_model, lm_loss
from ampkit.train import train

__all__ = ["LINE_POINTS", "line_point", "rule_table", "rel_error", "two_levels", "tensor_scale_effect",
           "weight_2d", "HADAMARD_CASES", "hadamard_gradient", "crest_factor", "hadamard_cases", "sr_stats",
           "RECIPE_RUNS", "FP4_MODEL", "recipe_runs", "RunSummary", "run_summary"]

#: the slider's range on E2M1's number line: 0 … 7.5 in steps of 1/8 (exact binary fractions)
LINE_POINTS = tuple(k / 8 for k in range(61))


def line_point(x: float) -> dict:
    """Where ``x`` lands on E2M1's line: its neighbours below and above, what it rounds to (the kit's cast), and
    whether it is a tie (a midpoint) or beyond 6 (saturates).

    >>> line_point(5.0)
    {'x': 5.0, 'lo': 4.0, 'hi': 6.0, 'to': 4.0, 'tie': True, 'saturates': False}
    """
    lo, hi = (float(t) for t in e2m1_neighbours(torch.tensor([min(x, 6.0)])))
    return {"x": x, "lo": lo, "hi": hi, "to": round_trip(x, "e2m1"), "tie": x in E2M1_MIDPOINTS,
            "saturates": x > 6.0}


def rule_table(amaxes, rules=SCALE_RULES) -> list[BlockRange]:
    """The engine's :func:`~ampkit.fp8.mx.block_range` for each block amax under each MX scale rule (E2M1)."""
    return [block_range(float(a), "e2m1", r) for a in amaxes for r in rules]


def rel_error(q: torch.Tensor, x: torch.Tensor) -> float:
    """``‖q − x‖ / ‖x‖`` (fp32)."""
    return float((q.float() - x.float()).norm() / x.float().norm())


def _gradient_like(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Rows of Gaussian values whose size varies row to row over three decades (as a gradient's tokens do)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g) * 10.0 ** (3 * torch.rand(rows, 1, generator=g) - 3)


def two_levels(rows: int = 64, cols: int = 256, seed: int = 0) -> dict[str, float]:
    """Relative error of the same tensor in NVFP4 (E4M3 block scales, blocks of 16), in E2M1 with E8M0 scales on
    the same 16-value blocks (rule ``"rceil"``), and in MXFP4 (E8M0, blocks of 32)."""
    x = _gradient_like(rows, cols, seed)
    return {"nvfp4": rel_error(nvfp4_fake_quantize(x), x),
            "e8m0_16": rel_error(mx_fake_quantize(x, "e2m1", 16, "rceil"), x),
            "mxfp4": rel_error(mx_fake_quantize(x, "e2m1", 32, "rceil"), x)}


def tensor_scale_effect(factors=(1e3, 1.0, 1e-3, 1e-6), seed: int = 0) -> list[dict[str, float]]:
    """The same tensor times each factor, in NVFP4 with its tensor scale (``amax`` its own) and without one
    (``amax=2688``: the second level is 1, the block scales alone must reach the values): relative error and the
    share of values that decode to zero."""
    base = _gradient_like(32, 256, seed)
    out = []
    for f in factors:
        x = base * f
        with_t = nvfp4_fake_quantize(x)
        without = nvfp4_quantize(x, amax=2688.0).dequantize()
        out.append({"factor": f, "with": rel_error(with_t, x), "without": rel_error(without, x),
                    "zero_without": float((without == 0).float().mean())})
    return out


def weight_2d(rows: int = 64, cols: int = 128, seed: int = 0) -> dict:
    """A weight in 16×16 blocks and in 1×16 blocks: whether quantizing it and its transpose agree (transposed back),
    and the relative error of each."""
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 0.02
    out = {}
    for tile in ("16x16", "1x16"):
        q, qt = nvfp4_fake_quantize(w, tile), nvfp4_fake_quantize(w.t().contiguous(), tile)
        out[tile] = {"transpose_equal": bool(torch.equal(q, qt.t())), "error": rel_error(q, w),
                     "disagree": float((q != qt.t()).float().mean())}
    return out


#: the gradients of :func:`hadamard_gradient`: a plain Gaussian, one with outlier tokens, one with a common offset
HADAMARD_CASES = ("gaussian", "outlier tokens", "offset")


def hadamard_gradient(case: str, tokens: int = 256, width: int = 64, seed: int = 0) -> torch.Tensor:
    """An output gradient ``dY`` (tokens × width): ``"gaussian"``; ``"outlier tokens"`` (every 37th token 50×
    larger); ``"offset"`` (1 + 0.1 × Gaussian: every value near the same size)."""
    if case not in HADAMARD_CASES:
        raise ValueError(f"case must be one of {', '.join(map(repr, HADAMARD_CASES))}; got {case!r}")
    dy = torch.randn(tokens, width, generator=torch.Generator().manual_seed(seed))
    if case == "outlier tokens":
        dy[::37] *= 50.0
    elif case == "offset":
        dy = 1.0 + 0.1 * dy
    return dy


def crest_factor(x: torch.Tensor) -> float:
    """The median over 1×16 blocks of ``block amax / block root-mean-square`` (1: all alike; 4 = √16: one value)."""
    b = x.float().reshape(-1, 16)
    rms = b.pow(2).mean(dim=1).sqrt()
    return float((b.abs().amax(dim=1) / rms)[rms > 0].median())


def hadamard_cases(tokens: int = 256, width: int = 64, seed: int = 0) -> list[dict]:
    """For each case of :data:`HADAMARD_CASES`: the wgrad GEMM ``dW = dYᵀ · X`` with NVFP4 operands (1×16 along the
    tokens) without and with the transform on both operands (``rht(dY.T)``, ``rht(X.T)``; the product is unchanged
    by it, exactly in real numbers): the crest factor of dYᵀ's blocks, the operand's relative error, the product's."""
    x = torch.randn(tokens, width, generator=torch.Generator().manual_seed(seed + 1))
    rows = []
    for case in HADAMARD_CASES:
        dy = hadamard_gradient(case, tokens, width, seed)
        ref = dy.t() @ x
        dyt, xt = dy.t().contiguous(), x.t().contiguous()
        row: dict = {"case": case}
        for tag, a, b in (("off", dyt, xt), ("on", rht(dyt), rht(xt))):
            qa = nvfp4_fake_quantize(a)
            row[f"crest_{tag}"] = crest_factor(a)
            row[f"operand_{tag}"] = rel_error(qa, a)
            row[f"product_{tag}"] = rel_error(qa @ nvfp4_fake_quantize(b).t(), ref)
        rows.append(row)
    return rows


def sr_stats(x: torch.Tensor, draws: int = 64, seed: int = 0) -> dict[str, float]:
    """Stochastic rounding of ``x`` (already in [-6, 6]) against round to nearest: the largest gap between the mean
    of ``draws`` draws and ``x`` (and the 6-sigma bound of :func:`~ampkit.fp8.stochastic.sr_mean_bound` it must stay
    under), round to nearest's largest gap (its bias), and the root-mean-square error of one draw vs one rounding."""
    draws = check_int("draws", draws, minimum=1)
    g = torch.Generator().manual_seed(seed)
    samples = torch.stack([stochastic_round_e2m1(x, g) for _ in range(draws)])
    rtn = torch.tensor([round_trip(float(v), "e2m1") for v in x.flatten().tolist()]).reshape(x.shape)
    gap = (samples.mean(0) - x).abs()
    return {"sr_mean_gap": float(gap.max()), "bound": float(sr_mean_bound(x, draws).max()),
            "within_bound": bool((gap <= sr_mean_bound(x, draws)).all()), "rtn_gap": float((rtn - x).abs().max()),
            "sr_rms_one_draw": float((samples[0] - x).pow(2).mean().sqrt()),
            "rtn_rms": float((rtn - x).pow(2).mean().sqrt())}


#: the model of the end-to-end runs: notebook 07's decoder, small enough for the notebook's time budget
FP4_MODEL = {"d_model": 32, "n_heads": 2, "n_layers": 2, "context": 16}
#: name -> (format, NVFP4Recipe switches, layers kept in higher precision besides the head)
RECIPE_RUNS: dict[str, tuple[str, dict, tuple[str, ...]]] = {
    "bf16": ("bf16", {}, ()),
    "fp8": ("fp8", {}, ()),
    "mxfp4": ("fp4", {"fmt": "mxfp4"}, ()),
    "nvfp4": ("fp4", {}, ()),
    "nvfp4, no RHT": ("fp4", {"rht": False}, ()),
    "nvfp4, no SR": ("fp4", {"stochastic": False}, ()),
    "nvfp4, 1x16 weights": ("fp4", {"weight_2d": False}, ()),
    "nvfp4, last block fp32": ("fp4", {}, ("blocks.1",)),
}


def _build(name: str, seed: int, sizes: dict | None = None) -> tuple[torch.nn.Module, str]:
    kind, switches, keep = RECIPE_RUNS[name]
    model = build_model("decoder", seed=seed, **{**FP4_MODEL, **(sizes or {})})
    if kind == "fp8":
        blocks = model.get_submodule("blocks")
        to_fp8(blocks)
    elif kind == "fp4":
        absent = [k for k in keep if k not in dict(model.named_modules())]
        if absent:
            raise ValueError(f"run {name!r} keeps {absent[0]!r}, which this model does not have "
                             f"(n_layers={sum(1 for _ in model.get_submodule('blocks').children())}): give it "
                             "more layers")
        kept = {"head", *keep}
        to_nvfp4(model, NVFP4Recipe(seed=seed, **switches),
                 keep=lambda n: any(n == k or n.startswith(k + ".") for k in kept))
    return model, "O1" if kind == "bf16" else "O0"


def recipe_runs(names=tuple(RECIPE_RUNS), seeds=(0, 1, 2), steps: int = 30, batch_size: int = 8,
                lr: float = 3e-3, last: int = 5, sizes: dict | None = None) -> dict[str, list[float]]:
    """Train the decoder once per name of :data:`RECIPE_RUNS` and seed (same data, same start per seed) with AdamW;
    per name, the mean loss of the last ``last`` steps of each seed's run. ``bf16``: autocast (O1); ``fp8``: the
    blocks' linear layers in simulated fp8 (:func:`~ampkit.fp8.linear.to_fp8`); FP4: every linear layer but the
    head (42 outputs, not a multiple of 16) and the ``keep`` ones in simulated NVFP4 / MXFP4, the rest in fp32.
    ``sizes`` overrides :data:`FP4_MODEL`'s (``{"n_layers": 1}``)."""
    steps, batch_size = check_int("steps", steps), check_int("batch_size", batch_size)
    unknown = [n for n in names if n not in RECIPE_RUNS]
    if unknown:
        raise ValueError(f"names must be among {', '.join(map(repr, RECIPE_RUNS))}; got {unknown[0]!r}")
    out: dict[str, list[float]] = {n: [] for n in names}
    for seed in seeds:
        context = {**FP4_MODEL, **(sizes or {})}["context"]
        data = make_data("decoder", seed=seed, n_samples=256, context=context)
        for name in names:
            model, level = _build(name, seed, sizes)
            hist = train(model, data, level=level, steps=steps, batch_size=batch_size, lr=lr, optimizer="adamw",
                         loss_fn=lm_loss, seed=seed)
            out[name].append(sum(hist.losses[-last:]) / last)
    return out


@dataclass(frozen=True)
class RunSummary:
    """One run name over the seeds: its mean final loss, and its gap to the reference run on the same seed (same
    data, same start): the mean gap and the smallest and largest of the seeds' gaps."""

    name: str
    mean: float
    gap: float
    gap_min: float
    gap_max: float


def run_summary(runs: dict[str, list[float]], reference: str = "bf16") -> list[RunSummary]:
    """Each run's mean final loss over the seeds and its per-seed gaps to ``reference`` (the seeds' spread of the
    gap is the noise a difference between two runs must beat).

    >>> [s.gap_max for s in run_summary({"bf16": [2.0, 3.0], "x": [2.5, 3.0]})]
    [0.0, 0.5]
    """
    if reference not in runs:
        raise ValueError(f"reference must be one of {', '.join(map(repr, runs))}; got {reference!r}")
    ref = runs[reference]
    out = []
    for name, v in runs.items():
        gaps = [a - b for a, b in zip(v, ref)]
        out.append(RunSummary(name, statistics.fmean(v), statistics.fmean(gaps), min(gaps), max(gaps)))
    return out
