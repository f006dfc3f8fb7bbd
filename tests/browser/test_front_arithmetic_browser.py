"""The front ends' arithmetic against the Python engine, in Chromium: ``ampkit/widgets/js/kit.js`` may do trivial
arithmetic (a rounding to a format whose limits the engine sent, a number printed as Python prints it), never a
second copy of a rule; here each formula meets the engine on thousands of inputs.

- ``roundTo`` + ``verdictOf`` (notebook 00's rounding table) against :func:`ampkit.formats.compare_formats` for
  fp32, bf16, fp16, fp8 e4m3fn and e5m2: log-uniform values over the whole slider and beyond, every format's edges
  (smallest subnormal and its half, smallest normal, max, the overflow threshold and the values either side),
  random bit patterns of each format (every pattern of the fp8 formats) and the midpoints between neighbours
  (where round-half-even decides; in fp8 also where torch's double rounding through float32 shows: e4m3fn
  saturates, so only its flush line tells ``format_limits``' ``via_float32``);
- every printer of the kit — ``pyRepr``, ``pySci``, ``pyFixed`` (with ``,``), ``pyG``, ``pyStrRepr``,
  ``fromRepr`` — against Python's own ``repr`` / ``format`` on thousands of random numbers and exact ties
  (``m * 2**k``, ``k / 8``, ``k / 64``: decimal ties that round half to even on the exact binary value);
- ``kernelPresence`` on a stand-in model: absent until the kernel's "here", then present once (never by a timer).
"""
from __future__ import annotations

import math
import random

import pytest
import torch

from ampkit.formats import compare_formats, info
from ampkit.widgets.front import esm, format_limits

pytestmark = pytest.mark.browser

FORMATS = ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


@pytest.fixture(scope="module")
def kit(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    names = "roundTo, verdictOf, pyRepr, pySci, pyFixed, pyG, pyStrRepr, fromRepr, kernelPresence, rows"
    page.add_script_tag(type="module", content=esm("rounding") + f"\nwindow.__kit = {{{names}}};\n")
    page.wait_for_function("window.__kit !== undefined")
    yield page
    page.close()


def _edges(fmt: str) -> list[float]:
    fi = info(fmt)
    sub, normal = fi.smallest_subnormal, fi.smallest_normal
    out = [sub, sub / 2, sub * 0.49, sub * 0.51, sub * 1.5, normal, normal * (1 - fi.eps / 4), fi.max,
           fi.overflow_threshold, math.nextafter(fi.overflow_threshold, 0), math.nextafter(fi.overflow_threshold,
                                                                                            math.inf)]
    return out + [-x for x in out]


def _patterns(fmt: str, n: int, rng: random.Random) -> list[float]:
    """Random finite values of ``fmt`` (from random bit patterns) and the midpoints to their next neighbour."""
    fi = info(fmt)
    bits = fi.bits
    if bits == 8:   # every pattern, and the midpoints between neighbours (and their float64 neighbours)
        raw = torch.arange(-128, 128, dtype=torch.int8)
        vals = sorted({float(v) for v in raw.view(fi.dtype).float().double() if math.isfinite(float(v))})
        mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
        return vals + mids + [math.nextafter(m, s) for m in mids for s in (0.0, math.copysign(math.inf, m))]
    int_dtype = {16: torch.int16, 32: torch.int32}[bits]
    raw = torch.tensor([rng.getrandbits(bits) - (1 << (bits - 1)) for _ in range(n)], dtype=int_dtype)
    vals = [float(v) for v in raw.view(fi.dtype).double() if math.isfinite(float(v))]
    out = []
    for v in vals:
        up = float(torch.nextafter(torch.tensor(v, dtype=fi.dtype), torch.tensor(math.inf, dtype=fi.dtype)))
        out.append(v)
        if math.isfinite(up):
            out.append((v + up) / 2)
    return out


def _inputs() -> list[float]:
    rng = random.Random(0)
    xs = [10 ** rng.uniform(-12, 8) * rng.choice((1, -1)) for _ in range(1500)]
    xs += [10 ** (k * 0.05) for k in range(-180, 121)]               # every slider position
    for fmt in FORMATS:
        xs += _edges(fmt) + _patterns(fmt, 400, rng)
    return xs


def test_rounding_and_verdicts_match_the_engine(kit):
    xs = _inputs()
    assert len(xs) > 3000
    limits = [format_limits(f) for f in FORMATS]
    got = kit.evaluate("([xs, formats]) => xs.map((x) => __kit.rows(x, formats).map((r) => "
                       "[__kit.pyRepr(r.stored), r.verdict, r.rel]))", [xs, limits])
    bad = []
    for x, js_rows in zip(xs, got):
        for row, (stored, verdict, rel) in zip(compare_formats(x, FORMATS), js_rows):
            want_rel = row.rel_error
            rel_ok = (math.isnan(rel) and math.isnan(want_rel)) or rel == want_rel
            if stored != repr(row.stored) or verdict != row.verdict or not rel_ok:
                bad.append(f"{x!r} {row.fmt}: js {stored} {verdict} {rel}; engine {row.stored!r} {row.verdict} "
                           f"{want_rel}")
    assert not bad, f"{len(bad)} of {len(xs) * len(FORMATS)} differ:\n" + "\n".join(bad[:20])


def _numbers() -> list[float]:
    """Random numbers over the printers' whole range, and exact decimal ties (binary fractions)."""
    rng = random.Random(1)
    xs = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(2000)]
    xs += [rng.choice((1, -1)) * 2.0 ** rng.uniform(-160, 130) for _ in range(1000)]
    xs += [m * 2.0 ** k for k in range(-160, 130) for m in (1, 3, 5, -7)]          # 2**-7 as .3e: a tie
    xs += [rng.randint(-400_000, 400_000) / 8 for _ in range(1000)]                 # .x5 ties for .1f, .2f, .0f
    xs += [k / 64 for k in range(-200, 200)] + [k / 16 for k in range(-200, 200)]
    xs += [0.1, 1e-08, 100000.0, 1e16, 1e15, 123456789012345.6, 0.0001, 0.00001, 5e-324, 1.7976931348623157e308,
           2.0 ** -24, 2.0 ** -7, 65504.0, 1.0, -2.5, 0.0, -0.0, 9.9995, 99995.0, 0.00099995, 9999.5, 0.00125, 2.5e-5,
           1234567.5, 999.95, 9.995, 2.0 ** 60, 2.0 ** 80 + 2.0 ** 28]
    return xs


