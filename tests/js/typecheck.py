"""Type-check the views' ES modules (``ampkit/widgets/js/*.js``) with TypeScript's ``tsc`` (``make js-check``).

Every file starts with ``// @ts-check``. A view's module is ``kit.js`` followed by ``<view>.js``
(:func:`ampkit.widgets.front.esm`), so its names come from ``kit.js`` without an import: each view is checked as the
browser loads it, the two files joined (in ``<cache>/src``), and every error is reported at its own file and line.
The checker is the ``tsc`` that ``npm ci`` installed from ``tests/js/package-lock.json`` (``make/jscheck.mk``).

    python tests/js/typecheck.py .cache/js      # exit 0: no error; 1: the errors, as file(line,col): message
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "ampkit" / "widgets" / "js"
MARK = "// @ts-check"
COMPILER_OPTIONS = {"allowJs": True, "checkJs": True, "noEmit": True, "target": "ES2022", "module": "ES2022",
                    "lib": ["ES2022", "DOM", "DOM.Iterable"], "types": [], "skipLibCheck": True,
                    "strict": True, "noImplicitAny": False, "noUnusedLocals": True, "noImplicitReturns": True,
                    "noFallthroughCasesInSwitch": True}
# strict but for noImplicitAny: with it, tsc asks a JSDoc type for each of ~530 untyped parameters (anywidget's
# model and el, the engine's data); the views type their helpers where tsc found a mistake (kit.js verdictOf and
# kernelPresence, floats.js ratioToDouble and powerOf).
_ERROR = re.compile(r"^src/(?P<view>[\w-]+)\.js\((?P<line>\d+),(?P<col>\d+)\): (?P<msg>.*)$")


def unmarked(js_dir: Path = JS_DIR) -> list[str]:
    """The module files whose first line is not ``// @ts-check``."""
    return [p.name for p in sorted(js_dir.glob("*.js"))
            if p.read_text(encoding="utf-8").split("\n", 1)[0].strip() != MARK]


def write_sources(cache: Path, js_dir: Path = JS_DIR) -> dict[str, int]:
    """The joined module of every view in ``cache/src`` and a tsconfig.json beside it; {view: the joined file's line
    where the view's own file begins}."""
    src = cache / "src"
    src.mkdir(parents=True, exist_ok=True)
    for old in src.glob("*.js"):
        old.unlink()
    kit = (js_dir / "kit.js").read_text(encoding="utf-8")
    starts = {}
    for path in sorted(js_dir.glob("*.js")):
        if path.stem == "kit":
            continue
        (src / path.name).write_text(kit + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
        starts[path.stem] = kit.count("\n") + 2         # as ampkit.widgets.front.esm joins them
    config = {"compilerOptions": COMPILER_OPTIONS, "files": [f"src/{v}.js" for v in starts]}
    (cache / "tsconfig.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return starts


def located(output: str, starts: dict[str, int]) -> list[str]:
    """tsc's error lines moved to the file each line came from (an error of kit.js once, not once per view)."""
    out: list[str] = []
    for line in output.splitlines():
        m = _ERROR.match(line)
        if not m:
            if line.strip() and not line.startswith(" "):
                out.append(line)
            elif out:
                out[-1] += "\n" + line
            continue
        n, first = int(m["line"]), starts[m["view"]]
        where = f"kit.js({n}" if n < first else f"{m['view']}.js({n - first + 1}"
        out.append(f"ampkit/widgets/js/{where},{m['col']}): {m['msg']}")
    return list(dict.fromkeys(out))


def main(cache: Path, js_dir: Path = JS_DIR) -> int:
    cache = cache.resolve()
    tsc = cache / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        print(f"js-check: no {tsc}; `make js-check` installs it (npm ci)", file=sys.stderr)
        return 2
    missing = unmarked(js_dir)
    if missing:
        print(f"js-check: these files must start with `{MARK}`: {', '.join(missing)}", file=sys.stderr)
        return 1
    starts = write_sources(cache, js_dir)
    run = subprocess.run([str(tsc), "-p", str(cache / "tsconfig.json"), "--pretty", "false"], cwd=cache,
                         capture_output=True, text=True, check=False)
    errors = located(run.stdout + run.stderr, starts)
    if run.returncode or errors:
        print("\n".join(errors) or f"tsc exited {run.returncode}", file=sys.stderr)
        return 1
    print(f"js-check: {len(starts) + 1} modules of ampkit/widgets/js type-check (tsc, {len(starts)} views)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".cache" / "js"))
