"""The room view's state: what the learners' kernels reported, and what the instructor's page shows of it.

Pure logic, standard library only, no clock of its own (every function takes ``now``, seconds): the service
(``service.py``) feeds it the reports it has authenticated and serves :meth:`Room.snapshot` to the page.

Two kinds of report arrive (``ampkit/classroom/report.py`` builds them in the learner's kernel):

- ``cell``: a cell finished in ``notebook``; ``error`` is the exception's class name, or ``None``;
- ``check``: an exercise's self-check ran in ``notebook``: ``exercise``, the learner's ``answer`` (their
  prediction) and whether it was ``correct``. A check named ``"<exercise> (solution)"`` is the solution cell
  checking itself: from then on this learner has seen the answer, and their later answers to that exercise are
  no longer predictions.

>>> room = Room()
>>> _ = room.add("ana", {"v": 1, "kind": "check", "notebook": "03.ipynb", "exercise": "exercise 1", "answer": 35,
...                  "correct": True}, now=10.0)
>>> room.snapshot(now=12.0)["hands"]["counts"]
[{'label': '35', 'count': 1, 'correct': 1}]
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

VERSION = 1
REPORT_KINDS = ("cell", "check")
#: Seconds without a report after which a learner shows as quiet (grey) on the page.
QUIET_AFTER = 300.0
#: Distinct values shown one by one before numbers are put in bins.
MAX_DISTINCT = 10
#: Bins for numbers with more distinct values than MAX_DISTINCT.
BINS = 8
MAX_TEXT, MAX_ANSWER_JSON = 200, 1000
# the Chinese edition's checks say "练习 1（答案）" (or "练习 1 (答案)")
_SOLUTION = re.compile(r"^(.*?\S)\s*(?:\s\(solution\)|（答案）|\s?\(答案\))$")
_FIELDS = {"cell": {"v", "user", "kind", "notebook", "error", "at"},
           "check": {"v", "user", "kind", "notebook", "exercise", "answer", "correct", "at"}}


class ReportError(ValueError):
    """A report that is not one the learner's reporter sends: says which field and what is valid."""


def _text(report: dict, name: str, *, optional: bool = False) -> str | None:
    value = report.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise ReportError(f"{name!r}: expected a non-empty string of at most {MAX_TEXT} characters"
                          + (" or null" if optional else "") + f", got {value!r:.60}")
    return value


def parse_report(report) -> dict:
    """Check one report (the JSON body a learner's kernel posts); return it cleaned (``at`` and ``user`` dropped:
    the service keeps its own clock and takes the name from the token). Raises :class:`ReportError`."""
    if not isinstance(report, dict):
        raise ReportError(f"expected a JSON object, got {type(report).__name__}")
    kind = report.get("kind")
    if kind not in REPORT_KINDS:
        raise ReportError(f"'kind': expected one of {', '.join(REPORT_KINDS)}, got {kind!r:.40}")
    unknown = set(report) - _FIELDS[kind]
    if unknown:
        raise ReportError(f"unknown field(s) {sorted(unknown)} for kind {kind!r}; valid: {sorted(_FIELDS[kind])}")
    if report.get("v") != VERSION:
        raise ReportError(f"'v': expected {VERSION} (this room view's report version), got {report.get('v')!r:.20}")
    out = {"kind": kind, "notebook": _text(report, "notebook")}
    if kind == "cell":
        out["error"] = _text(report, "error", optional=True)
        return out
    out["exercise"] = _text(report, "exercise")
    if not isinstance(report.get("correct"), bool):
        raise ReportError(f"'correct': expected true or false, got {report.get('correct')!r:.20}")
    out["correct"] = report["correct"]
    if len(json.dumps(report.get("answer"))) > MAX_ANSWER_JSON:
        raise ReportError(f"'answer': at most {MAX_ANSWER_JSON} characters of JSON")
    out["answer"] = report.get("answer")
    return out


def split_solution(exercise: str) -> tuple[str, bool]:
    """``"exercise 1 (solution)"`` -> ``("exercise 1", True)``; ``"exercise 1"`` -> ``("exercise 1", False)``.

    >>> split_solution("练习 1（答案）"), split_solution("exercise 2 (solution)"), split_solution("练习 3")
    (('练习 1', True), ('exercise 2', True), ('练习 3', False))
    """
    m = _SOLUTION.match(exercise)
    return (m.group(1), True) if m else (exercise, False)


