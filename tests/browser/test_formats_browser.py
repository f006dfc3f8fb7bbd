"""Notebook 01 in a real JupyterLab: type values into the float explorer, click a bit, check the bits shown; move
the loss-scale slider of the range map (drawn in the browser, ampkit/widgets/js/rangemap.js) and check what is
drawn against the engine: the band edges (ampkit.formats.range_bands), the bars (the histogram's edges moved by
log2(scale)), the marker (log2|value|) and the readout (classify's line at that scale) — run, and from the saved
notebook with no kernel behind it."""
import json
import math

import pytest

from ampkit.formats import range_bands

pytestmark = pytest.mark.browser

FP16_BITS = ".ampkit-bits-float16 .ampkit-bitstring"
BF16_BITS = ".ampkit-bits-bfloat16 .ampkit-bitstring"
TEXT_INPUT = ".ampkit-explorer-text input"
MESSAGE = ".ampkit-explorer-message"
FP16_ROW = ".ampkit-explorer-summary .ampkit-row-float16"


def shown(page, selector: str) -> str:
    """Text of the first match, scrolled into view (JupyterLab does not render text of off-screen cells)."""
    loc = page.locator(selector).first
    loc.scroll_into_view_if_needed()
    return (loc.text_content() or "").strip()


def wait_for_text(page, selector: str, old: str, timeout_ms: int = 30_000) -> str:
    """Wait until the first match's textContent differs from ``old``; return it."""
    page.wait_for_function(
        "([sel, old]) => { const e = document.querySelector(sel); return e && e.textContent.trim() !== old; }",
        arg=[selector, old], timeout=timeout_ms)
    return shown(page, selector)


def type_value(page, text: str) -> None:
    box = page.locator(TEXT_INPUT).first
    box.scroll_into_view_if_needed()
    box.fill(text)
    box.press("Enter")


# Per format, how far each transparent bit button is from the bit cell it must cover (x, y, width, height in px).
MISALIGNED = """() => { const out = {};
  for (const row of document.querySelectorAll('[class*=ampkit-bits-]')) {
    const cells = [...row.querySelectorAll('.ampkit-cell')].map(e => e.getBoundingClientRect());
    const btns = [...row.querySelectorAll('.ampkit-bit')].map(e => e.getBoundingClientRect());
    const name = row.className.match(/ampkit-bits-(\\S+)/)[1];
    out[name] = cells.length === btns.length && cells.length > 0 ? cells.map((c, i) =>
      Math.max(Math.abs(c.x - btns[i].x), Math.abs(c.y - btns[i].y), Math.abs(c.width - btns[i].width),
               Math.abs(c.height - btns[i].height))).filter(d => d > 1) : ['count'];
  } return out; }"""
MARKER_LEFT = "() => parseFloat(document.querySelector('.ampkit-rangemap .ampkit-marker').getAttribute('x1'))"
# What a range map draws, read from its SVG: bands, bars, marker, its label, the readout and the summary line.
DRAWN = """(i) => { const root = document.querySelectorAll('.jp-OutputArea .ampkit-rangemap')[i];
  const num = (e, a) => parseFloat(e.getAttribute(a));
  const m = root.querySelector('.ampkit-marker'), label = root.querySelector('.ampkit-marker-label');
  return JSON.stringify({
    bands: [...root.querySelectorAll('.ampkit-band')].map(e => ({fmt: e.dataset.format, band: e.dataset.band,
      lo: +e.dataset.lo, hi: +e.dataset.hi, x: num(e, 'x'), w: num(e, 'width')})),
    bars: [...root.querySelectorAll('.ampkit-bar')].map(e => ({lo: +e.dataset.lo, hi: +e.dataset.hi,
      count: +e.dataset.count, x: num(e, 'x')})),
    shift: root.querySelector('.ampkit-hist') ? root.querySelector('.ampkit-hist').dataset.shift : null,
    marker: m ? {x: +m.dataset.x, px: num(m, 'x1')} : null, label: label ? label.textContent : null,
    readout: (root.querySelector('.ampkit-scale-readout') || {}).textContent || null,
    summary: (root.querySelector('.ampkit-scale-summary') || {}).textContent || null}); }"""


