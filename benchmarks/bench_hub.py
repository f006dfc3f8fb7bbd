"""The room's load test: K learners at once on one JupyterHub (hub/jupyterhub_config.py) on this machine.

For each K: a fresh hub on 127.0.0.1 (free ports, a temporary state folder and sqlite db, an API token for this
script as a hub service), K learner accounts made through the REST API, their servers started through it; then in
every learner at once, as the browser does it (through the proxy, over the kernel websocket): open the learner's own
copy of notebook 03, start a kernel, run every code cell in order, wait for all learners, then move the visual loss
scaler's slider N times (a comm_msg "update" of the view's log2_scale, as the page sends it) and time each move
until the kernel is idle (the view is drawn in the browser: the page has redrawn it before the message leaves; this
is the kernel's share, the engine's numbers for the new position recomputed). Reported per K: notebook run time
(median, max), update latency (median, p90), memory per learner (RSS of its server and kernel), the hub's memory
(hub, proxy, culler), and the largest K whose median update stays under 200 ms. Not part of `make test`: it takes
minutes and fills memory.

    python benchmarks/bench_hub.py                 # K = 1, 2, 5, 10, then more while the median < 200 ms
    python benchmarks/bench_hub.py --k 1,2         # just these
    python benchmarks/bench_hub.py --quick         # K=1, the widget's cells only, 5 moves; writes artifacts/
    make bench-hub BENCH_HUB_ARGS="--k 1,2"

Writes benchmarks/results/hub_load.json (schema: docs of benchmarks/render_docs.py); `--merge` keeps the runs of
other K already there. Everything it starts is stopped at the end — learner servers and accounts through the API,
the hub, leftover processes, the temporary folder — also on an error, Ctrl-C or SIGTERM. Traffic: 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(ROOT))  # this checkout's kit; `import ampkit` is lazy, so the bench never imports torch
sys.path.insert(0, str(ROOT / "tests"))  # the hub's drivers, shared with the tests (tests/roomtools/)
from roomtools import hub_client, kernel_ws, loadtest  # noqa: E402

from ampkit.classroom import hub  # noqa: E402

KernelError, KernelSocket = kernel_ws.KernelError, kernel_ws.KernelSocket
Hub, HubError = hub_client.Hub, hub_client.HubError

NOTEBOOK = "03_loss_scaling"
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "hub_load.json"
QUICK_JSON = ROOT / "artifacts" / "hub_load_quick.json"
LIMIT_MS = 200.0
SLIDER = {"_anywidget_id": "ampkit.widgets.scaling.VisualLossScaler"}   # the view drawn in the browser
TRAIT = "log2_scale"                                                      # what its slider sets
MIN_FREE_GIB = 3.0          # never start a K that would leave less memory than this; abort a run below half of it


class BenchError(KernelError, HubError):
    """The load test's own failures; like the hub client's (HubError), reported by their message alone."""


def host_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "torch": torch_version}


# ---- one learner, as a browser -----------------------------------------------------------------------------------

def learner(h: Hub, name: str, args, result: dict, barrier: threading.Barrier, abort: threading.Event) -> None:
    """One learner's session; fills ``result`` (notebook_s, update_s, errors). Never raises."""
    kernel, stage = None, "opening the learner's notebook"
    try:
        base = f"/user/{name}/api"
        status, nb = h.api("GET", f"/contents/notebooks/{NOTEBOOK}.ipynb", base=base)
        if status != 200:
            raise BenchError(f"the learner's copy of {NOTEBOOK} is missing ({status}: {nb})")
        cells = [("".join(c["source"]) if isinstance(c["source"], list) else c["source"])
                 for c in nb["content"]["cells"] if c["cell_type"] == "code"]
        if args.quick:   # the cells up to the visual loss scaler only
            cells = cells[: next(i for i, c in enumerate(cells) if "VisualLossScaler(" in c) + 1]
        stage = "starting a kernel"
        status, sess = h.api("POST", "/sessions", {"path": f"notebooks/{NOTEBOOK}.ipynb", "type": "notebook",
                                                   "name": f"{NOTEBOOK}.ipynb", "kernel": {"name": "python3"}},
                             base=base, timeout=60)
        if status not in (200, 201):
            raise BenchError(f"could not start a kernel ({status}: {sess})")
        ws_url = h.url.replace("http", "ws", 1) + f"{base}/kernels/{sess['kernel']['id']}/channels"
        kernel = KernelSocket(ws_url, h.token, timeout=60)
        kernel.wait_ready(120)
        t0 = time.perf_counter()
        for i, code in enumerate(cells, 1):
            stage = f"running code cell {i} of {len(cells)}"
            if abort.is_set():
                raise BenchError("aborted")
            if code.strip():
                kernel.execute(code, args.cell_timeout)
        result["notebook_s"] = time.perf_counter() - t0
        stage = "waiting for the other learners"
        barrier.wait(args.cell_timeout * 2)      # the whole room moves its sliders at the same time
        stage = "finding the visual loss scaler's widgets"
        slider = kernel.find_widget(SLIDER)
        start = int(kernel.comms[slider].get(TRAIT, 0))
        values = [v for v in range(-8, 41) if v != start]   # every position once: a real redraw, no cached image
        for i in range(args.updates):
            stage = f"slider move {i + 1} of {args.updates} (to {values[i % len(values)]})"
            if abort.is_set():
                raise BenchError("aborted")
            result["update_s"].append(kernel.move(slider, None, values[i % len(values)], args.update_timeout,
                                                  trait=TRAIT))
            time.sleep(args.pause)
    except threading.BrokenBarrierError:
        result["errors"].append(f"{name}: another learner failed before the slider moves")
    except Exception as exc:   # noqa: BLE001 — reported in the JSON, the run goes on to clean up
        result["errors"].append(f"{name}, {stage}: {exc or type(exc).__name__}")
        barrier.abort()
    finally:
        if kernel is not None:
            kernel.close()


