"""Notebook 07's transformer on a CUDA GPU: the decoder trains under fp16 autocast with GradScaler and under bf16
autocast; the written-out attention overflows fp16 where the fused ``scaled_dot_product_attention`` (flash or
memory-efficient kernels, which keep fp32 inside) does not."""
import math

import pytest
import torch
import torch.nn.functional as F

from ampkit.data import make_data
from ampkit.models import build_model, lm_loss
from ampkit.precision import apply_level
from ampkit.protocols import as_scaler
from ampkit.train import train


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_decoder_trains_under_cuda_autocast(cuda, dtype, capsys):
    model = build_model("decoder", seed=0).to(cuda)
    mp = apply_level(model, torch.optim.AdamW(model.parameters(), lr=3e-3), "O1", dtype)
    scaler = as_scaler(torch.amp.GradScaler("cuda")) if dtype == "fp16" else None
    hist = train(mp, make_data("decoder", seed=0, n_samples=256), scaler=scaler, steps=25, batch_size=8,
                 loss_fn=lm_loss)
    with capsys.disabled():
        print(f"\nDecoderLM O1 {dtype} on {torch.cuda.get_device_name(cuda)}: loss {hist.losses[0]:.3f} -> "
              f"{hist.losses[-1]:.3f}, {hist.n_skipped} skipped, median step {1e3 * hist.step_time():.1f} ms")
    assert all(math.isfinite(v) for v in hist.losses)
    assert hist.losses[-1] < hist.losses[0] - 0.8


def test_fused_attention_survives_where_the_written_out_one_overflows(cuda):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 64, 64, generator=g) * s for s in (60.0, 60.0, 1.0))
    q, k, v = (t.to(cuda, torch.float16) for t in (q, k, v))
    causal = torch.ones(64, 64, dtype=torch.bool, device=cuda).tril()
    logits = (q @ k.transpose(-2, -1)) / 8.0
    manual = torch.softmax(logits.masked_fill(~causal, float("-inf")).float(), dim=-1).half() @ v
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert manual.isnan().any()            # the fp16 product overflowed before the softmax could run in fp32
    assert not fused.isnan().any()
