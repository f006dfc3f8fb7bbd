"""The workshop docs' generated tables (benchmarks/render_docs.py), the Kubernetes values file and the notebooks
benchmark's JSON: sizing math on synthetic measurements, region rewriting, the committed docs in sync with the
committed JSON, and hub/k8s/values.yaml checked against the Zero to JupyterHub chart's schema."""
import copy
import doctest
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


rd = _load("render_docs")
bench_notebooks = _load("bench_notebooks")

HOST = {"cpu": "Test CPU", "cores": 2, "mem_gib": 8.0, "python": "3.11.7", "torch": "2.13.0+cpu"}


def _run(k, mem, ok=True, median=100.0):
    return {"k": k, "notebook_s": {"median": 10.0 + k, "max": 12.0 + k},
            "update_ms": {"median": median, "p90": 2 * median, "n": 20 * k}, "mem_per_learner_mib": mem,
            "hub_mem_mib": 150.0, "ok": ok, "errors": [] if ok else ["timeout"]}


def hub_json(max_k=5, runs=None):
    return {"date": "2026-01-02T03:04:05+00:00", "host": dict(HOST), "command": "python benchmarks/bench_hub.py",
            "runs": runs if runs is not None else [_run(1, 300.0), _run(2, 350.0), _run(5, 340.0, median=180.0),
                                                   _run(10, 900.0, ok=False, median=420.0)],
            "max_k_under_200ms": max_k, "notebook": "03_loss_scaling", "updates_per_learner": 20}


def notebooks_json():
    names = ["00_start_here", "01_fp16_range", "02_autocast_and_levels", "03_loss_scaling"]
    nbs = [{"name": n, "run_all_s": 5.0 + i, "nbval_s": 7.0 + i, "budget_s": 15.0, "passed": True}
           for i, n in enumerate(names)]
    return {"date": "2026-01-02T03:04:05+00:00", "host": dict(HOST),
            "command": "python benchmarks/bench_notebooks.py --json", "notebooks": nbs,
            "total_run_all_s": sum(n["run_all_s"] for n in nbs)}


def offline_json():
    return {"date": "2026-01-02T03:04:05+00:00", "host": dict(HOST), "command": "python benchmarks/offline_install.py",
            "platform": "manylinux_2_28_x86_64", "wheelhouse_mib": 512.4, "n_wheels": 120, "download_s": 95.0,
            "install_s": 40.0, "test_s": 70.0, "test_summary": "7 passed", "tests_run": "pytest notebooks/"}


# --- sizing math ------------------------------------------------------------------------------------------------

def test_doctests_of_render_docs():
    assert doctest.testmod(rd).failed == 0


def test_learner_resources_from_synthetic_load_test():
    res = rd.learner_resources(hub_json())
    assert res.mem_measured_mib == 350.0          # the largest over the runs that passed; K=10 failed (900 ignored)
    assert res.mem_guarantee_mib == 384 and res.mem_limit_mib == 768     # 350 rounded up to 64 MiB, limit twice it
    assert res.cpu_per_learner == pytest.approx(0.4)                      # 2 cores / 5 learners
    assert res.cpu_guarantee == pytest.approx(0.4) and res.cpu_limit == 1.0   # limit: max(1, 2 x 0.4)
    assert rd.torch_threads(res) == 1


def test_cpu_guarantee_rounds_up_and_limit_doubles():
    res = rd.learner_resources(hub_json(max_k=3))                        # 2 / 3 = 0.667 -> 0.70
    assert res.cpu_guarantee == pytest.approx(0.70) and res.cpu_limit == pytest.approx(1.4)
    assert rd.torch_threads(res) == 1


def test_no_k_met_the_target_gives_the_whole_host():
    res = rd.learner_resources(hub_json(max_k=0))
    assert res.cpu_guarantee == 2.0 and res.cpu_limit == 4.0 and rd.torch_threads(res) == 4
    assert "no K met the target" in rd.resources_text(hub_json(max_k=0))


def test_largest_k_tried_is_flagged_as_a_bound():
    assert not rd.learner_resources(hub_json()).max_k_is_largest_tried          # K=10 was tried and failed
    bound = hub_json(max_k=2, runs=[_run(1, 300.0), _run(2, 310.0)])
    assert rd.learner_resources(bound).max_k_is_largest_tried
    assert "largest K tried" in rd.resources_text(bound) and "largest K tried" in rd.hub_table(bound)
    assert "largest K tried" not in rd.hub_table(hub_json())


