"""What a translator translates: the entries of a notebook's catalog and of the package's catalog (``ast`` only).

A notebook gives one entry per markdown cell and one per code cell with prose in it (a comment, or a string with
words in it), keyed by the cell's id (``msgctxt``) and its English text (``msgid``); plus one ``figure`` entry per
text a figure call shows (``ax.set_title("...")``, ``label="..."``), which stays English in the code and is
translated when the figure is drawn. The package gives one entry per ``tr("...")``, ``mark("...")`` and
``Word("...")`` (a data word shown translated, :class:`ampkit.i18n.Word`) and one ``figure`` entry per figure
call's text. An f-string's fields become ``{}`` (a template).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Entry", "FIGURE", "figure_nodes", "notebook_entries", "package_entries", "figure_texts", "has_prose",
           "cell_id"]

FIGURE = "figure"
#: figure calls and the positional argument that is text
_FIGURE_ARG = {"set_title": 0, "set_xlabel": 0, "set_ylabel": 0, "suptitle": 0, "supxlabel": 0, "supylabel": 0,
               "annotate": 0, "set_label": 0, "text": 2, "set_text": 0}
_FIGURE_KW = {"label", "title", "xlabel", "ylabel"}   # also ax.set(xlabel=..., ylabel=...)
_WORDS = re.compile(r"[A-Za-z]{3,}")


@dataclass(frozen=True)
class Entry:
    msgctxt: str | None
    msgid: str
    kind: str          # "markdown", "code", "figure", "message"
    where: str = ""    # a reference for the translator: file and line or cell


def cell_id(cell: dict, index: int) -> str:
    return cell.get("id") or f"cell-{index}"


def _template(node: ast.AST) -> list[str]:
    """The text(s) a string expression shows, with ``{}`` for each f-string field (literal braces doubled)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value.replace("{", "{{").replace("}", "}}")]
    if isinstance(node, ast.JoinedStr):
        out = ""
        for v in node.values:
            if isinstance(v, ast.Constant):
                out += str(v.value).replace("{", "{{").replace("}", "}}")
            else:
                out += "{}"
        return [out]
    if isinstance(node, ast.IfExp):
        return _template(node.body) + _template(node.orelse)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        if left and right:
            return [a + b for a in left for b in right]
    return []


def figure_nodes(tree: ast.AST) -> list[ast.AST]:
    """The string expressions given to figure calls."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        pos = _FIGURE_ARG.get(name)
        if pos is not None and len(node.args) > pos:
            found.append(node.args[pos])
        found += [kw.value for kw in node.keywords if kw.arg in _FIGURE_KW]
    return found


def _useful(text: str) -> bool:
    return bool(_WORDS.search(text.replace("{}", " ")))


def figure_texts(tree: ast.AST) -> list[str]:
    """Every figure text (template) in ``tree`` that has a word in it, in source order, once each."""
    out: list[str] = []
    for node in figure_nodes(tree):
        for t in _template(node):
            if _useful(t) and t not in out:
                out.append(t)
    return out


def _strings_outside_figures(tree: ast.AST) -> list[str]:
    skip = {id(n) for f in figure_nodes(tree) for n in ast.walk(f)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def _comments(source: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def has_prose(source: str) -> bool:
    """A code cell a reader reads: a comment with a word, or a string (outside figure calls) with words and a space."""
    if any(_WORDS.search(c) for c in _comments(source)):
        return True
    try:
        tree = ast.parse(source)
    except SyntaxError:   # IPython magics: translate the whole cell
        return bool(_WORDS.search(source))
    return any(" " in s and _WORDS.search(s) for s in _strings_outside_figures(tree))


def notebook_entries(nb: dict, name: str = "") -> list[Entry]:
    """The catalog entries of an English notebook (``nb`` as JSON), in cell order; figure texts after their cell."""
    entries: list[Entry] = []
    figures: list[str] = []
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell.get("source", ""))
        if not src.strip():
            continue
        where = f"{name} cell {i}"
        if cell["cell_type"] == "markdown":
            entries.append(Entry(cell_id(cell, i), src, "markdown", where))
        elif cell["cell_type"] == "code":
            if has_prose(src):
                entries.append(Entry(cell_id(cell, i), src, "code", where))
            try:
                texts = figure_texts(ast.parse(src))
            except SyntaxError:
                texts = []
            for t in texts:
                if t not in figures:
                    figures.append(t)
                    entries.append(Entry(FIGURE, t, "figure", where))
    return entries


def _call_name(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def package_entries(root: Path, skip: tuple[str, ...] = ("_i18ntools", "classroom")) -> tuple[list[Entry], list[str]]:
    """``tr``/``mark`` messages and figure texts of every module under ``root`` (the ``ampkit`` folder), and the
    problems found (a ``tr`` whose argument is not a literal string cannot be translated)."""
    entries: list[Entry] = []
    seen: set[tuple[str | None, str]] = set()
    problems: list[str] = []

    def add(ctx, msgid, kind, where):
        if (ctx, msgid) not in seen:
            seen.add((ctx, msgid))
            entries.append(Entry(ctx, msgid, kind, where))

    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if any(part in skip for part in rel.parts):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in ("tr", "mark", "Word") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    add(None, arg.value, "message", f"{rel}:{node.lineno}")
                elif not isinstance(arg, (ast.Name, ast.Attribute, ast.Subscript)):
                    problems.append(f"{rel}:{node.lineno}: {_call_name(node)}() needs a literal string "
                                    f"(write tr('... {{x}}', x=x), not an f-string)")
        for text in figure_texts(tree):
            add(FIGURE, text, "figure", str(rel))
    return entries, problems
