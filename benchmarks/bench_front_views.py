"""The views drawn in the browser (``ampkit.widgets.front``): what a control move costs the kernel, what it sends,
and what the views' saved state adds to the stored notebooks (issue #30 "Views drawn in the browser").

Every figure is a median (no timed tests; timings depend on the machine and its load). Each figure means:

- **kernel work per move** (``median_ms``, ``first_ms``, ``max_ms``): the seconds Python spends when one move from
  the page reaches the kernel. The move is delivered as the comm message the page sends (``{"method": "update",
  "state": {trait: value}}`` handed to the widget's ``_handle_msg``: ipywidgets' echo, the trait's validation, the
  view's observers, whatever they send back), one value after another (``_timing.interleaved``, one sample a
  move, no warm-up: ``first_ms`` is the first move, which may compute what was not precomputed). Target: <= 1 ms
  median where the move is not precomputed (a precomputed move only selects).
- **bytes per move**: ``bytes_per_move`` is the JSON of the page's update message (page -> kernel);
  ``reply_bytes_per_move`` the median bytes the kernel sends back for one move (the echo of the trait, any trait
  its observers change, custom messages; counted at ``Widget._send``). Target: <= 2 KB.
- **LiveLossPlot**: no control (``bytes_per_move`` 0); ``plot.update(hist)`` timed after each step appended to a
  1000-step run (``last_100_median_ms``: the last 100, to show it does not grow with the run), ``message_bytes``
  the message it sends (``len(json.dumps(plot.sent[-1]))``: the new point only), ``reply_bytes_per_move`` that
  message as the comm sends it.
- **ScalerReplay** ``setting`` (random): four sliders moved at once to a random setting of its grid, which the
  engine did not precompute (it replays ``ScalerReplay.grad_max``: notebook 03's 150-step fp32 run);
  ``reply_bytes_per_move`` then includes ``current``, the one replay the page lacks (also given alone as
  ``current_bytes``: ``len(json.dumps({"current": view.current}))``).
- **saved state per view** (``views_bytes``): the JSON of each kit view's model in the notebook's widget state
  (a view appearing twice is keyed ``Class 2``; one held by another view ``Class (in Other)``), per committed
  notebook of both editions; ``notebook_bytes`` the file; ``without_state_bytes`` the same notebook with the
  widget state removed (as ``json.dumps(indent=1)`` writes it); ``before_30_bytes`` the file at ``BEFORE_30``, the
  commit before issue #30's first (views as PNGs drawn by the kernel, no widget state). Target: <= 200 KB a view.

The key press -> redrawn latency inside the page is ``benchmarks/bench_browser_latency.py``.

    .venv/bin/python benchmarks/bench_front_views.py [--json [PATH]]   # PATH: benchmarks/results/front_views.json
"""
from __future__ import annotations

import datetime
import json
import random
import subprocess
import sys
from pathlib import Path

from _timing import interleaved
from bench_notebooks import host_info

ROOT = Path(__file__).resolve().parents[1]
STATE = "application/vnd.jupyter.widget-state+json"
METHOD = "the page's update message handed to Widget._handle_msg (echo, validation, observers, replies)"
BEFORE_30 = "7613768"      # the parent of issue #30's first commit (6affb3d): every view a PNG drawn in the kernel


class _Sent:
    """Counts the bytes every widget sends to the page (``Widget._send`` wrapped) while it is entered."""

    def __enter__(self) -> _Sent:
        from ipywidgets import Widget

        self.bytes: list[int] = []
        self._real = real = Widget._send

        def send(widget, msg, buffers=None):
            self.bytes.append(len(json.dumps(msg)) + sum(len(b) for b in buffers or []))
            return real(widget, msg, buffers)

        Widget._send = send
        return self

    def __exit__(self, *exc) -> None:
        from ipywidgets import Widget

        Widget._send = self._real


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _moves(view, trait: str, values: list) -> dict:
    """Deliver each of ``values`` in turn as the page's update of ``trait``: seconds per move, bytes each way."""
    it = iter(values)
    replies: list[int] = []
    rejected: list = []

    def move() -> None:
        value = next(it)
        msg = {"method": "update", "state": {trait: value}, "buffer_paths": []}
        with _Sent() as sent:
            view._handle_msg({"content": {"data": msg}, "buffers": []})   # a rejected value is logged, not raised
        replies.append(sum(sent.bytes))
        if getattr(view, trait) != value:
            rejected.append(value)

    timing = interleaved({trait: move}, rounds=len(values), warmup=0)[trait]
    message = json.dumps({"method": "update", "state": {trait: values[-1]}, "buffer_paths": []})
    return {"trait": trait, "median_ms": round(timing.median * 1e3, 4), "first_ms": round(timing.samples[0] * 1e3, 4),
            "max_ms": round(timing.max * 1e3, 4), "moves": len(timing.samples), "bytes_per_move": len(message),
            "reply_bytes_per_move": _median(replies), "reply_bytes_max": max(replies),
            **({"rejected": len(rejected), "first_rejected": repr(rejected[0])} if rejected else {})}


