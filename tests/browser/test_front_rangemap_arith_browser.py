"""The range map's front-end arithmetic (``ampkit/widgets/js/rangemap.js``) against the Python engine, in Chromium.

``rangemap.js`` draws notebook 01's :class:`~ampkit.widgets.RangeMap` from the engine's bands; its only arithmetic
is checked here, each formula on well over 1000 inputs:

- the marker: x = log2|value| within an ulp of the engine's (two libraries' log2; the test says why not bit for
  bit), clamped to the axis, and its label ``|x| = {|v|:.4g} = 2^{x:.2f}`` (or the "no place on a log axis" / "off
  the axis" words) as ``RangeMap.marker_label`` writes it for the page's x, for values log-uniform over every
  double (subnormals included), exact powers of two and the values whose log2 lies on a ``.2f`` rounding tie, 0,
  -0, NaN and ±inf; the value travels as Python's repr;
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
from faithful import within_an_ulp

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
    """The page's marker sits within one ulp of the engine's, and its label is the engine's label for the page's x.

    Why not bit for bit: x = log2|value| is V8's ``Math.log2`` on the page and the C library's through Python's
    ``math.log2`` in the engine; both are faithful, so the two are equal or neighbouring doubles (faithful.py says
    why). That is the bound asserted (a wrong formula misses it by millions of ulps). A fresh clone on an AMD EPYC
    host met the case: 0.2795947397097982 gave -1.8385908767561907 on the page, -1.838590876756191 in Python.
    The ``.2f`` in the label can therefore differ at a tie, so the label is checked as ``RangeMap.marker_label``
    computes it from the page's own x (and the clamp as ``min(max(x, lo), hi)``)."""
    assert within_an_ulp(-1.8385908767561907, -1.838590876756191)          # the AMD host's case: accepted
    assert not within_an_ulp(-1.8385908767561907, -1.8385908767561912)     # two ulps: not
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
        if back != repr(x):
            bad.append(f"{x!r}: read back as {back}")
        elif m.marker_x is None:
            if (jx, jpos, label) != (None, None, m.label_text):
                bad.append(f"{x!r}: js {jx} {jpos} {label!r}; engine no marker, {m.label_text!r}")
        else:
            jx, jpos = (math.inf if v == "inf" else v for v in (jx, jpos))
            if not within_an_ulp(jx, m.marker_x) or jpos != min(max(jx, m.lo), m.hi) \
                    or label != m.marker_label(x, jx):
                bad.append(f"{x!r}: js {jx!r} {jpos!r} {label!r}; engine {m.marker_x!r} {m.marker_pos!r} "
                           f"{m.marker_label(x, jx)!r} (for the page's x)")
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
