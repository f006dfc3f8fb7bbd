"""Tests for ampkit.models' decoder-only transformer: shapes, causality, attention and norm variants, training.

Tolerances: manual vs sdpa attention and scale_at "q" vs "logits" agree within atol 1e-5 in fp32 (the orders of
the float operations differ, so bit equality is not expected). Training runs use one thread (restored after) so
that a busy 2-core machine does not slow them tenfold; their speed is measured, never asserted.
"""
import math

import pytest
import torch
from torch import nn

from ampkit.data import CHAR_VOCAB, char_batches, make_corpus
from ampkit.models import ATTENTIONS, CausalSelfAttention, DecoderLM, RMSNorm, build_model, lm_loss
from ampkit.precision import apply_level
from ampkit.protocols import as_scaler
from ampkit.train import train_step

SMALL = {"vocab_size": 11, "context": 16, "d_model": 16, "n_heads": 2, "n_layers": 2}


def _tokens(n=3, t=12, vocab=11, seed=0):
    return torch.randint(0, vocab, (n, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_shapes_and_norm_kind(norm, attention):
    m = build_model("decoder", seed=0, norm=norm, attention=attention, **SMALL)
    for t in (1, 7, 16):
        out = m(_tokens(t=t))
        assert out.shape == (3, t, 11) and out.dtype == torch.float32
    kinds = {type(mod) for mod in m.modules()}
    assert (RMSNorm in kinds) == (norm == "rms") and (nn.LayerNorm in kinds) == (norm == "layer")
    assert sum(isinstance(mod, CausalSelfAttention) for mod in m.modules()) == 2


def test_default_vocab_is_the_corpus_vocab_and_build_is_seeded():
    m = build_model("decoder")
    assert m.vocab_size == len(CHAR_VOCAB) and m.context == 64
    a, b = build_model("decoder", seed=3, **SMALL), build_model("decoder", seed=3, **SMALL)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.head.weight, build_model("decoder", seed=4, **SMALL).head.weight)
    assert 0.015 < float(a.head.weight.detach().std()) < 0.025  # GPT-2's init, normal(0, 0.02)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_future_token_never_changes_earlier_logits(attention):
    m = build_model("decoder", seed=1, attention=attention, **SMALL)
    x = _tokens(n=2, t=12)
    x2 = x.clone()
    x2[:, 7] = (x2[:, 7] + 1) % 11
    with torch.no_grad():
        a, b = m(x), m(x2)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6, rtol=0)
    assert (a[:, 7:] - b[:, 7:]).abs().amax(dim=-1).min() > 1e-4  # position 7 and later do see it


def test_manual_and_sdpa_attention_agree_in_fp32():
    x = _tokens()
    manual = build_model("decoder", seed=2, attention="manual", **SMALL)
    sdpa = build_model("decoder", seed=2, attention="sdpa", **SMALL)
    with torch.no_grad():
        a, b = manual(x), sdpa(x)
    assert torch.allclose(a, b, atol=1e-5, rtol=0), (a - b).abs().max()


def test_scale_at_q_and_at_logits_agree_in_fp32():
    q_model = build_model("decoder", seed=2, scale_at="q", **SMALL)
    l_model = build_model("decoder", seed=2, scale_at="logits", **SMALL)
    x = _tokens()
    with torch.no_grad():
        assert torch.allclose(q_model(x), l_model(x), atol=1e-5, rtol=0)
        h = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
        lq, ll = q_model.blocks[0].attn.logits(h), l_model.blocks[0].attn.logits(h)
    assert lq.shape == (2, 2, 5, 5) and torch.allclose(lq, ll, atol=1e-5, rtol=0)
    # the logits are q·kᵀ/√d: doubling the head size's scale would show here
    att = q_model.blocks[0].attn
    q, k, _ = att.qkv(h).reshape(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
    assert torch.allclose(lq, q @ k.transpose(-2, -1) / math.sqrt(8), atol=1e-5)


def test_rmsnorm_matches_the_formula_and_overflows_fp16_in_its_own_dtype():
    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(4, 6, 10, generator=g)
    norm = RMSNorm(10, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(10, generator=g))
    ref = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5) * norm.weight
    assert torch.allclose(norm(x), ref, atol=1e-6, rtol=1e-5)
    big = torch.full((1, 4), 300.0, dtype=torch.float16)  # 300² = 90000 > 65504
    assert torch.equal(RMSNorm(4)(big), torch.zeros(1, 4))
    fixed = RMSNorm(4, stat_dtype=torch.float32)(big)
    assert torch.allclose(fixed, torch.ones(1, 4), atol=1e-3)
    ok = torch.full((1, 4), 200.0, dtype=torch.float16)  # 200² = 40000 fits
    assert torch.allclose(RMSNorm(4)(ok), torch.ones(1, 4), atol=1e-3)


