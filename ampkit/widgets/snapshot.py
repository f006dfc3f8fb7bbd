"""The still picture kept beside every view of the kit, for renderers that run no JavaScript (GitHub).

Used by every view in ``ampkit.widgets`` (every notebook that shows one). A view is drawn in the browser
(:class:`ampkit.widgets.front.FrontView`) from the state the engine sent: JupyterLab, Notebook 7 and Voilà draw it,
and a notebook opened with its saved state, or the static page ``python -m ampkit._nbexport`` writes, moves it with
no kernel. A renderer that runs no JavaScript (GitHub) or has no widget manager (nbconvert's export without the
widget state) cannot draw it, so :func:`display_bundle` publishes two representations of the same view:

    application/vnd.jupyter.widget-view+json   the view (the frontends above pick this one)
    image/png                                  a still picture of the state it was displayed in (what the
                                               others fall back to)

A view describes its still picture with :meth:`~ampkit.widgets.front.FrontView.still`, registered here by
:func:`register_still` when it is displayed: PNG bytes, or a tree of ipywidgets that is never displayed (boxes,
``HTML``, ``Image``). The picture lists the tree in order: each ``HTML`` becomes its text (tables as aligned
columns), each ``Image`` is pasted whole; a note on top says it is a still picture. Nothing here changes the view.

>>> import ipywidgets as W
>>> still = W.VBox([W.HTML("scale: 3"), W.HTML("<b>flushed</b>: 12 %")])
>>> lines = [line for kind, line in snapshot_items(still) if kind == "text"]
>>> lines
['scale: 3', 'flushed: 12 %']
>>> png = snapshot_png(still)
>>> png[:4] == b"\\x89PNG"
True
>>> sorted(display_bundle(still))
['application/vnd.jupyter.widget-view+json', 'image/png', 'text/plain']
"""
from __future__ import annotations

import base64
import importlib.util
import io
import re
import textwrap
import weakref
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import ipywidgets as W
from IPython.display import display as ipy_display  # already loaded by ipywidgets
from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

from ampkit.i18n import mark, tr

__all__ = ["snapshot_items", "snapshot_png", "display_bundle", "display", "register_still", "html_text", "NOTE"]

