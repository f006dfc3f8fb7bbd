"""`make test` from a fresh clone, timed, with a stated load beside it: the 10-minute goal on a 2-core machine.

What a newcomer runs (README): clone, `make test`. This bench clones the current commit into a temporary folder and
runs there, in turn and timed, `make install-test` (a fresh .venv: pip from the index or its cache, the warm-up
compile) and `make test` (ruff, mypy, then pytest on two workers), with ``--load N`` busy processes spinning beside it
the whole time (tests/browser/busyload.py), as on a machine where other work shares the cores. pytest writes a JUnit
file; the bench sums its test times per file (setup and teardown included) and reports the slowest files, which is
what tests/slowest_first.txt (the order `make test` hands files to its workers, slowest first) is written from with
``--order``.

    python benchmarks/bench_make_test.py [--load N] [--json [PATH]] [--order]
    python benchmarks/bench_make_test.py --readme      # the READMEs' table of hosts from the results only

The goal is a ratio of nothing: seconds against 600, on the host named in the result; it is not a timed test (speed
is measured here, never asserted in tests). Results: benchmarks/results/make_test.json (a list, one entry per run).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from bench_notebooks import host_info

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from busyload import BusyLoad  # noqa: E402

GOAL_S = 600.0
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "make_test.json"
ORDER_FILE = ROOT / "tests" / "slowest_first.txt"
FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16", "avx512f", "avx2")


def cpu_flags() -> list[str]:
    """The CPU flags that decide the kit's 16-bit paths (/proc/cpuinfo), in the README's order."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    have = set(line.split(":", 1)[-1].split())
    return [f for f in FLAGS if f in have]


def per_file(junit: Path) -> dict[str, float]:
    """Seconds per test file from pytest's JUnit XML (a notebook's cells count as its file)."""
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or (case.get("classname", "").replace(".", "/") + ".py")
        out[name] += float(case.get("time", 0.0))
    return dict(out)


def run(cmd: list[str], cwd: Path, log: Path, must_pass: bool = True) -> tuple[float, int]:
    """Run ``cmd`` in ``cwd``, output to ``log``; its wall time in seconds and exit code (a command that must pass
    and fails stops the bench with its output's tail)."""
    start = time.perf_counter()
    with log.open("w") as f:
        done = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        print(f"{' '.join(cmd)} failed (exit {done.returncode}) after {seconds:.0f} s:\n{tail}")
        if must_pass:
            raise SystemExit(1)
    return seconds, done.returncode


