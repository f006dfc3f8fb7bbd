"""The gettext catalogs on disk (read and written with ``polib``): update from the English, compile, find.

``update`` keeps every translation whose English is unchanged. A cell whose English changed keeps its old
translation marked ``fuzzy`` (stale), with the old English as ``#| msgid`` so that the translator sees what
changed; a message or figure text that changed is matched to the closest one that disappeared (fuzzy too). New
entries are empty; entries whose English is gone are dropped.
"""
from __future__ import annotations

import ast
import difflib
import json
import os
import string
from collections.abc import Set
from pathlib import Path

import polib

from ampkit._i18ntools.extract import FIGURE, Entry, notebook_entries, package_entries
from ampkit._kit import ROOT

__all__ = ["ROOT", "LANG", "NOTEBOOKS", "PO_DIR", "PACKAGE_PO", "PACKAGE_MO", "notebook_po", "update", "compile_mo",
           "english_notebooks", "load"]

LANG = "zh_CN"
NOTEBOOKS = ROOT / "notebooks"
PO_DIR = ROOT / "translations" / LANG
PACKAGE_PO = ROOT / "ampkit" / "locale" / LANG / "LC_MESSAGES" / "ampkit.po"
PACKAGE_MO = PACKAGE_PO.with_suffix(".mo")
_HEADER = {"Project-Id-Version": "ampkit", "Language": LANG, "MIME-Version": "1.0",
           "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit",
           "Plural-Forms": "nplurals=1; plural=0;"}


def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def notebook_po(nb_path: Path) -> Path:
    return PO_DIR / (nb_path.stem + ".po")


def load(path: Path) -> polib.POFile:
    if path.exists():
        return polib.pofile(str(path), wrapwidth=0)
    po = polib.POFile(wrapwidth=0)
    po.metadata = dict(_HEADER)
    return po


BY_HAND = "by hand:"


def code_literals(nb: dict) -> set[str]:
    """Every string literal of a notebook's code cells (where a figure text added by hand must come from)."""
    found = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            try:
                tree = ast.parse("".join(cell.get("source", "")))
            except SyntaxError:
                continue
            found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


def kept_by_hand(e: polib.POEntry, literals: Set[str]) -> bool:
    """A figure entry the extractor cannot see (text a figure gets through a variable or a dict key), added by a
    translator with the translator comment ``by hand: <why>``: kept while its English is a literal of the code."""
    if e.msgctxt != FIGURE or not (e.tcomment or "").startswith(BY_HAND):
        return False
    if e.msgid in literals:
        return True
    try:   # a template ("Measured ({} runs)") from an f-string: each of its literal parts is in the code
        parts = [lit for lit, _, _, _ in string.Formatter().parse(e.msgid) if lit]
    except ValueError:
        return False
    return "{}" in e.msgid and all(any(p in lit for lit in literals) for p in parts)


def _merge(po: polib.POFile, wanted: list[Entry], title: str, literals: Set[str] = frozenset()) -> polib.POFile:
    old = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}
    by_cell = {e.msgctxt: e for e in old.values() if e.msgctxt not in (None, FIGURE)}
    wanted_keys = {(w.msgctxt, w.msgid) for w in wanted}
    gone = [e for k, e in old.items() if k not in wanted_keys and e.msgstr]
    out = polib.POFile(wrapwidth=0)
    out.metadata = {**_HEADER, **{k: v for k, v in po.metadata.items() if k not in _HEADER}}
    out.header = title
    for w in wanted:
        e = old.get((w.msgctxt, w.msgid))
        if e is None:
            e = polib.POEntry(msgctxt=w.msgctxt, msgid=w.msgid, msgstr="")
            prev = by_cell.get(w.msgctxt) if w.msgctxt not in (None, FIGURE) else None
            if prev is None and w.kind in ("message", "figure") and gone:
                close = difflib.get_close_matches(w.msgid, [g.msgid for g in gone], n=1, cutoff=0.75)
                prev = next((g for g in gone if close and g.msgid == close[0] and g.msgctxt == w.msgctxt), None)
            if prev is not None and prev.msgstr:
                e.msgstr, e.previous_msgid, e.flags = prev.msgstr, prev.msgid, ["fuzzy"]
                e.tcomment = prev.tcomment
        e.occurrences = []
        e.comment = f"{w.kind}: {w.where}" if w.where else w.kind
        if w.kind == "markdown":
            e.flags = [f for f in e.flags if f != "python-format"]
        out.append(e)
    for e in old.values():
        if (e.msgctxt, e.msgid) not in wanted_keys and kept_by_hand(e, literals):
            out.append(e)
    return out


def update(only: tuple[str, ...] = ()) -> list[Path]:
    """Bring every catalog in step with the English sources; return the catalogs written.

    ``only`` (notebook numbers such as ``"07"``, or ``"ampkit"`` for the package's catalog) limits it to those."""
    written = []
    PO_DIR.mkdir(parents=True, exist_ok=True)
    for nb_path in english_notebooks():
        if only and not any(nb_path.name.startswith(n) for n in only):
            continue
        nb = json.loads(nb_path.read_text())
        path = notebook_po(nb_path)
        po = _merge(load(path), notebook_entries(nb, nb_path.name), literals=code_literals(nb), title=
                    f"Simplified Chinese for notebooks/{nb_path.name} (generated: notebooks/{LANG}/{nb_path.name}).\n"
                    "msgctxt is the cell's id; 'figure' entries are figure text (kept English in the code).")
        written.append(_save(po, path))
    if only and "ampkit" not in only:
        return written
    entries, problems = package_entries(ROOT / "ampkit")
    if problems:
        raise SystemExit("\n".join(problems))
    PACKAGE_PO.parent.mkdir(parents=True, exist_ok=True)
    po = _merge(load(PACKAGE_PO), entries, "Simplified Chinese for the ampkit package's messages and figure text.")
    written.append(_save(po, PACKAGE_PO))
    return written


def _save(po: polib.POFile, path: Path) -> Path:
    text = str(po)
    if not path.exists() or path.read_text() != text + "\n":
        path.write_text(text + "\n")
    return path


def compiled_entries() -> tuple[polib.POFile, list[str]]:
    """One catalog for the package's runtime: its own messages plus every notebook's figure text (translated,
    not stale); and the conflicts (one English figure text translated two ways)."""
    out = polib.POFile(wrapwidth=0)
    out.metadata = dict(_HEADER)
    seen: dict[tuple[str | None, str], str] = {}
    conflicts = []
    sources = [PACKAGE_PO] + [notebook_po(p) for p in english_notebooks()]
    for path in sources:
        if not path.exists():
            continue
        for e in load(path):
            if e.obsolete or "fuzzy" in e.flags or not e.msgstr:
                continue
            if path != PACKAGE_PO and e.msgctxt != FIGURE:
                continue   # a notebook's cells are not runtime messages
            key = (e.msgctxt, e.msgid)
            if key in seen:
                if seen[key] != e.msgstr:
                    conflicts.append(f"{path.name}: {e.msgid!r} is {e.msgstr!r} here, {seen[key]!r} elsewhere")
                continue
            seen[key] = e.msgstr
            out.append(polib.POEntry(msgctxt=e.msgctxt, msgid=e.msgid, msgstr=e.msgstr))
    return out, conflicts


def compile_mo(path: Path = PACKAGE_MO) -> Path:
    """Write the runtime catalog (atomically: a kernel reading it meanwhile sees the old or the new one)."""
    po, _ = compiled_entries()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    po.save_as_mofile(str(tmp))
    os.replace(tmp, path)
    return path
