"""The login storm: K learners log in to one JupyterHub (hub/jupyterhub_config.py, the room's own defaults) within
one minute, as a room does at the start of a workshop.

Each learner arrives at a seeded time inside the minute (``roomtools.storm.schedule``), opens the hub's real
login page, posts its form (name, room password, the page's ``_xsrf``; cookies kept, redirects followed), waits on
the spawn-pending page's event stream until the server is ready (a 429 is waited out as its Retry-After says and
retried, and counted), opens notebook 03 (a kernel through the server's REST API and websocket, with the
learner's cookies), runs its code cells in order and then moves the visual loss scaler's slider, timing each move
until the new plot arrives. ``--browsers N`` of the K learners do all of this in headless Chromium (Debian's
``/usr/bin/chromium`` through Playwright: ``benchmarks/storm_browser.py``), the rest over HTTP and the websocket.

Reported per K: failed logins, spawns and kernels (with why), 429s and retries, time to the first widget, Run All
and slider latency (median, p90, max), the learners' CPU-seconds (server start, Run All), memory (per learner and
the machine's peak), and the load average at the start (other work on the machine shows there).

    python benchmarks/bench_storm.py --k 10,20,30 --browsers 2 --merge
    python benchmarks/bench_storm.py --quick       # K=2, one browser, the widget's cells, 3 moves -> artifacts/

Bounded: every wait has a timeout, one K at most ``--run-timeout`` seconds; everything is stopped at the end (the
learners' servers and accounts through the API, the hub and every process it left, the browsers, the temporary
folder), also on an error, Ctrl-C or SIGTERM. Traffic: 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))  # the hub's drivers, shared with the tests (tests/roomtools/)
from bench_hub import LIMIT_MS, NOTEBOOK, SLIDER, TRAIT, host_info, learner_memory, memory_allows  # noqa: E402
from roomtools import hub_client, kernel_ws, loadtest, storm  # noqa: E402

from ampkit.classroom import hub  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "results" / "hub_storm.json"
QUICK_JSON = ROOT / "artifacts" / "hub_storm_quick.json"
PREFIX = "storm"          # the storm's learner names: storm001, storm002, ...
STAGES = ("login", "spawn", "kernel", "slider")
#: A learner's own share of the machine's memory (PSS: torch's shared pages counted once), about 430 MiB in the
#: K = 10 and 20 storms, with a margin; RSS (about 560 MiB) counts the shared libraries in every learner.
LEARNER_PSS_MIB = 480.0


def new_record(name: str, kind: str, arrival: float) -> dict:
    return {"name": name, "kind": kind, "arrival_s": arrival, "login_s": None, "ready_s": None,
            "first_widget_s": None, "run_all_s": None, "update_ms": [], "retries": 0, "failed": None, "error": None,
            "server_cpu_s": None, "kernel_cpu_s": None}


def server_process(h: hub_client.Hub, name: str):
    """The learner's single-user server process (its environment names the user), or None."""
    for p in h.processes():
        try:
            if "singleuser" in " ".join(p.cmdline()) and p.environ().get("JUPYTERHUB_USER") == name:
                return p
        except psutil.Error:
            continue
    return None


def cpu_s(p) -> float | None:
    try:
        t = p.cpu_times()
        return round(t.user + t.system, 2)
    except (psutil.Error, AttributeError):
        return None


def kernel_facts(h: hub_client.Hub, name: str) -> tuple[float | None, dict]:
    """The CPU-seconds of the learner's kernel(s) so far, and one kernel's OMP_NUM_THREADS and thread count."""
    p, total, facts = server_process(h, name), 0.0, {}
    if p is None:
        return None, facts
    try:
        for q in p.children(recursive=True):
            total += cpu_s(q) or 0.0
            if not facts:
                facts = {"omp_num_threads": q.environ().get("OMP_NUM_THREADS"), "os_threads": q.num_threads()}
    except psutil.Error:
        pass
    return round(total, 2), facts


