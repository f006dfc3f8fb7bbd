"""Headless tests of the O-level picker (drawn in the browser): every level x dtype, the state the page draws equals
the engine's, deterministic saved state (no timing in it), lazy training, the run-all message, bad input."""
import json
import math
import re
import subprocess
import sys

import pytest
import torch

from ampkit.device import device_report
from ampkit.lessons.autocast_and_levels import run_level
from ampkit.precision import LEVELS, level_label
from ampkit.widgets.precision import (
    MEMORY_FIELDS,
    OLevelPicker,
    dtype_table_html,
    nonfinite_at,
    run_state,
    summary_html,
)


@pytest.fixture(scope="module")
def picker():
    return OLevelPicker(steps=6, dtype="bf16")


def test_fast_dtype_is_marked_and_default():
    picker = OLevelPicker(steps=2)  # no dtype given: the default follows the hardware report
    labels = dict((v, k) for k, v in picker.dtype.options)
    assert set(labels) == {"bf16", "fp16"} and dict(picker.dtypes) == labels   # the page gets the same labels
    rep = device_report("cpu")
    short = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    native = {short[d] for d in rep.fast_dtypes}
    for value, label in labels.items():
        assert ("native here" in label) == (value in native)  # the mark follows the hardware, not a timing
    assert picker.dtype.value == picker.low == short[rep.default_dtype] == "bf16"
    assert picker.slider.options == list(LEVELS) and picker.slider.value == picker.level == "O0"
    # every level of the chosen dtype is trained when the view starts: the saved page toggles them
    assert sorted(picker.runs) == ["O0", "O1 bf16", "O2 bf16", "O3 bf16"]


def test_sweep_every_level_and_dtype(picker):
    for dt in ("bf16", "fp16"):
        picker.dtype.value = dt
        for lv in LEVELS:
            picker.slider.value = lv
            st = picker.state
            label = level_label(lv, dt)
            assert st.label == label and picker.labels[f"{lv} {dt}"] == label and picker.reference.level == "O0"
            if lv != "O0":
                assert st.dtype == {"bf16": "bfloat16", "fp16": "float16"}[dt]
            lin, ln = picker.rows[1], picker.rows[2]
            assert (lin["layer"], ln["type"]) == ("net.0", "LayerNorm")
            assert lin["params"] == {"O0": "fp32", "O1": "fp32", "O2": dt, "O3": dt}[lv]
            assert ln["params"] == {"O0": "fp32", "O1": "fp32", "O2": "fp32", "O3": dt}[lv]
            assert f"<b>{lv}</b>" in picker.table_html and label in picker.summary_html
            # what the page draws for this run is the engine's
            sent = picker.runs[label]
            assert sent == run_state(st, picker.reference)
            assert [float(w) for w in sent["losses"].split()] == pytest.approx(st.history.losses, nan_ok=True)
            assert [r[:5] for r in sent["rows"]] == [[r[k] for k in ("layer", "type", "params", "input", "output")]
                                                    for r in picker.rows]
            mem = st.memory.as_dict()
            assert sent["memory"] == [mem[k] for k in MEMORY_FIELDS]
            assert (mem["master weights"] > 0) == (lv == "O2")
            assert sent["bad"] == nonfinite_at(st.history.losses) and sent["diverged"] == st.history.diverged
            assert ("max |Δ|" in sent["title"]) == (lv != "O0" and not st.history.diverged)
    # O0 runs in fp32 whichever low dtype is toggled: one O0 run, seven runs in all
    assert len(picker.runs) == 7


def test_saved_state_is_deterministic_and_has_no_timing():
    a, b = OLevelPicker(steps=8, dtype="bf16"), OLevelPicker(steps=8, dtype="bf16")
    assert a.runs == b.runs                                   # seeded training: a re-execution does not churn
    state = {k: v for k, v in a.get_state().items() if k not in ("_esm", "_css", "text")}
    assert " ms" not in json.dumps(state) and "step time" not in json.dumps(state)
    assert "step time" in a.timings()["O1 bf16"]              # timings go out as messages only
    assert len(json.dumps(a.runs)) < 12_000


def test_o3_fp16_divergence_is_shown(picker):
    picker.dtype.value = "fp16"
    picker.slider.value = "O3"
    sent = picker.runs["O3 fp16"]
    assert picker.state.history.diverged and sent["bad"] == 1 and sent["losses"].split()[1] == "nan"
    assert "inf/NaN from step 1" in sent["title"] and "diverged" in sent["lines"][1]
    assert "diverged" in picker.summary_html
    picker.slider.value = "O1"
    assert picker.runs["O1 fp16"]["bad"] is None


