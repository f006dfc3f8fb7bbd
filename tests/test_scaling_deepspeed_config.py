"""DeepSpeed's fp16 config values: the preset takes what DeepSpeed's own config takes (item 15 of issue 28).

``DeepSpeedFP16Config`` (deepspeed/runtime/precision_config.py, v0.19.5) declares ``min_loss_scale: int = 1`` and
the other keys on a pydantic model in lax mode, so ``min_loss_scale=16.0`` is stored as 16 while 0.25 is refused.
MEASURED was printed by ``tests/_measure_deepspeed_config.py`` with pydantic 2.14.4 on that class as v0.19.5
declares it (``git show v0.19.5:deepspeed/runtime/precision_config.py`` from github.com/deepspeedai/DeepSpeed);
for each key set alone with ``enabled=True``: the value expression and what DeepSpeed stores (None: refused).
``ampkit.scaling.deepspeed_config`` must convert each the same way, and the preset must accept exactly those
values (within the kit's own bounds, named in the test).
"""
from __future__ import annotations

import math  # noqa: F401  (used by the value expressions)
from decimal import Decimal  # noqa: F401
from fractions import Fraction  # noqa: F401

import numpy as np  # noqa: F401
import pytest

from ampkit.scaling import preset
from ampkit.scaling.deepspeed_config import deepspeed_bool, deepspeed_int

MEASURED = {
    'initial_scale_power': {
        '16': 16, '16.0': 16, '16.5': None, '0.25': None, 'True': 1, 'False': 0, "'16'": 16, "'16.0'": 16,
        "' 16 '": 16, "'1_6'": 16, "'+16'": 16, "'0x10'": None, "'1e2'": None, "'16.'": None, "'abc'": None,
        "'auto'": 16, "b'16'": 16, "Decimal('16.0')": 16, "Decimal('16.5')": None, 'Fraction(16)': 16,
        'Fraction(33, 2)': None, 'np.int64(16)': 16, 'np.float32(16)': 16, 'np.float64(16.5)': None, 'np.True_': 1,
        'math.inf': None, 'math.nan': None, '2.0**63': None, '-1': -1, '0': 0, '1': 1, 'None': None, '[16]': None,
    },
    'loss_scale_window': {
        '16': 16, '16.0': 16, '16.5': None, '0.25': None, 'True': None, 'False': None, "'16'": 16, "'16.0'": None,
        "' 16 '": 16, "'1_6'": 16, "'+16'": 16, "'0x10'": None, "'1e2'": None, "'16.'": None, "'abc'": None,
        "'auto'": 1000, "b'16'": 16, "Decimal('16.0')": 16, "Decimal('16.5')": None, 'Fraction(16)': 16,
        'Fraction(33, 2)': None, 'np.int64(16)': 16, 'np.float32(16)': 16, 'np.float64(16.5)': None, 'np.True_': 1,
        'math.inf': None, 'math.nan': None, '2.0**63': None, '-1': None, '0': None, '1': 1, 'None': None,
        '[16]': None,
    },
    'hysteresis': {
        '16': 16, '16.0': 16, '16.5': None, '0.25': None, 'True': 1, 'False': 0, "'16'": 16, "'16.0'": 16,
        "' 16 '": 16, "'1_6'": 16, "'+16'": 16, "'0x10'": None, "'1e2'": None, "'16.'": None, "'abc'": None,
        "'auto'": 2, "b'16'": 16, "Decimal('16.0')": 16, "Decimal('16.5')": None, 'Fraction(16)': 16,
        'Fraction(33, 2)': None, 'np.int64(16)': 16, 'np.float32(16)': 16, 'np.float64(16.5)': None, 'np.True_': 1,
        'math.inf': None, 'math.nan': None, '2.0**63': None, '-1': -1, '0': 0, '1': 1, 'None': None, '[16]': None,
    },
    'min_loss_scale': {
        '16': 16, '16.0': 16, '16.5': None, '0.25': None, 'True': None, 'False': None, "'16'": 16, "'16.0'": None,
        "' 16 '": 16, "'1_6'": 16, "'+16'": 16, "'0x10'": None, "'1e2'": None, "'16.'": None, "'abc'": None,
        "'auto'": 1, "b'16'": 16, "Decimal('16.0')": 16, "Decimal('16.5')": None, 'Fraction(16)': 16,
        'Fraction(33, 2)': None, 'np.int64(16)': 16, 'np.float32(16)': 16, 'np.float64(16.5)': None, 'np.True_': 1,
        'math.inf': None, 'math.nan': None, '2.0**63': None, '-1': None, '0': None, '1': 1, 'None': None,
        '[16]': None,
    },
    'consecutive_hysteresis': {
        'True': True, 'False': False, '0': False, '1': True, '2': None, '0.0': False, '1.0': True, '1.5': None,
        "'true'": True, "'TRUE'": True, "'yes'": True, "'on'": True, "'1'": True, "'0'": False, "'off'": False,
        "'f'": False, "'n'": False, "'t'": True, "'y'": True, "'no'": False, "'false'": False, "' true '": None,
        "'maybe'": None, "'auto'": False, "b'true'": True, 'np.True_': True, 'np.int64(1)': True, 'None': None,
    },
}

