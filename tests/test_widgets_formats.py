"""Headless tests of notebook 01's widgets: set values on the controls, check the bits and numbers displayed."""
import math
import re

import numpy as np
import pytest
import torch

from ampkit.formats import FORMATS, classify, decompose, from_bits, info
from ampkit.widgets import style
from ampkit.widgets.formats import BIT_PX, GAP_PX, FloatExplorer, bits_row_html
from ampkit.widgets.range_map import RangeMap

INT_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def torch_bits(value: float, fmt: str) -> str:
    """The bit string torch stores for ``value`` in ``fmt`` (independent of ampkit)."""
    dtype = FORMATS[fmt]
    bits = torch.finfo(dtype).bits
    p = torch.tensor(value, dtype=torch.float64).to(dtype).view(INT_VIEW[bits]).item() & ((1 << bits) - 1)
    return format(p, f"0{bits}b")


CELL = re.compile(r"<span class='ampkit-cell ampkit-(sign|exponent|mantissa)( ampkit-one)?'>([01])</span>")


def cells(ex: FloatExplorer, fmt: str) -> list[tuple[str, bool, str]]:
    """(field, coloured as a 1 bit, text) of every bit cell the explorer shows for ``fmt``."""
    return [(f, bool(one), bit) for f, one, bit in CELL.findall(ex.bitstrings[fmt].value)]


def displayed_bits(ex: FloatExplorer, fmt: str) -> str:
    return "".join(bit for _, _, bit in cells(ex, fmt))


def assert_shows(ex: FloatExplorer, value: float) -> None:
    """Every format's buttons, bit string, table and state show ``value`` as torch stores it."""
    for fmt in ex.fmts:
        bits = torch_bits(value, fmt) if not math.isnan(value) else ex.state[fmt].bits
        assert displayed_bits(ex, fmt) == bits, (fmt, value)
        assert f"data-bits='{bits}'" in ex.bitstrings[fmt].value
        d = ex.state[fmt]
        assert d.bits == bits
        stored = torch.tensor(value, dtype=torch.float64).to(FORMATS[fmt]).double().item()
        assert (math.isnan(stored) and math.isnan(d.stored)) or d.stored == stored
        assert cells(ex, fmt) == [(field, bit == "1", bit) for bit, field in zip(bits, d.fields)]


def test_initial_state_shows_point_one():
    ex = FloatExplorer(value=0.1, show_map=False)
    assert_shows(ex, 0.1)
    assert displayed_bits(ex, "float16") == "0010111001100110"
    assert displayed_bits(ex, "float32") == "00111101110011001100110011001101"
    assert "0.0999755859375" in ex.table.value and "0.10009765625" in ex.table.value
    assert [len(ex.buttons[f]) for f in ex.fmts] == [32, 16, 16, 8, 8]
    assert ex.text.value == "0.1" and ex.slider.value == pytest.approx(0.1)


@pytest.mark.parametrize("text,value,fp16_verdict", [
    ("65504", 65504.0, "exact"), ("70000", 70000.0, "overflow to inf"), ("1e-8", 1e-8, "flushed to zero"),
    ("2^-24", 2.0 ** -24, "exact"), ("1e-6", 1e-6, "rounded"), ("-0", -0.0, "exact"), ("inf", math.inf, "inf"),
    ("-inf", -math.inf, "inf"), ("1e39", 1e39, "overflow to inf"), ("1e-50", 1e-50, "flushed to zero"),
    ("2048.9", 2048.9, "rounded"),
])
def test_typing_values(text, value, fp16_verdict):
    ex = FloatExplorer(value=0.1, show_map=False)
    ex.text.value = text
    assert ex.error is None and ex.value == value and math.copysign(1, ex.value) == math.copysign(1, value)
    assert ex.state["float16"].verdict == fp16_verdict
    assert_shows(ex, value)


