"""Notebook 06's widget (``06_fp8_scaling.ipynb``): the amax-history explorer, drawn in the browser.

A thin view over :mod:`ampkit.fp8` (``delayed_scales``, ``current_scales``) and :mod:`ampkit.lessons.fp8_scaling`
(``record_amax_run``, ``saturation_per_step``, ``flush_per_step``). A recorded fp8 run's per-step amax (activation
or gradient, with spikes); a slider for the history length and one for the margin and a choice of
``amax_compute_algo`` give the scale each step casts with under delayed scaling, and which steps saturate; the
readout compares it with just-in-time scaling (each step's own amax).

:class:`AmaxHistoryExplorer` is a :class:`~ampkit.widgets.front.FrontView` (``js/amax.js``, SVG): when it starts,
the engine computes every setting its controls reach (2 tensors × every history length × 2 algorithms × 9 margins:
4320 settings; :func:`explorer_state` runs once per distinct scale series, 936 of them; 1.6–2.5 s on a loaded 2-core
machine) and sends them compactly (:func:`explorer_sweep`, 44 KB for the default recording): per tensor and
margin, the distinct values of log2(fp8_max / scale) the settings' scales take; per setting, which of them each step
casts with (:func:`run_code`, shared between settings), its saturating steps and the readout's numbers as
:func:`readout_html` prints them. The page only SELECTS, so the saved notebook moves every control with no kernel.
Drawn: each step's amax, the largest value the scale keeps (fp8_max / scale) and just-in-time's, on a log2 axis, the
saturating steps marked. The still picture (renderers without JavaScript) is the readout and a matplotlib figure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from html import escape
from typing import Any

import ipywidgets as W
import torch
import traitlets

from ampkit.fp8 import ALGOS, current_scales, delayed_scales, fp8_max, fp8_min_subnormal
from ampkit.i18n import tr
from ampkit.lessons.fp8_scaling import AmaxRecording, flush_per_step, record_amax_run, saturation_per_step
from ampkit.widgets.front import Control, FrontView
from ampkit.widgets.style import BAND_COLOURS, DPI, STATUS_COLOURS, dtype_colour, new_figure, png_bytes

__all__ = ["AmaxHistoryExplorer", "ExplorerState", "explorer_state", "readout_html", "explorer_sweep", "run_code",
           "run_decode", "MARGINS"]

_WIDTH_IN, _HEIGHT_IN = 7.5, 4.2
_WIDTH_PX = int(_WIDTH_IN * DPI)
#: The margins the slider offers (Transformer Engine's ``margin``: the scale is divided by 2**margin).
MARGINS = tuple(range(9))


@dataclass(frozen=True)
class ExplorerState:
    """What the explorer shows for one setting: per-step scales and fractions, delayed and just-in-time."""

    tensor: str
    fmt: str
    history_len: int
    algo: str
    margin: int
    amax: torch.Tensor
    delayed_scale: torch.Tensor
    current_scale: torch.Tensor
    delayed_saturated: torch.Tensor
    delayed_flushed: torch.Tensor
    current_saturated: torch.Tensor
    current_flushed: torch.Tensor

    @property
    def saturating_steps(self) -> int:
        return int((self.delayed_saturated > 0).sum())

    @property
    def worst_step(self) -> int:
        return int(self.delayed_saturated.argmax())


def explorer_state(rec: AmaxRecording, tensor: str, history_len: int, algo: str, margin: int) -> ExplorerState:
    """Compute one setting's per-step numbers (vectorised: one sliding max, two searchsorted calls per scheme).

    >>> rec = record_amax_run(steps=30, spikes={20: 16.0}, grad_spikes={})
    >>> s = explorer_state(rec, "activation", 4, "max", 0)
    >>> s.fmt, s.saturating_steps, s.worst_step
    ('e4m3', 3, 20)
    """
    if tensor not in rec.amax:
        raise ValueError(tr("tensor must be one of {choices}; got {value!r}", choices=", ".join(map(repr, rec.amax)),
                            value=tensor))
    fmt, amax, vals = rec.formats[tensor], rec.amax[tensor], rec.values[tensor]
    ds = delayed_scales(amax, fmt, history_len, algo, margin)
    cs = current_scales(amax, fmt, margin)
    sub = fp8_min_subnormal(fmt)
    return ExplorerState(tensor=tensor, fmt=fmt, history_len=history_len, algo=algo, margin=margin, amax=amax,
                         delayed_scale=ds, current_scale=cs,
                         delayed_saturated=saturation_per_step(vals, ds, fmt),
                         delayed_flushed=flush_per_step(vals, ds, sub),
                         current_saturated=saturation_per_step(vals, cs, fmt),
                         current_flushed=flush_per_step(vals, cs, sub))


def _pct(x: float) -> str:
    value = "0" if x == 0 else ("< 0.01" if x < 1e-4 else f"{100 * x:.2f}")
    return tr("{value} %", value=value)       # Chinese: 67% (no space to break a narrow readout at)


def _numbers(s: ExplorerState) -> dict[str, Any]:
    """The readout's numbers as it prints them."""
    n = s.saturating_steps
    return {"n": n, "total": len(s.amax), "worst": s.worst_step if n else "",
            "worst_pct": _pct(float(s.delayed_saturated[s.worst_step])) if n else "",
            "flushed": _pct(float(s.delayed_flushed.mean())), "jit_n": int((s.current_saturated > 0).sum()),
            "jit_flushed": _pct(float(s.current_flushed.mean()))}


