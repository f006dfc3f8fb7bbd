"""Measure what DeepSpeed's fp16 config accepts, value by value: the table pinned in
tests/test_scaling_deepspeed_config.py (MEASURED there is this script's output).

Not a test (pytest only imports it, looking for doctests: it has none) and not run by the kit. DeepSpeed itself
needs torch and builds ops on install, so this script rebuilds ``DeepSpeedFP16Config`` from its source file at a
tag on the same pydantic ``BaseModel`` and ``ConfigDict`` as ``DeepSpeedConfigModel``
(``deepspeed/runtime/config_utils.py``: the model config, and ``__init__`` dropping "auto" values; the
deprecated-field handling, which these fields do not use, is left out). In a separate virtual environment (not the
kit's):

    git -C <a DeepSpeed clone> show v0.19.5:deepspeed/runtime/precision_config.py > /tmp/precision_config.py
    python3 -m venv /tmp/dsenv && /tmp/dsenv/bin/pip install pydantic==2.14.4 numpy
    /tmp/dsenv/bin/python tests/_measure_deepspeed_config.py /tmp/precision_config.py

It prints ``MEASURED = {field: {value expression: what DeepSpeed stores, or None where it refuses}}``, each
field set alone with ``enabled=True`` (dynamic loss scaling: ``loss_scale`` 0).
"""
from __future__ import annotations

import math  # noqa: F401  (used by the value expressions)
import re
import sys
from decimal import Decimal  # noqa: F401
from fractions import Fraction  # noqa: F401

import numpy as np  # noqa: F401

INT_VALUES = [
    "16", "16.0", "16.5", "0.25", "True", "False", "'16'", "'16.0'", "' 16 '", "'1_6'", "'+16'", "'0x10'", "'1e2'",
    "'16.'", "'abc'", "'auto'", "b'16'", "Decimal('16.0')", "Decimal('16.5')", "Fraction(16)", "Fraction(33, 2)",
    "np.int64(16)", "np.float32(16)", "np.float64(16.5)", "np.True_", "math.inf", "math.nan", "2.0**63", "-1", "0",
    "1", "None", "[16]",
]
BOOL_VALUES = [
    "True", "False", "0", "1", "2", "0.0", "1.0", "1.5", "'true'", "'TRUE'", "'yes'", "'on'", "'1'", "'0'", "'off'",
    "'f'", "'n'", "'t'", "'y'", "'no'", "'false'", "' true '", "'maybe'", "'auto'", "b'true'", "np.True_",
    "np.int64(1)", "None",
]
FIELDS = ["initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"]


def load(path: str):
    """``DeepSpeedFP16Config`` from ``path`` on DeepSpeedConfigModel's pydantic set-up (imported here: pytest's
    doctest collection imports this module, and the kit's environment has no pydantic)."""
    from pydantic import BaseModel, ConfigDict

    class DeepSpeedConfigModel(BaseModel):
        """deepspeed/runtime/config_utils.py DeepSpeedConfigModel (v0.19.5): its model_config, "auto" dropped."""

        def __init__(self, strict=False, **data):
            if not strict:
                data = {k: v for k, v in data.items() if (v != "auto" or k == "replace_method")}
            super().__init__(**data)

        model_config = ConfigDict(validate_default=True, validate_assignment=True, use_enum_values=True,
                                  populate_by_name=True, extra="forbid", arbitrary_types_allowed=True,
                                  protected_namespaces=())

    source = open(path).read().replace("from deepspeed.runtime.config_utils import DeepSpeedConfigModel\n", "")
    source = re.sub(r"from \.fp16\.loss_scaler import \([^)]*\)\n",
                    "INITIAL_LOSS_SCALE, SCALE_WINDOW, DELAYED_SHIFT, CONSECUTIVE_HYSTERESIS, MIN_LOSS_SCALE = "
                    "'init_scale', 'scale_window', 'delayed_shift', 'consecutive_hysteresis', 'min_scale'\n", source)
    namespace = {"DeepSpeedConfigModel": DeepSpeedConfigModel}
    exec(compile(source, path, "exec"), namespace)
    return namespace["DeepSpeedFP16Config"]


def stored(config, field: str, expression: str):
    try:
        return getattr(config(enabled=True, **{field: eval(expression)}), field)
    except Exception:       # pydantic's ValidationError, or what a validator raised
        return None


def main() -> None:
    import pydantic

    fp16 = load(sys.argv[1])
    print(f"# pydantic {pydantic.VERSION}, {sys.argv[1]}")
    print("MEASURED = {")
    for field, values in [(f, INT_VALUES) for f in FIELDS] + [("consecutive_hysteresis", BOOL_VALUES)]:
        print(f"    {field!r}: {{")
        line = " " * 7
        for expression in values:
            entry = f" {expression!r}: {stored(fp16, field, expression)!r},"
            if len(line) + len(entry) > 116:
                print(line)
                line = " " * 7
            line += entry
        print(line)
        print("    },")
    print("}")


if __name__ == "__main__":
    main()
