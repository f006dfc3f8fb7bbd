"""The measured tables of the workshop docs, generated from the JSON the benchmarks write — never typed by hand.

Reads benchmarks/results/{notebooks,offline_install,hub_load}.json and rewrites the marked regions
``<!-- BEGIN generated:NAME -->`` ... ``<!-- END generated:NAME -->`` of docs/instructor-guide.md,
docs/instructor-guide.zh-CN.md (the same tables in Chinese, and the login storm's from hub_storm.json; their text:
benchmarks/render_docs_zh.py) and docs/classroom.md, and ``# BEGIN generated:NAME`` ... ``# END generated:NAME``
of hub/k8s/values.yaml (the per-learner CPU and memory of the Kubernetes plan, derived from the hub load test).
Each region says where and when its figures were measured. A missing JSON file gives a region saying which command
measures it.

    python benchmarks/render_docs.py           # rewrite the regions
    python benchmarks/render_docs.py --check   # exit 1 if a file is out of date with the JSON (tests use this)

The functions are pure (dicts in, text out) so that tests can feed them synthetic measurements.

The JSON files (written by the scripts named in ``SOURCES``; more keys are allowed). Every file has ``date`` (ISO,
UTC), ``host`` {``cpu``, ``cores``, ``mem_gib``, ``python``, ``torch``} and ``command`` (how to reproduce), and:

* notebooks.json: ``notebooks`` [{``name``, ``run_all_s``, ``nbval_s``, ``budget_s``, ``passed``}],
  ``total_run_all_s``; notebooks_zh_CN.json the same for the Chinese notebooks (the Chinese guide's tables), each
  ``run_all_s`` the median of ``run_all_runs_s``;
* offline_install.json: ``platform`` (pip's tag or tags), ``wheelhouse_mib``, ``n_wheels``, ``download_s``,
  ``install_s``, ``test_s``, ``test_summary`` ("N passed"), ``tests_run``;
* hub_load.json: ``runs`` [{``k``, ``notebook_s`` {``median``, ``max``}, ``update_ms`` {``median``, ``p90``, ``n``},
  ``mem_per_learner_mib``, ``hub_mem_mib``, ``ok``, ``errors``}], ``max_k_under_200ms``, ``notebook``,
  ``updates_per_learner``.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GUIDE, CLASSROOM, VALUES = "docs/instructor-guide.md", "docs/classroom.md", "hub/k8s/values.yaml"
GUIDE_ZH = "docs/instructor-guide.zh-CN.md"
CLASSROOM_ZH = "docs/classroom.zh-CN.md"   # the hub and storm tables in Chinese (render_docs_zh)
STORM_JSON = "hub_storm.json"   # the login storm (benchmarks/render_storm.py): only the Chinese guide's region here

#: result name -> (file under benchmarks/results, the command that writes it)
SOURCES = {
    "notebooks": ("notebooks.json", "python benchmarks/bench_notebooks.py --json"),
    "offline": ("offline_install.json", "python benchmarks/offline_install.py"),
    "hub": ("hub_load.json", "python benchmarks/bench_hub.py"),
    # the Chinese edition's notebooks (notebooks/zh_CN/): the Chinese guide's run-time table and agendas
    "notebooks_zh": ("notebooks_zh_CN.json", "python benchmarks/bench_notebooks.py --lang zh_CN --repeat 3 --json"),
}

#: The agendas: (notebook or pause, planned minutes of teaching and exercises, what the block covers). The minutes
#: are a plan, not a measurement; each notebook block adds its measured Run All time (rounded up to a minute).
HALF_DAY = [
    ("00_start_here", 20, "doctor, device report, first slider; exercises 1 and 4"),
    ("01_fp16_range", 45, "float explorer, overflow, underflow, the gradient range map; exercises 1 and 4"),
    ("break", 15, ""),
    ("02_autocast_and_levels", 45, "op table, O0-O3 side by side, memory, O3's failure, the O-level picker"),
    ("break", 10, ""),
    ("03_loss_scaling", 55, "visual loss scaler, static vs dynamic, the replay; exercises 1-3"),
    ("wrap-up", 15, "questions; what to read next (04-06 alone)"),
]
FULL_DAY = [
    ("00_start_here", 20, "doctor, device report, first slider; exercises 1 and 2"),
    ("01_fp16_range", 50, "all sections; exercises 1-4"),
    ("break", 15, ""),
    ("02_autocast_and_levels", 50, "all sections; exercises 1-3"),
    ("break", 10, ""),
    ("03_loss_scaling", 60, "sections 1-9 taught, 10-13 as reading; exercises 1-5"),
    ("lunch", 45, ""),
    ("04_data_sinking", 40, "timeline simulator, the three sinks, calibration; exercises 1 and 3"),
    ("05_amp_in_practice", 50, "recipes 1.1-1.6, troubleshooting, the AMP doctor; exercises 1, 3 and 4"),
    ("break", 15, ""),
    ("06_fp8_scaling", 40, "recipes, HYBRID, delayed scaling, amax history, MX and 1x128 blocks; exercises 1, 3 and 4"),
    ("wrap-up", 15, "questions; the reference page"),
]
DAY_START_MIN = 9 * 60   # 09:00; shift the clock to your own start


@dataclass(frozen=True)
class Node:
    """A Kubernetes node size for the sizing table (an assumption, stated in the doc), and what the kubelet,
    system pods and daemonsets keep for themselves (an assumption too: check `kubectl describe node`)."""

    cpu: float = 8.0
    mem_gib: float = 32.0
    reserved_cpu: float = 0.5
    reserved_mem_gib: float = 2.0


@dataclass(frozen=True)
class Resources:
    """Per-learner Kubernetes resources derived from the hub load test."""

    mem_measured_mib: float     # largest measured memory per learner over the runs that passed
    cpu_per_learner: float      # host cores / largest K with the median update under 200 ms
    cpu_guarantee: float
    cpu_limit: float
    mem_guarantee_mib: int
    mem_limit_mib: int
    max_k: int
    cores: int
    max_k_is_largest_tried: bool = False   # every K tried met the target: the real limit may be higher


def round_up(x: float, step: float) -> float:
    """``x`` rounded up to a multiple of ``step`` (a tiny tolerance keeps exact multiples where they are).

    >>> round_up(0.41, 0.05), round_up(300, 64), round_up(256, 64)
    (0.45, 320, 256)
    """
    if step <= 0:
        raise ValueError(f"step must be positive, got {step!r}")
    n = math.ceil(x / step - 1e-9)
    return round(n * step, 10) if isinstance(step, float) else int(n * step)


def learner_resources(hub: dict) -> Resources:
    """The per-learner requests and limits from the load test (formulas in docs/classroom.md):

    memory guarantee = the largest measured memory per learner (``mem_per_learner_max_mib`` when the file has it,
    else ``mem_per_learner_mib``), rounded up to 64 MiB; memory limit = twice that;
    CPU guarantee = host cores / max K (the CPU share at which the median slider update stayed under 200 ms),
    rounded up to 0.05 core; CPU limit = twice the guarantee, at least one core.
    """
    runs = [r for r in hub.get("runs", []) if r.get("ok")]
    if not runs:
        raise ValueError("hub_load.json has no run with ok=true: nothing to size from")
    cores = int(hub["host"]["cores"])
    max_k = int(hub.get("max_k_under_200ms") or 0)
    mem = max(float(r.get("mem_per_learner_max_mib", r["mem_per_learner_mib"])) for r in runs)
    largest_tried = max_k >= max(int(r["k"]) for r in hub["runs"])
    per = cores / max_k if max_k >= 1 else float(cores)   # no K met the target: at least the whole host each
    cpu_g = round_up(per, 0.05)
    mem_g = int(round_up(mem, 64))
    return Resources(mem, per, cpu_g, max(1.0, round(2 * cpu_g, 2)), mem_g, 2 * mem_g, max_k, cores, largest_tried)


def torch_threads(res: Resources) -> int:
    """Threads for each learner's torch (``OMP_NUM_THREADS``): the whole cores of the CPU limit, at least one.
    Without it torch starts one thread per core of the *node*, far more than a learner's limit allows."""
    return max(1, math.floor(res.cpu_limit + 1e-9))