def drawn(page, index: int) -> dict:
    """What the ``index``-th range map on the page draws (see ``DRAWN``)."""
    page.locator(".jp-OutputArea .ampkit-rangemap").nth(index).scroll_into_view_if_needed()
    return json.loads(page.evaluate(DRAWN, index))


def check_geometry(d: dict, fmts: tuple[str, ...], lo: float, hi: float) -> float:
    """The bands drawn are the engine's (range_bands), and every band, bar and the marker sits where its log2 value
    is on one linear axis (derived from the normal band of the first format). Returns the pixels per octave."""
    for fmt in fmts:
        b = range_bands(fmt, lo, hi)
        want = {"flushed": b.flush, "subnormal": b.subnormal, "normal": b.normal, "overflow": b.overflow}
        got = {e["band"]: (e["lo"], e["hi"]) for e in d["bands"] if e["fmt"] == fmt}
        assert got == {k: v for k, v in want.items() if v[1] > v[0]}, fmt
    ref = next(e for e in d["bands"] if e["fmt"] == fmts[0] and e["band"] == "normal")
    per = ref["w"] / (ref["hi"] - ref["lo"])

    def px(x: float) -> float:
        return ref["x"] + (x - ref["lo"]) * per

    for e in d["bands"]:
        assert e["x"] == pytest.approx(px(e["lo"]), abs=0.01) and e["w"] == pytest.approx(px(e["hi"]) - px(e["lo"]),
                                                                                        abs=0.01)
    for bar in d["bars"]:
        assert bar["x"] == pytest.approx(px(bar["lo"]), abs=0.01)
    if d["marker"]:
        assert d["marker"]["px"] == pytest.approx(px(d["marker"]["x"]), abs=0.01)
    return per


