"""Views drawn in the browser: :class:`FrontView`, the base of every view of the kit (the twelve in
:mod:`ampkit.widgets`, notebooks 00–07), an anywidget.

A front view is an ``anywidget.AnyWidget``: an ES module in ``ampkit/widgets/js/`` draws it in the browser (no build
step, nothing fetched from outside the machine) from small data the Python engine computed and sent as traits.
The engine stays the truth: the module selects among states the engine computed, or, where the input is free (a
typed number, a slider grid of millions of settings), runs a port of an engine rule, marked as a copy on both sides
and checked against the engine in a browser test on random inputs (docs/architecture.md, "Ports";
``tests/test_js_ports.py``). Python's printing (:file:`js/kit.js` ``pyRepr``, ``pyG``, ...) is checked in
``tests/browser/test_front_arithmetic_browser.py``.

Every front view carries three shared traits: ``look`` (the kit's one look, :func:`look`, read from
:mod:`ampkit.widgets.style` — the colours the matplotlib figures use), ``text`` (the view's words in the kit's
language, through :func:`ampkit.i18n.tr`) and its own state. Because the module and the state travel with the
widget, a notebook saved with its views' state moves them without a kernel; the still picture beside it
(:mod:`ampkit.widgets.snapshot`) stays for renderers that run no JavaScript.

>>> sorted(look()["colours"])
['band', 'dtype', 'status', 'verdict']
>>> esm("rounding").count("export default")
1
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import traitlets

from ampkit.formats import FormatInfo, info
from ampkit.formats.registry import cast
from ampkit.widgets.style import BAND_COLOURS, DTYPE_COLOURS, STATUS_COLOURS

__all__ = ["FrontView", "Control", "look", "esm", "format_limits", "JS_DIR", "VERDICT_COLOURS"]

#: Where the views' ES modules live (shipped inside the package).
JS_DIR = Path(__file__).with_name("js")
#: A rounding verdict's colour (ampkit.formats.verdict's words), from the kit's status colours.
VERDICT_COLOURS = {"exact": STATUS_COLOURS["good"], "rounded": STATUS_COLOURS["neutral"],
                   "flushed to zero": STATUS_COLOURS["bad"], "overflow to inf": STATUS_COLOURS["bad"],
                   "overflow to nan": STATUS_COLOURS["bad"], "saturated to max": STATUS_COLOURS["warn"],
                   "nan": "#8250df", "inf": "#8250df"}
_CSS = """
.ampkit-front { font-size: var(--ampkit-font-px); color: #24292f; }
.ampkit-front .ampkit-control { display: flex; align-items: center; gap: 0.6em; }
.ampkit-front .ampkit-range { width: 520px; max-width: 70vw; }
.ampkit-front table { border-collapse: collapse; margin-top: 0.4em; }
.ampkit-front th, .ampkit-front td { padding: 0.15em 0.9em 0.15em 0; text-align: left; }
.ampkit-front th { border-bottom: 1px solid #d0d7de; }
"""


def look() -> dict[str, Any]:
    """The kit's one look as the front ends read it: the same colours as the Python figures, a projector font."""
    return {"font_px": 14, "colours": {"band": dict(BAND_COLOURS), "dtype": dict(DTYPE_COLOURS),
                                       "status": dict(STATUS_COLOURS), "verdict": dict(VERDICT_COLOURS)}}


def format_limits(fmt: str) -> dict[str, Any]:
    """What ``js/kit.js``'s ``roundTo`` needs of a format, read from the engine (:func:`ampkit.formats.info`).

    >>> lim = format_limits("fp16")
    >>> lim["max"], lim["overflow_threshold"], lim["overflows_to"]
    (65504.0, 65520.0, 'inf')
    """
    fi = info(fmt)
    return {"name": fi.name, "mantissa_bits": fi.mantissa_bits, "emin": fi.emin, "max": fi.max,
            "overflow_threshold": fi.overflow_threshold, "overflow_tie_up": fi.overflow_tie_up,
            "overflows_to": fi.overflows_to, "via_float32": _via_float32(fi)}


def _via_float32(fi: FormatInfo) -> bool:
    """Whether torch casts a float64 to ``fi`` through float32 (two roundings; c10's ``Half``, ``BFloat16`` and
    ``Float8_e4m3fn``/``Float8_e5m2`` are built from a ``float``), read from torch where a double rounding shows: the
    float64 just inside a rounding line rounds onto the line in float32 (a tie), and then past it (ties to even) —
    only if the cast goes through float32. Two lines, one rule: the overflow line (just below the overflow
    threshold, the cast gives more than ``max``) and the flush line (just above half the smallest subnormal, the
    cast gives 0); a saturating cast (e4m3fn) hides it at the overflow line, so the flush line tells.

    >>> [_via_float32(info(f)) for f in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp32")]
    [True, True, True, True, False]
    """
    if fi.bits >= 32:
        return False
    below = cast(math.nextafter(fi.overflow_threshold, 0.0), fi.dtype)
    above = cast(math.nextafter(fi.flush_threshold, math.inf), fi.dtype)
    return not math.isfinite(below) or below != fi.max or above == 0.0


@functools.cache
def esm(name: str) -> str:
    """The ES module of view ``name``: ``js/kit.js`` (the shared helpers) followed by ``js/<name>.js``."""
    path = JS_DIR / f"{name}.js"
    if not path.is_file():
        views = sorted(p.stem for p in JS_DIR.glob("*.js") if p.stem != "kit")
        raise ValueError(f"no front end named {name!r}; the views' modules: {', '.join(views)}")
    return (JS_DIR / "kit.js").read_text(encoding="utf-8") + "\n" + path.read_text(encoding="utf-8")


class FrontView(anywidget.AnyWidget):
    """Base of the views drawn in the browser. A subclass sets ``_front`` (its module's name in ``js/``), builds its
    ``text`` with :meth:`words` and describes its still picture in :meth:`still`; it is its own ``widget``."""

    _front = ""
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    look = traitlets.Dict().tag(sync=True)
    text = traitlets.Dict().tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(_esm=esm(self._front), look=look(), text=self.words(), **kwargs)
        self.on_msg(self._answer_hello)

    def _answer_hello(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """The page's ``{"event": "hello"}`` (``js/kit.js`` ``kernelPresence``): answer ``{"event": "here"}``, so the
        page knows this view's Python object is behind it, then :meth:`hello`. A page restored from a saved notebook
        gets no answer and says that a request needing computation wants the notebook run."""
        if isinstance(content, dict) and content.get("event") == "hello":
            self.send({"event": "here"})
            self.hello()

    def hello(self) -> None:
        """What a view sends a page that just said hello, after "here" (nothing by default; overridden)."""

    def words(self) -> dict[str, Any]:
        """The view's words in the kit's language (overridden by each view)."""
        return {}

    @property
    def widget(self) -> FrontView:
        """What to display: the view itself (every view answers ``.widget``, as the notebooks and tests use it)."""
        return self

    def still(self) -> ipywidgets.Widget | bytes | None:
        """What the still picture shows of the view's current state, for renderers without JavaScript: a widget
        tree (never displayed; :mod:`ampkit.widgets.snapshot` pictures it), PNG bytes, or ``None``."""
        return None

    def _ipython_display_(self) -> None:
        from ampkit.widgets import snapshot

        snapshot.register_still(self, self.still)
        snapshot.display(self)


class Control:
    """One control of a view as the notebooks knew it when it was an ipywidget (``view.slider.value = "O2"``): its
    ``value`` reads and sets the view's trait ``trait``; ``attrs`` become attributes (``options``, ``min``, ...).

    >>> class V:
    ...     level = "O0"
    >>> v = V(); c = Control(v, "level", options=["O0", "O1"]); c.value = "O1"
    >>> v.level, c.options
    ('O1', ['O0', 'O1'])
    """

    def __init__(self, view: Any, trait: str, **attrs: Any) -> None:
        self._view, self._trait = view, trait
        for name, value in attrs.items():
            setattr(self, name, value)

    @property
    def value(self) -> Any:
        return getattr(self._view, self._trait)

    @value.setter
    def value(self, value: Any) -> None:
        setattr(self._view, self._trait, value)
