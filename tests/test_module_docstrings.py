"""Every engine module's docstring names the notebook that teaches it, and the packages carry docstring examples.

One parametrised test for the rule "a module's docstring names its notebook" (docs in ../shared/design.md). The
examples themselves run once, under pytest's ``--doctest-modules`` (pyproject.toml collects ``ampkit/``); here we
only count them, so that a package whose examples were deleted cannot pass by having none to run.
"""
from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ampkit"
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Each engine package (every public module in it) and each top-level module, with the notebook that teaches it.
PACKAGE_NOTEBOOK = {"formats": "01_fp16_range", "precision": "02_autocast_and_levels", "scaling": "03_loss_scaling",
                    "sinking": "04_data_sinking", "diagnose": "05_amp_in_practice", "fp8": "06_fp8_scaling"}
MODULE_NOTEBOOK = {"device": "00_start_here", "doctor": "00_start_here", "hardware": "00_start_here",
                   "data": "02_autocast_and_levels", "models": "02_autocast_and_levels",
                   "train": "02_autocast_and_levels", "timeline": "04_data_sinking"}
#: modules of a package taught by another notebook than the package's: FP4 (issue #40), notebook 10
MODULE_IN_PACKAGE_NOTEBOOK = {"formats/e2m1.py": "10_fp4", "fp8/nvfp4.py": "10_fp4", "fp8/hadamard.py": "10_fp4",
                              "fp8/stochastic.py": "10_fp4", "fp8/fp4_linear.py": "10_fp4", "lessons/fp4.py": "10_fp4"}
# Docstring examples that must exist in each package (run by --doctest-modules, counted here).
MIN_EXAMPLES = {"ampkit.formats": 15, "ampkit.scaling": 15, "ampkit.widgets.formats": 3,
                **{f"ampkit.scaling.{m}": 1 for m in ("rules", "replays", "legacy", "presets", "framework_rules",
                                                      "defaults")},
                "ampkit.widgets.range_map": 2, "ampkit.widgets.scaling": 4}


def _cases() -> list[tuple[str, str]]:
    cases = [(f"{name}.py", notebook) for name, notebook in MODULE_NOTEBOOK.items()]
    for package, notebook in PACKAGE_NOTEBOOK.items():
        cases += [(f"{package}/{p.name}", MODULE_IN_PACKAGE_NOTEBOOK.get(f"{package}/{p.name}", notebook))
                  for p in sorted((PACKAGE / package).glob("*.py"))
                  if not p.name.startswith("_") or p.name == "__init__.py"]
    lessons = PACKAGE / "lessons"           # one module per notebook: it names one of them (any)
    cases += [(f"lessons/{p.name}", MODULE_IN_PACKAGE_NOTEBOOK.get(f"lessons/{p.name}", ""))
              for p in sorted(lessons.glob("*.py")) if not p.name.startswith("_")]
    return cases


@pytest.mark.parametrize("path,notebook", _cases())
def test_module_docstring_names_its_notebook(path, notebook):
    doc = ast.get_docstring(ast.parse((PACKAGE / path).read_text())) or ""
    if notebook:
        assert notebook in doc, f"ampkit/{path}: its docstring should name {notebook}"
    else:
        assert any(nb in doc for nb in NOTEBOOKS), f"ampkit/{path}: its docstring should name its notebook"


def test_every_package_of_the_table_is_there():
    assert all((PACKAGE / package / "__init__.py").exists() for package in PACKAGE_NOTEBOOK)
    assert set(PACKAGE_NOTEBOOK.values()) | set(MODULE_NOTEBOOK.values()) <= set(NOTEBOOKS)


@pytest.mark.parametrize("package,least", MIN_EXAMPLES.items())
def test_packages_carry_docstring_examples(package, least):
    module = importlib.import_module(package)
    names = [package]
    if hasattr(module, "__path__"):
        names += [f"{package}.{p.stem}" for p in sorted(Path(module.__path__[0]).glob("*.py")) if p.stem != "__init__"]
    finder = doctest.DocTestFinder()
    found = sum(len(t.examples) for name in names for t in finder.find(importlib.import_module(name)))
    assert found >= least, f"{package}: {found} docstring examples, expected at least {least}"
