"""Headless tests of notebook 03's widgets: every control swept, what is shown equals what ampkit.scaling computes."""
from __future__ import annotations

import math
import re

import pytest
import torch
import traitlets

from ampkit.formats import range_bands
from ampkit.lessons.loss_scaling import underflow_task
from ampkit.scaling import capture_gradients, log2_histogram, replay, safe_window, scale_report
from ampkit.widgets.scaling import DTYPE_CHOICES, ScalerReplay, VisualLossScaler


@pytest.fixture(scope="module")
def real_grads() -> torch.Tensor:
    task = underflow_task()
    return capture_gradients(task.model(), task.X[:128], task.y[:128], loss_weight=task.loss_weight)


def _pct_in(html: str, label: str) -> str:
    m = re.search(label + r" ([<\d.\s]+%)", html)
    assert m, html
    return m.group(1)


def test_visual_scaler_full_sweep_every_dtype(real_grads):
    """The state sent to the page holds, for every slider position of every format, the engine's own numbers; the
    view's state follows the traits the page sets."""
    from ampkit.widgets.scaling import _pct

    v = VisualLossScaler(real_grads)
    assert [f["name"] for f in v.formats] == [fmt for _, fmt in DTYPE_CHOICES] == list(v.sweep)
    for _, fmt in DTYPE_CHOICES:
        v.fmt = fmt
        b = range_bands(fmt, lo=-72, hi=40)
        sent = v.sweep[fmt]
        assert sent["bands"]["subnormal"] == list(b.subnormal) and sent["bands"]["overflow"] == list(b.overflow)
        window = safe_window(real_grads, fmt, lo=-8, hi=40)
        assert v.window == window and sent["window"] == (None if window is None else list(window))
        assert len(sent["pct"]) == v.max_log2 - v.min_log2 + 1 == 49
        for k in range(v.min_log2, v.max_log2 + 1):
            v.log2_scale = k
            ref = scale_report(real_grads, k, fmt)
            assert v.state == ref
            assert abs(ref.flushed + ref.subnormal + ref.normal + ref.overflow - 1) < 1e-9
            assert sent["pct"][k - v.min_log2] == [_pct(ref.flushed), _pct(ref.subnormal), _pct(ref.overflow)]
            assert f"2<sup>{k}</sup> in {fmt}" in v.readout_html
    edges, frac = log2_histogram(real_grads, lo=-112, hi=40, bins_per_octave=1)
    assert v.hist == {"edges": edges.tolist(), "frac": frac.tolist()}


def test_visual_scaler_readout_on_known_values():
    vals = torch.tensor([2.0**-30, 2.0**-20, 2.0**-10])
    v = VisualLossScaler(vals, log2_scale=0)
    assert _pct_in(v.readout_html, "flushed to zero") == "33.33 %"       # 2**-30 < 2**-25: gone in fp16
    assert _pct_in(v.readout_html, "subnormal") == "33.33 %"             # 2**-20: subnormal
    assert v.sweep["float16"]["pct"][0 + 8] == ["33.33 %", "33.33 %", "0 %"]
    v.log2_scale = 6                                                      # 2**-24: the smallest subnormal
    assert v.state.flushed == 0 and v.state.overflow == 0
    v.log2_scale = 26                                                     # 2**16 = 65536 > 65504
    assert _pct_in(v.readout_html, "overflow") == "33.33 %"
    assert v.window == (6, 25)
    assert "2<sup>6</sup> … 2<sup>25</sup>" in v.readout_html
    v.fmt = "bf16"
    assert v.fmt == "bfloat16"
    assert v.state.overflow == 0 and v.state.flushed == 0 and v.window == (-8, 40)   # bf16: any scale is safe
    v.fmt = "float8_e4m3fn"
    assert v.window is None and "none in range" in v.readout_html         # 2**20 of range is too little
    assert v.sweep["float8_e4m3fn"]["window"] is None


def test_visual_scaler_bad_input():
    with pytest.raises(TypeError, match="gradient values"):
        VisualLossScaler(torch.tensor([]))
    with pytest.raises(ValueError, match="supported formats"):
        VisualLossScaler(torch.ones(3), fmt="fp17")
    with pytest.raises(ValueError, match="offers"):
        VisualLossScaler(torch.ones(3), fmt="fp32")
    v = VisualLossScaler(torch.ones(3), log2_scale=3)
    with pytest.raises(traitlets.TraitError, match=r"\[-8, 40\]"):
        v.log2_scale = 41
    with pytest.raises(traitlets.TraitError, match="offers"):
        v.fmt = "float32"
    assert v.log2_scale == 3 and v.fmt == "float16" and v.state.log2_scale == 3


