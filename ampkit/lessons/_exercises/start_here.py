"""Notebook 00_start_here's exercises: what bf16 stores for 70000, which CPUs' default dtype needs a loss scaler,
fp16's largest error on whole numbers above 2¹⁵, and what fp16 keeps at the bottom of its range.

No state from the notebook. See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

import math

import torch

from ampkit.device import DeviceReport
from ampkit.formats import compare_formats, info, round_trip
from ampkit.hardware import cpu_native_dtypes
from ampkit.i18n import mark, tr

EX1_VALUE = 70000.0
EX2_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")
EX2_CPUS = {"A": (True, False, False, False), "B": (False, False, False, False), "C": (False, False, True, False)}
EX4_VALUES = (2.5e-8, 9.0e-8, 1.5e-7)

HINT_1 = mark("not inf: bf16 has fp32's 8 exponent bits and reaches about 3.4e38. Not 70000 either: with 8 "
              "significant bits, bf16's numbers between 2**16 = 65536 and 2**17 are 2**(16-7) = 512 apart, so "
              "70000 rounds to the nearest multiple of 512.")
HINT_2 = mark("the default is the native dtype when there is one, bf16 before fp16; when nothing is native it falls "
              "back to bf16 (slow there, but it needs no scaler). Work out the default of each CPU first.")
HINT_3 = mark("between 2**15 and 2**16, fp16's numbers are 2**(15-10) = 32 apart (10 stored mantissa bits): a whole "
              "number lies at most half a step from the nearest of them.")
HINT_4 = mark("divide each value by 2**-24 ≈ 5.96e-8 and round to the nearest whole number: below 0.5 it goes to 0, "
              "and 1.51 rounds to 2, not 1 — rounding is to the nearest, not down.")


def expected_1() -> float:
    """The engine: torch's cast of 70000 to bf16 and back."""
    return round_trip(EX1_VALUE, "bf16")


def solution_1() -> float:
    _, exponent = math.frexp(EX1_VALUE)
    e = exponent - 1
    gap = 2.0**e * torch.finfo(torch.bfloat16).eps
    nearest = round(EX1_VALUE / gap) * gap
    print(tr("2**{e} <= {x:g} < 2**{e1}: bf16's numbers are {gap:g} apart there (its eps is 2**-7: 8 significant "
             "bits); {x:g} / {gap:g} = {q:.2f} -> {n} x {gap:g} = {nearest:g}", e=e, e1=e + 1, x=EX1_VALUE, gap=gap,
             q=EX1_VALUE / gap, n=round(EX1_VALUE / gap), nearest=nearest))
    print(tr("{d:g} too large, a relative error of {rel:.1%}; each format's cast: {casts}", d=nearest - EX1_VALUE,
             rel=(nearest - EX1_VALUE) / EX1_VALUE, casts={r.fmt: r.stored for r in compare_formats(EX1_VALUE)}))
    return nearest


def expected_2() -> set[str]:
    """The engine: the kit's device report for a CPU with each flag set; those whose default dtype is fp16."""
    needs = set()
    for name, values in EX2_CPUS.items():
        report = DeviceReport(torch.device("cpu"), "hypothetical", (torch.float16, torch.bfloat16),
                              native=cpu_native_dtypes(dict(zip(EX2_FLAGS, values)), machine="x86_64"))
        if report.default_dtype == torch.float16:
            needs.add(name)
    return needs


def solution_2() -> set[str]:
    needs = set()
    for name, values in EX2_CPUS.items():
        flags = dict(zip(EX2_FLAGS, values))
        bf16 = flags["avx512_bf16"] or flags["amx_bf16"]
        fp16 = flags["avx512_fp16"] or flags["amx_fp16"]
        default = "bf16" if bf16 or not fp16 else "fp16"
        print(tr("CPU {name}: bf16 native {bf16}, fp16 native {fp16} -> default {default}", name=name, bf16=bf16,
                 fp16=fp16, default=default))
        if default == "fp16":
            needs.add(name)
    return needs


def expected_3() -> float:
    """The engine: every whole number from 2**15 to fp16's max cast to fp16; the largest error."""
    whole = torch.arange(2**15, int(info("fp16").max) + 1, dtype=torch.float64)
    return (whole.to(torch.float16).double() - whole).abs().max().item()


def solution_3() -> float:
    step = 2.0**15 * torch.finfo(torch.float16).eps
    tie = 2**15 + step / 2
    print(tr("fp16's numbers from 2**15 up are {step:g} apart (its eps is 2**-10); the worst a whole number can be "
             "off is half: {half:g}", step=step, half=step / 2))
    print(tr("{tie:g} is stored as {stored:g} ({off:g} off)", tie=tie, stored=round_trip(tie, "fp16"),
             off=abs(round_trip(tie, "fp16") - tie)))
    return step / 2


def expected_4() -> tuple[int, ...]:
    """The engine: torch's fp16 casts, in units of 2**-24."""
    tiny = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps
    return tuple(round(round_trip(x, "fp16") / tiny) for x in EX4_VALUES)


def solution_4() -> tuple[int, ...]:
    unit = info("fp16").smallest_subnormal
    units = []
    for x in EX4_VALUES:
        u = x / unit
        units.append(round(u))
        print(tr("{x:.1e} = {u:.3f} x 2**-24 -> {n} x 2**-24 = {stored:.4g} ({rel:+.0%})", x=x, u=u, n=round(u),
                 stored=round(u) * unit, rel=(round(u) * unit - x) / x))
    return tuple(units)
