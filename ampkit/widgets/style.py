"""One look for every figure and table in the kit: format-band colours, dtype colours, figure size and dpi.

Used by every notebook's figures and by every view in ``ampkit.widgets`` (their colours and still pictures).
Figures are built as ``matplotlib.figure.Figure`` objects with an Agg canvas of their own, so drawing one never
touches pyplot or the kernel's backend (inline plots keep working after any ampkit import).

The format bands are the four things a number can become when it is stored in a low-precision format:

    flushed    |x| below half the smallest subnormal: rounds to zero (information lost)
    subnormal  between that and the smallest normal: kept, with fewer significant bits
    normal     the format's full precision
    overflow   above the largest finite value: inf (fp16, bf16, e5m2) or NaN / saturation (e4m3)

>>> sorted(BAND_COLOURS)
['flushed', 'normal', 'overflow', 'subnormal']
>>> fig = new_figure(6, 3)
>>> png_bytes(fig)[:4] == b"\\x89PNG"
True

The views draw themselves in the browser (:mod:`ampkit.widgets.front`: each reads these colours as its ``look``);
the figures here are the notebooks' own figures and the still pictures kept beside each view for renderers that run
no JavaScript (:mod:`ampkit.widgets.snapshot`).
"""
from __future__ import annotations

import io
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ampkit.dtypes import short_name
from ampkit.i18n import Word
from ampkit.widgets.figtext import localize

__all__ = ["BAND_COLOURS", "BAND_LABELS", "DTYPE_COLOURS", "STATUS_COLOURS", "DPI", "new_figure", "png_bytes",
           "KitFigure", "show", "mark_nonfinite", "dtype_colour"]

#: The format bands, the same colours in every notebook and widget (colour-blind-safe order: grey, amber, green, red).
BAND_COLOURS = {"flushed": "#8c959f", "subnormal": "#d4a72c", "normal": "#2da44e", "overflow": "#cf222e"}
#: (Words: a notebook's f"fp16: {BAND_LABELS[band]}" legend is in the kit's language; they equal their English)
BAND_LABELS = {"flushed": Word("flushed to zero"), "subnormal": Word("subnormal (fewer bits)"),
               "normal": Word("normal"), "overflow": Word("overflow (inf/NaN)")}
#: One colour per dtype, used for lines and table cells that name a dtype.
DTYPE_COLOURS = {"fp32": "#0969da", "bf16": "#8250df", "fp16": "#bf3989", "fp8": "#bc4c00",
                 "e4m3": "#bc4c00", "e5m2": "#953800"}
#: Verdict colours for text (tables, captions).
STATUS_COLOURS = {"good": "#1a7f37", "neutral": "#57606a", "bad": "#cf222e", "warn": "#bc4c00"}
#: Figure resolution: readable on a projector and a laptop alike.
DPI = 100

def dtype_colour(name: str) -> str:
    """The kit's colour for a dtype given by short or long name (``"bf16"``, ``"bfloat16"``, ``torch.bfloat16``).

    >>> dtype_colour("bfloat16") == dtype_colour("bf16")
    True
    """
    try:
        key = short_name(name)
    except (TypeError, ValueError):  # not a dtype name: the neutral colour
        key = str(name)
    return DTYPE_COLOURS.get(key, "#57606a")


class KitFigure(Figure):
    """A ``Figure`` whose text is shown in the kit's language (``ampkit.widgets.figtext``): translated at the start
    of every draw, so the code that builds it stays in English."""

    def draw(self, renderer):
        localize(self)
        super().draw(renderer)


def new_figure(width: float = 7.0, height: float = 3.2, dpi: int = DPI, **kwargs) -> Figure:
    """A ``Figure`` with an Agg canvas of its own (no pyplot), constrained layout, the kit's dpi and font size."""
    kwargs.setdefault("layout", "constrained")
    fig = KitFigure(figsize=(width, height), dpi=dpi, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure, dpi: int | None = None) -> bytes:
    """Render ``fig`` to PNG bytes with its own Agg canvas."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi)
    return buf.getvalue()


def show(fig: Figure) -> None:
    """Display ``fig`` as a PNG in the notebook (works under any matplotlib backend), else save nothing."""
    from IPython.display import Image, display

    display(Image(data=png_bytes(fig), format="png"))


def mark_nonfinite(ax, ys, x=None, label: str = "", colour: str | None = None) -> int | None:
    """Mark where a curve stops being finite: a red ✕ at the last finite point and a note, so a run that turned
    inf/NaN is visible even though matplotlib draws nothing for NaN. Returns the first non-finite index or None.
    """
    ys = list(ys)
    xs = list(range(len(ys))) if x is None else list(x)
    bad = next((i for i, y in enumerate(ys) if not math.isfinite(y)), None)
    if bad is None:
        return None
    finite = [y for y in ys[:bad] if math.isfinite(y)]
    y_at = finite[-1] if finite else 0.0
    if not finite:  # nothing finite at all: put the mark on the axis so it is still seen
        lo, hi = ax.get_ylim()
        y_at = lo + 0.5 * (hi - lo)
    ax.plot([xs[bad]], [y_at], marker="X", ms=10, color=colour or STATUS_COLOURS["bad"], zorder=5, ls="none")
    ax.annotate(f"{label}: inf/NaN from step {xs[bad]}" if label else f"inf/NaN from step {xs[bad]}", (xs[bad], y_at),
                textcoords="offset points", xytext=(6, 6), fontsize=9, color=colour or STATUS_COLOURS["bad"])
    return bad