def learners_per_node(res: Resources, node: Node = Node()) -> tuple[int, str]:
    """How many learners' guarantees fit on one node, and which resource runs out first ("CPU" or "memory")."""
    by_cpu = math.floor((node.cpu - node.reserved_cpu) / res.cpu_guarantee + 1e-9)
    by_mem = math.floor((node.mem_gib - node.reserved_mem_gib) * 1024 / res.mem_guarantee_mib + 1e-9)
    if min(by_cpu, by_mem) < 1:
        raise ValueError(f"one learner's guarantee does not fit on a {node.cpu:g}-CPU, {node.mem_gib:g}-GiB node")
    return (by_cpu, "CPU") if by_cpu <= by_mem else (by_mem, "memory")


def sizing_rows(res: Resources, learners=(30, 100, 300), node: Node = Node()) -> list[dict]:
    """One row per room size: total guarantees, learners per node, user nodes needed."""
    per_node, limiting = learners_per_node(res, node)
    return [{"learners": n, "cpu": round(n * res.cpu_guarantee, 2), "mem_gib": n * res.mem_guarantee_mib / 1024,
             "per_node": per_node, "limiting": limiting, "nodes": math.ceil(n / per_node)} for n in learners]


# --- text -------------------------------------------------------------------------------------------------------

