"""Real fp8 matmuls on the GPU: ``torch._scaled_mm`` on e4m3 inputs runs where the compute capability is >= 8.9
(Ada, Hopper, Blackwell) and agrees with the kit's simulated fp8 (``ampkit.fp8``: dequantize, fp32 matmul) within
``SCALED_MM_RTOL`` (2^-10) of the largest output; below 8.9 it refuses. The simulation is the closer one to the
exact (float64) sum of the same products: the GPU keeps fewer bits while it accumulates (measured on an H100:
3.3e-4 of the largest output at most for K = 128)."""
import pytest
import torch
from _gpu_expect import expected_scaled_mm

from ampkit.fp8 import current_scale, dequantize, quantize, scaled_mm_agrees, scaled_mm_available
from ampkit.fp8.linear import SCALED_MM_RTOL, fp8_matmul


def _inputs(m: int = 64, n: int = 32, k: int = 128, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g) * 3.0, torch.randn(n, k, generator=g) * 0.05


def test_scaled_mm_runs_exactly_where_the_capability_says(cuda):
    cap = tuple(torch.cuda.get_device_capability(cuda))
    if torch.version.hip:
        pytest.skip("ROCm: torch._scaled_mm's rule is MI300+, not a compute capability")
    assert scaled_mm_available(cuda) == expected_scaled_mm(cap), cap


def test_quantizing_on_the_gpu_gives_the_cpu_bits(cuda):
    a, _ = _inputs()
    s = current_scale(a, "e4m3")
    assert current_scale(a.to(cuda), "e4m3") == s
    for fmt in ("e4m3", "e5m2"):
        on_gpu, on_cpu = quantize(a.to(cuda), s, fmt).cpu(), quantize(a, s, fmt)
        assert torch.equal(on_gpu.view(torch.uint8), on_cpu.view(torch.uint8)), fmt
        assert torch.equal(dequantize(quantize(a.to(cuda), s, fmt), s).cpu(), dequantize(on_cpu, s))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scaled_mm_agrees_with_the_simulation(cuda, seed, capsys):
    if not scaled_mm_available(cuda):
        pytest.skip(f"torch._scaled_mm does not run on sm_{''.join(map(str, torch.cuda.get_device_capability(cuda)))}")
    a, b = _inputs(seed=seed)
    a, b = a.to(cuda), b.to(cuda)
    assert scaled_mm_agrees(a, b, "e4m3")
    sa, sb = current_scale(a, "e4m3"), current_scale(b, "e4m3")
    aq, bq = quantize(a, sa, "e4m3"), quantize(b, sb, "e4m3")
    real = fp8_matmul(aq, sa, bq, sb, "scaled_mm")
    sim_cpu = fp8_matmul(aq.cpu(), sa, bq.cpu(), sb, "simulate")   # the kit's simulation, on the CPU
    exact = (dequantize(aq.cpu(), sa).double() @ dequantize(bq.cpu(), sb).double().t())
    diff = (real.cpu() - sim_cpu).abs().max().item()
    scale = sim_cpu.abs().max().item()
    gpu_err = (real.cpu().double() - exact).abs().max().item() / scale
    sim_err = (sim_cpu.double() - exact).abs().max().item() / scale
    with capsys.disabled():
        print(f"\n_scaled_mm e4m3 64x128 @ 128x32 vs the simulation on the CPU: max |diff| {diff:.3g} "
              f"({diff / scale:.2g} of the largest output; bit-exact: {torch.equal(real.cpu(), sim_cpu)}); "
              f"from the exact sum: GPU {gpu_err:.2g}, simulation {sim_err:.2g}")
    assert real.dtype == torch.float32 and real.shape == (64, 32)
    assert diff <= SCALED_MM_RTOL * scale
    assert sim_err < 1e-6                     # fp32 sums of exact products; the GPU's error is printed, bounded above


def test_scaled_mm_is_bit_exact_on_small_integers(cuda):
    """Integers in [-8, 8] are exact in e4m3 and every partial sum (|sum| <= 32 * 64) is exact in any accumulator of
    12 or more bits, so here the GPU's fp8 matmul and the simulation must agree bit for bit, whatever the order."""
    if not scaled_mm_available(cuda):
        pytest.skip("torch._scaled_mm does not run on this GPU")
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-8, 9, (32, 32), generator=g).float()
    b = torch.randint(-8, 9, (16, 32), generator=g).float()
    aq, bq = quantize(a.to(cuda), 1.0, "e4m3"), quantize(b.to(cuda), 1.0, "e4m3")
    real = fp8_matmul(aq, 1.0, bq, 1.0, "scaled_mm").cpu()
    assert torch.equal(real, a @ b.t()) and torch.equal(real, fp8_matmul(aq.cpu(), 1.0, bq.cpu(), 1.0, "simulate"))


def test_a_wrong_scale_is_caught(cuda):
    """The planted bug: a scale applied twice is far outside the tolerance (the check can fail)."""
    if not scaled_mm_available(cuda):
        pytest.skip("torch._scaled_mm does not run on this GPU")
    a, b = (t.to(cuda) for t in _inputs())
    sa, sb = current_scale(a, "e4m3"), current_scale(b, "e4m3")
    aq, bq = quantize(a, sa, "e4m3"), quantize(b, sb, "e4m3")
    real = fp8_matmul(aq, sa, bq, sb, "scaled_mm")
    wrong = fp8_matmul(aq, sa * sa, bq, sb, "simulate")
    assert not torch.allclose(real, wrong, rtol=1e-5, atol=1e-5 * float(wrong.abs().max()))
