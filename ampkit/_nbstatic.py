"""What a reader without a kernel sees: the rules that keep a notebook's answers hidden on GitHub, nbviewer and an
HTML export, and its text readable there (developer tool; ``ampkit._nbtools.hygiene_problems`` runs it on every
committed notebook, both editions).

A static view ignores ``source_hidden`` and shows every cell's source. So, per exercise:

    markdown  <details class="ampkit-solution"><summary>…Exercise N… (click to reveal)</summary>   the explanation,
              …the answer and why…                                                              one click away
              </details>
    code      with solution("Exercise N"):          the title only: no answer text in the source
                  …computes the answer, prints, asserts…
                  assert check("exercise N (solution)", computed, expected_N)   never a literal answer

and the set-up cell computes ``expected_N`` (never a formula of constants that shows it) and holds the hints
(``hint_N``), which ``check`` prints only after a wrong answer: written in the answer cell, a hint is read before
the learner commits. Markdown holds no TeX
``$…$`` (an offline HTML export has no MathJax and shows it literally), and no stored output is a bare
``True``/``False`` (an unanswered ``check`` ends with ``;``).
"""
from __future__ import annotations

import ast
import re

__all__ = ["static_view_problems"]

_DETAILS_OPEN = re.compile(r"^\s*<details class=[\"']ampkit-solution[\"']>\s*<summary>.+</summary>", re.S)
_SOLUTION_LINE = re.compile(r"^with solution\(\s*(\"[^\"\n]*\"|'[^'\n]*')\s*\):\s*$")
_EXPECTED = re.compile(r"^expected_\d+$")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_TEX = re.compile(r"\$\$|(?<![\\\w])\$[^$\n]+?\$(?!\w)")
# names that only rename constants: an ``expected_N`` built from these alone shows its value to a reader
_CONSTANT_NAMES = {"math", "abs", "float", "int", "round", "pow", "min", "max", "set", "frozenset", "tuple", "sorted"}


def _source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _shows_its_value(node: ast.AST) -> bool:
    """A literal, or arithmetic on literals through ``math`` and builtins only (``math.sqrt(math.sqrt(64))``)."""
    if _is_literal(node):
        return True
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    allowed = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Constant, ast.Name, ast.Call,
               ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.Set, ast.List, ast.keyword)
    return names <= _CONSTANT_NAMES and all(isinstance(n, allowed) for n in ast.walk(node))


def _parse(src: str) -> ast.AST | None:
    # IPython magics and shell lines are not Python: leave them out of the parse
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _literal_answers(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check"
                and len(node.args) >= 2 and _is_literal(node.args[1])):
            found.append(ast.unparse(node.args[1]))
    return found


def _hints_in_sight(tree: ast.AST) -> list[str]:
    """Exercises whose answer cell spells out its hint (``check("exercise N", ..., hint="...")``): a learner reads
    it before answering. The hint belongs in the collapsed set-up cell (``hint_N = ...``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check":
            for kw in node.keywords:
                if kw.arg == "hint" and isinstance(kw.value, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                    found.append(ast.unparse(node.args[0]) if node.args else "check")
    return found


def _readable_expected(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and _EXPECTED.match(t.id)
                                                for t in node.targets):
            if _shows_its_value(node.value):
                found.append(f"{ast.unparse(node.targets[0])} = {ast.unparse(node.value)}")
    return found


def _bare_bool(output: dict) -> bool:
    data = output.get("data", {})
    text = data.get("text/plain", "")
    text = text if isinstance(text, str) else "".join(text)
    return output.get("output_type") == "execute_result" and set(data) == {"text/plain"} and \
        text.strip() in ("True", "False")


def static_view_problems(cells: list[dict]) -> list[str]:
    """Everything in ``cells`` that a reader of a static view would see by accident: an answer or a TeX formula."""
    problems = []
    for i, c in enumerate(cells):
        src = _source(c)
        if c.get("cell_type") == "markdown":
            tex = _TEX.search(_CODE_SPAN.sub("", src))
            if tex:
                problems.append(f"cell {i}: TeX math {tex.group(0)!r} (shown literally without MathJax): "
                                "write it in Unicode or <sup>/<sub>")
            continue
        if c.get("cell_type") != "code":
            continue
        if any(_bare_bool(o) for o in c.get("outputs", [])):
            problems.append(f"cell {i}: a bare True/False under the cell (end the check line with ';')")
        tree = _parse(src)
        if tree is None:
            continue
        for expr in _readable_expected(tree):
            problems.append(f"cell {i}: {expr} shows the answer in the source: compute it")
        if "solution" not in c.get("metadata", {}).get("tags", []):
            for name in _hints_in_sight(tree):
                problems.append(f"cell {i}: the hint of {name} is written in the answer cell, read before answering:"
                                " define it in the collapsed set-up cell (hint_N = ...)")
            continue
        first = src.split("\n", 1)[0].strip()
        if not _SOLUTION_LINE.match(first):
            problems.append(f"cell {i}: a solution cell starts {first[:60]!r}, not 'with solution(\"Exercise N\"):' "
                            "(the title only; the explanation goes in the <details> markdown cell before it)")
        for lit in _literal_answers(tree):
            problems.append(f"cell {i}: a solution checks the literal answer {lit[:40]} (readable in a static "
                            "view): check a value the cell computes")
        before = cells[i - 1] if i else {}
        if before.get("cell_type") != "markdown" or not _DETAILS_OPEN.match(_source(before)) \
                or not _source(before).rstrip().endswith("</details>"):
            problems.append(f"cell {i}: no <details class=\"ampkit-solution\"> markdown cell with the explanation "
                            "right before this solution")
    return problems
