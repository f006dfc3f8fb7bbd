"""ampkit.fp8.linear and run: gradients vs a high-precision reference within the quantization error, the delayed
state advancing, torch._scaled_mm agreement where it runs, fp8 training close to fp32, bad input."""
import pytest
import torch
from torch import nn

from ampkit.fp8 import (
    Fp8Linear,
    Fp8Recipe,
    current_scale,
    fake_quantize,
    fp8_matmul,
    quantize,
    scaled_mm_agrees,
    scaled_mm_available,
    to_fp8,
)
from ampkit.lessons.fp8_scaling import backward_operand_formats, gemm_tensors, make_task, record_amax_run, train_mode
from ampkit.models import MLP


def _pair(recipe, seed=0):
    torch.manual_seed(seed)
    ref = nn.Linear(64, 32)
    f8 = Fp8Linear(64, 32, recipe=recipe)
    f8.load_state_dict(ref.state_dict())
    return ref.double(), f8


def _grads(layer, x, gout, dtype):
    layer.zero_grad()
    xi = x.detach().clone().to(dtype).requires_grad_(True)
    y = layer(xi)
    y.backward(gout.to(y.dtype))
    return y.detach().double(), xi.grad.double(), layer.weight.grad.double(), layer.bias.grad.double()


@pytest.mark.parametrize("scaling", ["current", "delayed"])
def test_gradients_match_fp64_within_quantization_error(scaling):
    ref, f8 = _pair(Fp8Recipe(scaling=scaling, history_len=4))
    g = torch.Generator().manual_seed(1)
    x, gout = torch.randn(16, 64, generator=g), torch.randn(16, 32, generator=g) * 1e-3
    if scaling == "delayed":          # warm the amax histories with a step on the same data
        _grads(f8, x, gout, torch.float32)
    outs_ref = _grads(ref, x, gout, torch.float64)
    outs_f8 = _grads(f8, x, gout, torch.float32)
    # e4m3 keeps ~2**-4 relative per element, e5m2 ~2**-3: the sums' relative error stays within a few percent
    for name, a, b, tol in zip(("y", "dx", "dw", "db"), outs_f8, outs_ref, (0.05, 0.15, 0.15, 1e-6)):
        rel = float((a - b).norm() / b.norm())
        assert rel < tol, (name, rel)
        assert rel > 0 or name == "db", name          # quantization did happen (a test that can fail)


def test_backward_uses_e5m2_on_the_output_gradient():
    _, f8 = _pair(Fp8Recipe(scaling="current"))
    g = torch.Generator().manual_seed(2)
    x, gout = torch.randn(4, 64, generator=g), torch.randn(4, 32, generator=g)
    _, dx, dw, _ = _grads(f8, x, gout, torch.float32)
    (sx, _), (sw, _), (sg, _) = f8.log["input"][-1], f8.log["weight"][-1], f8.log["grad_output"][-1]
    wd, xd = fake_quantize(f8.weight, sw, "e4m3"), fake_quantize(x, sx, "e4m3")
    gd5, gd4 = fake_quantize(gout, sg, "e5m2"), fake_quantize(gout, current_scale(gout, "e4m3"), "e4m3")
    assert torch.allclose(dx.float(), gd5 @ wd, rtol=1e-6, atol=1e-7)
    assert torch.allclose(dw.float(), gd5.t() @ xd, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(dx.float(), gd4 @ wd, rtol=1e-6, atol=1e-7)     # not e4m3: the test can fail


@pytest.mark.parametrize("recipe", ["HYBRID", "E4M3"])
def test_backward_gemms_reuse_the_forward_casts_of_x_and_w(recipe):
    """The record of each GEMM's operands (``Fp8Linear.gemms``) and the measurement (which formats reproduce dX and
    dW) agree: under HYBRID only dY is e5m2, once in each backward GEMM; X and W stay e4m3 (notebook 06, exercise 3)."""
    _, f8 = _pair(Fp8Recipe(recipe=recipe, scaling="current"))
    f8(torch.randn(4, 64)).sum().backward()
    fwd, bwd = f8.recipe.formats["input"], f8.recipe.formats["grad_output"]
    assert f8.gemms == {"fprop": (("X", fwd), ("W", fwd)), "dgrad": (("dY", bwd), ("W", fwd)),
                        "wgrad": (("dY", bwd), ("X", fwd))}
    if recipe == "HYBRID":
        assert backward_operand_formats() == {"dgrad": ("e5m2", "e4m3"), "wgrad": ("e5m2", "e4m3")}


def test_delayed_state_advances_once_per_call():
    _, f8 = _pair(Fp8Recipe(history_len=3))
    for k in range(3):
        y = f8(torch.full((2, 64), float(k + 1)))
        y.sum().backward()
    scales = [s for s, _ in f8.log["input"]]
    assert scales == [1.0, 448.0 / 1, 448.0 / 2]          # each step used the amax of the step before
    assert len(f8.log["grad_output"]) == 3 and len(f8.log["weight"]) == 3


@pytest.mark.skipif(not scaled_mm_available("cpu"), reason="torch._scaled_mm does not run on this CPU build")
def test_scaled_mm_agrees_with_the_simulation():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(32, 64, generator=g), torch.randn(48, 64, generator=g) * 3
    assert scaled_mm_agrees(a, b, "e4m3")
    aq = quantize(a, 2.0, "e4m3")
    bq = quantize(b, 4.0, "e4m3")   # power-of-two scales: both backends give the very same numbers here
    assert torch.allclose(fp8_matmul(aq, 2.0, bq, 4.0, "scaled_mm"), fp8_matmul(aq, 2.0, bq, 4.0), rtol=1e-6)


def test_to_fp8_swaps_every_linear_and_keeps_parameters():
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 2)))
    w = m[0].weight
    to_fp8(m)
    assert isinstance(m[0], Fp8Linear) and isinstance(m[2][0], Fp8Linear) and m[0].weight is w


