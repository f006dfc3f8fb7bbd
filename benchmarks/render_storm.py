"""The login storm's tables in the docs, generated from benchmarks/results/hub_storm.json — never typed by hand.

Rewrites the regions ``<!-- BEGIN generated:storm -->`` (the measured curve, K = 10, 20, 30 ...) and
``<!-- BEGIN generated:storm-cores -->`` (the cores a room of 30 needs, derived from it, with the derivation) of
docs/classroom.md, and the region ``storm`` of docs/instructor-guide.md. The functions are pure (dicts in, text
out), so tests feed them synthetic runs.

    python benchmarks/render_storm.py           # rewrite the regions
    python benchmarks/render_storm.py --check   # exit 1 if a doc is out of date with the JSON (tests use this)

hub_storm.json (written by ``benchmarks/bench_storm.py``): ``date``, ``host``, ``command``, ``runs`` [{``k``,
``load_avg_at_start`` [1, 5, 15 min], ``browsers``, ``settings`` {``spawn_limit``, ``max_servers``,
``kernel_threads``}, ``failed_logins``/``_spawns``/``_kernels``/``_sliders`` and their ``failed_*_why``,
``retries_429``, ``first_widget_s``/``run_all_s``/``server_cpu_s``/``kernel_cpu_s``/``update_ms`` {``median``,
``p90``, ``max``, ``n``}, ``mem_per_learner_mib`` {...}, ``peak_mem_gib``, ``storm_mem_gib``, ``ok``,
``learners`` [per-learner records]}].
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))  # the load test's statistics, shared with the tests (tests/roomtools/)
from render_docs import measured_line, replace_region, storm_goal  # noqa: E402
from roomtools import loadtest, storm  # noqa: E402

JSON = ROOT / "benchmarks" / "results" / "hub_storm.json"
THROTTLED = ROOT / "benchmarks" / "results" / "hub_storm_throttled.json"   # a storm with a small HUB_SPAWN_LIMIT
CLASSROOM, GUIDE = "docs/classroom.md", "docs/instructor-guide.md"
ROOM = 30                    # the room the guide sizes for
RUN_ALL_BUDGET_S = 120.0     # a judgement: every learner's notebook 03 has run two minutes after the storm
LOGIN_BUDGET_S = 60.0        # a judgement: every server has started within the minute the room arrives in
MISSING = ("*Not measured yet: run `python benchmarks/bench_storm.py --k 10,20,30` (writes "
           "benchmarks/results/hub_storm.json), then `python benchmarks/render_storm.py`.*")


def _n(x, digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _dist(d: dict | None, digits: int = 1) -> str:
    d = d or {}
    return f"{_n(d.get('median'), digits)} / {_n(d.get('p90'), digits)} / {_n(d.get('max'), digits)}"


def _failed(r: dict) -> str:
    parts = [f"{r.get(f'failed_{s}s', 0)}" for s in ("login", "spawn", "kernel", "slider")]
    return " / ".join(parts)


def _why(r: dict) -> str:
    why = [w for s in ("login", "spawn", "kernel", "slider") for w in r.get(f"failed_{s}_why", [])] + r["errors"]
    return "; ".join(why[:2])


def goal_text(doc: dict, learners: int = ROOM) -> str:
    """Whether the storm at K = ``learners`` met the goal: no failed login, spawn or kernel, and a median slider
    update of at most the limit (200 ms)."""
    met, failed, median = storm_goal(doc, learners)
    limit = doc.get("limit_ms", 200.0)
    if met is None:
        return f"The storm did not run K = {learners}: the goal for a room of {learners} is not measured."
    return (f"The goal for a room of {learners} on this machine (no failed login or kernel, a median slider update of"
            f" at most {limit:.0f} ms): **{'met' if met else 'not met'}** — {failed} failed logins, spawns or "
            f"kernels, median slider update {_n(median, 0)} ms.")


def storm_table(doc: dict) -> str:
    rows = ["| K | load avg at start | failed logins / spawns / kernels / sliders | 429s retried |"
            " login to server ready, median / p90 / max (s) | time to first widget, median / p90 / max (s) |"
            " Run All of notebook 03, median / max (s) | slider update, median / p90 (ms) | memory per learner"
            " (MiB) | machine's peak memory (GiB) | all ok |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in doc["runs"]:
        up, ra, mem = r.get("update_ms") or {}, r.get("run_all_s") or {}, r.get("mem_per_learner_mib") or {}
        why = f" ({_why(r)})" if not r["ok"] and _why(r) else ""
        rows.append(f"| {r['k']} | {r['load_avg_at_start'][0]:.2f} | {_failed(r)} | {r.get('retries_429', 0)} | "
                    f"{_dist(r.get('ready_s'))} | {_dist(r.get('first_widget_s'))} | {_n(ra.get('median'))} / "
                    f"{_n(ra.get('max'))} | {_n(up.get('median'), 0)} / {_n(up.get('p90'), 0)} | "
                    f"{_n(mem.get('median'), 0)} | {_n(r.get('peak_mem_gib'), 1)} | "
                    f"{'yes' if r['ok'] else 'no'}{why} |")
    first = doc["runs"][0]
    s = first.get("settings", {})
    browser = [(r["k"], r.get("update_ms_browser") or {}) for r in doc["runs"]]
    bnote = "; ".join(f"K = {k}: {_n(b.get('median'), 0)} ms" for k, b in browser if b.get("n"))
    return ("\n".join(rows) + f"\n\nEach K: a fresh hub with the room's defaults (at most {s.get('spawn_limit')} "
            f"servers starting at once, at most {s.get('max_servers')} running, {s.get('kernel_threads')} kernel "
            f"thread per learner); K learners arrive at seeded times within {first.get('window_s', 60):.0f} s, log "
            "in through the login form, wait for their server, run notebook 03 and move its slider "
            f"{doc.get('updates_per_learner', '?')} times. {first.get('browsers', 0)} of them in headless Chromium"
            f" (slider median seen in the browser, page redraw included: {bnote or 'none measured'}), the rest "
            "over HTTP and the kernel websocket. The load average (1 minute) at the start shows other work on the"
            " machine at that moment. " + goal_text(doc) + "\n\n" + measured_line(doc))


def _all(doc: dict, key: str) -> list[float]:
    return [lr[key] for r in doc["runs"] for lr in r.get("learners", []) if lr.get(key) is not None]


def derivation(doc: dict, learners: int = ROOM) -> tuple[storm.Cores, dict]:
    """The cores for ``learners`` from the storm's runs, and the figures used (see ``storm.recommended_cores``)."""
    cores = int(doc["host"]["cores"])
    run_all, spawn = _all(doc, "kernel_cpu_s"), _all(doc, "server_cpu_s")
    if not run_all or not spawn:
        raise ValueError("hub_storm.json has no learner that ran notebook 03: nothing to size from")
    max_k = loadtest.max_k_under(doc["runs"], doc.get("limit_ms", 200.0))
    share = cores / max_k if max_k else None
    figures = {"cores": cores, "max_k": max_k, "largest_tried": max(r["k"] for r in doc["runs"]),
               "run_all_cpu_s": loadtest.median(run_all), "spawn_cpu_s": loadtest.median(spawn), "share": share}
    return storm.recommended_cores(learners, figures["run_all_cpu_s"], figures["spawn_cpu_s"], share,
                                   RUN_ALL_BUDGET_S, LOGIN_BUDGET_S), figures


