"""The views' JavaScript type check (``make js-check``, the first step of ``make test``; ``tests/js/typecheck.py``).

Every module of ``ampkit/widgets/js`` starts with ``// @ts-check``; the checker reports an error at the line of the
file it is in (not of the joined module the browser loads), a kit.js error once, and a file without the mark.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ampkit_js_typecheck", ROOT / "tests" / "js" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typecheck)
INSTALLED = ROOT / ".cache" / "js" / "node_modules"


def test_every_module_starts_with_ts_check():
    assert sorted(typecheck.JS_DIR.glob("*.js")), "no modules found"
    assert typecheck.unmarked() == []


def test_the_lock_pins_the_checker():
    import json
    pkg = json.loads((ROOT / "tests" / "js" / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / "tests" / "js" / "package-lock.json").read_text(encoding="utf-8"))
    for name, version in pkg["devDependencies"].items():
        assert version[0].isdigit(), f"{name} must be pinned to one version, not {version!r}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def _views(tmp_path: Path, kit: str, view: str) -> Path:
    js = tmp_path / "js"
    js.mkdir()
    (js / "kit.js").write_text(kit, encoding="utf-8")
    (js / "view.js").write_text(view, encoding="utf-8")
    return js


def test_an_unmarked_file_is_named(tmp_path):
    js = _views(tmp_path, "// @ts-check\nexport const a = 1;\n", "export const b = a;\n")
    assert typecheck.unmarked(js) == ["view.js"]


@pytest.mark.skipif(not (INSTALLED / ".bin" / "tsc").exists(), reason="tsc not installed yet: make js-check")
def test_errors_are_reported_at_their_own_file_and_line(tmp_path, capsys):
    kit = "// @ts-check\n/** @param {number} x */\nexport function twice(x) { return 2 * x; }\nexport const k = 1;\n"
    view = "// @ts-check\nexport const ok = twice(k);\nexport const bad = twice(\"two\");\n"
    js = _views(tmp_path, kit, view)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "node_modules").symlink_to(INSTALLED)
    assert typecheck.main(cache, js) == 1
    err = capsys.readouterr().err
    assert "ampkit/widgets/js/view.js(3,26): error TS2345" in err, err
    (js / "view.js").write_text("// @ts-check\nexport const ok = twice(k);\n", encoding="utf-8")
    assert typecheck.main(cache, js) == 0
    shutil.rmtree(cache / "src")
