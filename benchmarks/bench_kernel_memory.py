"""How much address space (virtual memory) one learner's kernel needs: the figure behind the isolated hub's
default memory limit (``HUB_MEM_LIMIT``, ``ampkit/classroom/isolation.py``: ``RLIMIT_AS`` counts virtual memory).

For each thread setting (torch's default, and ``OMP_NUM_THREADS=1`` as ``HUB_KERNEL_THREADS=1`` sets it) a fresh
kernel of the kit's venv is started (jupyter_client, as a learner's server starts one) and its ``/proc/PID/status``
is read: after the start (idle, no torch), after ``import torch, ampkit`` (idle with torch), and after running every
code cell of ``notebooks/03_loss_scaling.ipynb`` in order (``VmPeak``: the largest address space it ever had).
Then every other notebook once, in a fresh kernel each (torch's default threads), for its ``VmPeak``: the default
limit must let every lesson run, not only notebook 03.

    python benchmarks/bench_kernel_memory.py        # about a minute on 2 cores

Writes benchmarks/results/kernel_memory.json. It starts two kernels on this machine, one after the other, and
stops each one (also on an error).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "03_loss_scaling.ipynb"
OUT = ROOT / "benchmarks" / "results" / "kernel_memory.json"
FIELDS = ("VmPeak", "VmSize", "VmHWM", "VmRSS")


def status_mib(pid: int) -> dict:
    """``/proc/PID/status``'s memory fields in MiB (the kernel reports kB) and the thread count."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = round(int(value.split()[0]) / 1024, 1)
        elif key == "Threads":
            out["threads"] = int(value)
    return out


def measure(threads: str | None, notebook: Path = NOTEBOOK) -> dict:
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads:
        env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    nb = nbformat.read(notebook, as_version=4)
    km = KernelManager(kernel_name="python3")
    client = NotebookClient(nb, km=km, timeout=600, kernel_name="python3", resources={
        "metadata": {"path": str(notebook.parent)}})
    stages = {}
    with client.setup_kernel(env=env, cwd=str(notebook.parent)):
        pid = km.provisioner.process.pid
        stages["started"] = status_mib(pid)
        probe = nbformat.v4.new_code_cell("import torch, ampkit")
        client.execute_cell(probe, 0)
        stages["torch_imported"] = status_mib(pid)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
        stages["notebook_done"] = status_mib(pid)
    return {"notebook": notebook.name, "omp_threads": threads or "default", "stages": stages}


def main() -> int:
    import torch

    runs = [measure(None), measure("1")]
    runs += [measure(None, nb) for nb in sorted(NOTEBOOK.parent.glob("*.ipynb")) if nb != NOTEBOOK]
    result = {
        "what": "address space (VmPeak/VmSize) and resident memory (VmHWM/VmRSS) of one kernel, MiB",
        "notebook": NOTEBOOK.name,
        "runs": runs,
        "peak_vm_mib": max(r["stages"]["notebook_done"]["VmPeak"] for r in runs),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "date": datetime.date.today().isoformat()},
        "reproduce": "python benchmarks/bench_kernel_memory.py",
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
