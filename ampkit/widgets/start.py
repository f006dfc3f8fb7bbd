"""The first live widget (notebook 00): a log slider whose value is shown as fp32, bf16 and fp16 store it.

A learner moves it to check that widgets render before the workshop, and gets a first look at
rounding, flush-to-zero and overflow. All numbers come from :func:`ampkit.formats.compare_formats`.
"""
from __future__ import annotations

import html

import ipywidgets as W

from ampkit.formats import RoundTrip, compare_formats

__all__ = ["RoundingSlider", "rounding_table_html"]

_COLOURS = {"exact": "#1a7f37", "rounded": "#57606a", "flushed to zero": "#cf222e",
            "overflow to inf": "#cf222e", "overflow to nan": "#cf222e"}


def rounding_table_html(rows: list[RoundTrip]) -> str:
    """An HTML table of :func:`compare_formats` rows (format, stored value, relative error, verdict)."""
    head = "<tr><th>format</th><th>stored value</th><th>relative error</th><th>what happened</th></tr>"
    body = []
    for r in rows:
        rel = "—" if r.rel_error != r.rel_error else ("inf" if r.rel_error == float("inf") else f"{r.rel_error:.2e}")
        colour = _COLOURS.get(r.verdict, "#57606a")
        body.append(
            f"<tr><td><code>{r.fmt}</code></td><td class='ampkit-stored'><code>{r.stored!r}</code></td>"
            f"<td>{rel}</td><td style='color:{colour}'><b>{html.escape(r.verdict)}</b></td></tr>"
        )
    return (f"<div class='ampkit-rounding'><p>value typed in (float64): <code>{rows[0].value!r}</code></p>"
            f"<table>{head}{''.join(body)}</table></div>")


class RoundingSlider:
    """A log-scale slider (1e-9 … 1e6) and a live table of how each format stores the value.

    >>> demo = RoundingSlider(value=1e-8)
    >>> demo.rows[-1].verdict   # fp16 loses it
    'flushed to zero'
    """

    def __init__(self, value: float = 0.1, fmts: tuple[str, ...] = ("float32", "bfloat16", "float16")):
        self.fmts = fmts
        self.slider = W.FloatLogSlider(value=value, base=10, min=-9, max=6, step=0.05,
                                       description="value", readout_format=".3e",
                                       continuous_update=True, layout=W.Layout(width="520px"))
        self.table = W.HTML()
        self.rows: list[RoundTrip] = []
        self.slider.observe(self._on_change, names="value")
        self._redraw(self.slider.value)
        self.widget = W.VBox([self.slider, self.table])

    def _on_change(self, change: dict) -> None:
        self._redraw(change["new"])

    def _redraw(self, value: float) -> None:
        self.rows = compare_formats(value, self.fmts)
        self.table.value = rounding_table_html(self.rows)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
