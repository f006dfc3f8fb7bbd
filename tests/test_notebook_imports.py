"""The notebooks import only from faces (docs/architecture.md, "Faces"), English and Chinese alike.

A face is a package's ``__init__`` (``ampkit.widgets``, ``ampkit.lessons``, ...) or a top-level single module
(``ampkit.models``, ...). A notebook's code cells (``ast``, magic lines left out) may not import from a module inside
a package (``from ampkit.widgets.style import show``, ``import ampkit.fp8.compare``), and every name a cell imports
from a face must be in that face's ``__all__``: so one import line tells a learner where to look. The faces
themselves are checked in tests/test_public_api.py.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb")) + sorted(ROOT.glob("notebooks/zh_CN/[0-9][0-9]_*.ipynb"))


def _is_package(module: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), "__path__")
    except ImportError:
        return False


def import_problems(source: str) -> list[str]:
    """What one code cell's imports do against the faces rule (an empty list: nothing)."""
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    out = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "ampkit" and len(parts) > 2:
                    out.append(f"line {node.lineno}: import {a.name} (import from the face {'.'.join(parts[:2])})")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "ampkit":
                continue
            # the face: the module imported from, unless it lies inside a package (then that package is the face)
            face = next((".".join(parts[:i]) for i in range(2, len(parts)) if _is_package(".".join(parts[:i]))), None)
            if face is not None and face != "ampkit":
                out.append(f"line {node.lineno}: from {node.module} import ... (import from the face {face})")
                continue
            listed = set(getattr(importlib.import_module(node.module), "__all__", ()))
            out += [f"line {node.lineno}: {a.name} is not in {node.module}.__all__" for a in node.names
                    if a.name not in listed]
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_the_notebook_imports_only_from_faces(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    problems = [f"cell {i}: {p}" for i, c in enumerate(cells) for p in import_problems(c.source)]
    assert problems == [], "\n".join(problems)


def test_there_are_both_editions():
    assert len(NOTEBOOKS) >= 18 and any("zh_CN" in str(p) for p in NOTEBOOKS)


def test_the_checker_catches_planted_imports():
    cell = ("%matplotlib inline\n"
            "import ampkit\n"
            "from ampkit import formats\n"
            "from ampkit.widgets.style import show\n"            # inside the package: the face is ampkit.widgets
            "import ampkit.fp8.compare\n"                        # the same, as an import
            "from ampkit.precision import nearest_threshold, Nope\n"   # Nope: on no face
            "from ampkit.fp8 import RECIPES\n"                   # the module's name, not the face's
            "from ampkit.models import build_model\n")           # a single module is its own face
    problems = import_problems(cell)
    assert problems == [
        "line 4: from ampkit.widgets.style import ... (import from the face ampkit.widgets)",
        "line 5: import ampkit.fp8.compare (import from the face ampkit.fp8)",
        "line 6: Nope is not in ampkit.precision.__all__",
        "line 7: RECIPES is not in ampkit.fp8.__all__",
    ], problems
    assert import_problems("from ampkit.lessons.transformers_in_16_bits import RECIPES\n") == [
        "line 1: from ampkit.lessons.transformers_in_16_bits import ... (import from the face ampkit.lessons)"]
    assert import_problems("from ampkit.widgets import show, RangeMap\nfrom ampkit import doctor\n") == []
