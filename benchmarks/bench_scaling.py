"""Benchmark for issue 6 (ampkit.scaling and its widgets). Plain script: prints measurements side by side.

1. Per-step time of a training step with ampkit's DynamicLossScaler vs torch.amp.GradScaler on the same model and
   data, measured in one run, interleaved (A B A B ...) so that machine noise hits both alike.
   Target: ampkit / torch <= 1.10.
   Also: the scaler calls alone (scale, unscale_, step, update on ready gradients) — the pure overhead.
2. The visual loss scaler and the replay, drawn in the browser since issue #30: building the scaler sweeps every
   slider position of every format (timed once); after that a slider move or a format switch from code only looks
   the position up (``log2_scale``/``fmt`` set, timed per move); the replay's update after a "growth every" move
   (one control away from the start: precomputed) and with every preset overlaid after an init move.
   Target: median slider update <= 50 ms (what a move in the page costs the kernel: ``bench_front_views.py``).
3. The pure-Python rule replays of ``ampkit.scaling.replays`` that notebook 03 runs (6000 clean steps of torch's
   rule; MindSpore's rule on the same flags). Target: well under 100 ms each (they run in a notebook cell).
4. Building the cross-framework defaults table (``defaults_table()``: every preset measured with ``describe``, the
   rules in their frameworks' exact float arithmetic), which notebook 03 builds once. No target: median and spread.

Timings depend on the machine and its load; the ratios are what to compare. Run: python benchmarks/bench_scaling.py
"""
from __future__ import annotations

import statistics
import time

import torch
from _timing import Timing, interleaved, paired_ratio, time_one

from ampkit.lessons.loss_scaling import train_task, underflow_task
from ampkit.models import MLP
from ampkit.scaling import (
    DynamicLossScaler,
    MindSporeDynamicRule,
    TorchGradScalerRule,
    capture_gradients,
    replay_flags,
)
from ampkit.scaling.presets import PRESETS, defaults_table, preset_names
from ampkit.widgets.scaling import ScalerReplay, VisualLossScaler


