"""ampkit.precision: traces, memory, the op probe, labels, bad input (split from test_precision.py, which checks
that every level trains as its independent reference does)."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from test_precision import _batches, _sgd  # the shared tiny data and optimizer
from torch import nn

from ampkit.models import build_model
from ampkit.precision import (
    DOCUMENTED_AUTOCAST,
    LEVEL_MAP,
    LEVELS,
    MixedPrecision,
    apply_level,
    level_label,
    level_map_rows,
    memory_report,
    probe_autocast_ops,
    resolve_level,
    speed_phrase,
    trace_dtypes,
)
from ampkit.train import train_step

LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}



def test_trace_table_for_a_known_model():
    x = torch.zeros(2, 16)
    m = build_model("mlp_ln", depth=1)  # Linear, LayerNorm, ReLU, Linear
    expect = {  # level: [(name, params, input, output)]
        "O0": [("(model)", None, "f", "f"), ("net.0", "f", "f", "f"), ("net.1", "f", "f", "f"),
               ("net.2", None, "f", "f"), ("net.3", "f", "f", "f")],
        "O1": [("(model)", None, "f", "b"), ("net.0", "f", "f", "b"), ("net.1", "f", "b", "b"),
               ("net.2", None, "b", "b"), ("net.3", "f", "b", "b")],
        "O2": [("(model)", None, "b", "b"), ("net.0", "b", "b", "b"), ("net.1", "f", "f", "f"),
               ("net.2", None, "b", "b"), ("net.3", "b", "b", "b")],
        "O3": [("(model)", None, "b", "b"), ("net.0", "b", "b", "b"), ("net.1", "b", "b", "b"),
               ("net.2", None, "b", "b"), ("net.3", "b", "b", "b")],
    }
    for _level, rows in expect.items():  # the last row: what MixedPrecision.forward hands to the loss
        rows.append(("(to loss)", None, rows[0][3], "f"))
    code = {None: None, "f": torch.float32, "b": torch.bfloat16}
    for level, rows in expect.items():
        got = trace_dtypes(m, x, level, "bf16")
        assert [(r.name, r.param_dtype, r.input_dtype, r.output_dtype) for r in got] == \
            [(n, code[p], code[i], code[o]) for n, p, i, o in rows], level
    assert all(p.dtype == torch.float32 for p in m.parameters())  # the original is untouched
    assert "kept fp32" in trace_dtypes(m, x, "O2", "bf16")[2].note
    assert trace_dtypes(m, x, "O1", "bf16")[1].as_row()["output"] == "bf16"
    o1 = trace_dtypes(m, x, "O1", "bf16")
    # both Linears are lowered by autocast (the second one receives bf16 already); the LayerNorm follows its input
    assert o1[1].note == o1[4].note == "autocast lowers this op"
    assert o1[2].note.startswith("not on this device's fp32 list")
    assert o1[-1].note == "cast to fp32 for the loss" and trace_dtypes(m, x, "O0")[-1].note.startswith("already")


def test_memory_report_measures_the_tensors():
    sizes = {}
    for level in LEVELS:
        m = build_model("mlp", seed=0)
        n = sum(p.numel() for p in m.parameters())
        mp = apply_level(m, torch.optim.Adam(m.parameters(), lr=1e-3), level, "fp16")
        x, y = _batches("mlp", 1)[0]
        train_step(mp, x, y, F.cross_entropy)
        sizes[level] = memory_report(mp)
    n_tensors = len(list(build_model("mlp").parameters()))
    step_bytes = 4 * n_tensors  # Adam keeps a float32 'step' tensor per parameter
    assert sizes["O0"].weights == 4 * n and sizes["O0"].grads == 4 * n
    assert sizes["O0"].optimizer_state == 8 * n + step_bytes
    assert sizes["O1"] == sizes["O0"]
    assert sizes["O2"].weights == 2 * n and sizes["O2"].grads == 2 * n
    assert sizes["O2"].masters == 4 * n and sizes["O2"].master_grads == 4 * n
    assert sizes["O2"].optimizer_state == 8 * n + step_bytes
    assert sizes["O2"].total > sizes["O0"].total  # masters cost more than the halved weights save
    assert sizes["O3"].weights == 2 * n and sizes["O3"].optimizer_state == 4 * n + step_bytes
    assert sizes["O3"].masters == 0 and sizes["O3"].total < sizes["O0"].total / 1.9
    assert sizes["O2"].as_dict()["total"] == sizes["O2"].total


def test_op_probe_discovers_the_cpu_lists():
    rows = {r.op: r for r in probe_autocast_ops("cpu", "bf16")}
    assert set(rows) == set(DOCUMENTED_AUTOCAST["cpu"])
    for op in ("linear", "matmul", "conv2d", "bmm"):
        assert rows[op].observed == "lower" and rows[op].out_fp32_in == torch.bfloat16
    for op in ("mse_loss", "cross_entropy", "prod"):
        assert rows[op].observed == "fp32" and rows[op].out_low_in == torch.float32
    assert rows["index_copy"].observed == "promote"
    for op in ("softmax", "layer_norm", "relu", "exp", "sum"):
        assert rows[op].observed == "unlisted" and rows[op].out_low_in == torch.bfloat16
        assert rows[op].out_fp32_in == torch.float32
    assert rows["cat"].agrees and rows["cat"].documented == "promote"
    assert all(r.agrees for r in rows.values()), [r.op for r in rows.values() if not r.agrees]
    fp16 = probe_autocast_ops("cpu", "fp16", ops=["linear", "softmax"])
    assert fp16[0].out_fp32_in == torch.float16 and fp16[1].observed == "unlisted"
    with pytest.raises(ValueError, match="probe-able ops"):
        probe_autocast_ops("cpu", "bf16", ops=["fft"])


def test_level_map():
    rows = level_map_rows()
    assert [r["level"] for r in rows] == list(LEVELS)
    assert set(rows[0]) == {"level", "ampkit (PyTorch)", "Apex amp", "MindSpore", "Paddle"}
    assert "master" in LEVEL_MAP["O2"]["Apex amp"] and "BatchNorm" in LEVEL_MAP["O2"]["MindSpore"]
    # O2 and O3 hand the loss an fp32 output in ampkit, Apex and MindSpore alike (the trace's last row shows it)
    for level in ("O2", "O3"):
        for fw in ("ampkit (PyTorch)", "Apex amp", "MindSpore"):
            assert "output cast to fp32" in LEVEL_MAP[level][fw], (level, fw)
        assert trace_dtypes(build_model("mlp"), torch.zeros(2, 16), level, "bf16")[-1].output_dtype == torch.float32
    # MindSpore keeps the stored parameters fp32 at O2 (cast when each cell runs)
    assert "stored parameters stay fp32" in LEVEL_MAP["O2"]["MindSpore"]


def test_level_label_names_what_runs():
    assert level_label("O0", "bf16") == level_label("o0", torch.float16) == level_label("O0") == "O0"
    assert level_label("O1", "bfloat16") == "O1 bf16" and level_label("O3", torch.float16) == "O3 fp16"
    with pytest.raises(ValueError, match="O0, O1, O2, O3"):
        level_label("O5", "bf16")
    with pytest.raises(ValueError):
        level_label("O1", "fp12")


def test_speed_phrase_says_what_the_ratio_is():
    assert speed_phrase(0.5, 1.1) == "2.2x faster than O0"
    assert speed_phrase(1.8, 1.0, ref="fp32") == "1.8x slower than fp32"
    assert speed_phrase(1.0, 1.04) == speed_phrase(1.04, 1.0) == "about as fast as O0"
    # the same words as the device report's ratios (ampkit.device.speed_words): whole numbers from 10x
    assert speed_phrase(56.3, 1.0, ref="fp32") == "56x slower than fp32" and speed_phrase(1.0, 12.4) == \
        "12x faster than O0"
    for bad in [(0, 1), (1, -1), (float("nan"), 1), ("1", 1)]:
        with pytest.raises(ValueError, match="positive"):
            speed_phrase(*bad)


def test_forward_output_is_fp32_and_tokens_pass_through():
    for level in LEVELS:
        m = build_model("transformer")
        mp = apply_level(m, _sgd(m), level, "bf16")
        out = mp.forward(torch.zeros(2, 16, dtype=torch.long))
        assert out.dtype == torch.float32
        assert isinstance(mp.autocast(), torch.autocast) == (level == "O1")
        assert mp.compute_dtype == (torch.float32 if level == "O0" else torch.bfloat16)
        assert level in repr(mp)


@pytest.mark.parametrize("bad", ["O4", "o1 ", 2, "02", "", None, "O1O2", 1.0])
def test_bad_levels(bad):
    with pytest.raises(ValueError, match="O0, O1, O2, O3"):
        resolve_level(bad)
    m = build_model("mlp")
    with pytest.raises(ValueError, match="O0, O1, O2, O3"):
        apply_level(m, _sgd(m), bad)


def test_lower_case_levels_are_accepted():
    assert [resolve_level(s) for s in ("o0", "o1", "o2", "o3", "O2")] == ["O0", "O1", "O2", "O3", "O2"]
    with pytest.raises(ValueError, match="no surrounding spaces"):
        resolve_level(" O2")
    with pytest.raises(ValueError, match="letter O"):
        resolve_level("01")
    with pytest.raises(ValueError, match="'O2'"):
        resolve_level(2)


@pytest.mark.parametrize("bad", ["fp8", torch.float64, "float32", "int8", torch.int8])
def test_bad_dtypes_name_the_supported_ones(bad):
    m = build_model("mlp")
    with pytest.raises(ValueError, match="bfloat16"):
        apply_level(m, _sgd(m), "O1", bad)


def test_bad_models_and_optimizers():
    m = build_model("mlp")
    opt = _sgd(m)
    apply_level(m, opt, "O1")
    with pytest.raises(ValueError, match="already applied"):
        apply_level(m, _sgd(m), "O2")
    m2 = build_model("mlp")
    with pytest.raises(ValueError, match="already given level"):
        apply_level(m2, opt, "O2")
    empty = nn.ReLU()
    with pytest.raises(ValueError, match="no parameters"):
        apply_level(empty, torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), "O1")
    a, b = build_model("mlp", seed=0), build_model("mlp", seed=1)
    with pytest.raises(ValueError, match="not parameters of this model"):
        apply_level(a, _sgd(b), "O2")
    c = build_model("mlp")
    with pytest.raises(ValueError, match="does not hold"):
        apply_level(c, torch.optim.SGD(list(c.parameters())[:2], lr=0.1), "O2")
    d = build_model("mlp").half()
    with pytest.raises(ValueError, match="fp32 model"):
        apply_level(d, _sgd(d), "O1")
    e = build_model("mlp")
    opt_e = torch.optim.Adam(e.parameters())
    e(torch.zeros(1, 16)).sum().backward()
    opt_e.step()
    with pytest.raises(ValueError, match="before the optimizer's first step"):
        apply_level(e, opt_e, "O3")
    with pytest.raises(TypeError, match="nn.Module"):
        apply_level("mlp", opt, "O1")
    with pytest.raises(TypeError, match="Optimizer"):
        apply_level(build_model("mlp"), [1], "O1")
    with pytest.raises(TypeError, match="MixedPrecision"):
        memory_report(build_model("mlp"))
    with pytest.raises(ValueError, match="already has a level"):
        trace_dtypes(m, torch.zeros(1, 16), "O1")


def test_bf16_with_a_scaler_warns_but_works():
    m = build_model("mlp")
    mp = apply_level(m, _sgd(m), "O2", "bf16")
    x, y = _batches("mlp", 1)[0]
    with pytest.warns(UserWarning, match="rarely needs loss scaling"):
        loss = train_step(mp, x, y, F.cross_entropy, torch.amp.GradScaler("cpu"))
    assert torch.isfinite(loss)
    m2 = build_model("mlp")
    mp2 = apply_level(m2, _sgd(m2), "O2", "fp16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_step(mp2, x, y, F.cross_entropy, torch.amp.GradScaler("cpu"))


def test_o2_hooks_can_be_removed():
    m = build_model("mlp_ln")
    mp = apply_level(m, _sgd(m), "O2", "bf16")
    assert isinstance(mp, MixedPrecision) and len(mp._hooks) == 4
    mp.remove_hooks()
    assert not mp._hooks


def test_trace_of_the_cnn_with_batchnorm():
    m = build_model("cnn_bn")
    x = torch.zeros(2, 1, 32, 32)
    o2 = {t.name: t for t in trace_dtypes(m, x, "O2", "fp16")}
    assert o2["conv"].param_dtype == torch.float16 and o2["conv"].output_dtype == torch.float16
    assert o2["bn"].param_dtype == o2["bn"].input_dtype == o2["bn"].output_dtype == torch.float32
    assert o2["relu1"].input_dtype == torch.float16  # cast back after the norm
    o1 = {t.name: t for t in trace_dtypes(m, x, "O1", "bf16")}
    assert o1["conv"].note == "autocast lowers this op" and o1["fc1"].output_dtype == torch.bfloat16


def test_short_name_is_the_one_map():
    from ampkit.dtypes import SHORT_NAMES, short_name
    from ampkit.widgets.style import DTYPE_COLOURS, dtype_colour

    for long, short in SHORT_NAMES.items():
        assert short_name(long) == short_name(getattr(torch, long)) == short_name(f"torch.{long}") == short
        assert short_name(short) == short
    assert short_name("half") == "fp16" and short_name("fp8") == "e4m3" and short_name(torch.bool) == "bool"
    with pytest.raises(ValueError, match="fp32, bf16, fp16"):
        short_name("float17")
    with pytest.raises(TypeError, match="torch dtype or its name"):
        short_name(16)
    # the colours and the trace's table cells use it
    assert dtype_colour(torch.bfloat16) == dtype_colour("bfloat16") == DTYPE_COLOURS["bf16"]
    assert dtype_colour("nonsense") == dtype_colour(3) == "#57606a"


def test_plain_mixed_precision_steps_a_module_as_it_is():
    m = nn.Linear(4, 2).to(torch.bfloat16)  # any dtype: plain() casts nothing and checks nothing
    mp = MixedPrecision.plain(m, torch.optim.SGD(m.parameters(), lr=0.1))
    assert (mp.level, mp.masters, mp.compute_dtype) == ("O0", [], torch.float32)
    assert mp.forward(torch.ones(3, 4, dtype=torch.bfloat16)).dtype == torch.float32  # the loss still sees fp32
    assert m.weight.dtype == torch.bfloat16 and not hasattr(m, "_ampkit_precision_level")
    with pytest.raises(TypeError, match="Optimizer"):
        MixedPrecision.plain(m, None)

