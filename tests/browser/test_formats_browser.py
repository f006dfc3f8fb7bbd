"""Notebook 01 in a real JupyterLab. The float explorer is drawn in the browser (ampkit/widgets/js/floats.js): type
values, move its log slider with the keyboard, click bits, and check that what is drawn (every format's bits, the
formula, the table's numbers, the notes, the range map's marker beside it) equals what the engine computes
(ampkit.formats.decompose / from_bits / explain) — run, and from the saved notebook with no kernel behind it. The
gradient range map (ampkit/widgets/js/rangemap.js): move its loss-scale slider and check the bands, the bars, the
marker and the readout against the engine, run and kernel-less."""
import json
import math
import random

import pytest
from faithful import within_an_ulp

from ampkit.formats import FORMATS, decompose, explain, from_bits, info, range_bands, toggle_bit
from ampkit.i18n import tr
from ampkit.widgets.formats import VERDICT_COLOURS, format_label  # noqa: F401 - the words the page shows

pytestmark = pytest.mark.browser

EXPLORER = ".jp-OutputArea .ampkit-explorer"
TEXT_INPUT = ".ampkit-explorer-text"
SLIDER = "input.ampkit-explorer-slider"

# What the explorer draws, read from the page: its value, every format's bits and formula, the table, the notes.
EXPLORED = """() => { const root = document.querySelector('.jp-OutputArea .ampkit-explorer');
  const rows = [...root.querySelectorAll('.ampkit-bits-row')].map(r => ({
    bits: r.querySelector('.ampkit-bitstring').dataset.bits,
    cells: [...r.querySelectorAll('.ampkit-cell')].map(c => [c.textContent, c.className]),
    formula: r.querySelector('.ampkit-formula').textContent}));
  const table = [...root.querySelectorAll('.ampkit-explorer-summary tr')].slice(1).map(
    tr => [...tr.querySelectorAll('td')].map(td => td.textContent));
  const map = root.querySelector('.ampkit-rangemap .ampkit-marker');
  return JSON.stringify({value: root.dataset.value, flipped: JSON.parse(root.dataset.flipped || '{}'), rows, table,
    notes: [...root.querySelectorAll('.ampkit-explorer-message li')].map(li => li.textContent),
    message: root.querySelector('.ampkit-explorer-message').textContent,
    box: root.querySelector('.ampkit-explorer-text').value,
    marker: map ? +map.dataset.x : null}); }"""


def explored(page) -> dict:
    return json.loads(page.evaluate(EXPLORED))


def _short(x: float) -> str:
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.3e}" if x != 0 else "0"


def _formula(d) -> str:
    text = d.formula()
    return "= " + (text.replace(" (binary) × 2^", "₂ × 2") if " (binary) × 2^" in text else text)


def engine_state(value: float, flipped: dict) -> dict:
    """What the engine shows for ``value`` (and a flipped pattern, shown as from_bits reads it)."""
    return {f: from_bits(flipped["pattern"], f) if flipped.get("fmt") == f else decompose(value, f) for f in FORMATS}


def check_explorer(page, value: float | None = None) -> dict:
    """Everything the explorer draws equals the engine's numbers for the value it shows; returns what it drew."""
    d = explored(page)
    v = float(d["value"])
    if value is not None:
        assert d["value"] == repr(value), (d["value"], value)
    state = engine_state(v, d["flipped"])
    for (name, want), row, cells in zip(state.items(), d["rows"], d["table"]):
        assert row["bits"] == want.bits, (name, v, row["bits"], want.bits)
        assert [c[0] for c in row["cells"]] == list(want.bits)
        fields = [c[1].split()[1].removeprefix("ampkit-") for c in row["cells"]]
        assert fields == want.fields and [("ampkit-one" in c[1]) for c in row["cells"]] == [b == "1" for b in want.bits]
        assert row["formula"] == _formula(want), (name, row["formula"])
        assert cells == [format_label(name), repr(want.stored), tr(want.kind), tr(want.verdict), _short(want.abs_error),
                         _short(want.rel_error), _short(want.ulp), repr(want.prev), repr(want.next)], (name, v, cells)
    notes = explain(v, list(FORMATS))
    assert d["notes"] == notes or (not notes and "Every format just rounds" in d["message"]), (v, d["notes"], notes)
    if math.isfinite(v) and v != 0:
        # the page's Math.log2 against Python's: within an ulp, not bit for bit (faithful.py)
        assert within_an_ulp(d["marker"], min(max(math.log2(abs(v)), -155.0), 135.0)), (v, d["marker"])
    return d


def type_value(page, text: str) -> None:
    box = page.locator(TEXT_INPUT).first
    box.scroll_into_view_if_needed()
    box.fill(text)
    box.press("Enter")


def wait_value(page, old: str, timeout_ms: int = 30_000) -> None:
    page.wait_for_function("(old) => document.querySelector('.jp-OutputArea .ampkit-explorer').dataset.value !== old",
                           arg=old, timeout=timeout_ms)


def click_bit(page, fmt: str, pos: int) -> None:
    page.locator(f"{EXPLORER} .ampkit-bits-{fmt} .ampkit-cell").nth(pos).click()


