"""Notebook 08's experiments (ampkit.lessons.transformers_compiled_and_sharded):
compiled vs eager, checkpointing, FSDP2's
mixed-precision policy on 2 gloo processes, the hunter on the decoder."""
from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from ampkit.lessons.transformers_compiled_and_sharded import (
    CountingBackend,
    autocast_rules,
    backward_autocast,
    checkpoint_experiment,
    compile_vs_eager,
    decoder_batches,
    default_variant,
    fp16_attention_finite,
    fp32_region_grad,
    hunt_decoder,
    linear_calls,
    overflow_gain,
    overflowing_decoder,
    raw_logit_max,
    saved_activation_bytes,
    sharded_gradients,
    small_decoder,
    with_checkpointing,
)
from ampkit.lessons.transformers_compiled_and_sharded.compiled import current_backward_autocast


def test_compiled_step_gives_the_eager_losses_and_counts_graphs():
    run = compile_vs_eager(steps=2, backend="aot_eager")
    assert len(run.compiled_losses) == 2 and all(map(math.isfinite, run.compiled_losses))
    assert run.bitwise_equal and run.max_abs_diff == 0.0
    assert run.compiled_losses[-1] < run.compiled_losses[0]          # it trains
    assert (run.graphs_after_warm, run.graphs_after_new_shape) == (1, 2)   # same shape: no new graph


def test_fp16_scaled_compiled_step_gives_the_eager_bits_when_every_matmul_is_fp16():
    run = compile_vs_eager(steps=2, dtype="fp16", backward_pass_autocast="same_as_forward", new_shape=False)
    assert run.dtype == "fp16" and run.backward_pass_autocast == "same_as_forward"
    assert run.bitwise_equal and run.grads_differ == () and run.nonfinite_grads == ()
    assert run.eager_skipped == run.compiled_skipped == (False, False)
    assert math.isnan(run.new_shape_step_s) and run.graphs_after_new_shape == run.graphs_after_warm
    # on the CPU the backward's only ops with an autocast rule are its matmuls; CUDA's lists also hold its sums
    assert set(autocast_rules(run.backward_ops, "cpu")) == {"aten::mm", "aten::bmm"}
    assert "aten::sum.dim_IntList" in autocast_rules(run.backward_ops, "cuda")


def test_autocast_rules_reads_each_devices_lists():
    ops = ["aten::mm", "aten::sum.dim_IntList", "aten::layer_norm", "aten::gelu_backward"]
    assert autocast_rules(ops, "cpu") == ("aten::mm",)
    assert autocast_rules(ops, "cuda") == ("aten::mm", "aten::sum.dim_IntList", "aten::layer_norm")
    assert CountingBackend("eager").backward_ops == []
    with pytest.raises(ValueError, match="cuda"):
        autocast_rules(ops, "tpu")


def test_an_fp32_head_traced_under_autocast_changes_every_gradient_and_off_restores_eager():
    same = compile_vs_eager(steps=1, dtype="fp16", fp32_head=True, backward_pass_autocast="same_as_forward",
                            new_shape=False)
    off = compile_vs_eager(steps=1, dtype="fp16", fp32_head=True, backward_pass_autocast="off", new_shape=False)
    n_params = len(list(small_decoder().parameters()))
    assert len(same.grads_differ) == n_params and same.nonfinite_grads == ()
    assert off.grads_differ == () and off.backward_pass_autocast == "off"


def test_fp32_region_grad_reproduces_pytorch_153044_on_the_cpu():
    before = current_backward_autocast()
    assert fp32_region_grad(False) == (65536.0,) * 4
    assert all(math.isinf(g) for g in fp32_region_grad(True, "same_as_forward"))
    assert fp32_region_grad(True, "off") == (65536.0,) * 4
    assert fp32_region_grad(True, "off", dtype="bf16") == (65536.0,) * 4
    assert current_backward_autocast() == before          # the setting is restored after each run


def test_backward_autocast_sets_and_restores_the_config():
    before = current_backward_autocast()
    with backward_autocast("off"):
        assert current_backward_autocast() == "off"
    assert current_backward_autocast() == before
    with backward_autocast(None):
        assert current_backward_autocast() == before
    with pytest.raises(ValueError, match="same_as_forward"):
        with backward_autocast("on"):
            pass


def test_compile_checks_its_arguments():
    with pytest.raises(ValueError, match="aot_eager"):
        compile_vs_eager(steps=1, backend="tensorrt")
    with pytest.raises(ValueError, match="dynamic"):
        compile_vs_eager(steps=1, dynamic="yes")
    with pytest.raises(ValueError, match="bf16"):
        compile_vs_eager(steps=1, dtype="fp8")
    with pytest.raises(ValueError, match="off"):
        compile_vs_eager(steps=1, backward_pass_autocast="never")
    with pytest.raises(ValueError, match="fp16"):
        fp32_region_grad(False, dtype="fp32")
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