def exercise_key(notebook: str, exercise: str) -> str:
    """One exercise of the room: every notebook has an "exercise 1", so the notebook is part of the name."""
    return f"{notebook} · {exercise}"


@dataclass
class Learner:
    """What the page shows of one learner (times are the service's clock, seconds)."""

    name: str
    notebook: str = ""
    last_seen: float = 0.0
    last_error: str | None = None        # the exception of the last cell, None when it ran through
    last_cell_at: float | None = None
    failing_since: float | None = None   # first error of the current run of failing cells
    failing_cells: int = 0
    checks: dict = field(default_factory=dict)       # exercise key -> {"answer", "correct", "at"}
    predictions: dict = field(default_factory=dict)  # exercise key -> the last answer before the solution
    solution_seen: dict = field(default_factory=dict)  # exercise key -> when the solution checked itself


class Room:
    """Every learner's latest state, built from their reports in arrival order."""

    def __init__(self, quiet_after: float = QUIET_AFTER):
        self.quiet_after = quiet_after
        self.learners: dict[str, Learner] = {}
        self.last_check: tuple[float, str] | None = None   # (when, exercise key): the exercise the room is on

    def add(self, user: str, report: dict, now: float) -> dict:
        """Apply one report from ``user`` (the name the hub gave for the token); returns the parsed report."""
        r = parse_report(report)
        who = self.learners.setdefault(user, Learner(user))
        who.notebook, who.last_seen = r["notebook"], now
        if r["kind"] == "cell":
            who.last_cell_at, who.last_error = now, r["error"]
            if r["error"] is None:
                who.failing_since, who.failing_cells = None, 0
            else:
                who.failing_since = who.failing_since if who.failing_cells else now
                who.failing_cells += 1
            return r
        exercise, is_solution = split_solution(r["exercise"])
        key = exercise_key(r["notebook"], exercise)
        if is_solution:
            who.solution_seen.setdefault(key, now)
        else:
            who.checks[key] = {"answer": r["answer"], "correct": r["correct"], "at": now}
            if key not in who.solution_seen:
                who.predictions[key] = {"answer": r["answer"], "correct": r["correct"]}
            self.last_check = (now, key)
        return r

    def exercises(self) -> list[str]:
        """Every exercise anyone answered or solved, in notebook and exercise order."""
        keys = {k for w in self.learners.values() for k in (*w.checks, *w.solution_seen)}
        return sorted(keys, key=_natural)

    def hands(self, key: str) -> dict:
        """The show of hands for one exercise: the learners' predictions (their last answer before they ran
        the solution), as counts (see :func:`distribution`); who answered only after the solution is counted
        apart."""
        predictions = [w.predictions[key] for w in self.learners.values() if key in w.predictions]
        answered = {n for n, w in self.learners.items() if key in w.checks}
        return {"exercise": key, "predictions": len(predictions),
                "after_solution": len(answered - {n for n, w in self.learners.items() if key in w.predictions}),
                "solution_seen": sum(key in w.solution_seen for w in self.learners.values()),
                "counts": distribution([(p["answer"], p["correct"]) for p in predictions])}

    def snapshot(self, now: float, exercise: str | None = None) -> dict:
        """What the page shows, as JSON: each learner's row, the exercises, and the show of hands for
        ``exercise`` (default: the exercise of the latest check, the one the room is on)."""
        keys = self.exercises()
        if exercise is not None and exercise not in keys:
            raise ReportError(f"no exercise {exercise!r} yet; the room has: {', '.join(keys) or 'none'}")
        current = exercise or (self.last_check[1] if self.last_check else None)
        rows = []
        for name in sorted(self.learners):
            w = self.learners[name]
            rows.append({
                "name": name, "notebook": w.notebook, "seen_ago": round(now - w.last_seen, 1),
                "quiet": now - w.last_seen > self.quiet_after,
                "error": w.last_error, "failing_for": None if w.failing_since is None
                else round(now - w.failing_since, 1), "failing_cells": w.failing_cells,
                "checks": {k: ("solution" if not c["correct"] and k in w.solution_seen else
                               "correct" if c["correct"] else "wrong") for k, c in w.checks.items()}
                | {k: "solution" for k in w.solution_seen if k not in w.checks}})
        return {"learners": rows, "exercises": keys, "current": current,
                "hands": self.hands(current) if current else None,
                "stuck": sum(r["error"] is not None for r in rows), "quiet_after": self.quiet_after}


