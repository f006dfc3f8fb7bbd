"""Benchmark for ampkit.diagnose: what watching a training step for inf/NaN costs per step.

    .venv/bin/python benchmarks/bench_diagnose.py [--rounds 21] [--threads 1]

Five ways to run the same training step (bf16 autocast + GradScaler + SGD; the scaler is not needed with bf16, it
is there so that reading the scaler's found_inf is part of the watch's measured cost), on three MLPs:

- plain: the step as written;
- watch (full): ``ampkit.diagnose.watch(step, model, opt, scaler)``, a finite step: copies kept before the step,
  one fused check after it;
- watch (lazy): the same with ``snapshot="lazy"`` (no parameter copies on a finite step);
- hunter: the old always-on way, every step under ``NonFiniteHunter`` (a check after every op);
- detect_anomaly: ``torch.autograd.detect_anomaly(check_nan=True)`` around every step.

The variants run interleaved (one batch of steps of each per round), so machine noise hits them alike; each round
gives a ratio to that round's plain step, and the table shows the median ratio with its spread (the 25th to 75th
percentile over the rounds) and the median time per step. Then the one-off cost of a replay: a watched step whose
batch holds an inf (so it is restored and run again under the hunter) against the same bad step run plain.
Target: watch (full) / plain <= 2.0 on the small model's step (notebook 05's MLP, batch 32). Off, nothing is
installed (tests/test_diagnose_watch.py checks it), so not using the watch costs nothing. Timings depend on the
machine and on what else runs on it; the ratios are the result.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import interleaved  # noqa: E402

from ampkit.diagnose import NonFiniteHunter, watch  # noqa: E402
from ampkit.models import MLP  # noqa: E402

TARGET = 2.0
MODELS = (("tiny", "MLP 256-64x3-10, batch 32", (256, 64, 10, 3), 32),
          ("small", "MLP 8-32x2-3, batch 32 (notebook 05's model)", (8, 32, 3, 2), 32),
          ("medium", "MLP 256-1024x3-10, batch 512", (256, 1024, 10, 3), 512))
VARIANTS = ("plain", "watch (full)", "watch (lazy)", "hunter", "detect_anomaly")


def make(shape: tuple[int, int, int, int], batch: int, seed: int = 0):
    """A model, its optimizer and scaler, a step function, and one batch."""
    n_in, width, n_out, depth = shape
    torch.manual_seed(seed)
    model = MLP(n_in, width, n_out, depth=depth)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    g = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(batch, n_in, generator=g), torch.randint(0, n_out, (batch,), generator=g)

    def step(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return model, opt, scaler, step, x, y


def _anomaly():
    warnings.simplefilter("ignore")       # anomaly mode warns that it is slow
    return torch.autograd.detect_anomaly(check_nan=True)


def _spread(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return statistics.median(values), q[0], q[2]


def measure(shape, batch: int, rounds: int, steps: int) -> dict:
    model, opt, scaler, step, x, y = make(shape, batch)
    full = watch(step, model, opt, scaler)
    lazy = watch(step, model, opt, scaler, snapshot="lazy")
    runs = {"plain": (step, nullcontext), "watch (full)": (full, nullcontext), "watch (lazy)": (lazy, nullcontext),
            "hunter": (step, lambda: NonFiniteHunter(model)), "detect_anomaly": (step, _anomaly)}
    def one_step(fn, ctx) -> None:
        with ctx():
            fn(x, y)

    # two warm-up calls each (first calls allocate), then ``rounds`` rounds of ``steps`` steps of each variant
    times = interleaved({name: (lambda fn=fn, ctx=ctx: one_step(fn, ctx)) for name, (fn, ctx) in runs.items()},
                        rounds, warmup=2, inner=steps)
    assert not full.findings and not lazy.findings, "the benchmark's steps must stay finite"
    plain = times["plain"].samples
    out = {v: {"ms": times[v].median * 1e3, "ratio": _spread([t / p for t, p in zip(times[v].samples, plain)])}
           for v in VARIANTS}
    n_state = sum(p.numel() * p.element_size() for p in model.parameters())
    out["memory"] = {"params": n_state, "full": full.snapshot_bytes, "lazy": lazy.snapshot_bytes}
    return out


def replay_cost(shape, batch: int, rounds: int) -> dict:
    """A bad step (an inf in the batch) watched, so replayed, against the same bad step plain."""
    model, opt, scaler, step, x, y = make(shape, batch)
    bad = x.clone()
    bad[0, 0] = float("inf")
    watched = watch(step, model, opt, scaler, replays=10 ** 9)
    t = interleaved({"plain": lambda: step(bad, y), "watched": lambda: watched(bad, y)}, rounds, warmup=0)
    assert all(f.replayed and f.event is not None for f in watched.findings)
    return {"plain_ms": t["plain"].median * 1e3, "watched_ms": t["watched"].median * 1e3,
            "ratio": _spread([r / p for r, p in zip(t["watched"].samples, t["plain"].samples)]),
            "event": watched.findings[0].event}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds; the median is reported")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadiest on a shared machine)")
    args = ap.parse_args(argv)
    if args.rounds < 2 or args.threads < 1:
        ap.error("--rounds must be >= 2 and --threads >= 1")
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} interleaved rounds; one training "
          "step (bf16 autocast + GradScaler + SGD): median ratio to plain [25th-75th percentile], median ms/step")
    for key, label, shape, batch in MODELS:
        steps = 2 if key == "medium" else 20
        r = measure(shape, batch, args.rounds, steps)
        print(f"\n{key}: {label}")
        for v in VARIANTS:
            med, lo, hi = r[v]["ratio"]
            print(f"  {v:15s} {med:5.2f}x  [{lo:.2f}-{hi:.2f}]  {r[v]['ms']:8.3f} ms")
        mem = r["memory"]
        print(f"  copies kept by the watch: full {mem['full'] / 1e6:.3f} MB, lazy {mem['lazy'] / 1e6:.3f} MB "
              f"(parameters: {mem['params'] / 1e6:.3f} MB)")
        rc = replay_cost(shape, batch, max(3, args.rounds // 3))
        med, lo, hi = rc["ratio"]
        print(f"  one replay (a step with an inf in its batch): {rc['watched_ms']:.3f} ms against "
              f"{rc['plain_ms']:.3f} ms plain, {med:.2f}x [{lo:.2f}-{hi:.2f}]; it names "
              f"{rc['event'].op} in '{rc['event'].module}' ({rc['event'].phase})")
        if key == "small":
            ratio = r["watch (full)"]["ratio"][0]     # reported, never asserted: it depends on the machine's load
            print(f"  target watch (full) / plain <= {TARGET}: {'MET' if ratio <= TARGET else 'MISSED'} "
                  f"({ratio:.2f}x)")
    torch.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
