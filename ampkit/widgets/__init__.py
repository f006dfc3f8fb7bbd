"""Thin ipywidgets views over ampkit's pure functions; the only part of ampkit that imports ipywidgets.

One module per widget family: ``start`` (notebook 00), and one per later notebook.
Every widget is a class holding its controls as attributes (``.slider``, ...) and its last computed
state, so tests can set ``.value`` headlessly and check what it shows; ``.widget`` is what to display.
"""
from __future__ import annotations

from ampkit.widgets.start import RoundingSlider

__all__ = ["RoundingSlider"]