def test_special_values_are_explained():
    ex = FloatExplorer(value=0.1, show_map=False)
    assert "Every format just rounds" in ex.message.value
    ex.text.value = "nan"
    assert ex.state["float16"].kind == "nan" and "NaN" in ex.message.value
    ex.text.value = "inf"
    assert "no inf" in ex.message.value and ex.state["float8_e4m3fn"].stored == 448.0
    ex.text.value = "-0"
    assert displayed_bits(ex, "float16") == "1" + "0" * 15 and "-0.0" in ex.message.value
    ex.text.value = "1e39"
    assert "beyond every format" in ex.message.value
    ex.text.value = "1000"
    assert "saturates" in ex.message.value and ex.state["float8_e4m3fn"].verdict == "saturated to max"
    ex.text.value = "1e-6"
    assert "subnormal" in ex.message.value


@pytest.mark.parametrize("bad", ["abc", "", "1..2", "0.1.2", "2^x", "🙂", "1e"])
def test_non_numeric_text_gives_a_message_not_a_traceback(bad):
    ex = FloatExplorer(value=0.25, show_map=False)
    before = {f: d.bits for f, d in ex.state.items()}
    ex.text.value = bad
    assert ex.error and "ampkit-error" in ex.message.value and "e.g. 0.1" in ex.message.value
    assert {f: d.bits for f, d in ex.state.items()} == before and ex.value == 0.25
    ex.text.value = "0.5"  # recovers
    assert ex.error is None and "ampkit-error" not in ex.message.value and ex.state["float16"].stored == 0.5


def test_slider_and_text_stay_in_sync():
    ex = FloatExplorer(value=0.1, show_map=False)
    ex.slider.value = 2.0 ** -20
    assert ex.value == 2.0 ** -20 and ex.text.value == repr(2.0 ** -20)
    assert ex.state["float16"].kind == "subnormal"
    ex.text.value = "-3"
    assert ex.slider.value == 3.0
    ex.slider.value = 2.0  # the slider sets the magnitude and keeps the sign
    assert ex.value == -2.0 and ex.text.value == "-2.0"


def test_slider_snapping_by_the_browser_does_not_move_the_value():
    ex = FloatExplorer(value=0.1, show_map=False)
    ex.slider.value = 2.0 ** round(math.log2(0.1), 2)  # what the frontend sends back after rendering
    assert ex.value == 0.1 and ex.state["float16"].stored == 0.0999755859375
    ex.slider.value = 2.0 ** (round(math.log2(0.1), 2) + 0.01)  # one real step
    assert ex.value == 2.0 ** (round(math.log2(0.1), 2) + 0.01)


def test_full_slider_sweep_matches_torch():
    ex = FloatExplorer(value=1.0, show_map=True)
    for e in np.arange(ex.slider.min, ex.slider.max + 1e-9, 0.73):
        ex.slider.value = float(2.0 ** e)
        v = ex.slider.value
        assert ex.value == v
        assert_shows(ex, v)
        assert ex.range_map.marker_x == pytest.approx(math.log2(v))


def test_clicking_bits_flips_them_and_moves_the_value():
    ex = FloatExplorer(value=1.0, show_map=False)
    ex.buttons["float16"][0].click()  # sign bit
    assert ex.value == -1.0 and displayed_bits(ex, "float16") == "1011110000000000"
    ex.buttons["float16"][0].click()
    ex.buttons["float16"][15].click()  # last mantissa bit: one ulp
    assert ex.value == 1 + 2 ** -10 and ex.text.value == repr(1 + 2 ** -10)
    assert ex.state["float32"].verdict == "exact"  # fp16 values are exact in fp32
    assert ex.state["bfloat16"].verdict == "rounded"
    ex.text.value = "1"
    ex.buttons["float16"][1].click()  # top exponent bit: 0 11111 0000000000 is inf
    assert ex.value == math.inf and ex.state["float16"].kind == "inf"
    ex.buttons["float16"][15].click()  # mantissa nonzero with exponent all ones: NaN, the flipped pattern is kept
    assert math.isnan(ex.value) and ex.state["float16"].bits == "0111110000000001"
    assert displayed_bits(ex, "float16") == "0111110000000001"


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_bit_button_of_every_format(fmt):
    ex = FloatExplorer(value=0.3, show_map=False)
    n = info(fmt).bits
    for start in (0.3, 1e-5, 3e4, -0.0):
        ex.text.value = repr(start)
        for pos in range(n):
            before = ex.state[fmt]
            ex.buttons[fmt][pos].click()
            expected = from_bits(before.pattern ^ (1 << (n - 1 - pos)), fmt)
            assert ex.state[fmt].bits == expected.bits
            assert (math.isnan(ex.value) and math.isnan(expected.stored)) or ex.value == expected.stored
            ex.buttons[fmt][pos].click()  # flip back
            assert ex.state[fmt].bits == before.bits


