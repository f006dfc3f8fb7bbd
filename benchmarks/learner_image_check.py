"""The learner image's install steps, run here in a fresh venv: what repo2docker does for the Kubernetes plan's image
(docs/classroom.md) and for Binder, less conda itself.

    python benchmarks/learner_image_check.py [--wheels DIR] [--work DIR] [--json PATH]

repo2docker sees environment.yml at the repository root (there is no binder/ folder, which would hide it), installs
its conda packages, then its pip part (`-e .`: the kit, from the repository folder it copied first because the pip
part names a local path), then runs ./postBuild (the warmup). conda is not available on this machine, so the conda
packages are installed as their PyPI wheels (pytorch -> torch, the rest under the same names; the list is read from
environment.yml, see ampkit.classroom.offline.image_steps). With --wheels (e.g. the folder `make wheelhouse` wrote)
every install is `--no-index` from it, which is fast and needs no network; without it pip uses this machine's index.
The warmup compiles into a fresh TORCHINDUCTOR_CACHE_DIR so that it is as cold as in a new image. Writes
benchmarks/results/learner_image.json: date, host, command, steps [{step, seconds, ok}], ok.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_notebooks import host_info  # noqa: E402
from offline_install import fresh_work  # noqa: E402

from ampkit.classroom.offline import image_steps  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "results" / "learner_image.json"
DEFAULT_WORK = Path("/tmp/ampkit-learner-image")
MARKER = ".ampkit-learner-image"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheels", default="", help="install from this wheelhouse only (pip --no-index)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="scratch folder (emptied first)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--python", default=getattr(sys, "_base_executable", "") or "python3",
                        help="the Python the fresh venv is made from (default: the one under this venv)")
    args = parser.parse_args(argv)
    work = fresh_work(args.work, MARKER, parser)
    venv = work / "venv"
    wheels = str(Path(args.wheels).resolve()) if args.wheels else ""

    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               VIRTUAL_ENV=str(venv), TORCHINDUCTOR_CACHE_DIR=str(work / "inductor-cache"))
    if wheels:  # this machine's pip configuration may name local mirrors: ignore it, like a build with no network
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
    dependencies = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    steps = [("fresh venv (stands for the image's conda environment)", [args.python, "-m", "venv", str(venv)])]
    steps += image_steps(dependencies, str(venv / "bin" / "python"), wheels)
    steps.append(("the image's kernel imports the kit and its widgets",
                  [str(venv / "bin" / "python"), "-c", "import ampkit, ampkit.widgets, ipywidgets, jupyterlab; "
                   "print('ampkit', ampkit.__version__)"]))

    results, ok = [], True
    for name, cmd in steps:
        if not ok:
            results.append({"step": name, "seconds": 0.0, "ok": False, "skipped": "an earlier step failed"})
            continue
        print(f"== {name}\n$ {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        out = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace")
        seconds = time.perf_counter() - start
        print(out.stdout[-2000:], f"[exit {out.returncode}, {seconds:.1f} s]", sep="\n", flush=True)
        ok = out.returncode == 0
        row = {"step": name, "seconds": round(seconds, 1), "ok": ok, "command": " ".join(cmd)}
        if not ok:
            row["output_tail"] = out.stdout[-1500:]
        if name == "postBuild":
            row["output"] = out.stdout.strip()[-500:]
        results.append(row)

    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "host": host_info(),
              "command": "python benchmarks/learner_image_check.py" + (" --wheels WHEELHOUSE" if wheels else ""),
              "steps": results, "ok": all(r["ok"] for r in results),
              "source": f"wheelhouse (pip --no-index): {wheels}" if wheels else "this machine's package index",
              "not_checked": "conda itself (not available here): the conda packages were installed as PyPI wheels; "
                             "repo2docker's base environment and Docker build",
              "note": "one run on a shared 2-core machine: timings approximate"}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"ok": result["ok"], "steps": [(r["step"], r["seconds"], r["ok"]) for r in results]}, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
