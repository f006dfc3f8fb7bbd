"""Benchmark the precision levels (issue 5): step time and memory per level and dtype, and two targets.

Targets:
- ampkit's O1 step (``train_step`` on ``apply_level(..., "O1")``) costs at most 1.05x a hand-written
  ``torch.autocast`` step (the toggle adds no overhead worth mentioning);
- O1-bf16 runs a matmul-dominated model at least 3x faster than O0 on a CPU with native bf16 (AVX512-BF16 or
  AMX-BF16, as ``ampkit.device.device_report().native`` says). On a CPU without them bf16 is emulated and slower
  than fp32: the target does not apply there and is reported as "n/a", with the measurement.

A and B are timed interleaved (A, B, A, B, ...) so that load from other programs hits both alike; tables show the
median time per step, and the target ratios are medians of back-to-back pairs (A_i / B_i). fp16 on a CPU without
fast fp16 kernels is ~100x slower than fp32 at large widths, so fp16 is measured on a 128-wide model
(and, twice, on a 512-wide one to show the slowdown).

Run: ``.venv/bin/python benchmarks/bench_precision.py [--threads N] [--repeats R] [--quick]``
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from _timing import interleaved, paired_ratio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ampkit.data import make_blobs  # noqa: E402
from ampkit.device import device_report  # noqa: E402
from ampkit.models import MLP  # noqa: E402
from ampkit.precision import LEVELS, apply_level, level_label, memory_report, speed_phrase  # noqa: E402
from ampkit.train import train_step  # noqa: E402

LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _setup(width: int, depth: int, batch: int, features: int):
    torch.manual_seed(0)
    model = MLP(features, width, 10, depth=depth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    X, y = make_blobs(batch, n_features=features, n_classes=10, seed=0)
    return model, opt, X, y


def make_step(level: str, dtype: str, **cfg):
    """A zero-argument callable doing one ampkit training step, and the MixedPrecision behind it."""
    model, opt, X, y = _setup(**cfg)
    mp = apply_level(model, opt, level, dtype)
    return (lambda: train_step(mp, X, y, F.cross_entropy)), mp


def o1_pair(dtype: str, **cfg):
    """Hand-written torch.autocast step and ampkit's O1 step on the SAME model and optimizer (O1 leaves both
    as they are), so that neither gets luckier tensors: they alternate on one training run."""
    model, opt, X, y = _setup(**cfg)
    mp = apply_level(model, opt, "O1", dtype)

    def raw():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=LOW[dtype]):
            loss = F.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return raw, (lambda: train_step(mp, X, y, F.cross_entropy))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steadier on a busy box)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller big model")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    reps = 5 if args.quick else args.repeats
    big = dict(width=768 if args.quick else 1024, depth=2, batch=1024, features=1024)
    small = dict(width=128, depth=2, batch=64, features=128)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), repeats {reps}")
    print(f"big model: MLP {big['features']}-{big['width']}x{big['depth']}-10, batch {big['batch']}; "
          f"small model: MLP {small['features']}-{small['width']}x{small['depth']}-10, batch {small['batch']}\n")

    # ---- step time and memory per level and dtype
    rows = []
    for dtype, cfg, label in (("bf16", big, "big"), ("fp16", small, "small")):
        fns, mps = {}, {}
        for lv in LEVELS:
            fns[lv], mps[lv] = make_step(lv, dtype, **cfg)
        t = {lv: timing.median for lv, timing in interleaved(fns, reps).items()}
        for lv in LEVELS:
            m = memory_report(mps[lv]).as_dict()
            rows.append((label, lv, dtype, t[lv] * 1e3, t["O0"] / t[lv], m["weights"], m["master weights"],
                         m["total"]))
    medium = dict(width=512, depth=2, batch=256, features=512)
    t_med = {lv: timing.median for lv, timing in
             interleaved({lv: make_step(lv, "fp16", **medium)[0] for lv in ("O0", "O1")}, 2, warmup=1).items()}
    print(f"{'model':6s} {'run':8s} {'ms/step':>9s} {'vs O0':>22s} {'weights':>10s} "
          f"{'masters':>10s} {'total (w+g+opt+masters)':>24s}")
    for label, lv, dt, ms, sp, w, mw, tot in rows:
        vs = "the reference" if lv == "O0" else speed_phrase(1.0, sp)
        print(f"{label:6s} {level_label(lv, dt):8s} {ms:9.2f} {vs:>22s} {w / 2**20:7.2f}MiB {mw / 2**20:7.2f}MiB "
              f"{tot / 2**20:21.2f}MiB")
    print(f"medium O0       {t_med['O0'] * 1e3:9.2f} {'the reference':>22s}   (MLP 512-512x2-10, batch 256)")
    print(f"medium O1 fp16  {t_med['O1'] * 1e3:9.2f} {speed_phrase(t_med['O1'], t_med['O0']):>22s}   "
          "(fp16 at width 512: slow without fast fp16 kernels)\n")

    # ---- targets
    raw, ours = o1_pair("bf16", **big)
    o0, _ = make_step("O0", "bf16", **big)
    t = interleaved({"raw": raw, "O1": ours, "O0": o0}, reps * 2)
    overhead = paired_ratio(t["O1"], t["raw"])
    speedup = paired_ratio(t["O0"], t["O1"])
    raw_s, ours_s = o1_pair("fp16", **small)
    ts = interleaved({"raw": raw_s, "O1": ours_s}, reps * 4)
    overhead_s = paired_ratio(ts["O1"], ts["raw"])
    raw_t, ours_t = o1_pair("bf16", width=8, depth=1, batch=8, features=8)
    tt = interleaved({"raw": raw_t, "O1": ours_t}, 300 if args.quick else 1000)
    extra_us = statistics.median(a - b for a, b in zip(tt["O1"].samples, tt["raw"].samples)) * 1e6
    print(f"ampkit O1's own cost per step (8-wide model, where nothing else costs much): {extra_us:.1f} µs "
          f"(raw step {tt['raw'].median * 1e6:.0f} µs) = {extra_us / (t['raw'].median * 1e6):.3%} of a big-model "
          "step\n")
    print(f"{'measurement':48s} {'value':>10s} {'target':>10s}  met")
    print(f"{'O1-bf16 ampkit / raw torch.autocast (big)':48s} {overhead:9.3f}x {'<= 1.05x':>10s}  "
          f"{'yes' if overhead <= 1.05 else 'NO'}")
    print(f"{'O1-fp16 ampkit / raw torch.autocast (small)':48s} {overhead_s:9.3f}x {'<= 1.05x':>10s}  "
          f"{'yes' if overhead_s <= 1.05 else 'NO'}")
    native = device_report("cpu").native.get(torch.bfloat16)
    verdict = ("yes" if speedup >= 3 else "NO") if native else "n/a (bf16 is not native on this CPU)"
    print(f"{'O1-bf16 speed-up over O0 (big)':48s} {speedup:9.2f}x {'>= 3x':>10s}  {verdict}")
    print(f"  (O1-bf16 measured {speed_phrase(1.0, speedup)}; native bf16 here: {native or 'no'})")
    print(f"\n(raw {t['raw'].median * 1e3:.2f} ms, ampkit O1 {t['O1'].median * 1e3:.2f} ms, O0 "
          f"{t['O0'].median * 1e3:.2f} ms per step, p90-p10 spread {t['O1'].spread * 1e3:.2f} ms for O1; "
          "timings depend on the CPU and on what else runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
