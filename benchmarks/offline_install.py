"""The offline room, proved: build the wheelhouse, install the kit from it into a fresh venv with the package index
disabled and every proxy pointing at a closed port, then run `make test`'s notebook part in that venv.

    python benchmarks/offline_install.py [--work DIR] [--json PATH] [--makefile PATH]

Steps (each timed): `make wheelhouse` into an empty folder (the download), `make wheelhouse` again (must download
nothing new), `make install-test TEST_EXTRAS=test VENV=<fresh> WHEELS=<wheelhouse>` (the runtime, then the test
extra that the notebooks' tests need; the wheelhouse holds no browser or lint extra) with PIP_CONFIG_FILE=/dev/null
(this machine's pip configuration, which may name local mirrors, is ignored), PIP_NO_INDEX=1 and
http(s)_proxy=http://127.0.0.1:9, a probe that this environment really cannot reach an index, then `pytest
notebooks/` (the repository's pytest configuration: nbval-lax) in the fresh venv. Writes
benchmarks/results/offline_install.json (the instructor guide's "Offline room" table is generated from it by
benchmarks/render_docs.py). Heavy (a few hundred MB, minutes): not part of `make test`.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_notebooks import host_info  # noqa: E402

from ampkit.classroom.offline import platform_info  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "results" / "offline_install.json"
DEFAULT_WORK = Path("/tmp/ampkit-offline-proof")
MARKER = ".ampkit-offline-proof"
CLOSED_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, so any HTTP(S) attempt fails at once
TESTS_RUN = "pytest notebooks/ (make test's notebook part: every notebook run by nbval-lax, the repository's config)"


def offline_env(no_index: bool = True) -> dict:
    """This environment without pip's configuration and with every proxy closed: what a room without network has."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("PIP_") and k.lower() not in ("no_proxy", "http_proxy", "https_proxy",
                                                                     "all_proxy")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", http_proxy=CLOSED_PROXY,
               https_proxy=CLOSED_PROXY, HTTP_PROXY=CLOSED_PROXY, HTTPS_PROXY=CLOSED_PROXY, ALL_PROXY=CLOSED_PROXY)
    if no_index:
        env["PIP_NO_INDEX"] = "1"
    return env


def wheel_platforms(names: list[str]) -> list[str]:
    """The distinct platform tags of wheel file names (``x-1-cp311-cp311-manylinux_2_28_x86_64.whl``).

    >>> wheel_platforms(["a-1-py3-none-any.whl", "b-2-cp311-cp311-manylinux1_x86_64.manylinux_2_5_x86_64.whl"])
    ['any', 'manylinux1_x86_64', 'manylinux_2_5_x86_64']
    """
    tags = set()
    for name in names:
        if name.endswith(".whl"):
            tags.update(name[:-4].split("-")[-1].split("."))
    return sorted(tags)


def platform_summary(info: dict, man: dict) -> str:
    """One line for the guide's table: interpreter tag, platform, and the oldest glibc the wheels run on.

    >>> platform_summary({"implementation": "cpython", "python": "3.11", "platform": "linux-x86_64"},
    ...                  {"glibc_floor": {"glibc": "2.34", "set_by": "debugpy-...whl"}})
    'cp311 linux-x86_64, glibc >= 2.34'
    """
    tag = ("cp" if info["implementation"] == "cpython" else info["implementation"]) + info["python"].replace(".", "")
    floor = man.get("glibc_floor")
    return f"{tag} {info['platform']}" + (f", glibc >= {floor['glibc']}" if floor else "")


def summary(pytest_output: str) -> str:
    """pytest's closing counts ("7 passed", "6 passed, 1 failed"), or "no summary".

    >>> summary("....\\n===== 7 passed, 2 warnings in 81.20s (0:01:21) =====")
    '7 passed, 2 warnings'
    """
    found = re.findall(r"=+ (.*?) in [\d.]+s", pytest_output)
    return found[-1] if found else "no summary"


def run(cmd: list[str], env: dict | None = None, log: Path | None = None, cwd: Path = ROOT) -> tuple[int, float, str]:
    """Run a command, its output to ``log`` too; (status, seconds, output)."""
    print("$", " ".join(map(str, cmd)), flush=True)
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    seconds = time.perf_counter() - start
    if log:
        with log.open("a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n{out.stdout}\n[exit {out.returncode}, {seconds:.1f} s]\n")
    print(out.stdout[-3000:], f"[exit {out.returncode}, {seconds:.1f} s]", sep="\n", flush=True)
    return out.returncode, seconds, out.stdout