def test_memory_uses_the_largest_learner_when_given():
    runs = [dict(_run(2, 300.0), mem_per_learner_max_mib=420.0)]
    assert rd.learner_resources(hub_json(max_k=2, runs=runs)).mem_guarantee_mib == 448   # 420 -> 448, not 320


def test_no_passing_run_is_an_error():
    with pytest.raises(ValueError, match="ok=true"):
        rd.learner_resources(hub_json(runs=[_run(1, 300.0, ok=False)]))


def test_nodes_needed_for_30_100_300_learners():
    res = rd.learner_resources(hub_json())
    node = rd.Node(cpu=8, mem_gib=32, reserved_cpu=0.5, reserved_mem_gib=2)
    assert rd.learners_per_node(res, node) == (18, "CPU")               # floor(7.5 / 0.4) = 18 < floor(30720 / 384)
    rows = rd.sizing_rows(res, node=node)
    assert [r["learners"] for r in rows] == [30, 100, 300]
    assert [r["nodes"] for r in rows] == [2, 6, 17]                      # ceil(n / 18)
    assert rows[0]["cpu"] == pytest.approx(12.0) and rows[0]["mem_gib"] == pytest.approx(30 * 384 / 1024)


def test_memory_can_be_the_limiting_resource():
    res = rd.learner_resources(hub_json(runs=[_run(1, 3000.0)], max_k=1))   # 3008 MiB, 2 cores each
    assert rd.learners_per_node(res, rd.Node(cpu=64, mem_gib=32)) == (10, "memory")   # floor(30720 / 3008)
    with pytest.raises(ValueError, match="does not fit"):
        rd.learners_per_node(res, rd.Node(cpu=1, mem_gib=32))


def test_round_up_rejects_a_bad_step():
    with pytest.raises(ValueError):
        rd.round_up(1.0, 0)


# --- text and regions -------------------------------------------------------------------------------------------

def test_tables_state_where_and_when_measured():
    for text in (rd.notebooks_table(notebooks_json()), rd.offline_table(offline_json()), rd.hub_table(hub_json()),
                 rd.sizing_table(hub_json()), rd.resources_text(hub_json())):
        assert "Measured on 2026-01-02 on Test CPU (2 cores, 8.0 GiB RAM)" in text and "reproduce with `" in text
    assert "**5**" in rd.hub_table(hub_json())                            # the largest K under 200 ms
    assert "| 30 | 12 | 11.2 | 18 (CPU) | 2 |" in rd.sizing_table(hub_json())


def test_agenda_adds_measured_run_time_to_planned_minutes():
    plan = [("00_start_here", 20, "a"), ("break", 15, ""), ("01_fp16_range", 30, "b")]
    text = rd.agenda_table(plan, notebooks_json())
    assert "| 09:00 | `00_start_here` | a | 20 | 5.0 | 21 |" in text          # 5 s rounds up to one minute
    assert "| 09:21 | *break* |" in text and "| 09:36 | `01_fp16_range` |" in text
    assert "| 10:07 | *end* | | 65 | 11.0 | 67 |" in text
    assert "not measured" in rd.agenda_table(plan, None) and "Not measured yet" in rd.agenda_table(plan, None)


def test_replace_region_markdown_and_yaml():
    md = "a\n<!-- BEGIN generated:x -->\nold\n<!-- END generated:x -->\nb\n"
    new = rd.replace_region(md, "x", "new table")
    assert new == "a\n<!-- BEGIN generated:x -->\nnew table\n<!-- END generated:x -->\nb\n"
    assert rd.replace_region(new, "x", "new table") == new                # idempotent
    yml = "s:\n  # BEGIN generated:r (do not edit)\n  old: 1\n  # END generated:r\n  other: 2\n"
    out = rd.replace_region(yml, "r", lambda indent: f"{indent}cpu: 1", yaml_style=True)
    assert out == "s:\n  # BEGIN generated:r (do not edit)\n  cpu: 1\n  # END generated:r\n  other: 2\n"
    assert rd.region_names(md) == ["x"]
    with pytest.raises(ValueError, match="expected one BEGIN"):
        rd.replace_region(md, "y", "z")
    with pytest.raises(ValueError, match="expected one BEGIN"):
        rd.replace_region(md + md, "x", "z")
    with pytest.raises(ValueError, match="no END"):
        rd.replace_region("<!-- BEGIN generated:x -->\nold\n", "x", "z")


