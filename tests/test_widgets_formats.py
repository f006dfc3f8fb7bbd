"""Headless tests of notebook 01's views: the float explorer (drawn in the browser, js/floats.js) keeps the engine's
state for every value, typed text, slider move and bit flip, sends the page what its arithmetic needs, and its notes'
templates fill to explain()'s words; the range map (js/rangemap.js) sends the engine's bands and scale sweep."""
import json
import math
import random

import numpy as np
import pytest
import torch

from ampkit.formats import FORMATS, classify, decompose, explain, from_bits, info, toggle_bit
from ampkit.widgets import style
from ampkit.widgets.formats import FloatExplorer, bits_row_html, explain_templates, explorer_formats, fill_notes
from ampkit.widgets.range_map import RangeMap

INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def torch_bits(value: float, fmt: str) -> str:
    """The bit string torch stores for ``value`` in ``fmt`` (independent of ampkit)."""
    dtype = FORMATS[fmt]
    bits = torch.finfo(dtype).bits
    p = torch.tensor(value, dtype=torch.float64).to(dtype).view(INT_VIEW[bits]).item() & ((1 << bits) - 1)
    return format(p, f"0{bits}b")


def assert_shows(ex: FloatExplorer, value: float) -> None:
    """Every format's state shows ``value`` as torch stores it, and the page is sent that value."""
    assert ex.value_repr == repr(value) and ex.flipped == {}
    for fmt in ex.fmts:
        d = ex.state[fmt]
        if not math.isnan(value):
            assert d.bits == torch_bits(value, fmt), (fmt, value)
        stored = torch.tensor(value, dtype=torch.float64).to(FORMATS[fmt]).double().item()
        assert (math.isnan(stored) and math.isnan(d.stored)) or d.stored == stored
        assert d == decompose(value, fmt)


def test_initial_state_shows_point_one():
    ex = FloatExplorer(value=0.1, show_map=False)
    assert_shows(ex, 0.1)
    assert ex.state["float16"].bits == "0010111001100110"
    assert ex.state["float32"].bits == "00111101110011001100110011001101"
    assert [len(ex.buttons[f]) for f in ex.fmts] == [32, 16, 16, 8, 8]
    assert ex.typed == "0.1" and ex.slider.value == 0.1 and ex.error is None and ex.notes == []
    assert ex.range_map is None and FloatExplorer(value=0.1).range_map.marker == "0.1"


@pytest.mark.parametrize("text,value,fp16_verdict", [
    ("65504", 65504.0, "exact"), ("70000", 70000.0, "overflow to inf"), ("1e-8", 1e-8, "flushed to zero"),
    ("2^-24", 2.0 ** -24, "exact"), ("1e-6", 1e-6, "rounded"), ("-0", -0.0, "exact"), ("inf", math.inf, "inf"),
    ("-inf", -math.inf, "inf"), ("1e39", 1e39, "overflow to inf"), ("1e-50", 1e-50, "flushed to zero"),
    ("2048.9", 2048.9, "rounded"), ("10^23", 10.0 ** 23, "overflow to inf"),
])
def test_typing_values(text, value, fp16_verdict):
    ex = FloatExplorer(value=0.1, show_map=False)
    ex.typed = text
    assert ex.error is None and ex.value == value and math.copysign(1, ex.value) == math.copysign(1, value)
    assert ex.state["float16"].verdict == fp16_verdict and ex.typed == repr(value)
    assert_shows(ex, value)


def test_special_values_are_explained():
    ex = FloatExplorer(value=0.1, show_map=False)
    for text, words in (("nan", "NaN"), ("inf", "no inf"), ("-0", "-0.0"), ("1e39", "beyond every format"),
                        ("1000", "saturates"), ("1e-6", "subnormal")):
        ex.typed = text
        assert ex.notes == explain(ex.value, ex.fmts) and any(words in n for n in ex.notes), text
        if text == "1000":
            assert ex.state["float8_e4m3fn"].verdict == "saturated to max"


@pytest.mark.parametrize("bad", ["abc", "", "1..2", "0.1.2", "2^x", "🙂", "1e"])
def test_non_numeric_text_gives_a_message_not_a_traceback(bad):
    ex = FloatExplorer(value=0.25, show_map=False)
    before = {f: d.bits for f, d in ex.state.items()}
    ex.typed = bad
    assert ex.error and "e.g. 0.1" in ex.error_text
    assert {f: d.bits for f, d in ex.state.items()} == before and ex.value == 0.25
    ex.typed = "0.5"  # recovers
    assert ex.error is None and ex.state["float16"].stored == 0.5


