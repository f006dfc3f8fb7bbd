"""The Chinese notebooks, generated from the English ones and their catalogs (``make translations``).

    zh notebook = [language cell] + for each English cell: the cell with its source replaced by the catalog's
                  translation (an untranslated or stale entry keeps the English: the tests fail on it)
    relative links go one folder further up (the notebook sits in notebooks/zh_CN/)

Outputs are not generated: ``make translations`` executes the notebooks whose source changed.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from ampkit._i18ntools.catalogs import LANG, NOTEBOOKS, load, notebook_po
from ampkit._i18ntools.extract import cell_id

__all__ = ["OUT_DIR", "LANGUAGE_CELL_ID", "language_cell", "translated_notebook", "zh_path", "same_source"]

OUT_DIR = NOTEBOOKS / LANG
LANGUAGE_CELL_ID = "ampkit-language"
_RELATIVE_LINK = re.compile(r"\]\(\.\./")


def language_cell() -> dict:
    return {"cell_type": "code", "execution_count": None, "id": LANGUAGE_CELL_ID,
            "metadata": {"tags": [LANGUAGE_CELL_ID]}, "outputs": [],
            "source": ("from ampkit import i18n\n\n"
                       f'i18n.set_language("{LANG}")   # 本 notebook 中 ampkit 显示的文字用简体中文（"en"：英文）')}


def zh_path(en_path: Path) -> Path:
    return OUT_DIR / en_path.name


def _relink(text: str) -> str:
    return _RELATIVE_LINK.sub("](../../", text)


def translated_notebook(en_path: Path) -> dict:
    """The Chinese notebook for ``en_path`` (sources only; outputs empty)."""
    nb = json.loads(en_path.read_text())
    po = load(notebook_po(en_path))
    done = {(e.msgctxt, e.msgid): e.msgstr for e in po if e.msgstr and "fuzzy" not in e.flags and not e.obsolete}
    cells = [language_cell()]
    for i, cell in enumerate(nb["cells"]):
        cell = copy.deepcopy(cell)
        cell["metadata"].pop("execution", None)
        src = "".join(cell.get("source", ""))
        text = done.get((cell_id(cell, i), src), src)
        if cell["cell_type"] == "markdown":
            text = _relink(text)
        cell["source"] = text
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    meta = copy.deepcopy(nb.get("metadata", {}))
    meta.pop("widgets", None)
    meta["language_info"] = meta.get("language_info", {"name": "python"})
    meta["ampkit"] = {"language": LANG, "source": f"../{en_path.name}"}
    return {"cells": cells, "metadata": meta, "nbformat": nb["nbformat"], "nbformat_minor": nb["nbformat_minor"]}


def _source_view(nb: dict) -> list[tuple]:
    return [(c["cell_type"], c.get("id"), "".join(c.get("source", "")),
             json.dumps({k: v for k, v in c.get("metadata", {}).items() if k != "execution"}, sort_keys=True))
            for c in nb["cells"]]


def same_source(a: dict, b: dict) -> bool:
    """Whether two notebooks have the same cells (type, id, source, metadata); outputs are not compared."""
    def kit_meta(nb: dict) -> dict:   # the edition's own metadata; where it was executed is an output, not source
        return {k: v for k, v in (nb.get("metadata", {}).get("ampkit") or {}).items() if k != "executed"}

    same_meta = kit_meta(a) == kit_meta(b)
    return _source_view(a) == _source_view(b) and same_meta
