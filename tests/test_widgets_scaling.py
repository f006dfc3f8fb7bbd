"""Headless tests of notebook 03's visual loss scaler: every control swept, what is shown equals what ampkit.scaling
computes (the replay: tests/test_widgets_replay.py)."""
from __future__ import annotations

import re

import pytest
import torch
import traitlets

from ampkit.formats import range_bands
from ampkit.lessons.loss_scaling import underflow_task
from ampkit.scaling import capture_gradients, log2_histogram, safe_window, scale_report
from ampkit.widgets.scaling import DTYPE_CHOICES, VisualLossScaler


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