def test_slider_and_text_stay_in_sync():
    ex = FloatExplorer(value=0.1, show_map=False)
    ex.slider.value = 2.0 ** -20
    assert ex.value == 2.0 ** -20 and ex.typed == repr(2.0 ** -20)
    assert ex.state["float16"].kind == "subnormal"
    ex.typed = "-3"
    assert ex.slider.value == 3.0
    ex.slider.value = 2.0  # the slider sets the magnitude and keeps the sign
    assert ex.value == -2.0 and ex.typed == "-2.0"


def test_what_the_page_sets_is_decomposed_by_the_engine():
    """The page's own moves (a slider position, a bit it flipped) reach the engine as traits, as from a browser."""
    ex = FloatExplorer(value=0.1)
    v = 2.0 ** -17.37
    ex.set_state({"value_repr": repr(v), "typed": repr(v), "flipped": {}})
    assert ex.value == v and all(ex.state[f] == decompose(v, f) for f in FORMATS)
    assert ex.range_map.marker == repr(v)
    ex.set_state({"value_repr": "nan", "typed": "nan", "flipped": {"fmt": "float16", "pattern": 0x7C01}})
    assert math.isnan(ex.value) and ex.state["float16"].bits == "0111110000000001"
    assert ex.state["bfloat16"].bits == decompose(math.nan, "bfloat16").bits and ex.flipped["pattern"] == 0x7C01
    ex.set_state({"typed": "2^-24"})     # typed text (not a value the page set): the engine reads it
    assert ex.value == 2.0 ** -24 and ex.value_repr == repr(2.0 ** -24) and ex.flipped == {}


def test_full_slider_sweep_matches_torch():
    ex = FloatExplorer(value=1.0, show_map=True)
    for e in np.arange(-150, 129 + 1e-9, 0.73):
        ex.slider.value = float(2.0 ** e)
        v = ex.slider.value
        assert ex.value == v
        assert_shows(ex, v)
        assert ex.range_map.marker_x == pytest.approx(math.log2(v))


def test_clicking_bits_flips_them_and_moves_the_value():
    ex = FloatExplorer(value=1.0, show_map=False)
    ex.buttons["float16"][0].click()  # sign bit
    assert ex.value == -1.0 and ex.state["float16"].bits == "1011110000000000"
    ex.buttons["float16"][0].click()
    ex.buttons["float16"][15].click()  # last mantissa bit: one ulp
    assert ex.value == 1 + 2 ** -10 and ex.typed == repr(1 + 2 ** -10)
    assert ex.state["float32"].verdict == "exact"  # fp16 values are exact in fp32
    assert ex.state["bfloat16"].verdict == "rounded"
    ex.typed = "1"
    ex.buttons["float16"][1].click()  # top exponent bit: 0 11111 0000000000 is inf
    assert ex.value == math.inf and ex.state["float16"].kind == "inf"
    ex.buttons["float16"][15].click()  # mantissa nonzero with exponent all ones: NaN, the flipped pattern is kept
    assert math.isnan(ex.value) and ex.state["float16"].bits == "0111110000000001"
    assert ex.flipped == {"fmt": "float16", "pattern": 0b0111110000000001}
    with pytest.raises(ValueError, match="float16"):
        FloatExplorer(fmts=("fp16",), show_map=False).flip("bf16", 0)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_bit_of_every_format(fmt):
    ex = FloatExplorer(value=0.3, show_map=False)
    n = info(fmt).bits
    for start in (0.3, 1e-5, 3e4, -0.0):
        ex.typed = repr(start)
        for pos in range(n):
            before = ex.state[fmt]
            ex.flip(fmt, pos)
            expected = from_bits(before.pattern ^ (1 << (n - 1 - pos)), fmt)
            assert ex.state[fmt].bits == expected.bits == toggle_bit(before, pos).bits
            assert (math.isnan(ex.value) and math.isnan(expected.stored)) or ex.value == expected.stored
            ex.flip(fmt, pos)  # flip back
            assert ex.state[fmt].bits == before.bits


def test_the_page_gets_the_engines_limits():
    for f in explorer_formats(list(FORMATS)):
        fi = info(f["name"])
        assert (f["bits"], f["exponent_bits"], f["mantissa_bits"], f["bias"], f["emin"], f["has_inf"], f["max"]) == \
            (fi.bits, fi.exponent_bits, fi.mantissa_bits, fi.bias, fi.emin, fi.has_inf, fi.max)
        assert f["nan_pattern"] == decompose(math.nan, fi.name).pattern
        inf = decompose(math.inf, fi.name).stored          # what kit.js roundTo gives inf: overflows_to
        assert {"inf": math.inf, "max": fi.max}.get(f["overflows_to"], math.nan) == inf or math.isnan(inf)
    e4 = explorer_formats(["e4m3"])[0]
    assert e4["nan_pattern"] == 0b01111111 and e4["overflows_to"] == "max" and not e4["has_inf"]


