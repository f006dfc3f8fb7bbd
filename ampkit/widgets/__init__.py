"""The kit's views, drawn in the browser from what ampkit's engine computes; the only part of ampkit that imports
ipywidgets and anywidget.

Used in every notebook (00–08). Every view is a :class:`~ampkit.widgets.front.FrontView` (an anywidget): the engine
computes in Python, an ES module in ``js/`` (``js/kit.js`` + ``js/<name>.js``, no build step, nothing fetched) draws
it as SVG and HTML from the data the engine sent, in the one look and the kit's language. The page selects among
states the engine computed, or, where the input is free, runs a marked port of an engine rule that a browser test
checks against the engine (docs/architecture.md, "Ports"); the saved state
moves the view with no kernel, and a still picture beside it serves renderers that run no JavaScript. Each view holds
its state as attributes (``.value``, ``.slider``, ...), so tests set them headlessly and check what it shows; the
view is its own ``.widget``. A notebook imports its views and figure helpers from here.

==============  ====================================================================================================
module          notebook: what it holds (the module in ``js/`` that draws it)
==============  ====================================================================================================
``start``       00: :class:`RoundingSlider` (``rounding.js``), :func:`device_speed_figure`
``formats``     01: :class:`FloatExplorer` (one number in every format, bit by bit; ``floats.js``)
``range_map``   01: :class:`RangeMap` (the formats' ranges on one log2 axis; ``rangemap.js``)
``precision``   02: :class:`OLevelPicker` (O0–O3: dtypes per layer, memory; ``olevel.js``)
``loss_plot``   02: :class:`LiveLossPlot` (the live loss plot of a training run, points streamed; ``lossplot.js``)
``scaling``     03: :class:`VisualLossScaler` (``scaler.js``)
``replay``      03: :class:`ScalerReplay` (a dynamic scaler replayed, every preset overlaid; ``replay.js``),
                :data:`PRESET_STYLES`
``sinking``     04: :func:`gantt_figure`, :func:`measured_figure`; ``sink_timeline``: :class:`SinkTimeline` (the
                simulated timeline of a sink setting; ``sink.js``)
``amp_doctor``  05: :class:`AmpDoctor` (``amp_doctor.js``), :func:`headroom_figure`, :func:`scales_figure`
``fp8``         06: :class:`AmaxHistoryExplorer` (delayed scaling's amax history; ``amax.js``)
``fp8_blocks``  06: :class:`BlockScalingExplorer` (MX blocks and fp32 tiles; ``blocks.js``)
``attention``   07: :class:`AttentionOverflowView` (attention logits that overflow fp16; ``attention.js``)
``fp4_rules``   10: :class:`ScaleRuleExplorer` (one MXFP4 block under each scale rule; ``fp4rules.js``)
``style``       every notebook: the one look (:func:`new_figure`, :func:`show`, :func:`dtype_colour`,
                :func:`mark_nonfinite`, :data:`BAND_COLOURS`, :data:`DTYPE_COLOURS`, ...), read by the figures and,
                as each view's ``look``, by the pages
``front``       :class:`~ampkit.widgets.front.FrontView`, the base of every view (its ``look``, ``text`` and ES
                module, its still picture)
``snapshot``    the still picture kept beside each view (for GitHub); ``figtext``: figure text in the kit's language
==============  ====================================================================================================

>>> from ampkit.widgets import RangeMap
>>> RangeMap(("fp16", "bf16"), value=1e-6).marker_x    # log2(1e-6)
-19.931568569324174
"""
from __future__ import annotations

from ampkit.widgets.amp_doctor import AmpDoctor, headroom_figure, scales_figure
from ampkit.widgets.attention import AttentionOverflowView
from ampkit.widgets.formats import FloatExplorer
from ampkit.widgets.fp4_rules import ScaleRuleExplorer
from ampkit.widgets.fp8 import AmaxHistoryExplorer
from ampkit.widgets.fp8_blocks import BlockScalingExplorer
from ampkit.widgets.loss_plot import LiveLossPlot
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

__all__ = [
    # the views, one or two per notebook
    "RoundingSlider", "FloatExplorer", "RangeMap", "OLevelPicker", "VisualLossScaler", "ScalerReplay",
    "SinkTimeline", "AmpDoctor", "AmaxHistoryExplorer", "BlockScalingExplorer", "AttentionOverflowView",
    "ScaleRuleExplorer",
    "LiveLossPlot",
    # the notebooks' figures
    "device_speed_figure", "gantt_figure", "measured_figure", "headroom_figure", "scales_figure", "PRESET_STYLES",
    # the one look
    "show", "new_figure", "dtype_colour", "mark_nonfinite", "BAND_COLOURS", "BAND_LABELS", "DTYPE_COLOURS",
    "STATUS_COLOURS",
]