def _natural(key: str) -> list:
    """Sort "exercise 10" after "exercise 9"."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key)]


def label(answer) -> str:
    """How an answer is written on the page: strings as typed (trimmed, lower case: check() ignores case),
    lists as tuples, numbers in Python's short form."""
    if isinstance(answer, str):
        return answer.strip().lower()
    if isinstance(answer, list):
        return "(" + ", ".join(label(a) for a in answer) + ("," if len(answer) == 1 else "") + ")"
    if isinstance(answer, bool) or answer is None:
        return repr(answer)
    if isinstance(answer, float):
        return repr(int(answer)) if answer.is_integer() and abs(answer) < 1e15 else f"{answer:.4g}"
    return str(answer)


def _nice(step: float) -> float:
    """The smallest of 1, 2, 5 × 10^n at or above ``step``."""
    power = 10.0 ** math.floor(math.log10(step))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= step * (1 - 1e-12))


def _bins(values: list[float]) -> list[tuple[str, float, float]]:
    """Bins for many distinct finite numbers: powers of two (2^k to 2^(k+1)) when all are positive and span more
    than a factor of 64, else equal bins of a round width (1, 2 or 5 × 10^n)."""
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo > 64:
        k0, k1 = math.floor(math.log2(lo)), math.floor(math.log2(hi))
        step = max(1, math.ceil((k1 - k0 + 1) / BINS))
        return [(f"2^{k} – 2^{k + step}", 2.0 ** k, 2.0 ** (k + step)) for k in range(k0, k1 + 1, step)]
    width = _nice((hi - lo) / BINS)
    start = math.floor(lo / width) * width
    edges: list[tuple[str, float, float]] = []
    while not edges or edges[-1][2] <= hi:
        a = start + len(edges) * width
        edges.append((f"{a:.4g} – {a + width:.4g}", a, a + width))
    return edges


def distribution(answers: list[tuple[object, bool]]) -> list[dict]:
    """A show of hands: ``answers`` as (answer, correct) pairs -> rows ``{"label", "count", "correct"}``.

    Up to :data:`MAX_DISTINCT` distinct answers are counted one by one (numbers first, in order; then the rest,
    most frequent first). More distinct finite numbers are put in :data:`BINS` bins (:func:`_bins`); anything
    else (strings, tuples, ``None``, nan, inf) is counted by its :func:`label`.

    >>> [(r["label"], r["count"]) for r in distribution([(35, True), (35.0, True), (16, False), ("x", False)])]
    [('16', 1), ('35', 2), ('x', 1)]
    """
    numbers = [(float(a), c) for a, c in answers if isinstance(a, (int, float)) and not isinstance(a, bool)
               and math.isfinite(a)]
    others = [(a, c) for a, c in answers if not (isinstance(a, (int, float)) and not isinstance(a, bool)
                                                  and math.isfinite(a))]
    rows: list[dict] = []
    distinct = sorted({a for a, _ in numbers})
    if len(distinct) + len({label(a) for a, _ in others}) <= MAX_DISTINCT or len(distinct) <= 1:
        for value in distinct:
            hits = [c for a, c in numbers if a == value]
            rows.append({"label": label(value), "count": len(hits), "correct": sum(hits)})
    else:
        for name, a, b in _bins(distinct):
            hits = [c for v, c in numbers if a <= v < b]
            rows.append({"label": name, "count": len(hits), "correct": sum(hits)})   # empty bins too: a histogram
    counted: dict[str, list[bool]] = {}
    for answer, c in others:
        counted.setdefault(label(answer), []).append(c)
    for name, hits in sorted(counted.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rows.append({"label": name, "count": len(hits), "correct": sum(hits)})
    return rows
