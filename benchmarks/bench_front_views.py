"""The views drawn in the browser (``ampkit.widgets.front``), what they cost the kernel and the stored notebooks.

Issue "Views drawn in the browser", measured side by side (no timed tests; timings depend on the machine):

- **kernel work per control move**: the time Python spends when a move reaches the kernel (the view's synced
  value is set and its observer recomputes the engine's numbers, e.g. ``RoundingSlider.rows``), median over every
  slider position in turn (``_timing.interleaved``); target <= 1 ms;
- **bytes per move**: the JSON of the state a move sends (the browser sends the changed trait only); target
  <= 2 KB;
- **saved state per view** in every committed notebook (both editions), and each notebook's size with and without
  that state; target <= 200 KB a view.

The key press -> redrawn latency inside the page is ``benchmarks/bench_browser_latency.py``.

    .venv/bin/python benchmarks/bench_front_views.py [--json [PATH]]   # PATH: benchmarks/results/front_views.json
"""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from _timing import interleaved
from bench_notebooks import host_info

ROOT = Path(__file__).resolve().parents[1]
STATE = "application/vnd.jupyter.widget-state+json"


def _moves(view, trait: str, values: list) -> dict:
    """Set ``trait`` to each of ``values`` in turn, as a move from the page does: seconds per move, bytes sent."""
    it = iter(values * 50)

    def move() -> None:
        setattr(view, trait, next(it))

    timing = interleaved({trait: move}, rounds=len(values))[trait]
    message = json.dumps({"method": "update", "state": {trait: values[-1]}, "buffer_paths": []})
    return {"trait": trait, "median_ms": round(timing.median * 1e3, 4), "max_ms": round(timing.max * 1e3, 4),
            "moves": len(timing.samples), "bytes_per_move": len(message)}


def kernel_work() -> dict:
    """Each browser-drawn view with a slider, moved over every position of it."""
    import torch

    from ampkit.widgets import AttentionOverflowView, RangeMap, RoundingSlider, VisualLossScaler

    rounding = RoundingSlider()
    n = int((rounding.max_exp - rounding.min_exp) / rounding.step)
    grads = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 1e-6
    scaler = VisualLossScaler(grads)
    attention = AttentionOverflowView()
    return {
        "RoundingSlider": _moves(rounding, "value", [10 ** (rounding.min_exp + k * rounding.step) for k in range(n)]),
        "RangeMap (gradients)": _moves(RangeMap(("fp16",), values=grads), "scale_exp", [float(k) for k in range(33)]),
        "VisualLossScaler": _moves(scaler, "log2_scale", list(range(scaler.min_log2, scaler.max_log2 + 1))),
        "AttentionOverflowView": _moves(attention, "act_scale", [2 ** (k / 4) for k in range(37)]),
    }


def saved_state() -> dict:
    out = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
            sorted((ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text())
        models = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
        if not models:
            continue
        views = {m["state"]["_anywidget_id"].rsplit(".", 1)[1]: len(json.dumps(m)) for m in models.values()
                 if m.get("model_module") == "anywidget"}
        without = dict(nb, metadata={k: v for k, v in nb["metadata"].items() if k != "widgets"})
        out[str(path.relative_to(ROOT))] = {"views_bytes": views, "notebook_bytes": path.stat().st_size,
                                            "without_state_bytes":
                                                len(json.dumps(without, indent=1, ensure_ascii=False).encode())}
    return out


def main(argv: list[str]) -> int:
    work, saved = kernel_work(), saved_state()
    print("kernel work per control move (the synced trait set; the view's Python side selects or recomputes):")
    for name, r in work.items():
        print(f"  {name:22} {r['trait']:11} median {r['median_ms']:.3f} ms (max {r['max_ms']:.3f}) over "
              f"{r['moves']} moves; {r['bytes_per_move']} bytes a move  [targets: <= 1 ms, <= 2048 bytes]")
    print("saved view state in the committed notebooks [target: <= 200 KB a view]:")
    for nb, r in saved.items():
        print(f"  {nb:48} {r['views_bytes']}  notebook {r['notebook_bytes'] / 1e3:.0f} KB "
              f"({r['without_state_bytes'] / 1e3:.0f} KB without the views' state)")
    if "--json" in argv:
        i = argv.index("--json")
        out = Path(argv[i + 1]) if len(argv) > i + 1 else ROOT / "benchmarks" / "results" / "front_views.json"
        out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                   "host": host_info(), "command": "python benchmarks/bench_front_views.py --json",
                                   "kernel_work": work, "saved_state": saved}, indent=1) + "\n")
        print(f"written: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
