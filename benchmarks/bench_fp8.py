"""Benchmark for issue 14 (ampkit.fp8 and its widget). Plain script: prints measurements side by side.

1. Per-step time of a simulated fp8 training step (HYBRID, delayed scaling: every nn.Linear an Fp8Linear) vs a bf16
   autocast step and an fp32 step of the same MLP on the same data, interleaved (A B C A B C ...) so machine noise hits
   all alike. Target: fp8 / bf16 <= 3.
   Note: on a CPU without AVX512-BF16 the bf16 step itself is slow; the fp32 ratio is printed too.
2. The amax-history explorer (drawn in the browser since issue #30): building it computes every setting at once
   (``explorer_sweep``: every history length x margin x algorithm x tensor), timed once; after that a history-slider
   move or an algorithm switch from code only looks the setting up (``_select``), timed per move. Target: median
   update <= 50 ms (a move in the page costs the kernel what ``bench_front_views.py`` measures).
3. The cost of the numerics done as Transformer Engine does them (issue 19), per call on one 256x256 tensor or one
   recorded run: ``amax_of`` (inf counts, NaN skipped), ``dequantize`` by the fp32 ``scale_inv`` beside a plain
   division, ``delayed_scales`` (zero-amax steps taken out, TE's fused update) and the MX "te" exponent rule (TE's
   ``float_to_e8m0`` bit by bit) beside the OCP floor rule. No target: median and spread, to compare.

Timings depend on the machine and its load; the ratios are what to compare. Run: python benchmarks/bench_fp8.py
"""
from __future__ import annotations

import statistics
import time

import torch
from _timing import interleaved
from torch import nn

from ampkit.fp8 import Fp8Recipe, amax_of, delayed_scales, dequantize, fp8_to_float, mx_exponents, quantize, to_fp8
from ampkit.lessons.fp8_scaling import record_amax_run
from ampkit.models import MLP
from ampkit.widgets.fp8 import AmaxHistoryExplorer


def _step_timer(mode: str, width: int = 256, batch: int = 128):
    torch.manual_seed(0)
    model = MLP(64, width, 10, depth=3)
    if mode == "fp8":
        to_fp8(model, Fp8Recipe())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        if mode == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x).float(), y)
        else:
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def bench_steps(repeats: int = 40) -> dict[str, float]:
    torch.set_num_threads(1)   # a small model on a shared machine: one thread is steadier (and as the notebook runs)
    steps = {m: _step_timer(m) for m in ("fp32", "bf16", "fp8")}
    times = interleaved(steps, repeats, warmup=3)
    med = {m: t.median for m, t in times.items()}
    print(f"training step (MLP 64-256x3-10, batch 128), median of {repeats} interleaved (p90 - p10 spread):")
    for m, t in times.items():
        print(f"  {m:5s} {1000 * t.median:7.2f} ms  ({1000 * t.spread:.2f})")
    print(f"  fp8 (simulated) is {med['fp8'] / med['bf16']:.2f}x the bf16 step time (target <= 3x); "
          f"{med['fp8'] / med['fp32']:.2f}x the fp32 step time")
    return med


def bench_widget() -> list[float]:
    torch.set_num_threads(1)
    rec = record_amax_run()
    t = time.perf_counter()
    w = AmaxHistoryExplorer(rec)
    build = time.perf_counter() - t
    moves = []
    for h in list(range(2, 42)) * 2:
        t = time.perf_counter()
        w.history.value = h
        moves.append(time.perf_counter() - t)
    switch = []
    for algo in ("most_recent", "max") * 5:
        w.history.value = 7
        t = time.perf_counter()
        w.algo.value = algo
        switch.append(time.perf_counter() - t)
    print("amax-history explorer (target: median update <= 50 ms):")
    print(f"  build, every setting computed (explorer_sweep): {1000 * build:.0f} ms once")
    print(f"  history slider move (a lookup): median {1000 * statistics.median(moves):.3f} ms "
          f"(max {1000 * max(moves):.3f}) over {len(moves)} moves")
    print(f"  algorithm switch (a lookup):    median {1000 * statistics.median(switch):.3f} ms")
    return moves


def bench_numerics(repeats: int = 200) -> dict[str, float]:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 256, generator=g)
    q = quantize(x, 3.0)
    amax = record_amax_run().amax["activation"]
    cases = {
        "amax_of (256x256)": lambda: amax_of(x),
        "dequantize: q * fp32(1/scale)": lambda: dequantize(q, 3.0),
        "plain q / scale (for comparison)": lambda: fp8_to_float(q) / 3.0,
        f"delayed_scales ({len(amax)} steps, history 16)": lambda: delayed_scales(amax, "e4m3", 16),
        "mx_exponents, TE rule (256x256)": lambda: mx_exponents(x, "e4m3", rounding="te"),
        "mx_exponents, OCP rule (256x256)": lambda: mx_exponents(x, "e4m3", rounding="ocp"),
    }
    print(f"numerics as Transformer Engine does them, median of {repeats} interleaved (p90 - p10 spread), one thread:")
    med = {}
    for name, t in interleaved(cases, repeats, warmup=1).items():
        med[name] = 1e6 * t.median
        print(f"  {name:40s} {med[name]:8.1f} us  ({1e6 * t.spread:.1f})")
    return med


if __name__ == "__main__":
    bench_steps()
    bench_widget()
    bench_numerics()