def test_lm_loss_is_cross_entropy_over_every_position():
    assert math.isclose(lm_loss(torch.zeros(2, 3, 7), torch.zeros(2, 3, dtype=torch.long)).item(), math.log(7),
                        rel_tol=1e-6)
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([[0, 1, 2], [3, 4, 0]])
    per = [-torch.log_softmax(logits[i, t], -1)[y[i, t]] for i in range(2) for t in range(3)]
    assert torch.allclose(lm_loss(logits, y), torch.stack(per).mean())
    with pytest.raises(ValueError, match=r"\(N, T, V\)"):
        lm_loss(logits, y[:, :2])


def test_bad_input():
    with pytest.raises(ValueError, match="'layer', 'rms'"):
        DecoderLM(norm="batch")
    with pytest.raises(ValueError, match="'manual', 'sdpa'"):
        DecoderLM(attention="flash")
    with pytest.raises(ValueError, match="'q', 'logits'"):
        DecoderLM(scale_at="k")
    with pytest.raises(ValueError, match="divisible"):
        DecoderLM(d_model=10, n_heads=3)
    with pytest.raises(TypeError, match="n_layers"):
        DecoderLM(n_layers=1.5)
    with pytest.raises(TypeError, match="stat_dtype"):
        RMSNorm(4, stat_dtype="float32")
    m = DecoderLM(**SMALL)
    with pytest.raises(ValueError, match="1 <= T <= 16"):
        m(_tokens(t=17))
    with pytest.raises(ValueError, match="integer tokens"):
        m(torch.zeros(2, 4))


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(dtype, steps, lr=1e-2):
    """A tiny decoder on the corpus through the kit's one training step: O0 (fp32) or O1 autocast in ``dtype``,
    fp16 with GradScaler("cpu"); returns the mean loss of the first and of the last five steps."""
    ids = CHAR_VOCAB.encode(make_corpus(8192, seed=0))
    m = build_model("decoder", seed=0, context=32, d_model=32, n_heads=2, n_layers=1)
    mp = apply_level(m, torch.optim.Adam(m.parameters(), lr=lr), "O0" if dtype is None else "O1", dtype or "bf16")
    scaler = as_scaler(torch.amp.GradScaler("cpu")) if dtype == torch.float16 else None
    losses = [train_step(mp, x, y, lm_loss, scaler).item()
              for x, y in char_batches(ids, 8, context=32, seed=0, steps=steps)]
    assert all(math.isfinite(v) for v in losses)
    if scaler is not None:
        assert scaler.get_scale() > 1.0
    return sum(losses[:5]) / 5, sum(losses[-5:]) / 5


@pytest.mark.parametrize("dtype,steps,margin", [(None, 30, 0.8), (torch.bfloat16, 30, 0.8),
                                                (torch.float16, 15, 0.5)])
def test_a_short_run_lowers_the_loss(one_thread, dtype, steps, margin):
    # measured (seed 0): fp32 and bf16 3.45 -> 2.14 in 30 steps; fp16 + GradScaler 3.45 -> 2.64 in 15 steps
    first, last = _train(dtype, steps)
    assert 3.3 < first < 3.6  # about ln 42 = 3.74 at GPT-2's small init, before learning
    assert first - last > margin, (first, last)