def snapshot(folder: Path) -> dict:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()
            if p.suffix == ".whl" or p.name.endswith(".tar.gz")}


def fresh_work(folder: Path, marker: str, parser: argparse.ArgumentParser) -> Path:
    """Empty the scratch folder ``folder`` (only if this script made it: it holds ``marker``) and return it."""
    work = folder.resolve()
    if work.exists():
        if not (work / marker).exists() and any(work.iterdir()):
            parser.error(f"{work} exists and was not made by this script: choose another --work")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / marker).touch()
    return work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="scratch folder (emptied first)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--makefile", type=Path, default=ROOT / "Makefile")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", "") or "python3",
                        help="the Python the fresh venv is made from (default: the one under this venv)")
    args = parser.parse_args(argv)
    work = fresh_work(args.work, MARKER, parser)
    log, wheels, venv = work / "log.txt", work / "wheelhouse", work / "venv"
    make = ["make", "--no-print-directory", "-C", str(ROOT), "-f", str(args.makefile.resolve())]

    status, download_s, _ = run([*make, "wheelhouse", f"WHEELHOUSE={wheels}"], log=log)
    if status:
        print("make wheelhouse failed (see above)", file=sys.stderr)
        return 1
    before = snapshot(wheels)
    status2, redownload_s, _ = run([*make, "wheelhouse", f"WHEELHOUSE={wheels}"], log=log)
    after = snapshot(wheels)
    new_files = sorted(name for name in after if before.get(name) != after[name])
    man = json.loads((wheels / "manifest.json").read_text())

    env = offline_env()
    status3, install_s, _ = run([*make, "install-test", "TEST_EXTRAS=test", f"VENV={venv}", f"WHEELS={wheels}",
                                 f"PYTHON={args.python}"], env=env, log=log)
    # the control: the same environment with an index allowed must fail to reach it (-vv: pip logs why at debug level)
    probe_status, _, probe_out = run([str(venv / "bin" / "python"), "-m", "pip", "download", "-vv", "--no-deps",
                                      "--retries", "0", "--timeout", "5", "-d", str(work / "probe"),
                                      "--index-url", "https://pypi.org/simple", "tqdm"],
                                     env=offline_env(no_index=False), log=log)
    blocked = probe_status != 0 and bool(re.search(r"ProxyError|connect to proxy", probe_out))
    _, _, torch_out = run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"], env=env)
    _, _, listed = run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], env=env)
    try:
        n_installed = len(json.loads(listed.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        n_installed = None

    test_status, test_s, test_out = (1, 0.0, "not run: the install failed") if status3 else run(
        [str(venv / "bin" / "python"), "-m", "pytest", "notebooks/"], env=env, log=log)
    info = platform_info()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": host_info(), "command": "python benchmarks/offline_install.py",
        "platform": platform_summary(info, man),
        "wheel_platform_tags": wheel_platforms([w["file"] for w in man["wheels"]]),
        "glibc_floor": man["glibc_floor"],
        "wheelhouse_mib": man["mib"], "n_wheels": man["n_wheels"], "source_archives": man["source_archives"],
        "torch_wheel": man["torch"], "download_s": round(download_s, 1), "redownload_s": round(redownload_s, 1),
        "second_run_ok": status2 == 0, "second_run_new_files": new_files,
        "install_s": round(install_s, 1), "install_ok": status3 == 0,
        "install": f"make install-test TEST_EXTRAS=test VENV=<fresh> WHEELS=<wheelhouse> (venv, pip --no-index "
                   f"--find-links -c constraints.txt, editable kit, warmup) with {args.makefile.name}",
        "offline_env": {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "https_proxy": CLOSED_PROXY,
                        "other PIP_* variables": "removed"},
        "network_probe_blocked": blocked, "torch_installed": torch_out.strip().splitlines()[-1] if torch_out else "",
        "n_packages_installed": n_installed,
        "test_s": round(test_s, 1), "test_summary": summary(test_out), "tests_run": TESTS_RUN,
        "passed": test_status == 0 and status3 == 0 and blocked,
        "note": "one run: timings vary from run to run; this machine's pip configuration adds a "
                "local wheel mirror, so the download is faster here than over the internet",
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("host", "torch_wheel")}, indent=1))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