def measured_line(doc: dict) -> str:
    """Where and when a JSON file's figures were measured, and how to measure them again."""
    h = doc.get("host", {})
    return (f"*Measured on {str(doc.get('date', '?'))[:10]} on {h.get('cpu', '?')} ({h.get('cores', '?')} cores, "
            f"{h.get('mem_gib', '?')} GiB RAM), Python {h.get('python', '?')}, torch {h.get('torch', '?')}; "
            f"reproduce with `{doc.get('command', '?')}`. Other machines give other figures.{load_note(doc)}*")


def load_note(doc: dict) -> str:
    """The machine's 1-minute load average during the measurement, where the JSON has it (a shared machine)."""
    load = doc.get("load_avg")
    return (f" Load average (1 min) on the machine: {load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at "
            "the end: other work shared its cores.") if load else ""


def missing(name: str) -> str:
    file, command = SOURCES[name]
    return (f"*Not measured yet: run `{command}` (writes "
            f"benchmarks/results/{file}), then `python benchmarks/render_docs.py`.*")


def notebooks_table(nb: dict) -> str:
    rows = ["| notebook | Run All, fresh kernel (s) | as a test, `pytest --nbval-lax` (s) | budget (s) | test |",
            "|---|---:|---:|---:|---|"]
    for n in nb["notebooks"]:
        budget = f"{n['budget_s']:.0f}" if n.get("budget_s") else "—"
        rows.append(f"| `{n['name']}` | {n['run_all_s']:.1f} | {n['nbval_s']:.1f} | {budget} | "
                    f"{'pass' if n['passed'] else 'FAIL'} |")
    rows.append(f"| **all** | **{nb['total_run_all_s']:.1f}** | {sum(n['nbval_s'] for n in nb['notebooks']):.1f} |"
                f" {nb.get('total_budget_s', 90):.0f} | |")
    return "\n".join(rows) + "\n\n" + measured_line(nb)


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def agenda_table(plan: list[tuple[str, int, str]], nb: dict | None) -> str:
    run_s = {n["name"]: n["run_all_s"] for n in nb["notebooks"]} if nb else {}
    rows = ["| starts | block | covers | teaching + exercises (planned, min) | one Run All (measured, s) |"
            " block (min) |", "|---|---|---|---:|---:|---:|"]
    t, planned, measured = DAY_START_MIN, 0, 0.0
    for block, minutes, covers in plan:
        is_nb = block[:2].isdigit()
        secs = run_s.get(block) if is_nb else None
        extra = math.ceil(secs / 60) if secs is not None else 0
        label = f"`{block}`" if is_nb else f"*{block}*"
        shown = f"{secs:.1f}" if secs is not None else ("not measured" if is_nb else "")
        rows.append(f"| {_clock(t)} | {label} | {covers} | {minutes} | {shown} | {minutes + extra} |")
        t += minutes + extra
        planned += minutes
        measured += secs or 0.0
    rows.append(f"| {_clock(t)} | *end* | | {planned} | {measured:.1f} | {t - DAY_START_MIN} |")
    note = measured_line(nb) if nb else missing("notebooks")
    return "\n".join(rows) + "\n\n" + note


