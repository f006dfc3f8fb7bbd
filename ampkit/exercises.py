"""Self-checks for the notebooks' exercises: a wrong answer gets a hint, never a traceback; answers, hints and
solutions are out of sight until the learner asks, in every renderer.

Each notebook's exercises live in the package, one module per notebook under :mod:`ampkit.lessons._exercises`
(``loss_scaling.py`` holds 03_loss_scaling's). For each exercise N the module defines

    expected_N(state...)   the expected value, computed by the engine from the notebook's state passed in
    solution_N(state...)   the kit's worked solution: it works the value out another way (a derivation, a count),
                           prints its reasoning through ``tr()`` and returns the value (no comments: its source is
                           displayed, and its prints carry the explanation in the learner's language)
    HINT_N = mark("...")   the hint, printed only after a wrong answer (translated in ampkit.po)
    TOLERANCE = {N: {"rel_tol": ...}}   optional, for numbers compared with a tolerance (SOLUTION_TOLERANCE: a
                           tighter one for the kit's own solution)

A notebook then reads, per exercise (the set-up cell: ``ex = exercises("03_loss_scaling", grads=grads)``):

    markdown   the question: predict or compute something *before* the kit shows it
    code       answer_1 = ...   then   ex.check(1, answer_1);          (the hint only after a wrong answer)
    markdown   <details class="ampkit-solution"><summary>…Exercise 1… (click to reveal)</summary> why … </details>
    code       (tag "solution", source collapsed)   ex.solution(1)

No code cell's source holds an answer, a hint or a solution: GitHub, nbviewer and an HTML export show every cell's
source (they ignore ``source_hidden``). ``ex.solution(N)`` runs the solution, asserts that it agrees with the
engine's expected value (so the notebook test checks every solution), and displays the solution's source and
its printed output inside a closed ``<details>``: one click away in Jupyter, Voilà, a static view and the site.
The expected values are computed once, at a learner's first check (or the solution) of each exercise. A module is
imported only when its notebook asks for it, so 09's may need the frameworks' environment.
``ampkit._nbstatic`` checks every stored notebook as a static renderer shows it; tests/test_exercise_independence.py
checks that no solution computes its value by the same call as the expected value (its check could not fail).

>>> check("fp16 max", 65504, 65504)
✅ fp16 max: correct.
True
"""
from __future__ import annotations

import contextlib
import html
import importlib
import inspect
import io
import math
import numbers
import os
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from ampkit.i18n import catalog, tr

__all__ = ["check", "solution", "solution_html", "exercises", "Exercises", "exercise_modules", "revealing_texts"]

#: where the notebooks' exercise sets live: ``<package>.<module>``, the module named in :data:`SETS`
PACKAGE = "ampkit.lessons._exercises"
#: notebook -> its exercise module (imported only when asked for: 09's needs the frameworks' environment)
SETS = {"00_start_here": "start_here", "01_fp16_range": "fp16_range", "02_autocast_and_levels": "autocast_and_levels",
        "03_loss_scaling": "loss_scaling", "04_data_sinking": "data_sinking", "05_amp_in_practice": "amp_in_practice",
        "06_fp8_scaling": "fp8_scaling", "07_transformers_in_16_bits": "transformers_in_16_bits",
        "08_transformers_compiled_and_sharded": "transformers_compiled_and_sharded",
        "09_mindspore_and_paddle": "mindspore_and_paddle", "10_fp4": "fp4"}


def _same(answer: Any, expected: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, numbers.Real) and isinstance(answer, numbers.Real):  # numpy scalars too
        if math.isnan(expected):
            return math.isnan(answer)
        return math.isclose(answer, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, (set, frozenset)):
        return isinstance(answer, Iterable) and not isinstance(answer, str) and set(answer) == set(expected)
    if isinstance(expected, (tuple, list)) and isinstance(answer, (tuple, list)) and len(answer) == len(expected):
        return all(_same(a, e, rel_tol, abs_tol) for a, e in zip(answer, expected))
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


def solution_html(title: str, explanation: str = "", printed: str = "", code: str = "") -> str:
    """The closed ``<details>`` block a solution is shown in: its code (if given), then what it printed.

    >>> solution_html("Exercise 1", "70000 > `65504`", "ok").startswith("<details class='ampkit-solution'>")
    True
    """
    body = f"<p>{_inline_code(explanation)}</p>" if explanation else ""
    if code.strip():
        body += f"<pre><code class='language-python'>{html.escape(code.rstrip())}</code></pre>"
    if printed.strip():
        body += f"<pre>{html.escape(printed.rstrip())}</pre>"
    summary = tr("<b>{title}</b> — computed here (click to reveal)", title=html.escape(title))
    return f"<details class='ampkit-solution'><summary>{summary}</summary>{body}</details>"


def _show(title: str, explanation: str, printed: str, code: str = "") -> None:
    """Display the closed block in a notebook; print plain text elsewhere (plain Python, doctests)."""
    # deferred: IPython (a dependency, via ipykernel) is needed only here, when a solution is shown; importing it
    # costs ~60 ms that ``import ampkit`` and the doctests need not pay
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    if shell is not None and shell.__class__.__name__ != "TerminalInteractiveShell":
        display(HTML(solution_html(title, explanation, printed, code)))
    else:
        head = tr("{title} — solution: {explanation}", title=title, explanation=explanation).rstrip(": ：")
        print(head + ("\n" + printed.rstrip() if printed.strip() else ""))


