"""Tests for ampkit.precision.frameworks: Paddle's white/black/gray lists against the probe, run_as, fp32_matmul."""
import pytest
import torch

from ampkit.precision import probe_autocast_ops
from ampkit.precision.frameworks import (
    MINDSPORE_O1_WHITE,
    MINDSPORE_O2_BLACK,
    PADDLE_2_5_BF16_WHITE,
    PADDLE_BF16_BLACK,
    PADDLE_BF16_WHITE,
    PADDLE_FP16_BLACK,
    PADDLE_FP16_WHITE,
    PADDLE_STATIC_GRAY,
    PROBE_TO_PADDLE,
    TORCH_TO_PADDLE,
    fp32_matmul,
    paddle_list,
    paddle_rows,
    run_as,
)


def test_paddle_lists():
    assert paddle_list("matmul_v2", "fp16") == paddle_list("conv2d", torch.bfloat16) == "white"
    # since Paddle 2.6 (PR #55713) bfloat16 shares float16's black list; up to 2.5 it was empty
    assert paddle_list("softmax", "float16") == paddle_list("softmax", "bfloat16") == "black"
    assert PADDLE_BF16_BLACK == PADDLE_FP16_BLACK and "layer_norm" in PADDLE_FP16_BLACK
    assert PADDLE_BF16_WHITE < PADDLE_FP16_WHITE and PADDLE_2_5_BF16_WHITE < PADDLE_BF16_WHITE
    assert "fused_attention" in PADDLE_FP16_WHITE - PADDLE_BF16_WHITE        # ONLY_FP16_WHITE_LIST
    assert paddle_list("elementwise_add", "fp16") == "gray"
    assert not PADDLE_FP16_WHITE & PADDLE_FP16_BLACK
    with pytest.raises(ValueError, match="float16/fp16/bfloat16/bf16"):
        paddle_list("softmax", "fp8")
    with pytest.raises(TypeError, match="op name"):
        paddle_list("", "fp16")


def test_relu_and_batch_norm_are_on_no_paddle_list_but_on_mindspores():
    for op in ("relu", "batch_norm"):
        assert paddle_list(op, "fp16") == paddle_list(op, "bf16") == "gray"   # neither list: follow the inputs
        assert op in PADDLE_STATIC_GRAY                                       # static graph: named gray
    assert "ops.ReLU" in MINDSPORE_O1_WHITE and "nn.BatchNorm2d" in MINDSPORE_O2_BLACK
    assert not MINDSPORE_O1_WHITE & MINDSPORE_O2_BLACK


def test_probe_maps_onto_paddle_lists():
    rows = paddle_rows(probe_autocast_ops("cpu", "bf16"))
    by_op = {r["torch op"]: r for r in rows}
    assert set(by_op) == set(TORCH_TO_PADDLE)
    for r in rows:
        assert r["as a Paddle list"] == PROBE_TO_PADDLE[r["autocast here"]]
    # what Paddle white-lists, CPU autocast lowers; what CPU autocast keeps in fp32, Paddle's fp16 list blacks
    assert all(r["autocast here"] == "lower" for r in rows if r["Paddle fp16 list"] == "white")
    assert all(r["Paddle fp16 list"] == "black" for r in rows if r["autocast here"] == "fp32")
    assert by_op["layer_norm"]["as a Paddle list"] == "gray" and by_op["layer_norm"]["Paddle fp16 list"] == "black"


def test_run_as_forces_a_dtype_inside_autocast_and_keeps_gradients():
    a = torch.randn(4, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
        out = run_as(torch.float32, torch.matmul, a, a.bfloat16())
        assert out.dtype == torch.float32
        assert run_as(torch.bfloat16, torch.add, a, a).dtype == torch.bfloat16
    out.sum().backward()
    assert a.grad is not None and a.grad.dtype == torch.float32
    with pytest.raises(TypeError, match="floating torch.dtype"):
        run_as(torch.int64, torch.add, a, a)
    with pytest.raises(TypeError, match="callable"):
        run_as(torch.float32, "matmul", a, a)


def test_fp32_matmul_is_on_autocasts_fp32_list():
    a = torch.randn(3, 5, requires_grad=True)
    b = torch.randn(5, 2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fp32_matmul(a, b.bfloat16())
    assert out.dtype == torch.float32
    out.sum().backward()
    assert a.grad.shape == a.shape and a.grad.dtype == torch.float32
    torch.testing.assert_close(a.grad, torch.ones(3, 2) @ b.detach().bfloat16().float().T)
    with torch.no_grad():
        torch.testing.assert_close(fp32_matmul(a, b), a @ b)  # outside autocast: an ordinary matmul
    with pytest.raises(TypeError, match="two tensors"):
        fp32_matmul(a, [1.0])