def test_notes_templates_fill_to_explains_words():
    """The templates the page fills (explain_templates), filled in Python as the page fills them, are explain()."""
    rng = random.Random(0)
    xs = [rng.choice((1, -1)) * 2.0 ** rng.uniform(-160, 135) for _ in range(1500)]
    xs += [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, -1e39, 448.0, 464.0, -470.0, 65520.0, 1e-6, 1e-8]
    for fmts in (list(FORMATS), ["float16"], ["float8_e4m3fn", "float8_e5m2"]):
        t = explain_templates(fmts)
        for x in xs:
            assert fill_notes(x, {f: decompose(x, f) for f in fmts}, t) == explain(x, fmts), x


def test_saved_state_is_small_and_deterministic():
    a, b = FloatExplorer(value=0.1), FloatExplorer(value=0.1)
    state = {k: v for k, v in a.get_state().items() if k not in ("range_map", "layout")}
    assert state == {k: v for k, v in b.get_state().items() if k not in ("range_map", "layout")}
    size = len(json.dumps(state))
    assert size < 60_000, size                 # module ~30 KB, limits 2 KB, notes 5 KB, words 1 KB
    assert a.get_state()["range_map"] == f"IPY_MODEL_{a.range_map.model_id}"


def test_still_picture_has_bits_table_notes_and_map():
    from ampkit.widgets.snapshot import snapshot_items

    ex = FloatExplorer(value=1e-6)
    lines = [line for kind, line in snapshot_items(ex.still()) if kind == "text"]
    text = "\n".join(lines)
    assert "0 00000 0000010001" in text.replace("= ", " ") or "0000010001" in text
    assert "subnormal" in text and any(kind == "image" for kind, _ in snapshot_items(ex.still()))
    assert "0 01011 1001100110" in bits_row_html(decompose(0.1, "fp16")).replace("</span>", "").replace(
        "<span class='ampkit-gap'> ", " ") or "data-bits='0010111001100110'" in bits_row_html(decompose(0.1, "fp16"))


def test_range_map_marker_follows_the_explorer():
    ex = FloatExplorer(value=1e-6)
    m = ex.range_map
    png = m.png()
    assert m.marker_x == pytest.approx(math.log2(1e-6)) and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2^-19.93" in m.label_text and m.marker == "1e-06"   # the front end draws the marker from this
    ex.typed = "70000"
    assert m.marker_x == pytest.approx(math.log2(70000)) and "2^16.10" in m.label_text and m.marker == "70000.0"
    ex.typed = "0"
    assert m.marker_x is None and m.marker_pos is None and "no place" in m.label_text and m.marker == "0.0"
    ex.typed = "-inf"
    assert m.marker_x == math.inf and m.marker_pos == m.hi and m.marker == "-inf"
    ex.typed = "nan"
    assert m.marker_x is None and m.marker == "nan"
    ex.typed = "1e-300"  # beyond every format and off the axis: clamped, and said so
    assert m.marker_pos == m.lo and "off the axis" in m.label_text
    m.set_value(None)
    assert m.marker == "" and m.label_text == ""


def test_range_map_sends_the_engines_bands_and_the_kits_colours():
    from ampkit.formats import range_bands
    from ampkit.widgets.front import look

    m = RangeMap(("fp16", "e4m3"), value=1.0)
    assert [f["name"] for f in m.formats] == ["float16", "float8_e4m3fn"]
    for f in m.formats:
        b = range_bands(f["name"], m.lo, m.hi)
        assert f["bands"] == {"flushed": list(b.flush), "subnormal": list(b.subnormal), "normal": list(b.normal),
                              "overflow": list(b.overflow)}
    assert m.look == look() and m.look["colours"]["band"] == style.BAND_COLOURS
    assert list(m.text["bands"]) == list(style.BAND_COLOURS)
    assert m.text["bands"]["flushed"] == style.BAND_LABELS["flushed"] and "saturates at ±448" in \
        m.text["bands"]["overflow"]


