"""Headless tests of notebook 00's rounding slider: set .value, check what it shows."""
import math

import numpy as np

from ampkit.formats import compare_formats, round_trip
from ampkit.widgets import RoundingSlider


def test_initial_state_and_table():
    demo = RoundingSlider()
    assert [r.fmt for r in demo.rows] == ["float32", "bfloat16", "float16"]
    still = " ".join(w.value for w in demo.still().children)
    assert "float16" in still and "0.0999755859375" in still


def test_moving_the_slider_updates_rows_and_html():
    demo = RoundingSlider(value=0.1)
    before = demo.still().children[1].value
    demo.slider.value = 1e5
    assert demo.still().children[1].value != before
    verdicts = {r.fmt: r.verdict for r in demo.rows}
    assert verdicts == {"float32": "exact", "bfloat16": "rounded", "float16": "overflow to inf"}
    demo.slider.value = 1e-8
    assert {r.fmt: r.verdict for r in demo.rows}["float16"] == "flushed to zero"


def test_full_slider_sweep_matches_torch():
    demo = RoundingSlider()
    for exponent in np.arange(demo.min_exp, demo.max_exp + 1e-9, 0.25):
        demo.slider.value = float(10 ** exponent)
        value = demo.slider.value
        for row in demo.rows:
            expected = round_trip(value, row.fmt)
            assert row.stored == expected or (math.isnan(row.stored) and math.isnan(expected))
            assert row.fmt in demo.still().children[1].value


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


def test_fp16_underflow_threshold_in_the_table():
    # fp16's smallest subnormal is 2**-24; below half of it (2**-25, a tie that goes to even = 0) it rounds to 0
    demo = RoundingSlider(value=2.9e-8)
    assert demo.rows[-1].verdict == "flushed to zero" and demo.rows[-1].stored == 0.0
    demo.slider.value = 4e-8
    assert demo.rows[-1].stored == 2.0 ** -24 and demo.rows[-1].verdict == "rounded"
    assert repr(2.0 ** -24) in demo.still().children[1].value


def _fake_report(native, ratios, device="cpu"):
    import torch

    from ampkit.device import DeviceReport

    return DeviceReport(torch.device(device), "fake", tuple(ratios), {}, 256, native=native, ratios=ratios)


def test_device_speed_figure_labels_decision_and_measurement():
    import pytest
    import torch

    from ampkit.device import Ratio
    from ampkit.widgets.start import device_speed_figure
    from ampkit.widgets.style import png_bytes

    rep = _fake_report({torch.bfloat16: "AVX512-BF16"},
                       {torch.float16: Ratio(0.02, 0.0125, 0.025, 5), torch.bfloat16: Ratio(3.5, 2.0, 4.2, 5)})
    fig = device_speed_figure(rep)
    ax = fig.axes[0]
    assert fig.get_figwidth() >= 6.5 and ax.get_title() and ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["float16\n(not native here)", "bfloat16\n(native here)"]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["50x slower", "3.5x faster"]  # ratios in words, never "0.02x"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert "same as fp32" in ticks and "10x faster" in ticks and "100x slower" in ticks
    lo, hi = ax.get_xlim()
    assert lo < 0.0125 and hi > 4.2  # every whisker is inside the axes
    assert png_bytes(fig)[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no autocast dtypes"):
        device_speed_figure(_fake_report({}, {}))


def test_device_speed_figure_on_this_machine():
    from ampkit.device import device_report
    from ampkit.widgets.start import device_speed_figure

    rep = device_report("cpu")
    fig = device_speed_figure(rep)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == len(rep.autocast_dtypes)
    for dt, label in zip(rep.autocast_dtypes, labels):
        assert ("(native here)" in label) == (dt in rep.native)


def test_the_front_end_gets_the_engines_limits_and_words():
    """The browser draws from what the engine sent: each format's limits (ampkit.formats.info) and the words."""
    demo = RoundingSlider(value=3.0, fmts=("fp16",))
    assert demo.fmts == ("float16",) and demo.formats[0]["max"] == 65504.0 and demo.formats[0]["via_float32"]
    assert demo.text["verdicts"]["flushed to zero"] and demo.look["colours"]["band"]["flushed"] == "#8c959f"
    assert "export default" in demo._esm and "roundTo" in demo._esm


def test_bad_values_are_refused_with_a_clear_error():
    import pytest

    with pytest.raises(ValueError, match="value"):
        RoundingSlider(value=-1.0)
    with pytest.raises(ValueError, match="supported formats"):
        RoundingSlider(fmts=("fp17",))
