"""Every committed notebook is numbered, titled, executed in order, error-free, private-path-free, small."""
import json
from pathlib import Path

import pytest

from ampkit._nbstatic import static_view_problems
from ampkit._nbtools import hygiene_problems

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "zh_CN").glob("*.ipynb"))


def test_there_are_notebooks():
    assert any(p.name == "00_start_here.ipynb" for p in NOTEBOOKS)


#: notebooks whose exercises still hold their hints and solution code in their cells (the layout before
#: ``ampkit.exercises.exercises``, issue #39 item 3): expected to fail until converted, strictly (a converted one
#: that passes fails the run until it is taken off this list).
NOT_CONVERTED: set[str] = set()


def _marked(path: Path):
    if path.stem in NOT_CONVERTED:
        return pytest.param(path, marks=pytest.mark.xfail(strict=True, reason="exercises not yet in ampkit/lessons"))
    return path


@pytest.mark.parametrize("path", [_marked(p) for p in NOTEBOOKS], ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_is_clean(path):
    assert hygiene_problems(path, ROOT) == []


EXECUTED = {"cpu": "AMD EPYC", "torch": "2.13.0+cpu", "python": "3.11.7"}


def _nb(cells, **meta):
    meta.setdefault("ampkit", {"executed": EXECUTED})
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def _code(n, outputs=()):
    return {"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": list(outputs), "source": "x"}


def _exercises(first: int = 1, n: int = 3, hidden: bool = True, tagged: bool = True):
    """n exercises, each a question, an answer cell, the explanation in a closed <details> and a collapsed, tagged
    solution cell that computes its answer."""
    cells = []
    for k in range(n):
        meta = {"tags": ["solution"] if tagged else [], **({"jupyter": {"source_hidden": True}} if hidden else {})}
        why = (f'<details class="ampkit-solution"><summary><b>Exercise {k + 1}</b> — solution (click to reveal)'
               "</summary>\n\nBecause.\n\n</details>")
        cells += [{"cell_type": "markdown", "metadata": {}, "source": f"**Exercise {k + 1}.** Predict x."},
                  {**_code(first + 2 * k), "source": f'answer_{k + 1} = ...\nex.check({k + 1}, answer_{k + 1});'},
                  {"cell_type": "markdown", "metadata": {}, "source": why},
                  {**_code(first + 2 * k + 1), "metadata": meta,
                   "source": f"ex.solution({k + 1})"}]
    return cells


def test_hygiene_catches_each_problem(tmp_path):
    title = {"cell_type": "markdown", "metadata": {}, "source": "# T"}
    good = tmp_path / "01_good.ipynb"
    good.write_text(json.dumps(_nb([title, _code(1), _code(2), *_exercises(3)])))
    assert hygiene_problems(good) == []

    bad_name = tmp_path / "Good.ipynb"
    bad_name.write_text(good.read_text())
    assert any("name" in p for p in hygiene_problems(bad_name))

    cases = {
        "title": _nb([_code(1)]),
        "top to bottom": _nb([title, _code(2), _code(1)]),
        "widget state": _nb([title, _code(1)], widgets={"application/vnd.jupyter.widget-state+json": {"state": {
            "m1": {"model_module": "@jupyter-widgets/controls", "model_name": "IntSliderModel", "state": {}}}}}),
        "error output": _nb([title, _code(1, [{"output_type": "error", "ename": "E", "evalue": "v",
                                               "traceback": []}])]),
        "private path": _nb([title, _code(1, [{"output_type": "stream", "name": "stdout", "text": "/home/alice/x"}])]),
        "metadata.ampkit.executed": _nb([title, _code(1)], ampkit={"language": "zh_CN"}),
    }
    for i, (what, nb) in enumerate(cases.items()):
        p = tmp_path / f"0{i}_case.ipynb"
        p.write_text(json.dumps(nb))
        assert any(what in prob for prob in hygiene_problems(p)), what

    big = tmp_path / "09_big.ipynb"
    huge = {"output_type": "stream", "name": "stdout", "text": "x" * 1_100_000}
    big.write_text(json.dumps(_nb([title, _code(1, [huge])])))
    assert any("bytes" in p for p in hygiene_problems(big))


def test_hygiene_checks_exercises_and_hidden_solutions(tmp_path):
    title = {"cell_type": "markdown", "metadata": {}, "source": "# T"}
    cases = {
        "at least 3": _nb([title, *_exercises(1, n=2)]),
        "not collapsed": _nb([title, *_exercises(1, hidden=False)]),
        "without the 'solution' tag": _nb([title, *_exercises(1, tagged=False)]),
        "3 exercises": _nb([title, *_exercises(1)[:-1]]),  # the last solution cell missing
        "not 'ex.solution(N)'": _nb([title, *[{**c, "source": c["source"].replace(
            'ex.solution(1)', 'ex.solution(1)  # 256, because 256² > 65504')} for c in _exercises(1)]]),
    }
    for i, (what, nb) in enumerate(cases.items()):
        p = tmp_path / f"0{i}_case.ipynb"
        p.write_text(json.dumps(nb))
        assert any(what in prob for prob in hygiene_problems(p)), (what, hygiene_problems(p))


def _planted(cells, k: int, **change) -> list[dict]:
    return [({**c, **change} if i == k else c) for i, c in enumerate(cells)]


SECRETS = ("2**16 = 65536 is already above it", "k = math.floor(math.log2(fp16.max)) + 20")


def _shown(text: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "<HTML>", "text/html": text}}


