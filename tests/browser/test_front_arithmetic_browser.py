"""The front ends' arithmetic against the Python engine, in Chromium: ``ampkit/widgets/js/kit.js`` may do trivial
arithmetic (a rounding to a format whose limits the engine sent, a number printed as Python prints it), never a
second copy of a rule; here each formula meets the engine on thousands of inputs.

- ``roundTo`` + ``verdictOf`` (notebook 00's rounding table) against :func:`ampkit.formats.compare_formats` for
  fp32, bf16 and fp16: log-uniform values over the whole slider and beyond, every format's edges (smallest
  subnormal and its half, smallest normal, max, the overflow threshold and the values either side), random bit
  patterns of each format and the midpoints between neighbours (where round-half-even decides);
- ``pyRepr`` and ``pySci`` against Python's ``repr`` and ``f"{x:.2e}"``.
"""
from __future__ import annotations

import math
import random

import pytest
import torch

from ampkit.formats import compare_formats, info
from ampkit.widgets.front import esm, format_limits

pytestmark = pytest.mark.browser

FORMATS = ("float32", "bfloat16", "float16")


@pytest.fixture(scope="module")
def kit(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(type="module", content=esm("rounding") + "\nwindow.__kit = {roundTo, verdictOf, pyRepr, "
                                                                 "pySci, rows};\n")
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
    assert not bad, f"{len(bad)} of {len(xs) * 3} differ:\n" + "\n".join(bad[:20])


def test_python_style_numbers(kit):
    rng = random.Random(1)
    xs = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(1500)]
    xs += [0.1, 1e-08, 100000.0, 1e16, 1e15, 123456789012345.6, 0.0001, 0.00001, 5e-324, 1.7976931348623157e308,
           2.0 ** -24, 65504.0, 1.0, -2.5, 0.0, -0.0]
    got = kit.evaluate("(xs) => xs.map((x) => [__kit.pyRepr(x), __kit.pySci(x, 2)])", xs)
    bad = [(x, r, s) for x, (r, s) in zip(xs, got) if r != repr(x) or s != f"{x:.2e}"]
    assert not bad, bad[:20]