def test_gradient_range_map_scale_sweep_matches_classify():
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(20_000, generator=g) * 1e-6
    grads[:100] = 0.0
    m = RangeMap(("fp16",), values=grads)
    assert m.classification == classify(grads, "fp16")
    assert m.classification.zero == 100 / 20_000 and m.classification.subnormal > 0.9  # |g| ~ 1e-6 < 2^-14
    edges0 = np.array(m.hist_edges)
    assert m.hist["edges"] == list(edges0) and sum(m.hist["counts"]) == 20_000 - 100
    for k in range(m.hist["min_exp"], m.hist["max_exp"] + 1):
        m.scale_exp = k                     # what the front end's slider sets
        assert m.scale == 2.0 ** k and m.classification == classify(grads * 2.0 ** k, "fp16")
        assert np.array_equal(m.hist_edges, edges0 + k)
        assert f"2^{k} " in m.summary and f"normal {100 * m.classification.normal:.1f} %" in m.summary
        assert m.hist["summaries"][k - m.hist["min_exp"]] == m.summary   # the line the page shows at k
    assert m.classification.normal == 1 - m.classification.zero  # at 2^32 every nonzero gradient is normal
    m.set_scale(2.0 ** 40)  # beyond the slider: 1e-6 * 2^40 ~ 1.1e6 > 65504, most now overflow
    assert 0.5 < m.classification.overflow < 1 and m.classification == classify(grads * 2.0 ** 40, "fp16")
    assert m.scale_exp == 40 and "2^40 " in m.summary
    m.set_scale(3.0)   # not a power of two: the scale kept as given
    assert m.scale == 3.0 and m.classification == classify(grads * 3.0, "fp16") and "scale 3 " in m.summary
    assert m.png()[:4] == b"\x89PNG"


def test_a_move_sends_one_small_message(monkeypatch):
    """With a kernel, a move the code makes sends the page one message of a few traits (no HTML, no picture)."""
    from ipywidgets import Widget

    sent = []
    monkeypatch.setattr(Widget, "_send", lambda self, msg, buffers=None: sent.append((type(self).__name__, msg)))
    ex = FloatExplorer(value=0.1)
    sent.clear()
    for k in range(1, 21):
        ex.slider.value = 2.0 ** (-3.3 + 0.01 * k)
    kinds = {name for name, _ in sent}
    assert kinds <= {"FloatExplorer", "RangeMap"}, kinds
    assert len(sent) <= 20 * 2 and max(len(json.dumps(m)) for _, m in sent) < 600


def test_range_map_bad_input():
    with pytest.raises(ValueError, match="nonzero finite"):
        RangeMap(("fp16",), values=torch.zeros(10))
    with pytest.raises(ValueError, match="no values"):
        RangeMap(("fp16",)).set_scale(2.0)
    with pytest.raises(ValueError, match="supported formats"):
        FloatExplorer(fmts=("fp16", "float17"))
    with pytest.raises(TypeError, match="use parse_value"):
        FloatExplorer(show_map=False).set_value("0.1")


def test_range_map_lives_in_its_own_module_and_imports_from_both():
    import ampkit.widgets
    import ampkit.widgets.formats
    import ampkit.widgets.range_map

    assert ampkit.widgets.formats.RangeMap is ampkit.widgets.range_map.RangeMap is ampkit.widgets.RangeMap
    assert ampkit.widgets.FloatExplorer is FloatExplorer


def test_format_labels_use_the_kits_short_names():
    from ampkit.dtypes import short_name
    from ampkit.widgets.range_map import format_label

    assert [format_label(f) for f in FORMATS] == ["fp32", "fp16", "bf16", "fp8 e4m3", "fp8 e5m2"]
    assert format_label(torch.bfloat16) == short_name(torch.bfloat16) == "bf16"
    assert [f["label"] for f in explorer_formats(list(FORMATS))] == ["fp32", "fp16", "bf16", "fp8 e4m3", "fp8 e5m2"]
    m = RangeMap(("fp16", "e4m3"))
    assert [f["label"] for f in m.formats] == ["fp16", "fp8 e4m3"]
    with pytest.raises(ValueError, match="supported formats"):
        format_label("fp17")


def test_range_map_scale_must_be_positive_finite():
    grads = torch.full((10,), 1e-6)
    for bad, exc in ((0.0, ValueError), (-2.0, ValueError), (math.inf, ValueError), ("2", TypeError)):
        with pytest.raises(exc, match="scale must be a positive finite number"):
            RangeMap(("fp16",), values=grads, scale=bad)
        m = RangeMap(("fp16",), values=grads)
        with pytest.raises(exc, match="scale must be a positive finite number"):
            m.set_scale(bad)
