"""``python -m ampkit._i18ntools update [NN... ampkit] | check [PO...] | build [NN...]`` (see the package docstring)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from ampkit._i18ntools.catalogs import (
    PACKAGE_PO,
    ROOT,
    compile_mo,
    compiled_entries,
    english_notebooks,
    notebook_po,
    update,
)
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


#: The Python of `make frameworks` (MindSpore + PaddlePaddle): it executes a notebook whose English source's
#: ``metadata.ampkit.needs`` names a module this Python cannot import (notebook 09).
FRAMEWORKS_PYTHON = ROOT / ".venv-frameworks" / "bin" / "python"


def _missing_needs(english: Path) -> list[str]:
    needs = json.loads(english.read_text(encoding="utf-8")).get("metadata", {}).get("ampkit", {}).get("needs", [])
    return [name for name in needs if importlib.util.find_spec(name) is None]


def _execute_with(python: Path, path: Path) -> float:
    """``python -m ampkit._nbtools execute path`` (another environment's kernel); the wall time in seconds."""
    t0 = time.perf_counter()
    done = subprocess.run([str(python), "-m", "ampkit._nbtools", "execute", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{python} could not execute it: {(done.stdout + done.stderr)[-400:]}")
    return time.perf_counter() - t0


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
        missing = _missing_needs(en)
        if missing and not FRAMEWORKS_PYTHON.exists():
            print(f"{out.relative_to(OUT_DIR.parent.parent)}: written, NOT executed: it needs {', '.join(missing)}; "
                  "run `make frameworks`, then this command again")
            status = 1
            continue
        try:
            seconds = _execute_with(FRAMEWORKS_PYTHON, out) if missing else execute(out)
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
