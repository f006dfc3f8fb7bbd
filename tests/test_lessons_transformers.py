"""Notebook 07's experiments (ampkit.lessons.transformers, ampkit.lessons.transformer_weights) and its widget
(ampkit.widgets.attention): each reproduced failure and each fix, at the sizes the notebook uses or smaller."""
import math

import pytest
import torch

from ampkit.lessons.transformer_weights import (
    FIXES,
    MISMATCHES,
    LoRALinear,
    dtype_mismatch,
    finetune_stored,
    lost_updates,
    unscale_error,
)
from ampkit.lessons.transformers import (
    attention_overflow,
    loss_rows,
    norm_rows,
    saved_bytes,
    sdpa_vs_manual,
    softmax_with_inf,
    train_side_by_side,
)


def test_three_runs_learn_with_the_same_weights_and_less_saved_memory_in_16_bits():
    runs = train_side_by_side(steps=6, batch_size=2, n_samples=32, n_layers=1, context=32)
    assert list(runs) == ["fp32", "bf16", "fp16"]
    first = {r.history.losses[0] for r in runs.values()}
    assert max(first) - min(first) < 1e-2                      # same start, same first batch
    assert all(r.history.losses[-1] < r.history.losses[0] for r in runs.values())
    assert len({r.param_bytes for r in runs.values()}) == 1    # O1: fp32 weights
    assert runs["bf16"].saved_bytes < 0.8 * runs["fp32"].saved_bytes
    assert runs["fp16"].history.scales[0] == 2.0 ** 16         # torch.amp.GradScaler's own default


def test_saved_bytes_counts_each_storage_once():
    from ampkit.models import build_model
    from ampkit.precision import apply_level

    m = build_model("decoder", n_layers=1, context=8, d_model=16, n_heads=2)
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O0")
    x2, x4 = torch.zeros(2, 8, dtype=torch.long), torch.zeros(4, 8, dtype=torch.long)
    one, two = saved_bytes(mp, x2, x2), saved_bytes(mp, x4, x4)
    assert 0 < one < two < 2.5 * one                           # activations grow with the batch, weights do not


def test_scale_after_the_matmul_overflows_fp16_where_scale_first_does_not():
    late, early = attention_overflow(60.0, 64, "fp16", "logits"), attention_overflow(60.0, 64, "fp16", "q")
    assert late.overflowed and late.nan_rows > 0
    assert not early.overflowed and early.nan_rows == 0
    ref = attention_overflow(60.0, 64, "fp32", "logits")
    assert ref.matmul_max > 65504 > ref.largest                # the unscaled product is what overflows
    assert attention_overflow(300.0, 64, "bf16", "logits").nan_rows == 0
    # the product grows like s²: doubling the activation scale multiplies the largest product by 4
    a, b = attention_overflow(4.0, 64, "fp32"), attention_overflow(8.0, 64, "fp32")
    assert b.matmul_max / a.matmul_max == pytest.approx(4.0, rel=1e-5)


def test_one_inf_makes_the_whole_softmax_row_nan():
    assert softmax_with_inf(5).isnan().all()
    assert softmax_with_inf(5, "fp32").isnan().all()


def test_sdpa_keeps_fp32_inside_where_the_written_out_attention_overflows():
    c = sdpa_vs_manual(60.0, 64, "fp16")
    assert c.manual_nan_rows > 0 and c.sdpa_nan_rows == 0 and c.sdpa_max_error < 0.05


def test_norm_rows_break_at_256_and_the_fp32_statistic_fixes_it():
    rows = {r["magnitude"]: r for r in norm_rows((255.0, 256.0, 4000.0))}
    assert rows[255.0]["rms_low"] == 0 and rows[256.0]["rms_low"] == 1.0 and math.isinf(rows[256.0]["square"])
    assert all(r["rms_fp32_stat"] == 0 for r in rows.values())
    bf = {r["magnitude"]: r for r in norm_rows((256.0, 4000.0), dtype="bf16")}
    assert all(r["rms_low"] < 0.02 for r in bf.values())       # bf16's range: no overflow, 8 bits of precision


