"""Thin ipywidgets views over ampkit's pure functions; the only part of ampkit that imports ipywidgets.

Used in every notebook (00–08). Every view is a class holding its controls as attributes (``.slider``, ...) and its
last computed state, so tests can set ``.value`` headlessly and check what it shows; ``.widget`` is what to display.
Each derives from :class:`WidgetView` (its picture drawn in the kernel) or, once moved to the browser, from
:class:`~ampkit.widgets.front.FrontView` (drawn by an ES module from data the engine sent). A notebook imports its
views and figure helpers from here.

==============  ====================================================================================================
module          notebook: what it holds
==============  ====================================================================================================
``start``       00: :class:`RoundingSlider`, :func:`device_speed_figure`
``formats``     01: :class:`FloatExplorer` (one number in every format, bit by bit)
``range_map``   01: :class:`RangeMap` (the formats' ranges on one log2 axis)
``precision``   02: :class:`OLevelPicker` (O0–O3: dtypes per layer, memory)
``train``       02: :class:`LiveLossPlot` (the live loss plot of a training run)
``scaling``     03: :class:`VisualLossScaler`
``replay``      03: :class:`ScalerReplay` (a dynamic scaler replayed, every preset overlaid), :data:`PRESET_STYLES`
``sinking``     04: :func:`gantt_figure`, :func:`measured_figure`; ``sink_timeline``: :class:`SinkTimeline` (the
                simulated timeline of a sink setting, drawn in the browser)
``amp_doctor``  05: :class:`AmpDoctor`, :func:`headroom_figure`, :func:`scales_figure`
``fp8``         06: :class:`AmaxHistoryExplorer` (delayed scaling's amax history)
``fp8_blocks``  06: :class:`BlockScalingExplorer` (MX blocks and fp32 tiles)
``attention``   07: :class:`AttentionOverflowView` (attention logits that overflow fp16)
``style``       every notebook: the one look (:func:`new_figure`, :func:`show`, :func:`dtype_colour`,
                :func:`mark_nonfinite`, :data:`BAND_COLOURS`, :data:`DTYPE_COLOURS`, ...)
``view``        :class:`WidgetView`, the base of the views whose picture the kernel draws
``front``       :class:`~ampkit.widgets.front.FrontView`, the base of the views drawn in the browser (an
                anywidget: an ES module in ``js/``, the one look, words in the kit's language; ``RoundingSlider``
                first)
``snapshot``    the still picture shown beside each live view; ``figtext``: figure text in the kit's language
==============  ====================================================================================================

>>> from ampkit.widgets import RangeMap
>>> RangeMap(("fp16", "bf16"), value=1e-6).marker_x    # log2(1e-6)
-19.931568569324174
"""
from __future__ import annotations

from ampkit.widgets.amp_doctor import AmpDoctor, headroom_figure, scales_figure
from ampkit.widgets.attention import AttentionOverflowView
from ampkit.widgets.formats import FloatExplorer
from ampkit.widgets.fp8 import AmaxHistoryExplorer
from ampkit.widgets.fp8_blocks import BlockScalingExplorer
from ampkit.widgets.precision import OLevelPicker
from ampkit.widgets.range_map import RangeMap
from ampkit.widgets.replay import PRESET_STYLES, ScalerReplay
from ampkit.widgets.scaling import VisualLossScaler
from ampkit.widgets.sink_timeline import SinkTimeline
from ampkit.widgets.sinking import gantt_figure, measured_figure
from ampkit.widgets.start import RoundingSlider, device_speed_figure
from ampkit.widgets.style import (
    BAND_COLOURS,
    BAND_LABELS,
    DTYPE_COLOURS,
    STATUS_COLOURS,
    dtype_colour,
    mark_nonfinite,
    new_figure,
    show,
)
from ampkit.widgets.train import LiveLossPlot
from ampkit.widgets.view import WidgetView

__all__ = [
    # the views, one or two per notebook
    "RoundingSlider", "FloatExplorer", "RangeMap", "OLevelPicker", "VisualLossScaler", "ScalerReplay",
    "SinkTimeline", "AmpDoctor", "AmaxHistoryExplorer", "BlockScalingExplorer", "AttentionOverflowView",
    "LiveLossPlot", "WidgetView",
    # the notebooks' figures
    "device_speed_figure", "gantt_figure", "measured_figure", "headroom_figure", "scales_figure", "PRESET_STYLES",
    # the one look
    "show", "new_figure", "dtype_colour", "mark_nonfinite", "BAND_COLOURS", "BAND_LABELS", "DTYPE_COLOURS",
    "STATUS_COLOURS",
]