def cores_text(doc: dict, learners: int = ROOM) -> str:
    c, f = derivation(doc, learners)
    slider = (f"{f['cores']} cores / K = {f['max_k']} (the largest K with no failure and a median slider update"
              f" under {doc.get('limit_ms', 200):.0f} ms) = {f['share']:.3f} core each; {learners} × that = "
              f"{learners * f['share']:.2f}" if f["share"] else
              f"no K met the target, so a core each: {learners}")
    bound = (f" K = {f['max_k']} is the largest K tried, so this share is an upper bound: fewer cores may do."
             if f["max_k"] and f["max_k"] >= f["largest_tried"] else "")
    need = learners * f["run_all_cpu_s"] / RUN_ALL_BUDGET_S
    return (f"- **Run All**: {learners} learners × {f['run_all_cpu_s']:.1f} CPU-seconds (median kernel CPU time of "
            f"one learner's Run All of notebook 03, kernel start included) / {RUN_ALL_BUDGET_S:.0f} s (the budget:"
            f" every notebook done two minutes after the storm) = {need:.2f}"
            f" → **{c.by_run_all}**\n"
            f"- **slider**: {slider} → **{c.by_slider}**.{bound}\n"
            f"- **login**: {learners} learners × {f['spawn_cpu_s']:.1f} CPU-seconds (median CPU time of one "
            f"learner's server until ready) / {LOGIN_BUDGET_S:.0f} s (every server started within the minute) = "
            f"{learners * f['spawn_cpu_s'] / LOGIN_BUDGET_S:.2f} → **{c.by_login}**\n\n"
            f"**Cores for a room of {learners}: {c.cores}** (the largest of the three, set by {c.limiting}), each "
            "figure rounded up to a whole core. The CPU-seconds are measured; the two budgets are judgements; "
            "that the need adds up linearly with more cores is extrapolated, not measured here.\n\n"
            + measured_line(doc))


