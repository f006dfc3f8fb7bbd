"""``python -m ampkit._i18ntools update [NN... ampkit] | check [PO...] | build [NN...]`` (see the package docstring)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ampkit._i18ntools.catalogs import PACKAGE_PO, compile_mo, compiled_entries, english_notebooks, notebook_po, update
from ampkit._i18ntools.checks import catalog_problems
from ampkit._i18ntools.generate import OUT_DIR, same_source, translated_notebook, zh_path


def _check(paths: list[str]) -> int:
    pos = [Path(p) for p in paths] or [notebook_po(p) for p in english_notebooks()] + [PACKAGE_PO]
    problems = [p for path in pos for p in catalog_problems(path)]
    problems += compiled_entries()[1]
    for p in problems:
        print(p)
    print(f"{len(problems)} problems in {len(pos)} catalogs")
    return 1 if problems else 0


def _build(args: list[str]) -> int:
    from ampkit._nbtools import execute, hygiene_problems

    force = "--force" in args
    only = [a for a in args if a != "--force"]
    compile_mo()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    status = 0
    for en in english_notebooks():
        if only and not any(en.name.startswith(n) for n in only):
            continue
        out = zh_path(en)
        new = translated_notebook(en)
        if out.exists() and same_source(json.loads(out.read_text()), new) and not force:
            print(f"{out.relative_to(OUT_DIR.parent.parent)}: unchanged")
            continue
        out.write_text(json.dumps(new, ensure_ascii=False, indent=1) + "\n")
        try:
            seconds = execute(out)
        except Exception as err:   # a failing cell: say which notebook, go on with the others
            print(f"{out.relative_to(OUT_DIR.parent.parent)}: FAILED: {type(err).__name__}: {str(err)[-400:]}")
            status = 1
            continue
        problems = hygiene_problems(out, OUT_DIR.parent.parent)
        print(f"{out.relative_to(OUT_DIR.parent.parent)}: executed in {seconds:.1f} s"
              + (f"; PROBLEMS: {problems}" if problems else ""))
        status |= bool(problems)
    return status


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("update", "check", "build"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "update":
        for path in update(tuple(argv[1:])):
            print(f"updated {path}")
        return 0
    if argv[0] == "check":
        return _check(argv[1:])
    return _build(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
