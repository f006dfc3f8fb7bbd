"""The base of the kit's views whose picture the kernel draws: :class:`WidgetView` (exported by
:mod:`ampkit.widgets.style` too).

The views in :mod:`ampkit.widgets` that the kernel still draws (``FloatExplorer``, ``OLevelPicker``,
``ScalerReplay``, ``SinkTimeline``, ``AmpDoctor``, ``AmaxHistoryExplorer``, ``BlockScalingExplorer``,
``AttentionOverflowView``) derive from it, so each displays the same way: its live ``widget`` box with a still
picture beside it (:func:`ampkit.widgets.snapshot.display`) for readers without a kernel. The views drawn in the
browser (``RoundingSlider``, ``RangeMap``, ``VisualLossScaler``) derive from :class:`ampkit.widgets.front.FrontView`
and display the same way.
No matplotlib here (the views that plot import it). Used in every notebook that shows a widget (00–07; 08 has
none).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the annotation
    import ipywidgets

__all__ = ["WidgetView"]


class WidgetView:
    """Base of the kit's widget views: ``_update()`` redraws on any control change (``_on_change``, the observer),
    and the view displays as its ``widget`` box (an ipywidgets container built by the subclass) with a still
    picture of its first state beside it (:mod:`ampkit.widgets.snapshot`) for readers without a kernel."""

    widget: ipywidgets.Box

    def _update(self) -> None:
        raise NotImplementedError

    def _on_change(self, change: dict) -> None:
        self._update()

    def _ipython_display_(self) -> None:
        from ampkit.widgets import snapshot  # ipywidgets and PIL: loaded when a view is shown

        snapshot.display(self.widget)