def test_range_map_marker_and_image():
    ex = FloatExplorer(value=1e-6)
    m = ex.range_map
    png = m.png()
    assert m.marker_x == pytest.approx(math.log2(1e-6)) and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2^-19.93" in m.label_text and m.marker == "1e-06"   # the front end draws the marker from this
    ex.text.value = "70000"
    assert m.marker_x == pytest.approx(math.log2(70000)) and "2^16.10" in m.label_text and m.marker == "70000.0"
    ex.text.value = "0"
    assert m.marker_x is None and m.marker_pos is None and "no place" in m.label_text and m.marker == "0.0"
    ex.text.value = "-inf"
    assert m.marker_x == math.inf and m.marker_pos == m.hi and m.marker == "-inf"
    ex.text.value = "nan"
    assert m.marker_x is None and m.marker == "nan"
    ex.text.value = "1e-300"  # beyond every format and off the axis: clamped, and said so
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


def test_a_slider_move_sends_a_few_small_messages(monkeypatch):
    """The browser redraws what the kernel sends: a move must not send one message per bit (it did: 46-68)."""
    from ipywidgets import Widget

    sent = []
    monkeypatch.setattr(Widget, "_send", lambda self, msg, buffers=None: sent.append((type(self).__name__, msg)))
    ex = FloatExplorer(value=0.1)
    sent.clear()
    for k in range(1, 21):
        ex.slider.value = 2.0 ** (round(math.log2(0.1), 2) + 0.01 * k)
    kinds = {name for name, _ in sent}
    assert kinds <= {"HTML", "Text", "FloatLogSlider", "RangeMap"}, kinds    # no Button, ButtonStyle or Image
    assert len(sent) <= 20 * 8
    ex.buttons["float16"][0].click()
    assert ex.value < 0 and all(b.description == "" for bs in ex.buttons.values() for b in bs)


def test_bit_cells_and_buttons_line_up():
    d = decompose(0.1, "fp16")
    text = re.sub(r"<[^>]+>", "", bits_row_html(d).split("<span class='ampkit-formula'>")[0])
    assert text == "0 01011 1001100110"
    ex = FloatExplorer(value=0.1, show_map=False)
    for fmt in ex.fmts:
        hits = ex.bitstrings[fmt]  # the cells, and the transparent buttons over them, share one grid cell
        stack = next(w for w in ex.widget.children if fmt in " ".join(getattr(w, "_dom_classes", ())))
        grid = stack.children[1]
        assert hits in grid.children and grid.layout.grid_template_areas == '"bits"'
        buttons = grid.children[1].children
        widths = [int(w.layout.width.removesuffix("px")) for w in buttons]
        assert widths == [BIT_PX] + [GAP_PX] + [BIT_PX] * info(fmt).exponent_bits + [GAP_PX] + \
            [BIT_PX] * info(fmt).mantissa_bits


def test_range_map_bad_input():
    with pytest.raises(ValueError, match="nonzero finite"):
        RangeMap(("fp16",), values=torch.zeros(10))
    with pytest.raises(ValueError, match="no values"):
        RangeMap(("fp16",)).set_scale(2.0)
    with pytest.raises(ValueError, match="supported formats"):
        FloatExplorer(fmts=("fp16", "float17"))


def test_decompose_is_what_the_table_shows():
    ex = FloatExplorer(value=3.14159, show_map=False)
    for fmt in ex.fmts:
        d = decompose(3.14159, fmt)
        assert f"<code>{d.stored!r}</code>" in ex.table.value
        assert f"<code>{d.next!r}</code>" in ex.table.value and f"<code>{d.prev!r}</code>" in ex.table.value


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
    ex = FloatExplorer(value=1.0, show_map=False)
    assert "<b>fp8 e5m2</b>" in ex.table.value and "<b>bf16</b>" in ex.table.value
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
