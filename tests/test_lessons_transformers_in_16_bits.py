"""Notebook 07's experiments (ampkit.lessons.transformers_in_16_bits: activations, weights) and its widget
(ampkit.widgets.attention): each reproduced failure and each fix, at the sizes the notebook uses or smaller."""
import math

import pytest
import torch
import traitlets

from ampkit.lessons.transformers_in_16_bits.activations import (
    attention_overflow,
    gradient_errors,
    largest_logit,
    loss_rows,
    norm_rows,
    overflow_threshold,
    predicted_zero_share,
    sdpa_vs_manual,
    softmax_with_inf,
    step_activation_bytes,
    train_side_by_side,
    underflow_share,
)
from ampkit.lessons.transformers_in_16_bits.weights import (
    FIXES,
    MISMATCHES,
    LoRALinear,
    dtype_mismatch,
    finetune_stored,
    kept_in_bf16,
    lost_updates,
    train_in_bf16,
    unscale_error,
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
    from ampkit.models import build_model

    n_params = sum(p.numel() for p in build_model("decoder", n_layers=1, context=32).parameters())
    assert all(r.weights.dtype == torch.float32 and r.weights.numel() == n_params for r in runs.values())


def test_step_activation_bytes_counts_each_storage_once():
    from ampkit.models import build_model
    from ampkit.precision import apply_level

    m = build_model("decoder", n_layers=1, context=8, d_model=16, n_heads=2)
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O0")
    x2, x4 = torch.zeros(2, 8, dtype=torch.long), torch.zeros(4, 8, dtype=torch.long)
    one, two = step_activation_bytes(mp, x2, x2), step_activation_bytes(mp, x4, x4)
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
    assert c.upcast_nan_rows == 0 and c.upcast_max_error < 0.05          # GPT-2's fp32 baddbmm path
    # GPT-J's cast of q and k to fp32 does not hold inside autocast: the matmul runs in fp16 again and overflows
    assert c.autocast_cast_dtype == "float16" and math.isinf(c.autocast_cast_max)
    assert sdpa_vs_manual(60.0, 64, "bf16").autocast_cast_dtype == "bfloat16"


def test_gradient_errors_fp16_first_step_closer_to_fp32_than_bf16():
    e = gradient_errors(batch_size=2, n_layers=1, context=32)
    assert set(e) == {"bf16", "fp16"} and 0 < e["fp16"] < e["bf16"] / 3


def test_overflow_threshold_is_where_the_largest_product_overflows_and_falls_with_the_context():
    for n in (16, 64, 256):
        t = overflow_threshold(64, n)
        assert not attention_overflow(0.99 * t, 64, tokens=n).overflowed
        assert attention_overflow(1.01 * t, 64, tokens=n).overflowed
    assert overflow_threshold(64, 16) > overflow_threshold(64, 64) > overflow_threshold(64, 256)
    assert overflow_threshold(64, 64) < 0.6 * math.sqrt(65504 / 8)     # far below where s²·√d reaches 65504
    # a longer context extends the same sequence: its largest product can only grow
    assert largest_logit(64, 32) <= largest_logit(64, 64) <= largest_logit(64, 128)
    # scale on q: the threshold on s moves by exactly d**(1/4); correlated q and k overflow sooner
    assert overflow_threshold(64, 64, scale_at="q") / overflow_threshold(64, 64) == pytest.approx(8 ** 0.5)
    assert overflow_threshold(64, 64, correlated=True) < overflow_threshold(64, 64)
    assert largest_logit(64, 64, correlated=True) > 64                 # k = q: a sum of d squares, about d
    t = overflow_threshold(64, 64, dtype="bf16")
    assert t > 1e15 and not attention_overflow(min(t / 2, 1e6), 64, "bf16").overflowed


def test_norm_rows_break_at_256_and_the_fp32_statistic_fixes_it():
    rows = {r["magnitude"]: r for r in norm_rows((255.0, 256.0, 4000.0))}
    assert rows[255.0]["rms_low"] == 0 and rows[256.0]["rms_low"] == 1.0 and math.isinf(rows[256.0]["square"])
    assert rows[255.0]["out_low"] == 1.0 and rows[256.0]["out_low"] == 0.0    # the output itself, not its error
    assert all(r["rms_fp32_stat"] == 0 for r in rows.values())
    bf = {r["magnitude"]: r for r in norm_rows((256.0, 4000.0), dtype="bf16")}
    assert all(r["rms_low"] < 0.02 for r in bf.values())       # bf16's range: no overflow, 8 bits of precision


def test_loss_rows_the_loss_in_fp32_removes_the_16_bit_loss_error():
    r = {(row["logits"], row["loss_in"]): row for row in loss_rows(vocab=8000, n=16)}
    assert r["bf16", "bf16"]["loss_error"] > r["fp16", "fp16"]["loss_error"] > r["fp32", "fp32"]["loss_error"]
    assert r["bf16", "bf16"]["loss_error"] > 10 * r["bf16", "fp32"]["loss_error"]
    assert r["fp32", "fp32"]["loss_dtype"] == "float32" and r["fp16", "fp16"]["loss_dtype"] == "float16"
    assert r["fp16", "fp32"]["loss_dtype"] == "float32" and r["fp16", "fp32"]["grad_dtype"] == "float16"
    assert r["fp16", "fp32"]["grad_max_rel_error"] >= 1                  # some gradient entries still underflow


def test_gradient_entries_underflow_not_probabilities_and_the_loss_scale_keeps_them():
    kw = {"vocab": 32000, "n": 64}
    p, g = underflow_share("probabilities", **kw), underflow_share("gradient", **kw)
    assert p < 0.01 and 0.3 < g < 0.4
    assert underflow_share("gradient", scale=2.0**16, **kw) == 0
    assert underflow_share("gradient", "bf16", **kw) == 0 == underflow_share("probabilities", "bf16", **kw)
    assert underflow_share("gradient", positions=8192, **kw) > 0.9      # the mean's 1/N is what underflows
    assert underflow_share("gradient", positions=8192, scale=2.0**16, **kw) < 0.001
    for factor, measured in ((1.0, p), (1 / 64, g)):
        assert predicted_zero_share(factor) == pytest.approx(measured, abs=0.01)
    with pytest.raises(ValueError, match="'probabilities', 'gradient'"):
        underflow_share("logits")


def test_lost_updates_norm_gains_at_one_matrices_kept():
    lost = lost_updates(lr=1e-3)
    assert set(lost) == {"matrix", "embedding", "bias", "norm gain"}
    assert lost["norm gain"] == 1.0 and lost["matrix"] < 0.01
    half = lost_updates(lr=3e-3)["norm gain"]                  # only the steps down survive
    assert 0.2 < half < 0.8


def test_a_bf16_gain_at_one_keeps_only_steps_down_just_below_it_both_and_small_steps_never():
    assert kept_in_bf16(1.0, [0.003, -0.003, 3e-4]) == [False, True, False]
    assert kept_in_bf16(1 - 2**-8, [0.003, -0.003, 3e-4, -3e-4]) == [True, True, False, False]
    assert kept_in_bf16(0.5, [0.001, -0.001]) == [False, True]


def test_training_in_bf16_at_a_small_learning_rate_leaves_every_gain_at_one():
    moved = train_in_bf16(lr=3e-4, steps=4)
    assert moved["norm gain"] == 0 and moved["matrix"] > 0.9 and moved["moments"] == "bfloat16"


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
def test_each_fix_fine_tunes_a_model_stored_in_fp16(fix):
    r = finetune_stored(fix, steps=4)
    assert all(math.isfinite(v) for v in r.losses) and r.losses[-1] < r.losses[0] and r.skipped <= 1
    assert r.moments == ("bfloat16" if fix == "bf16" else "float32")
    assert (0.02 < r.share < 0.03) if fix == "fp32 adapters" else r.share == 1


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
    v.scale.value = 64.0
    assert v.act_scale == 64.0 and v.results[2].overflowed
    assert "fp16</b>: largest matmul output inf" in v.readout_html
    assert v.results[2] == attention_overflow(64.0, 64, "fp16", "logits")
    assert "correlated q and k reach d·s² = 2.62e+05" in v.readout_html      # 64 · 64²
    assert "the largest of this head's 2080 products" in v.readout_html
    v.where.value = "q"
    assert v.scale_at == "q" and not v.results[2].overflowed and "1/√d on q" in v.readout_html
    v.head.value = 256
    assert v.head_dim == 256 and v.results[2] == attention_overflow(64.0, 256, "fp16", "q")
    v.scale.value = 10.0                                     # off the slider's grid: the nearest position, 2**3.25
    assert v.act_scale == 2.0 ** 3.25 and v.results[0].act_scale == 2.0 ** 3.25
    with pytest.raises(ValueError, match=", ".join(map(str, HEAD_SIZES))):
        AttentionOverflowView(head_dim=48)
    with pytest.raises(traitlets.TraitError, match=", ".join(map(str, HEAD_SIZES))):
        v.head.value = 48
    with pytest.raises(traitlets.TraitError, match="'q'|q, logits"):
        v.where.value = "v"
    assert (v.head_dim, v.scale_at) == (256, "q")


def test_attention_widget_sends_every_state_the_engine_computed():
    """The page SELECTS among these states: each one equals the engine's run for that position of the controls,
    printed as the readout prints it; the saved view stays far below the 200 KB a view may carry."""
    import json
    import random

    from ampkit.widgets.attention import SCALES, AttentionOverflowView, readout_html, sent_state
    from ampkit.widgets.front import FrontView, esm, look

    v = AttentionOverflowView(tokens=64)
    assert isinstance(v, FrontView) and v.widget is v and v._esm == esm("attention") and v.look == look()
    assert v.scales == list(SCALES) == [2.0 ** (i / 4) for i in range(37)] and v.head_sizes == [16, 32, 64, 128, 256]
    assert sorted(v.states) == ["logits", "q"] and all(len(v.states[w]) == 5 for w in v.states)
    assert all(len(row) == 37 for w in v.states for row in v.states[w])
    assert [f["name"] for f in v.formats] == ["fp32", "bf16", "fp16"] and v.formats[2]["max"] == 65504.0
    assert v.formats[2]["label"] == ["fp16 max 65504"] and v.formats[0]["label"] == ["max 3.4e+38", "(far above)"]
    assert v.products == 2080
    rng = random.Random(7)
    for _ in range(40):
        where, di, si = rng.choice(["logits", "q"]), rng.randrange(5), rng.randrange(37)
        results = [attention_overflow(SCALES[si], v.head_sizes[di], name, where) for name in ("fp32", "bf16", "fp16")]
        assert v.states[where][di][si] == sent_state(results)
        words = v.states[where][di][si].split(" ")
        limits = words[:4]
        for r, i in zip(results, range(4, len(words), 4)):
            big, pct, matmul_max, nan_rows = words[i:i + 4]
            assert (big == "inf") == r.overflowed == (matmul_max == "inf")
            assert float(nan_rows) == r.nan_rows and pct == f"{100 * r.nan_rows:.0f}"
            assert float(matmul_max) == r.matmul_max and big == ("inf" if r.overflowed else f"{r.matmul_max:.3g}")
        assert len(words) == 4 + 4 * 3
        v.act_scale, v.head_dim, v.scale_at = SCALES[si], v.head_sizes[di], where
        assert v.results == results and v.readout_html == readout_html(results)
        assert f"{limits[0]}; the largest" in v.readout_html and f"({limits[2]} spreads" in v.readout_html
    for key in ("line", "limits", "facts", "ylabel", "nan_ylabel"):
        assert v.text[key]
    assert "{s:.3g}" in v.text["line"] and "{pct:.0f}" in v.text["facts"]
    state = {k: val for k, val in v.get_state().items() if k != "_esm"}
    assert len(json.dumps(state)) + len(v._esm) < 80_000
    still = v.still()
    assert still.children[-1].value[:4] == b"\x89PNG"                # the picture for renderers without JS


def test_loss_difference_parts_split_the_weights_from_the_forward_arithmetic():
    """Notebook 07 §1: a 16-bit run's loss difference = its weights' part (fp32 arithmetic) + its forward pass's part;
    weights equal to fp32's leave only the arithmetic's part."""
    import dataclasses

    from ampkit.lessons.transformers_in_16_bits import loss_difference_parts

    kw = dict(n_layers=1, d_model=16, context=16)
    runs = train_side_by_side(steps=3, batch_size=2, n_samples=8, **kw)
    parts = loss_difference_parts(runs, n_eval=4, **kw)
    assert sorted(parts) == ["bf16", "fp16"]
    for name, p in parts.items():
        assert p.total == pytest.approx(p.weights + p.arithmetic, abs=1e-12)
        assert p.distance == pytest.approx(float((runs[name].weights - runs["fp32"].weights).norm())) and p.distance > 0
        assert p.per_distance == pytest.approx(p.weights / p.distance)
    same = loss_difference_parts(dict(runs, bf16=dataclasses.replace(runs["bf16"], weights=runs["fp32"].weights)),
                                 n_eval=4, **kw)["bf16"]
    assert same.weights == 0 and same.distance == 0 and same.per_distance == 0
    assert same.total == same.arithmetic != 0              # bf16's forward pass is not fp32's
    with pytest.raises(ValueError, match="missing"):
        loss_difference_parts({"fp32": runs["fp32"]}, **kw)


def test_the_smallest_step_that_moves_a_bf16_number_from_half_to_two_is_two_to_the_minus_ten():
    """Notebook 07 §5 once said 2**-9 ("half the smallest gap between 0.5 and 2"); a step down from exactly 0.5
    needs only 2**-10, the gap below 0.5 being half the gap above it."""
    from ampkit.precision import nearest_threshold

    band = torch.arange(0x3F00, 0x4001, dtype=torch.int16).view(torch.bfloat16)
    assert band.numel() == 257 and float(band[0]) == 0.5 and float(band[-1]) == 2.0
    down = nearest_threshold(band, torch.tensor(-1.0))
    up = nearest_threshold(band, torch.tensor(1.0))
    assert float(torch.minimum(up, down).min()) == 2.0**-10
    assert [float(w) for w, d in zip(band, down) if d == 2.0**-10] == [0.5]       # only down from 0.5
    assert float(torch.minimum(up, down)[1:].min()) == 2.0**-9                     # elsewhere 2**-9
    assert kept_in_bf16(0.5, [-0.001, -0.0009, 0.0015]) == [True, False, False]
    assert not any(any(kept_in_bf16(float(w), (3e-4, -3e-4))) for w in band)
