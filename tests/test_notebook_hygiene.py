"""Every committed notebook is numbered, titled, executed in order, error-free, private-path-free, small."""
import json
from pathlib import Path

import pytest

from ampkit._nbtools import hygiene_problems

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "zh_CN").glob("*.ipynb"))


def test_there_are_notebooks():
    assert any(p.name == "00_start_here.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_is_clean(path):
    assert hygiene_problems(path, ROOT) == []


def _nb(cells, **meta):
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def _code(n, outputs=()):
    return {"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": list(outputs), "source": "x"}


def _exercises(first: int = 1, n: int = 3, hidden: bool = True, tagged: bool = True):
    """n exercises, each a question, an answer cell and a collapsed, tagged solution cell."""
    cells = []
    for k in range(n):
        meta = {"tags": ["solution"] if tagged else [], **({"jupyter": {"source_hidden": True}} if hidden else {})}
        cells += [{"cell_type": "markdown", "metadata": {}, "source": f"**Exercise {k + 1}.** Predict x."},
                  {**_code(first + 2 * k), "source": "answer = ..."},
                  {**_code(first + 2 * k + 1), "metadata": meta,
                   "source": f'with solution(\n        "Exercise {k + 1}"):\n    x'}]
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
        "widget state": _nb([title, _code(1)], widgets={"state": {}}),
        "error output": _nb([title, _code(1, [{"output_type": "error", "ename": "E", "evalue": "v",
                                               "traceback": []}])]),
        "private path": _nb([title, _code(1, [{"output_type": "stream", "name": "stdout", "text": "/home/alice/x"}])]),
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
        "gives it away": _nb([title, *[{**c, "source": c["source"].replace("(\n        ", "(")}
                                        for c in _exercises(1)]]),
    }
    for i, (what, nb) in enumerate(cases.items()):
        p = tmp_path / f"0{i}_case.ipynb"
        p.write_text(json.dumps(nb))
        assert any(what in prob for prob in hygiene_problems(p)), (what, hygiene_problems(p))
