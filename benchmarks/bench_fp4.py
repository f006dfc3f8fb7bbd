"""Benchmark for issue 40 item 4 (ampkit.fp8's FP4 engine). Plain script: prints measurements, optionally writes JSON.

1. Quantize-dequantize of one tensor, the kit against torchao on the same CPU, interleaved (kit, torchao, kit, ...)
   and compared by the median of the per-round ratios (``_timing.paired_ratio``): NVFP4 (1×16, two-level; the kit's
   ``arithmetic="torchao"`` and its default ``"te"``, torchao's ``NVFP4Tensor.to_nvfp4(...).dequantize``) and MXFP4
   (E2M1 in blocks of 32, FLOOR; torchao's ``MXTensor.to_mx(...).dequantize``). Goal: kit / torchao <= 1.5.
   The kit's ``*_fake_quantize`` computes the decoded values without the 4-bit codes (the simulated layer's path;
   the same numbers, tested); "codes kept" times ``nvfp4_quantize(...).dequantize()``, codes and all.
2. One training step of a small MLP whose linear layers are ``NVFP4Linear`` (the recipe's defaults: Hadamard on the
   wgrad inputs, stochastic rounding of the gradients, 2D weights) against the same step under bf16 autocast and in
   fp32, interleaved. No goal: the ratio to report (the simulation decodes every operand to fp32).

Timings depend on the machine and its load; the ratios are what to compare. One thread (``torch.set_num_threads(1)``)
so that a 2-core host shared with other work measures the code, not the scheduler.
Run: python benchmarks/bench_fp4.py [--json [PATH]] (default PATH: benchmarks/results/fp4.json)
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _timing import interleaved, paired_ratio  # noqa: E402
from bench_notebooks import host_info  # noqa: E402
from torch import nn  # noqa: E402

from ampkit.fp8 import NVFP4Recipe, mx_fake_quantize, nvfp4_fake_quantize, nvfp4_quantize, to_nvfp4  # noqa: E402
from ampkit.models import MLP  # noqa: E402

DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "fp4.json"
SHAPE = (1024, 1024)


def quantize_rows(rounds: int) -> list[dict]:
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import MXTensor
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(0))

    def ao_nvfp4():
        t = NVFP4Tensor.to_nvfp4(x, per_tensor_scale=per_tensor_amax_to_scale(x.abs().max()))
        return t.dequantize(torch.float32)

    def ao_mxfp4():
        return MXTensor.to_mx(x, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.FLOOR).dequantize(torch.float32)

    cases = {
        "nvfp4 (torchao arithmetic)": (lambda: nvfp4_fake_quantize(x, arithmetic="torchao"), ao_nvfp4),
        "nvfp4 (te arithmetic)": (lambda: nvfp4_fake_quantize(x), ao_nvfp4),
        "nvfp4 (te, codes kept)": (lambda: nvfp4_quantize(x).dequantize(), ao_nvfp4),
        "mxfp4 (floor)": (lambda: mx_fake_quantize(x, "e2m1", 32, "floor"), ao_mxfp4),
    }
    rows = []
    for name, (kit, ao) in cases.items():
        t = interleaved({"kit": kit, "torchao": ao}, rounds)
        ratio = paired_ratio(t["kit"], t["torchao"])
        rows.append({"case": name, "shape": list(SHAPE), "kit_ms": round(1e3 * t["kit"].median, 2),
                     "torchao_ms": round(1e3 * t["torchao"].median, 2), "ratio": round(ratio, 3),
                     "goal": 1.5, "met": ratio <= 1.5, "rounds": rounds})
        r = rows[-1]
        print(f"{name:28s} kit {r['kit_ms']:7.2f} ms  torchao {r['torchao_ms']:7.2f} ms  "
              f"ratio {r['ratio']:.2f} (goal <= 1.5: {'met' if r['met'] else 'NOT met'})")
    return rows


def _step(mode: str, width: int = 256, batch: int = 128):
    torch.manual_seed(0)
    model = MLP(64, width, 16, depth=3)
    if mode == "nvfp4":
        to_nvfp4(model, NVFP4Recipe())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, 64, generator=g), torch.randint(0, 16, (batch,), generator=g)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
    return step


def step_rows(rounds: int) -> list[dict]:
    t = interleaved({m: _step(m) for m in ("nvfp4", "bf16", "fp32")}, rounds)
    rows = [{"step": m, "ms": round(1e3 * t[m].median, 2), "spread_ms": round(1e3 * t[m].spread, 2)} for m in t]
    for other in ("bf16", "fp32"):
        rows.append({"step": f"nvfp4 / {other}", "ratio": round(paired_ratio(t["nvfp4"], t[other]), 2)})
    for r in rows:
        print(f"{r['step']:14s} " + (f"{r['ms']:7.2f} ms (spread {r['spread_ms']:.2f})" if "ms" in r
                                     else f"ratio {r['ratio']:.2f}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", nargs="?", const=str(DEFAULT_JSON), default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    doc = {"quantize_dequantize": quantize_rows(args.rounds), "training_step": step_rows(args.rounds)}
    if args.json:
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "host": host_info(), "command": "python benchmarks/bench_fp4.py --json", **doc}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
