"""The NVFP4 recipe's pieces: stochastic rounding (ampkit.fp8.stochastic), the Hadamard transform (ampkit.fp8.hadamard),
2D weight blocks and the simulated layer (ampkit.fp8.fp4_linear).

Stochastic rounding is tested as Transformer Engine tests it (``tests/pytorch/nvfp4/test_nvfp4_sr_quantize.py`` at
v2.8: the mean of 50 draws of the quantized tensor has a smaller RMSE against the input than round-to-nearest, rowwise
and for the transposed Hadamard copy), and unbiased within the bound of :func:`sr_mean_bound` (derived there: the
mean of n draws has variance (x - lo)(hi - x)/n; 6 standard deviations), seeded, so deterministic.
"""
from __future__ import annotations

import pytest
import torch
from te_reference.load import te_reference
from torch import nn

from ampkit.formats.e2m1 import e2m1_decode, e2m1_neighbours, e2m1_round
from ampkit.fp8.fp4_linear import NVFP4Linear, NVFP4Recipe, quantize_operand, to_nvfp4
from ampkit.fp8.hadamard import TE_SIGNS, hadamard_matrix, rht, rht_matrix
from ampkit.fp8.mx import mx_fake_quantize
from ampkit.fp8.nvfp4 import nvfp4_fake_quantize, nvfp4_quantize
from ampkit.fp8.stochastic import round_up_probability, sr_mean_bound, stochastic_e2m1


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b) ** 2).mean().sqrt())


@pytest.mark.parametrize("transposed_rht", [False, True])
def test_mean_of_sr_draws_beats_round_to_nearest_as_te_tests_it(transposed_rht):
    g = torch.Generator().manual_seed(12345)
    x = torch.randn(256, 256, generator=g) * 2 - 1
    y = rht(x.t().contiguous()) if transposed_rht else x
    rn = nvfp4_fake_quantize(y)
    gen = torch.Generator().manual_seed(0)
    mean = sum(nvfp4_fake_quantize(y, rounding="stochastic", generator=gen) for _ in range(50)) / 50
    assert _rmse(mean, y) < _rmse(rn, y)
    one = nvfp4_fake_quantize(y, rounding="stochastic", generator=gen)
    assert _rmse(one, y) > _rmse(rn, y)                        # one draw is noisier than round-to-nearest


def test_stochastic_rounding_is_unbiased_within_the_stated_bound():
    """4000 values uniform in [-6, 6], 400 draws each: every element's mean within 6 standard deviations of its
    value (sr_mean_bound), the mean over all elements within 6 standard deviations of the overall mean
    (sqrt(Σ (x - lo)(hi - x) / n) / N), and the frequency of rounding up within 0.15 of (x - lo)/(hi - lo)."""
    v = torch.rand(4000, generator=torch.Generator().manual_seed(1)) * 12 - 6
    n = 400
    gen = torch.Generator().manual_seed(2)
    draws = torch.stack([e2m1_decode(stochastic_e2m1(v, gen)) for _ in range(n)])
    mean = draws.mean(0)
    assert bool(((mean - v).abs() <= sr_mean_bound(v, n) + 1e-6).all())
    lo, hi = e2m1_neighbours(v)
    overall_sd = float(((v - lo) * (hi - v)).sum().div(n).sqrt()) / v.numel()
    assert abs(float((mean - v).mean())) <= 6 * overall_sd
    assert float(((draws == hi).float().mean(0) - round_up_probability(v)).abs().max()) < 0.15


def test_round_to_nearest_is_biased_where_stochastic_rounding_is_not():
    """Values 2.2 (between 2 and 3): round-to-nearest gives 2 every time (bias -0.2); SR's mean is 2.2 within bound."""
    v = torch.full((20000,), 2.2)
    gen = torch.Generator().manual_seed(5)
    mean = e2m1_decode(stochastic_e2m1(v, gen)).mean()
    bound = float(sr_mean_bound(torch.tensor([2.2]), 20000)[0])
    assert abs(float(mean) - 2.2) <= bound < 0.2
    assert float(e2m1_round(v).mean()) == 2.0


def test_stochastic_rounding_is_seeded_and_needs_a_generator():
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(3))
    a = nvfp4_quantize(x, rounding="stochastic", generator=torch.Generator().manual_seed(9)).codes
    b = nvfp4_quantize(x, rounding="stochastic", generator=torch.Generator().manual_seed(9)).codes
    c = nvfp4_quantize(x, rounding="stochastic", generator=torch.Generator().manual_seed(10)).codes
    assert torch.equal(a, b) and not torch.equal(a, c)
    with pytest.raises(ValueError, match="Generator"):
        nvfp4_quantize(x, rounding="stochastic")
    with pytest.raises(ValueError, match="'nearest', 'stochastic'"):
        nvfp4_quantize(x, rounding="up")