@contextlib.contextmanager
def solution(title: str, explanation: str = "") -> Iterator[None]:
    """Run the block, capturing what it prints, and show it (with ``explanation``) inside a closed <details>.

    Exceptions are not swallowed. Notebooks use :meth:`Exercises.solution`, which keeps the code out of the cell.

    >>> with solution("Exercise 0", "two and two"):
    ...     print(2 + 2)
    Exercise 0 — solution: two and two
    4
    """
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield
    _show(title, explanation, buf.getvalue())


def exercise_module(notebook: str) -> ModuleType:
    """The exercise module of ``notebook`` ("03_loss_scaling", or "03"); a bad name lists the valid ones."""
    name = next((nb for nb in SETS if notebook in (nb, nb[:2])), None)
    if name is None:
        raise ValueError(tr("no exercises for notebook {name!r}; the notebooks with exercises: {names}",
                            name=notebook, names=", ".join(SETS)))
    return importlib.import_module(f"{PACKAGE}.{SETS[name]}")


def exercise_numbers(module: ModuleType) -> list[int]:
    """The exercise numbers a module defines (``expected_N``), in order."""
    return sorted(int(m.group(1)) for m in map(re.compile(r"expected_(\d+)$").match, vars(module)) if m)


def exercise_modules() -> list[ModuleType]:
    """Every exercise module that imports in this environment (09's needs the frameworks' environment)."""
    found = []
    for name in SETS.values():
        try:
            found.append(importlib.import_module(f"{PACKAGE}.{name}"))
        except ImportError:   # not written yet, or needs another environment
            continue
    return found


def _call(fn: Callable[..., Any], state: dict[str, Any], where: str) -> Any:
    params = list(inspect.signature(fn).parameters)
    missing = [p for p in params if p not in state]
    if missing:
        raise TypeError(tr("{where} needs the notebook's {missing}: pass them to exercises(...), e.g. "
                           "exercises(..., {example})", where=where, missing=", ".join(missing),
                           example=", ".join(f"{p}={p}" for p in missing)))
    return fn(**{p: state[p] for p in params})


def solution_source(module: ModuleType, n: int) -> str:
    """The source of ``solution_N`` and of the module's private helpers it calls (what a learner is shown)."""
    fn = getattr(module, f"solution_{n}")
    parts = [textwrap.dedent(inspect.getsource(fn))]
    for name in sorted(set(fn.__code__.co_names)):
        helper = getattr(module, name, None)
        if name.startswith("_") and inspect.isfunction(helper) and helper.__module__ == module.__name__:
            parts.insert(0, textwrap.dedent(inspect.getsource(helper)))
    return "\n\n".join(p.rstrip() for p in parts)


class Exercises:
    """One notebook's exercises, bound to the notebook's state (``exercises("03_loss_scaling", grads=grads)``)."""

    def __init__(self, module: ModuleType, state: dict[str, Any]):
        self.module, self.state = module, state
        self.numbers = exercise_numbers(module)
        self._expected: dict[int, Any] = {}

    def _number(self, n: int) -> int:
        if n not in self.numbers:
            raise ValueError(tr("no exercise {n} here; the exercises are {numbers}", n=n,
                                numbers=", ".join(map(str, self.numbers))))
        return n

    def expected(self, n: int) -> Any:
        """The engine's value for exercise ``n`` (computed once)."""
        if self._number(n) not in self._expected:
            self._expected[n] = _call(getattr(self.module, f"expected_{n}"), self.state, f"expected_{n}")
        return self._expected[n]

    def _tolerance(self, n: int) -> dict[str, float]:
        return dict(getattr(self.module, "TOLERANCE", {}).get(n, {}))

    def check(self, n: int, answer: Any) -> bool:
        """Compare the learner's ``answer`` with exercise ``n``'s expected value; the hint only when wrong."""
        hint = getattr(self.module, f"HINT_{self._number(n)}")
        return check(tr("exercise {n}", n=n), answer, self.expected(n), hint=tr(hint), **self._tolerance(n))

    def solution(self, n: int) -> None:
        """Run the kit's solution of exercise ``n``, assert it agrees with the engine, show it in a closed block."""
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            value = _call(getattr(self.module, f"solution_{self._number(n)}"), self.state, f"solution_{n}")
        expected = self.expected(n)
        tolerance = getattr(self.module, "SOLUTION_TOLERANCE", {}).get(n, self._tolerance(n))
        if not _same(value, expected, **{"rel_tol": 0.0, "abs_tol": 0.0, **tolerance}):
            raise AssertionError(f"exercise {n}: the kit's solution gives {value!r}, the engine {expected!r}")
        buf.write(tr("✅ {name}: correct.", name=tr("exercise {n} (solution)", n=n)) + "\n")
        _show(tr("Exercise {n}", n=n), "", buf.getvalue(), solution_source(self.module, n))


def exercises(notebook: str, **state: Any) -> Exercises:
    """The exercises of ``notebook`` bound to its ``state`` (the names its solutions and expected values read)."""
    return Exercises(exercise_module(notebook), state)


def revealing_texts(module: ModuleType, run: int = 4) -> list[str]:
    """What must never be in plain view in a stored notebook: each hint (English and Chinese) and each ``run``
    consecutive lines of each solution's source (a line alone, ``loss.backward()``, is any notebook's code too)."""
    texts = []
    for n in exercise_numbers(module):
        hint = getattr(module, f"HINT_{n}", "")
        texts += [hint, catalog("zh_CN").gettext(hint)] if hint else []
        lines = [line.strip() for line in inspect.getsource(getattr(module, f"solution_{n}")).splitlines()]
        lines = [line for line in lines if line]
        texts += [" ".join(lines[i:i + run]) for i in range(max(1, len(lines) - run + 1))]
    return texts
