"""The AMP doctor (notebook 05, ``05_amp_in_practice.ipynb``): pick a broken run, read the diagnosis, see the
evidence, and the same run with the fix applied; drawn in the browser (``js/amp_doctor.js``).

The logic is :func:`ampkit.lessons.amp_in_practice.run_scenario` (a small seeded training run with a planted
mixed-precision fault, diagnosed by :mod:`ampkit.diagnose`); this module only sends its :class:`DoctorReport`\\ s
to the page as small data (:func:`sent_report`): the diagnosis and the fix as the engine prints them, the headroom
per layer in bits, the loss scale and the loss per step. When the view starts, the engine runs every scenario,
broken and fixed (12 runs, under a second), so the saved notebook switches between them with no kernel; "Run it
again" asks the kernel for a new run (without one, the page says to run the notebook). Also the notebook's still
figures, drawn by matplotlib (headroom per module, scale histories; one report's evidence for the still picture).

>>> entry = sent_report(run_scenario("log of zero"))
>>> entry["healthy"], entry["evidence"]["skipped"]
(False, '111111111111')
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W
import matplotlib.colors as mcolors
import traitlets
from matplotlib.patches import Patch

from ampkit.i18n import mark, tr
from ampkit.lessons.amp_in_practice import SCENARIOS, DoctorReport, run_scenario, scenario_names
from ampkit.widgets.front import FrontView
from ampkit.widgets.style import BAND_COLOURS, STATUS_COLOURS, dtype_colour, mark_nonfinite, new_figure, png_bytes

__all__ = ["AmpDoctor", "sent_report", "report_key", "headroom_figure", "scales_figure", "report_html",
           "report_figure"]

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

    >>> ax = headroom_figure(["a", "b"], {"fp16": [3.0, -1.0]}).axes[0]
    >>> [str(p.get_hatch()) for p in ax.patches]          # b overflows: hatched, drawn to the top
    ['None', '//']
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
    """One line per run: ``{"label": {"scales": [...], "skipped": [...]}}``; skipped steps marked with ✕.

    >>> scales_figure({"run": {"scales": [4.0, 2.0], "skipped": [True, False]}}).axes[0].get_ylabel()
    'log2(loss scale)'
    """
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
    """The evidence of one doctor report as a figure (the view's still picture).

    >>> report_figure(run_scenario("log of zero")).axes[0].get_title()
    'log of zero (as reported): loss scale per step'
    """
    ev = report.evidence
    state = mark("with the fix") if report.fixed else mark("as reported")
    if ev.get("kind") == "headroom":
        fig = headroom_figure(ev["names"], {ev["dtype"]: ev["bits"]}, None, ev.get("kinds"))
        fig.axes[0].set_title(f"{tr(report.scenario)} ({state}): {ev['dtype']} headroom per module")
        return fig
    if ev.get("kind") == "scales":
        fig = scales_figure({mark("loss scale"): ev})
        fig.axes[0].set_title(f"{tr(report.scenario)} ({state}): loss scale per step")
        return fig
    fig = new_figure(7.5, 3.4)
    ax = fig.add_subplot()
    losses = ev.get("losses", [])
    ax.plot(range(len(losses)), losses, marker="o", color=STATUS_COLOURS["neutral"])
    mark_nonfinite(ax, losses, label="loss")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (cross-entropy, nats)")
    ax.set_title(f"{tr(report.scenario)} ({state}): training loss per step")
    return fig


def report_html(report: DoctorReport) -> str:
    """The diagnosis and the fix as HTML (classes ``ampkit-doctor-verdict``, ``-diagnosis``, ``-fix``).

    >>> "healthy (fix applied)" in report_html(run_scenario("log of zero", fixed=True))
    True
    """
    ok = report.healthy
    colour = STATUS_COLOURS["good" if ok else "bad"]
    verdict = tr("healthy") if ok else tr("broken")
    applied = tr(" (fix applied)") if report.fixed else ""
    return (f"<div class='ampkit-doctor-report'><b class='ampkit-doctor-verdict' style='color:{colour}'>"
            f"{html.escape(tr('{name}: {detail}', name=tr(report.scenario), detail=verdict + applied))}</b><br>"
            f"<span class='ampkit-doctor-diagnosis'><b>{tr('Diagnosis:')}</b> {html.escape(report.diagnosis)}"
            f"</span><br>"
            f"<span class='ampkit-doctor-fix'><b>{tr('Fix:')}</b> {html.escape(report.fix)}</span></div>")


_MY_MODEL = "my model"


def report_key(scenario: str, fixed: bool) -> str:
    """The key of a report in the view's ``reports``: the scenario's name, ``|``, 1 with the fix, else 0.

    >>> report_key("log of zero", True)
    'log of zero|1'
    """
    return f"{scenario}|{int(bool(fixed))}"


def _number(x: float) -> float | str:
    """A float as JSON carries it: finite as itself, NaN and ±inf as Python's repr ("nan", "inf", "-inf")."""
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def _bar(name: str, kind: str, bits: float) -> list:
    """One headroom bar: [module, kind, bits (null unless finite), the value as printed, status]. Status as the
    still figure draws it: ``ok`` (finite, ≥ 0), ``overflow`` (< 0: the output is above the format max), ``nan``,
    ``zero`` (+inf: the output was all zeros)."""
    if math.isnan(bits):
        return [name, kind, None, "", "nan"]
    if bits == math.inf:
        return [name, kind, None, "", "zero"]
    if bits < 0 or not math.isfinite(bits):
        return [name, kind, _number(bits), f"{bits:+.1f}", "overflow"]
    return [name, kind, bits, f"{bits:.1f}", "ok"]


def sent_report(report: DoctorReport) -> dict[str, Any]:
    """What the page receives of one report: the words as the engine printed them and the evidence as numbers.

    ``evidence``: ``{"kind": "headroom", "dtype", "bars": [[module, kind, bits, printed, status], ...]}``, or
    ``{"kind": "scales", "log2": [log2(scale) per step], "skipped": "0110…" (1: the step was skipped), "losses"}``,
    or ``{"kind": "losses", "losses"}``; a loss that is not finite is sent as ``"nan"``/``"inf"``.

    >>> sent_report(run_scenario("model.half() + GradScaler", fixed=True))["evidence"]["kind"]
    'losses'
    """
    ev = report.evidence
    kind = ev.get("kind")
    if kind == "headroom":
        kinds = ev.get("kinds") or [""] * len(ev["names"])
        evidence: dict[str, Any] = {"kind": kind, "dtype": ev["dtype"],
                                    "bars": [_bar(n, k, b) for n, k, b in zip(ev["names"], kinds, ev["bits"])]}
    elif kind == "scales":
        evidence = {"kind": kind, "log2": [math.log2(s) if 0 < s < math.inf else None for s in ev["scales"]],
                    "skipped": "".join("1" if s else "0" for s in ev["skipped"]),
                    "losses": [_number(v) for v in ev.get("losses", [])]}
    else:
        evidence = {"kind": "losses", "losses": [_number(v) for v in ev.get("losses", [])]}
    return {"scenario": getattr(report.scenario, "english", report.scenario), "fixed": bool(report.fixed),
            "healthy": bool(report.healthy),
            "diagnosis": report.diagnosis, "fix": report.fix, "evidence": evidence}


class AmpDoctor(FrontView):
    """A scenario picker, the broken run or the run with the fix, the diagnosis and its evidence; drawn in the
    browser (``js/amp_doctor.js``) from the reports the engine computed (``reports``, :func:`sent_report` of each).

    ``AmpDoctor(model=m, batch=(x, y))`` adds your own model as the "my model" choice (it has no run with a fix).
    The traits ``scenario`` and ``fixed`` select the report shown (``.report``, a :class:`DoctorReport`); with
    ``precompute=False`` only the first report is run at start, and the others when they are selected (with a
    kernel). ``.run(fixed)`` runs the selected scenario again and shows that run, as the page's "Run it again" does.

    >>> doc = AmpDoctor("log of zero")
    >>> doc.report.healthy, len(doc.reports)
    (False, 12)
    >>> doc.fixed = True; doc.report.healthy
    True
    """

    _front = "amp_doctor"
    scenario = traitlets.Unicode().tag(sync=True)
    fixed = traitlets.Bool(False).tag(sync=True)
    #: The choices: [{"name", "fixable"}] (fixable: the scenario has a run with its fix).
    scenarios: traitlets.List[dict] = traitlets.List().tag(sync=True)
    #: report_key(scenario, fixed) -> sent_report(...), every report the engine ran.
    reports = traitlets.Dict().tag(sync=True)
    #: The page asks for a new run: {"n": a counter, "scenario", "fixed"}.
    rerun = traitlets.Dict().tag(sync=True)
    #: The kernel's answer to the last "Run it again": {"n", "key", "same": whether it equals the report shown}.
    last_run = traitlets.Dict().tag(sync=True)

    def __init__(self, scenario: str | None = None, model=None, batch=None, fixed: bool = False,
                 precompute: bool = True):
        names = scenario_names() if model is not None else scenario_names()[:-1]
        if scenario is not None and scenario not in names:
            raise ValueError(tr("unknown scenario {scenario!r}; the doctor knows: {names}", scenario=scenario,
                                  names=", ".join(names)))
        if model is not None and batch is None:
            raise ValueError(tr("'my model' needs model= (an nn.Module) and batch=(x, y)"))
        self.model, self.batch = model, batch
        self._reports: dict[str, DoctorReport] = {}
        scenario = scenario or names[0]
        fixed = bool(fixed) and scenario in SCENARIOS
        todo = [(n, f) for n in names for f in ((False, True) if n in SCENARIOS else (False,))] if precompute \
            else [(scenario, fixed)]
        for name, f in todo:
            self._run(name, f)
        super().__init__(scenarios=[{"name": n, "fixable": n in SCENARIOS} for n in names],
                         reports={k: sent_report(r) for k, r in self._reports.items()}, scenario=scenario,
                         fixed=fixed)
        self._select(None)

    def _run(self, name: str, fixed: bool) -> DoctorReport:
        """Run one scenario in the engine and keep its report (the view's ``reports`` is updated by the caller)."""
        if name == _MY_MODEL:
            report = run_scenario(name, model=self.model, batch=self.batch)
        else:
            report = run_scenario(name, fixed=fixed)
        self._reports[report_key(name, fixed)] = report
        return report

    @traitlets.validate("scenario")
    def _valid_scenario(self, proposal: dict) -> str:
        names = [s["name"] for s in self.scenarios]
        if names and proposal["value"] not in names:
            raise traitlets.TraitError(tr("unknown scenario {scenario!r}; the doctor knows: {names}",
                                          scenario=proposal["value"], names=", ".join(names)))
        return proposal["value"]

    @property
    def key(self) -> str:
        """The key of the report shown (``my model`` has no run with a fix: its report is shown either way)."""
        return report_key(self.scenario, self.fixed and self.scenario in SCENARIOS)

    @traitlets.observe("scenario", "fixed")
    def _select(self, change: dict | None) -> None:
        if not self.scenarios:
            return                                   # still being built
        key = self.key
        if key not in self._reports:                 # not computed at start: the kernel runs it now
            self._run(self.scenario, self.fixed and self.scenario in SCENARIOS)
            self.reports = {**self.reports, key: sent_report(self._reports[key])}
        self.report: DoctorReport = self._reports[key]

    @traitlets.observe("rerun")
    def _on_rerun(self, change: dict) -> None:
        ask = change["new"]
        if not ask:
            return
        self.scenario = ask.get("scenario", self.scenario)
        self.fixed = bool(ask.get("fixed", self.fixed)) and self.scenario in SCENARIOS
        self._again(int(ask.get("n", 0)))

    def run(self, fixed: bool = False) -> DoctorReport:
        """Run the selected scenario again (broken, or with its fix), show that run and return its report;
        ``last_run["same"]`` says whether it equals the report shown before."""
        self.fixed = bool(fixed) and self.scenario in SCENARIOS
        return self._again(self.last_run.get("n", 0) + 1)

    def _again(self, n: int) -> DoctorReport:
        key = self.key
        before = self.reports.get(key)
        report = self._run(self.scenario, self.fixed)
        entry = sent_report(report)
        if entry != before:
            self.reports = {**self.reports, key: entry}
        self.report = report
        self.last_run = {"n": n, "key": key, "same": entry == before}
        return report

    @property
    def report_html(self) -> str:
        """The report shown, as HTML (the still picture's text; the page writes the same words)."""
        return report_html(self.report)

    def words(self) -> dict:
        return {"names": {n: tr(n) for n in scenario_names()},   # the scenarios as the page shows them
                "named": tr("{name}: {detail}"),
                "scenario": tr("scenario"), "broken_run": tr("the broken run"), "fixed_run": tr("the run with the fix"),
                "rerun": tr("Run it again"), "rerun_title": tr("run the selected scenario again in the kernel"),
                "no_kernel": tr("run the notebook to compute this on your machine"),
                "computing": tr("computing in the kernel …"),
                "same": tr("ran again in the kernel: the same report"),
                "changed": tr("ran again in the kernel: the report changed (shown)"),
                "no_fix": tr("your model has no run with a fix"),
                "healthy": tr("healthy"), "broken": tr("broken"), "applied": tr(" (fix applied)"),
                "diagnosis": tr("Diagnosis:"), "fix": tr("Fix:"),
                "as_reported": tr("as reported"), "with_fix": tr("with the fix"),
                "headroom_title": tr("{scenario} ({state}): {dtype} headroom per module"),
                "headroom_y": tr("headroom (bits: powers of two below the format max)"),
                "headroom_x": tr("module (name and kind), in forward order"),
                "headroom_legend": tr("{dtype}: log2(format max / largest |output|)"),
                "overflow": tr("OVERFLOW"), "overflow_legend": tr("overflow: output above the format max "
                                                                  "(bar drawn to the top)"),
                "nan": tr("NaN"), "zero": tr("all zero"), "bits": tr("{value} bits"),
                "scale_title": tr("{scenario} ({state}): loss scale per step"),
                "scale_y": tr("log2(loss scale)"), "step": tr("training step"),
                "scale_legend": tr("loss scale the run used"), "skipped": tr("skipped step (inf/NaN gradients)"),
                "loss_title": tr("{scenario} ({state}): training loss per step"),
                "loss_y": tr("training loss (cross-entropy, nats)"), "loss_legend": tr("loss"),
                "nan_legend": tr("NaN or inf loss (drawn at the top)")}

    def still(self) -> W.Widget:
        fig = report_figure(self.report)
        return W.VBox([W.HTML(self.report_html),
                       W.Image(value=png_bytes(fig), format="png", width=int(fig.get_figwidth() * fig.dpi))])
