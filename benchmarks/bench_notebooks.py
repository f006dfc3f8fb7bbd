"""Each notebook's execution time when run as a test (pytest --nbval-lax, fresh kernel), and the total.

Budget for the series on a 2-core CPU: 00 <= 5 s, 01 <= 10 s, 02-06 <= 15 s each, <= 90 s in all.
"notebook s" is a fresh kernel's start plus every cell (nbclient, as a learner's Run All) and is what the budget is
checked against; "nbval s" is the whole `pytest --nbval-lax NOTEBOOK` process, pytest's own start-up included.
Both vary with the machine and its load.

    python benchmarks/bench_notebooks.py [--json [PATH]] [--repeat N] [--lang zh_CN] [NOTEBOOK ...]

`--json` also writes the figures to benchmarks/results/notebooks.json (or PATH), the file the instructor guide's
run-time table is generated from (`python benchmarks/render_docs.py`); see docs/instructor-guide.md.
`--lang zh_CN` times the Chinese edition (notebooks/zh_CN/, written to notebooks_zh_CN.json: the Chinese guide's
table). `--repeat N` runs each notebook N times and keeps the median Run All (the machine may be shared).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"00": 5.0, "01": 10.0, "02": 15.0, "03": 15.0, "04": 15.0, "05": 15.0, "06": 15.0, "07": 15.0, "08": 15.0}
TOTAL_BUDGET_S = 120.0
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "notebooks.json"
#: the edition -> (its notebooks' folder, the JSON its guide's table is generated from)
EDITIONS = {"en": (ROOT / "notebooks", DEFAULT_JSON),
            "zh_CN": (ROOT / "notebooks" / "zh_CN", ROOT / "benchmarks" / "results" / "notebooks_zh_CN.json")}


def host_info() -> dict:
    """The machine a measurement was taken on: CPU model, cores, memory (GiB), Python and torch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem_gib = float("nan")
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem_gib, 1), "python": platform.python_version(),
            "torch": torch_version}


def results_json(rows: list[tuple], command: str, runs: dict | None = None, load: dict | None = None) -> dict:
    """The notebooks.json document (schema in benchmarks/render_docs.py) from the table's rows; ``runs``: each
    notebook's Run All times when it ran more than once (the row holds their median); ``load``: the machine's load
    averages (1, 5, 15 min) at the ``start`` and ``end`` of the measurement (other work on a shared machine)."""
    notebooks = [{"name": Path(name).stem, "run_all_s": round(s, 2), "nbval_s": round(wall, 2),
                  "budget_s": budget, "passed": test == "pass",
                  **({"run_all_runs_s": [round(x, 2) for x in runs[name]]} if runs and name in runs else {})}
                 for name, s, wall, budget, test, _ in rows]
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": host_info(), "command": command, "notebooks": notebooks,
            "total_run_all_s": round(sum(n["run_all_s"] for n in notebooks), 2),
            "total_budget_s": TOTAL_BUDGET_S, **({"load_avg": load} if load else {})}


def runs_here(path: Path) -> bool:
    """Whether this Python has the modules the notebook needs (its English source's ``metadata.ampkit.needs``:
    notebook 09's frameworks, which only ``make frameworks``' venv has)."""
    import importlib.util

    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("ampkit", {})
    if "source" in meta:   # a Chinese notebook: its English source says what it needs
        meta = json.loads((path.parent / meta["source"]).read_text(encoding="utf-8"))["metadata"].get("ampkit", {})
    return all(importlib.util.find_spec(m) is not None for m in meta.get("needs", []))


def run_all_seconds(path: Path) -> float:
    """Kernel start + every cell, in a fresh kernel of this Python (the file is not modified)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    client.execute()
    return time.perf_counter() - t0


def time_notebook(path: Path, repeat: int = 1) -> tuple[float, float, bool, list[float]]:
    """(seconds for kernel start + all cells: the median of ``repeat`` runs, seconds for the whole
    pytest --nbval-lax process, test passed, every run's seconds)."""
    try:
        runs = [run_all_seconds(path) for _ in range(repeat)]
    except Exception as e:   # a cell failed: the notebook is reported failed, the other notebooks still measured
        print(f"{path.name}: Run All failed: {type(e).__name__}", file=sys.stderr)
        return float("nan"), float("nan"), False, []
    seconds = statistics.median(runs)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", str(path.relative_to(ROOT))], cwd=ROOT,
                          capture_output=True, text=True)
    return seconds, time.perf_counter() - t0, proc.returncode == 0, runs


def main(argv: list[str]) -> int:
    argv = list(argv)
    options = []
    repeat, lang = 1, "en"
    if "--repeat" in argv:
        i = argv.index("--repeat")
        repeat = int(argv[i + 1])
        options += argv[i:i + 2]
        del argv[i:i + 2]
    if "--lang" in argv:
        i = argv.index("--lang")
        lang = argv[i + 1]
        if lang not in EDITIONS:
            raise SystemExit(f"--lang {lang}: the editions are {', '.join(EDITIONS)}")
        options += argv[i:i + 2]
        del argv[i:i + 2]
    folder, default_json = EDITIONS[lang]
    json_path = None
    if "--json" in argv:
        i = argv.index("--json")
        argv.pop(i)
        json_path = default_json
        if i < len(argv) and argv[i].endswith(".json"):
            json_path = Path(argv.pop(i)).resolve()
    every = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    paths = [ROOT / a for a in argv] if argv else [p for p in every if runs_here(p)]
    for skipped in sorted(set(every) - set(paths)) if not argv else []:
        print(f"{skipped.name}: skipped, this Python lacks what it needs (metadata.ampkit.needs)", file=sys.stderr)
    rows, total, total_wall, ok_all, runs = [], 0.0, 0.0, True, {}
    load = {"start": [round(x, 2) for x in os.getloadavg()]}
    for path in paths:
        seconds, wall, passed, runs[path.name] = time_notebook(path, repeat)
        budget = BUDGET_S.get(path.name[:2])
        within = budget is None or seconds <= budget
        ok_all &= passed
        total += seconds
        total_wall += wall
        rows.append((path.name, seconds, wall, budget, "pass" if passed else "FAIL", "yes" if within else "NO"))
    print(f"{'notebook':32s} {'notebook s':>8s} {'nbval s':>10s} {'budget':>7s} {'test':>5s} {'within':>7s}")
    for name, s, wall, budget, test, within in rows:
        print(f"{name:32s} {s:8.1f} {wall:10.1f} {budget if budget else float('nan'):7.1f} {test:>5s} {within:>7s}")
    print(f"{'TOTAL':32s} {total:8.1f} {total_wall:10.1f} {TOTAL_BUDGET_S:7.1f} {'':>5s} "
          f"{'yes' if total <= TOTAL_BUDGET_S else 'NO':>7s}")
    if json_path is not None:
        command = "python benchmarks/bench_notebooks.py --json" + "".join(f" {a}" for a in options + argv)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        load["end"] = [round(x, 2) for x in os.getloadavg()]
        json_path.write_text(json.dumps(results_json(rows, command, runs if repeat > 1 else None, load), indent=2)
                             + "\n")
        print(f"wrote {json_path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
