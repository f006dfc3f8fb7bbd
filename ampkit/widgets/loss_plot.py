"""The live loss plot of a training run (notebook 02, ``02_autocast_and_levels.ipynb``): a callback for
:func:`ampkit.train.train` that streams the run's loss points to a plot drawn in the browser (``js/lossplot.js``).

Each update sends only the points added since the last one (a message of a few hundred bytes: the losses as
Python's repr, and the first non-finite step, which the engine decides with
:func:`ampkit.widgets.precision.nonfinite_at`); at the end of the run the whole curve becomes the view's state, so
a saved notebook still shows it with no kernel, and the still picture beside it (for renderers without JavaScript)
is redrawn once. In a plain script nothing is shown.

>>> from ampkit.models import build_model; from ampkit.data import make_blobs; from ampkit.train import train
>>> plot = LiveLossPlot(every=2)
>>> train(build_model("mlp"), make_blobs(64), "O1", "bf16", steps=3, callback=plot).steps, plot.title
(3, 'O1 bf16: training loss, live')
>>> len(plot.losses.split()), plot.sent[0]["start"], plot.sent[1]["start"]
(3, 0, 1)
"""
from __future__ import annotations

import math
from typing import Any

import traitlets
from IPython import get_ipython
from IPython.display import display

from ampkit._util import check_int
from ampkit.dtypes import short_name
from ampkit.i18n import mark, tr
from ampkit.precision import level_label
from ampkit.train import History
from ampkit.widgets.front import FrontView
from ampkit.widgets.precision import nonfinite_at
from ampkit.widgets.style import DTYPE_COLOURS, dtype_colour, mark_nonfinite, new_figure, png_bytes

__all__ = ["LiveLossPlot", "loss_words"]


def loss_words(losses: list[float]) -> list[str]:
    """Each loss as Python's repr (``"nan"``, ``"inf"`` for the non-finite ones): what the page reads back exactly.

    >>> loss_words([1.5, float("nan")])
    ['1.5', 'nan']
    """
    return [repr(float(v)) for v in losses]


class LiveLossPlot(FrontView):
    """A loss-vs-step line in a notebook, drawn in the browser from the points the run streams to it.

    Use it as :func:`ampkit.train.train`'s ``callback``: it sends the new points every ``every`` steps and, at the
    end (``on_train_end``), the whole curve as its state; or call :meth:`update` with a
    :class:`~ampkit.train.History` yourself (and :meth:`on_train_end` once, to keep the curve in the saved
    notebook). Without a ``title`` the first update names the run (``"O2 fp16: training loss, live"``); without a
    ``colour`` the line takes the run's dtype colour (fp32's for O0). A run that turns inf/NaN is marked where
    :func:`ampkit.widgets.style.mark_nonfinite` marks it. ``reference`` is a loss curve drawn dashed behind the run.
    ``sent`` keeps the messages sent (what each update cost, in bytes: ``len(json.dumps(m))``).
    """

    _front = "lossplot"
    title = traitlets.Unicode("").tag(sync=True)
    dtype_key = traitlets.Unicode("fp32").tag(sync=True)     # the run's dtype: its colour is look.colours.dtype's
    colour = traitlets.Unicode("").tag(sync=True)            # an explicit colour (overrides the dtype's)
    reference = traitlets.Unicode("").tag(sync=True)         # the dashed reference curve (repr words)
    losses = traitlets.Unicode("").tag(sync=True)            # the whole curve, set when the run ends (saved state)
    bad = traitlets.Int(-1).tag(sync=True)                   # its first non-finite step (-1: none)

    def __init__(self, title: str | None = None, reference: list[float] | None = None,
                 colour: str | None = None, every: int = 1):
        self.every = check_int("every", every)
        self._auto_title = title is None
        self._auto_colour = colour is None
        self._words: list[str] = []        # the points sent so far
        self._drawn = -1                   # how many steps the page was sent
        self._history: History | None = None
        self._bad: int | None = None       # the first non-finite step sent
        self.sent: list[dict[str, Any]] = []
        super().__init__(title=title or tr("training loss"), colour=colour or "",
                         reference=" ".join(loss_words(reference)) if reference else "")
        self._handle = None
        if get_ipython() is not None:
            from ampkit.widgets import snapshot

            snapshot.register_still(self, self.still)
            self._handle = display(snapshot.display_bundle(self), raw=True, display_id=True)

    def _ipython_display_(self) -> None:
        if self._handle is None:
            super()._ipython_display_()

    def __call__(self, step: int, history: History) -> None:
        """:func:`ampkit.train.train`'s callback: send the new points on steps 0, ``every``, 2 ``every``..."""
        if step % self.every == 0:
            self.update(history)

    def on_train_end(self, history: History) -> None:
        """Called by :func:`ampkit.train.train` after the last step: send what is left, keep the whole curve."""
        if history.steps != self._drawn:
            self.update(history)
        self.losses = " ".join(self._words)
        self.bad = -1 if self._bad is None else self._bad
        if self._handle is not None:   # the still picture beside the view: the whole run
            from ampkit.widgets import snapshot

            self._handle.update(snapshot.display_bundle(self), raw=True)

    def update(self, history: History) -> None:
        """Send the points of ``history.losses`` the page does not have yet (all of them for a new run)."""
        if self._auto_title:
            self.title = tr("{run}: training loss, live", run=level_label(history.level, history.dtype))
        if self._auto_colour:
            self.dtype_key = "fp32" if history.level == "O0" else short_name(history.dtype)
        n = len(self._words)
        if history is self._history and history.steps >= n:   # the same run, grown: print only its new points
            start, new = n, loss_words(history.losses[n:])
        else:
            words = loss_words(history.losses)
            start = n if words[:n] == self._words else 0
            new = words[start:]
        if self._bad is None or start <= self._bad:
            self._bad = nonfinite_at(history.losses[start:])
            self._bad = None if self._bad is None else self._bad + start
        msg = {"type": "points", "start": start, "losses": " ".join(new), "bad": self._bad}
        del self._words[start:]
        self._words.extend(new)
        self._history = history
        self._drawn = history.steps
        self.sent.append(msg)
        self.send(msg)

    @property
    def points(self) -> list[float]:
        """The losses the page was sent, as numbers."""
        return [float(w) for w in self._words]

    def words(self) -> dict:
        return {"xlabel": tr("training step"), "ylabel": tr("loss (cross-entropy, nats)"),
                "run": tr("this run"), "reference": tr("reference"), "nonfinite": tr("inf/NaN from step {step}"),
                "waiting": tr("waiting for the first step…")}

    def still(self) -> bytes:
        """The curve as a PNG (renderers without JavaScript)."""
        return png_bytes(self.figure())

    def figure(self):
        """The curve as a kit figure (matplotlib, its own Agg canvas): the still picture's drawing."""
        fig = new_figure(7.0, 3.0)
        ax = fig.add_subplot()
        ys = [v if math.isfinite(v) else float("nan") for v in self.points]
        colour = self.colour or dtype_colour(self.dtype_key) or DTYPE_COLOURS["fp32"]
        ax.plot(range(len(ys)), ys, color=colour, lw=1.6, label="this run")
        if self.reference:
            ref = [float(w) for w in self.reference.split()]
            ax.plot(range(len(ref)), ref, color="grey", lw=1, ls="--", label="reference")
            ax.legend(loc="upper right", fontsize=9)
        ax.set(xlabel=mark("training step"), ylabel=mark("loss (cross-entropy, nats)"), title=self.title)
        mark_nonfinite(ax, self.points)
        return fig
