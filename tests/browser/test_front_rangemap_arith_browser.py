"""The range map's front-end arithmetic (``ampkit/widgets/js/rangemap.js``) against the Python engine, in Chromium.

``rangemap.js`` draws notebook 01's :class:`~ampkit.widgets.RangeMap` from the engine's bands; its only arithmetic
is checked here, each formula on well over 1000 inputs:

- the marker: x = log2|value|, clamped to the axis, and its label ``|x| = {|v|:.4g} = 2^{x:.2f}`` (or the "no place
  on a log axis" / "off the axis" words) against ``RangeMap.set_value``'s ``marker_x``, ``marker_pos`` and
  ``label_text``, for values log-uniform over every double (subnormals included), exact powers of two and the
  values whose log2 lies on a ``.2f`` rounding tie, 0, -0, NaN and ±inf; the value travels as Python's repr;
- Python's ``.4g`` and ``.2f`` (``pyG``, ``pyFixed``) against Python on random numbers and exact ties;
- the histogram's bars: the engine's bin edges at scale 1 moved by log2(scale) against ``RangeMap.hist_edges``
  after ``set_scale``, for random histograms and scales (every slider position, and scales that are not powers
  of two).
"""
from __future__ import annotations

import math
import random

import pytest
import torch

from ampkit.widgets.front import esm
from ampkit.widgets.range_map import RangeMap

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def rm(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(type="module", content=esm("rangemap") + "\nwindow.__rm = {marker, parseRepr, pyG, pyFixed, "
                                                                  "shiftedEdges, pyRepr};\n")
    page.wait_for_function("window.__rm !== undefined")
    yield page
    page.close()


def _values() -> list[float]:
    rng = random.Random(0)
    xs = [rng.choice((1, -1)) * 2.0 ** rng.uniform(-1074, 1023) for _ in range(1500)]
    xs += [rng.choice((1, -1)) * 10 ** rng.uniform(-12, 8) for _ in range(800)]
    xs += [2.0 ** k for k in range(-1074, 1024, 7)]                    # exact powers of two
    xs += [2.0 ** (k + j / 8) for k in range(-40, 40, 3) for j in range(8)]   # log2 on a .xx5 tie (j odd)
    xs += [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 65504.0, 0.1, 1e-300]
    return xs


def test_marker_and_its_label_match_the_engine(rm):
    m = RangeMap(("fp16", "bf16"))
    xs = _values()
    assert len(xs) > 2500
    got = rm.evaluate("([reprs, lo, hi, text]) => reprs.map((r) => { const v = __rm.parseRepr(r);"
                      " const m = __rm.marker(v, lo, hi, text); return [__rm.pyRepr(v), m.x === Infinity ? 'inf' :"
                      " m.x, m.pos === Infinity ? 'inf' : m.pos, m.label]; })",
                      [[repr(x) for x in xs], m.lo, m.hi, m.text])
    bad = []
    for x, (back, jx, jpos, label) in zip(xs, got):
        m.set_value(x)
        want = ["inf" if v == math.inf else v for v in (m.marker_x, m.marker_pos)]
        if back != repr(x) or [jx, jpos] != want or label != m.label_text:
            bad.append(f"{x!r}: js {back} {jx} {jpos} {label!r}; engine {want} {m.label_text!r}")
    assert not bad, f"{len(bad)} of {len(xs)} differ:\n" + "\n".join(bad[:20])


def test_python_style_g_and_fixed(rm):
    rng = random.Random(1)
    xs = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(2000)]
    xs += [rng.randint(-4000, 4000) / 8 for _ in range(1000)]          # .xx5 ties for .2f, and for .4g
    xs += [k / 16 for k in range(-200, 200)] + [0.0, -0.0, 9.9995, 99995.0, 0.00099995, 1e-5, 1e-4, 9999.5, 1e16]
    got = rm.evaluate("(xs) => xs.map((x) => [__rm.pyG(x, 4), __rm.pyFixed(x, 2), __rm.pyFixed(x, 0)])", xs)
    bad = [(x, g) for x, g in zip(xs, got) if g != [f"{x:.4g}", f"{x:.2f}", f"{x:.0f}"]]
    assert not bad, f"{len(bad)} of {len(xs)} differ: {bad[:20]}"


def test_histogram_shift_matches_the_engine(rm):
    gen = torch.Generator().manual_seed(2)
    rng = random.Random(2)
    cases = []
    for _ in range(25):
        values = torch.randn(200, generator=gen) * 10 ** rng.uniform(-8, 2)
        m = RangeMap(("fp16",), values=values)
        scales = [2.0 ** k for k in range(0, 33)] + [rng.uniform(0.5, 2.0) * 2.0 ** rng.randint(0, 40)
                                                     for _ in range(10)]
        for scale in scales:
            m.set_scale(scale)
            cases.append((m.hist["edges"], m.scale_exp, m.hist_edges))
    assert len(cases) >= 1000
    got = rm.evaluate("(cases) => cases.map(([edges, k]) => __rm.shiftedEdges(edges, k))",
                      [[e, k] for e, k, _ in cases])
    bad = [(k, js, want) for (_, k, want), js in zip(cases, got) if js != want]
    assert not bad, f"{len(bad)} of {len(cases)} differ: {bad[:5]}"