def _replay_view():
    """Notebook 03's ScalerReplay: the gradient maxima of its 150-step fp32 run of the underflow task."""
    from ampkit.lessons.loss_scaling import train_task, underflow_task
    from ampkit.widgets import ScalerReplay

    return ScalerReplay(train_task(underflow_task(), "fp32", steps=150).grad_max, init_log2=16, growth_interval=5)


def _replay_moves() -> dict:
    from ampkit.widgets.replay import GRID

    view = _replay_view()
    rng = random.Random(0)
    settings = [[rng.choice(GRID[n]) for n in GRID] for _ in range(200)]
    out = {"ScalerReplay (random setting)": _moves(view, "setting", settings)}
    out["ScalerReplay (random setting)"]["current_bytes"] = len(json.dumps({"current": view.current}))
    view = _replay_view()
    origin = list(view.origin)
    out["ScalerReplay (interval slider)"] = _moves(view, "setting", [[origin[0], k, *origin[2:]] for k in
                                                                    list(range(1, 501, 7)) + [origin[1]]])
    return out


def _loss_plot() -> dict:
    """LiveLossPlot fed a 1000-step run one step at a time (as ``train``'s callback with ``every=1``)."""
    from ampkit.train import History
    from ampkit.widgets import LiveLossPlot

    plot, hist = LiveLossPlot(), History(level="O2", dtype="fp16")
    rng = random.Random(0)

    def step() -> None:
        hist.losses.append(2.3 * 0.998 ** len(hist.losses) + 0.05 * rng.random())
        plot.update(hist)

    with _Sent() as sent:
        t = interleaved({"update": step}, rounds=1000, warmup=0)["update"]
    last = sorted(t.samples[-100:])
    return {"trait": "(message)", "median_ms": round(t.median * 1e3, 4), "first_ms": round(t.samples[0] * 1e3, 4),
            "max_ms": round(t.max * 1e3, 4), "last_100_median_ms": round(last[50] * 1e3, 4), "moves": 1000,
            "bytes_per_move": 0, "message_bytes": len(json.dumps(plot.sent[-1])),
            "reply_bytes_per_move": _median(sent.bytes[-100:]), "reply_bytes_max": max(sent.bytes)}


def kernel_work() -> dict:
    """Each browser-drawn view's controls, moved over their positions."""
    import torch

    from ampkit.lessons.amp_in_practice import SCENARIOS
    from ampkit.lessons.fp8_scaling import record_amax_run
    from ampkit.widgets import (
        AmaxHistoryExplorer,
        AmpDoctor,
        AttentionOverflowView,
        BlockScalingExplorer,
        FloatExplorer,
        OLevelPicker,
        RangeMap,
        RoundingSlider,
        SinkTimeline,
        VisualLossScaler,
    )

    torch.set_num_threads(1)     # as the notebooks' training runs
    rounding = RoundingSlider()
    n = int((rounding.max_exp - rounding.min_exp) / rounding.step)
    grads = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 1e-6
    scaler = VisualLossScaler(grads)
    picker = OLevelPicker(model="mlp_ln", steps=40, dtype="bf16")
    amax = AmaxHistoryExplorer(record_amax_run())
    work = {
        "RoundingSlider": _moves(rounding, "value", [10 ** (rounding.min_exp + k * rounding.step) for k in range(n)]),
        "FloatExplorer": _moves(FloatExplorer(), "value_repr", [repr(2.0 ** (-150 + k * 0.01))
                                                               for k in range(0, 27900, 97)]),
        "RangeMap (gradients)": _moves(RangeMap(("fp16",), values=grads), "scale_exp", [float(k) for k in range(33)]),
        "OLevelPicker (level)": _moves(picker, "level", ["O1", "O2", "O3", "O0"] * 10),
    }
    picker.level = "O2"
    low = [v for v, _ in picker.dtypes if v != picker.low][0]
    work["OLevelPicker (low)"] = _moves(picker, "low", [low, picker.low] * 10)
    work["OLevelPicker (low)"]["note"] = f"at O2: the first move trains O2 {low} (40 steps), the others select"
    work["VisualLossScaler"] = _moves(scaler, "log2_scale", list(range(scaler.min_log2, scaler.max_log2 + 1)))
    work.update(_replay_moves())
    work["SinkTimeline (sink_size)"] = _moves(SinkTimeline(), "sink_steps", list(range(1, 33)) + [4])
    doctor = AmpDoctor()
    work["AmpDoctor (scenario)"] = _moves(doctor, "scenario", list(SCENARIOS) * 4)
    work["AmpDoctor (fixed)"] = _moves(doctor, "fixed", [True, False] * 10)
    work["AmaxHistoryExplorer (history)"] = _moves(amax, "history_len", list(range(1, amax.rec.steps + 1)) + [16])
    blocks = BlockScalingExplorer(scheme="mx", block=32, fmt="e4m3", rounding="ocp")     # notebook 06's
    sizes = [v for v, _ in blocks.choices["block"] if v != blocks.block]
    work["BlockScalingExplorer (block)"] = _moves(blocks, "block", (sizes + [blocks.block]) * 4)
    work["AttentionOverflowView"] = _moves(AttentionOverflowView(), "act_scale", [2 ** (k / 4) for k in range(37)])
    work["LiveLossPlot (1000 steps)"] = _loss_plot()
    return work