def http_learner(h, rec: dict, t0: float, args, abort: threading.Event) -> None:
    """One learner over HTTP and the websocket; fills ``rec``. Never raises."""
    name, kernel, stage = rec["name"], None, "login"
    time.sleep(max(0.0, t0 + rec["arrival_s"] - time.monotonic()))
    start = time.monotonic()
    deadline = start + args.learner_timeout
    try:
        learner = storm.HttpLearner(h.url, name, timeout=args.http_timeout)
        try:
            url = learner.login(h.password, deadline)
        finally:
            rec["retries"] = learner.retries
        rec["login_s"] = round(time.monotonic() - start, 2)
        stage = "spawn"
        learner.wait_ready(url, deadline)
        rec["ready_s"] = round(time.monotonic() - start, 2)
        p = server_process(h, name)
        rec["server_cpu_s"] = cpu_s(p) if p is not None else None
        stage = "kernel"
        status, nb = learner.api("GET", f"/contents/notebooks/{NOTEBOOK}.ipynb")
        if status != 200:
            raise storm.StormError(f"the learner's copy of {NOTEBOOK} is missing ({status}: {nb})")
        cells = [("".join(c["source"]) if isinstance(c["source"], list) else c["source"])
                 for c in nb["content"]["cells"] if c["cell_type"] == "code"]
        if args.quick:
            cells = cells[: next(i for i, c in enumerate(cells) if "VisualLossScaler(" in c) + 1]
        status, sess = learner.api("POST", "/sessions", {"path": f"notebooks/{NOTEBOOK}.ipynb", "type": "notebook",
                                                         "name": f"{NOTEBOOK}.ipynb", "kernel": {"name": "python3"}},
                                   timeout=args.http_timeout)
        if status not in (200, 201):
            raise storm.StormError(f"could not start a kernel ({status}: {sess})")
        ws_url = h.url.replace("http", "ws", 1) + f"/user/{name}/api/kernels/{sess['kernel']['id']}/channels"
        kernel = kernel_ws.KernelSocket(ws_url, None, timeout=args.http_timeout, cookie=learner.cookie_header(),
                                        origin=h.url)
        kernel.wait_ready(max(1.0, min(120.0, deadline - time.monotonic())))
        t_run = time.monotonic()
        for code in cells:
            if abort.is_set():
                raise storm.StormError("aborted")
            if code.strip():
                kernel.execute(code, max(1.0, deadline - time.monotonic()))
            if rec["first_widget_s"] is None and any(s.get("_view_name") for s in kernel.comms.values()):
                rec["first_widget_s"] = round(time.monotonic() - start, 2)
        rec["run_all_s"] = round(time.monotonic() - t_run, 2)
        rec["kernel_cpu_s"], facts = kernel_facts(h, name)
        rec.update(facts)
        stage = "slider"
        slider = kernel.find_widget(SLIDER)
        value = int(kernel.comms[slider].get(TRAIT, 0))
        values = [v for v in range(-8, 41) if v != value]
        for i in range(args.updates):
            if abort.is_set():
                raise storm.StormError("aborted")
            rec["update_ms"].append(round(1000 * kernel.move(slider, None, values[i % len(values)],
                                                             args.update_timeout, trait=TRAIT), 1))
            time.sleep(args.pause)
    except Exception as exc:   # noqa: BLE001 — reported in the JSON; the storm goes on
        rec["failed"], rec["error"] = stage, f"{type(exc).__name__}: {exc}"[:300]
    finally:
        if kernel is not None:
            kernel.close()


def kill_own_browsers() -> None:
    """Kill what this process started for the browsers and left running (a learner thread stuck past the run's
    timeout): our own child processes named chrom*, or Playwright's driver (node), by process id."""
    left = []
    for p in psutil.Process().children(recursive=True):
        try:
            if any(n in p.name() for n in ("chrom", "node", "playwright")):
                left.append(p)
        except psutil.NoSuchProcess:
            continue
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    if left:
        print(f"   clean-up: {len(left)} browser process(es) killed", flush=True)


def browser_indices(k: int, n: int) -> set[int]:
    """Which of the K learners (0-based, in arrival order) use a real browser: ``n`` spread over the minute."""
    n = max(0, min(n, k))
    return {int((j + 0.5) * k / n) for j in range(n)}