def offline_table(off: dict) -> str:
    platform = off["platform"] if isinstance(off["platform"], str) else ", ".join(off["platform"])
    rows = ["| platform | wheelhouse | wheels | download (s) | install, fresh venv, `--no-index` (s) | tests (s) | "
            "result |", "|---|---:|---:|---:|---:|---:|---|",
            f"| `{platform}` | {off['wheelhouse_mib']:.0f} MiB | {off['n_wheels']} | {off['download_s']:.0f} | "
            f"{off['install_s']:.0f} | {off['test_s']:.0f} | {off['test_summary']} |"]
    note = f" Note from the run: {off['note']}." if off.get("note") else ""
    return "\n".join(rows) + f"\n\nTests run: {off['tests_run']}.{note}\n\n" + measured_line(off)


def _run_all_note(hub: dict, k: int) -> str:
    """What the slider criterion hides: a Run All by everyone at the same moment shares the cores K ways."""
    ok = {r["k"]: r for r in hub["runs"] if r.get("ok") and (r.get("notebook_s") or {}).get("median") is not None}
    if not k or k not in ok or min(ok) == k:
        return ""
    alone, at_k = ok[min(ok)]["notebook_s"]["median"], ok[k]["notebook_s"]["median"]
    return (f" The slider stays interactive at K = {k}, but a Run All that the whole room starts at the same moment"
            f" shares the cores: notebook 03 took {at_k:.0f} s each at K = {k}, against {alone:.0f} s at K ="
            f" {min(ok)} — stagger the Run Alls (start the room on the notebook during the introduction), or plan"
            " fewer learners per machine.")


def _errors(errors: list[str]) -> str:
    """A failed run's errors, short: the first-hand failures (not the learners stopped because another failed)."""
    first_hand = [e for e in errors if "another learner failed" not in e] or errors
    rest = len(errors) - len(first_hand)
    return "; ".join(first_hand[:3]) + (f"; {rest} other learner(s) stopped because of it" if rest else "")


def _num(x, digits: int) -> str:
    """A measured figure, or a dash where a failed run has none (its JSON holds null)."""
    return "—" if x is None else f"{x:.{digits}f}"


def hub_table(hub: dict) -> str:
    rows = ["| learners K | notebook 03 Run All, median / max (s) | slider update, median / p90 (ms) | updates |"
            " memory per learner (MiB) | hub (MiB) | all ok |", "|---:|---:|---:|---:|---:|---:|---|"]
    for r in hub["runs"]:
        errors = f" ({_errors(r['errors'])})" if r.get("errors") else ""
        nb, up = r.get("notebook_s") or {}, r.get("update_ms") or {}
        rows.append(f"| {r['k']} | {_num(nb.get('median'), 1)} / {_num(nb.get('max'), 1)} | "
                    f"{_num(up.get('median'), 0)} / {_num(up.get('p90'), 0)} | {up.get('n', 0)} | "
                    f"{_num(r.get('mem_per_learner_mib'), 0)} | {_num(r.get('hub_mem_mib'), 0)} | "
                    f"{'yes' if r['ok'] else 'no'}{errors} |")
    k = hub.get("max_k_under_200ms") or 0
    verdict = (f"The largest K whose median slider update stayed under 200 ms here: **{k}**." if k else
               "No K kept the median slider update under 200 ms here.")
    if k and k >= max(r["k"] for r in hub["runs"]):
        verdict += " It is the largest K tried: the machine may hold more."
    verdict += _run_all_note(hub, k)
    return ("\n".join(rows) + f"\n\nEach learner ran `{hub.get('notebook', '03_loss_scaling')}` end to end, then "
            f"{hub.get('updates_per_learner', '?')} slider updates, all learners at once. {verdict}\n\n"
            + measured_line(hub))