def _tmp_checkout(tmp_path):
    # the guides' quoted names come from the package catalog and notebooks 00 and 08 (render_docs_zh.fill_names)
    pages = [p.relative_to(ROOT) for p in [*(ROOT / "notebooks" / "zh_CN").glob("0[08]_*.ipynb"),
                                            *(ROOT / "notebooks").glob("00_*.ipynb")]]
    for rel in (rd.GUIDE, rd.GUIDE_ZH, rd.CLASSROOM, rd.CLASSROOM_ZH, rd.VALUES, rd._zh().PACKAGE_PO, *pages):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    results = tmp_path / "results"
    results.mkdir()
    return results


def test_render_and_check_on_synthetic_json(tmp_path, capsys):
    results = _tmp_checkout(tmp_path)
    args = ["--root", str(tmp_path), "--results", str(results)]
    assert rd.main(args) == 0                                             # no JSON: every region says how to measure
    guide = (tmp_path / rd.GUIDE).read_text()
    assert "Not measured yet: run `python benchmarks/bench_hub.py`" in guide
    assert yaml.safe_load((tmp_path / rd.VALUES).read_text())["singleuser"]["memory"]["guarantee"] == "1G"
    for name, doc in (("notebooks.json", notebooks_json()), ("offline_install.json", offline_json()),
                      ("hub_load.json", hub_json())):
        (results / name).write_text(json.dumps(doc))
    assert rd.main(args + ["--check"]) == 1                               # the docs are now out of date
    assert "out of date" in capsys.readouterr().err
    assert rd.main(args) == 0 and rd.main(args + ["--check"]) == 0
    values = yaml.safe_load((tmp_path / rd.VALUES).read_text())["singleuser"]
    assert values["cpu"] == {"guarantee": 0.4, "limit": 1} and values["memory"] == {"guarantee": "384M",
                                                                                   "limit": "768M"}
    assert values["extraEnv"] == {"OMP_NUM_THREADS": "1"}
    classroom = (tmp_path / rd.CLASSROOM).read_text()
    assert "| 300 | 120 | 112.5 | 18 (CPU) | 17 |" in classroom and "Not measured yet" not in classroom
    changed = copy.deepcopy(hub_json())
    changed["runs"][0]["mem_per_learner_mib"] = 500.0
    (results / "hub_load.json").write_text(json.dumps(changed))
    assert rd.main(args + ["--check"]) == 1                               # a new measurement makes them stale


def test_committed_docs_match_committed_json():
    """Fails until benchmarks/results/*.json and the regenerated docs are committed together."""
    stale = [str(path.relative_to(ROOT)) for path, (old, new) in rd.render().items() if old != new]
    assert not stale, f"run `python benchmarks/render_docs.py`: out of date: {stale}"
    for name, (file, _) in rd.SOURCES.items():
        assert (rd.RESULTS / file).exists(), f"benchmarks/results/{file} is not committed ({name})"


def test_every_region_in_the_docs_is_generated():
    bodies = rd.region_bodies(rd.load_results())
    storm = _load("render_storm").region_bodies(None)         # the login storm's regions have their own generator
    for rel, regions in bodies.items():
        names = sorted(n for n in rd.region_names((ROOT / rel).read_text()) if n not in storm.get(rel, {}))
        assert names == sorted(regions), rel   # none stray, none lost


# --- notebooks.json ---------------------------------------------------------------------------------------------

def test_bench_notebooks_json_schema():
    rows = [("00_start_here.ipynb", 4.04, 10.7, 5.0, "pass", "yes"), ("03_loss_scaling.ipynb", 11.8, 13.8, 15.0,
                                                                       "FAIL", "yes")]
    doc = bench_notebooks.results_json(rows, "python benchmarks/bench_notebooks.py --json")
    assert set(doc) >= {"date", "host", "command", "notebooks", "total_run_all_s"}
    assert set(doc["host"]) >= {"cpu", "cores", "mem_gib", "python", "torch"}
    assert doc["notebooks"][0] == {"name": "00_start_here", "run_all_s": 4.04, "nbval_s": 10.7, "budget_s": 5.0,
                                   "passed": True}
    assert doc["notebooks"][1]["passed"] is False and doc["total_run_all_s"] == pytest.approx(15.84)
    assert re.match(r"\d{4}-\d\d-\d\dT", doc["date"]) and doc["date"].endswith("+00:00")


# --- hub/k8s/values.yaml against the Zero to JupyterHub chart's schema ------------------------------------------

