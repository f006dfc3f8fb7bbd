"""benchmarks/_timing.py, the one timing loop of the bench scripts: calls in turn, round after round; median, spread.

benchmarks/ is not under pytest's --doctest-modules (pyproject.toml's testpaths), so its one example runs here.
"""
import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_bench_timing", ROOT / "benchmarks" / "_timing.py")
timing = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = timing                   # a dataclass looks its module up there
_spec.loader.exec_module(timing)


def test_calls_take_turns_after_the_warm_up():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    out = timing.interleaved(fns, rounds=3, warmup=2, inner=2)
    assert calls[:6] == list("aabbcc")                         # warm-up: each callable on its own
    assert calls[6:] == list("aabbcc") * 3                     # then one round of each in turn (inner=2 calls)
    assert list(out) == list("abc") and all(len(t.samples) == 3 for t in out.values())


def test_median_spread_and_paired_ratio():
    a = timing.Timing((5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0))
    b = timing.Timing(tuple(x / 2 for x in a.samples))
    assert (a.median, a.min, a.max) == (6.0, 1.0, 11.0)
    assert a.percentile(0.1) == 2.0 and a.percentile(0.9) == 10.0 and a.spread == 8.0
    assert timing.paired_ratio(a, b) == 2.0
    assert len(timing.time_one(lambda: None, 4).samples) == 4


@pytest.mark.parametrize("call,match", [
    (lambda t: t.interleaved({}, 3), "at least one"),
    (lambda t: t.interleaved({"a": lambda: None}, 0), "rounds must be an int >= 1"),
    (lambda t: t.interleaved({"a": lambda: None}, 3, inner=0), "inner must be an int >= 1"),
    (lambda t: t.interleaved({"a": lambda: None}, 3, warmup=-1), "warmup must be an int >= 0"),
    (lambda t: t.paired_ratio(t.Timing((1.0,)), t.Timing((1.0, 2.0))), "same rounds"),
    (lambda t: t.Timing((1.0,)).percentile(1.5), "between 0 and 1"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call(timing)


def test_docstring_example():
    result = doctest.testmod(timing)
    assert result.attempted >= 1 and result.failed == 0


def test_every_bench_script_that_times_side_by_side_uses_it():
    for name in ("formats", "precision", "fp8", "scaling", "diagnose"):
        text = (ROOT / "benchmarks" / f"bench_{name}.py").read_text()
        assert "from _timing import" in text and "def interleaved" not in text, name
