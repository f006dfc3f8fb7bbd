"""Learner copies for a workshop: ``make workshop`` writes ``workshop/`` with every notebook in ``notebooks/`` (no
notebook of its own) made ready for a room that predicts before it runs:

* every output and execution count cleared, stored widget state and run timings removed;
* every exercise solution hidden: each solution cell (tag ``solution``, or calling ``ex.solution(N)``) gets a
  collapsed source (``{"jupyter": {"source_hidden": true}}``); cells already collapsed (the exercises' set-up cell)
  stay collapsed. With outputs cleared, the solutions' closed ``<details>`` blocks appear only once a cell is run;
* relative links that point outside the notebooks folder (``../docs/reference.md``) rewritten to point at the same
  file from the copy's folder (unchanged for ``workshop/``, a sibling of ``notebooks/``; needed for any other
  ``--out``). Links to other notebooks stay as they are: those are copied alongside.

The copies import the installed kit (``make install``), so they run from any folder with the kit's venv.
``notebooks/`` is only read: the committed notebooks keep their outputs for self-learners and nbval.

Regenerating (``make workshop`` again) replaces the copies: an instructor refreshing before a workshop expects that.
Outputs a test run left in a copy are not work, and are replaced. What is refused is losing a learner's typing: if
any copy's *sources* differ from what was generated (a prediction typed into an exercise cell, a new cell), nothing
is written, the edited copies are named and ``make workshop FORCE=1`` (``--force``) replaces them anyway. Files the
kit did not generate (a learner's own notebook) are never touched.

>>> cell = {"cell_type": "code", "source": "with solution(...):", "metadata": {"tags": ["solution"]},
...         "outputs": [{"output_type": "stream", "name": "stdout", "text": "42"}], "execution_count": 7}
>>> out = learner_copy({"cells": [cell], "metadata": {"widgets": {}}, "nbformat": 4, "nbformat_minor": 5})
>>> out["cells"][0]["outputs"], out["cells"][0]["execution_count"], out["cells"][0]["metadata"]["jupyter"]
([], None, {'source_hidden': True})
>>> rewrite_links("see [the reference](../docs/reference.md#fp16)", "/kit/notebooks", "/kit/room/day1")
'see [the reference](../../docs/reference.md#fp16)'
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from ampkit.classroom.present import LANGUAGES, NOTEBOOKS, ROOT, edition, list_notebooks

__all__ = ["WORKSHOP", "MANIFEST", "learner_copy", "rewrite_links", "is_solution", "source_fingerprint",
           "edited_copies", "write_workshop", "main"]

WORKSHOP = ROOT / "workshop"
MANIFEST = ".ampkit-workshop.json"  # what was generated (name -> fingerprint of the sources), to spot edits
README = "README.md"
# markdown links [text](target) and HTML href="target" / src="target"
_LINK = re.compile(r"(\]\(\s*<?|\b(?:href|src)=[\"'])([^)\"'>\s]+)")
_SOLUTION = re.compile(r"\.solution\(\d+\)|with solution\(")
_EXTERNAL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|#|/)")  # http:, mailto:, data:, #anchor, /absolute


def _text(source) -> str:
    return source if isinstance(source, str) else "".join(source)


def is_solution(cell: dict) -> bool:
    """A cell holding an exercise's solution: tagged ``solution``, or calling ``ex.solution(N)`` (or, in the old
    layout, ``with solution(``)."""
    return cell.get("cell_type") == "code" and ("solution" in cell.get("metadata", {}).get("tags", [])
                                                or bool(_SOLUTION.search(_text(cell.get("source", "")))))


def rewrite_links(text: str, src_dir: str | Path, dest_dir: str | Path) -> str:
    """Relative link targets in ``text`` (written for a notebook in ``src_dir``) re-pointed from ``dest_dir``.

    Targets inside ``src_dir`` (the other notebooks, copied alongside) and absolute or external ones are kept."""
    src_dir, dest_dir = Path(os.path.abspath(src_dir)), Path(os.path.abspath(dest_dir))

    def fix(m: re.Match) -> str:
        target = m.group(2)
        if _EXTERNAL.match(target):
            return m.group(0)
        path, sep, fragment = target.partition("#")
        resolved = Path(os.path.normpath(src_dir / path))
        if resolved == src_dir or src_dir in resolved.parents:
            return m.group(0)
        new = Path(os.path.relpath(resolved, dest_dir)).as_posix()
        return m.group(1) + new + sep + fragment

    return _LINK.sub(fix, text)


def learner_copy(nb: dict, src_dir: str | Path = NOTEBOOKS, dest_dir: str | Path | None = None) -> dict:
    """A learner's copy of notebook ``nb`` (a parsed ``.ipynb``; not modified): outputs, execution counts, stored
    widget state and run timings removed, every solution's source collapsed, links re-pointed from ``dest_dir``."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(f"expected a parsed notebook (a dict with a 'cells' list); got {type(nb).__name__}")
    out = copy.deepcopy(nb)
    out.get("metadata", {}).pop("widgets", None)
    for cell in out["cells"]:
        meta = cell.setdefault("metadata", {})
        meta.pop("execution", None)  # nbclient's run timestamps
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if is_solution(cell):
                meta.setdefault("jupyter", {})["source_hidden"] = True
        elif cell.get("cell_type") == "markdown" and dest_dir is not None:
            cell["source"] = rewrite_links(_text(cell["source"]), src_dir, dest_dir)
    return out