def random_session(page, seed: int, moves: int = 12) -> None:
    """Random slider keys, typed values and bit clicks; after each, what is drawn is the engine's."""
    rng = random.Random(seed)
    slider = page.locator(f"{EXPLORER} {SLIDER}").first
    for _ in range(moves):
        before = explored(page)
        what = rng.choice(("keys", "type", "bit"))
        if what == "keys":
            slider.scroll_into_view_if_needed()
            slider.focus()
            for _ in range(rng.randint(1, 4)):
                slider.press(rng.choice(("ArrowRight", "ArrowLeft", "PageUp", "PageDown", "ArrowUp")))
        elif what == "type":
            x = rng.choice((1, -1)) * 2.0 ** rng.uniform(-152, 131)
            type_value(page, repr(x))
            if repr(x) != before["value"]:
                wait_value(page, before["value"])
            check_explorer(page, x)
            continue
        else:
            fmt = rng.choice(list(FORMATS))
            pos = rng.randrange(info(fmt).bits)
            click_bit(page, fmt, pos)
            want = toggle_bit(engine_state(float(before["value"]), before["flipped"])[fmt], pos)
            d = check_explorer(page)
            assert d["flipped"] == {"fmt": fmt, "pattern": want.pattern}
            assert d["rows"][list(FORMATS).index(fmt)]["bits"] == want.bits
            continue
        check_explorer(page)


def test_explorer_draws_the_engines_numbers(lab):
    page = lab.open_and_run("01_fp16_range.ipynb")
    page.locator(EXPLORER).first.wait_for()
    page.locator(EXPLORER).first.scroll_into_view_if_needed()
    page.wait_for_selector(f"{EXPLORER} .ampkit-rangemap .ampkit-marker", state="attached")
    d = check_explorer(page, 0.1)
    assert d["rows"][1]["bits"] == "0010111001100110"   # 0.1 in fp16
    lab.screenshot(page, "01_fp16_range-explorer-0.1", near=EXPLORER)

    type_value(page, "65504")
    wait_value(page, "0.1")
    d = check_explorer(page, 65504.0)
    assert d["rows"][1]["bits"] == "0111101111111111" and "exact" in d["table"][1]
    type_value(page, "70000")
    wait_value(page, "65504.0")
    d = check_explorer(page, 70000.0)
    assert d["rows"][1]["bits"] == "0111110000000000" and "overflow to inf" in d["table"][1]
    click_bit(page, "float16", 0)                      # fp16's sign bit: -inf, the box shows it
    wait_value(page, "70000.0")
    d = check_explorer(page, -math.inf)
    assert d["rows"][1]["bits"] == "1111110000000000" and d["box"] == "-inf"
    click_bit(page, "float16", 15)                     # mantissa nonzero under an all-ones exponent: NaN, kept
    wait_value(page, "-inf")
    d = check_explorer(page)
    assert d["value"] == "nan" and d["rows"][1]["bits"] == "1111110000000001"
    # a power that Python's ** rounds: the kernel reads it (the engine is the truth)
    type_value(page, "10^23")
    wait_value(page, "nan")
    check_explorer(page, 10.0 ** 23)
    # text that is not a number: a message in the view, no traceback, bits unchanged
    type_value(page, "abc")
    page.wait_for_function("() => /not a number/.test(document.querySelector('.ampkit-explorer-message').textContent)")
    assert explored(page)["value"] == repr(10.0 ** 23)
    type_value(page, "2^-24")
    wait_value(page, repr(10.0 ** 23))
    check_explorer(page, 2.0 ** -24)
    random_session(page, seed=1)
    lab.screenshot(page, "01_fp16_range-explorer-after", near=EXPLORER)
    lab.assert_clean(page)


def test_explorer_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: every key press, typed value and bit click is drawn from the saved state
    and the page's arithmetic alone, and what is drawn is what the engine computes for that value."""
    page = lab.open_saved("01_fp16_range.ipynb")
    page.locator(EXPLORER).first.wait_for(timeout=60_000)
    page.locator(EXPLORER).first.scroll_into_view_if_needed()
    page.wait_for_selector(f"{EXPLORER} .ampkit-rangemap .ampkit-marker", state="attached")
    check_explorer(page, 0.1)
    for text, value in (("1e-6", 1e-6), ("-0", -0.0), ("inf", math.inf), ("1000", 1000.0), ("2^-149", 2.0 ** -149),
                        ("0x1p-24", 2.0 ** -24), ("1e39", 1e39), ("nan", math.nan)):
        old = explored(page)["value"]
        type_value(page, text)
        wait_value(page, old)
        check_explorer(page, value)
    type_value(page, "10^23")                           # Python's ** rounds it: the page says it needs the kernel
    page.wait_for_function("() => /run the notebook/.test(document.querySelector('.ampkit-explorer-message')"
                           ".textContent)")
    type_value(page, "0.3")
    wait_value(page, "nan")
    random_session(page, seed=2, moves=16)
    lab.screenshot(page, "01_fp16_range-explorer-no-kernel", near=EXPLORER)


# -- the gradient range map (the second range input of the page: the explorer's slider is the first)
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
    page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea .ampkit-rangemap').length === 2")
    assert maps.count() == 2  # the explorer's range map and the gradient map
    d = drawn(page, 1)
    _check_scale(d, m, 0)
    check_geometry(drawn(page, 0), tuple(FORMATS), -155.0, 135.0)
    lab.move_range(page, 1, "ArrowRight", presses=8)
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
    page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea .ampkit-rangemap').length === 2",
                           timeout=60_000)
    _check_scale(drawn(page, 1), m, 0)
    k = 0
    for key, presses in (("ArrowRight", 5), ("ArrowRight", 9), ("ArrowLeft", 3), ("End", 1), ("Home", 1),
                         ("PageUp", 1)):
        lab.move_range(page, 1, key, presses=presses)
        want = {"ArrowRight": k + presses, "ArrowLeft": k - presses, "End": 32, "Home": 0}.get(key)
        d = drawn(page, 1)
        k = int(d["shift"]) if want is None else want
        assert d["shift"] == str(k), (key, d["shift"], k)
        _check_scale(d, m, k)
    lab.screenshot(page, "01_fp16_range-no-kernel", near=".ampkit-scale-summary")