def test_visual_scaler_is_drawn_in_the_browser_with_the_kit_look():
    from ampkit.widgets.front import FrontView, esm, look
    from ampkit.widgets.style import BAND_COLOURS, BAND_LABELS

    v = VisualLossScaler(torch.tensor([2.0**-30, 2.0**-20, 1e-3]))
    assert isinstance(v, FrontView) and v.widget is v and v._esm == esm("scaler")
    assert v.look == look() and v.look["colours"]["band"] == BAND_COLOURS
    assert [n for n, _ in v.text["bands"]] == list(BAND_LABELS)
    assert "{pct}" in v.text["flushed"] and "{k}" in v.text["head"]
    assert f"color:{BAND_COLOURS['flushed']}" in v.readout_html
    still = v.still()
    assert still.children[-1].value[:4] == b"\x89PNG"                    # the picture for renderers without JS


def test_visual_scaler_state_is_small(real_grads):
    import json

    v = VisualLossScaler(real_grads)
    state = {k: val for k, val in v.get_state().items() if k != "_esm"}
    assert len(json.dumps(state)) < 50_000            # the saved view (module included) stays far below 200 KB


def test_replay_widget_full_sweeps(real_grads):
    task = underflow_task()
    gmax = [1e-6 * (1 + 0.5 * ((i * 7) % 5)) for i in range(120)]
    rp = ScalerReplay(gmax)
    fig, line = rp.fig, rp._line
    controls = [(rp.init, list(range(rp.init.min, rp.init.max + 1))),
                (rp.interval, list(range(rp.interval.min, rp.interval.max + 1, 7)) + [rp.interval.max]),
                (rp.backoff, [round(rp.backoff.min + 0.05 * i, 2) for i in range(17)]),
                (rp.hysteresis, list(range(rp.hysteresis.min, rp.hysteresis.max + 1)))]
    for slider, values in controls:
        for val in values:
            slider.value = val
            ref = replay(gmax, "fp16", init_scale=2.0 ** rp.init.value, growth_interval=rp.interval.value,
                         backoff_factor=round(rp.backoff.value, 4), hysteresis=rp.hysteresis.value)
            assert rp.state == ref
            assert f"<b class='ampkit-skipped'>{ref.skipped}</b> of 120" in rp.readout.value
            ys = list(line.get_ydata())
            assert len(ys) == 120 and ys[0] == rp.init.value
            assert len(rp._marks.get_offsets()) == ref.skipped
    assert rp.fig is fig and rp._line is line
    assert task.loss_weight > 0


def test_replay_overflows_exactly_at_the_fp16_limit():
    # grad max 2**-20: scale * g overflows fp16 once scale >= 65520 * 2**20 ~ 2**36
    rp = ScalerReplay([2.0**-20] * 60, init_log2=30, growth_interval=1)
    r = rp.state
    assert [s for s, o in zip(r.scales, r.overflow) if o][0] == 2.0**36
    assert all((s * 2.0**-20 >= 65520) == o for s, o in zip(r.scales, r.overflow))
    rp.hysteresis.value = 3
    assert rp.state.skipped > r.skipped            # with hysteresis the scale lingers above the limit longer


def test_replay_bad_input():
    with pytest.raises(ValueError, match="one gradient magnitude per step"):
        ScalerReplay([])
    with pytest.raises(ValueError, match="finite"):
        replay([1.0, float("nan")])


def test_widgets_use_the_kit_style():
    from matplotlib.colors import to_hex

    from ampkit.widgets.style import BAND_COLOURS, DPI

    rp = ScalerReplay([1e-6] * 30)
    for w in (rp,):
        width_in, _ = w.fig.get_size_inches()
        assert w.fig.dpi == DPI and width_in >= 6.5
        assert int(w.image.width) == int(width_in * DPI)                 # shown at its own pixel width
        assert w.ax.get_xlabel() and w.ax.get_ylabel()
    assert rp.ax.get_title()
    for line in rp.ax.collections[:1]:
        assert to_hex(line.get_facecolor()[0]) == BAND_COLOURS["overflow"]


