"""The sink timeline's front-end arithmetic (``ampkit/widgets/js/sink.js``) against the Python engine, in Chromium.

``sink.js`` ports :func:`ampkit.timeline.simulate`, :func:`~ampkit.timeline.gantt_bars` and
:func:`~ampkit.timeline.summarise` (a closed-form schedule of sums and maxima) and prints the readout as
:func:`ampkit.widgets.sinking.summary_html` does. Here, on 300 random settings (every mode, sink sizes 1–32, every
slider's range, both device kinds, random fixed costs with and without a graph launch, a fused graph and a queue
depth), the page's parameters, every bar (lane, kind, start, end: exactly, as doubles), the run's total, syncs, the
readout's five numbers and the chart's title equal :class:`ampkit.widgets.sink_timeline.SinkTimeline`'s (the engine's
own ``summarise`` and ``gantt_bars``); and Python's ``.1f``, ``,.0f``, ``.0%``, ``.3g`` and ``.2f`` against
``pyFixed`` / ``pyG`` on random numbers and exact ties.
"""
from __future__ import annotations

import random
import re

import pytest

from ampkit.timeline import SINK_MODES, SimParams
from ampkit.widgets.front import esm
from ampkit.widgets.sink_timeline import SinkTimeline

pytestmark = pytest.mark.browser

SETTINGS = 300
CONTROLS = ("sink_mode", "sink_steps", "prep_us", "launch_us", "op_count", "op_us", "device_async")


@pytest.fixture(scope="module")
def sk(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(type="module", content=esm("sink") + "\nwindow.__sk = {shownOf, pyFixed, pyG, fillText};\n")
    page.wait_for_function("window.__sk !== undefined")
    yield page
    page.close()


def _log_value(rng: random.Random, lo: int, hi: int) -> float:
    """A log slider's value: on its grid (10 ** (k / 100), as the page sets it) or anywhere in its range."""
    if rng.random() < 0.5:
        return 10 ** (rng.randint(100 * lo, 100 * hi) / 100)
    return 10 ** rng.uniform(lo, hi)


def _settings() -> list[tuple[SimParams, dict]]:
    rng = random.Random(4)
    out = []
    for i in range(SETTINGS):
        small = rng.random() < 0.7
        base = SimParams(copy=rng.choice((0.0, rng.uniform(0, 100e-6))),
                         sync=rng.choice((0.0, rng.uniform(0, 1e-4))), callback=rng.choice((0.0, rng.uniform(0, 5e-5))),
                         handoff=rng.choice((0.0, rng.uniform(0, 3e-5))),
                         graph_launch=rng.choice((None, rng.uniform(0, 3e-5))), n_ops=rng.randint(1, 100),
                         op=rng.uniform(1e-7, 1e-5),
                         graph_compute=rng.choice((None, rng.uniform(0, 1e-3))), depth=rng.randint(1, 4))
        controls = {"sink_mode": SINK_MODES[i % 4], "sink_steps": rng.randint(1, 32),
                    "prep_us": _log_value(rng, 0, 4), "launch_us": _log_value(rng, -1, 2),
                    "op_count": rng.randint(1, 40) if small else rng.randint(1, 400), "op_us": _log_value(rng, -1, 3),
                    "device_async": rng.random() < 0.5}
        out.append((base, controls))
    return out


def _engine(view: SinkTimeline, base: SimParams, controls: dict) -> dict:
    view._base = base
    view.base_costs = view._costs(base)
    for name, value in controls.items():
        setattr(view, name, value)
    p, tl = view.params, view.timeline
    cells = dict(re.findall(r"<td class='ampkit-sink-(\w+)'>(.*?)</td>", view.readout_html))
    return {"p": {k: getattr(p, k) for k in SimParams.__dataclass_fields__},
            "bars": [[e.lane, e.kind, e.start, e.end] for e in view.bars], "total": tl.total, "syncs": tl.syncs,
            "cells": [cells[k] for k in ("step", "rate", "util", "syncs", "speedup")], "title": view.title_text}


_JS = """([cases, titleTemplate]) => cases.map(([c, base]) => {
  const { p, s, text: t } = __sk.shownOf(c, base);
  return { p, bars: s.bars, total: s.tl.total, syncs: s.tl.syncs,
           cells: [t.step, t.rate, t.util, t.syncs, t.speedup], title: __sk.fillText(titleTemplate, t.title) };
})"""


def test_timelines_bars_and_readout_equal_the_engines(sk):
    view = SinkTimeline()
    cases = _settings()
    bad, bars = [], 0
    for start in range(0, len(cases), 100):
        chunk = cases[start:start + 100]
        sent = [[c, SinkTimeline._costs(b)] for b, c in chunk]
        got = sk.evaluate(_JS, [sent, view.text["title"]])
        for (base, controls), js in zip(chunk, got):
            want = _engine(view, base, controls)
            bars += len(want["bars"])
            for key in want:
                if js[key] != want[key]:
                    bad.append(f"{controls} {base}: {key}: js {str(js[key])[:300]} engine {str(want[key])[:300]}")
    assert not bad, f"{len(bad)} differences:\n" + "\n".join(bad[:10])
    assert bars > 3_000


def test_settings_cover_the_engines_branches():
    """The random settings reach what the arithmetic branches on: every mode, both device kinds, the loader's
    queue full (a wait), more bars than the chart draws (merged into blocks), sink sizes to 32. And what lets the page
    merge touching bars as they come (no sort): each lane's events start strictly later than the one before."""
    view = SinkTimeline()
    seen = set()
    for base, controls in _settings()[:200]:
        _engine(view, base, controls)
        for lane in ("loader", "host", "device"):
            starts = [e.start for e in view.timeline.lane_events(lane)]
            assert all(a < b for a, b in zip(starts, starts[1:])), (lane, controls, base)
        seen.add(controls["sink_mode"])
        seen.add(("async", controls["device_async"]))
        if any(e.lane == "loader" and e.kind == "wait" for e in view.timeline.events):
            seen.add("loader waits")
        if len(view.timeline.events) > 1500:
            seen.add("blocks")
    assert seen >= set(SINK_MODES) | {("async", True), ("async", False), "loader waits", "blocks"}


def test_python_number_formats(sk):
    rng = random.Random(5)
    xs = [rng.uniform(0, 1) * 10 ** rng.randint(-8, 9) for _ in range(2000)]
    xs += [rng.randint(0, 400_000) / 8 for _ in range(1000)]             # .x5 ties for .1f, .2f, .0f and .3g
    xs += [k / 64 for k in range(0, 200)] + [0.0, 0.125, 0.375, 0.03125, 2.5, 1234567.5, 999.95, 9.995, 1e16]
    got = sk.evaluate("(xs) => xs.map((x) => [__sk.pyFixed(x, 1), __sk.pyFixed(x, 0, true), __sk.pyFixed(x * 100, 0),"
                      " __sk.pyG(x, 3), __sk.pyFixed(x, 2)])", xs)
    bad = [(x, g) for x, g in zip(xs, got) if g != [f"{x:.1f}", f"{x:,.0f}", f"{x:.0%}"[:-1], f"{x:.3g}", f"{x:.2f}"]]
    assert not bad, f"{len(bad)} of {len(xs)} differ: {bad[:20]}"
