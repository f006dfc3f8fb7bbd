"""The two jmp presets against jmp itself: the loss scale after every step, as real JAX computed it (item 14 of
issue 28). ``preset("jmp")`` is jmp's ``DynamicLossScale.adjust`` run op by op (a float32 division, the
``min_loss_scale`` given); ``preset("jmp-jit")`` is the same step compiled by ``jax.jit`` (XLA multiplies by
float32(1/factor), and the state loses ``min_loss_scale`` in the jit round trip, so the floor is 1).

MEASURED was printed by ``tests/_measure_jmp.py`` with jax 0.10.2, jaxlib 0.10.2 and jmp 0.0.4 (PyPI) on an x86
CPU, in a virtual environment of its own (the kit does not need JAX): ``python3 -m venv /tmp/jaxenv &&
/tmp/jaxenv/bin/pip install jax==0.10.2 jaxlib==0.10.2 jmp==0.0.4 && /tmp/jaxenv/bin/python tests/_measure_jmp.py``.
Each case: jmp's arguments, the steps ("o" overflow, "." clean), then the scale after each step as float.hex, op by
op ("eager") and under ``jax.jit``.
"""
from __future__ import annotations

import pytest

from ampkit.scaling import preset

# jax 0.10.2, jmp 0.0.4, device cpu:0
# compiled backoff, factor 3:
#   %constant.2 = f32[] constant(0.333333343); %multiply.1 = f32[] multiply(%param_1.1, %constant.2)
MEASURED = {
    'factor 3 from 2^15': (
        {'loss_scale': 32768.0, 'factor': 3},
        'oo',
        # eager
        ['0x1.555556p+13', '0x1.c71c72p+11'],
        # jit
        ['0x1.555556p+13', '0x1.c71c74p+11'],
    ),
    'min_loss_scale 0.1 from 1': (
        {'loss_scale': 1.0, 'min_loss_scale': 0.1},
        'ooooo',
        # eager
        ['0x1.000000p-1', '0x1.000000p-2', '0x1.000000p-3', '0x1.99999ap-4', '0x1.99999ap-4'],
        # jit
        ['0x1.000000p+0', '0x1.000000p+0', '0x1.000000p+0', '0x1.000000p+0', '0x1.000000p+0'],
    ),
    'random, factor 3': (
        {'loss_scale': 1000.3, 'period': 3, 'factor': 3, 'min_loss_scale': 0.7},
        '...o...o....o..o....o....o......o..o....o..oo.o.o...oo..o...',
        # eager
        ['0x1.f42666p+9', '0x1.f42666p+9', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.f42666p+9', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.771cccp+11', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.f42664p+9', '0x1.f42664p+9',
         '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.f42664p+9', '0x1.f42664p+9',
         '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.f42664p+9', '0x1.f42664p+9',
         '0x1.f42664p+9', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.f42664p+9', '0x1.f42664p+9',
         '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.4d6eeep+8', '0x1.bc93e8p+6', '0x1.28629ap+5',
         '0x1.28629ap+5', '0x1.8b2e22p+3', '0x1.8b2e22p+3', '0x1.077416p+2', '0x1.077416p+2',
         '0x1.077416p+2', '0x1.8b2e20p+3', '0x1.077416p+2', '0x1.5f4572p+0', '0x1.5f4572p+0',
         '0x1.5f4572p+0', '0x1.666666p-1', '0x1.666666p-1', '0x1.666666p-1', '0x1.0cccccp+1'],
        # jit
        ['0x1.f42666p+9', '0x1.f42666p+9', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.f42666p+9', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.771cccp+11', '0x1.771cccp+11', '0x1.f42666p+9', '0x1.f42666p+9', '0x1.f42666p+9',
         '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.f42668p+9', '0x1.f42668p+9',
         '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.f42668p+9', '0x1.f42668p+9',
         '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.f42668p+9', '0x1.f42668p+9',
         '0x1.f42668p+9', '0x1.771ccep+11', '0x1.f42668p+9', '0x1.f42668p+9', '0x1.f42668p+9',
         '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.f42668p+9', '0x1.f42668p+9',
         '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.4d6ef0p+8', '0x1.bc93ecp+6', '0x1.28629ep+5',
         '0x1.28629ep+5', '0x1.8b2e28p+3', '0x1.8b2e28p+3', '0x1.07741cp+2', '0x1.07741cp+2',
         '0x1.07741cp+2', '0x1.8b2e2ap+3', '0x1.07741cp+2', '0x1.5f457cp+0', '0x1.5f457cp+0',
         '0x1.5f457cp+0', '0x1.000000p+0', '0x1.000000p+0', '0x1.000000p+0', '0x1.800000p+1'],
    ),
    'factor 5': (
        {'loss_scale': 330000.0, 'period': 2, 'factor': 5, 'min_loss_scale': 0.3},
        'o..o....oo...o..o..oo..o',
        # eager
        ['0x1.01d000p+16', '0x1.01d000p+16', '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16',
         '0x1.424400p+18', '0x1.424400p+18', '0x1.92d500p+20', '0x1.424400p+18', '0x1.01d000p+16',
         '0x1.01d000p+16', '0x1.424400p+18', '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16',
         '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16', '0x1.424400p+18', '0x1.01d000p+16',
         '0x1.9c8000p+13', '0x1.9c8000p+13', '0x1.01d000p+16', '0x1.9c8000p+13'],
        # jit
        ['0x1.01d000p+16', '0x1.01d000p+16', '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16',
         '0x1.424400p+18', '0x1.424400p+18', '0x1.92d500p+20', '0x1.424400p+18', '0x1.01d000p+16',
         '0x1.01d000p+16', '0x1.424400p+18', '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16',
         '0x1.424400p+18', '0x1.01d000p+16', '0x1.01d000p+16', '0x1.424400p+18', '0x1.01d000p+16',
         '0x1.9c8000p+13', '0x1.9c8000p+13', '0x1.01d000p+16', '0x1.9c8000p+13'],
    ),
    'factor 7': (
        {'loss_scale': 330000.0, 'period': 2, 'factor': 7, 'min_loss_scale': 0.3},
        '..oo...o...o.o.....ooo.o',
        # eager
        ['0x1.424400p+18', '0x1.19fb80p+21', '0x1.424400p+18', '0x1.704db6p+15', '0x1.704db6p+15',
         '0x1.424400p+18', '0x1.424400p+18', '0x1.704db6p+15', '0x1.704db6p+15', '0x1.424400p+18',
         '0x1.424400p+18', '0x1.704db6p+15', '0x1.704db6p+15', '0x1.a4eb1ap+12', '0x1.a4eb1ap+12',
         '0x1.704db6p+15', '0x1.704db6p+15', '0x1.424400p+18', '0x1.424400p+18', '0x1.704db6p+15',
         '0x1.a4eb1ap+12', '0x1.e10cb0p+9', '0x1.e10cb0p+9', '0x1.12e2aep+7'],
        # jit
        ['0x1.424400p+18', '0x1.19fb80p+21', '0x1.424400p+18', '0x1.704db8p+15', '0x1.704db8p+15',
         '0x1.424400p+18', '0x1.424400p+18', '0x1.704db8p+15', '0x1.704db8p+15', '0x1.424400p+18',
         '0x1.424400p+18', '0x1.704db8p+15', '0x1.704db8p+15', '0x1.a4eb1cp+12', '0x1.a4eb1cp+12',
         '0x1.704db8p+15', '0x1.704db8p+15', '0x1.424400p+18', '0x1.424400p+18', '0x1.704db8p+15',
         '0x1.a4eb1cp+12', '0x1.e10cb4p+9', '0x1.e10cb4p+9', '0x1.12e2b0p+7'],
    ),
    'factor 10': (
        {'loss_scale': 330000.0, 'period': 2, 'factor': 10, 'min_loss_scale': 0.3},
        'o.o..oo.oo.....o.....o..',
        # eager
        ['0x1.01d000p+15', '0x1.01d000p+15', '0x1.9c8000p+11', '0x1.9c8000p+11', '0x1.01d000p+15',
         '0x1.9c8000p+11', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.080000p+5', '0x1.a66666p+1',
         '0x1.a66666p+1', '0x1.080000p+5', '0x1.080000p+5', '0x1.4a0000p+8', '0x1.4a0000p+8',
         '0x1.080000p+5', '0x1.080000p+5', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.9c8000p+11',
         '0x1.9c8000p+11', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.9c8000p+11'],
        # jit
        ['0x1.01d000p+15', '0x1.01d000p+15', '0x1.9c8000p+11', '0x1.9c8000p+11', '0x1.01d000p+15',
         '0x1.9c8000p+11', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.080000p+5', '0x1.a66666p+1',
         '0x1.a66666p+1', '0x1.080000p+5', '0x1.080000p+5', '0x1.4a0000p+8', '0x1.4a0000p+8',
         '0x1.080000p+5', '0x1.080000p+5', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.9c8000p+11',
         '0x1.9c8000p+11', '0x1.4a0000p+8', '0x1.4a0000p+8', '0x1.9c8000p+11'],
    ),
    'min_loss_scale above the scale': (
        {'loss_scale': 4.0, 'min_loss_scale': 16.0},
        'oo',
        # eager
        ['0x1.000000p+4', '0x1.000000p+4'],
        # jit
        ['0x1.000000p+1', '0x1.000000p+0'],
    ),
    'growth stops below inf': (
        {'loss_scale': 1.7014118346046923e+38, 'period': 1},
        '...',
        # eager
        ['0x1.000000p+127', '0x1.000000p+127', '0x1.000000p+127'],
        # jit
        ['0x1.000000p+127', '0x1.000000p+127', '0x1.000000p+127'],
    ),
}


def scales(rule, flags: str) -> list[str]:
    out = []
    for f in flags:
        rule.update(f == "o")
        mantissa, exponent = rule.scale.hex().split("p")
        out.append(f"{mantissa[:10]}p{exponent}")
    return out


@pytest.mark.parametrize("case", list(MEASURED))
def test_jmp_op_by_op_matches_jax(case):
    kwargs, flags, eager, _ = MEASURED[case]
    assert scales(preset("jmp", **kwargs), flags) == eager


@pytest.mark.parametrize("case", list(MEASURED))
def test_jmp_under_jit_matches_jax(case):
    kwargs, flags, _, jit = MEASURED[case]
    assert scales(preset("jmp-jit", **kwargs), flags) == jit


def test_the_issues_numbers():
    """Issue 28, item 14: factor 3 from 2^15, second backoff 0x1.c71c72p+11 op by op, 0x1.c71c74p+11 under jit;
    start 1.0, min_loss_scale=0.1, five overflows: 0.5, 0.25, 0.125, 0.1, 0.1 op by op, 1.0 every step under jit."""
    _, _, eager, jit = MEASURED["factor 3 from 2^15"]
    assert (eager[1], jit[1]) == ("0x1.c71c72p+11", "0x1.c71c74p+11")
    _, _, eager, jit = MEASURED["min_loss_scale 0.1 from 1"]
    assert [float.fromhex(v) for v in eager] == [0.5, 0.25, 0.125, 0.10000000149011612, 0.10000000149011612]
    assert [float.fromhex(v) for v in jit] == [1.0] * 5


def test_the_cases_separate_the_modes():
    """Both differences between the modes are exercised: the arithmetic (the factor 3 and 7 streams differ in the
    last bit; those with factors 5 and 10 happen to agree) and the floor (min_loss_scale below and above 1)."""
    differing = {case for case, (_, _, eager, jit) in MEASURED.items() if eager != jit}
    assert differing == {"factor 3 from 2^15", "min_loss_scale 0.1 from 1", "random, factor 3", "factor 7",
                         "min_loss_scale above the scale"}
