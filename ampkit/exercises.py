"""Self-checks for the notebooks' exercises: a wrong answer gets a hint, never a traceback; solutions stay hidden.

Used by every notebook's "Exercises" section. The pattern, per exercise:

    markdown   the question: predict or compute something *before* the kit shows it
    code       answer_1 = ...        then check("exercise 1", answer_1, expected_1);
    markdown   <details class="ampkit-solution"><summary>…Exercise 1… (click to reveal)</summary> why … </details>
    code       (tag "solution", source collapsed) with solution("Exercise 1"): ...code that computes it...

``expected_1`` is computed in a collapsed set-up cell above the questions, so reading the exercise cell does not
give the answer away. The explanation is markdown inside a closed ``<details>``, not a string in code: GitHub,
nbviewer and an HTML export show every cell's source (they ignore ``source_hidden``), and a closed ``<details>``
is one deliberate click away in all of them (``ampkit._nbstatic`` checks it). ``solution`` runs its block (so the
notebook test executes and asserts every solution) but shows its printed output inside a closed ``<details>``
element: collapsed on a first read in JupyterLab, Notebook 7 and Voilà alike, opened with one click.

>>> check("fp16 max", 65504, 65504)
✅ fp16 max: correct.
True
"""
from __future__ import annotations

import contextlib
import html
import io
import math
import numbers
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ampkit.i18n import tr

__all__ = ["check", "solution", "solution_html"]


def _same(answer: Any, expected: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, numbers.Real) and isinstance(answer, numbers.Real):  # numpy scalars too
        if math.isnan(expected):
            return math.isnan(answer)
        return math.isclose(answer, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, (set, frozenset)):
        return isinstance(answer, Iterable) and not isinstance(answer, str) and set(answer) == set(expected)
    if isinstance(expected, str) and isinstance(answer, str):
        return answer.strip().lower() == expected.strip().lower()
    try:
        return bool(answer == expected)
    except Exception:  # e.g. comparing a tensor with a list
        return False


def check(exercise: str, answer: Any, expected: Any, *, rel_tol: float = 0.0, abs_tol: float = 0.0,
          hint: str = "") -> bool:
    """Compare a learner's ``answer`` with ``expected``; print a verdict (and ``hint`` when wrong); return it.

    ``answer is ...`` (Ellipsis, the notebooks' placeholder) means "not answered yet"; ``None`` is a real answer.
    Numbers compare with ``math.isclose(rel_tol, abs_tol)``; sets ignore order; strings ignore case.
    """
    if answer is ...:
        print(tr("✏️ {name}: not answered yet — replace the `...` with your answer and run the cell again.",
                 name=exercise))
        return False
    correct = _same(answer, expected, rel_tol, abs_tol)
    if correct:
        print(tr("✅ {name}: correct.", name=exercise))
    else:
        print(tr("❌ {name}: not yet — your answer was {answer!r}.", name=exercise, answer=answer)
              + (tr(" Hint: {hint}", hint=hint) if hint else ""))
    _report(exercise, answer, correct)
    return correct


def _report(exercise: str, answer: Any, correct: bool) -> None:
    """Tell the instructor's room view (only inside the room's JupyterHub, where the hub sets
    ``AMPKIT_ROOMVIEW_URL``; elsewhere nothing happens). Never raises, never waits: ampkit/classroom/report.py."""
    if not os.environ.get("AMPKIT_ROOMVIEW_URL"):
        return
    try:
        from ampkit.classroom.report import report_check

        report_check(exercise, answer, correct)
    except Exception:  # a report must never break the learner's notebook
        pass


def _inline_code(text: str) -> str:
    """Escape ``text`` for HTML and turn `backticks` into <code> (the only markup solutions use)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def solution_html(title: str, explanation: str = "", printed: str = "") -> str:
    """The closed ``<details>`` block a solution is shown in.

    >>> solution_html("Exercise 1", "70000 > `65504`", "ok").startswith("<details class='ampkit-solution'>")
    True
    """
    body = f"<p>{_inline_code(explanation)}</p>" if explanation else ""
    if printed.strip():
        body += f"<pre>{html.escape(printed.rstrip())}</pre>"
    summary = tr("<b>{title}</b> — computed here (click to reveal)", title=html.escape(title))
    return f"<details class='ampkit-solution'><summary>{summary}</summary>{body}</details>"


@contextlib.contextmanager
def solution(title: str, explanation: str = "") -> Iterator[None]:
    """Run the block, capturing what it prints, and show it (with ``explanation``) inside a closed <details>.

    In a notebook this displays HTML; elsewhere (plain Python, doctests) it prints the text. Exceptions are not
    swallowed: a solution whose ``assert`` fails still fails the notebook test.

    >>> with solution("Exercise 0", "two and two"):
    ...     print(2 + 2)
    Exercise 0 — solution: two and two
    4
    """
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield
    printed = buf.getvalue()
    # deferred: IPython (a dependency, via ipykernel) is needed only here, when a solution is shown; importing it
    # costs ~60 ms that ``import ampkit`` and the doctests need not pay
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    if shell is not None and shell.__class__.__name__ != "TerminalInteractiveShell":
        display(HTML(solution_html(title, explanation, printed)))
    else:
        head = tr("{title} — solution: {explanation}", title=title, explanation=explanation).rstrip(": ：")
        print(head + ("\n" + printed.rstrip() if printed.strip() else ""))