def test_checkpoint_recomputation_stops_inside_each_blocks_last_linear():
    plain = linear_calls(n_layers=2, checkpointed=False)
    ck = linear_calls(n_layers=2, checkpointed=True)
    full = linear_calls(n_layers=2, checkpointed=True, early_stop=False)
    assert plain.total_started == plain.total_finished == 9            # 4 Linears per block, and the head
    assert ck.total_started == full.total_finished == 9 + 2 * 4       # every block starts again in backward
    assert ck.total_finished == ck.total_started - 2                   # ... and stops once per block
    assert [n for n in ck.started if ck.started[n] > ck.finished[n]] == ["blocks.0.mlp.2", "blocks.1.mlp.2"]


def test_checkpoint_without_use_reentrant_warns_and_runs_the_reentrant_variant():
    v = default_variant()
    assert v.warned or v.raised
    if torch.__version__.startswith("2.13."):
        assert v.warned and not v.raised and v.grad_fn == "CheckpointFunctionBackward"
        assert "use_reentrant" in v.message


def test_saved_activation_bytes_counts_what_autograd_keeps():
    lin = nn.Linear(4, 4, bias=False)
    x = torch.randn(8, 4)
    # Linear saves its input (8 x 4 fp32 = 128 bytes) for the weight's gradient; the weight is a parameter (left out)
    assert saved_activation_bytes(lin, lambda: lin(x).sum().backward()) == 8 * 4 * 4
    assert saved_activation_bytes(lin, lambda: None) == 0


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
    # per module, not per op: the norms and the softmax run in bf16 too, and the logits are not cast back
    assert (fp32.norm_dtype, fp32.softmax_dtype, fp32.logits_dtype) == ("bf16", "bf16", "bf16")
    assert (ref.norm_dtype, ref.softmax_dtype, ref.logits_dtype) == ("fp32", "fp32", "fp32")
    assert 0 < fp32.rel_error < bf16.rel_error < 2.0 ** -5
    assert 0 < r.reduce_only_rel() < 2.0 ** -7


_FP32_NORM = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["PORT"], rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    for out_dtype in (None, torch.bfloat16):
        m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 8))
        seen = {}
        m[1].register_forward_hook(lambda mod, a, o: seen.update(norm_in=a[0].dtype, norm_out=o.dtype))
        fully_shard(m[1], mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32, output_dtype=out_dtype))
        fully_shard(m, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        try:
            result = str(m(torch.randn(2, 8)).dtype)
        except RuntimeError:
            result = "RuntimeError"
        print(out_dtype, seen["norm_in"], seen["norm_out"], result)
    dist.destroy_process_group()
""")


def test_an_fp32_norm_in_a_bf16_fsdp2_model_needs_output_dtype():
    """docs/reference.md (notebook 08, FSDP2 row) and exercise 5's solution: the norm's own policy casts its input to
    fp32; without output_dtype=bf16 its fp32 output reaches a bf16 Linear, which refuses it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PORT": str(port)}
    out = subprocess.run([sys.executable, "-c", _FP32_NORM], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert "None torch.float32 torch.float32 RuntimeError" in lines
    assert "torch.bfloat16 torch.float32 torch.float32 torch.bfloat16" in lines


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


def test_overflow_gain_follows_the_square_of_the_gain():
    x, _ = decoder_batches(1)[0]
    raw = raw_logit_max(overflowing_decoder("logits", 400.0), x)
    g = overflow_gain("logits", lo=100.0, hi=1000.0, rel_tol=5e-3)
    assert g == pytest.approx(400.0 * math.sqrt(torch.finfo(torch.float16).max / raw), rel=0.01)
    with pytest.raises(ValueError, match="overflows"):
        overflow_gain("logits", lo=500.0, hi=1000.0)


def test_sdpa_keeps_the_fp16_attention_finite_where_the_written_out_product_overflows():
    x, _ = decoder_batches(1)[0]
    assert fp16_attention_finite(overflowing_decoder("logits", 400.0), x) == (False, True)
    assert fp16_attention_finite(overflowing_decoder("logits", 100.0), x) == (True, True)


def test_overflowing_decoder_checks_its_arguments():
    with pytest.raises(ValueError, match="logits"):
        overflowing_decoder("keys")
    with pytest.raises((TypeError, ValueError), match="gain"):
        overflowing_decoder(gain=-1.0)


@pytest.mark.parametrize("name", ["", ".task", ".compiled", ".checkpointing", ".sharded", ".hunting"])
def test_each_module_names_notebook_08_and_declares_all(name):
    # tests/test_module_docstrings.py reads ampkit/lessons/*.py only; this package's modules are checked here
    import importlib

    mod = importlib.import_module(f"ampkit.lessons.transformers_compiled_and_sharded{name}")
    assert "08_transformers_compiled_and_sharded" in mod.__doc__   # (__all__: tests/test_public_api.py)
