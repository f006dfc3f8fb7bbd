"""The kit's device decisions on a real CUDA GPU: compute capability -> tensor-core dtypes -> the fast and default
dtype, as the README states them (tests/gpu/_gpu_expect.py); and a measured fp16/bf16 vs fp32 matmul, printed, never
asserted."""
import pytest
import torch
from _gpu_expect import ARCHITECTURES, expected_fast_dtype, expected_tensor_cores

from ampkit.device import device_report, pick_device
from ampkit.formats import format_name
from ampkit.hardware import cuda_native_dtypes, native_dtypes


def test_the_kit_picks_cuda_first(cuda):
    assert pick_device() == torch.device("cuda")
    assert device_report().device.type == "cuda"   # notebook 00's device_report() lands here


def test_tensor_core_decision_follows_the_compute_capability(cuda):
    cap = tuple(torch.cuda.get_device_capability(cuda))
    native, cores = native_dtypes(cuda)
    assert (native, cores) == cuda_native_dtypes(cap)
    assert tuple(sorted(format_name(d) for d in native)) == expected_tensor_cores(cap), (cap, cores)
    rep = device_report(cuda)
    assert rep.tensor_cores == cores and rep.name == torch.cuda.get_device_name(cuda)
    assert torch.float16 in rep.autocast_dtypes
    fast = expected_fast_dtype(cap)
    if fast == "bfloat16" and torch.bfloat16 not in rep.autocast_dtypes:
        pytest.fail(f"sm_{cap[0]}{cap[1]} has bf16 tensor cores but autocast refuses bf16")
    assert (format_name(rep.fast_dtype) if rep.fast_dtype else None) == fast
    fallback = torch.bfloat16 if torch.bfloat16 in rep.autocast_dtypes else torch.float16
    assert rep.default_dtype == (rep.fast_dtype or fallback)
    print(f"\n{torch.cuda.get_device_name(cuda)}: compute capability {cap} "
          f"({ARCHITECTURES.get(cap, 'not in the table')}), {cores}; fast dtype {fast}")


@pytest.mark.parametrize("n", [1024, 4096])
def test_fp16_bf16_vs_fp32_matmul_speed_is_printed(cuda, n, capsys):
    """A measurement shown beside the decision (median and range of interleaved repeats); never asserted."""
    rep = device_report(cuda, probe_size=n)
    precision = torch.get_float32_matmul_precision()   # "highest": fp32 matmuls do not use TF32
    with capsys.disabled():
        print(f"\n{n}x{n} matmul on {rep.name} (float32 matmul precision: {precision!r}):")
        for dt in rep.autocast_dtypes:
            print(f"  {format_name(dt)}: {rep.verdict(dt)}; measured {rep.measured(dt)}")
    assert set(rep.ratios) == set(rep.autocast_dtypes)
    assert all(r.median > 0 and r.low <= r.median <= r.high for r in rep.ratios.values())


def test_autocast_evaluation_follows_the_models_device(cuda):
    """Notebook 02 trains on the CPU while the kit's default device is the GPU: the evaluation runs where the model is,
    and asking for another device is a clear error (found on the first GPU run: a deep device-mismatch traceback)."""
    from ampkit.data import make_data
    from ampkit.models import build_model
    from ampkit.precision.checks import evaluate_under_autocast

    net = build_model("mlp_ln", seed=0)
    X, y = make_data("mlp_ln", seed=1)
    assert evaluate_under_autocast(net, X, y, "bf16").n == len(y)
    assert evaluate_under_autocast(net.to(cuda), X, y, "fp16").n == len(y)
    with pytest.raises(ValueError, match="model's parameters are on cuda"):
        evaluate_under_autocast(net, X, y, "bf16", device="cpu")
