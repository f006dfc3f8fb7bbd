"""Notebook ``04_data_sinking``'s still figures and the sink charts' one look: :func:`gantt_figure` (the four modes
side by side), :func:`measured_figure` (real runs next to the simulator's prediction), :func:`summary_html` (a
:class:`ampkit.timeline.Summary` as the readout table), the event kinds' colours and labels (:data:`KIND_COLOURS`,
:data:`KIND_LABELS`, read by these figures and by the browser-drawn :class:`ampkit.widgets.sink_timeline.SinkTimeline`
alike).

Every number comes from :func:`ampkit.timeline.summarise` and every bar from :func:`ampkit.timeline.gantt_bars`.
Figures are ``matplotlib.figure.Figure`` objects with their own Agg canvas (:mod:`ampkit.widgets.style`), so nothing
here touches pyplot or the kernel's backend.
"""
from __future__ import annotations

from collections.abc import Mapping

from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ampkit.i18n import mark, tr
from ampkit.sinking import ModeMeasurement
from ampkit.timeline import EVENT_KINDS, LANES, Event, Summary, Timeline, gantt_bars
from ampkit.widgets.style import STATUS_COLOURS, new_figure

__all__ = ["KIND_COLOURS", "KIND_LABELS", "SUMMARY_HEADER", "EMPTY_LANE_NOTES", "gantt_figure", "timeline_figure",
           "measured_figure", "summary_html"]

_US = 1e-6

#: Colours of the simulator's event kinds (:data:`ampkit.timeline.EVENT_KINDS`) in every sink chart.
KIND_COLOURS = {"prep": "#8c6bb1", "copy": "#fdae61", "handoff": "#80cdc1", "launch": "#4575b4",
                "compute": "#1a9850", "wait": "#bdbdbd", "sync": "#d73027", "callback": "#f46d43"}
#: Legend labels of the event kinds.
KIND_LABELS = {"prep": mark("prep (batch)"), "copy": mark("copy to device"), "handoff": mark("handoff (queue)"),
               "launch": mark("launch op"), "compute": mark("compute"), "wait": mark("wait"),
               "sync": mark("sync (read back)"), "callback": mark("callback")}

#: What an empty lane says (so it reads as "nothing happens here", not as a bug); "" for a lane that is never empty.
_LANE_WORDS = (mark("loader"), mark("host"), mark("device"))   # timeline.LANES, marked for the catalog
EMPTY_LANE_NOTES = {"loader": mark("no background loader: the host prepares each batch itself"),
               "host": "", "device": mark("device idle")}
#: The readout table's header row (one catalog message; the browser-drawn view reads its cells).
SUMMARY_HEADER = mark("<tr><th>mode</th><th>step time</th><th>steps/s</th>"
                      "<th>device busy</th><th>syncs/step</th><th>vs no sinking</th></tr>")


# port: js/sink.js printed
def summary_html(s: Summary) -> str:
    """The readout table of one simulated mode; each number's cell is classed (``ampkit-sink-step``, ``-rate``,
    ``-util``, ``-syncs``, ``-speedup``) so browser tests can read it.

    >>> from ampkit.timeline import SimParams, summarise
    >>> html = summary_html(summarise("data", SimParams(prep=1e-6, n_ops=2, op=1e-6), steps=4)[1])
    >>> "<td class='ampkit-sink-step'>2.2 µs</td>" in html, "<td class='ampkit-sink-speedup'>1.33x</td>" in html
    (True, True)
    """
    return ("<table class='ampkit-sink-summary' style='border-collapse:separate;border-spacing:14px 2px'>"
            + tr(SUMMARY_HEADER) +
            f"<tr><td><code>{s.mode}</code></td><td class='ampkit-sink-step'>{s.step_time * 1e6:.1f} µs</td>"
            f"<td class='ampkit-sink-rate'>{s.steps_per_s:,.0f}</td>"
            f"<td class='ampkit-sink-util'>{s.utilisation:.0%}</td>"
            f"<td class='ampkit-sink-syncs'>{s.syncs_per_step:.3g}</td>"
            f"<td class='ampkit-sink-speedup'>{s.speedup:.2f}x</td></tr></table>")


def _legend_handles() -> list[Patch]:
    return [Patch(color=KIND_COLOURS[k], label=KIND_LABELS[k]) for k in EVENT_KINDS]


def _setup_lanes(ax) -> None:
    ax.set_yticks(range(len(LANES)), [tr(lane) for lane in LANES])   # the lanes' names in the kit's language
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
    return [ax.text(x_at, i, EMPTY_LANE_NOTES[lane], va="center", ha="left", fontsize=8,
                    color=STATUS_COLOURS["neutral"], style="italic")
            for i, lane in enumerate(LANES) if lane not in used and EMPTY_LANE_NOTES[lane]]


def gantt_figure(timelines: Mapping[str, Timeline], title: str = "", width: float = 8.0) -> Figure:
    """One Gantt chart per simulated timeline (``{mode: Timeline}``, e.g. :func:`ampkit.timeline.simulate_all`), on
    one time axis, each titled with its step time and device utilisation; a legend of the event kinds below.

    >>> from ampkit.timeline import GPU_LIKE, simulate_all
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


def timeline_figure(timeline: Timeline, bars: list[Event], title: str = "", width: float = 8.0) -> Figure:
    """One Gantt chart of one simulated setting: its ``bars`` (:func:`ampkit.timeline.gantt_bars` of ``timeline``)
    on the lanes, a time axis in µs to 1.01 x the run, empty lanes said so, a legend of the event kinds (the still
    picture of :class:`ampkit.widgets.sink_timeline.SinkTimeline`).

    >>> from ampkit.timeline import GPU_LIKE, simulate
    >>> tl = simulate("none", GPU_LIKE, steps=2)
    >>> fig = timeline_figure(tl, gantt_bars(tl), "demo"); fig.axes[0].get_xlabel()
    'time since the first step began (µs)'
    """
    fig = new_figure(width, 3.0)
    ax = fig.add_subplot(1, 1, 1)
    _setup_lanes(ax)
    ax.set_xlabel("time since the first step began (µs)")
    verts, colours = _lane_verts(bars)
    ax.add_collection(PolyCollection(verts, facecolors=colours, edgecolors="none"))
    end = max(timeline.total / _US, 1e-9)
    ax.set_xlim(0, end * 1.01)
    _note_empty_lanes(ax, bars, 0.01 * end)
    ax.set_title(title, fontsize=10)
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
    ax.set_title(title or tr("Measured on this machine"), fontsize=10)
    return fig