def test_static_view_hides_answers_and_has_no_tex(tmp_path):
    """What GitHub, nbviewer or an HTML export would show by accident (``ampkit._nbstatic``, rendering every source
    and output with ``source_hidden`` ignored and closed <details> left out): each planted fault is caught, and the
    good layout passes. ``SECRETS`` stand for an exercise module's hints and solution lines."""
    title = {"cell_type": "markdown", "metadata": {}, "source": "# T"}
    ex = _exercises(1)
    assert static_view_problems([title, *ex], SECRETS) == []
    false_out = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                 "data": {"text/plain": "False"}}
    setup = {**_code(1), "metadata": {"jupyter": {"source_hidden": True}}}
    cases = {
        "not 'ex.solution(N)'": _planted(ex, 3, source='with solution("Exercise 1"):\n    k = 35'),
        "with solution(...)": _planted(ex, 3, source='with solution("Exercise 1"):\n    k = 35'),
        "no <details": _planted(ex, 2, source="The answer is 256 because 256² > 65504."),
        "bare True/False": _planted(ex, 1, outputs=[false_out]),
        "check(..., hint=...)": _planted(ex, 1, source='answer = ...\ncheck("exercise 1", answer, e, hint="16");'),
        "hint_1 = ...": [{**setup, "source": 'hint_1 = "fp16 overflows above 65504"'}, *ex],
        "expected_4 = ...": [{**setup, "source": "expected_4 = math.sqrt(math.sqrt(64))"}, *ex],
        # the package's hint, printed in plain view (an answered check left in a stored output, or a hint in prose)
        "plain view in a static view: '2**16": _planted(ex, 1, outputs=[{
            "output_type": "stream", "name": "stdout", "text": "❌ no. Hint: 2**16 = 65536 is already above it"}]),
        "plain view in a static view: 'k = math": _planted(ex, 3, outputs=[_shown(
            "<details open><summary>Exercise 1</summary><pre>k = math.floor(math.log2(fp16.max)) + 20</pre>"
            "</details>")]),
        "TeX math": [{"cell_type": "markdown", "metadata": {}, "source": "fp16's gap is $2^{-10}$ here."}, *ex],
    }
    for what, cells in cases.items():
        found = static_view_problems([title, *cells], SECRETS)
        assert any(what in prob for prob in found), (what, found)
    # a solution shown inside a closed <details> (ex.solution's output), code spans and dollar amounts are fine
    closed = _planted(ex, 3, outputs=[_shown(
        "<details class='ampkit-solution'><summary>Exercise 1</summary><pre>k = math.floor(math.log2(fp16.max)) + 20"
        "</pre></details>")])
    fine = [{"cell_type": "markdown", "metadata": {}, "source": "`echo $HOME` and `$x$` in code; it costs $5 or $6."},
            *closed]
    assert static_view_problems([title, *fine], SECRETS) == []


def test_the_static_view_finds_every_real_hint_in_plain_view():
    """The secrets by default are every exercise module's hints (both languages) and solution lines: each one
    planted in a markdown cell is found."""
    from ampkit.exercises import exercise_modules, revealing_texts

    texts = [t for m in exercise_modules() for t in revealing_texts(m)]
    assert texts
    for t in texts:
        assert static_view_problems([{"cell_type": "markdown", "metadata": {}, "source": t}]), t
