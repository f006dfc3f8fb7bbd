"""Headless tests of the sink-timeline widget: every control moves the state, the figure is built once."""
from __future__ import annotations

import numpy as np
import pytest

from ampkit.sinking import Calibration, ModeMeasurement
from ampkit.timeline import GPU_LIKE, LANES, SINK_MODES, SimParams, Summary, gantt_bars, simulate_all, summarise
from ampkit.widgets.sinking import SinkTimeline, gantt_figure, measured_figure, summary_html
from ampkit.widgets.style import png_bytes


@pytest.fixture(scope="module")
def w():
    return SinkTimeline()


def test_initial_state_matches_the_pure_function(w):
    _, expected = summarise("none", w.params)
    assert w.summary == expected
    assert w.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ampkit-sink-step" in w.readout.value and f"{expected.step_time * 1e6:.1f} µs" in w.readout.value


def test_summary_html_shows_every_number_in_its_classed_cell():
    html = summary_html(Summary("data+graph", 12.345e-6, 81_004.4, 0.456, 0.125, 2.5))
    for cell in ("<code>data+graph</code>", "<td class='ampkit-sink-step'>12.3 µs</td>",
                 "<td class='ampkit-sink-rate'>81,004</td>", "<td class='ampkit-sink-util'>46%</td>",
                 "<td class='ampkit-sink-syncs'>0.125</td>", "<td class='ampkit-sink-speedup'>2.50x</td>"):
        assert cell in html, cell
    tl, s = summarise("data", SimParams(prep=1.0, n_ops=2, op=1.0, sink_size=3), steps=4)
    assert f"{s.speedup:.2f}x" in summary_html(s) == summary_html(summarise("data", tl.params, 4)[1])


def test_sink_size_changes_the_chart_in_loop_mode(w):
    w.mode.value = "data+graph+loop"
    w.sink_size.value = 2
    before_img, before = w.image.value, w.summary
    fig, coll = w.fig, w.collection
    w.sink_size.value = 16
    assert w.summary.syncs_per_step == pytest.approx(2 / 32)      # 32 steps shown, a sync after every 16
    assert before.syncs_per_step == pytest.approx(4 / 8)
    assert w.summary.step_time < before.step_time
    assert w.image.value != before_img
    assert w.fig is fig and w.collection is coll                    # same figure, artists updated
    assert len(w.collection.get_paths()) == len(w.bars)


def test_each_control_reaches_the_params(w):
    w.prep.value = 100.0
    w.launch.value = 10.0
    w.n_ops.value = 40
    w.op.value = 2.0
    w.async_device.value = False
    p = w.params
    assert p.prep == pytest.approx(100e-6) and p.launch == pytest.approx(10e-6) and p.n_ops == 40
    assert p.op == pytest.approx(2e-6) and p.async_device is False
    for mode in SINK_MODES:
        w.mode.value = mode
        _, expected = summarise(mode, p)
        assert w.summary == expected and mode in w.readout.value
    assert w.title.get_text().startswith("Simulated data+graph+loop:")


def test_sweep_every_control_over_its_range():
    w = SinkTimeline()
    for slider in (w.sink_size, w.n_ops):
        for v in np.linspace(slider.min, slider.max, 5).astype(int):
            slider.value = int(v)
            assert w.summary.step_time > 0
    for slider in (w.prep, w.launch, w.op):
        for e in np.linspace(slider.min, slider.max, 5):
            slider.value = float(slider.base ** e)
            assert w.summary.step_time > 0 and 0 <= w.summary.utilisation <= 1
    for mode in SINK_MODES:
        for flag in (True, False):
            w.mode.value, w.async_device.value = mode, flag
            assert w.summary.mode == mode and w.params.async_device is flag
    assert len(w.bars) <= 1500


def test_graph_sink_beats_eager_when_launches_dominate():
    w = SinkTimeline(GPU_LIKE)
    w.launch.value, w.op.value, w.n_ops.value = 20.0, 1.0, 100
    w.mode.value = "data"
    eager = w.summary.step_time
    w.mode.value = "data+graph"
    assert w.summary.step_time < eager / 5


