"""Every upstream source file a notebook's text cites (a path in backticks, such as
`transformer_engine/pytorch/fp8.py`, that is not a file of this repository) has its row in docs/reference.md, where
the claim is tied to the file at a tag. Notebook 06 once credited the recipe's source with a rule that lives in
`transformer_engine/pytorch/fp8.py`; naming the file is the notebook's half, this test checks the reference's half."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PATH = re.compile(r"`([A-Za-z_][\w.-]*(?:/[\w.-]+)+\.(?:py|pyi|cu|cuh|cpp|cc|h|rst|md|ipynb|yaml|json))`")


def cited_upstream_files(markdown: str, root: Path = ROOT) -> list[str]:
    """The paths in backticks in ``markdown`` that are not files under ``root`` (so: another project's files)."""
    return [p for p in PATH.findall(markdown) if not (root / p).exists()]


def uncited(nb: Path, reference: str) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    found = {p for c in cells if c["cell_type"] == "markdown" for p in cited_upstream_files("".join(c["source"]))}
    return sorted(p for p in found if p not in reference)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_each_cited_upstream_file_has_a_reference_row(nb):
    assert uncited(nb, (ROOT / "docs" / "reference.md").read_text()) == []


def test_the_check_finds_a_file_missing_from_the_reference(tmp_path):
    nb = tmp_path / "06_x.ipynb"
    text = "the rule (`_default_sf_compute` in `transformer_engine/pytorch/fp8.py`); the kit's `ampkit/fp8/mx/rule.py`"
    nb.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [text]}]}))
    assert cited_upstream_files(text) == ["transformer_engine/pytorch/fp8.py"]     # the kit's own file is not upstream
    recipe_only = "| ... | `transformer_engine/common/recipe/__init__.py` |"
    assert uncited(nb, recipe_only) == ["transformer_engine/pytorch/fp8.py"]
    assert uncited(nb, "| ... | `transformer_engine/pytorch/fp8.py` at v0.12 |") == []