def resources_text(hub: dict) -> str:
    res = learner_resources(hub)
    cpu = (f"{res.cores} cores / {res.max_k} learners = {res.cpu_per_learner:.3f} core" if res.max_k else
           f"no K met the target, so each learner gets at least the whole host's {res.cores} cores")
    bound = (f" K = {res.max_k} was the largest K tried: the real limit may be higher, and this guarantee larger "
             "than needed." if res.max_k_is_largest_tried else "")
    return (f"- memory guarantee = largest measured memory per learner, {res.mem_measured_mib:.0f} MiB, rounded up"
            f" to 64 MiB = **{res.mem_guarantee_mib} MiB**; memory limit = 2 × guarantee = "
            f"**{res.mem_limit_mib} MiB**\n"
            f"- CPU guarantee = host cores / max K = {cpu}, rounded up to 0.05 = **{_cores(res.cpu_guarantee)}**; "
            f"CPU limit = max(1, 2 × guarantee) = **{_cores(res.cpu_limit)}**; `OMP_NUM_THREADS` = whole cores of "
            f"the limit = **{torch_threads(res)}**.{bound}\n\n" + measured_line(hub))


def _cores(x: float) -> str:
    return f"{x:g} core" + ("" if x == 1 else "s")


def sizing_table(hub: dict, node: Node = Node()) -> str:
    res = learner_resources(hub)
    rows = [f"| learners | CPU guaranteed (cores) | memory guaranteed (GiB) | learners per {node.cpu:g}-CPU, "
            f"{node.mem_gib:g}-GiB node (limited by) | user nodes |", "|---:|---:|---:|---:|---:|"]
    for r in sizing_rows(res, node=node):
        rows.append(f"| {r['learners']} | {r['cpu']:g} | {r['mem_gib']:.1f} | {r['per_node']} ({r['limiting']}) |"
                    f" {r['nodes']} |")
    return ("\n".join(rows) + f"\n\nFrom {_cores(res.cpu_guarantee)} and {res.mem_guarantee_mib} MiB guaranteed per"
            f" learner; a node keeps {node.reserved_cpu:g} CPU and {node.reserved_mem_gib:g} GiB for the system. "
            "Plus one node for the hub, proxy and user scheduler (here the hub's processes used "
            f"{max(r['hub_mem_mib'] for r in hub['runs']):.0f} MiB at most).\n\n" + measured_line(hub))


def resources_yaml(hub: dict | None, indent: str) -> str:
    """The ``singleuser.cpu`` and ``singleuser.memory`` blocks of values.yaml."""
    if hub is None:
        lines = ["# not measured yet: run `python benchmarks/bench_hub.py`, then `python benchmarks/render_docs.py`;",
                 "# until then the chart's defaults below (1G guaranteed, no limits)",
                 "cpu:", "  guarantee: null", "  limit: null", "memory:", "  guarantee: 1G", "  limit: null",
                 "extraEnv:", '  OMP_NUM_THREADS: "1"']
    else:
        res = learner_resources(hub)
        lines = [f"# from benchmarks/results/hub_load.json ({str(hub.get('date', '?'))[:10]}, "
                 f"{hub['host'].get('cores')} cores); derivation in docs/classroom.md",
                 "cpu:", f"  guarantee: {res.cpu_guarantee:g}", f"  limit: {res.cpu_limit:g}",
                 "memory:", f"  guarantee: {res.mem_guarantee_mib}M", f"  limit: {res.mem_limit_mib}M",
                 "extraEnv:  # torch's CPU threads: as many as the CPU limit, not the node's cores",
                 f'  OMP_NUM_THREADS: "{torch_threads(res)}"']
    return "\n".join(indent + line for line in lines)


# --- regions ----------------------------------------------------------------------------------------------------

def _markers(name: str, yaml_style: bool) -> tuple[str, str]:
    if yaml_style:
        return rf"^([ \t]*)# BEGIN generated:{re.escape(name)}[^\n]*\n", rf"^[ \t]*# END generated:{re.escape(name)}"
    return rf"^()<!-- BEGIN generated:{re.escape(name)} -->[^\n]*\n", rf"^<!-- END generated:{re.escape(name)} -->"


def region_names(text: str) -> list[str]:
    """The names of the generated regions in a text, in order."""
    return re.findall(r"BEGIN generated:([\w-]+)", text)


