"""Headless tests of notebook 04's sink timeline (drawn in the browser: js/sink.js; its arithmetic against the
engine: tests/browser/test_front_sink_arith_browser.py) and of the notebook's still figures: every control moves the
engine's state, bad input is refused naming the valid range, the measure button fills the sliders, the state sent
to the page is small and holds only the controls and the fixed costs."""
from __future__ import annotations

import json

import numpy as np
import pytest
import traitlets

from ampkit.sinking import Calibration, ModeMeasurement
from ampkit.timeline import GPU_LIKE, SINK_MODES, SimParams, Summary, gantt_bars, simulate_all, summarise
from ampkit.widgets.sink_timeline import MAX_BARS, SLIDERS, SinkTimeline
from ampkit.widgets.sinking import gantt_figure, measured_figure, summary_html
from ampkit.widgets.style import png_bytes


@pytest.fixture(scope="module")
def w():
    return SinkTimeline()


def test_initial_state_matches_the_pure_function(w):
    _, expected = summarise("none", w.params)
    assert w.summary == expected and w.params == GPU_LIKE
    assert "ampkit-sink-step" in w.readout_html and f"{expected.step_time * 1e6:.1f} µs" in w.readout_html
    assert w.bars == gantt_bars(w.timeline, max_bars=MAX_BARS)


def test_summary_html_shows_every_number_in_its_classed_cell():
    html = summary_html(Summary("data+graph", 12.345e-6, 81_004.4, 0.456, 0.125, 2.5))
    for cell in ("<code>data+graph</code>", "<td class='ampkit-sink-step'>12.3 µs</td>",
                 "<td class='ampkit-sink-rate'>81,004</td>", "<td class='ampkit-sink-util'>46%</td>",
                 "<td class='ampkit-sink-syncs'>0.125</td>", "<td class='ampkit-sink-speedup'>2.50x</td>"):
        assert cell in html, cell
    tl, s = summarise("data", SimParams(prep=1.0, n_ops=2, op=1.0, sink_size=3), steps=4)
    assert f"{s.speedup:.2f}x" in summary_html(s) == summary_html(summarise("data", tl.params, 4)[1])


def test_sink_size_changes_the_timeline_in_loop_mode(w):
    w.mode.value = "data+graph+loop"
    w.sink_size.value = 2
    before = w.summary
    w.sink_size.value = 16
    assert w.sink_steps == 16 and w.params.sink_size == 16
    assert w.summary.syncs_per_step == pytest.approx(2 / 32)      # 32 steps shown, a sync after every 16
    assert before.syncs_per_step == pytest.approx(4 / 8)
    assert w.summary.step_time < before.step_time
    assert w.title_text.startswith("Simulated data+graph+loop: 32 steps, ")


def test_each_control_reaches_the_params(w):
    w.prep.value = 100.0
    w.launch.value = 10.0
    w.n_ops.value = 40
    w.op.value = 2.0
    w.async_device.value = False
    p = w.params
    assert (w.prep_us, w.launch_us, w.op_count, w.op_us, w.device_async) == (100.0, 10.0, 40, 2.0, False)
    assert p.prep == pytest.approx(100e-6) and p.launch == pytest.approx(10e-6) and p.n_ops == 40
    assert p.op == pytest.approx(2e-6) and p.async_device is False
    for mode in SINK_MODES:
        w.mode.value = mode
        _, expected = summarise(mode, p)
        assert w.summary == expected and f"<code>{mode}</code>" in w.readout_html


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
            assert len(w.bars) <= MAX_BARS


def test_bad_input_names_the_valid_choices():
    w = SinkTimeline()
    with pytest.raises(traitlets.TraitError, match="'none', 'data', 'data\\+graph', 'data\\+graph\\+loop'; got 'loop'"):
        w.mode.value = "loop"
    with pytest.raises(traitlets.TraitError, match=r"sink_size \(steps\) must be a number from 1 to 32; got 0"):
        w.sink_size.value = 0
    with pytest.raises(traitlets.TraitError, match=r"op time \(µs\) must be a number from 0.1 to 1000; got nan"):
        w.op.value = float("nan")
    with pytest.raises(TypeError, match="SimParams"):
        SinkTimeline({"prep": 1e-6})
    assert w.sink_mode == "none" and w.sink_steps == 4