def throttle_text(doc: dict) -> str:
    """What learners met in a storm whose hub let only a few servers start at once (429, Retry-After, reload)."""
    r = doc["runs"][0]
    failed = sum(r.get(f"failed_{s}s", 0) for s in ("login", "spawn", "kernel"))
    retried = sum(1 for lr in r.get("learners", []) if lr.get("retries"))
    ready = r.get("ready_s") or {}
    return (f"A storm of K = {r['k']} against a hub with `HUB_SPAWN_LIMIT={r['settings']['spawn_limit']}` (so that"
            f" the limit is reached): {r['retries_429']} answers of 429 to {retried} of the {r['k']} learners, each "
            f"waited as its `Retry-After` said and reloaded; {failed} failed logins, spawns or kernels; from arrival"
            f" to server ready: median {_n(ready.get('median'))} s, max {_n(ready.get('max'))} s (load average at the"
            f" start {r['load_avg_at_start'][0]:.2f}).\n\n" + measured_line(doc))


def region_bodies(doc: dict | None, throttled: dict | None = None) -> dict[str, dict[str, str]]:
    table = storm_table(doc) if doc else MISSING
    throttle = throttle_text(throttled) if throttled else MISSING.replace(
        "--k 10,20,30", "--k 10 --spawn-limit 2 --json benchmarks/results/hub_storm_throttled.json")
    return {CLASSROOM: {"storm": table, "storm-cores": cores_text(doc) if doc else MISSING,
                        "storm-throttle": throttle},
            GUIDE: {"storm": table}}


def _read(path: Path) -> dict | None:
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def render(root: Path = ROOT, json_path: Path = JSON, throttled: Path = THROTTLED) -> dict[Path, tuple[str, str]]:
    """path -> (text on disk, text it should have)."""
    out = {}
    for rel, bodies in region_bodies(_read(json_path), _read(throttled)).items():
        path = Path(root) / rel
        old = new = path.read_text()
        for name, body in bodies.items():
            new = replace_region(new, name, body)
        out[path] = (old, new)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a generated region is out of date")
    p.add_argument("--json", type=Path, default=JSON)
    p.add_argument("--throttled", type=Path, default=THROTTLED)
    p.add_argument("--root", type=Path, default=ROOT)
    a = p.parse_args(argv)
    stale = [path for path, (old, new) in render(a.root, a.json, a.throttled).items() if old != new]
    if a.check:
        if stale:
            print("out of date with hub_storm.json: " + ", ".join(map(str, stale)) +
                  "\nrun: python benchmarks/render_storm.py", file=sys.stderr)
            return 1
        return 0
    for path, (old, new) in render(a.root, a.json, a.throttled).items():
        if old != new:
            path.write_text(new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
