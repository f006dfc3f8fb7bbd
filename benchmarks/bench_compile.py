"""Benchmark for notebook 08 (§6a): ``torch.compile`` of the decoder's O1 bf16 training step, per backend.

    .venv/bin/python benchmarks/bench_compile.py [--steps 8] [--json [PATH]]

For each backend (``aot_eager``, then ``inductor``)
:func:`ampkit.lessons.transformers_compiled_and_sharded.compile_vs_eager`
trains the notebook's small decoder eagerly and compiled (``dynamic=False``) through the kit's ``train_step`` and
reports: the largest |compiled loss - eager loss| over the steps, the first compiled step (the compile; "cold": the
first compile of this backend in this process, after ``torch.compiler.reset()``), the median later step of the same
shape (no compile), the first step at a new shape (a recompile) and the median eager step. Each backend then runs a
second time in the same process after ``torch.compiler.reset()``: the in-memory caches are gone, but the process
has imported and initialised everything, and inductor finds its compiled code in its cache on disk ("warm"). The
benchmark points inductor's disk cache at a new empty folder (``TORCHINDUCTOR_CACHE_DIR``), so that the cold run
finds nothing from an earlier process.

Notebook 08 runs only ``aot_eager`` live: inductor's cold compile of this step takes tens of seconds on 2 cores,
more than the notebook's budget. Timings depend on the machine and on what else runs on it; ``--json`` writes them
with the host to benchmarks/results/compile.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# an empty inductor cache on disk, so that the first compile is cold (set before torch is imported)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ampkit-bench-inductor-")

import torch  # noqa: E402
from bench_notebooks import host_info  # noqa: E402

from ampkit.lessons.transformers_compiled_and_sharded import compile_vs_eager  # noqa: E402

DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "compile.json"


def measure(steps: int) -> list[dict]:
    rows = []
    for backend in ("aot_eager", "inductor"):
        for label in ("cold", "warm"):
            run = compile_vs_eager(steps=steps, backend=backend, dynamic=False)
            rows.append({"backend": backend, "compile": label, "steps": steps,
                         "max_abs_loss_diff": run.max_abs_diff, "bitwise_equal": run.bitwise_equal,
                         "first_step_s": round(run.first_step_s, 4), "later_step_s": round(run.warm_step_s, 5),
                         "new_shape_step_s": round(run.new_shape_step_s, 4), "eager_step_s": round(run.eager_step_s, 5),
                         "graphs": run.graphs_after_new_shape})
            r = rows[-1]
            print(f"{backend:9s} {label}: first step {r['first_step_s']:7.2f} s, "
                  f"later {1e3 * r['later_step_s']:6.1f} ms, new shape {r['new_shape_step_s']:6.2f} s, "
                  f"eager {1e3 * r['eager_step_s']:6.1f} ms; "
                  f"max |loss diff| {r['max_abs_loss_diff']:.2e} (bitwise equal: {r['bitwise_equal']})")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--json", nargs="?", const=str(DEFAULT_JSON), default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(args.steps)
    if args.json:
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "host": host_info(), "command": "python benchmarks/bench_compile.py --json", "runs": rows}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
