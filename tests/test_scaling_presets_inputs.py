"""Every argument of every preset refuses bad input with a clear error: the wrong type is a TypeError, a wrong value
(NaN, inf, out of range, or a number that float32 rounds to inf or 0 where the framework keeps a float32) is a
ValueError, and the message names the argument and what it must be. Also describe()'s and preset()'s own errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ampkit import scaling
from ampkit.scaling import PRESETS, describe, preset, preset_arguments

NAN, INF = math.nan, math.inf
NOT_NUMBERS = [("big", TypeError), (True, TypeError), (None, TypeError)]
FINITE = [(NAN, ValueError), (INF, ValueError), (-INF, ValueError)]

#: What each kind of argument refuses (value, exception).
KINDS = {
    "float32 scale": NOT_NUMBERS + FINITE + [(-1.0, ValueError), (0, ValueError), (1e39, ValueError),
                                             (1e-50, ValueError)],
    # MindSpore checks the value as given (0.99999999 < 1 is refused although its float32 is 1.0)
    "float32 scale >= 1": NOT_NUMBERS + FINITE + [(0.5, ValueError), (-1.0, ValueError), (1e39, ValueError),
                                                  (0.99999999, ValueError)],
    # mindspore.amp.DynamicLossScaler: check_value_type(scale_value, [float, int]), check_positive_int
    "mindspore scale_value": NOT_NUMBERS + FINITE + [(0.5, ValueError), (0.99999999, ValueError),
                                                     (np.float32(2.0), TypeError), (np.int64(4), TypeError)],
    "mindspore int": [(2.5, TypeError), (2.0, TypeError), (True, TypeError), ("2", TypeError),
                      (np.int64(2), TypeError), (0, ValueError), (-3, ValueError)],
    "float64 scale": NOT_NUMBERS + FINITE + [(-1.0, ValueError), (0.0, ValueError)],
    "growth factor": NOT_NUMBERS + FINITE + [(1.0, ValueError), (0.5, ValueError), (-2.0, ValueError)],
    "float32 growth factor": NOT_NUMBERS + FINITE + [(1.0, ValueError), (1.00000001, ValueError), (1e39, ValueError),
                                                     (0.5, ValueError)],
    "backoff factor": NOT_NUMBERS + FINITE + [(1.0, ValueError), (2.0, ValueError), (0.0, ValueError),
                                              (-0.5, ValueError)],
    "float32 backoff factor": NOT_NUMBERS + FINITE + [(1.0, ValueError), (0.99999999, ValueError),
                                                      (1e-50, ValueError), (0.0, ValueError), (2.0, ValueError)],
    "int factor": [(2.5, TypeError), (2.0, TypeError), (True, TypeError), ("2", TypeError), (0, ValueError),
                   (-3, ValueError)],
    "count": [(2.5, TypeError), (NAN, TypeError), (True, TypeError), ("3", TypeError), (0, ValueError),
              (-1, ValueError)],
    # DeepSpeed's fp16 config (pydantic, lax mode) converts 16.0, "16", True, ...: only what it refuses is here
    "deepspeed power": [(16.5, ValueError), (None, TypeError), ("1e2", ValueError), (NAN, ValueError),
                        (INF, ValueError), (1024, ValueError), (128, ValueError), (-1, ValueError)],
    "deepspeed count": [(2.5, ValueError), (None, TypeError), ("3.5", ValueError), (NAN, ValueError),
                        (0, ValueError), (-1, ValueError), ([3], TypeError)],
    "deepspeed strict count": [(2.5, ValueError), (True, TypeError), ("3.0", ValueError), (NAN, ValueError),
                               (INF, ValueError), (0, ValueError), (-1, ValueError), (None, TypeError)],
    "deepspeed floor": [(0.5, ValueError), (0.25, ValueError), (True, TypeError), (False, TypeError),
                        ("16.0", ValueError), (INF, ValueError), (NAN, ValueError), (0, ValueError),
                        (-2, ValueError), (2**128, ValueError), (None, TypeError)],
    "deepspeed flag": [("maybe", ValueError), (2, ValueError), (0.5, ValueError), (" true", ValueError),
                       (None, TypeError)],
    "flag": [("yes", TypeError), (1, TypeError), (None, TypeError)],
    "optional float64 floor": [("big", TypeError), (True, TypeError), (NAN, ValueError), (INF, ValueError),
                               (0.0, ValueError), (-1.0, ValueError), (2.0**30, ValueError)],   # above max 2**24
}

#: Every argument of every preset, by kind.
ARGUMENT_KINDS = {
    "torch": {"init_scale": "float32 scale", "growth_factor": "growth factor", "backoff_factor": "backoff factor",
              "growth_interval": "count"},
    "apex": {"init_scale": "float64 scale", "scale_window": "count", "min_loss_scale": "optional float64 floor",
             "max_loss_scale": "float64 scale"},
    "paddle": {"init_loss_scaling": "float32 scale", "incr_ratio": "float32 growth factor",
               "decr_ratio": "float32 backoff factor", "incr_every_n_steps": "count",
               "decr_every_n_nan_or_inf": "count"},
    "mindspore": {"init_loss_scale": "float32 scale >= 1", "scale_factor": "float32 growth factor",
                  "scale_window": "count"},
    "mindspore-fixed": {"loss_scale": "float32 scale >= 1", "drop_overflow_update": "flag"},
    "mindspore-amp": {"scale_value": "mindspore scale_value", "scale_factor": "mindspore int",
                      "scale_window": "mindspore int"},
    "keras": {"initial_scale": "float32 scale", "dynamic_growth_steps": "count"},
    "jmp": {"loss_scale": "float32 scale", "period": "count", "factor": "int factor",
            "min_loss_scale": "float32 scale"},
    "deepspeed": {"initial_scale_power": "deepspeed power", "loss_scale_window": "deepspeed strict count",
                  "hysteresis": "deepspeed count", "consecutive_hysteresis": "deepspeed flag",
                  "min_loss_scale": "deepspeed floor"},
}
SAME_AS = {"paddle-tutorial": "paddle", "paddle-2.2": "paddle", "mindspore-fixed-apply": "mindspore-fixed",
           "tf-keras2": "keras", "deepspeed-consecutive": "deepspeed", "jmp-jit": "jmp"}


def kinds_of(name: str) -> dict[str, str]:
    return ARGUMENT_KINDS[SAME_AS.get(name, name)]


def test_every_argument_of_every_preset_is_classified():
    for name in PRESETS:
        assert set(preset_arguments(name)) == set(kinds_of(name)), name


CASES = [(name, arg, value, err) for name in PRESETS for arg, kind in kinds_of(name).items()
         for value, err in KINDS[kind]]


@pytest.mark.parametrize("name,arg,value,err", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]!r}" for c in CASES])
def test_bad_argument_is_a_clear_error(name, arg, value, err):
    with pytest.raises(err) as e:
        preset(name, **{arg: value})
    message = str(e.value)
    assert arg in message and "must be" in message, message


@pytest.mark.parametrize("name", list(PRESETS))
def test_defaults_and_edges_are_accepted(name):
    """The framework's own defaults build, and so do the edges of each range."""
    good = {"float32 scale": 2.0**-149, "float32 scale >= 1": 1, "float64 scale": 1e300, "growth factor": 1.0001,
            "float32 growth factor": 1.0001, "backoff factor": 0.9999, "float32 backoff factor": 1e-30,
            "int factor": 1, "count": 1, "flag": False, "optional float64 floor": None,
            "mindspore scale_value": 1, "mindspore int": 1,
            "deepspeed power": 127, "deepspeed count": 1, "deepspeed strict count": 1, "deepspeed floor": 1,
            "deepspeed flag": False}
    preset(name)
    for arg, kind in kinds_of(name).items():
        kw = {arg: good[kind]}
        if name.startswith("apex") and arg == "init_scale":
            kw["max_loss_scale"] = 1e300
        preset(name, **kw)