def _train_step_timer(make_scaler, width: int = 256, batch: int = 128):
    torch.manual_seed(0)
    model = MLP(64, width, 10, depth=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = make_scaler()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


def _scaler_only_timer(make_scaler, n_tensors: int = 24):
    params = [torch.zeros(256, requires_grad=True) for _ in range(n_tensors)]
    opt = torch.optim.SGD(params, lr=0.0)
    scaler = make_scaler()
    loss = sum(p.sum() for p in params)

    def step() -> None:
        for p in params:
            p.grad = torch.ones(256)
        scaler.scale(loss.detach())
        scaler.step(opt)
        scaler.update()
    return step


def widget_latencies() -> dict[str, float]:
    task = underflow_task()
    grads = capture_gradients(task.model(), task.X[:128], task.y[:128], loss_weight=task.loss_weight)
    t0 = time.perf_counter()
    view = VisualLossScaler(grads)
    build = time.perf_counter() - t0
    moves = []
    for k in list(range(view.min_log2, view.max_log2 + 1)) + list(range(view.max_log2, view.min_log2 - 1, -1)):
        t0 = time.perf_counter()
        view.log2_scale = k
        moves.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    view.fmt = "bfloat16"
    switch = time.perf_counter() - t0
    run = train_task(task, "fp32", steps=150)
    rp = ScalerReplay(run.grad_max, growth_interval=5)
    rtimes = []
    for v in range(1, 80):
        t0 = time.perf_counter()
        rp.interval.value = v
        rtimes.append(time.perf_counter() - t0)
    every = ScalerReplay([1e-6 * (1 + (i % 7)) for i in range(150)], presets=tuple(PRESETS))
    ptimes = []
    for k in range(40):
        t0 = time.perf_counter()
        every.init.value = k
        ptimes.append(time.perf_counter() - t0)
    return {"build (every position of every format swept)": build,
            "slider move, a lookup (median)": statistics.median(moves), "slider move, a lookup (max)": max(moves),
            "format switch, a lookup": switch, "replay slider (median)": statistics.median(rtimes),
            f"replay with all {len(PRESETS)} presets, init slider (median)": statistics.median(ptimes)}


def rule_replays() -> dict[str, float]:
    """Median seconds of each rule's replay of 6000 clean steps, the two rules in turn, 5 rounds."""
    replays = {"torch rule, 6000 clean steps": lambda: TorchGradScalerRule(init_scale=2.0**13),
               "MindSpore rule, 6000 clean steps": lambda: MindSporeDynamicRule(init_loss_scale=2.0**13)}
    fns = {name: (lambda make=make: replay_flags(make(), "." * 6000)) for name, make in replays.items()}
    return {name: t.median for name, t in interleaved(fns, 5, warmup=0).items()}


def defaults_table_times(repeats: int = 5) -> Timing:
    """Seconds to build the defaults table from the presets, ``repeats`` times."""
    return time_one(defaults_table, repeats, warmup=0)


def _ms_table(title: str, times: dict[str, float], target: str, value: float, limit: float) -> None:
    """Print ``times`` (seconds) in ms under ``title``, then whether ``value`` meets ``target`` (<= ``limit`` s)."""
    print(f"{title:48s} {'ms':>10s}")
    for name, t in times.items():
        print(f"{name:48s} {t * 1e3:10.3f}")
    verdict = "MET" if value <= limit else "NOT MET"
    print(f"target: {target} <= {limit * 1e3:.0f} ms -> {verdict} ({value * 1e3:.3f} ms)")


def main() -> None:
    # One intra-op thread: the scalers are what differs; with several threads a loaded machine's scheduling noise
    # (other processes on the same cores) swamps a difference of a few percent.
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread\n")
    ours_t = lambda: DynamicLossScaler(init_scale=2.0**10)                    # noqa: E731
    torch_t = lambda: torch.amp.GradScaler("cpu", init_scale=2.0**10)         # noqa: E731
    rows = []
    for name, timer, inner in (("training step, MLP 64-256x3-10, batch 128", _train_step_timer, 30),
                               ("scaler calls only, 24 grad tensors", _scaler_only_timer, 200)):
        t = interleaved({"ampkit": timer(ours_t), "torch": timer(torch_t)}, 11, warmup=5, inner=inner)
        rows.append((name, t["ampkit"], t["torch"]))
    print(f"{'per step (median of 11 rounds; min in brackets)':45s} {'ampkit':>18s} {'torch':>18s} "
          f"{'ratio':>12s}\n(ratio: median over the rounds of ampkit / torch, each round's pair run back to back)")
    for name, a, b in rows:
        print(f"{name:45s} {a.median * 1e3:7.3f} ({a.min * 1e3:6.3f})ms {b.median * 1e3:7.3f} ({b.min * 1e3:6.3f})ms "
              f"{paired_ratio(a, b):5.2f} ({a.min / b.min:4.2f})")
    ratio = paired_ratio(rows[0][1], rows[0][2])
    print(f"target: training step ampkit/torch <= 1.10 -> {'MET' if ratio <= 1.10 else 'NOT MET'} ({ratio:.2f})\n")

    lat = widget_latencies()
    _ms_table("visual loss scaler / replay", lat, "median slider update", lat["slider move, a lookup (median)"], 0.050)
    print()
    rules = rule_replays()
    _ms_table("rule replays (median of 5)", rules, "each replay", max(rules.values()), 0.100)
    table = defaults_table_times()
    print(f"\ndefaults table, {len(preset_names())} presets (5 builds): median {table.median * 1e3:.0f} ms,"
          f" min {table.min * 1e3:.0f} ms, max {table.max * 1e3:.0f} ms (depends on the CPU and its load)")


if __name__ == "__main__":
    main()