def test_explorer_shows_the_bits_of_a_typed_value(lab):
    page = lab.open_and_run("01_fp16_range.ipynb")
    start = shown(page, FP16_BITS)
    assert start == "0 01011 1001100110"  # 0.1 in fp16
    assert shown(page, BF16_BITS) == "0 01111011 1001101"
    # every clickable (transparent) bit button lies exactly on the coloured bit cell it flips
    page.locator(".ampkit-explorer").first.scroll_into_view_if_needed()
    misaligned = page.evaluate(MISALIGNED)
    assert sorted(misaligned) == sorted(["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
    assert all(v == [] for v in misaligned.values()), misaligned
    # a 1 bit is drawn in the dark field colour, a 0 bit in the light one
    sign = page.locator(".ampkit-bits-float16 .ampkit-cell").first
    assert sign.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(253, 226, 226)"  # 0: light red
    marker_x = page.evaluate(MARKER_LEFT)
    lab.screenshot(page, "01_fp16_range-explorer-0.1")

    # fp16's largest number: exponent 11110, mantissa all ones
    row = shown(page, FP16_ROW)
    type_value(page, "65504")
    bits = wait_for_text(page, FP16_BITS, start)
    row = wait_for_text(page, FP16_ROW, row)
    assert bits == "0 11110 1111111111"
    assert "65504.0" in row and "exact" in row
    # the range map's marker (drawn in the browser) moved right: log2(65504) is about 19.3 octaves above 0.1
    page.wait_for_function(f"() => ({MARKER_LEFT})() > {marker_x} + 5", timeout=30_000)
    d = drawn(page, 0)
    assert d["marker"]["x"] == math.log2(65504) and d["label"] == f"|x| = 6.55e+04 = 2^{math.log2(65504):.2f}"
    check_geometry(d, ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"), -155.0, 135.0)
    exp_cell = page.locator(".ampkit-bits-float16 .ampkit-cell").nth(1)
    assert exp_cell.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(9, 105, 218)"  # 1: dark blue

    # one more ulp's worth overflows: inf is exponent all ones, mantissa zero
    type_value(page, "70000")
    bits = wait_for_text(page, FP16_BITS, bits)
    row = wait_for_text(page, FP16_ROW, row)
    assert bits == "0 11111 0000000000"
    assert "overflow to inf" in row

    # clicking fp16's sign bit flips it: -inf
    page.locator(".ampkit-bits-float16 .ampkit-bit").first.click()
    bits = wait_for_text(page, FP16_BITS, bits)
    assert bits == "1 11111 0000000000"
    assert page.locator(TEXT_INPUT).first.input_value() == "-inf"

    # text that is not a number: a message in the widget, no traceback, bits unchanged
    before_msg = shown(page, MESSAGE)
    type_value(page, "abc")
    msg = wait_for_text(page, MESSAGE, before_msg)
    assert "not a number" in msg
    assert shown(page, FP16_BITS) == bits
    lab.screenshot(page, "01_fp16_range-explorer-after")
    lab.assert_clean(page)


def _engine_grad_map():
    """The notebook's gradient map, rebuilt by running the notebook's own cells (imports, the model, the map)."""
    from pathlib import Path

    from ampkit.widgets import RangeMap

    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "01_fp16_range.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    ns: dict = {"RangeMap": RangeMap}
    for src in code[:1] + [c for c in code if c.startswith("model = build_model")] + \
            [c for c in code if c.startswith("grad_map = RangeMap")]:
        exec(src, ns)  # noqa: S102 - the notebook's own code
    return ns["grad_map"]


def _check_scale(d: dict, m, k: int) -> None:
    """The page at loss scale 2**k shows the engine's numbers: bars at the engine's edges, its summary line."""
    m.scale_exp = k
    assert d["shift"] == str(k) and d["readout"] == str(2 ** k)
    assert d["summary"] == m.summary, (d["summary"], m.summary)
    edges = m.hist_edges
    want = [(edges[i], edges[i + 1], c) for i, c in enumerate(m.hist["counts"]) if c > 0]
    assert [(b["lo"], b["hi"], b["count"]) for b in d["bars"]] == want
    check_geometry(d, ("float16",), m.lo, m.hi)


def test_loss_scale_slider_moves_the_gradient_histogram(lab):
    m = _engine_grad_map()
    page = lab.open_and_run("01_fp16_range.ipynb")
    maps = page.locator(".jp-OutputArea .ampkit-rangemap")
    assert maps.count() == 2  # the explorer's range map and the gradient map
    d = drawn(page, 1)
    _check_scale(d, m, 0)
    # the range inputs of the views drawn in the browser: the loss-scale slider is the only one
    lab.move_range(page, 0, "ArrowRight", presses=8)
    page.wait_for_function("() => document.querySelectorAll('.ampkit-hist')[0].dataset.shift === '8'",
                           timeout=30_000)
    d8 = drawn(page, 1)
    _check_scale(d8, m, 8)
    per = check_geometry(d8, ("float16",), m.lo, m.hi)
    assert d8["bars"][0]["x"] - d["bars"][0]["x"] == pytest.approx(8 * per, abs=0.01)   # 8 octaves right
    assert d8["summary"].startswith("scale 256 = 2^8 · fp16: flushed")
    lab.screenshot(page, "01_fp16_range-gradient-map", near=".ampkit-scale-summary")
    lab.assert_clean(page)


def test_gradient_map_moves_without_a_kernel(lab):
    """The saved notebook's gradient map, nothing run: every key press redraws from the saved state alone, and
    what is drawn is what the engine computes for that scale."""
    m = _engine_grad_map()
    page = lab.open_saved("01_fp16_range.ipynb")
    page.locator(".jp-OutputArea .ampkit-rangemap").first.wait_for(timeout=60_000)
    assert page.locator(".jp-OutputArea .ampkit-rangemap").count() == 1   # the explorer needs a kernel: its still
    _check_scale(drawn(page, 0), m, 0)
    k = 0
    for key, presses in (("ArrowRight", 5), ("ArrowRight", 9), ("ArrowLeft", 3), ("End", 1), ("Home", 1),
                         ("PageUp", 1)):
        lab.move_range(page, 0, key, presses=presses)
        want = {"ArrowRight": k + presses, "ArrowLeft": k - presses, "End": 32, "Home": 0}.get(key)
        d = drawn(page, 0)
        k = int(d["shift"]) if want is None else want
        assert d["shift"] == str(k), (key, d["shift"], k)
        _check_scale(d, m, k)
    lab.screenshot(page, "01_fp16_range-no-kernel", near=".ampkit-scale-summary")