def readout_html(s: ExplorerState) -> str:
    """The saturation readout: delayed vs just-in-time, steps that saturated, the worst one, mean flushed.

    >>> rec = record_amax_run(steps=30, spikes={20: 16.0}, grad_spikes={})
    >>> "saturated at 3 of 30 steps" in readout_html(explorer_state(rec, "activation", 4, "max", 0))
    True
    """
    k = {name: escape(v) if isinstance(v, str) else v for name, v in _numbers(s).items()}   # "< 0.01 %"
    bad = STATUS_COLOURS["bad"] if k["n"] else STATUS_COLOURS["good"]
    worst = (tr("worst step {step}: <b>{pct}</b> of its values saturated", step=k["worst"], pct=k["worst_pct"])
             if k["n"] else tr("no step saturates"))
    head = tr("<b>{tensor} in {fmt}</b> · delayed scaling, history {history}, <code>{algo}</code>, margin {margin}:",
              tensor=s.tensor, fmt=s.fmt, history=s.history_len, algo=s.algo, margin=s.margin)
    saturated = tr("saturated at {n} of {total} steps", n=k["n"], total=k["total"])
    flushed = tr("({worst}); flushed to zero on average", worst=worst)
    jit = tr("just-in-time scaling: saturated at {n} steps; flushed on average {pct}.", n=k["jit_n"],
             pct=k["jit_flushed"])
    return (f"<div class='ampkit-amax-readout'>{head} <span class='ampkit-amax-saturated' style='color:{bad}'>"
            f"{saturated}</span> {flushed} <span class='ampkit-amax-flushed'>{k['flushed']}</span>.<br>{jit}</div>")


def run_code(values: list[int]) -> str:
    """A list of small integers as runs (words separated by spaces): ``v`` one value, ``v*n`` n copies of v,
    ``v+n`` the n values v, v+1, … (what ``js/amax.js`` decodes; :func:`run_decode` is its inverse).

    >>> run_code([0, 1, 2, 3, 7, 7, 7, 5])
    '0+4 7*3 5'
    >>> run_decode(run_code([4, 4, 9, 10])) == [4, 4, 9, 10]
    True
    """
    words, i = [], 0
    while i < len(values):
        same = up = 1
        while i + same < len(values) and values[i + same] == values[i]:
            same += 1
        while i + up < len(values) and values[i + up] == values[i] + up:
            up += 1
        n = max(same, up)
        words.append(str(values[i]) if n == 1 else f"{values[i]}{'*' if same >= up else '+'}{n}")
        i += n
    return " ".join(words)