def _view_names(models: dict) -> dict[str, int]:
    """Each kit view's saved model -> its bytes, keyed by class (``Class 2`` for a second one; ``Class (in
    Other)`` for a view held by another view, e.g. FloatExplorer's RangeMap)."""
    views = {mid: m for mid, m in models.items() if m.get("model_module") == "anywidget"}
    cls = {mid: m["state"].get("_anywidget_id", "?").rsplit(".", 1)[-1] for mid, m in views.items()}
    out: dict[str, int] = {}
    for mid, m in views.items():
        holders = [cls[o] for o, other in views.items() if o != mid and f"IPY_MODEL_{mid}" in json.dumps(other)]
        name = cls[mid] + (f" (in {holders[0]})" if holders else "")
        k, key = 1, name
        while key in out:
            k += 1
            key = f"{name} {k}"
        out[key] = len(json.dumps(m))
    return out


def _before_bytes(rel: str) -> int | None:
    r = subprocess.run(["git", "cat-file", "-s", f"{BEFORE_30}:{rel}"], cwd=ROOT, capture_output=True, text=True)
    return int(r.stdout) if r.returncode == 0 else None


def saved_state() -> dict:
    out = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
            sorted((ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text())
        models = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
        rel = str(path.relative_to(ROOT))
        without = dict(nb, metadata={k: v for k, v in nb["metadata"].items() if k != "widgets"})
        out[rel] = {"views_bytes": _view_names(models), "notebook_bytes": path.stat().st_size,
                    "without_state_bytes": len(json.dumps(without, indent=1, ensure_ascii=False).encode()) + 1,
                    "before_30_bytes": _before_bytes(rel)}
    return out


def _earlier(path: Path) -> list[dict]:
    """The runs kept in ``path`` before this one (each with its date, host and figures), newest first: a run's
    figures are never lost when the file is rewritten."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    runs = old.pop("earlier_runs", [])
    old.pop("saved_state", None)       # the committed notebooks' sizes are in git; the timings are not
    old.setdefault("method", "setattr(view, trait, value) from Python (no comm message, no echo)")
    return [old, *runs]


def main(argv: list[str]) -> int:
    work, saved = kernel_work(), saved_state()
    print("kernel work per control move (the page's update message handled by the widget), median over the moves "
          "[targets: <= 1 ms where not precomputed; <= 2048 bytes each way]:")
    for name, r in work.items():
        print(f"  {name:32} {r['trait']:11} median {r['median_ms']:8.3f} ms (first {r['first_ms']:.3f}, max "
              f"{r['max_ms']:.3f}) over {r['moves']:3} moves; {r['bytes_per_move']:4} bytes in, "
              f"{r['reply_bytes_per_move']:6.0f} back (max {r.get('reply_bytes_max', 0)})"
              + (f"  REJECTED {r['rejected']} (e.g. {r['first_rejected']})" if r.get("rejected") else ""))
    print("saved view state in the committed notebooks [target: <= 200 KB a view]:")
    for nb, r in saved.items():
        before = "-" if r["before_30_bytes"] is None else f"{r['before_30_bytes'] / 1e3:.0f} KB"
        print(f"  {nb:44} notebook {r['notebook_bytes'] / 1e3:4.0f} KB, {r['without_state_bytes'] / 1e3:4.0f} KB "
              f"without the views' state, {before} before #30; views (KB): "
              + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in r["views_bytes"].items()))
    if "--json" in argv:
        i = argv.index("--json")
        out = Path(argv[i + 1]) if len(argv) > i + 1 else ROOT / "benchmarks" / "results" / "front_views.json"
        earlier = _earlier(out)
        out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                   "host": host_info(), "command": "python benchmarks/bench_front_views.py --json",
                                   "before_30": BEFORE_30, "method": METHOD, "kernel_work": work, "saved_state": saved,
                                   "earlier_runs": earlier}, indent=1) + "\n")
        print(f"written: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
