"""A wheelhouse for another kind of learner machine, built on this one: `make wheelhouse PLATFORM=... PYVER=...
WHEELHOUSE_EXTRAS=hub` into an empty folder, timed, then checked.

    python benchmarks/offline_foreign.py [--platform win_amd64] [--python 3.11.9] [--work DIR] [--json PATH]

Checks (each recorded, none assumed): every wheel's dependencies, with their markers read for the target
(ampkit.classroom.platforms.needed), are in the folder; no Linux CUDA wheel came in (nvidia-*, cuda-*, triton: the
trap of a plain `pip download --platform` on Linux); which wheels are the target's own (its platform tag, and
the pure-Python ones only that platform asks for, such as colorama and pywinpty on Windows); the hub's proxy installs
from the folder's npm-cache with `npm install --offline` while every proxy points at a closed port, and runs.
Installing on the target itself cannot be done from here (this machine is Linux): that step is left to the
instructor's own check on one learner machine (docs/instructor-guide.md, "Offline room"). Writes
benchmarks/results/offline_foreign.json. Downloads a few hundred MB: not part of `make test`.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ampkit.classroom import platforms  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "results" / "offline_foreign.json"
CLOSED_PROXY = "http://127.0.0.1:9"
LINUX_CUDA = ("nvidia_", "nvidia-", "cuda_", "cuda-", "triton-")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--platform", default="win_amd64")
    p.add_argument("--python", default="3.11.9")
    p.add_argument("--work", type=Path, default=Path("/tmp/ampkit-foreign-wheelhouse"))
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    a = p.parse_args(argv)
    if a.work.exists():
        shutil.rmtree(a.work)
    a.work.mkdir(parents=True)
    folder = a.work / platforms.default_folder(a.platform, a.python)
    cmd = ["make", "--no-print-directory", "wheelhouse", f"PLATFORM={a.platform}", f"PYVER={a.python}",
           f"WHEELHOUSE={folder}", "WHEELHOUSE_EXTRAS=hub"]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = round(time.monotonic() - t0, 1)
    if out.returncode:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        return 1
    man = json.loads((folder / "manifest.json").read_text())
    wheels = dict(platforms.read_requires(w) for w in sorted(folder.glob("*.whl")))
    reqs = [ln for ln in (folder / "requirements.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    from packaging.requirements import Requirement

    wanted: dict[str, set[str]] = {}
    for r in reqs:
        req = Requirement(r)
        wanted.setdefault(platforms._norm(req.name), set()).update(req.extras)
    missing = platforms.needed(wheels, {k: set(v) for k, v in wanted.items()},  # (needed adds to what it is given)
                               platforms.target_env(a.platform, a.python))
    linux_env = platforms.target_env("manylinux_x86_64", a.python)
    target_only = sorted(n for n in wheels if n not in _closure(wheels, wanted, linux_env))
    names = [w["file"] for w in man["wheels"]]
    tags = platforms.pip_platforms(a.platform)
    # the hub's proxy, from the folder's npm cache, with no network
    prefix = a.work / "hub-node"
    npm_env = {**env, "http_proxy": CLOSED_PROXY, "https_proxy": CLOSED_PROXY, "HTTP_PROXY": CLOSED_PROXY,
               "HTTPS_PROXY": CLOSED_PROXY, "npm_config_proxy": CLOSED_PROXY, "npm_config_https_proxy": CLOSED_PROXY}
    npm = subprocess.run(["npm", "install", "--offline", "--no-fund", "--no-audit", "--cache",
                          str(folder / "npm-cache"), "--prefix", str(prefix), "configurable-http-proxy@5"],
                         env=npm_env, capture_output=True, text=True)
    chp = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    version = subprocess.run([str(chp), "--version"], capture_output=True, text=True).stdout.strip() \
        if chp.exists() else ""
    result = {
        "what": f"make wheelhouse PLATFORM={a.platform} PYVER={a.python} WHEELHOUSE_EXTRAS=hub, built on this machine",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "built_on": {"platform": sys.platform, "python": sys.version.split()[0]},
        "target": {"platform": a.platform, "pip_platforms": tags, "python": a.python},
        "seconds": seconds, "n_wheels": man["n_wheels"], "mib": man["mib"], "torch": man["torch"],
        "source_archives": man["source_archives"],
        "wheels_for_the_target_platform": sum(any(t.split("_")[0] in n for t in tags) for n in names),
        "pure_python_wheels": sum(n.endswith("-none-any.whl") for n in names),
        "only_this_target_needs": target_only,
        "missing_dependencies": sorted(missing),
        "linux_cuda_wheels": sorted(n for n in names if n.lower().startswith(LINUX_CUDA)),
        "npm_offline_install": {"returncode": npm.returncode, "configurable_http_proxy": version,
                                "npm_cache_mib": round(sum(f.stat().st_size for f in (folder / "npm-cache").rglob("*")
                                                           if f.is_file()) / 2**20, 1)},
        "not_checked_here": "installing on the target OS itself (this machine is Linux)",
    }
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    ok = not missing and not result["linux_cuda_wheels"] and npm.returncode == 0 and version
    return 0 if ok else 1


def _closure(wheels: dict[str, list[str]], wanted: dict[str, set[str]], env: dict) -> set[str]:
    """The names reachable from the requirements when the markers are read for ``env`` (another platform), extras
    asked along the way included (``jsonschema[format-nongpl]``)."""
    from packaging.requirements import Requirement

    extras = {k: set(v) for k, v in wanted.items()}
    seen: set[str] = set()
    todo = [n for n in extras if n in wheels]
    while todo:
        name = todo.pop()
        seen.add(name)
        for line in wheels.get(name, []):
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in extras[name] | {""}):
                dep = platforms._norm(req.name)
                new = set(req.extras) - extras.setdefault(dep, set())
                extras[dep] |= set(req.extras)
                if dep in wheels and (dep not in seen or new):
                    todo.append(dep)
    return seen


if __name__ == "__main__":
    sys.exit(main())
