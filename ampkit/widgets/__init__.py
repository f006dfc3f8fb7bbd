"""Thin ipywidgets views over ampkit's pure functions; the only part of ampkit that imports ipywidgets.

One module per notebook: ``start`` (00), ``formats`` and ``range_map`` (01), ``precision`` (02), ``scaling`` (03),
``sinking`` (04), ``amp_doctor`` (05), ``fp8`` and ``fp8_blocks`` (06), ``attention`` (07); ``style`` holds the
one look they share and ``train`` the live loss plot. Every widget is a class holding its controls as attributes
(``.slider``, ...) and its last computed state, so tests can set ``.value`` headlessly and check what it shows;
``.widget`` is what to display.

Names are imported lazily (PEP 562): ``from ampkit.widgets import RoundingSlider`` loads only ``start``, so a
notebook pays for matplotlib only when it uses a widget that plots.
"""
from __future__ import annotations

import importlib

_HOME = {
    "RoundingSlider": "start",
    "FloatExplorer": "formats",
    "RangeMap": "range_map",
    "OLevelPicker": "precision",
    "VisualLossScaler": "scaling",
    "ScalerReplay": "scaling",
    "SinkTimeline": "sinking",
    "AmpDoctor": "amp_doctor",
    "AmaxHistoryExplorer": "fp8",
    "BlockScalingExplorer": "fp8_blocks",
    "AttentionOverflowView": "attention",
}

__all__ = list(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"ampkit.widgets.{_HOME[name]}"), name)
    raise AttributeError(f"module 'ampkit.widgets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
