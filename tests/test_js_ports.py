"""The views' JavaScript ports of engine rules are marked on both sides, tested in a browser and listed in
docs/architecture.md (issue #39 item 19).

A view's module may compute with a rule of the engine only where its input is free (a typed number, a flipped bit, a
slider grid far too large to send): then the JS function carries ``// port of <python file> <qualname>
(tests/browser/<test>.py)`` right above it (above its JSDoc), and the Python original carries ``# port: js/<file>.js
<function>`` right above its ``def`` (above its decorators). Here every mark on either side must have its partner,
name a Python function that exists, and name a browser test that exists and names the JS function or the Python
original; docs/architecture.md's table of ports lists exactly the marked pairs. A synthetic module with a mark that
has no partner, a wrong name or a missing test is reported (the checker can fail).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JS_DIR = ROOT / "ampkit" / "widgets" / "js"
ARCH = ROOT / "docs" / "architecture.md"
JS_MARK = re.compile(r"^// port of (?P<py>\S+\.py) (?P<qual>[\w.]+) \((?P<test>tests/browser/test_\w+\.py)\)$")
PY_MARK = re.compile(r"^\s*# port: js/(?P<js>\w+\.js) (?P<fn>\w+)$")
JS_DECL = re.compile(r"^(?:export )?(?:async )?(?:function (\w+)\(|const (\w+) = )")


def js_marks(js_dir: Path = JS_DIR) -> tuple[dict[tuple[str, str], tuple[str, str, str]], list[str]]:
    """{(js file, function): (python file, qualname, browser test)} and the problems (a mark not right above a
    function, a malformed mark)."""
    marks, problems = {}, []
    for path in sorted(js_dir.glob("*.js")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if not line.startswith("// port of"):
                continue
            m = JS_MARK.match(line)
            if not m:
                problems.append(f"{path.name}:{i + 1}: malformed mark {line!r} (want {JS_MARK.pattern})")
                continue
            j = i + 1
            if lines[j].startswith("/**"):
                while "*/" not in lines[j]:
                    j += 1
                j += 1
            d = JS_DECL.match(lines[j])
            if not d:
                problems.append(f"{path.name}:{i + 1}: the mark is not right above a function (line {j + 1})")
                continue
            marks[(path.name, d[1] or d[2])] = (m["py"], m["qual"], m["test"])
    return marks, problems


def _defs(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function and method of a module by qualname (``Class.method``)."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = child
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
    walk(tree, "")
    return out


def py_marks(root: Path = ROOT, package: str = "ampkit") -> tuple[dict[tuple[str, str], tuple[str, str]], list[str]]:
    """{(js file, function): (python file, qualname)} from the ``# port:`` marks, and the problems (a mark that is
    not right above a def or its decorators)."""
    marks, problems = {}, []
    for path in sorted((root / package).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "# port: js/" not in text:
            continue
        rel = path.relative_to(root).as_posix()
        starts = {min([f.lineno] + [d.lineno for d in f.decorator_list]): q for q, f in _defs(ast.parse(text)).items()}
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if "# port: js/" not in line:
                continue
            m = PY_MARK.match(line)
            j = i + 1                                   # 0-based index of the next line; stacked marks skipped
            while j < len(lines) and PY_MARK.match(lines[j]):
                j += 1
            if not m or j + 1 not in starts:
                problems.append(f"{rel}:{i + 1}: {line.strip()!r} is not a mark right above a def")
                continue
            marks[(m["js"], m["fn"])] = (rel, starts[j + 1])
    return marks, problems


def pair_problems(js: dict, py: dict, root: Path = ROOT) -> list[str]:
    """What is wrong with the pairs: a partner missing or naming another function, a Python original or browser
    test that does not exist, a test that names neither side."""
    out = []
    for (jsfile, fn), (pyfile, qual, test) in sorted(js.items()):
        where = f"js/{jsfile} {fn}"
        src = root / pyfile
        if not src.is_file() or qual not in _defs(ast.parse(src.read_text(encoding="utf-8"))):
            out.append(f"{where}: no {qual} in {pyfile}")
        if py.get((jsfile, fn)) != (pyfile, qual):
            out.append(f"{where}: {pyfile} {qual} lacks the mark '# port: js/{jsfile} {fn}' right above its def")
        tpath = root / test
        if not tpath.is_file():
            out.append(f"{where}: no browser test {test}")
        elif not re.search(rf"\b({re.escape(fn)}|{re.escape(qual.split('.')[-1])})\b", tpath.read_text("utf-8")):
            out.append(f"{where}: {test} names neither {fn} nor {qual}")
    for (jsfile, fn), (pyfile, qual) in sorted(py.items()):
        if (jsfile, fn) not in js:
            out.append(f"{pyfile} {qual}: js/{jsfile} has no '// port of {pyfile} {qual} (...)' above {fn}")
    return out


def documented() -> set[tuple[str, str, str, str]]:
    """docs/architecture.md's table of ports: {(js file, function, python file, qualname)}."""
    rows = re.findall(r"^\| `js/(\w+\.js)` `(\w+)` \| `(\S+\.py)` `([\w.]+)` \|", ARCH.read_text("utf-8"), re.M)
    return set(rows)