def test_fp8_training_matches_fp32_within_tolerance():
    task = make_task(0)
    runs = {mode: train_mode(mode, steps=120, task=task) for mode in ("fp32", "fp8")}
    assert abs(runs["fp8"].accuracy - runs["fp32"].accuracy) <= 0.03
    assert abs(sum(runs["fp8"].losses[-20:]) - sum(runs["fp32"].losses[-20:])) / 20 <= 0.05


def test_recorded_run_has_the_spikes():
    rec = record_amax_run(steps=50, spikes={20: 16.0}, grad_spikes={30: 32.0})
    a, gr = rec.amax["activation"], rec.amax["gradient"]
    # a hidden activation: the x16 input spike reaches it damped (the first layer's stale delayed scale saturates it)
    assert int(a.argmax()) == 20 and float(a[20]) > 2.5 * float(a[19])
    assert bool((a >= 0).all()) and rec.values["activation"].shape == (50, 64 * 64)   # ReLU output, batch 64 x 64
    assert int(gr.argmax()) == 30 and rec.formats == {"activation": "e4m3", "gradient": "e5m2"}


@pytest.mark.parametrize("kw", [{"recipe": "FP4"}, {"scaling": "jit"}, {"history_len": 0}, {"margin": -2},
                                {"algo": "mean"}])
def test_bad_recipe(kw):
    with pytest.raises(ValueError):
        Fp8Recipe(**kw)
    with pytest.raises(TypeError):
        Fp8Linear(2, 2, recipe="HYBRID")
    with pytest.raises(ValueError):
        train_mode("fp4")
    with pytest.raises(ValueError, match="backend"):
        fp8_matmul(quantize(torch.ones(2, 2), 1.0), 1.0, quantize(torch.ones(2, 2), 1.0), 1.0, "cublas")


def test_gemm_tensors_are_the_layer_gemms_inputs():
    torch.manual_seed(0)
    model = MLP(16, 64, 4, depth=2)
    X, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    t = gemm_tensors(model, X, y, layer=1)
    h = model.net[1](model.net[0](X))                       # the first hidden layer's ReLU output
    assert torch.equal(t["X"], h.detach()) and torch.equal(t["W"], model.net[2].weight.detach())
    # dY by hand: the gradient of the loss with respect to net.2's output
    out = model.net[2](h.detach()).detach().requires_grad_(True)
    loss = nn.functional.cross_entropy(model.net[4](model.net[3](out)), y)
    (dy,) = torch.autograd.grad(loss, out)
    assert torch.allclose(t["dY"], dy, atol=1e-7)
    assert torch.allclose(t["dW"], t["dY"].t() @ t["X"], atol=1e-6)   # dW = dY^T X: a GEMM output
    assert all(p.grad is None for p in model.parameters())       # the model is left clean
    with pytest.raises(ValueError, match="layer"):
        gemm_tensors(model, X, y, layer=3)
    with pytest.raises(ValueError, match="no nn.Linear"):
        gemm_tensors(nn.ReLU(), X, y)


def test_to_fp8_and_fp8linear_refuse_what_is_not_a_model_or_a_recipe():
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module .*got str"):
        to_fp8("model")
    with pytest.raises(TypeError, match=r"recipe must be an ampkit.fp8.Fp8Recipe .*got str"):
        to_fp8(torch.nn.Linear(2, 2), recipe="hybrid")
    with pytest.raises(TypeError, match=r"recipe must be an ampkit.fp8.Fp8Recipe"):
        Fp8Linear(2, 2, recipe={"fmt": "e4m3"})
