"""The READMEs' table of hosts `make test` has passed on is generated from the measured runs, in each README's
language (benchmarks/bench_make_test.py)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("_bench_make_test", ROOT / "benchmarks" / "bench_make_test.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readmes_table_is_the_measured_runs():
    bench = _bench()
    runs = json.loads((ROOT / "benchmarks" / "results" / "make_test.json").read_text())
    assert runs and all(r["how"] in bench.WORDS["en"]["how"] for r in runs)
    assert any(r["passed"] and r["cpu_flags"] for r in runs), "no passing run with its CPU flags recorded"
    assert bench.write_readmes(check=True) == [], "run: python benchmarks/bench_make_test.py --readme"


def test_table_rows_and_languages(tmp_path):
    bench = _bench()
    run = {"date": "2026-12-08 00:00 UTC", "commit": "abc", "host": {"cpu": "X CPU", "cores": 2},
           "cpu_flags": [], "busy_processes_beside": 2, "install_s": 120.4, "make_test_s": 612.6, "passed": False,
           "how": "fresh-clone"}
    en, zh = bench.hosts_table([run]), bench.hosts_table([run], "zh_CN")
    assert en.splitlines()[2] == ("| 2026-12-08 00:00 UTC | X CPU | none of them | 2 | 2 | 120 | 613 | failed "
                                  "(a fresh clone) | abc |")
    assert "失败（全新克隆）" in zh and "均没有" in zh and "failed" not in zh
    assert len(en.splitlines()[0].split("|")) == len(en.splitlines()[2].split("|"))