def test_measure_button_fills_the_sliders_from_a_calibration():
    cal = Calibration("cpu", launch=2e-6, op=3e-6, n_ops=57, sync=1e-6, callback=1e-6, copy=0.0, prep=4e-4,
                      eager_step=3e-4, graph_step=1.5e-4, compile_seconds=2.0, graph_message="", async_device=False)
    w = SinkTimeline(calibrate_fn=lambda: cal)
    redraws = w.redraws
    w.measure_button.click()
    assert w.calibration is cal
    assert w.prep.value == pytest.approx(400.0) and w.launch.value == pytest.approx(2.0)
    assert w.n_ops.value == 57 and w.op.value == pytest.approx(3.0) and w.async_device.value is False
    assert w.redraws == redraws + 1                                # one redraw, not one per slider
    assert "measured on cpu" in w.status.value
    # the compiled step alone took 150 us: 2 us to launch, 148 us of compute instead of 57 x 3 = 171 us eager
    assert w.fusion == pytest.approx(148 / 171)
    expected = SimParams(prep=4e-4, n_ops=57, launch=2e-6, op=3e-6, sync=1e-6, callback=1e-6, graph_launch=2e-6,
                         graph_compute=148e-6, depth=2, sink_size=w.sink_size.value, async_device=False)
    for name in SimParams.__dataclass_fields__:
        assert getattr(w.params, name) == pytest.approx(getattr(expected, name)), name
    w.op.value = 6.0                       # twice the op time: the fused graph's compute doubles too
    assert w.params.graph_compute == pytest.approx(2 * 148e-6)


def test_measure_with_the_real_calibration():
    w = SinkTimeline()
    w.measure()            # default: ampkit.sinking.calibrate(compile=False) on this machine
    assert w.calibration.n_ops == w.n_ops.value and w.calibration.device == "cpu"
    assert w.summary.step_time > 0


def test_widget_figure_is_readable_and_labelled(w):
    from ampkit.widgets.style import DPI

    assert w.fig.get_figwidth() >= 6.5 and w.fig.dpi == DPI
    assert w.ax.get_xlabel() == "time since the first step began (µs)" and w.ax.get_ylabel() == "lane"
    assert [t.get_text() for t in w.ax.get_yticklabels()] == list(LANES)
    assert w.title.get_text().startswith("Simulated ")


def test_an_empty_lane_says_why():
    w = SinkTimeline(GPU_LIKE, mode="none")            # no data sink: the loader lane has no bars
    assert not [e for e in w.bars if e.lane == "loader"]
    assert any("no background loader" in t.get_text() for t in w.ax.texts)
    w.mode.value = "data"
    assert not any("no background loader" in t.get_text() for t in w.ax.texts)


def test_gantt_figure_one_panel_per_mode():
    tls = simulate_all(GPU_LIKE, steps=4)
    fig = gantt_figure(tls, "title")
    assert len(fig.axes) == len(SINK_MODES) and fig.get_figwidth() >= 6.5 and fig.dpi == 100
    for ax, mode in zip(fig.axes, SINK_MODES):
        assert ax.get_title(loc="left").startswith(f"{mode}: ") and ax.get_ylabel() == "lane"
        assert len(ax.collections[0].get_paths()) == len(gantt_bars(tls[mode], max_bars=600))
    assert fig.axes[-1].get_xlabel().endswith("(µs)") and fig._suptitle.get_text() == "title"
    assert png_bytes(fig)[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="at least one"):
        gantt_figure({})


def test_measured_figure_shows_every_run_the_median_and_the_prediction():
    m = {"none": ModeMeasurement("none", 3e-4, 8, 8, 0.0, (3e-4, 2e-4, 4e-4)),
         "data": ModeMeasurement("data", 2e-4, 8, 8, 0.0, (2e-4,))}
    fig = measured_figure(m, {"none": 2.5e-4}, "t")
    ax = fig.axes[0]
    dots = [c.get_offsets()[:, 0].tolist() for c in ax.collections if len(c.get_offsets())]
    assert sorted(dots[0]) == pytest.approx([200.0, 300.0, 400.0]) and dots[1] == pytest.approx([200.0])
    diamonds = [line for line in ax.lines if line.get_marker() == "D"]
    assert len(diamonds) == 1 and diamonds[0].get_xdata()[0] == pytest.approx(250.0)
    assert ax.get_xlabel() == "time per step (µs)" and ax.get_title() == "t" and fig.get_figwidth() >= 6.5
    with pytest.raises(ValueError, match="at least one"):
        measured_figure({})


def test_importing_the_widget_keeps_the_matplotlib_backend():
    import subprocess
    import sys

    code = ("import matplotlib; b = dict.__getitem__(matplotlib.rcParams, 'backend'); "
            "import ampkit.widgets.sinking; print(b == dict.__getitem__(matplotlib.rcParams, 'backend'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "True", out.stderr[-2000:]
