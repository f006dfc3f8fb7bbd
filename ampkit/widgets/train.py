"""The live loss plot of a training run (notebook 02, ``02_autocast_and_levels.ipynb``): a callback for
:func:`ampkit.train.train` that redraws one loss-vs-step figure in place as the run goes.

The figure is a :func:`ampkit.widgets.style.new_figure` (its own Agg canvas: the kernel's matplotlib backend is
never touched) shown as a PNG through an IPython display handle; in a plain script nothing is shown.

>>> from ampkit.models import build_model; from ampkit.data import make_blobs; from ampkit.train import train
>>> plot = LiveLossPlot(every=2)
>>> train(build_model("mlp"), make_blobs(64), "O1", "bf16", steps=3, callback=plot).steps, plot.ax.get_title()
(3, 'O1 bf16: training loss, live')
"""
from __future__ import annotations

import math

from IPython import get_ipython
from IPython.display import Image, display

from ampkit._util import check_int
from ampkit.i18n import mark
from ampkit.precision import level_label
from ampkit.train import History
from ampkit.widgets.style import DTYPE_COLOURS, dtype_colour, mark_nonfinite, new_figure, png_bytes

__all__ = ["LiveLossPlot"]


class LiveLossPlot:
    """A loss-vs-step line in a notebook, drawn once and redrawn in place.

    Use it as :func:`ampkit.train.train`'s ``callback``: it redraws every ``every`` steps and once more at the end
    (``on_train_end``); or call :meth:`update` with a :class:`~ampkit.train.History` yourself. Without a ``title``
    the first update names the run (``"O2 fp16: training loss, live"``); without a ``colour`` the line takes the
    run's dtype colour (fp32's for O0). A run that turns inf/NaN is marked
    (:func:`ampkit.widgets.style.mark_nonfinite`). ``reference`` is a loss curve drawn dashed behind the run.
    """

    def __init__(self, title: str | None = None, reference: list[float] | None = None,
                 colour: str | None = None, every: int = 1):
        self.title = title
        self.every = check_int("every", every)
        self.reference = list(reference) if reference else None
        self._auto_colour = colour is None
        self._drawn = -1  # how many steps the figure shows
        self.fig = new_figure(7.0, 3.0)
        self.ax = self.fig.add_subplot()
        (self.line,) = self.ax.plot([], [], color=colour or DTYPE_COLOURS["fp32"], lw=1.6, label="this run")
        if self.reference:
            self.ax.plot(range(len(self.reference)), self.reference, color="grey", lw=1, ls="--", label="reference")
            self.ax.legend(loc="upper right", fontsize=9)
        self.ax.set(xlabel=mark("training step"), ylabel=mark("loss (cross-entropy, nats)"),
                    title=title or mark("training loss"))
        self._handle = display(self._image(), display_id=True) if get_ipython() is not None else None

    def _image(self) -> Image:
        return Image(data=png_bytes(self.fig), format="png")

    def __call__(self, step: int, history: History) -> None:
        """:func:`ampkit.train.train`'s callback: redraw on steps 0, ``every``, 2 ``every``..."""
        if step % self.every == 0:
            self.update(history)

    def on_train_end(self, history: History) -> None:
        """Called by :func:`ampkit.train.train` after the last step: draw the whole run (if not drawn yet)."""
        if history.steps != self._drawn:
            self.update(history)

    def update(self, history: History) -> None:
        """Redraw the line from ``history.losses`` (and the display, in a notebook)."""
        if self.title is None:
            self.ax.set_title(f"{level_label(history.level, history.dtype)}: training loss, live")
        if self._auto_colour:
            self.line.set_color(dtype_colour("fp32" if history.level == "O0" else history.dtype))
        ys = [v if math.isfinite(v) else float("nan") for v in history.losses]
        self.line.set_data(range(len(ys)), ys)
        for artist in list(self.ax.texts) + [ln for ln in self.ax.lines if ln.get_marker() == "X"]:
            artist.remove()  # the previous non-finite mark
        self.ax.relim()
        self.ax.autoscale_view()
        mark_nonfinite(self.ax, history.losses)
        self._drawn = history.steps
        if self._handle is not None:
            self._handle.update(self._image())