OPEN = "open"   # the schema allows any keys below (additionalProperties: true)
NUM, STR, BOOL, INT, NULL = (int, float), str, bool, int, type(None)
#: The part of the chart's schema the values file uses, transcribed from jupyterhub/zero-to-jupyterhub-k8s
#: `jupyterhub/values.schema.yaml` (commit 02dd73df): key -> nested dict, OPEN, or the allowed types.
Z2JH_SCHEMA = {
    "hub": {"config": OPEN, "baseUrl": (STR,)},
    "singleuser": {
        "image": {"name": (STR,), "tag": (STR,), "pullPolicy": (STR, NULL), "pullSecrets": (list,)},
        "defaultUrl": (STR, NULL),
        "cpu": {"limit": (*NUM, NULL), "guarantee": (*NUM, NULL)},
        "memory": {"limit": (*NUM, STR, NULL), "guarantee": (*NUM, STR, NULL)},
        "extraEnv": OPEN,
        "storage": {"capacity": (STR, NULL), "type": (STR,), "homeMountPath": (STR,)},
        "lifecycleHooks": {"postStart": OPEN, "preStop": OPEN},
        "startTimeout": (INT, NULL), "cmd": (list, STR, NULL),
    },
    "cull": {"enabled": (BOOL,), "users": (BOOL, NULL), "adminUsers": (BOOL, NULL),
             "removeNamedServers": (BOOL, NULL), "timeout": (INT, NULL), "every": (INT, NULL),
             "concurrency": (INT, NULL), "maxAge": (INT, NULL)},
    "scheduling": {
        "userScheduler": {"enabled": (BOOL,), "replicas": (INT,), "logLevel": (INT,)},
        "podPriority": {"enabled": (BOOL,), "globalDefault": (BOOL,), "defaultPriority": (INT,),
                        "imagePullerPriority": (INT,), "userPlaceholderPriority": (INT,)},
        "userPlaceholder": {"enabled": (BOOL,), "replicas": (INT,)},
    },
    "prePuller": {"hook": {"enabled": (BOOL,), "pullOnlyOnChanges": (BOOL,)}, "continuous": {"enabled": (BOOL,)}},
}


def schema_problems(values, schema=Z2JH_SCHEMA, path=""):
    """Every key of ``values`` the schema does not know, or whose value has a type the schema does not allow."""
    problems = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in schema:
            problems.append(f"{where}: not a key of the chart's schema here")
        elif schema[key] == OPEN:
            continue
        elif isinstance(schema[key], dict):
            if not isinstance(value, dict):
                problems.append(f"{where}: must be a mapping")
            else:
                problems += schema_problems(value, schema[key], where)
        elif isinstance(value, bool) and bool not in schema[key]:
            problems.append(f"{where}: a boolean where {schema[key]} is allowed")
        elif not isinstance(value, schema[key]):
            problems.append(f"{where}: {type(value).__name__} is not allowed")
    return problems


def test_schema_check_catches_mistakes():
    assert schema_problems({"singleuser": {"cpu": {"guarantee": "lots"}}}) == \
        ["singleuser.cpu.guarantee: str is not allowed"]
    assert schema_problems({"singleuser": {"defaultURL": "/lab"}}) == \
        ["singleuser.defaultURL: not a key of the chart's schema here"]
    assert schema_problems({"cull": {"timeout": True}}) != []
    assert schema_problems({"hub": {"config": {"Anything": {"goes": 1}}}}) == []


def test_values_yaml_keys_are_in_the_chart_schema():
    values = yaml.safe_load((ROOT / rd.VALUES).read_text())
    assert schema_problems(values) == []
    single = values["singleuser"]
    assert single["defaultUrl"].startswith("/lab")
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] > 0
    assert values["scheduling"]["userScheduler"]["enabled"] is True
    assert values["prePuller"]["hook"]["enabled"] is True
    hook = " ".join(single["lifecycleHooks"]["postStart"]["exec"]["command"])
    assert 'test -e "$HOME/notebooks" ||' in hook and "/srv/ampkit/docs" in hook        # copies once, docs too
    config = values["hub"]["config"]
    assert "user_password" not in json.dumps(config) and "admin_password" not in json.dumps(config)   # no secrets


def test_values_authenticator_matches_the_one_machine_hub():
    values = yaml.safe_load((ROOT / rd.VALUES).read_text())
    one_machine = re.search(r'authenticator_class = "([^"]+)"', (ROOT / "ampkit/classroom/hub/__init__.py").read_text())
    assert one_machine, "ampkit/classroom/hub/__init__.py no longer sets c.JupyterHub.authenticator_class"
    assert values["hub"]["config"]["JupyterHub"]["authenticator_class"] == one_machine.group(1)


