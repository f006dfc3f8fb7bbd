"""The sink timeline (notebook ``04_data_sinking``): sliders for the costs of a training step → a Gantt chart of the
loader, host and device lanes, with step time, steps/s and device utilisation, updating live; and the notebook's two
static figures, :func:`gantt_figure` (the four modes side by side) and :func:`measured_figure` (real runs next to
the simulator's prediction); :func:`summary_html` renders a :class:`ampkit.timeline.Summary` as the readout table.

Every number comes from :func:`ampkit.timeline.summarise` and every bar from :func:`ampkit.timeline.gantt_bars`;
the "measure on this machine" button fills the sliders from :func:`ampkit.sinking.calibrate`. Figures are
``matplotlib.figure.Figure`` objects with their own Agg canvas (:mod:`ampkit.widgets.style`), so nothing here touches
pyplot or the kernel's backend. The widget's figure is built once; a change replaces the bars of one
``PolyCollection`` and redraws it into an ``ipywidgets.Image``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import ipywidgets as W
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ampkit.i18n import mark, tr
from ampkit.sinking import Calibration, ModeMeasurement, calibrate
from ampkit.timeline import (
    EVENT_KINDS,
    GPU_LIKE,
    LANES,
    SINK_MODES,
    SimParams,
    Summary,
    Timeline,
    gantt_bars,
    summarise,
)
from ampkit.widgets.style import DPI, STATUS_COLOURS, WidgetView, freeze_layout, new_figure, png_bytes

__all__ = ["SinkTimeline", "KIND_COLOURS", "KIND_LABELS", "gantt_figure", "measured_figure", "summary_html"]

_US = 1e-6

#: Colours of the simulator's event kinds (:data:`ampkit.timeline.EVENT_KINDS`) in every sink chart.
KIND_COLOURS = {"prep": "#8c6bb1", "copy": "#fdae61", "handoff": "#80cdc1", "launch": "#4575b4",
                "compute": "#1a9850", "wait": "#bdbdbd", "sync": "#d73027", "callback": "#f46d43"}
#: Legend labels of the event kinds.
KIND_LABELS = {"prep": mark("prep (batch)"), "copy": mark("copy to device"), "handoff": mark("handoff (queue)"),
               "launch": mark("launch op"), "compute": mark("compute"), "wait": mark("wait"),
               "sync": mark("sync (read back)"), "callback": mark("callback")}

_EMPTY_LANE = {"loader": mark("no background loader: the host prepares each batch itself"),
               "host": "", "device": mark("device idle")}


def summary_html(s: Summary) -> str:
    """The readout table of one simulated mode; each number's cell is classed (``ampkit-sink-step``, ``-rate``,
    ``-util``, ``-syncs``, ``-speedup``) so browser tests can read it.

    >>> from ampkit.timeline import summarise
    >>> html = summary_html(summarise("data", SimParams(prep=1e-6, n_ops=2, op=1e-6), steps=4)[1])
    >>> "<td class='ampkit-sink-step'>2.2 µs</td>" in html, "<td class='ampkit-sink-speedup'>1.33x</td>" in html
    (True, True)
    """
    return ("<table class='ampkit-sink-summary' style='border-collapse:separate;border-spacing:14px 2px'>"
            + tr("<tr><th>mode</th><th>step time</th><th>steps/s</th>"
                 "<th>device busy</th><th>syncs/step</th><th>vs no sinking</th></tr>") +
            f"<tr><td><code>{s.mode}</code></td><td class='ampkit-sink-step'>{s.step_time * 1e6:.1f} µs</td>"
            f"<td class='ampkit-sink-rate'>{s.steps_per_s:,.0f}</td>"
            f"<td class='ampkit-sink-util'>{s.utilisation:.0%}</td>"
            f"<td class='ampkit-sink-syncs'>{s.syncs_per_step:.3g}</td>"
            f"<td class='ampkit-sink-speedup'>{s.speedup:.2f}x</td></tr></table>")


def _legend_handles() -> list[Patch]:
    return [Patch(color=KIND_COLOURS[k], label=KIND_LABELS[k]) for k in EVENT_KINDS]


def _setup_lanes(ax) -> None:
    ax.set_yticks(range(len(LANES)), list(LANES))
    ax.set_ylim(len(LANES) - 0.5, -0.5)
    ax.set_ylabel("lane")
    ax.grid(axis="x", alpha=0.3)


def _lane_verts(bars) -> tuple[list, list]:
    lane_y = {lane: i for i, lane in enumerate(LANES)}
    verts, colours = [], []
    for e in bars:
        y, x0, x1 = lane_y[e.lane], e.start / _US, e.end / _US
        verts.append([(x0, y - 0.35), (x1, y - 0.35), (x1, y + 0.35), (x0, y + 0.35)])
        colours.append(KIND_COLOURS.get(e.kind, "#999999"))
    return verts, colours


def _note_empty_lanes(ax, bars, x_at: float) -> list:
    """Say so, in the lane, when a lane has no bars (so an empty lane reads as "nothing happens", not as a bug)."""
    used = {e.lane for e in bars}
    return [ax.text(x_at, i, _EMPTY_LANE[lane], va="center", ha="left", fontsize=8, color=STATUS_COLOURS["neutral"],
                    style="italic") for i, lane in enumerate(LANES) if lane not in used and _EMPTY_LANE[lane]]


def gantt_figure(timelines: Mapping[str, Timeline], title: str = "", width: float = 8.0) -> Figure:
    """One Gantt chart per simulated timeline (``{mode: Timeline}``, e.g. :func:`ampkit.timeline.simulate_all`), on
    one time axis, each titled with its step time and device utilisation; a legend of the event kinds below.

    >>> from ampkit.timeline import simulate_all
    >>> fig = gantt_figure(simulate_all(GPU_LIKE, steps=2), "demo")
    >>> len(fig.axes), bool(fig.get_figwidth() >= 6.5)
    (4, True)
    """
    if not timelines:
        raise ValueError(tr("timelines must hold at least one {mode: Timeline}"))
    fig = new_figure(width, 1.35 * len(timelines) + 1.1)
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False)[:, 0]
    end = max(tl.total for tl in timelines.values()) / _US
    for ax, (mode, tl) in zip(axes, timelines.items()):
        _setup_lanes(ax)
        bars = gantt_bars(tl, max_bars=600)
        verts, colours = _lane_verts(bars)
        ax.add_collection(PolyCollection(verts, facecolors=colours, edgecolors="none"))
        _note_empty_lanes(ax, bars, 0.01 * end)
        ax.set_title(f"{mode}: {tl.step_time / _US:.0f} µs/step, device computing {tl.utilisation:.0%} of the time, "
                     f"{tl.syncs} syncs in {tl.steps} steps", fontsize=9, loc="left")
    axes[-1].set_xlim(0, end * 1.01)
    axes[-1].set_xlabel("time since the first step began (µs)")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.legend(handles=_legend_handles(), loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    return fig


def measured_figure(measured: Mapping[str, ModeMeasurement], predicted: Mapping[str, float] | None = None,
                    title: str = "", width: float = 8.0) -> Figure:
    """Every real run of each mode as a dot (seconds per step, from ``ModeMeasurement.runs``), its median as a bar,
    and the simulator's prediction (``{mode: seconds per step}``) as a diamond.

    >>> from ampkit.sinking import ModeMeasurement
    >>> m = {"none": ModeMeasurement("none", 2e-4, 16, 16, 0.0, (2e-4, 2.2e-4, 1.9e-4))}
    >>> fig = measured_figure(m, {"none": 2.1e-4}, "demo"); fig.axes[0].get_xlabel()
    'time per step (µs)'
    """
    if not measured:
        raise ValueError(tr("measured must hold at least one {mode: ModeMeasurement}"))
    predicted = dict(predicted or {})
    names = list(measured)
    fig = new_figure(width, 0.55 * len(names) + 1.9)
    ax = fig.add_subplot(1, 1, 1)
    for i, name in enumerate(names):
        m = measured[name]
        runs = list(getattr(m, "runs", ()) or (m.step_time,))
        offsets = [0.22 * ((j % 5) - 2) / 2 for j in range(len(runs))]     # spread the dots so none hide
        ax.scatter([r / _US for r in runs], [i + o for o in offsets], s=14, color=STATUS_COLOURS["neutral"],
                   alpha=0.6, zorder=2)
        ax.barh(i, m.step_time / _US, height=0.6, color="#0969da", alpha=0.25, zorder=1)
        ax.plot([m.step_time / _US] * 2, [i - 0.3, i + 0.3], color="#0969da", lw=2.5, zorder=3)
        if name in predicted:
            ax.plot(predicted[name] / _US, i, marker="D", ms=8, mfc="none", mec=STATUS_COLOURS["warn"], mew=2,
                    ls="none", zorder=4)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.4, -0.6)
    ax.set_xlim(left=0)
    ax.set_xlabel("time per step (µs)")
    ax.set_ylabel("mode")
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], marker="o", ls="none", color=STATUS_COLOURS["neutral"], label="one run"),
               Line2D([], [], color="#0969da", lw=2.5, label="median run")]
    if predicted:
        handles.append(Line2D([], [], marker="D", ls="none", mfc="none", mec=STATUS_COLOURS["warn"], mew=2,
                              label="simulator's prediction"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    ax.set_title(title or "Measured on this machine", fontsize=10)
    return fig


class SinkTimeline(WidgetView):
    """Sliders for mode, sink_size, data-prep time, launch overhead, ops per step and op time (+ whether the device
    runs asynchronously, as a GPU does) → the simulated timeline.

    Controls: ``.mode`` (ToggleButtons), ``.sink_size``, ``.prep``, ``.launch``, ``.n_ops``, ``.op`` (sliders; times in
    µs), ``.async_device`` (Checkbox), ``.measure_button``. State: ``.params``, ``.timeline``, ``.summary``,
    ``.bars``, ``.calibration`` (after a measurement).

    >>> w = SinkTimeline(); w.mode.value = "data+graph+loop"; w.sink_size.value = 8
    >>> w.summary.syncs_per_step
    0.125
    """

    def __init__(self, params: SimParams = GPU_LIKE, mode: str = "none",
                 calibrate_fn: Callable[[], Calibration] | None = None, dpi: int = DPI):
        self.base = params
        self.calibrate_fn = calibrate_fn
        self.calibration: Calibration | None = None
        style = {"description_width": "150px"}
        lay = W.Layout(width="480px")
        self.mode = W.ToggleButtons(options=list(SINK_MODES), value=mode, description=tr("mode"), style=style)
        self.sink_size = W.IntSlider(value=params.sink_size, min=1, max=32, description=tr("sink_size (steps)"),
                                     style=style, layout=lay)
        self.prep = W.FloatLogSlider(value=params.prep / _US, base=10, min=0, max=4, step=0.01,
                                     description=tr("data prep (µs/batch)"), readout_format=".3g", style=style,
                                     layout=lay)
        self.launch = W.FloatLogSlider(value=params.launch / _US, base=10, min=-1, max=2, step=0.01,
                                       description=tr("launch (µs/op)"), readout_format=".3g", style=style, layout=lay)
        self.n_ops = W.IntSlider(value=params.n_ops, min=1, max=400, description=tr("ops per step"), style=style,
                                 layout=lay)
        self.op = W.FloatLogSlider(value=params.op / _US, base=10, min=-1, max=3, step=0.01,
                                   description=tr("op time (µs)"), readout_format=".3g", style=style, layout=lay)
        self.async_device = W.Checkbox(value=params.async_device, description=tr("asynchronous device (GPU-like)"),
                                       indent=False, layout=W.Layout(width="260px", margin="0 0 0 155px"))
        self.measure_button = W.Button(description=tr("measure on this machine"), icon="stopwatch",
                                       layout=W.Layout(width="220px"))
        self.status = W.HTML()
        self.readout = W.HTML()
        self.readout.add_class("ampkit-sink-readout")
        self.image = W.Image(format="png")
        self.image.add_class("ampkit-sink-chart")
        self._build_figure(dpi)
        self.params: SimParams = params
        self.timeline: Timeline | None = None
        self.summary: Summary | None = None
        self.bars: list = []
        self.redraws = 0
        for c in (self.mode, self.sink_size, self.prep, self.launch, self.n_ops, self.op, self.async_device):
            c.observe(self._on_change, names="value")
        self.measure_button.on_click(self._on_measure)
        self._update()
        controls = W.VBox([self.mode, self.sink_size, self.prep, self.launch, self.n_ops, self.op,
                           W.HBox([self.async_device, self.measure_button]), self.status])
        self.widget = W.VBox([controls, self.readout, self.image])
        self.widget.add_class("ampkit-sink-timeline")

    # -- figure: built once ---------------------------------------------------------------------------------
    def _build_figure(self, dpi: int) -> None:
        self.fig = new_figure(8.0, 3.0, dpi=dpi)
        self.ax = self.fig.add_subplot(1, 1, 1)
        _setup_lanes(self.ax)
        self.ax.set_xlabel("time since the first step began (µs)")
        self.collection = PolyCollection([], edgecolors="none")
        self.ax.add_collection(self.collection)
        self.fig.legend(handles=_legend_handles(), loc="outside lower center", ncol=4, fontsize=8, frameon=False)
        self.title = self.ax.set_title("", fontsize=10)
        self._notes: list = []

    @property
    def fusion(self) -> float:
        """The compiled step's compute as a fraction of the eager ops' compute, from the base costs (1.0 when
        the graph only saves launches, as CUDA graphs do; < 1 when the compiler also fused work away)."""
        b = self.base
        if b.graph_compute is None or b.step_compute == 0:
            return 1.0
        return b.graph_compute / b.step_compute

    def _read_params(self) -> SimParams:
        b = self.base
        n_ops, op = int(self.n_ops.value), self.op.value * _US
        return SimParams(prep=self.prep.value * _US, copy=b.copy, n_ops=n_ops, launch=self.launch.value * _US,
                         op=op, sync=b.sync, callback=b.callback, handoff=b.handoff, graph_launch=b.graph_launch,
                         graph_compute=None if b.graph_compute is None else self.fusion * n_ops * op,
                         depth=b.depth, sink_size=int(self.sink_size.value),
                         async_device=bool(self.async_device.value))

    def _on_change(self, change: dict) -> None:
        self._update()

    def _update(self) -> None:
        self.params = self._read_params()
        self.timeline, self.summary = summarise(self.mode.value, self.params)
        self.bars = gantt_bars(self.timeline, max_bars=1500)
        verts, colours = _lane_verts(self.bars)
        self.collection.set_verts(verts)
        self.collection.set_facecolor(colours)   # set_facecolors is its alias
        end = max(self.timeline.total / _US, 1e-9)
        self.ax.set_xlim(0, end * 1.01)
        for note in self._notes:
            note.remove()
        self._notes = _note_empty_lanes(self.ax, self.bars, 0.01 * end)
        s = self.summary
        self.title.set_text(f"Simulated {s.mode}: {self.timeline.steps} steps, {s.step_time / _US:.1f} µs/step, "
                            f"device computing {s.utilisation:.0%} of the time")
        self.readout.value = summary_html(s)
        if self.redraws == 0:  # lay the figure out once, on its first content; later moves only redraw
            freeze_layout(self.fig)
        self.image.value = png_bytes(self.fig)
        self.redraws += 1

    # -- measure on this machine ----------------------------------------------------------------------------
    def _on_measure(self, _button=None) -> None:
        self.measure()

    def measure(self) -> None:
        """Fill the sliders from a calibration of this machine (``calibrate_fn``, default
        :func:`ampkit.sinking.calibrate` without compiling), then redraw once."""
        self.status.value = "<i>" + tr("measuring…") + "</i>"
        fn = self.calibrate_fn
        cal = calibrate(compile=False) if fn is None else fn()
        self.calibration = cal
        p = cal.params(sink_size=int(self.sink_size.value))
        self.base = p
        controls = (self.mode, self.sink_size, self.prep, self.launch, self.n_ops, self.op, self.async_device)
        for c in controls:
            c.unobserve(self._on_change, names="value")
        try:
            self.prep.value = _clip(p.prep / _US, self.prep)
            self.launch.value = _clip(p.launch / _US, self.launch)
            self.n_ops.value = int(min(max(p.n_ops, self.n_ops.min), self.n_ops.max))
            self.op.value = _clip(p.op / _US, self.op)
            self.async_device.value = p.async_device
        finally:
            for c in controls:
                c.observe(self._on_change, names="value")
        measured = tr("measured on {device}: launch {launch:.2f} µs/op, op {op:.2f} µs, {n} ops/step, "
                      "prep {prep:.0f} µs/batch, data-sink handoff {handoff:.0f} µs/batch", device=cal.device,
                      launch=p.launch / _US, op=p.op / _US, n=p.n_ops, prep=p.prep / _US, handoff=p.handoff / _US)
        self.status.value = f"<span class='ampkit-sink-status'>{measured}</span>"
        self._update()



def _clip(value: float, slider: W.FloatLogSlider) -> float:
    lo, hi = slider.base ** slider.min, slider.base ** slider.max
    return min(max(value, lo), hi)