@pytest.mark.parametrize("tag", ["v2.8", "v2.18"])
def test_hadamard_matrix_and_signs_are_te_references(tag):
    ref = te_reference(tag)
    assert ref.get_wgrad_sign_vector().tolist() == list(TE_SIGNS)
    h = ref.NVFP4QuantizerRef._build_hadamard_matrix(16, torch.device("cpu"), torch.float32, True)
    assert torch.equal(h * (1.0 / 16 ** 0.5), rht_matrix())
    t = rht_matrix()
    assert torch.equal(t @ t.t(), torch.eye(16))


def test_hadamard_keeps_the_product_and_spreads_an_outlier():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(32, 64, generator=g), torch.randn(16, 64, generator=g)
    assert torch.allclose(rht(a) @ rht(b).t(), a @ b.t(), rtol=0, atol=1e-4)
    x = torch.randn(1, 16, generator=g) * 0.01
    x[0, 5] = 10.0
    crest = lambda t: float(t.abs().max() / t.pow(2).mean().sqrt())  # noqa: E731
    assert crest(x) > 3.9 and crest(rht(x)) < 1.1                   # one outlier: max/rms 4 → about 1
    with pytest.raises(ValueError, match="power of two"):
        hadamard_matrix(12)
    with pytest.raises(ValueError, match="multiple of 16"):
        rht(torch.zeros(2, 8))


def test_2d_weight_blocks_make_a_weight_and_its_transpose_quantize_alike():
    w = torch.randn(48, 64, generator=torch.Generator().manual_seed(6))
    two_d = nvfp4_fake_quantize(w, tile="16x16")
    assert torch.equal(two_d.t(), nvfp4_fake_quantize(w.t().contiguous(), tile="16x16"))
    one_d = nvfp4_fake_quantize(w)
    assert not torch.equal(one_d.t(), nvfp4_fake_quantize(w.t().contiguous()))
    assert _rmse(two_d, w) > _rmse(one_d, w)                         # the price: coarser blocks, more error


def test_layer_forward_is_the_product_of_the_quantized_operands():
    layer = NVFP4Linear(64, 32, bias=False, recipe=NVFP4Recipe())
    x = torch.randn(20, 64, generator=torch.Generator().manual_seed(7))
    want = nvfp4_fake_quantize(x) @ nvfp4_fake_quantize(layer.weight.detach(), tile="16x16").t()
    assert torch.equal(layer(x), want)


def test_layer_backward_quantizes_what_the_recipe_quantizes():
    """With every piece off and no stochastic rounding, dX and dW are the products of the round-to-nearest operands
    (dW along the tokens, padded to 16); with the recipe on, the same seed gives the same gradients."""
    g = torch.Generator().manual_seed(8)
    x, gy = torch.randn(24, 64, generator=g), torch.randn(24, 32, generator=g)
    off = NVFP4Recipe(rht=False, stochastic=False, weight_2d=False)
    layer = NVFP4Linear(64, 32, bias=True, recipe=off)
    xx = x.clone().requires_grad_()
    layer(xx).backward(gy)
    w = layer.weight.detach()
    assert torch.equal(xx.grad, nvfp4_fake_quantize(gy) @ nvfp4_fake_quantize(w.t().contiguous()).t())
    pad = lambda t: torch.cat([t, t.new_zeros(8, t.shape[1])]).t().contiguous()  # noqa: E731
    assert torch.equal(layer.weight.grad, nvfp4_fake_quantize(pad(gy)) @ nvfp4_fake_quantize(pad(x)).t())
    assert torch.equal(layer.bias.grad, gy.sum(0))
    grads = []
    for _ in range(2):
        torch.manual_seed(0)
        lay = NVFP4Linear(64, 32, recipe=NVFP4Recipe(seed=3))
        lay(x).backward(gy)
        grads.append(lay.weight.grad)
    assert torch.equal(*grads)
    mx = NVFP4Linear(64, 32, bias=False, recipe=NVFP4Recipe(fmt="mxfp4"))
    xm = x.clone().requires_grad_()
    mx(xm).backward(gy)
    wm = mx.weight.detach()
    q = lambda t: mx_fake_quantize(t, "e2m1", 32, "rceil")  # noqa: E731
    assert torch.equal(mx(x), q(x) @ q(wm).t())
    assert torch.equal(xm.grad, q(gy) @ q(wm.t().contiguous()).t())          # W's own columnwise copy
    assert quantize_operand(x, NVFP4Recipe(fmt="mxfp4")).shape == x.shape


def test_to_nvfp4_keeps_chosen_layers_and_trains():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    done = to_nvfp4(model, NVFP4Recipe(), keep={"4"})
    assert done == ["0", "2"] and type(model[4]) is nn.Linear and isinstance(model[0], NVFP4Linear)
    assert model[2].recipe.seed == 1
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 32, generator=g), torch.randn(64, 16, generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]
    with pytest.raises(ValueError, match="'nvfp4', 'mxfp4'"):
        NVFP4Recipe(fmt="fp4")
    with pytest.raises(ValueError, match="multiples of 16"):
        NVFP4Linear(24, 16)(torch.zeros(2, 24))
