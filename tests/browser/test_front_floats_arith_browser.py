"""The float explorer's front-end arithmetic (``ampkit/widgets/js/floats.js``) against the Python engine, in Chromium.

``floats.js`` draws notebook 01's :class:`~ampkit.widgets.FloatExplorer` from each format's limits as the engine
sends them (:func:`ampkit.widgets.formats.explorer_formats`); every formula it computes is checked here, each on
well over 1000 random inputs and every format:

- a value as stored (``roundTo``, inf as the engine's cast), its bit pattern, the pattern's value and kind, the
  formula, ulp, both neighbours, the verdict and both errors: against :func:`ampkit.formats.decompose`, for values
  log-uniform over the whole range (subnormals, flush, overflow, saturation), exact powers of two, each format's
  thresholds and their neighbours, 0, -0, NaN and ±inf;
- a bit flip and the flipped pattern's value: against :func:`ampkit.formats.toggle_bit`, for random values and
  every bit position of every format (NaN, inf and subnormal patterns included);
- the notes: explain()'s templates as the page fills them, against :func:`ampkit.formats.explain`;
- typed text: against :func:`ampkit.formats.parse_value` (numbers, powers, hex floats, specials and text that is
  not a number, with its message); a power that Python's ``**`` rounds is left to the engine (the page says so);
- Python's ``.3e`` / ``.1e`` / ``.3g`` as the explorer prints them (kit.js ``pySci``, ``pyG``), exact ties included.
"""
from __future__ import annotations

import math
import random

import pytest

from ampkit.formats import FORMATS, decompose, explain, info, parse_value, toggle_bit
from ampkit.widgets.formats import FloatExplorer, explain_templates, explorer_formats
from ampkit.widgets.front import esm

pytestmark = pytest.mark.browser
NAMES = list(FORMATS)

DESCRIBE = """(d) => [d.sign + d.exponent + d.mantissa, d.kind, __fl.pyRepr(d.stored), __fl.pyRepr(d.abs_error),
  __fl.pyRepr(d.rel_error), __fl.pyRepr(d.ulp), __fl.pyRepr(d.prev), __fl.pyRepr(d.next), d.verdict,
  __fl.formula(d)]"""


