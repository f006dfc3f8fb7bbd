"""dtype names: long torch names (``torch.bfloat16``, ``"bfloat16"``) <-> the kit's short labels (``"bf16"``).

The short labels are what every table, legend, toggle and colour key of the kit shows: ``01_fp16_range.ipynb``
(the formats) and ``02_autocast_and_levels.ipynb`` (the per-layer dtype trace, the O-level picker). This is the
one map; the other direction (any name -> the canonical long name) is :func:`ampkit.formats.format_name`.

>>> short_name(torch.bfloat16), short_name("float16"), short_name("torch.float8_e4m3fn"), short_name("half")
('bf16', 'fp16', 'e4m3', 'fp16')
>>> short_name(torch.int64)
'int64'
"""
from __future__ import annotations

import torch

from ampkit.formats import format_name
from ampkit.i18n import tr

__all__ = ["SHORT_NAMES", "short_name"]

#: Long torch name -> the kit's short label, for the floating formats the kit names.
SHORT_NAMES: dict[str, str] = {
    "float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
}
_SHORT_LABELS = frozenset(SHORT_NAMES.values())


def short_name(dtype_or_name: torch.dtype | str) -> str:
    """The kit's short label for a dtype (``torch.float32`` -> ``"fp32"``), given as a torch dtype, its long name
    (``"bfloat16"``, ``"torch.bfloat16"``), a short label (returned as it is) or any alias
    :func:`ampkit.formats.resolve_format` accepts (``"half"``, ``"fp8"``).

    A torch dtype without a short label (``torch.int64``, ``torch.bool``) is named by its torch name (``"int64"``).
    Anything else is a ``ValueError`` naming the short labels; a non-string, non-dtype is a ``TypeError``.

    >>> short_name("bf16"), short_name("FP32 ")
    ('bf16', 'fp32')
    """
    if isinstance(dtype_or_name, torch.dtype):
        long = str(dtype_or_name).removeprefix("torch.")
        return SHORT_NAMES.get(long, long)
    if not isinstance(dtype_or_name, str):
        raise TypeError(f"short_name takes a torch dtype or its name (e.g. torch.bfloat16 or 'bfloat16'); "
                        f"got {type(dtype_or_name).__name__} {dtype_or_name!r}")
    key = dtype_or_name.strip().lower().removeprefix("torch.")
    if key in _SHORT_LABELS:
        return key
    if key in SHORT_NAMES:
        return SHORT_NAMES[key]
    try:
        long = format_name(key)
    except ValueError:
        raise ValueError(tr("unknown dtype name {name!r}; short names: {short} (long names: {long})",
                            name=dtype_or_name, short=", ".join(SHORT_NAMES.values()),
                            long=", ".join(SHORT_NAMES))) from None
    return SHORT_NAMES.get(long, long)