def run_decode(code: str) -> list[int]:
    """The list :func:`run_code` encoded.

    >>> run_decode("3*2 0+3")
    [3, 3, 0, 1, 2]
    """
    out: list[int] = []
    for word in code.split():
        if "*" in word:
            v, n = map(int, word.split("*"))
            out += [v] * n
        elif "+" in word:
            v, n = map(int, word.split("+"))
            out += list(range(v, v + n))
        else:
            out.append(int(word))
    return out


def _log2(x: torch.Tensor) -> list[float]:
    return torch.log2(x.double()).tolist()


def explorer_sweep(rec: AmaxRecording, margins: tuple[int, ...] = MARGINS
                   ) -> tuple[dict[tuple[str, int, str, int], ExplorerState], dict[str, Any]]:
    """Every setting the explorer's controls reach (each tensor × history 1 … steps × algorithm × margin), computed
    with :func:`explorer_state`, and what the page gets of them (``js/amax.js`` decodes it):

    ``{"steps", "sat_lists": ["40,41", …] (saturating steps, shared), "tensors": {name: {"fmt", "fmt_max",
    "amax": log2 of each step's amax (3 decimals), "ylim": [lo, hi] (log2, the axis), "series": [run_code of
    indices into kept, shared], "kept": [per margin: log2(fp8_max / scale) of each distinct scale, 3 decimals],
    "pick": [per margin: {algo: run_code of the series index per history length}], "jit": [per margin:
    "series|n|flushed"], "readout": [per margin: per series "sat_list|n|worst|worst_pct|flushed" joined by ";"]}}}``

    >>> rec = record_amax_run(steps=30, spikes={20: 16.0}, grad_spikes={})
    >>> states, sent = explorer_sweep(rec, margins=(0, 1))
    >>> len(states), sent["tensors"]["activation"]["pick"][0]["most_recent"]    # one series for every history
    (240, '1*30')
    """
    states: dict[tuple[str, int, str, int], ExplorerState] = {}
    sat_lists: dict[str, int] = {}
    tensors = {name: _tensor_sweep(rec, name, margins, states, sat_lists) for name in rec.amax}
    return states, {"steps": rec.steps, "sat_lists": list(sat_lists), "tensors": tensors}


def _index(scales: torch.Tensor, values: dict[float, int], series: dict[str, int]) -> int:
    """The number of a scale series (each step's scale as its index in ``values``, run-coded) in ``series``."""
    code = run_code([values.setdefault(v, len(values)) for v in scales.tolist()])
    return series.setdefault(code, len(series))


def _tensor_sweep(rec: AmaxRecording, name: str, margins: tuple[int, ...],
                  states: dict[tuple[str, int, str, int], ExplorerState], sat_lists: dict[str, int]) -> dict[str, Any]:
    """One tensor's part of :func:`explorer_sweep` (its settings are added to ``states``, their saturating steps to
    ``sat_lists``). Settings whose scales are the same (a "max" history longer than the run's spikes need, any
    history with "most_recent") share one :func:`explorer_state` and one entry."""
    amax, fmt = rec.amax[name], rec.formats[name]
    top = math.log2(fp8_max(fmt))
    series: dict[str, int] = {}
    kept, pick, jit, readout = [], [], [], []
    finite = [v for v in _log2(amax) if math.isfinite(v)] or [0.0]     # an amax of 0, inf or NaN: drawn at an edge
    lo, hi = min(finite), max(finite)
    for m in margins:
        values: dict[float, int] = {}     # the distinct scales at this margin, in the order of first use
        entries: dict[int, str] = {}
        first = explorer_state(rec, name, 1, ALGOS[0], m)
        k = _numbers(first)
        jit.append(f"{_index(first.current_scale, values, series)}|{k['jit_n']}|{k['jit_flushed']}")
        by_algo: dict[str, list[int]] = {algo: [] for algo in ALGOS}
        seen: dict[bytes, tuple[int, ExplorerState]] = {}
        for algo in ALGOS:
            for h in range(1, rec.steps + 1):
                key = delayed_scales(amax, fmt, h, algo, m).numpy().tobytes()
                if key in seen:
                    sid, same = seen[key]
                    s = replace(same, history_len=h, algo=algo)
                else:
                    s = first if (h, algo) == (1, ALGOS[0]) else explorer_state(rec, name, h, algo, m)
                    sid = _index(s.delayed_scale, values, series)
                    seen[key] = sid, s
                    k = _numbers(s)
                    steps = ",".join(map(str, torch.nonzero(s.delayed_saturated > 0).flatten().tolist()))
                    lid = sat_lists.setdefault(steps, len(sat_lists))
                    entries[sid] = f"{lid}|{k['n']}|{k['worst']}|{k['worst_pct']}|{k['flushed']}"
                states[(name, h, algo, m)] = s
                by_algo[algo].append(sid)
        logs = [top - math.log2(v) for v in values]     # log2(fp8_max / scale): the largest value the scale keeps
        lo, hi = min(lo, *logs), max(hi, *logs)
        kept.append(" ".join(f"{v:.3f}" for v in logs))
        pick.append({algo: run_code(ids) for algo, ids in by_algo.items()})
        readout.append(";".join(entries.get(i, "") for i in range(len(series))))
    return {"fmt": fmt, "fmt_max": f"{fp8_max(fmt):g}",
            "amax": " ".join(f"{v:.3f}" for v in _log2(amax)),     # an amax of 0, inf, NaN: "-inf", "inf", "nan"
            "ylim": [math.floor(lo) - 1, math.ceil(hi) + 1], "series": list(series), "kept": kept, "pick": pick,
            "jit": jit, "readout": readout}




