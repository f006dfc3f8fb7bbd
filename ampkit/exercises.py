"""Self-checks for the notebooks' exercises: a wrong answer gets a hint, never a traceback.

Used by every notebook's "Exercises" section.

>>> check("fp16 max", 65504, 65504)
✅ fp16 max: correct.
True
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["check"]


def _same(answer: Any, expected: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
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
        print(f"✏️ {exercise}: not answered yet — replace the `...` with your answer and run the cell again.")
        return False
    if _same(answer, expected, rel_tol, abs_tol):
        print(f"✅ {exercise}: correct.")
        return True
    print(f"❌ {exercise}: not yet — your answer was {answer!r}." + (f" Hint: {hint}" if hint else ""))
    return False