def test_the_issues_examples():
    with pytest.raises(ValueError, match=r"initial_scale_power must be an int from 0 to 127.*got 1024"):
        scaling.preset("deepspeed", initial_scale_power=1024)
    with pytest.raises(TypeError, match=r"factor must be an int >= 1.*jmp declares factor: int.*got float 2.5"):
        scaling.preset("jmp", factor=2.5)
    assert scaling.describe("torch") == describe(lambda: preset("torch"))


def test_float32_rounding_is_named_in_the_message():
    with pytest.raises(ValueError, match=r"as a float32: 1\.0"):
        preset("paddle", decr_ratio=0.99999999)
    with pytest.raises(ValueError, match=r"float32 holds.*as a float32: inf"):
        preset("keras", initial_scale=1e39)


@pytest.mark.parametrize("bad,err,match", [
    ("pytorch", ValueError, "the presets are: torch, apex"),
    (3, TypeError, "preset name"),
    (None, TypeError, "preset name"),
    (lambda: 3, TypeError, "must return a rule"),
])
def test_describe_errors_name_what_it_takes(bad, err, match):
    with pytest.raises(err, match=match):
        describe(bad)


def test_describe_refuses_a_rule_object_and_a_bad_limit():
    with pytest.raises(TypeError, match=r"function that builds a fresh rule.*got TorchGradScalerRule"):
        describe(preset("torch"))            # a rule, not something that builds rules
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        describe("torch", limit=0)
    with pytest.raises(TypeError, match="limit"):
        describe("torch", limit=2.5)


#: What MindSpore 2.10.0 (the PyPI wheel, installed in a separate virtual environment; mindspore/amp.py and
#: mindspore/train/loss_scale_manager.py) did with each value: its checks run on the Python value as given
#: (``if scale_value < 1.0``), before the float32 conversion. True: accepted; an exception class: refused with it.
MINDSPORE_2_10 = {
    ("mindspore-amp", "scale_value"): [(0.99999999, ValueError), (0.5, ValueError), (1, True), (1.0, True),
                                       (np.float64(0.99999999), ValueError), (np.float32(2.0), TypeError),
                                       (np.int64(4), TypeError), (True, TypeError)],
    ("mindspore", "init_loss_scale"): [(0.99999999, ValueError), (0.5, ValueError), (1, True),
                                       (np.float32(2.0), True), (np.int64(4), True)],
    ("mindspore-fixed", "loss_scale"): [(0.99999999, ValueError), (0.5, ValueError), (1, True),
                                        (np.float32(2.0), True)],
}
MS_CASES = [(name, arg, value, outcome) for (name, arg), table in MINDSPORE_2_10.items() for value, outcome in table]


@pytest.mark.parametrize("name,arg,value,outcome", MS_CASES, ids=[f"{c[0]}-{c[2]!r}" for c in MS_CASES])
def test_mindspore_checks_the_value_as_given(name, arg, value, outcome):
    """Issue 28, item 16: 0.99999999 rounds to 1.0 in float32 but is below 1 as given, and MindSpore refuses it."""
    if outcome is True:
        assert preset(name, **{arg: value}).scale == float(np.float32(value))
    else:
        with pytest.raises(outcome, match=f"{arg} must be"):
            preset(name, **{arg: value})