def test_cached_results_are_reused(picker):
    picker.dtype.value = "bf16"
    picker.slider.value = "O1"
    first = picker.state
    picker.slider.value = "O2"
    picker.slider.value = "O1"
    assert picker.state is first


def test_lazy_training_streams_progress_and_run_all(monkeypatch):
    p = OLevelPicker(steps=3, auto_run=False)
    sent = []
    monkeypatch.setattr(p, "send", lambda msg: sent.append(msg))
    assert len(p.cache) == 0 and p.runs == {} and p.state is None
    p.slider.value = "O2"
    assert p.state is None and sent[-1] == {"type": "status", "key": "missing"}
    p._on_msg(p, {"type": "run_all"}, [])                      # the page's "run all missing" button
    assert len(p.runs) == 7 and len(p.cache) == 7 and p.state.level == "O2"
    progress = [m for m in sent if m["type"] == "progress"]
    assert progress[:3] == [{"type": "progress", "label": "O0", "step": s, "steps": 3} for s in (1, 2, 3)]
    assert sent[-1] == {"type": "status", "key": "all_done", "n": 7} and p.progress[1:] == (3, 3)
    auto = OLevelPicker(steps=3, dtype="bf16")
    monkeypatch.setattr(auto, "send", lambda msg: sent.append(msg))
    auto.dtype.value = "fp16"                                  # the page asked: the kernel trains it
    assert "O0 fp16" not in auto.runs and "O0" in auto.runs and auto.state.label == "O0"
    auto.slider.value = "O1"
    assert auto.state.label == "O1 fp16" and "O1 fp16" in auto.runs
    assert any(m["type"] == "timings" and "O1 fp16" in m["lines"] for m in sent)


def test_html_helpers(picker):
    picker.dtype.value, picker.slider.value = "bf16", "O2"
    html = dtype_table_html(picker.state.trace, "O2", "bfloat16")
    assert "ampkit-precision-table" in html and "kept fp32" in html
    s = summary_html(picker.state, picker.reference)
    assert "ms" in s and "KiB" in s and math.isfinite(picker.state.step_time)


def test_still_picture(picker):
    still = picker.still()
    assert still.children[1].value[:4] == b"\x89PNG" and "O-level" in still.children[0].value


def test_speed_is_said_in_words(picker):
    picker.dtype.value = "bf16"
    lines = picker.timings()
    for lv in LEVELS:
        text = lines[level_label(lv, "bf16")]
        if lv == "O0":
            assert "this is the reference" in text
        else:
            assert re.search(r"\d+\.\dx (faster|slower) than O0|about as fast as O0", text), text
        assert not re.search(r"→ \d+\.\d+x", text)  # no bare ratio like "→ 0.57x"


def test_o0_table_says_fp32_only(picker):
    picker.dtype.value, picker.slider.value = "fp16", "O0"
    assert "<b>O0</b> with fp32 only" in picker.table_html and "fp16" not in picker.table_html.split("</p>")[1]
    assert picker.rows[-1]["layer"] == "(to loss)" and picker.rows[-1]["output"] == "fp32"
    assert picker.runs["O0"]["caption"].startswith("<b>O0</b> with fp32 only")


def test_run_state_of_a_diverged_run():
    o0, o3 = run_level("mlp_ln", "O0", steps=3), run_level("mlp_ln", "O3", "fp16", steps=3, optimizer="adam")
    s = run_state(o3, o0)
    assert s["colour"] == "fp16" and s["memory0"] == [o0.memory.as_dict()[k] for k in MEMORY_FIELDS]


def test_bad_dtype_and_level_are_clear_errors(picker):
    with pytest.raises(ValueError, match="bf16, fp16|fp16, bf16"):
        OLevelPicker(steps=2, dtype="fp8")
    with pytest.raises(Exception, match="O0, O1, O2, O3"):
        OLevelPicker(steps=2, dtype="bf16", level="O4")
    with pytest.raises(Exception, match="O0, O1, O2, O3"):
        picker.slider.value = "O7"
    with pytest.raises(Exception, match="bf16, fp16|fp16, bf16"):
        picker.dtype.value = "fp8"
    assert OLevelPicker(steps=2, dtype=torch.bfloat16, auto_run=False).dtype.value == "bf16"


def test_importing_the_widget_leaves_the_matplotlib_backend_alone():
    code = ("import matplotlib; matplotlib.use('svg'); import ampkit.widgets.precision; "
            "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