def measure(load: int, keep: bool) -> dict:
    """Clone HEAD, install, test; the timings and the slowest files."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    tmp = Path(tempfile.mkdtemp(prefix="ampkit-fresh-"))
    clone = tmp / "ampkit"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    junit = tmp / "junit.xml"
    env_note = {k: os.environ[k] for k in ("CI",) if k in os.environ}
    with BusyLoad(load):
        install, _ = run(["make", "install-test"], clone, tmp / "install.log")
        test, rc = run(["make", "test", f"PYTEST_ARGS=--junitxml={junit} -o junit_family=xunit1"], clone,
                       tmp / "test.log", must_pass=False)
    files = per_file(junit)
    summary = (tmp / "test.log").read_text().strip().splitlines()[-1]
    slowest = sorted(files.items(), key=lambda kv: -kv[1])
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "how": "fresh-clone",
              "commit": head.stdout.strip()[:12], "host": host_info(), "cpu_flags": cpu_flags(),
              "busy_processes_beside": load, "env": env_note, "install_s": round(install, 1),
              "make_test_s": round(test, 1), "passed": rc == 0, "goal_s": GOAL_S, "within_goal": test <= GOAL_S,
              "pytest_summary": summary, "test_files": len(files),
              "sum_of_file_seconds": round(sum(files.values()), 1),
              "slowest_files": [[name, round(s, 1)] for name, s in slowest[:15]],
              "_all_files": slowest}
    verdict = "passed" if rc == 0 else "FAILED"
    print(f"install {install:.0f} s, make test {test:.0f} s ({verdict}; goal {GOAL_S:.0f} s) with {load} busy; "
          f"{summary}")
    for name, s in slowest[:15]:
        print(f"  {s:7.1f} s  {name}")
    if not keep:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    else:
        print(f"kept: {tmp}")
    return result


def write_order(files: list[list]) -> None:
    """tests/slowest_first.txt: every measured file, slowest first (conftest.py orders the workers' files by it)."""
    lines = [name for name, _ in files]
    ORDER_FILE.write_text("# make test hands whole files to its two workers in this order, slowest first, so the two\n"
                          "# finish together; written by `python benchmarks/bench_make_test.py --order` from a\n"
                          "# measured run. Files not listed run after these, in collection order.\n"
                          + "\n".join(lines) + "\n")
    print(f"wrote {ORDER_FILE.relative_to(ROOT)} ({len(lines)} files)")


READMES = {"en": ROOT / "README.md", "zh_CN": ROOT / "README.zh-CN.md"}
REGION = "make-test-hosts"


#: the table's words per README (the Chinese README displays Chinese)
WORDS = {
    "en": {"header": ["date", "CPU", "flags that decide the 16-bit paths", "cores", "busy processes beside",
                      "install s", "make test s", "result", "commit"],
           "passed": "passed", "failed": "failed", "none": "none of them",
           "how": {"fresh-clone": "a fresh clone",
                   "checkout": "in the developer's checkout, .venv installed before, no other work on the cores"}},
    "zh_CN": {"header": ["日期", "CPU", "决定 16 位路径的 CPU 标志", "核数", "旁边的忙循环进程数", "安装（秒）",
                         "make test（秒）", "结果", "提交"],
              "passed": "通过", "failed": "失败", "none": "均没有",
              "how": {"fresh-clone": "全新克隆",
                      "checkout": "在开发者的工作目录中运行，.venv 事先已装好，核上没有其他任务"}},
}


def hosts_table(runs: list[dict], lang: str = "en") -> str:
    """The READMEs' table: one row per recorded run of `make test` (benchmarks/results/make_test.json)."""
    w = WORDS[lang]
    rows = ["| " + " | ".join(w["header"]) + " |", "|" + "---|" * len(w["header"])]
    for r in runs:
        host = r["host"]
        install = "—" if r.get("install_s") is None else f"{r['install_s']:.0f}"
        verdict = f"{w['passed'] if r['passed'] else w['failed']}（{w['how'][r['how']]}）" if lang != "en" else \
            f"{w['passed'] if r['passed'] else w['failed']} ({w['how'][r['how']]})"
        rows.append(f"| {r['date']} | {host.get('cpu', '?')} | {', '.join(r['cpu_flags']) or w['none']} | "
                    f"{host.get('cores', '?')} | {r['busy_processes_beside']} | {install} | {r['make_test_s']:.0f} | "
                    f"{verdict} | {r['commit']} |")
    return "\n".join(rows)


def write_readmes(results: Path = DEFAULT_JSON, check: bool = False) -> list[Path]:
    """Write (or, with ``check``, only compare) the table region of both READMEs; the stale ones."""
    sys.path.insert(0, str(Path(__file__).parent))
    from render_docs import replace_region

    runs = json.loads(results.read_text())
    stale = []
    for lang, path in READMES.items():
        old = path.read_text()
        new = replace_region(old, REGION, hosts_table(runs, lang))
        if new != old:
            stale.append(path)
            if not check:
                path.write_text(new)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the run (2: both cores of 2)")
    ap.add_argument("--json", nargs="?", const=str(DEFAULT_JSON), help="append the result to this JSON list")
    ap.add_argument("--order", action="store_true", help="write tests/slowest_first.txt from this run")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    ap.add_argument("--readme", action="store_true", help="only write the READMEs' hosts table from the results")
    args = ap.parse_args(argv)
    if args.readme:
        print("updated:", [str(p.relative_to(ROOT)) for p in write_readmes()] or "nothing")
        return 0
    result = measure(args.load, args.keep)
    files = result.pop("_all_files")
    if args.order:
        write_order(files)
    if args.json:
        path = Path(args.json)
        runs = json.loads(path.read_text()) if path.exists() else []
        runs.append(result)
        path.write_text(json.dumps(runs, indent=1) + "\n")
        print(f"appended to {path}")
        if path == DEFAULT_JSON:
            print("updated:", [str(p.relative_to(ROOT)) for p in write_readmes()] or "nothing")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