# --- the replay's preset control ------------------------------------------------------------------------------
def test_replay_presets_overlay_each_selected_rule():
    from ampkit.scaling.presets import PRESETS, replay_presets
    from ampkit.widgets.scaling import PRESET_STYLES

    gmax = [1e-6 * (1 + 0.5 * ((i * 7) % 5)) for i in range(120)]
    rp = ScalerReplay(gmax, growth_interval=5)
    assert rp.preset_states == {} and "no framework preset selected" in rp.preset_readout.value
    assert not any(line.get_visible() for line in rp._preset_lines.values())
    png0 = rp.image.value
    rp.presets.value = ("torch", "mindspore", "deepspeed")
    assert rp.image.value != png0
    for at_init in (False, True):
        rp.start_at_init.value = at_init
        for k in (10, 30, 40):
            rp.init.value = k
            ref = replay_presets(["torch", "mindspore", "deepspeed"], gmax, "fp16", log2_init=k if at_init else None)
            assert rp.preset_states == ref
            for n, r in ref.items():
                line = rp._preset_lines[n]
                assert line.get_visible() and list(line.get_ydata()) == [math.log2(s) for s in r.scales]
                assert f"<b>{n}</b>" in rp.preset_readout.value
            assert len(rp._preset_skips.get_offsets()) == sum(r.skipped for r in ref.values())
    assert rp.preset_states["torch"].skipped > 0                     # from 2**40 torch skips its way down
    visible = [n for n, line in rp._preset_lines.items() if line.get_visible()]
    assert visible == ["torch", "mindspore", "deepspeed"]
    texts = [t.get_text() for t in rp._legend.get_texts()]
    assert {"torch", "mindspore", "deepspeed", "preset: step skipped", "preset: inf/NaN APPLIED"} <= set(texts)
    styles = list(PRESET_STYLES.values())
    assert len(set(styles)) == len(PRESETS) and len({c for c, _, _ in styles}) == len(PRESETS)   # distinguishable


def test_replay_marks_applied_overflow_apart_from_skipped():
    gmax = [2.0**-20] * 40
    rp = ScalerReplay(gmax, presets=("mindspore-fixed", "mindspore-fixed-apply"), presets_start_at_init=True,
                      init_log2=40)
    applied = rp.preset_states["mindspore-fixed-apply"]
    skipped = rp.preset_states["mindspore-fixed"]
    assert applied.applied_overflow == 40 and skipped.skipped == 40
    assert len(rp._preset_applied.get_offsets()) == 40 and len(rp._preset_skips.get_offsets()) == 40
    assert rp._preset_applied.get_paths()[0] is not rp._preset_skips.get_paths()[0]   # X vs x
    assert "overflow APPLIED <span class='ampkit-preset-applied'>40</span>" in rp.preset_readout.value
    rp.presets.value = ()
    assert len(rp._preset_applied.get_offsets()) == 0 and not rp._preset_lines["mindspore-fixed"].get_visible()


def test_replay_shows_a_stopped_deepspeed_run():
    rp = ScalerReplay([2.0**17] * 40, presets=("deepspeed",))   # overflows fp16 at any scale >= 1
    r = rp.preset_states["deepspeed"]
    assert r.stopped_at == 17 and r.final_scale == 1.0   # step 0 uses the hysteresis, 1-16 halve, 17 stops
    assert r.stopped_at is not None and "run stopped at step" in rp.preset_readout.value
    assert len(rp._preset_lines["deepspeed"].get_ydata()) == r.stopped_at + 1


def test_replay_with_every_preset_follows_the_init_slider():
    """With every preset started at the slider's scale, each preset's line is redrawn on a move (the update's
    speed is measured in benchmarks/bench_scaling.py, never asserted here)."""
    from ampkit.scaling.presets import PRESETS

    rp = ScalerReplay([1e-6 * (1 + (i % 7)) for i in range(150)], presets=tuple(PRESETS))
    rp.start_at_init.value = True
    before = {name: list(line.get_ydata()) for name, line in rp._preset_lines.items()}
    rp.init.value = rp.init.value + 3
    after = {name: list(line.get_ydata()) for name, line in rp._preset_lines.items()}
    assert set(after) == set(PRESETS) and all(after[n] != before[n] for n in PRESETS)