def source_fingerprint(nb: dict) -> str:
    """SHA-256 of what a learner types: each cell's type and source (not outputs, counts or metadata)."""
    parts = [[c.get("cell_type"), _text(c.get("source", ""))] for c in nb.get("cells", [])]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def _read_manifest(dest: Path) -> dict[str, str] | None:
    try:
        return json.loads((dest / MANIFEST).read_text())["notebooks"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def edited_copies(dest: str | Path = WORKSHOP) -> list[str]:
    """Notebooks in ``dest`` whose sources changed since the kit generated them; ``[]`` when there is nothing to
    lose (no folder, an empty one, or unedited copies). A folder with notebooks but no manifest (not made by the kit)
    counts as edited: every ``NN_*.ipynb`` in it is listed."""
    dest = Path(dest)
    if not dest.is_dir():
        return []
    manifest = _read_manifest(dest)
    present = list_notebooks(dest)
    if manifest is None:
        return [p.name for p in present]
    edited = []
    for p in present:
        try:
            fingerprint = source_fingerprint(json.loads(p.read_text()))
        except (OSError, ValueError):
            fingerprint = None
        if manifest.get(p.name) != fingerprint:
            edited.append(p.name)
    return edited


def _readme(src: Path, dest: Path) -> str:
    back = Path(os.path.relpath(src, dest)).as_posix()
    return ("# Workshop copies of the ampkit notebooks\n\n"
            "Generated by `make workshop` (`python -m ampkit.classroom.copies`) from "
            f"[{back}/]({back}/): outputs cleared, exercise solutions collapsed. Predict, then run.\n\n"
            f"The notebooks with their outputs (for reading on your own) stay in `{back}/`. Run these with the kit "
            "installed (`make lab` in the kit's folder installs it).\n\n"
            "Regenerate: `make workshop` (replaces unedited copies); `make workshop FORCE=1` also replaces copies "
            "whose cells were edited. Your own files in this folder are never touched.\n")


def write_workshop(dest: str | Path = WORKSHOP, src: str | Path = NOTEBOOKS, force: bool = False) -> list[Path]:
    """Write the learner copy of every notebook in ``src`` into ``dest`` (created if needed) with a README and the
    manifest; return the notebooks written. Same input, same bytes (idempotent).

    Raises ``FileExistsError`` naming the edited copies when any would be lost (see :func:`edited_copies`), unless
    ``force``. ``dest`` must not be ``src``."""
    src, dest = Path(src), Path(dest)
    notebooks = list_notebooks(src)
    if not notebooks:
        raise ValueError(f"no NN_name.ipynb notebooks in {src}")
    if dest.resolve() == src.resolve():
        raise ValueError(f"the learner copies must go to another folder than the notebooks themselves ({src})")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} exists and is not a folder")
    edited = [] if force else edited_copies(dest)
    if edited:
        raise FileExistsError(f"{dest} has copies edited since they were generated: {', '.join(edited)}. "
                              "Nothing was written. To replace them anyway: make workshop FORCE=1 "
                              "(python -m ampkit.classroom.copies --force)")
    import nbformat  # deferred: writes the notebook JSON exactly as Jupyter does

    dest.mkdir(parents=True, exist_ok=True)
    old = _read_manifest(dest) or {}
    manifest, written = {}, []
    for path in notebooks:
        nb = learner_copy(json.loads(path.read_text()), src, dest)
        target = dest / path.name
        target.write_text(nbformat.writes(nbformat.from_dict(nb)), encoding="utf-8")
        manifest[path.name] = source_fingerprint(nb)
        written.append(target)
    for name in set(old) - set(manifest):  # a notebook the kit no longer has: its unedited copy goes too
        (dest / name).unlink(missing_ok=True)
    (dest / README).write_text(_readme(src, dest), encoding="utf-8")
    (dest / MANIFEST).write_text(json.dumps({"generated_by": "python -m ampkit.classroom.copies",
                                             "notebooks": manifest}, indent=1, sort_keys=True) + "\n")
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.copies",
                                description="Write learner copies of the notebooks: outputs cleared, solutions hidden.")
    p.add_argument("--out", default=str(WORKSHOP), help="folder to write (default: workshop/ next to notebooks/)")
    p.add_argument("--force", action="store_true", help="replace copies even if their cells were edited")
    p.add_argument("--lang", default="en", choices=LANGUAGES,
                   help="zh_CN: copies of the Chinese edition (notebooks/zh_CN/), by default into workshop/zh_CN/")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    src = edition(args.lang)[0]
    out = args.out if args.out != str(WORKSHOP) or args.lang == "en" else str(WORKSHOP / args.lang)
    args.out = out
    try:
        written = write_workshop(out, src=src, force=args.force)
    except (ValueError, TypeError, FileExistsError) as e:
        print(f"workshop: {e}", file=sys.stderr)
        return 2
    shown = Path(os.path.relpath(args.out)) if not os.path.relpath(args.out).startswith("..") else Path(args.out)
    print(f"workshop: {len(written)} learner copies in {shown}/ (outputs cleared, solutions hidden): "
          + ", ".join(p.stem for p in written))
    print(f"  open them: make lab LAB_ROOT={shown}  (or .venv/bin/jupyter notebook --ServerApp.root_dir={shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
