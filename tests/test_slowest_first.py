"""`make test` hands whole files to its workers slowest first (conftest.slowest_first, tests/slowest_first.txt)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_ampkit_root_conftest", ROOT / "conftest.py")
assert _spec and _spec.loader
_root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root_conftest)
slowest_first = _root_conftest.slowest_first


class _Item:
    def __init__(self, nodeid: str):
        self.nodeid = nodeid

    def __repr__(self) -> str:
        return self.nodeid


def test_files_move_whole_in_the_listed_order(tmp_path):
    order = tmp_path / "order.txt"
    order.write_text("# a comment\ntests/test_slow.py\nnotebooks/03.ipynb\n")
    items = [_Item(n) for n in ("tests/test_a.py::t1", "notebooks/03.ipynb::Cell 0", "tests/test_slow.py::x",
                                "tests/test_a.py::t2", "notebooks/03.ipynb::Cell 1", "tests/test_b.py::t",
                                "tests/test_slow.py::y")]
    got = [i.nodeid for i in slowest_first(items, order)]
    assert got == ["tests/test_slow.py::x", "tests/test_slow.py::y", "notebooks/03.ipynb::Cell 0",
                   "notebooks/03.ipynb::Cell 1", "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_b.py::t"]


def test_no_order_file_keeps_the_collection_order(tmp_path):
    items = [_Item("tests/test_b.py::t"), _Item("tests/test_a.py::t")]
    assert slowest_first(items, tmp_path / "missing.txt") == items


def test_the_committed_order_names_files_that_exist():
    """A renamed or removed test file must leave the list too (else the order silently drifts from the suite)."""
    listed = [ln.strip() for ln in (ROOT / "tests" / "slowest_first.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    assert len(listed) > 50
    missing = [n for n in listed if not (ROOT / n).is_file()]
    assert not missing, f"tests/slowest_first.txt lists files that are gone: {missing} (bench_make_test.py --order)"
    assert len(set(listed)) == len(listed)


def test_make_test_keeps_the_order():
    makefile = (ROOT / "Makefile").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in makefile