class AmaxHistoryExplorer(FrontView):
    """Sliders for history length and margin, a choice of algorithm and tensor → per-step scales and saturation,
    drawn in the browser (``js/amax.js``) from every setting, computed by the engine when the view starts.

    ``recording``: an :class:`~ampkit.lessons.fp8_scaling.AmaxRecording` (default:
    :func:`~ampkit.lessons.fp8_scaling.record_amax_run`). The traits ``history_len`` (1 … steps), ``scale_margin``
    (:data:`MARGINS`), ``amax_algo`` and ``amax_tensor`` are the controls (``.history``, ``.margin``, ``.algo`` and
    ``.tensor`` hold them as ``.value`` too); ``.state`` is the setting's :class:`ExplorerState`.

    >>> v = AmaxHistoryExplorer(record_amax_run(steps=30, spikes={20: 16.0}, grad_spikes={}), history_len=4)
    >>> v.state.saturating_steps, v.state.worst_step
    (3, 20)
    >>> v.margin.value = 4; v.state.saturating_steps
    0
    """

    _front = "amax"
    history_len = traitlets.Int(16).tag(sync=True)
    scale_margin = traitlets.Int(0).tag(sync=True)
    amax_algo = traitlets.Unicode("max").tag(sync=True)
    amax_tensor = traitlets.Unicode("activation").tag(sync=True)
    margins: traitlets.List[int] = traitlets.List(list(MARGINS)).tag(sync=True)
    algos: traitlets.List[str] = traitlets.List(list(ALGOS)).tag(sync=True)
    states = traitlets.Dict().tag(sync=True)

    def __init__(self, recording: AmaxRecording | None = None, history_len: int = 16, margin: int = 0,
                 algo: str = "max", tensor: str = "activation"):
        self.rec = recording if recording is not None else record_amax_run()
        explorer_state(self.rec, tensor, history_len, algo, margin)     # bad input: the engine's clear error
        self._states, sent = explorer_sweep(self.rec)
        self.history, self.margin = Control(self, "history_len"), Control(self, "scale_margin")
        self.algo, self.tensor = Control(self, "amax_algo"), Control(self, "amax_tensor")
        super().__init__(states=sent, history_len=history_len, scale_margin=margin, amax_algo=algo,
                         amax_tensor=tensor)
        self._select(None)

    @traitlets.validate("history_len", "scale_margin", "amax_algo", "amax_tensor")
    def _valid(self, proposal: dict) -> Any:
        name, value = proposal["trait"].name, proposal["value"]
        if not getattr(self, "_states", None):
            return value
        choices = {"history_len": range(1, self.rec.steps + 1), "scale_margin": MARGINS, "amax_algo": ALGOS,
                   "amax_tensor": tuple(self.rec.amax)}[name]
        if value not in choices:
            shown = (f"{choices[0]} … {choices[-1]}" if isinstance(choices, range)
                     else ", ".join(map(repr, choices)))
            raise traitlets.TraitError(tr("{name} must be one of {choices}; got {value!r}", name=name,
                                          choices=shown, value=value))
        return value

    @traitlets.observe("history_len", "scale_margin", "amax_algo", "amax_tensor")
    def _select(self, change: dict | None) -> None:
        s = getattr(self, "_states", {}).get((self.amax_tensor, self.history_len, self.amax_algo, self.scale_margin))
        if s is not None:     # (None only while the traits are set one by one in __init__)
            self.state: ExplorerState = s

    @property
    def readout_html(self) -> str:
        """The readout of the current setting, as the page shows it (for the still picture and the tests)."""
        return readout_html(self.state)

    def words(self) -> dict:
        return {"tensor": tr("tensor"), "algo": tr("algorithm"), "history": tr("history"), "margin": tr("margin"),
                "head": tr("<b>{tensor} in {fmt}</b> · delayed scaling, history {history}, <code>{algo}</code>, "
                           "margin {margin}:"),
                "saturated": tr("saturated at {n} of {total} steps"),
                "flushed": tr("({worst}); flushed to zero on average"),
                "worst": tr("worst step {step}: <b>{pct}</b> of its values saturated"),
                "none": tr("no step saturates"),
                "jit": tr("just-in-time scaling: saturated at {n} steps; flushed on average {pct}."),
                "legend": {"amax": tr("amax of the step (recorded)"),
                           "kept": tr("largest value the delayed scale keeps: {fmt} max {max} / scale"),
                           "jit": tr("just-in-time: {fmt} max / scale = amax · 2^margin"),
                           "sat": tr("step that saturates (delayed)")},
                "xlabel": tr("training step"), "ylabel": tr("magnitude |x| (log₂ axis)"),
                "title": tr("{tensor} ({fmt}): a step whose amax is above the solid line saturates"),
                "worst_mark": tr("step {step}: {pct} saturated")}

    def still(self) -> W.Widget:
        lo, hi = self.states["tensors"][self.amax_tensor]["ylim"]
        return W.VBox([W.HTML(self.readout_html), W.Image(value=_still_png(self.state, lo, hi), format="png",
                                                          width=_WIDTH_PX)])


