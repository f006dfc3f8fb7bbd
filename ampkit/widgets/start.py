"""Notebook 00's views: a log slider whose value is shown as fp32, bf16 and fp16 store it, and the device figure.

A learner moves the slider to check that widgets render before the workshop, and gets a first look at rounding,
underflow to zero (fp16: below half its smallest subnormal, 2**-25) and overflow. All numbers come from
:func:`ampkit.formats.compare_formats`. :func:`device_speed_figure` draws the matmul probe of
:func:`ampkit.device.device_report` beside the hardware decision it explains.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W
import traitlets

from ampkit._util import check_positive_finite
from ampkit.device import Ratio, speed_words
from ampkit.formats import RoundTrip, compare_formats, format_name, info
from ampkit.i18n import tr
from ampkit.widgets.front import VERDICT_COLOURS, FrontView, format_limits

__all__ = ["RoundingSlider", "rounding_table_html", "device_speed_figure"]

_COLOURS = {"exact": "#1a7f37", "rounded": "#57606a", "flushed to zero": "#cf222e",
            "overflow to inf": "#cf222e", "overflow to nan": "#cf222e"}


def rounding_table_html(rows: list[RoundTrip]) -> str:
    """An HTML table of :func:`compare_formats` rows (format, stored value, relative error, verdict)."""
    head = tr("<tr><th>format</th><th>stored value</th><th>relative error</th><th>what happened</th></tr>")
    body = []
    for r in rows:
        rel = "—" if r.rel_error != r.rel_error else ("inf" if r.rel_error == float("inf") else f"{r.rel_error:.2e}")
        colour = _COLOURS.get(r.verdict, "#57606a")
        body.append(
            f"<tr><td><code>{r.fmt}</code></td><td class='ampkit-stored'><code>{r.stored!r}</code></td>"
            f"<td>{rel}</td><td style='color:{colour}'><b>{html.escape(tr(r.verdict))}</b></td></tr>"
        )
    typed = tr("value typed in (float64): <code>{value!r}</code>", value=rows[0].value)
    return f"<div class='ampkit-rounding'><p>{typed}</p><table>{head}{''.join(body)}</table></div>"


class RoundingSlider(FrontView):
    """A log-scale slider (1e-9 … 1e6) and a live table of how each format stores the value, drawn in the browser
    (``js/rounding.js``): the rounding is arithmetic on the limits of each format that :func:`ampkit.formats.info`
    sends, so the view moves without a kernel; with one, :attr:`rows` is the engine's own
    :func:`ampkit.formats.compare_formats` of the same value (the tests hold the two equal).

    >>> demo = RoundingSlider(value=1e-8)
    >>> demo.rows[-1].verdict   # fp16 loses it
    'flushed to zero'
    """

    _front = "rounding"
    value = traitlets.Float(0.1).tag(sync=True)
    min_exp = traitlets.Float(-9.0).tag(sync=True)
    max_exp = traitlets.Float(6.0).tag(sync=True)
    step = traitlets.Float(0.05).tag(sync=True)
    formats: traitlets.List[dict] = traitlets.List().tag(sync=True)

    def __init__(self, value: float = 0.1, fmts: tuple[str, ...] = ("float32", "bfloat16", "float16")):
        self.fmts = tuple(info(f).name for f in fmts)
        super().__init__(value=check_positive_finite("value", value), formats=[format_limits(f) for f in self.fmts])
        self.rows: list[RoundTrip] = compare_formats(self.value, self.fmts)

    @property
    def slider(self) -> RoundingSlider:
        """The slider's state is the view's ``value`` (``demo.slider.value = 1e5`` moves it, as before)."""
        return self

    @traitlets.observe("value")
    def _value_changed(self, change: dict) -> None:
        self.rows = compare_formats(change["new"], self.fmts)

    def words(self) -> dict:
        return {"value": tr("value"), "typed": tr("value typed in (float64):"), "format": tr("format"),
                "stored": tr("stored value"), "error": tr("relative error"), "what": tr("what happened"),
                "verdicts": {v: tr(v) for v in VERDICT_COLOURS}}

    def still(self) -> W.Widget:
        return W.VBox([W.HTML(f"{tr('value')}: {self.value:.3e}"), W.HTML(rounding_table_html(self.rows))])


def device_speed_figure(rep):
    """A bar per autocast dtype: its measured matmul speed against float32 (median, whiskers = range of repeats).

    Log x axis centred on 1 ("as fast as float32"); each bar is labelled with the ratio in words and whether the
    hardware has native support for the dtype (the decision, which the timing only explains).
    Returns a ``matplotlib.figure.Figure`` (show it with ``ampkit.widgets.style.show``).
    """
    # matplotlib is imported here, not at the top: `from ampkit.widgets import RoundingSlider` must not load it
    from matplotlib.ticker import NullLocator

    from ampkit.widgets.style import STATUS_COLOURS, dtype_colour, new_figure

    dtypes = list(rep.autocast_dtypes)
    if not dtypes:
        raise ValueError(tr("this device report has no autocast dtypes to draw; valid reports list float16/bfloat16"))
    ratios = [rep.ratios.get(dt) or Ratio(rep.speedup[dt], rep.speedup[dt], rep.speedup[dt], 1) for dt in dtypes]
    fig = new_figure(7.5, 1.2 + 0.75 * len(dtypes))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    for y, (dt, r) in enumerate(zip(dtypes, ratios)):
        native = dt in rep.native
        ax.barh(y, r.median - 1, left=1, height=0.55, color=dtype_colour(format_name(dt)),
                hatch=None if native else "//", edgecolor="white" if native else "#24292f", linewidth=0.8)
        ax.errorbar(r.median, y, xerr=[[r.median - r.low], [r.high - r.median]], fmt="none", ecolor="#24292f",
                    capsize=4, lw=1.2)
        ax.annotate(speed_words(r.median), (max(r.high, 1), y), textcoords="offset points", xytext=(6, 0),
                    va="center", fontsize=10)
    ax.axvline(1, color=STATUS_COLOURS["neutral"], lw=1.2, ls="--")
    lows = [min(r.low, 1) for r in ratios]
    highs = [max(r.high, 1) for r in ratios]
    lo, hi = min(lows) / 2.5, max(highs) * 6
    ax.set_xlim(lo, hi)
    decades = [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
               if lo <= 10.0 ** k <= hi]
    ax.set_xticks(decades, [_decade_label(d) for d in decades])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks(range(len(dtypes)),
                  [tr("{dtype}\n(native here)", dtype=format_name(dt)) if dt in rep.native
                   else tr("{dtype}\n(not native here)", dtype=format_name(dt)) for dt in dtypes])
    ax.set_ylim(-0.6, len(dtypes) - 0.4)
    ax.set_xlabel("float32 time / dtype time (log scale; right of the dashed line = faster than float32)")
    n = rep.probe_size
    ax.set_title(f"Measured {n}x{n} matmul speed vs float32 on this {rep.device.type}\n"
                 f"bar: median, whiskers: range of {ratios[0].repeats} repeats; hatched: no native support",
                 fontsize=10)
    return fig


def _decade_label(x: float) -> str:
    """Tick label of a speed ratio: ``1`` -> ``"same"``, ``10`` -> ``"10x faster"``, ``0.01`` -> ``"100x slower"``."""
    if x == 1:
        return tr("same as fp32")
    return tr("{x}x faster", x=f"{x:g}") if x > 1 else tr("{x}x slower", x=f"{1 / x:g}")
