"""The Chinese notebooks, generated from the English ones and their catalogs (``make translations``).

    zh notebook = [language cell] + for each English cell: the cell with its source replaced by the catalog's
                  translation (an untranslated or stale entry keeps the English: the tests fail on it)
    relative links go one folder further up (the notebook sits in notebooks/zh_CN/)
    a line break between two Chinese characters inside a paragraph is removed (``join_cjk_lines``): a browser
    shows it as a space (Chromium: "来自 MindSpore 的 文档"), so the catalogs may wrap lines as they like

Outputs are not generated: ``make translations`` executes the notebooks whose source changed.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from ampkit._i18ntools.catalogs import LANG, NOTEBOOKS, load, notebook_po
from ampkit._i18ntools.extract import cell_id

__all__ = ["OUT_DIR", "LANGUAGE_CELL_ID", "language_cell", "translated_notebook", "zh_path", "same_source",
           "cjk_line_breaks", "join_cjk_lines"]

OUT_DIR = NOTEBOOKS / LANG
LANGUAGE_CELL_ID = "ampkit-language"
_RELATIVE_LINK = re.compile(r"\]\(\.\./")
#: a Chinese character or a full-width mark (CJK punctuation, full-width forms): no space is written between them
_WIDE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2014\u2026\u201c\u201d\u2018\u2019]")
_MARKUP = "*_~"                                                     # emphasis around the character: not shown
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
#: a line that starts a block of its own (the line break before it is not inside a paragraph)
_BLOCK_START = re.compile(r"^\s*(#{1,6}\s|[-*+]\s|\d+[.)]\s|>|\||```|~~~|\$\$|<|$)")
_NO_JOIN_AFTER = re.compile(r"^\s{0,3}(#{1,6}\s|\|)|(\s\s|\\)$")   # a heading, a table row, a hard line break


def _paragraph_breaks(markdown: str) -> list[int]:
    """Indices i where line i and line i+1 are one paragraph's text and meet Chinese character to Chinese character
    (emphasis marks and the next line's indent aside): where a browser would show a space."""
    lines, found, fenced = markdown.split("\n"), [], False
    for i, (line, nxt) in enumerate(zip(lines, lines[1:])):
        if _FENCE.match(line) or line.count("$$") % 2:   # a code fence or a display formula opens or closes
            fenced = not fenced
        if fenced or _NO_JOIN_AFTER.search(line) or _BLOCK_START.match(nxt):
            continue
        end, start = line.rstrip(_MARKUP), nxt.lstrip(" \t" + _MARKUP)
        if end and start and _WIDE.match(end[-1]) and _WIDE.match(start[0]):
            found.append(i)
    return found


def cjk_line_breaks(markdown: str) -> list[str]:
    r"""The line breaks of ``markdown`` a browser would show as a stray space between two Chinese characters, each as
    ``"…end⏎start…"``.

    >>> cjk_line_breaks("来自 MindSpore 的\n文档。\n\n## 标题\n正文，**加粗**\n  续行")
    [' MindSpore 的⏎文档。', '正文，**加粗**⏎  续行']
    >>> cjk_line_breaks("```\n代码\n注释\n```\n$$x$$\n公式\n之后")
    ['公式⏎之后']
    """
    lines = markdown.split("\n")
    return [f"{lines[i][-12:]}⏎{lines[i + 1][:12]}" for i in _paragraph_breaks(markdown)]


def join_cjk_lines(markdown: str) -> str:
    r"""``markdown`` with each line break of :func:`cjk_line_breaks` removed (and the next line's indent).

    >>> join_cjk_lines("来自 MindSpore 的\n文档。\n- 列表\n  续行，\n  **再续**")
    '来自 MindSpore 的文档。\n- 列表续行，**再续**'
    """
    breaks = set(_paragraph_breaks(markdown))
    out = ""
    for i, line in enumerate(markdown.split("\n")):
        out += line.lstrip(" \t") if i - 1 in breaks else line
        if i not in breaks:
            out += "\n"
    return out[:-1]


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
            text = join_cjk_lines(_relink(text))
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
