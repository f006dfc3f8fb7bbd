"""Headless tests of notebook 00's rounding slider: set .value, check what it shows."""
import math

import numpy as np

from ampkit.formats import compare_formats, round_trip
from ampkit.widgets import RoundingSlider


def test_initial_state_and_table():
    demo = RoundingSlider()
    assert [r.fmt for r in demo.rows] == ["float32", "bfloat16", "float16"]
    assert "float16" in demo.table.value and "0.0999755859375" in demo.table.value


def test_moving_the_slider_updates_rows_and_html():
    demo = RoundingSlider(value=0.1)
    before = demo.table.value
    demo.slider.value = 1e5
    assert demo.table.value != before
    verdicts = {r.fmt: r.verdict for r in demo.rows}
    assert verdicts == {"float32": "exact", "bfloat16": "rounded", "float16": "overflow to inf"}
    demo.slider.value = 1e-8
    assert {r.fmt: r.verdict for r in demo.rows}["float16"] == "flushed to zero"


def test_full_slider_sweep_matches_torch():
    demo = RoundingSlider()
    for exponent in np.arange(demo.slider.min, demo.slider.max + 1e-9, 0.25):
        demo.slider.value = float(10 ** exponent)
        value = demo.slider.value
        for row in demo.rows:
            assert row.stored == round_trip(value, row.fmt) or (math.isnan(row.stored) and math.isnan(round_trip(value, row.fmt)))
            assert row.fmt in demo.table.value


def test_compare_formats_edge_values():
    rows = compare_formats(65504.0)
    assert rows[2].verdict == "exact" and rows[2].stored == 65504.0
    assert compare_formats(65520.0)[2].verdict == "overflow to inf"  # rounds up past fp16 max
    assert compare_formats(float("nan"))[0].verdict == "nan"
    assert compare_formats(float("-inf"))[1].verdict == "inf"
    zero = compare_formats(-0.0)
    assert all(r.verdict == "exact" for r in zero) and math.copysign(1, zero[2].stored) == -1
    assert compare_formats(1e-8, ("e4m3",))[0].verdict == "flushed to zero"
    # torch 2.x saturates casts to e4m3fn at 448 on CPU (no inf in that format); the verdict follows torch
    e4m3 = compare_formats(1000.0, ("e4m3",))[0]
    assert e4m3.verdict in ("saturated to max", "overflow to nan")
    assert e4m3.verdict == ("overflow to nan" if round_trip(1000.0, "e4m3") != 448.0 else "saturated to max")
    assert compare_formats(65519.0)[2].verdict == "rounded" and compare_formats(65520.0)[2].stored == float("inf")