DEFAULTS = {"initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}
STRICT = {"loss_scale_window", "min_loss_scale"}       # v0.19.5's _reject_non_integer_scale_params
INT_CASES = [(field, expr, stored) for field in DEFAULTS for expr, stored in MEASURED[field].items()]


def _converted(convert, *args, **kwargs):
    try:
        return convert(*args, **kwargs)
    except (TypeError, ValueError) as e:
        assert args[0] in str(e) and "must be" in str(e), e       # the message names the key and what is valid
        return None


@pytest.mark.parametrize("field,expr,stored", INT_CASES, ids=[f"{f}={e}" for f, e, _ in INT_CASES])
def test_int_keys_convert_as_deepspeed_does(field, expr, stored):
    got = _converted(deepspeed_int, field, eval(expr), DEFAULTS[field], strict=field in STRICT)
    if stored is None and field in STRICT and got is not None:
        assert got <= 0           # DeepSpeed's model check (> 0 with dynamic scaling): the rule refuses it, below
    else:
        assert got == stored and type(got) is type(stored)


@pytest.mark.parametrize("expr,stored", list(MEASURED["consecutive_hysteresis"].items()))
def test_the_flag_converts_as_deepspeed_does(expr, stored):
    assert _converted(deepspeed_bool, "consecutive_hysteresis", eval(expr), False) == stored


#: The kit's bounds beyond DeepSpeed's (which takes any int there): initial_scale_power 0..127, hysteresis >= 1.
def _in_kit_range(field: str, value: int) -> bool:
    return {"initial_scale_power": 0 <= value <= 127}.get(field, value >= 1)


@pytest.mark.parametrize("field,expr,stored", INT_CASES, ids=[f"{f}={e}" for f, e, _ in INT_CASES])
def test_the_preset_accepts_what_deepspeed_accepts(field, expr, stored):
    if stored is not None and _in_kit_range(field, stored):
        rule = preset("deepspeed", **{field: eval(expr)})
        attribute = {"initial_scale_power": "scale", "loss_scale_window": "scale_window",
                     "hysteresis": "delayed_shift", "min_loss_scale": "min_loss_scale"}[field]
        assert getattr(rule, attribute) == (2.0**stored if field == "initial_scale_power" else stored)
    else:
        with pytest.raises((TypeError, ValueError), match=f"{field} must be"):
            preset("deepspeed", **{field: eval(expr)})


def test_the_issues_example():
    """min_loss_scale=16.0 is DeepSpeed's 16 (it floors the scale at 16); 0.25 is refused, naming what is valid."""
    rule = preset("deepspeed", initial_scale_power=6, hysteresis=1, min_loss_scale=16.0)
    for _ in range(2):
        rule.update(True)
    assert rule.scale == 16.0 and rule.min_loss_scale == 16 and type(rule.min_loss_scale) is int
    with pytest.raises(ValueError, match=r"min_loss_scale must be an int \(DeepSpeed's fp16 config: 16, 16\.0, "
                                         r"'16' or 'auto'.*got 0\.25, which has a fractional part"):
        preset("deepspeed", min_loss_scale=0.25)
    with pytest.raises(TypeError, match=r"min_loss_scale must be an int.*not a bool.*got bool True"):
        preset("deepspeed", min_loss_scale=True)
    assert preset("deepspeed", min_loss_scale="auto").min_loss_scale == 1
    assert preset("deepspeed", consecutive_hysteresis="true").consecutive_hysteresis is True
    assert preset("deepspeed", consecutive_hysteresis="false").name == "DeepSpeed fp16"      # "false" is False