def test_loss_rows_fp16_loses_gradient_entries_bf16_loses_precision():
    r = {row["dtype"]: row for row in loss_rows(vocab=8000, n=16)}
    assert r["fp16"]["grad_zero_share"] > 0.01 and r["bf16"]["grad_zero_share"] == 0
    assert r["bf16"]["loss_error"] > r["fp16"]["loss_error"] > r["fp32"]["loss_error"]
    assert r["fp32"]["loss_dtype"] == "float32" and r["fp16"]["loss_dtype"] == "float16"


def test_lost_updates_norm_gains_at_one_matrices_kept():
    lost = lost_updates(lr=1e-3)
    assert set(lost) == {"matrix", "embedding", "bias", "norm gain"}
    assert lost["norm gain"] == 1.0 and lost["matrix"] < 0.01
    half = lost_updates(lr=3e-3)["norm gain"]                  # only the steps down survive
    assert 0.2 < half < 0.8


def test_fp16_stored_model_errors_and_their_fixes():
    assert unscale_error() == "Attempting to unscale FP16 gradients."
    for case in MISMATCHES:
        msg = dtype_mismatch(case)
        assert isinstance(msg, str) and "half" in msg.lower() and "float" in msg.lower(), (case, msg)
        fixed = dtype_mismatch(case, fix=True)
        assert fixed.dtype == (torch.float32 if case == "fp32 class weights" else torch.float16)
    assert dtype_mismatch("fp32 class weights") == "expected scalar type Half but found Float"   # the words
    with pytest.raises(ValueError, match="'fp32 input', 'fp32 softmax', 'fp32 key cache', 'fp32 class weights'"):
        dtype_mismatch("fp64")


@pytest.mark.parametrize("fix", FIXES)
def test_both_fixes_fine_tune_a_16_bit_model(fix):
    losses = finetune_stored(fix, steps=4)
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]


def test_lora_linear_starts_as_its_base_and_trains_only_fp32_adapters():
    base = torch.nn.Linear(8, 4).half()
    lora = LoRALinear(base)
    x = torch.randn(3, 8).half()
    assert torch.equal(lora(x), base(x))
    trainable = [p for p in lora.parameters() if p.requires_grad]
    assert len(trainable) == 2 and all(p.dtype == torch.float32 for p in trainable)


@pytest.mark.parametrize("bad,match", [({"act_scale": -1.0}, "act_scale"), ({"dtype": "fp8"}, "'fp32', 'bf16', 'fp16'"),
                                       ({"scale_at": "v"}, "'q', 'logits'"), ({"head_dim": 0}, "head_dim")])
def test_bad_attention_arguments_name_the_valid_choices(bad, match):
    kw = {"act_scale": 8.0, "head_dim": 64, **bad}
    with pytest.raises((ValueError, TypeError), match=match):
        attention_overflow(**kw)


def test_attention_widget_follows_its_sliders():
    from ampkit.widgets.attention import HEAD_SIZES, AttentionOverflowView

    v = AttentionOverflowView(act_scale=8.0, head_dim=64)
    assert [r.dtype for r in v.results] == ["fp32", "bf16", "fp16"] and not v.results[2].overflowed
    png0 = v.image.value
    v.scale.value = 64.0
    assert v.results[2].overflowed and "fp16</b>: largest matmul output inf" in v.readout.value
    assert v.results[2] == attention_overflow(64.0, 64, "fp16", "logits")
    assert v.image.value != png0
    v.where.value = "q"
    assert not v.results[2].overflowed and "1/√d on q" in v.readout.value
    v.head.value = 256
    assert v.results[2] == attention_overflow(64.0, 256, "fp16", "q")
    with pytest.raises(ValueError, match=", ".join(map(str, HEAD_SIZES))):
        AttentionOverflowView(head_dim=48)