def replace_region(text: str, name: str, body, yaml_style: bool = False) -> str:
    """``text`` with the region ``name`` holding ``body`` (a string, or a function of the BEGIN line's indent).

    Raises ``ValueError`` when the region is missing, duplicated or unterminated.
    """
    begin, end = _markers(name, yaml_style)
    starts = list(re.finditer(begin, text, re.M))
    if len(starts) != 1:
        raise ValueError(f"region {name!r}: expected one BEGIN marker, found {len(starts)}")
    stop = re.compile(end, re.M).search(text, starts[0].end())
    if stop is None:
        raise ValueError(f"region {name!r}: no END marker after its BEGIN")
    content = body(starts[0].group(1)) if callable(body) else body
    return text[:starts[0].end()] + content.rstrip("\n") + "\n" + text[stop.start():]


def load_results(results_dir: Path = RESULTS) -> dict:
    """name -> the parsed JSON, or None when the file does not exist yet."""
    out = {}
    for name, (file, _) in SOURCES.items():
        path = Path(results_dir) / file
        out[name] = json.loads(path.read_text()) if path.exists() else None
    storm = Path(results_dir) / STORM_JSON
    out["storm"] = json.loads(storm.read_text()) if storm.exists() else None
    return out


def storm_goal(doc: dict, learners: int = 30) -> tuple[bool | None, int, float | None]:
    """(met, failed logins + spawns + kernels, median slider ms) at K = ``learners``: the one rule that
    render_storm.goal_text and the Chinese guide's table both say; ``met`` is None when that K did not run."""
    run = next((r for r in doc["runs"] if r["k"] == learners), None)
    if run is None:
        return None, 0, None
    failed = sum(run.get(f"failed_{s}s", 0) for s in ("login", "spawn", "kernel"))
    median = (run.get("update_ms") or {}).get("median")
    met = failed == 0 and median is not None and median <= doc.get("limit_ms", 200.0) and not run["errors"]
    return met, failed, median


def _zh():
    """benchmarks/render_docs_zh.py (the Chinese guide's tables), loaded by path as this file is by the tests."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_render_docs_zh", Path(__file__).with_name("render_docs_zh.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def region_bodies(results: dict) -> dict[str, dict]:
    """file -> region name -> body, for every generated region."""
    nb, off, hub = results["notebooks"], results["offline"], results["hub"]

    def have(doc, name, fn):
        return fn(doc) if doc is not None else missing(name)

    return {
        GUIDE: {"notebooks": have(nb, "notebooks", notebooks_table),
                "agenda-half": agenda_table(HALF_DAY, nb), "agenda-full": agenda_table(FULL_DAY, nb),
                "offline": have(off, "offline", offline_table), "hub": have(hub, "hub", hub_table)},
        GUIDE_ZH: _zh().region_bodies(results, HALF_DAY, FULL_DAY, DAY_START_MIN, SOURCES, storm_goal),
        CLASSROOM_ZH: {k: v for k, v in _zh().region_bodies(results, HALF_DAY, FULL_DAY, DAY_START_MIN, SOURCES,
                                                             storm_goal).items() if k in ("hub", "storm")},
        CLASSROOM: {"hub": have(hub, "hub", hub_table), "k8s-resources": have(hub, "hub", resources_text),
                    "k8s-sizing": have(hub, "hub", sizing_table)},
        VALUES: {"k8s-resources": lambda indent: resources_yaml(hub, indent)},
    }


def render(root: Path = ROOT, results_dir: Path = RESULTS) -> dict[Path, tuple[str, str]]:
    """path -> (text on disk, text it should have)."""
    out = {}
    for rel, bodies in region_bodies(load_results(results_dir)).items():
        path = Path(root) / rel
        old = path.read_text()
        new = old
        for name, body in bodies.items():
            new = replace_region(new, name, body, yaml_style=path.suffix in (".yaml", ".yml"))
        if rel in (GUIDE, GUIDE_ZH):   # the names they quote from the pages (render_docs_zh.fill_names)
            new = _zh().fill_names(new, Path(root), "en" if rel == GUIDE else "zh_CN")
        out[path] = (old, new)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated region is out of date")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the JSON files")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root holding the docs")
    args = parser.parse_args(argv)
    stale = []
    for path, (old, new) in render(args.root, args.results).items():
        if old == new:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(new)
            print(f"updated {path}")
    if args.check and stale:
        print("out of date with benchmarks/results/*.json: " + ", ".join(map(str, stale)) +
              "\nrun: python benchmarks/render_docs.py", file=sys.stderr)
        return 1
    if not stale:
        print("generated regions are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
