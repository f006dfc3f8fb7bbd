"""ampkit: a Jupyter teaching kit that makes mixed-precision training visible.

The package serves the notebooks in ``notebooks/``:
00 start here (device, doctor) · 01 fp16 range (``formats``) · 02 autocast and O-levels (``precision``)
· 03 loss scaling (``scaling``) · 04 data sinking (``sinking``). Widgets live in ``ampkit.widgets`` and
are the only part that imports ipywidgets.
"""
from __future__ import annotations

from ampkit import device, formats
from ampkit.device import check_autocast_dtype, device_report, fast_dtype, pick_device
from ampkit.formats import resolve_format, round_trip

__version__ = "0.1.0"

__all__ = [
    "device",
    "formats",
    "pick_device",
    "device_report",
    "fast_dtype",
    "check_autocast_dtype",
    "resolve_format",
    "round_trip",
]
