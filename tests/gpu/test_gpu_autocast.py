"""Autocast on CUDA, probed on the GPU: every probed op lands where PyTorch's docs put it (the kit's transcription,
``DOCUMENTED_AUTOCAST["cuda"]``), and where CUDA and CPU differ, the GPU shows exactly the documented differences
(softmax, layer_norm, exp, sum... cast up to fp32 on CUDA, left alone on the CPU)."""
import pytest
import torch

from ampkit.device import autocast_dtypes
from ampkit.precision import DOCUMENTED_AUTOCAST, probe_autocast_ops


def _table(rows) -> str:
    return "\n".join(f"  {r.op:34s} observed {r.observed:8s} documented {r.documented:8s} {r.note}" for r in rows)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_cuda_probe_agrees_with_the_documented_lists(cuda, dtype):
    if dtype not in autocast_dtypes(cuda):
        pytest.skip(f"autocast on this GPU does not accept {dtype}")
    rows = probe_autocast_ops(cuda, dtype)
    assert {r.op for r in rows} == set(DOCUMENTED_AUTOCAST["cuda"])
    wrong = [r for r in rows if not r.agrees]
    assert not wrong, "CUDA autocast differs from PyTorch's docs:\n" + _table(wrong)
    low = [r.op for r in rows if r.observed == "lower"]
    assert {"linear", "matmul", "mm", "bmm", "conv2d"} <= set(low)
    assert all(r.out_fp32_in == dtype for r in rows if r.observed == "lower")
    assert all(r.out_low_in == torch.float32 for r in rows if r.observed == "fp32")


def _differ(a: str, b: str) -> bool:
    """Two classes of the probe that behave differently (promote and unlisted give the same dtypes when ordinary
    type promotion already widens mixed inputs, so that pair is not counted)."""
    return a != b and {a, b} != {"promote", "unlisted"}


def test_cuda_and_cpu_differ_exactly_where_the_docs_say(cuda):
    gpu = {r.op: r.observed for r in probe_autocast_ops(cuda, "fp16")}
    cpu = {r.op: r.observed for r in probe_autocast_ops("cpu", "fp16")}
    docs = DOCUMENTED_AUTOCAST
    observed = {op for op in gpu if _differ(gpu[op], cpu[op])}
    documented = {op for op in gpu if _differ(docs["cuda"][op], docs["cpu"][op])}
    print("\nCUDA vs CPU autocast (fp16), probed:", {op: f"cpu {cpu[op]} / cuda {gpu[op]}" for op in sorted(observed)})
    assert {"softmax", "log_softmax", "layer_norm", "exp", "sum", "pow"} <= documented
    assert observed == documented
    assert all(gpu[op] == "fp32" and cpu[op] == "unlisted" for op in observed)


def test_autocast_default_dtype_on_cuda_is_fp16(cuda):
    with torch.autocast("cuda"):
        out = torch.ones(8, 8, device=cuda) @ torch.ones(8, 8, device=cuda)
    assert torch.get_autocast_dtype("cuda") == torch.float16 and out.dtype == torch.float16