def run_k(k: int, args) -> dict:
    """One K: a fresh hub with the room's defaults, a storm of K learners, everything stopped again."""
    names = [f"{PREFIX}{i:03d}" for i in range(1, k + 1)]
    arrivals = storm.schedule(k, args.window, seed=args.seed + k)
    browsers = browser_indices(k, args.browsers)
    recs = [new_record(n, "browser" if i in browsers else "http", a)
            for i, (n, a) in enumerate(zip(names, arrivals))]
    env = {} if args.spawn_limit is None else {"AMPKIT_HUB_SPAWN_LIMIT": str(args.spawn_limit)}
    settings = hub.settings_from_env(env, ROOT)
    row = {"k": k, "load_avg_at_start": [round(x, 2) for x in os.getloadavg()], "window_s": args.window,
           "seed": args.seed + k, "browsers": len(browsers),
           "settings": {"spawn_limit": settings.spawn_limit, "max_servers": settings.max_servers,
                        "kernel_threads": settings.kernel_threads}, "errors": []}
    abort, mem = threading.Event(), {"base_gib": None, "peak_gib": 0.0}
    t_start = time.monotonic()
    with loadtest.Cleanup() as cleanup:
        try:
            cleanup.add(kill_own_browsers)          # runs last: after the hub and its processes are stopped
            h = hub_client.Hub(cleanup, args.venv, room_timeouts=True, env=env)
            h.wait_up()
            cleanup.add(hub_client.delete_accounts, h, names)
            cleanup.add(hub_client.stop_servers, h, names)
            h.remember_processes()

            def watch():
                while not abort.wait(1.0):
                    vm = psutil.virtual_memory()
                    used = (vm.total - vm.available) / 2**30
                    mem["base_gib"] = used if mem["base_gib"] is None else mem["base_gib"]
                    mem["peak_gib"] = max(mem["peak_gib"], used)
                    if vm.available / 2**30 < 1.5:
                        row["errors"].append("aborted: less than 1.5 GiB of memory left")
                        abort.set()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            time.sleep(1.5)   # the baseline before the first arrival
            from storm_browser import browser_learner  # noqa: PLC0415 — Playwright only when a browser runs
            t0 = time.monotonic()
            threads = [threading.Thread(target=browser_learner if r["kind"] == "browser" else http_learner,
                                        args=(h, r, t0, args, abort), daemon=True) for r in recs]
            for t in threads:
                t.start()
            end = t0 + args.run_timeout
            for t in threads:
                t.join(max(0.0, end - time.monotonic()))
            if any(t.is_alive() for t in threads):
                row["errors"].append(f"timed out after {args.run_timeout:.0f} s")
                abort.set()
                for t in threads:
                    t.join(30)
            rss, pss, hub_mib = learner_memory(h, names)
            ran = [n for n, r in zip(names, recs) if r["ready_s"] is not None]
            row["mem_per_learner_mib"] = loadtest.summary([rss[n] for n in ran], 0)
            row["mem_per_learner_pss_mib"] = loadtest.summary([pss[n] for n in ran], 0)
            row["hub_mem_mib"] = round(hub_mib, 1)
        except Exception as exc:   # noqa: BLE001 — reported in the JSON; the clean-up runs all the same
            row["errors"].append(f"{type(exc).__name__}: {exc}"[:400])
        finally:
            abort.set()
    row["errors"] += [f"clean-up: {e}" for e in cleanup.errors]
    return summarize(row, recs, mem, time.monotonic() - t_start)


