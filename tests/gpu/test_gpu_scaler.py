"""The GradScaler drop-in on CUDA: ``ampkit.scaling.DynamicLossScaler("cuda")`` and ``torch.amp.GradScaler("cuda")``
on the same steps (an fp16 autocast model, an overflow step, growth) give bit-identical scales, skips and weights."""
import copy

import torch
from torch import nn

from ampkit.scaling import DynamicLossScaler

SCALERS = {"torch": torch.amp.GradScaler, "ampkit": DynamicLossScaler}
POISON_AT = 2          # the step whose loss we multiply by inf


def _run(make, device: torch.device, steps: int = 8) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = make("cuda", init_scale=2.0**12, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 16, generator=g).to(device), torch.randn(8, 4, generator=g).to(device))
            for _ in range(steps)]
    scales, skipped = [], []
    for i, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x), y)
        if i == POISON_AT:
            loss = loss * float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        skipped.append(all(torch.equal(b, p) for b, p in zip(before, model.parameters())))
    return {"scales": scales, "skipped": skipped, "params": [copy.deepcopy(p.detach()) for p in model.parameters()]}


def test_dynamic_loss_scaler_matches_gradscaler_on_cuda_bit_for_bit(cuda):
    out = {name: _run(make, cuda) for name, make in SCALERS.items()}
    t, a = out["torch"], out["ampkit"]
    assert t["skipped"][POISON_AT] and not any(t["skipped"][:POISON_AT])   # the overflow step was skipped
    assert t["scales"][POISON_AT] == t["scales"][POISON_AT - 1] / 2          # ... and the scale backed off
    assert max(t["scales"]) > 2.0**12                                         # growth happened too
    assert a["scales"] == t["scales"] and a["skipped"] == t["skipped"]
    for p, q in zip(a["params"], t["params"]):
        assert p.device.type == "cuda" and torch.equal(p.view(torch.int32), q.view(torch.int32))


def test_the_scale_lives_on_the_gpu(cuda):
    s = DynamicLossScaler("cuda")
    scaled = s.scale(torch.ones((), device=cuda))
    assert scaled.device.type == "cuda" and scaled.item() == 2.0**16
