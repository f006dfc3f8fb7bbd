import pytest
import torch

from ampkit import device as D


def test_pick_device_default_and_cpu():
    assert D.pick_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else ("mps" if D._mps_available() else "cpu")
    assert D.pick_device().type == expected


@pytest.mark.parametrize("bad", ["tpu", "gpu0", "cuda:x", 3.5])
def test_pick_device_rejects_unknown(bad):
    with pytest.raises(ValueError, match="valid choices: cuda, mps, cpu"):
        D.pick_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_pick_device_unavailable_names_available():
    with pytest.raises(ValueError, match="not available here; available: .*cpu"):
        D.pick_device("cuda")


def test_cpu_autocast_dtypes_found_by_running():
    dts = D.autocast_dtypes("cpu")
    assert torch.bfloat16 in dts
    # torch >= 2.x CPU autocast accepts fp16 as well; the probe must agree with running autocast directly
    with torch.autocast("cpu", dtype=torch.float16):
        out = torch.ones(2, 2) @ torch.ones(2, 2)
    assert (torch.float16 in dts) == (out.dtype == torch.float16)


def test_report_is_cached_and_consistent():
    a = D.device_report("cpu")
    b = D.device_report("cpu")
    assert a is b
    assert set(a.speedup) == set(a.autocast_dtypes)
    assert all(s > 0 for s in a.speedup.values())
    assert set(a.fast_dtypes) <= set(a.autocast_dtypes)
    if a.fast_dtype is not None:
        assert a.speedup[a.fast_dtype] == max(a.speedup[d] for d in a.fast_dtypes)
    text = "\n".join(a.lines())
    assert "autocast supports" in text and "bfloat16" in text


def test_fast_dtypes_threshold():
    rep = D.DeviceReport(torch.device("cpu"), "x", (torch.float16, torch.bfloat16),
                         {torch.float16: 0.01, torch.bfloat16: 4.0}, 256)
    assert rep.fast_dtypes == (torch.bfloat16,)
    assert rep.fast_dtype == torch.bfloat16
    slow = D.DeviceReport(torch.device("cpu"), "x", (torch.float16,), {torch.float16: 1.1}, 256)
    assert slow.fast_dtype is None


def test_check_autocast_dtype_accepts_names():
    assert D.check_autocast_dtype("bf16", "cpu") == torch.bfloat16
    assert D.check_autocast_dtype(torch.bfloat16, "cpu") == torch.bfloat16


@pytest.mark.parametrize("bad", ["fp8", torch.float32, torch.float8_e5m2])
def test_check_autocast_dtype_unsupported_names_supported(bad):
    with pytest.raises(ValueError, match=r"supported: .*bfloat16"):
        D.check_autocast_dtype(bad, "cpu")


@pytest.mark.parametrize("bad", ["float17", torch.int8, "int"])
def test_check_autocast_dtype_garbage(bad):
    with pytest.raises(ValueError, match="must be one of .*bfloat16"):
        D.check_autocast_dtype(bad, "cpu")