@pytest.fixture(scope="module")
def fl(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    names = "explore, decode, flipBit, notesFor, parseTyped, typedError, pyRepr, fromRepr, formula, pySci, pyG"
    page.add_script_tag(type="module", content=esm("floats") + f"\nwindow.__fl = {{{names}}};\n"
                        f"window.__describe = {DESCRIBE};\n")
    page.wait_for_function("window.__fl !== undefined")
    yield page
    page.close()


def _engine(d) -> list:
    return [d.bits, d.kind, repr(d.stored), repr(d.abs_error), repr(d.rel_error), repr(d.ulp), repr(d.prev),
            repr(d.next), d.verdict, d.formula()]


def _values() -> list[float]:
    rng = random.Random(0)
    xs = [rng.choice((1, -1)) * 2.0 ** rng.uniform(-160, 135) for _ in range(2500)]
    xs += [rng.choice((1, -1)) * 2.0 ** rng.randint(-152, 130) for _ in range(400)]
    xs += [rng.choice((1, -1)) * 10 ** rng.uniform(-9, 6) for _ in range(400)]
    xs += [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, -1e39, 5e-324, 1.7976931348623157e308, 0.1]
    for f in NAMES:
        fi = info(f)
        for t in (fi.max, fi.overflow_threshold, fi.smallest_subnormal, fi.flush_threshold, fi.smallest_normal,
                  fi.normal_threshold):
            xs += [s * v for s in (1, -1) for v in (t, math.nextafter(t, 0), math.nextafter(t, math.inf))]
    return xs


def test_stored_values_bits_and_neighbours_match_decompose(fl):
    xs = _values()
    assert len(xs) > 3000
    got = fl.evaluate("([reprs, fmts]) => reprs.map((r) => __fl.explore(__fl.fromRepr(r), fmts, {}).map(__describe))",
                      [[repr(x) for x in xs], explorer_formats(NAMES)])
    bad = [f"{x!r} {f}: js {g}; engine {_engine(decompose(x, f))}" for x, row in zip(xs, got)
           for f, g in zip(NAMES, row) if g != _engine(decompose(x, f))]
    assert not bad, f"{len(bad)} of {len(xs) * len(NAMES)} differ:\n" + "\n".join(bad[:20])


def test_bit_flips_match_toggle_bit(fl):
    rng = random.Random(1)
    cases = []
    for _ in range(1000):
        for f in NAMES:
            x = rng.choice((1, -1)) * 2.0 ** rng.uniform(-155, 135) if rng.random() < 0.9 else \
                rng.choice((math.nan, math.inf, -math.inf, 0.0, -0.0))
            cases.append((repr(x), f, rng.randrange(info(f).bits)))
    got = fl.evaluate("""([cases, fmts]) => { const F = Object.fromEntries(fmts.map((f) => [f.name, f]));
      return cases.map(([r, f, pos]) => { const d = __fl.explore(__fl.fromRepr(r), [F[f]], {})[0];
        const p = __fl.flipBit(d.pattern, pos, F[f]);
        return __describe(__fl.explore(__fl.decode(p, F[f]).value, [F[f]], {fmt: f, pattern: p})[0]); }); }""",
                      [cases, explorer_formats(NAMES)])
    bad = []
    for (r, f, pos), g in zip(cases, got):
        want = _engine(toggle_bit(decompose(float(r), f), pos))
        if g != want:
            bad.append(f"{r} {f} bit {pos}: js {g}; engine {want}")
    assert len(cases) == 5000 and not bad, f"{len(bad)} differ:\n" + "\n".join(bad[:20])


def test_the_page_fills_explains_notes(fl):
    xs = _values()
    for fmts in (NAMES, ["float16", "bfloat16"], ["float8_e4m3fn"]):
        got = fl.evaluate("([reprs, fmts, t]) => reprs.map((r) => { const v = __fl.fromRepr(r);"
                          " return __fl.notesFor(v, __fl.explore(v, fmts, {}), t); })",
                          [[repr(x) for x in xs], explorer_formats(fmts), explain_templates(fmts)])
        bad = [(x, g, explain(x, fmts)) for x, g in zip(xs, got) if g != explain(x, fmts)]
        assert not bad, f"{len(bad)} of {len(xs)} differ: {bad[:5]}"


def _texts() -> list[str]:
    rng = random.Random(2)
    alphabet = "0123456789.eE+-_ ^*()xXpPabcfinINFnaNy'\"\\−"
    out = ["inf", "-inf", "nan", "-NaN", "Infinity", "+inf", "-0", "0", ".5", "5.", "1e-8", "1_000", "2^-24",
           "2**-24", "2^(-24)", "0x1p-24", "-0x1.8p3", "1e", "1..2", "0.1.2", "2^x", "🙂", "", " ", "abc", "0x",
           "0x.p1", "1e400", "-1e-400", "0^-1", "0**0", "2^99999", "0b101", "0o7", "0x1p99999", "1.5^-3", "3^40"]
    for _ in range(1500):
        k = rng.random()
        if k < 0.3:
            out.append(repr(rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)))
        elif k < 0.5:
            base = rng.choice(['2', '10', '3', '1.5', '0.5', '7.25', '0', '16'])
            sign, power = rng.choice(['', '-', '+', ' - ']), rng.choice(['^', '**', ' ^ '])
            out.append(f"{sign}{base}{power}{rng.choice(['', '('])}{rng.randint(-60, 60)}{rng.choice(['', ')'])}")
        elif k < 0.65:
            out.append(float.hex(rng.uniform(-1, 1) * 2.0 ** rng.randint(-1080, 1030)) if rng.random() < 0.8
                       else f"0x{rng.randrange(1 << 40):x}p{rng.randint(-1100, 1100)}")
        else:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return out


def test_typed_text_is_read_as_parse_value_reads_it(fl):
    texts = _texts()
    words = FloatExplorer(show_map=False).text
    got = fl.evaluate("([texts, words]) => texts.map((s) => { const g = __fl.parseTyped(s);"
                      " return g.inexact ? ['engine'] : g.error ? ['e', __fl.typedError(g.error, words)]"
                      " : ['v', __fl.pyRepr(g.value)]; })", [texts, words])
    bad, engine = [], 0
    for s, g in zip(texts, got):
        try:
            want = ["v", repr(parse_value(s))]
        except ValueError as exc:
            want = ["e", str(exc)]
        if g == ["engine"]:
            engine += 1
            assert "^" in s or "**" in s, s          # only powers are left to the engine
        elif g != want:
            bad.append(f"{s!r}: js {g}; engine {want}")
    assert len(texts) - engine > 1000 and not bad, f"{len(bad)} differ:\n" + "\n".join(bad[:20])


def test_python_style_e_and_g(fl):
    rng = random.Random(3)
    xs = [rng.choice((1, -1)) * 2.0 ** rng.uniform(-160, 130) for _ in range(2000)]
    xs += [m * 2.0 ** k for k in range(-160, 130) for m in (1, 3, 5)] + [0.0, 9.9995, 0.00125, 2.5e-5, 1e-300]
    got = fl.evaluate("(xs) => xs.map((x) => [__fl.pySci(x, 3), __fl.pySci(x, 1), __fl.pyG(x, 3)])", xs)
    bad = [(x, g) for x, g in zip(xs, got) if g != [f"{x:.3e}", f"{x:.1e}", f"{x:.3g}"]]
    assert not bad, f"{len(bad)} of {len(xs)} differ: {bad[:20]}"
