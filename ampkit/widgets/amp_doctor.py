"""The AMP doctor (notebook 05, ``05_amp_in_practice.ipynb``): pick a broken run, run it, read the diagnosis, see the
evidence, re-run it with the fix applied. Also the notebook's two evidence figures (headroom per layer, scale
histories).

The logic is :func:`ampkit.lessons.amp_in_practice.run_scenario`; this module only draws its :class:`DoctorReport`.

>>> fig = headroom_figure(["a", "b"], {"fp16": [3.0, -1.0]})
>>> fig.axes[0].get_title()
'Overflow headroom per module: powers of two left below the format max'
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import ipywidgets as W
import matplotlib.colors as mcolors
from matplotlib.patches import Patch

from ampkit.i18n import mark, tr
from ampkit.lessons.amp_in_practice import DoctorReport, run_scenario, scenario_names
from ampkit.widgets.style import (
    BAND_COLOURS,
    STATUS_COLOURS,
    WidgetView,
    dtype_colour,
    mark_nonfinite,
    new_figure,
    png_bytes,
)

__all__ = ["headroom_figure", "scales_figure", "report_html", "report_figure", "AmpDoctor"]

_MARKERS = ("o", "s", "^", "D", "v")
_LINES = ("-", "--", ":", "-.")
_HEADROOM_TITLE = mark("Overflow headroom per module: powers of two left below the format max")
_LOSS_SCALE_TITLE = mark("Loss scale per step")


def _tick_label(name: str, kind: str) -> str:
    return f"{name}\n{kind.replace(' activation', chr(10) + 'activation')}" if kind else name


def headroom_figure(names: Sequence[str], bits: Mapping[str, Sequence[float]], title: str | None = None,
                    kinds: Sequence[str] | None = None):
    """Bars of ``log2(max_finite / largest |activation|)`` per module, one group per format.

    A module whose output overflows the format (a negative headroom, or NaN) gets a bar drawn to the top of the
    axes, in the overflow colour with hatching and its value written on it, so it is the most visible bar, not an
    invisible sliver below zero. ``kinds`` (e.g. ``LayerHeadroom.kind``: "Linear", "ReLU activation") is written
    under each module's name.
    """
    if kinds is not None and len(kinds) != len(names):
        raise ValueError(tr("kinds must have one entry per module name ({n}); got {got}", n=len(names), got=len(kinds)))
    for fmt, vals in bits.items():
        if len(vals) != len(names):
            raise ValueError(tr("bits[{fmt!r}] must have one value per module name ({n}); got {got}", fmt=fmt,
                                n=len(names), got=len(vals)))
    fig = new_figure(7.5, 4.0)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(bits))
    finite = [v for vals in bits.values() for v in vals if math.isfinite(v) and v >= 0]
    top = max(finite + [1.0]) * 1.3
    ax.set_ylim(0, top)
    over_colour = BAND_COLOURS["overflow"]
    for k, (fmt, vals) in enumerate(bits.items()):
        xs = [i + (k - (len(bits) - 1) / 2) * width for i in range(len(names))]
        ok = [(x, v) for x, v in zip(xs, vals) if math.isfinite(v) and v >= 0]
        ax.bar([x for x, _ in ok], [v for _, v in ok], width, label=fmt, color=dtype_colour(fmt),
               edgecolor="black", linewidth=0.5)
        for x, v in ok:
            ax.annotate(f"{v:.0f}", (x, v), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=8,
                        color=STATUS_COLOURS["neutral"])
        for x, v in zip(xs, vals):
            if math.isfinite(v) and v >= 0:
                continue
            # overflow (v < 0 or NaN) or no activity at all (+inf: the output was all zeros): drawn to the top
            overflow = not (v == math.inf)
            ax.bar(x, top, width, color=over_colour if overflow else "none", alpha=0.35 if overflow else 1.0,
                   hatch="//" if overflow else "..", edgecolor=dtype_colour(fmt), linewidth=1.5)
            text = (f"{fmt}\nOVERFLOW\n{v:+.1f}" if math.isfinite(v) else f"{fmt}\nNaN") if overflow else \
                f"{fmt}\nall zero"
            ax.text(x, top * 0.5, text, ha="center", va="center", fontsize=8, fontweight="bold",
                    color=over_colour if overflow else STATUS_COLOURS["neutral"], rotation=90 if width < 0.3 else 0)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Patch(facecolor=mcolors.to_rgba(over_colour, 0.35), hatch="//", edgecolor=over_colour,
                         label="overflow: output above the format max (bar drawn to the top, value < 0)"))
    ax.set_xticks(range(len(names)), [_tick_label(n, kinds[i] if kinds else "") for i, n in enumerate(names)],
                  fontsize=8)
    ax.set_xlabel("module (name and kind), in forward order")
    ax.set_ylabel("headroom (powers of two)")
    ax.set_title(title or _HEADROOM_TITLE)
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8,
               title="headroom = log2(format max / largest |output|)", title_fontsize=8)
    return fig


def scales_figure(runs: Mapping[str, Mapping[str, Sequence]], title: str = _LOSS_SCALE_TITLE):
    """One line per run: ``{"label": {"scales": [...], "skipped": [...]}}``; skipped steps marked with ✕."""
    fig = new_figure(7.5, 3.4)
    ax = fig.add_subplot()
    for k, (label, run) in enumerate(runs.items()):
        scales = [math.log2(s) for s in run["scales"]]
        ax.plot(range(len(scales)), scales, marker=_MARKERS[k % 5], ls=_LINES[k % 4], label=label, ms=5)
        bad = [i for i, s in enumerate(run.get("skipped", [])) if s]
        ax.plot(bad, [scales[i] for i in bad], "x", color=STATUS_COLOURS["bad"], ms=9,
                label="skipped step" if k == 0 else None)
    ax.set_xlabel("step")
    ax.set_ylabel("log2(loss scale)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=9)
    return fig


def report_figure(report: DoctorReport):
    """The evidence of one doctor report as a figure."""
    ev = report.evidence
    state = mark("with the fix") if report.fixed else mark("as reported")
    if ev.get("kind") == "headroom":
        fig = headroom_figure(ev["names"], {ev["dtype"]: ev["bits"]}, None, ev.get("kinds"))
        fig.axes[0].set_title(f"{report.scenario} ({state}): {ev['dtype']} headroom per module")
        return fig
    if ev.get("kind") == "scales":
        fig = scales_figure({mark("loss scale"): ev})
        fig.axes[0].set_title(f"{report.scenario} ({state}): loss scale per step")
        return fig
    fig = new_figure(7.5, 3.4)
    ax = fig.add_subplot()
    losses = ev.get("losses", [])
    ax.plot(range(len(losses)), losses, marker="o", color=STATUS_COLOURS["neutral"])
    mark_nonfinite(ax, losses, label="loss")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (cross-entropy, nats)")
    ax.set_title(f"{report.scenario} ({state}): training loss per step")
    return fig


def report_html(report: DoctorReport) -> str:
    """The diagnosis and the fix as HTML (classes ``ampkit-doctor-verdict``, ``-diagnosis``, ``-fix``)."""
    ok = report.healthy
    colour = STATUS_COLOURS["good" if ok else "bad"]
    verdict = tr("healthy") if ok else tr("broken")
    applied = tr(" (fix applied)") if report.fixed else ""
    return (f"<div class='ampkit-doctor-report'><b class='ampkit-doctor-verdict' style='color:{colour}'>"
            f"{html.escape(report.scenario)}: {verdict}{applied}</b><br>"
            f"<span class='ampkit-doctor-diagnosis'><b>{tr('Diagnosis:')}</b> {html.escape(report.diagnosis)}"
            f"</span><br>"
            f"<span class='ampkit-doctor-fix'><b>{tr('Fix:')}</b> {html.escape(report.fix)}</span></div>")


class AmpDoctor(WidgetView):
    """Dropdown of scenarios, "Run" and "Run with the fix" buttons, the report and its evidence figure.

    ``AmpDoctor(model=m, batch=(x, y))`` adds your own model as the "my model" choice. ``.run(fixed)`` is what the
    buttons call (tests call it headlessly); ``.report`` is the last :class:`DoctorReport`.
    """

    def __init__(self, scenario: str | None = None, model=None, batch=None):
        names = scenario_names() if model is not None else scenario_names()[:-1]
        if scenario is not None and scenario not in names:
            raise ValueError(tr("unknown scenario {scenario!r}; the doctor knows: {names}", scenario=scenario,
                                  names=", ".join(names)))
        self.model, self.batch = model, batch
        self.picker = W.Dropdown(options=names, value=scenario or names[0], description=tr("scenario"),
                                 layout=W.Layout(width="420px"))
        self.picker.add_class("ampkit-doctor-picker")
        self.run_button = W.Button(description=tr("Run"), button_style="warning")
        self.run_button.add_class("ampkit-doctor-run")
        self.fix_button = W.Button(description=tr("Run with the fix"), button_style="success")
        self.fix_button.add_class("ampkit-doctor-fix-button")
        self.output = W.HTML(f"<div class='ampkit-doctor-report'>{tr('Pick a scenario and press Run.')}</div>")
        self.output.add_class("ampkit-doctor-output")
        self.image = W.Image(format="png")
        self.image.add_class("ampkit-doctor-plot")
        self.report: DoctorReport | None = None
        self.run_button.on_click(lambda _: self.run(False))
        self.fix_button.on_click(lambda _: self.run(True))
        self.widget = W.VBox([W.HBox([self.picker, self.run_button, self.fix_button]), self.output, self.image])

    def run(self, fixed: bool = False) -> DoctorReport:
        """Run the picked scenario (broken, or with its fix) and show the report and the evidence figure."""
        name = self.picker.value
        if name == "my model":
            self.report = run_scenario(name, model=self.model, batch=self.batch)
        else:
            self.report = run_scenario(name, fixed=fixed)
        self.output.value = report_html(self.report)
        fig = report_figure(self.report)
        self.image.value = png_bytes(fig)
        self.image.layout.width = f"{int(fig.get_figwidth() * fig.dpi)}px"
        return self.report

