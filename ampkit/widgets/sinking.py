"""The sink timeline (notebook ``04_data_sinking``): sliders for the costs of a training step → a Gantt chart of the
loader, host and device lanes, with step time, steps/s and device utilisation, updating live.

Every number comes from :func:`ampkit.timeline.summarise` and every bar from :func:`ampkit.timeline.gantt_bars`;
the "measure on this machine" button fills the sliders from :func:`ampkit.sinking.calibrate`. The figure is built
once; a change replaces the bars of one ``PolyCollection`` and redraws it into an ``ipywidgets.Image``.
"""
from __future__ import annotations

import io
from collections.abc import Callable

import ipywidgets as W
import matplotlib

matplotlib.use("Agg")  # noqa: E402  (library code never opens windows)
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ampkit.timeline import GPU_LIKE, KIND_COLOURS, LANES, MODES, SimParams, Summary, Timeline, gantt_bars, \
    summarise  # noqa: E402

__all__ = ["SinkTimeline"]

_US = 1e-6


class SinkTimeline:
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
                 calibrate_fn: Callable[[], object] | None = None, dpi: int = 72):
        self.base = params
        self.calibrate_fn = calibrate_fn
        self.calibration = None
        style = {"description_width": "150px"}
        lay = W.Layout(width="480px")
        self.mode = W.ToggleButtons(options=list(MODES), value=mode, description="mode", style=style)
        self.sink_size = W.IntSlider(value=params.sink_size, min=1, max=32, description="sink_size (steps)",
                                     style=style, layout=lay)
        self.prep = W.FloatLogSlider(value=params.prep / _US, base=10, min=0, max=4, step=0.01,
                                     description="data prep (µs/batch)", readout_format=".3g", style=style, layout=lay)
        self.launch = W.FloatLogSlider(value=params.launch / _US, base=10, min=-1, max=2, step=0.01,
                                       description="launch (µs/op)", readout_format=".3g", style=style, layout=lay)
        self.n_ops = W.IntSlider(value=params.n_ops, min=1, max=400, description="ops per step", style=style,
                                 layout=lay)
        self.op = W.FloatLogSlider(value=params.op / _US, base=10, min=-1, max=3, step=0.01,
                                   description="op time (µs)", readout_format=".3g", style=style, layout=lay)
        self.async_device = W.Checkbox(value=params.async_device, description="asynchronous device (GPU-like)",
                                       indent=False, layout=W.Layout(width="260px", margin="0 0 0 155px"))
        self.measure_button = W.Button(description="measure on this machine", icon="stopwatch",
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
        self.fig = Figure(figsize=(8.0, 2.4), dpi=dpi)
        self.ax = self.fig.add_subplot(1, 1, 1)
        self.ax.set_yticks(range(len(LANES)), [lane for lane in LANES])
        self.ax.set_ylim(len(LANES) - 0.5, -0.5)
        self.ax.set_xlabel("time (µs)")
        self.collection = PolyCollection([], edgecolors="none")
        self.ax.add_collection(self.collection)
        self.ax.legend(handles=[Patch(color=c, label=k) for k, c in KIND_COLOURS.items()], loc="upper center",
                       bbox_to_anchor=(0.5, -0.32), ncol=len(KIND_COLOURS), fontsize=7, frameon=False)
        self.title = self.ax.set_title("", fontsize=9)
        self.fig.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.33)

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
        lane_y = {lane: i for i, lane in enumerate(LANES)}
        verts, colours = [], []
        for e in self.bars:
            y, x0, x1 = lane_y[e.lane], e.start / _US, e.end / _US
            verts.append([(x0, y - 0.35), (x1, y - 0.35), (x1, y + 0.35), (x0, y + 0.35)])
            colours.append(KIND_COLOURS.get(e.kind, "#999999"))
        self.collection.set_verts(verts)
        self.collection.set_facecolors(colours)
        self.ax.set_xlim(0, max(self.timeline.total / _US, 1e-9) * 1.01)
        s = self.summary
        self.title.set_text(f"{s.mode}: {self.timeline.steps} steps, {s.step_time / _US:.1f} µs/step, "
                            f"device busy {s.utilisation:.0%}")
        self.readout.value = s.html()
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png")
        self.image.value = buf.getvalue()
        self.redraws += 1

    # -- measure on this machine ----------------------------------------------------------------------------
    def _on_measure(self, _button=None) -> None:
        self.measure()

    def measure(self) -> None:
        """Fill the sliders from a calibration of this machine (``calibrate_fn``, default
        :func:`ampkit.sinking.calibrate` without compiling), then redraw once."""
        self.status.value = "<i>measuring…</i>"
        fn = self.calibrate_fn
        if fn is None:
            from ampkit.sinking import calibrate

            def fn():
                return calibrate(compile=False)
        cal = fn()
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
        self.status.value = (f"<span class='ampkit-sink-status'>measured on {cal.device}: launch "
                             f"{p.launch / _US:.2f} µs/op, op {p.op / _US:.2f} µs, {p.n_ops} ops/step, "
                             f"prep {p.prep / _US:.0f} µs/batch, data-sink handoff {p.handoff / _US:.0f} µs/batch"
                             "</span>")
        self._update()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _clip(value: float, slider: W.FloatLogSlider) -> float:
    lo, hi = slider.base ** slider.min, slider.base ** slider.max
    return min(max(value, lo), hi)