def summarize(row: dict, recs: list[dict], mem: dict, wall: float) -> dict:
    """The run's row: counts of failures by stage (with why), the distributions, the learners' own records."""
    for stage in STAGES:
        failed = [r for r in recs if r["failed"] == stage]
        row[f"failed_{stage}s"] = len(failed)
        row[f"failed_{stage}_why"] = sorted({r["error"] for r in failed})[:5]
    row["retries_429"] = sum(r["retries"] for r in recs)
    for key in ("login_s", "ready_s", "first_widget_s", "run_all_s", "server_cpu_s", "kernel_cpu_s"):
        row[key] = loadtest.summary([r[key] for r in recs if r[key] is not None], 2)
    row["update_ms"] = loadtest.summary([u for r in recs for u in r["update_ms"]], 1)
    row["update_ms_browser"] = loadtest.summary([u for r in recs if r["kind"] == "browser" for u in r["update_ms"]])
    row["first_widget_s_browser"] = loadtest.summary(
        [r["first_widget_s"] for r in recs if r["kind"] == "browser" and r["first_widget_s"] is not None], 2)
    row["kernel_threads_seen"] = sorted({str(r.get("omp_num_threads")) for r in recs if "omp_num_threads" in r})
    row["peak_mem_gib"] = round(mem["peak_gib"], 2)
    row["storm_mem_gib"] = round(mem["peak_gib"] - (mem["base_gib"] or mem["peak_gib"]), 2)
    row["ok"] = not row["errors"] and not any(r["failed"] for r in recs)
    row["wall_s"] = round(wall, 1)
    row["learners"] = recs
    return row


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", default="10,20,30", help="comma-separated K values (default 10,20,30)")
    p.add_argument("--browsers", type=int, default=2, help="learners in headless Chromium per K (default 2)")
    p.add_argument("--window", type=float, default=60.0, help="the arrivals' window in seconds (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spawn-limit", type=int, help="HUB_SPAWN_LIMIT for the storm's hub (default: the room's)")
    p.add_argument("--updates", type=int, default=10, help="slider moves per learner (default 10)")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between a learner's moves (default 0.5)")
    p.add_argument("--quick", action="store_true", help="K=2, one browser, the widget's cells, 3 moves")
    p.add_argument("--json", type=Path)
    p.add_argument("--merge", action="store_true", help="keep the runs of other K already in the JSON file")
    p.add_argument("--venv", type=Path, default=Path(sys.prefix))
    p.add_argument("--http-timeout", type=float, default=60.0)
    p.add_argument("--update-timeout", type=float, default=60.0)
    p.add_argument("--learner-timeout", type=float, default=480.0, help="one learner, at most (s)")
    p.add_argument("--run-timeout", type=float, default=540.0, help="one K, at most (s)")
    a = p.parse_args(argv)
    if a.quick:
        a.k, a.browsers, a.updates, a.json = "2", min(a.browsers, 1), min(a.updates, 3), a.json or QUICK_JSON
    try:
        a.ks = sorted({int(x) for x in a.k.split(",")})
    except ValueError:
        p.error(f"--k {a.k!r}: expected comma-separated positive integers, e.g. 10,20,30")
    if not a.ks or min(a.ks) < 1:
        p.error(f"--k {a.k!r}: expected comma-separated positive integers, e.g. 10,20,30")
    if not 0 <= a.browsers <= 5:
        p.error(f"--browsers {a.browsers}: expected 0 to 5 (each Chromium takes a core's share and ~300 MiB)")
    a.json = a.json or DEFAULT_JSON
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = hub.missing_extras(args.venv)
    if missing:
        print(hub.missing_message(missing, str(args.venv)), file=sys.stderr)
        return 2
    command = "python benchmarks/bench_storm.py" + (" " + " ".join(sys.argv[1:] if argv is None else argv)).rstrip()
    runs, note = [], ""
    try:
        for k in args.ks:
            ok, why = memory_allows(k, LEARNER_PSS_MIB)
            if not ok:
                note = f"stopped before K={k}: {why}"
                print(note, flush=True)
                break
            print(f"== storm K={k} (load average {os.getloadavg()[0]:.2f}) ...", flush=True)
            row = run_k(k, args)
            row["command"] = command
            row["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            runs.append(row)
            print(json.dumps({key: v for key, v in row.items() if key != "learners"}), flush=True)
    except KeyboardInterrupt:
        note = "interrupted (everything started was stopped)"
        if not runs:
            return 130
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": host_info(),
           "command": command, "notebook": NOTEBOOK, "updates_per_learner": args.updates, "quick": args.quick,
           "limit_ms": LIMIT_MS, "note": note,
           "defaults": {"learner_mib": hub.LEARNER_MIB, "spawn_cpu_s": hub.SPAWN_CPU_S,
                        "reserved_mib": hub.RESERVED_MIB}}
    if args.merge and args.json.exists():
        done = {r["k"] for r in runs}
        runs = [r for r in json.loads(args.json.read_text()).get("runs", []) if r["k"] not in done] + runs
    out["runs"] = sorted(runs, key=lambda r: r["k"])
    # the runs may come from several invocations (--merge): the command that measures them all at once
    out["command"] = (f"python benchmarks/bench_storm.py --k {','.join(str(r['k']) for r in out['runs'])} "
                      f"--browsers {args.browsers}" + (" --quick" if args.quick else "")
                      + (f" --spawn-limit {args.spawn_limit}" if args.spawn_limit is not None else "")
                      + (f" --updates {args.updates}" if args.updates != 10 and not args.quick else "")
                      + (f" --json {args.json}" if args.json not in (DEFAULT_JSON, QUICK_JSON) else ""))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