def learner_memory(h: Hub, names: list[str]) -> tuple[dict[str, float], dict[str, float], float]:
    """RSS and PSS (MiB) of each learner's server + kernels, and the RSS of the hub, its proxy and services."""
    rss, pss, mine = {n: 0.0 for n in names}, {n: 0.0 for n in names}, set()
    for p in h.processes():
        try:
            user = p.environ().get("JUPYTERHUB_USER") if "singleuser" in " ".join(p.cmdline()) else None
            if user not in rss:
                continue
            for q in [p, *p.children(recursive=True)]:
                info = q.memory_full_info()
                rss[user] += info.rss / 2**20
                pss[user] += getattr(info, "pss", info.rss) / 2**20
                mine.add(q.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    hub_mib = 0.0
    for p in [psutil.Process(h.proc.pid), *h.processes()]:
        if p.pid not in mine:
            try:
                hub_mib += p.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                pass
    return rss, pss, hub_mib


def run_k(k: int, args, venv: Path) -> dict:
    """One K: a fresh hub, K learners, everything stopped again. Returns the run's JSON row."""
    names = [f"learner{i:03d}" for i in range(1, k + 1)]
    row = {"k": k, "ok": False, "errors": []}
    results = {n: {"notebook_s": None, "update_s": [], "errors": []} for n in names}
    abort = threading.Event()
    t_start = time.monotonic()
    with loadtest.Cleanup() as cleanup:
        try:
            h = Hub(cleanup, venv)
            h.wait_up()
            status, body = h.api("POST", "/users", {"usernames": names})
            if status != 201:
                raise BenchError(f"could not create the learner accounts ({status}: {body})")
            # the accounts go after the servers are stopped (last in, first out)
            cleanup.add(hub_client.delete_accounts, h, names)
            cleanup.add(hub_client.stop_servers, h, names)
            for n in names:
                status, body = h.api("POST", f"/users/{n}/server", timeout=120)
                if status not in (201, 202):
                    raise BenchError(f"could not start {n}'s server ({status}: {body})")
            hub_client.wait_servers(h, names, timeout=60 + 20 * k)
            h.remember_processes()

            def watch_memory():
                while not abort.wait(1.0):
                    if psutil.virtual_memory().available / 2**30 < MIN_FREE_GIB / 2:
                        row["errors"].append(f"aborted: less than {MIN_FREE_GIB / 2:g} GiB of memory left")
                        abort.set()

            barrier = threading.Barrier(k)
            threads = [threading.Thread(target=learner, args=(h, n, args, results[n], barrier, abort), daemon=True)
                       for n in names]
            watcher = threading.Thread(target=watch_memory, daemon=True)
            watcher.start()
            for t in threads:
                t.start()
            deadline = time.monotonic() + args.run_timeout
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            if any(t.is_alive() for t in threads):
                row["errors"].append(f"timed out after {args.run_timeout:.0f} s")
                abort.set()
            rss, pss, hub_mib = learner_memory(h, names)
            abort.set()
            row["mem_per_learner_mib"] = round(loadtest.median(rss.values()), 1)
            row["mem_per_learner_max_mib"] = round(max(rss.values()), 1)
            row["mem_per_learner_pss_mib"] = round(loadtest.median(pss.values()), 1)
            row["hub_mem_mib"] = round(hub_mib, 1)
        except Exception as exc:   # noqa: BLE001 — reported in the JSON; the clean-up runs all the same
            row["errors"].append(str(exc) if isinstance(exc, HubError) else f"{type(exc).__name__}: {exc}")
        finally:
            abort.set()
    row["errors"] += [e for n in names for e in results[n]["errors"]] + [f"clean-up: {e}" for e in cleanup.errors]
    nb = [r["notebook_s"] for r in results.values() if r["notebook_s"] is not None]
    up = [1000 * s for r in results.values() for s in r["update_s"]]
    # a run that measured nothing keeps the schema's shape, with nulls (never a made-up number)
    row["notebook_s"] = ({"median": round(loadtest.median(nb), 2), "max": round(max(nb), 2)} if nb
                         else {"median": None, "max": None})
    row["update_ms"] = ({"median": round(loadtest.median(up), 1), "p90": round(loadtest.percentile(up, 90), 1),
                         "max": round(max(up), 1), "n": len(up)} if up
                        else {"median": None, "p90": None, "max": None, "n": 0})
    row.setdefault("mem_per_learner_mib", None)
    row.setdefault("hub_mem_mib", None)
    row["ok"] = not row["errors"] and len(nb) == k and len(up) == k * args.updates
    row["wall_s"] = round(time.monotonic() - t_start, 1)
    return row


# ---- the series --------------------------------------------------------------------------------------------------

def next_k(k: int) -> int:
    """After 10: +5 up to 30, then +10 (the series goes on while the median update stays under the limit)."""
    return k + (5 if k < 30 else 10)


def memory_allows(k: int, per_learner_mib: float) -> tuple[bool, str]:
    need = k * per_learner_mib * 1.25 / 1024 + 0.5
    avail = psutil.virtual_memory().available / 2**30
    return avail - need >= MIN_FREE_GIB, f"K={k} needs about {need:.1f} GiB, {avail:.1f} GiB available"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", help="comma-separated K values, e.g. 1,2 (default: 1,2,5,10 and on while under 200 ms)")
    p.add_argument("--max-k", type=int, default=60, help="the automatic series stops here (default 60)")
    p.add_argument("--updates", type=int, default=30, help="slider moves per learner (default 30)")
    p.add_argument("--pause", type=float, default=0.2, help="seconds between a learner's moves (default 0.2)")
    p.add_argument("--quick", action="store_true", help="K=1, the widget's cells, 5 moves; writes artifacts/")
    p.add_argument("--json", type=Path, help=f"output (default {DEFAULT_JSON.relative_to(ROOT)})")
    p.add_argument("--merge", action="store_true", help="keep the runs of other K already in the JSON file")
    p.add_argument("--venv", type=Path, default=Path(sys.prefix), help="the kit's venv (default: this Python's)")
    p.add_argument("--cell-timeout", type=float, default=300.0)
    p.add_argument("--update-timeout", type=float, default=60.0)
    p.add_argument("--run-timeout", type=float, default=1800.0, help="one K's learners, at most (s)")
    a = p.parse_args(argv)
    if a.quick:
        a.k, a.updates = a.k or "1", min(a.updates, 5)
        a.json = a.json or QUICK_JSON
    try:
        a.ks = sorted({int(x) for x in a.k.split(",")}) if a.k is not None else None
    except ValueError:
        p.error(f"--k {a.k!r}: expected comma-separated positive integers, e.g. 1,2,5")
    if a.ks is not None and (not a.ks or min(a.ks) < 1):
        p.error(f"--k {a.k!r}: expected comma-separated positive integers, e.g. 1,2,5")
    if not 1 <= a.updates <= 1000:
        p.error("--updates: expected 1 to 1000")
    a.json = a.json or DEFAULT_JSON
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = hub.missing_extras(args.venv)
    if missing:
        print(hub.missing_message(missing, str(args.venv)), file=sys.stderr)
        return 2
    command = "python benchmarks/bench_hub.py" + (" " + " ".join(sys.argv[1:] if argv is None else argv)).rstrip()
    runs, per_learner, note = [], 1024.0, ""
    ks = list(args.ks or [1, 2, 5, 10])
    try:
        while ks:
            k = ks.pop(0)
            ok, why = memory_allows(k, per_learner)
            if not ok:
                note = f"stopped before K={k}: {why} (keeping {MIN_FREE_GIB:g} GiB free)"
                print(note, flush=True)
                break
            print(f"== K={k} ...", flush=True)
            row = run_k(k, args, args.venv)
            runs.append(row)
            print(json.dumps(row), flush=True)
            per_learner = max(256.0, row["mem_per_learner_mib"] or per_learner)
            under = row["ok"] and row["update_ms"]["median"] < LIMIT_MS
            if not ks and args.ks is None and under and next_k(k) <= args.max_k:
                ks.append(next_k(k))
    except KeyboardInterrupt:
        note = "interrupted (everything started was stopped)"
        print(note, file=sys.stderr)
        if not runs:
            return 130
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": host_info(),
           "command": command, "notebook": NOTEBOOK, "updates_per_learner": args.updates,
           "quick": args.quick, "limit_ms": LIMIT_MS, "note": note}
    if args.merge and args.json.exists():
        done = {r["k"] for r in runs}
        runs = [r for r in json.loads(args.json.read_text()).get("runs", []) if r["k"] not in done] + runs
    out["runs"] = sorted(runs, key=lambda r: r["k"])
    out["max_k_under_200ms"] = loadtest.max_k_under(out["runs"], LIMIT_MS)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}: largest K with a median update under {LIMIT_MS:g} ms: {out['max_k_under_200ms']}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