def test_the_page_gets_only_the_controls_and_the_fixed_costs():
    """What travels to the page (and into the saved notebook): the controls' values, the costs no slider moves,
    the sliders' ranges, the kinds' colours and the words: a few KB, no timeline (the page computes it)."""
    w = SinkTimeline(GPU_LIKE, mode="data+graph+loop")
    state = w.get_state()
    assert state["base_costs"] == {"copy": 40e-6, "sync": 60e-6, "callback": 30e-6, "handoff": 0.0,
                                   "graph_launch": 15e-6, "fusion": None, "depth": 2}
    assert [s["trait"] for s in state["sliders"]] == [t for t, *_ in SLIDERS]
    assert [k for k, _ in state["kinds"]] == ["prep", "copy", "handoff", "launch", "compute", "wait", "sync",
                                              "callback"]
    sent = {k: v for k, v in state.items() if k not in ("_esm", "_css")}
    assert len(json.dumps(sent, ensure_ascii=False)) < 4_000
    assert set(w.text) >= {"no_kernel", "measure", "title", "header", "lanes", "kinds", "empty", "xlabel"}
    assert w.text["header"] == ["mode", "step time", "steps/s", "device busy", "syncs/step", "vs no sinking"]
    assert w.text["no_kernel"] == "run the notebook to compute this on your machine"


def test_graph_sink_beats_eager_when_launches_dominate():
    w = SinkTimeline(GPU_LIKE)
    w.launch.value, w.op.value, w.n_ops.value = 20.0, 1.0, 100
    w.mode.value = "data"
    eager = w.summary.step_time
    w.mode.value = "data+graph"
    assert w.summary.step_time < eager / 5


def test_measure_fills_the_sliders_from_a_calibration():
    cal = Calibration("cpu", launch=2e-6, op=3e-6, n_ops=57, sync=1e-6, callback=1e-6, copy=0.0, prep=4e-4,
                      eager_step=3e-4, graph_step=1.5e-4, compile_seconds=2.0, graph_message="", async_device=False)
    w = SinkTimeline(calibrate_fn=lambda: cal)
    w._on_front_msg(w, {"event": "measure"}, [])                   # what the page's button sends
    assert w.calibration is cal
    assert w.prep.value == pytest.approx(400.0) and w.launch.value == pytest.approx(2.0)
    assert w.n_ops.value == 57 and w.op.value == pytest.approx(3.0) and w.async_device.value is False
    assert "measured on cpu" in w.status
    # the compiled step alone took 150 us: 2 us to launch, 148 us of compute instead of 57 x 3 = 171 us eager
    assert w.fusion == pytest.approx(148 / 171) and w.base_costs["fusion"] == w.fusion
    expected = SimParams(prep=4e-4, n_ops=57, launch=2e-6, op=3e-6, sync=1e-6, callback=1e-6, graph_launch=2e-6,
                         graph_compute=148e-6, depth=2, sink_size=w.sink_size.value, async_device=False)
    for name in SimParams.__dataclass_fields__:
        assert getattr(w.params, name) == pytest.approx(getattr(expected, name)), name
    w.op.value = 6.0                       # twice the op time: the fused graph's compute doubles too
    assert w.params.graph_compute == pytest.approx(2 * 148e-6)
    w._on_front_msg(w, {"event": "something else"}, [])            # other messages change nothing
    assert w.op_us == 6.0


def test_measure_with_the_real_calibration():
    w = SinkTimeline()
    w.measure()            # default: ampkit.sinking.calibrate(compile=False) on this machine
    assert w.calibration.n_ops == w.n_ops.value and w.calibration.device == "cpu"
    assert w.summary.step_time > 0


def test_still_picture_is_the_setting_readout_and_chart():
    w = SinkTimeline(GPU_LIKE, mode="none")            # no data sink: the loader lane has no bars
    assert not [e for e in w.bars if e.lane == "loader"]
    still = w.still()
    assert "<code>none</code>" in still.children[0].value and still.children[1].value == w.readout_html
    assert still.children[2].value[:8] == b"\x89PNG\r\n\x1a\n"
    assert w.text["empty"]["loader"].startswith("no background loader")


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