#: (the kit's call, Python's format) for each printer and precision the views use (and a few more)
PRINTERS = [("pyRepr(x)", repr)] + [
    (f"pySci(x, {n})", lambda x, n=n: f"{x:.{n}e}") for n in (0, 1, 2, 3, 6)] + [
    (f"pyFixed(x, {n})", lambda x, n=n: f"{x:.{n}f}") for n in (0, 1, 2, 3)] + [
    ("pyFixed(x, 0, true)", lambda x: f"{x:,.0f}"), ("pyFixed(x, 2, true)", lambda x: f"{x:,.2f}")] + [
    (f"pyG(x, {p})", lambda x, p=p: f"{x:.{p}g}") for p in (1, 3, 4, 6)]


@pytest.mark.parametrize("call, python", PRINTERS, ids=[c for c, _ in PRINTERS])
def test_printers_match_python(kit, call, python):
    xs = _numbers()
    assert len(xs) > 5000
    got = kit.evaluate(f"(xs) => xs.map((x) => __kit.{call})", xs)
    bad = [(x, g, python(x)) for x, g in zip(xs, got) if g != python(x)]
    assert not bad, f"{call}: {len(bad)} of {len(xs)} differ: {bad[:20]}"


def test_reprs_read_back(kit):
    xs = _numbers() + [math.inf, -math.inf]
    got = kit.evaluate("(xs) => xs.map((x) => __kit.fromRepr(x))", [repr(x) for x in xs])
    assert [repr(float(g)) for g in got] == [repr(x) for x in xs]        # -0.0 and inf included
    assert kit.evaluate("Number.isNaN(__kit.fromRepr('nan'))")


def test_string_repr_matches_python(kit):
    rng = random.Random(4)
    alphabet = "ab'\"\\\n\r\t\x00\x1f\x7f é中𝔸 "
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(1500)]
    texts += ["", "'", '"', "'\"", "\\", "2**-7"]
    got = kit.evaluate("(ts) => ts.map((t) => __kit.pyStrRepr(t))", texts)
    bad = [(t, g) for t, g in zip(texts, got) if g != repr(t)]
    assert not bad, f"{len(bad)} of {len(texts)} differ: {bad[:20]}"


def test_kernel_presence_waits_for_the_kernels_answer(kit):
    """No answer, no kernel (however long the page waits); "here" makes it present, once; the static page's
    model, whose send throws, is simply absent."""
    got = kit.evaluate("""async () => {
      const fake = (throws) => { const fns = new Set(), sent = [];
        return { sent, fns, on: (e, f) => fns.add(f), off: (e, f) => fns.delete(f),
                 send: (m) => { if (throws) throw new Error("no comm"); sent.push(m); },
                 answer: (m) => [...fns].forEach((f) => f(m)) }; };
      const m = fake(false), calls = [];
      const p = __kit.kernelPresence(m, (v) => calls.push(v));
      await new Promise((r) => setTimeout(r, 50));
      const before = p.here;
      m.answer({ event: "progress" });
      const other = p.here;
      m.answer({ event: "here" }); m.answer({ event: "here" });
      const after = p.here;
      p.stop();
      const s = fake(true), q = __kit.kernelPresence(s);
      return { sent: m.sent, before, other, after, calls, left: m.fns.size, static: q.here };
    }""")
    assert got == {"sent": [{"event": "hello"}], "before": False, "other": False, "after": True, "calls": [True],
                   "left": 0, "static": False}
