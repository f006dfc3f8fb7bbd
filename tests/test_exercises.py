from ampkit.exercises import check


def test_correct_and_wrong_and_unanswered(capsys):
    assert check("a", 65504, 65504)
    assert "✅ a" in capsys.readouterr().out
    assert not check("b", 65000, 65504, hint="largest finite fp16")
    out = capsys.readouterr().out
    assert "❌ b" in out and "largest finite fp16" in out and "65000" in out
    assert not check("c", ..., 1)
    assert "not answered yet" in capsys.readouterr().out
    assert check("d", None, None)  # None is an answer ("no fast dtype here"), not a placeholder
    assert not check("e", None, 1)


def test_tolerances_sets_strings_and_odd_types():
    assert check("t", 0.1 + 1e-12, 0.1, rel_tol=1e-9)
    assert not check("t", 0.11, 0.1, rel_tol=1e-3)
    assert check("s", ["bfloat16", "float32"], {"float32", "bfloat16"})
    assert not check("s", "float32", {"float32"})
    assert check("str", " BF16 ", "bf16")
    assert check("nan", float("nan"), float("nan"))
    assert not check("bool", 1, True)
    import torch
    assert not check("tensor", torch.ones(3), [1, 1, 1])  # ambiguous comparison: a hint, not a traceback
    assert check("dtype", torch.bfloat16, torch.bfloat16)


def test_numpy_numbers_compare_with_tolerance(capsys):
    import numpy as np

    assert check("np", np.float32(0.1), 0.1, rel_tol=1e-6)   # was an exact == (False) before: not int/float
    assert check("np int", np.int64(65504), 65504)
    assert not check("np", np.float32(0.1), 0.1)
    assert check("nan", np.float32("nan"), float("nan"))


def test_solution_prints_outside_a_notebook(capsys):
    from ampkit.exercises import solution

    with solution("Exercise 9", "because `x`"):
        print("42")
    assert capsys.readouterr().out == "Exercise 9 — solution: because `x`\n42\n"


def test_stored_solutions_show_the_kit_s_current_code():
    """Each stored ``ex.solution(N)`` output (both editions) shows the module's solution as it is now: a solution
    changed without re-executing its notebook would show the learner stale code."""
    import html
    import json
    import re
    from pathlib import Path

    from ampkit.exercises import SETS, exercise_module, solution_source

    root = Path(__file__).resolve().parents[1] / "notebooks"
    checked = 0
    for path in sorted(root.glob("*.ipynb")) + sorted((root / "zh_CN").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        calls = [(c, re.fullmatch(r"\w+\.solution\((\d+)\);?", "".join(c["source"]).strip())) for c in cells
                 if c["cell_type"] == "code"]
        for cell, m in calls:
            if not m or path.stem not in SETS:
                continue
            shown = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell["outputs"])
            code = re.search(r"<code class='language-python'>(.*?)</code>", shown, re.S)
            assert code, (path.name, m.group(1))
            assert html.unescape(code.group(1)) == solution_source(exercise_module(path.stem), int(m.group(1))), \
                f"{path.relative_to(root)} exercise {m.group(1)}: stale solution code; re-execute the notebook"
            assert "✅" in shown, (path.name, m.group(1))                # and its agreement with the engine
            checked += 1
    assert checked >= 30


def _module(tmp_path, solution_value):
    """A synthetic exercise module (a file: a solution's source is shown) whose solution returns ``solution_value``."""
    import importlib.util

    path = tmp_path / f"synthetic_{solution_value}.py"
    path.write_text("def expected_1(x):\n    return x * 2\n\n\n"
                    f"def solution_1(x):\n    print('doubled')\n    return {solution_value!r}\n\n\n"
                    "HINT_1 = 'twice x'\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_exercise_set_checks_hints_only_when_wrong_and_asserts_its_solution(capsys, monkeypatch, tmp_path):
    import pytest

    from ampkit.exercises import Exercises, exercises

    ex = Exercises(_module(tmp_path, 6), {"x": 3})
    assert not ex.check(1, ...) and "twice x" not in capsys.readouterr().out      # unanswered: no hint
    assert ex.check(1, 6) and "twice x" not in capsys.readouterr().out            # right: no hint
    assert not ex.check(1, 5) and "twice x" in capsys.readouterr().out            # wrong: the hint
    ex.solution(1)
    out = capsys.readouterr().out
    assert "doubled" in out and "exercise 1 (solution): correct" in out and "def solution_1" not in out
    with pytest.raises(AssertionError, match="the kit's solution gives 7"):      # a solution that disagrees fails
        Exercises(_module(tmp_path, 7), {"x": 3}).solution(1)
    with pytest.raises(TypeError, match=r"exercises\(\.\.\., x=x\)"):             # the state it needs, named
        Exercises(_module(tmp_path, 6), {}).check(1, 6)
    with pytest.raises(ValueError, match="the exercises are 1"):
        ex.check(2, 6)
    with pytest.raises(ValueError, match="03_loss_scaling"):                     # a bad notebook lists the valid ones
        exercises("99_nothing")
    reports = []
    monkeypatch.setenv("AMPKIT_ROOMVIEW_URL", "http://127.0.0.1:1")
    monkeypatch.setattr("ampkit.classroom.report.report_check", lambda *a: reports.append(a))
    ex.check(1, 6)
    assert reports == [("exercise 1", 6, True)]                                    # the room view hears each check