# --- the guide against the notebooks ----------------------------------------------------------------------------

def _exercise_numbers(text):
    """Every exercise number a text names: "exercise 2", "exercises 1 and 4", "exercises 1-3", "also 4 (...) and 5"."""
    found = set()
    for group in re.findall(r"[Ee]xercises? ((?:\d+(?:\s*(?:-|–|and|,|\(.*?\))\s*)?)+)", text):
        for a, b in re.findall(r"(\d+)\s*[-–]\s*(\d+)", group):
            found.update(range(int(a), int(b) + 1))
        found.update(int(n) for n in re.findall(r"\d+", re.sub(r"\(.*?\)", "", group)))
    return found


def test_exercise_numbers_parser():
    assert _exercise_numbers("exercise 1 (which formats) and exercise 4 (x 3.0e-8)") == {1, 4}
    assert _exercise_numbers("exercises 1-3; exercises 1 and 4") == {1, 2, 3, 4}


def test_guide_names_only_exercises_the_notebooks_have():
    import nbformat

    guide = (ROOT / rd.GUIDE).read_text()
    sections = re.split(r"^### `(\d\d_\w+)`", guide, flags=re.M)[1:]
    named = dict(zip(sections[::2], sections[1::2]))
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(named) == notebooks                                     # one section per notebook
    plans = {}
    for block, _, covers in rd.HALF_DAY + rd.FULL_DAY:
        plans.setdefault(block, set()).update(_exercise_numbers(covers))
    for name, text in named.items():
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        have = {int(n) for c in nb.cells if c.cell_type == "markdown" for n in re.findall(r"\*\*Exercise (\d+)\.\*\*",
                                                                                           c.source)}
        assert "**Project**" in text, name
        assert _exercise_numbers(text) <= have, (name, _exercise_numbers(text) - have)
        assert plans.get(name, set()) <= have, (name, plans[name] - have)


def test_values_post_start_hook_copies_once(tmp_path):
    """Run the hook's shell command against a fake image (/srv/ampkit replaced by a temporary folder)."""
    import subprocess

    values = yaml.safe_load((ROOT / rd.VALUES).read_text())
    argv = values["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"]
    image, home = tmp_path / "srv", tmp_path / "home"
    for folder in ("notebooks", "docs"):
        (image / folder).mkdir(parents=True)
    (image / "notebooks" / "00_start_here.ipynb").write_text("{}")
    (image / "docs" / "reference.md").write_text("facts")
    home.mkdir()
    script = argv[2].replace("/srv/ampkit", str(image))

    def run():
        subprocess.run([argv[0], argv[1], script], env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, check=True)

    run()                                                                 # no workshop/ in the image: the notebooks
    assert (home / "notebooks" / "00_start_here.ipynb").exists() and (home / "docs" / "reference.md").exists()
    (home / "notebooks" / "00_start_here.ipynb").write_text('{"typed": "by the learner"}')
    (image / "workshop").mkdir()
    (image / "workshop" / "00_start_here.ipynb").write_text('{"copy": "cleared"}')
    run()                                                                 # a second start: nothing is overwritten
    assert "typed" in (home / "notebooks" / "00_start_here.ipynb").read_text()
    shutil.rmtree(home / "notebooks")
    run()                                                                 # with workshop/ in the image: the copies
    assert "cleared" in (home / "notebooks" / "00_start_here.ipynb").read_text()


def test_hub_table_names_the_first_hand_failure_and_the_shared_run_all():
    failed = _run(25, 500.0, ok=False)
    failed.update(notebook_s={"median": None, "max": None}, update_ms={"median": None, "p90": None, "n": 0},
                  errors=["l1: another learner failed before the slider moves", "l2, starting a kernel: timed out",
                          "l3: another learner failed before the slider moves"])
    text = rd.hub_table(hub_json(max_k=5, runs=[_run(1, 300.0), _run(5, 340.0), failed]))
    row = next(line for line in text.splitlines() if line.startswith("| 25 |"))
    assert "— / —" in row and "l2, starting a kernel: timed out; 2 other learner(s) stopped" in row
    assert "l1:" not in row  # the consequence is counted, not listed
    # the Run All at the largest good K against K=1: 15 s vs 11 s here (synthetic medians 10 + k)
    assert "notebook 03 took 15 s each at K = 5, against 11 s at K = 1" in text
    assert "took" not in rd.hub_table(hub_json(max_k=1, runs=[_run(1, 300.0)]))  # nothing to compare with