#: The line on top of every still picture.
NOTE = mark("Still picture of this widget's first state. Run the notebook to move its controls.")
#: the text form's first words (a picture's alt text in a static page, the book's among them)
LABEL = mark("[ampkit widget: run the notebook to use it]")
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_WIDTH = 720          # the picture's minimum width in pixels (text wraps to it)
_PAD = 8
_FONT_SIZE = 13
_TEXT = (36, 41, 47)
_GREY = (87, 96, 106)
_BLOCK = ("p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "table", "ul", "ol", "pre")
_STILL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_still(widget: W.Widget, still: Callable[[], bytes | W.Widget | None]) -> None:
    """Let ``still()`` stand for ``widget`` in its still picture: PNG bytes to paste, a widget tree to picture in its
    place (a view drawn in the browser describes its state with ipywidgets it never displays), or ``None`` to leave
    it out. :meth:`ampkit.widgets.front.FrontView._ipython_display_` registers the view's own ``still``."""
    _STILL[widget] = still


class _HTMLToText(HTMLParser):
    """Collects the visible text of an HTML fragment: blocks become lines, table rows become aligned columns."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._table: list[list[str]] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br":
            self._flush()
        elif tag == "sup":
            self._append("^")
        elif tag in _BLOCK:
            self._flush()

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._flush_table()
        elif tag in _BLOCK:
            self._flush()

    def handle_data(self, data):
        if not self._skip:
            self._append(data)

    def _append(self, data: str) -> None:
        (self._cell if self._cell is not None else self._line).append(data)

    def _flush(self) -> None:
        text = " ".join("".join(self._line).split())
        if text:
            self.lines.append(text)
        self._line = []

    def _flush_table(self) -> None:
        rows = [r for r in self._table if any(r)]
        self._table = []
        if not rows:
            return
        n = max(len(r) for r in rows)
        widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(n)]
        for r in rows:
            self.lines.append("  ".join(c.ljust(w) for c, w in zip(r + [""] * (n - len(r)), widths)).rstrip())

    def close(self) -> None:
        super().close()
        self._flush_table()
        self._flush()


def html_text(html: str) -> list[str]:
    """The visible lines of an HTML fragment (tags dropped, entities decoded, tables as aligned columns).

    >>> html_text("<table><tr><th>format</th><th>stored</th></tr><tr><td>fp16</td><td>0</td></tr></table>")
    ['format  stored', 'fp16    0']
    """
    parser = _HTMLToText()
    parser.feed(html or "")
    parser.close()
    return parser.lines


def snapshot_items(widget: W.Widget) -> list[tuple[str, str | bytes]]:
    """The still tree of ``widget`` in order as ``("text", line)`` and ``("image", PNG bytes)`` items: a registered
    widget is replaced by its ``still()``, a box by its children, an ``HTML`` or ``Label`` by its lines, an ``Image``
    by its bytes. Anything else (a slider, a button) has no still picture: ``TypeError``."""
    items: list[tuple[str, str | bytes]] = []

    def walk(w) -> None:
        if w in _STILL:
            still = _STILL[w]()
            if isinstance(still, W.Widget):
                walk(still)
            elif still:
                items.append(("image", still))
        elif isinstance(w, W.Box):
            for child in w.children:
                walk(child)
        elif isinstance(w, W.Image):
            if w.value:
                items.append(("image", bytes(w.value)))
        elif isinstance(w, (W.HTML, W.HTMLMath, W.Label)):
            items.extend(("text", line) for line in html_text(w.value))
        else:
            raise TypeError(f"a still picture is made of boxes, HTML, Label and Image widgets (and views that "
                            f"registered a still); got {type(w).__name__}")

    walk(widget)
    return items


def _font(monospace: bool = False) -> ImageFont.FreeTypeFont:
    # the DejaVu fonts matplotlib ships, found without importing matplotlib (a view without a figure, such as
    # notebook 00's slider, does not load it)
    spec = importlib.util.find_spec("matplotlib")  # matplotlib is a dependency: a package, so it has a location
    assert spec is not None and spec.submodule_search_locations is not None
    fonts = Path(spec.submodule_search_locations[0]) / "mpl-data" / "fonts" / "ttf"
    return ImageFont.truetype(str(fonts / ("DejaVuSansMono.ttf" if monospace else "DejaVuSans.ttf")), _FONT_SIZE)


def _cjk_font() -> ImageFont.FreeTypeFont | None:
    """The figures' CJK font (``figtext.cjk_font``) for Chinese lines of a still picture; None without one."""
    from matplotlib import font_manager

    from ampkit.widgets.figtext import cjk_font

    family = cjk_font()
    entry = next((f for f in font_manager.fontManager.ttflist if f.name == family and f.weight in (400, "normal")),
                 None) if family else None
    if entry is None:
        return None
    return ImageFont.truetype(entry.fname, _FONT_SIZE, index=getattr(entry, "index", 0) or 0)


def snapshot_png(widget: W.Widget) -> bytes:
    """A PNG of ``widget`` as :func:`snapshot_items` lists it: the note, then each line and image in order."""
    blocks: list[PILImage.Image | tuple[str, bool]] = [(tr(NOTE), True)]
    for kind, value in snapshot_items(widget):
        if kind == "image":
            assert isinstance(value, bytes)
            blocks.append(PILImage.open(io.BytesIO(value)).convert("RGBA"))
        else:
            assert isinstance(value, str)
            blocks.append((value, False))
    font, mono = _font(), _font(monospace=True)
    chinese = any(not isinstance(b, PILImage.Image) and _CJK.search(b[0]) for b in blocks)
    cjk = _cjk_font() if chinese else None
    width = max([_WIDTH] + [b.width + 2 * _PAD for b in blocks if isinstance(b, PILImage.Image)]
                + [round(mono.getlength(b[0])) + 2 * _PAD for b in blocks
                   if not isinstance(b, PILImage.Image) and "  " in b[0]])
    chars = max(20, (width - 2 * _PAD) // 8)
    lines: list[PILImage.Image | tuple[str, bool, bool]] = []
    for b in blocks:
        if isinstance(b, PILImage.Image):
            lines.append(b)
            continue
        text, note = b
        table_like = "  " in text  # aligned columns keep their spacing in a monospace font
        wide = bool(_CJK.search(text))   # a Chinese character is about two Latin ones wide
        for part in (textwrap.wrap(text, chars // 2 if wide else chars) if not table_like else [text]) or [""]:
            lines.append((part, note, table_like))
    line_h = _FONT_SIZE + 6
    height = 2 * _PAD + sum(b.height + _PAD if isinstance(b, PILImage.Image) else line_h for b in lines)
    canvas = PILImage.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(canvas)
    y = _PAD
    for line in lines:
        if isinstance(line, PILImage.Image):
            canvas.paste(line, (_PAD, y), line)
            y += line.height + _PAD
        else:
            text, note, table_like = line
            face = cjk if cjk is not None and _CJK.search(text) else mono if table_like else font
            draw.text((_PAD, y), text, fill=_GREY if note else _TEXT, font=face)
            y += line_h
    # 256 colours are plenty for a still of plots and text, and keep the stored notebook small (about 3x smaller)
    buf = io.BytesIO()
    canvas.quantize(colors=256, method=PILImage.Quantize.FASTOCTREE).save(buf, format="png", optimize=True)
    return buf.getvalue()


def display_bundle(widget: W.Widget) -> dict:
    """The display data for ``widget``: its view, a still PNG (base64, as Jupyter messages carry it) and a one-line
    text. Frontends that run the widget's JavaScript draw the view; nbconvert's export without the widget state and
    renderers that run no JavaScript show the PNG."""
    shown = widget._repr_mimebundle_()
    bundle = dict(shown[0] if isinstance(shown, tuple) else shown)   # anywidget's views return (data, metadata)
    bundle["image/png"] = base64.b64encode(snapshot_png(widget)).decode("ascii")
    bundle["text/plain"] = f"{tr(LABEL)} {tr(NOTE)}"
    return bundle


def display(widget: W.Widget) -> None:
    """Display ``widget`` with its still picture beside it (what :class:`~ampkit.widgets.front.FrontView` calls)."""
    ipy_display(display_bundle(widget), raw=True)
