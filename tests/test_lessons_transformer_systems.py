"""Notebook 08's experiments (ampkit.lessons.transformer_systems): compiled vs eager, checkpointing, FSDP2's
mixed-precision policy on 2 gloo processes, the hunter on the decoder."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ampkit.lessons.transformer_systems import (
    CountingBackend,
    checkpoint_experiment,
    compile_vs_eager,
    hunt_decoder,
    overflowing_decoder,
    saved_bytes,
    sharded_gradients,
    small_decoder,
    with_checkpointing,
)


def test_compiled_step_gives_the_eager_losses_and_counts_graphs():
    run = compile_vs_eager(steps=2, backend="aot_eager")
    assert len(run.compiled_losses) == 2 and all(map(math.isfinite, run.compiled_losses))
    assert run.bitwise_equal and run.max_abs_diff == 0.0
    assert run.compiled_losses[-1] < run.compiled_losses[0]          # it trains
    assert (run.graphs_after_warm, run.graphs_after_new_shape) == (1, 2)   # same shape: no new graph


def test_compile_checks_its_arguments():
    with pytest.raises(ValueError, match="aot_eager"):
        compile_vs_eager(steps=1, backend="tensorrt")
    with pytest.raises(ValueError, match="dynamic"):
        compile_vs_eager(steps=1, dynamic="yes")
    with pytest.raises(ValueError, match="inductor"):
        CountingBackend("nope")


def test_counting_backend_counts_one_graph_per_shape():
    counter = CountingBackend("eager")
    f = torch.compile(lambda x: x * 2 + 1, backend=counter, dynamic=False)
    f(torch.ones(3))
    f(torch.ones(3))
    assert counter.graphs == 1
    f(torch.ones(4))
    assert counter.graphs == 2


def test_checkpointed_gradients_are_bitwise_equal_and_save_fewer_bytes():
    r = checkpoint_experiment(n_layers=2)
    assert r.grads_equal and r.max_abs_grad_diff == 0.0
    assert r.saved_bytes_checkpointed < r.saved_bytes_plain / 2
    assert r.qkv_dtypes_plain == ("bf16",)
    assert r.qkv_dtypes_checkpointed == ("bf16", "bf16")           # the recomputation runs in bf16 too


def test_saved_bytes_counts_what_autograd_keeps():
    lin = nn.Linear(4, 4, bias=False)
    x = torch.randn(8, 4)
    # Linear saves its input (8 x 4 fp32 = 128 bytes) for the weight's gradient; the weight is a parameter (left out)
    assert saved_bytes(lin, lambda: lin(x).sum().backward()) == 8 * 4 * 4
    assert saved_bytes(lin, lambda: None) == 0


def test_with_checkpointing_keeps_the_weights_and_refuses_other_models():
    model = small_decoder()
    ck = with_checkpointing(model)
    assert [p.shape for p in ck.parameters()] == [p.shape for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(ck.parameters(), model.parameters()))
    assert ck.blocks[0] is not model.blocks[0]
    with pytest.raises(TypeError, match="DecoderLM"):
        with_checkpointing(nn.Linear(2, 2))


def test_fsdp2_reduce_in_bf16_is_further_from_fp32_than_reduce_in_fp32():
    r = sharded_gradients(timeout=60)
    assert r.world_size == 2
    ref, fp32, bf16 = (r.runs[k] for k in ("fp32 (no policy)", "bf16 params, fp32 reduce", "bf16 params, bf16 reduce"))
    assert not (ref.error or fp32.error or bf16.error), (ref.error, fp32.error, bf16.error)
    assert ref.rel_error == 0.0 and ref.forward_param_dtype == "fp32"
    assert fp32.forward_param_dtype == bf16.forward_param_dtype == "bf16"   # the policy's param_dtype in forward
    assert fp32.grad_dtype == bf16.grad_dtype == "fp32"                     # the sharded grads are fp32 again
    assert 0 < fp32.rel_error < bf16.rel_error < 2.0 ** -5
    assert 0 < r.reduce_only_rel() < 2.0 ** -7


def test_sharded_checks_its_arguments():
    with pytest.raises(ValueError, match="world_size"):
        sharded_gradients(world_size=1)
    with pytest.raises(ValueError, match="timeout"):
        sharded_gradients(timeout=0)
    with pytest.raises(ValueError, match="spawn"):
        sharded_gradients(start="forkserver-ish")


def test_hunter_finds_the_first_inf_in_attention_and_the_doctor_calls_it_persistent():
    r = hunt_decoder("logits", steps=5)
    assert r.raw_logit_max > torch.finfo(torch.float16).max
    assert (r.first.module, r.first.op, r.first.phase) == ("blocks.0.attn", "aten.bmm", "forward")
    assert r.first.inputs_finite
    assert r.diagnosis.kind == "persistent" and all(r.skipped)
    assert "blocks.0.attn" in r.report.diagnosis and not r.report.healthy


def test_scaling_q_first_keeps_the_logits_finite():
    r = hunt_decoder("q", steps=5)
    # the only non-finite value left is the causal mask's -inf, written on purpose
    assert (r.first.module, r.first.op) == ("blocks.0.attn", "aten.masked_fill")
    assert r.diagnosis.kind == "healthy" and not any(r.skipped) and all(map(math.isfinite, r.losses))


def test_overflowing_decoder_checks_its_arguments():
    with pytest.raises(ValueError, match="logits"):
        overflowing_decoder("keys")
    with pytest.raises((TypeError, ValueError), match="gain"):
        overflowing_decoder(gain=-1.0)


@pytest.mark.parametrize("name", ["", ".task", ".compiled", ".checkpointing", ".sharded", ".hunting"])
def test_each_module_names_notebook_08_and_declares_all(name):
    # tests/test_module_docstrings.py reads ampkit/lessons/*.py only; this package's modules are checked here
    import importlib

    mod = importlib.import_module(f"ampkit.lessons.transformer_systems{name}")
    assert "08_transformers_compiled_and_sharded" in mod.__doc__
    assert mod.__all__ and all(hasattr(mod, n) for n in mod.__all__)