def _still_png(s: ExplorerState, lo: int, hi: int) -> bytes:
    """The setting's amax, the largest value its delayed and just-in-time scales keep and its saturating steps."""
    fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
    ax = fig.subplots()
    steps = torch.arange(len(s.amax)).numpy()
    m = fp8_max(s.fmt)
    ax.plot(steps, s.amax.numpy(), color="#24292f", lw=1.5, marker=".", ms=3, label="amax of the step (recorded)")
    ax.step(steps, (m / s.delayed_scale).numpy(), where="mid", color=dtype_colour(s.fmt), lw=2,
            label="largest value the delayed scale keeps (fp8_max / scale)")
    ax.plot(steps, (m / s.current_scale).numpy(), color=STATUS_COLOURS["neutral"], lw=1, ls="--",
            label="just-in-time: fp8_max / scale (= amax · 2^margin)")
    sat = torch.nonzero(s.delayed_saturated > 0).flatten()
    ax.plot(sat.numpy(), s.amax[sat].numpy(), ls="none", marker="o", ms=9, mfc="none", mew=2,
            color=BAND_COLOURS["overflow"], label="saturated, delayed")
    ax.set_yscale("log", base=2)
    ax.set_ylim(2.0 ** lo, 2.0 ** hi)
    ax.set_xlabel("training step")
    ax.set_ylabel("magnitude (log2 scale)")
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title(f"amax history explorer — {s.tensor} ({s.fmt}): a spike above the solid line saturates", fontsize=9)
    return png_bytes(fig)
