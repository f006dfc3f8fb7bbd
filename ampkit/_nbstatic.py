"""What a reader without a kernel sees: the rules that keep a notebook's answers, hints and solutions out of plain
view on GitHub, nbviewer, an HTML export and the site, and its text readable there (developer tool;
``ampkit._nbtools.hygiene_problems`` runs it on every committed notebook, both editions).

A static view ignores ``source_hidden``: it shows every cell's source and every stored output, and a closed
``<details>`` only once clicked. So, per exercise (``ampkit.exercises``):

    code      ex = exercises("03_loss_scaling", grads=grads)        the set-up: no answer, no hint in sight
    code      answer_N = ...  /  ex.check(N, answer_N);             the hint is printed only after a wrong answer
    markdown  <details class="ampkit-solution"><summary>…Exercise N… (click to reveal)</summary>
              …the answer and why…
              </details>
    code      ex.solution(N)                                        its code and output shown in a closed <details>

:func:`static_view_problems` renders the cells as such a renderer would (closed ``<details>`` left out) and finds no
hint (English or Chinese) and no line of a solution's source of any exercise module, no ``hint_N``/``expected_N``
computed in a code cell and no ``with solution(`` block (the old layout, whose code was in plain view). Markdown
holds no TeX ``$…$`` (an offline HTML export has no MathJax and shows it literally), and no stored output is a bare
``True``/``False`` (an unanswered ``check`` ends with ``;``).
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache

__all__ = ["static_view_problems", "static_text", "revealed"]

_DETAILS_OPEN = re.compile(r"^\s*<details class=[\"']ampkit-solution[\"']>\s*<summary>.+</summary>", re.S)
_CLOSED_DETAILS = re.compile(r"<details\b(?![^>]*\bopen\b)[^>]*>.*?</details>", re.S | re.I)
_SOLUTION_CALL = re.compile(r"^\w+\.solution\(\d+\);?$")
_ANSWER_NAMES = re.compile(r"^(?:hint|expected)_\d+$")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_TEX = re.compile(r"\$\$|(?<![\\\w])\$[^$\n]+?\$(?!\w)")


def _source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def static_text(cells: list[dict]) -> str:
    """What a static renderer shows of ``cells`` without a click: every source (``source_hidden`` ignored) and
    every stored output, the contents of closed ``<details>`` left out."""
    parts = []
    for c in cells:
        parts.append(_source(c))
        for out in c.get("outputs", []):
            if "text" in out:
                parts.append(_text(out["text"]))
            for mime, value in out.get("data", {}).items():
                if mime.startswith("text/"):
                    parts.append(_text(value))
    return _squeeze(_CLOSED_DETAILS.sub("", "\n".join(parts)))


@lru_cache(maxsize=1)
def _revealing() -> tuple[str, ...]:
    from ampkit.exercises import exercise_modules, revealing_texts  # the exercise modules import torch: on demand

    return tuple(sorted({_squeeze(t).strip() for m in exercise_modules() for t in revealing_texts(m) if t.strip()}))


def revealed(text: str, secrets: tuple[str, ...] | None = None) -> list[str]:
    """The hints and solution lines (of every exercise module, or ``secrets``) found in ``text``."""
    return [s for s in (_revealing() if secrets is None else secrets) if s in text]


def _parse(src: str) -> ast.AST | None:
    # IPython magics and shell lines are not Python: leave them out of the parse
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _answers_in_source(tree: ast.AST) -> list[str]:
    """``hint_N = ...`` / ``expected_N = ...``, ``check(..., hint=...)`` and ``with solution(...)`` in a cell."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [f"{t.id} = ..." for t in node.targets if isinstance(t, ast.Name) and _ANSWER_NAMES.match(t.id)]
        elif isinstance(node, ast.Call) and any(kw.arg == "hint" for kw in node.keywords):
            found.append(f"{ast.unparse(node.func)}(..., hint=...)")
        elif isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call)
                                                and ast.unparse(i.context_expr.func).endswith("solution")
                                                for i in node.items):
            found.append("with solution(...): <its code>")
    return found


def _bare_bool(output: dict) -> bool:
    data = output.get("data", {})
    return output.get("output_type") == "execute_result" and set(data) == {"text/plain"} and \
        _text(data.get("text/plain", "")).strip() in ("True", "False")


def static_view_problems(cells: list[dict], secrets: tuple[str, ...] | None = None) -> list[str]:
    """Everything in ``cells`` that a reader of a static view would see by accident: a hint, an answer, a
    solution's code, or a TeX formula. ``secrets``: the texts to look for (default: every exercise module's)."""
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
        for what in _answers_in_source(tree) if tree else []:
            problems.append(f"cell {i}: {what} in the source, in plain view in a static view: the exercise's "
                            "hints, expected values and solution belong in its module (ampkit.lessons._exercises)")
        if "solution" not in c.get("metadata", {}).get("tags", []):
            continue
        if not _SOLUTION_CALL.match(src.strip()):
            problems.append(f"cell {i}: a solution cell reads {src.strip()[:60]!r}, not 'ex.solution(N)' "
                            "(its code and output are shown in a closed <details>)")
        before = cells[i - 1] if i else {}
        if before.get("cell_type") != "markdown" or not _DETAILS_OPEN.match(_source(before)) \
                or not _source(before).rstrip().endswith("</details>"):
            problems.append(f"cell {i}: no <details class=\"ampkit-solution\"> markdown cell with the explanation "
                            "right before this solution")
    for text in revealed(static_text(cells), secrets):
        problems.append(f"a hint or a solution's code in plain view in a static view: {text[:60]!r}")
    return problems