def test_every_port_is_marked_on_both_sides_and_tested_in_a_browser():
    js, problems = js_marks()
    py, more = py_marks()
    assert len(js) >= 15, js        # the float explorer, the rounding, the range map, the sink timeline, the replay
    assert not problems + more + pair_problems(js, py)


def test_the_architecture_document_lists_exactly_the_ports():
    js, _ = js_marks()
    marked = {(f, fn, py, qual) for (f, fn), (py, qual, _t) in js.items()}
    doc = documented()
    assert doc == marked, f"only in the document: {sorted(doc - marked)}; only marked: {sorted(marked - doc)}"


def test_the_checker_reports_a_lone_mark_a_wrong_name_and_a_missing_test(tmp_path):
    js_dir = tmp_path / "ampkit" / "widgets" / "js"
    js_dir.mkdir(parents=True)
    pkg = tmp_path / "ampkit"
    (pkg / "engine.py").write_text("# port: js/view.js twice\ndef double(x):\n    return 2 * x\n\n\n"
                                   "# port: js/view.js gone\ndef orphan():\n    pass\n\n\n"
                                   "# port: js/view.js half\nx = 1\n", encoding="utf-8")
    (tmp_path / "tests" / "browser").mkdir(parents=True)
    (tmp_path / "tests" / "browser" / "test_view_browser.py").write_text("# checks twice\n", encoding="utf-8")
    (js_dir / "view.js").write_text(
        "// port of ampkit/engine.py double (tests/browser/test_view_browser.py)\n/** 2x. */\n"
        "export function twice(x) { return 2 * x; }\n"
        "// port of ampkit/engine.py triple (tests/browser/test_none_browser.py)\nconst thrice = (x) => 3 * x;\n"
        "// port of the engine\nfunction other() {}\n", encoding="utf-8")
    js, problems = js_marks(js_dir)
    py, more = py_marks(tmp_path)
    assert set(js) == {("view.js", "twice"), ("view.js", "thrice")}
    assert any("malformed" in p for p in problems)
    assert any("half" in p and "not a mark right above a def" in p for p in more)
    found = pair_problems(js, py, tmp_path)
    assert any("no triple in ampkit/engine.py" in p for p in found)
    assert any("no browser test tests/browser/test_none_browser.py" in p for p in found)
    assert any("js/view.js has no '// port of ampkit/engine.py orphan" in p for p in found)
    assert not any(p.startswith("js/view.js twice") for p in found), found


def test_the_document_decides_for_every_module():
    """Each module of ampkit/widgets/js is named in docs/architecture.md's Ports section: ported, or only selecting."""
    text = ARCH.read_text("utf-8")
    section = text[text.index("## Ports"):]
    section = section[:section.index("\n## ", 1)]
    named = set(re.findall(r"`(?:js/)?(\w+\.js)`", section))
    assert {p.name for p in JS_DIR.glob("*.js")} <= named, sorted({p.name for p in JS_DIR.glob("*.js")} - named)
