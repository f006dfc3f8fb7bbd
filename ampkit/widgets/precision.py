"""The O-level picker (notebook 02): slide O0 → O3, pick fp16/bf16, watch dtypes, memory, speed and loss change.

A thin view over :func:`ampkit.lessons.autocast_and_levels.run_level` (cached per (model, level, dtype) in a
:class:`ampkit.lessons.autocast_and_levels.LevelRunCache`), :func:`ampkit.precision.trace_dtypes` and
:func:`ampkit.precision.memory_report`. The figure (loss vs O0, memory bars vs O0) is a
:func:`ampkit.widgets.style.new_figure` with its own Agg canvas (importing this module never touches the kernel's
matplotlib backend), built once; each change updates its artists and re-renders it to an ``ipywidgets.Image``.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W

from ampkit.device import autocast_dtypes, device_report
from ampkit.dtypes import short_name
from ampkit.i18n import mark, tr
from ampkit.lessons.autocast_and_levels import LevelRun, LevelRunCache
from ampkit.precision import LEVELS, LayerTrace, resolve_level, speed_phrase
from ampkit.widgets.style import (
    DTYPE_COLOURS,
    STATUS_COLOURS,
    WidgetView,
    dtype_colour,
    freeze_layout,
    new_figure,
    png_bytes,
)

__all__ = ["OLevelPicker", "dtype_table_html", "summary_html", "MEMORY_FIELDS"]

#: The memory categories shown as bars (keys of :meth:`ampkit.precision.MemoryReport.as_dict`).
MEMORY_FIELDS: tuple[str, ...] = ("weights", "grads", "optimizer state", "master weights", "master grads")


def dtype_table_html(trace: list[LayerTrace], level: str, dtype: str) -> str:
    """The per-layer dtype table (layer, type, params, input, output, note) as HTML, dtypes coloured."""
    def cell(s: str) -> str:
        colour = DTYPE_COLOURS.get(s)
        return f"<td style='color:{colour}'><b>{s}</b></td>" if colour else f"<td>{html.escape(s)}</td>"

    head = "".join(f"<th>{tr(h)}</th>" for h in (mark("layer"), mark("type"), mark("params"), mark("input"),
                                                  mark("output"), mark("note")))
    body = []
    for t in trace:
        r = t.as_row()
        body.append(f"<tr><td><code>{html.escape(r['layer'])}</code></td><td>{r['type']}</td>"
                    f"{cell(r['params'])}{cell(r['input'])}{cell(r['output'])}"
                    f"<td>{html.escape(tr(r['note']))}</td></tr>")
    what = (tr("fp32 only (the low-dtype toggle does not apply)") if level == "O0"
            else short_name(dtype))
    caption = tr("<b>{level}</b> with {what}: dtypes per layer in one forward pass", level=level, what=what)
    return (f"<div class='ampkit-precision-table'><p>{caption}</p><table>{head}{''.join(body)}</table></div>")


def _fmt_bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.2f} MiB"


def summary_html(run: LevelRun, ref: LevelRun) -> str:
    """One line per measured fact of ``run`` next to the O0 reference ``ref``: step time, memory, final loss."""
    mem, mem0 = run.memory.as_dict(), ref.memory.as_dict()
    loss, loss0 = run.history.final_loss(), ref.history.final_loss()
    verdict = (f"<b style='color:{STATUS_COLOURS['bad']}'>{tr('diverged (inf/NaN loss)')}</b>"
               if run.history.diverged else f"{loss:.4f} (O0: {loss0:.4f})")
    if run.level == "O0":
        speed = tr("<b>{ms:.2f} ms</b> (this is the reference)", ms=run.step_time * 1e3)
    elif run.step_time > 0 and ref.step_time > 0:
        speed = (f"<b>{run.step_time * 1e3:.2f} ms</b> vs O0 {ref.step_time * 1e3:.2f} ms: "
                 f"<b>{speed_phrase(run.step_time, ref.step_time)}</b>")
    else:
        speed = tr("not measured")
    parts = [
        "<li>" + tr("step time (median, measured here; noisy on a busy machine): {speed}", speed=speed) + "</li>",
        "<li>" + tr("training memory (weights + grads + optimizer state + masters, from the tensors): "
                    "<b>{total}</b> vs O0 {total0} (weights {weights}, masters {masters})",
                    total=_fmt_bytes(mem["total"]), total0=_fmt_bytes(mem0["total"]),
                    weights=_fmt_bytes(mem["weights"]), masters=_fmt_bytes(mem["master weights"])) + "</li>",
        "<li>" + tr("final loss (mean of last 10 steps): {verdict}", verdict=verdict) + "</li>",
    ]
    return (f"<div class='ampkit-precision-summary'><b>{run.label}</b> "
            f"<ul>{''.join(parts)}</ul></div>")


class OLevelPicker(WidgetView):
    """An O-level slider (O0 → O3) and a dtype toggle (dtypes with native hardware support marked ⚡) for one small
    model: per-layer dtype table, memory bars and loss curve against O0, measured step time.

    Results per (model, level, dtype) are cached; a missing one is computed when selected (``auto_run``) or by
    the "run all" button, with a progress bar. Training uses ``num_threads`` CPU threads (default 1: the model is
    tiny, so extra threads mostly add waiting; see :func:`ampkit.lessons.autocast_and_levels.run_level`). The
    models train on the CPU;
    the default dtype is :attr:`ampkit.device.DeviceReport.default_dtype` there (decided from the CPU's
    instruction set, never from a timing: bf16 on every CPU), unless ``dtype`` pins one.

    >>> picker = OLevelPicker(steps=5, dtype="bf16")
    >>> picker.slider.value = "O2"
    >>> picker.state.level, picker.rows[1]["params"]
    ('O2', 'bf16')
    """

    def __init__(self, model: str = "mlp_ln", steps: int = 60, lr: float = 3e-3, optimizer: str = "adam",
                 seed: int = 0, level: str = "O0", dtype: str | None = None, auto_run: bool = True,
                 device: str = "cpu", num_threads: int | None = 1):
        self.model = model
        self.auto_run = auto_run
        self.cache = LevelRunCache(steps=steps, lr=lr, optimizer=optimizer, seed=seed, num_threads=num_threads)
        rep = device_report(device)
        supported = autocast_dtypes(device)
        fast = rep.fast_dtypes  # decided from the hardware, never from a timing
        options = [((short_name(d) + (tr(" ⚡ native here") if d in fast else "")), short_name(d)) for d in supported]
        values = [v for _, v in options]
        if dtype is not None:
            try:
                default = short_name(dtype)
            except (TypeError, ValueError):
                default = ""
            if default not in values:
                raise ValueError(tr("dtype must be one of {choices} (autocast on {device}); got {dtype!r}",
                                    choices=", ".join(values), device=device, dtype=dtype))
        else:
            default = short_name(rep.default_dtype) if rep.default_dtype is not None else values[0]
        self.slider = W.SelectionSlider(options=list(LEVELS), value=resolve_level(level), description="O-level",
                                        continuous_update=False, layout=W.Layout(width="360px"))
        self.slider.add_class("ampkit-olevel-slider")
        self.dtype = W.ToggleButtons(options=options, value=default, description=tr("low dtype"))
        self.run_button = W.Button(description=tr("run all missing"), icon="play",
                                   tooltip=tr("train every (level, dtype) not yet cached"))
        self.progress = W.IntProgress(value=0, min=0, max=steps, description=tr("training"), bar_style="info")
        self.status = W.HTML()
        self.image = W.Image(format="png")
        self.image.add_class("ampkit-precision-figure")
        self.caption = W.HTML()  # says which run the figure shows (set after each redraw)
        self.caption.add_class("ampkit-precision-caption")
        self.summary = W.HTML()
        self.table = W.HTML()
        self.state: LevelRun | None = None
        self.reference: LevelRun | None = None
        self.rows: list[dict[str, str]] = []
        self._build_figure()
        self.slider.observe(self._on_change, names="value")
        self.dtype.observe(self._on_change, names="value")
        self.run_button.on_click(self._on_run_all)
        self._update()
        self.widget = W.VBox([W.HBox([self.slider, self.dtype]), W.HBox([self.run_button, self.progress, self.status]),
                              self.image, self.caption, self.summary, self.table])
        self.widget.add_class("ampkit-olevel-picker")

    # ----------------------------------------------------------------- figure, built once
    def _build_figure(self) -> None:
        self._pngs: dict[tuple[str, str, str], bytes] = {}  # (model, level, dtype) -> the figure drawn for it
        self.fig = new_figure(9.0, 3.3)
        self.ax_loss, self.ax_mem = self.fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
        # the O0 reference is drawn dashed *on top of* the run, so it stays visible where the two coincide
        (self.line_ref,) = self.ax_loss.plot([], [], color="#24292f", lw=1.3, ls=(0, (4, 3)), label="O0 (fp32)",
                                             zorder=3)
        (self.line_run,) = self.ax_loss.plot([], [], color=DTYPE_COLOURS["bf16"], lw=2.6, alpha=0.85,
                                             label="this level")
        self.ax_loss.set(xlabel=mark("training step"), ylabel=mark("loss (cross-entropy, nats)"))
        self.ax_loss.legend(loc="upper right", fontsize=9)
        self.loss_title = self.ax_loss.set_title("loss vs O0", fontsize=10)
        self.nan_marker = self.ax_loss.axvline(0, color=STATUS_COLOURS["bad"], ls=":", lw=1.2, visible=False)
        (self.nan_x,) = self.ax_loss.plot([], [], marker="X", ms=10, ls="none", color=STATUS_COLOURS["bad"],
                                          zorder=5, visible=False)
        self.nan_text = self.ax_loss.annotate("", (0, 0), textcoords="offset points", xytext=(8, -14), fontsize=9,
                                              color=STATUS_COLOURS["bad"], visible=False)
        x = range(len(MEMORY_FIELDS))
        self.bars_ref = self.ax_mem.bar([i - 0.2 for i in x], [0] * len(x), width=0.4, color=DTYPE_COLOURS["fp32"],
                                        alpha=0.45, label="O0 (fp32)")
        self.bars_run = self.ax_mem.bar([i + 0.2 for i in x], [0] * len(x), width=0.4, color=DTYPE_COLOURS["bf16"],
                                        label="this level")
        self.ax_mem.set_xticks(list(x), [mark("weights"), mark("grads"), mark("optim.\nstate"),
                                                mark("master\nweights"), mark("master\ngrads")],
                               fontsize=9)
        self.ax_mem.set_ylabel("memory (KiB)")
        self.ax_mem.legend(loc="upper right", fontsize=9)
        self.mem_title = self.ax_mem.set_title("memory", fontsize=10)

    # ----------------------------------------------------------------- events
    def _progress_cb(self, step: int, hist) -> None:
        self.progress.value = step + 1

    def _get(self, level: str, dtype: str) -> LevelRun | None:
        if self.cache.has(self.model, level, dtype):
            return self.cache.get(self.model, level, dtype)
        if not self.auto_run:
            return None
        self.progress.value = 0
        self.status.value = tr("training {level} {dtype}…", level=level, dtype=dtype)
        run = self.cache.get(self.model, level, dtype, callback=self._progress_cb)
        self.status.value = ""
        return run

    def _on_change(self, change: dict) -> None:
        self._update()

    def _on_run_all(self, _button=None) -> None:
        """Compute every (level, dtype) not yet cached, so that toggling is instant afterwards."""
        auto, self.auto_run = self.auto_run, True
        try:
            for dt in [v for _, v in self.dtype.options]:
                for lv in LEVELS:
                    if not self.cache.has(self.model, lv, dt):
                        self._get(lv, dt)
        finally:
            self.auto_run = auto
        self.status.value = tr("all {n} runs cached", n=len(self.cache))
        self._update()

    def _update(self) -> None:
        level, dtype = self.slider.value, self.dtype.value
        ref = self._get("O0", dtype)
        run = self._get(level, dtype)
        if run is None or ref is None:
            self.status.value = tr("{level} {dtype} not computed yet: press “run all missing”", level=level,
                                   dtype=dtype)
            return
        self.state, self.reference = run, ref
        self.rows = [t.as_row() for t in run.trace]
        self.table.value = dtype_table_html(run.trace, run.level, run.dtype)
        self.summary.value = summary_html(run, ref)
        label = run.label
        key = (self.model, level, dtype)
        self._set_artists(run, ref)  # cheap; the PNG render is what costs, and it is done once per run
        png = self._pngs.get(key)
        if png is None:  # a (level, dtype) drawn before is shown again without a matplotlib redraw
            if not self._pngs:  # lay the figure out once, on its first content; later draws keep that layout
                freeze_layout(self.fig)
            png = self._pngs[key] = png_bytes(self.fig)
        self.image.value = png
        against = (tr("the fp32 reference itself") if run.level == "O0"
                   else tr("(coloured) against O0 (fp32, dark dashed)"))
        self.caption.value = "<i>" + tr("figure: {label} {against}, {steps} steps of {model}", label=label,
                                        against=against, steps=run.history.steps, model=self.model) + "</i>"

    def _set_artists(self, run: LevelRun, ref: LevelRun) -> None:
        """Put ``run`` against ``ref`` into the figure's artists (lines, NaN marks, bars, titles)."""
        # loss curves
        label, colour = run.label, (DTYPE_COLOURS["fp32"] if run.level == "O0" else dtype_colour(run.dtype))
        ys = [v if math.isfinite(v) else float("nan") for v in run.history.losses]
        self.line_ref.set_data(range(len(ref.history.losses)), ref.history.losses)
        self.line_ref.set_visible(run.level != "O0")  # O0 *is* the reference: one line, not two on top of each other
        self.line_run.set_data(range(len(ys)), ys)
        self.line_run.set_color(colour)
        self.line_run.set_label(label + (" (fp32, the reference)" if run.level == "O0" else ""))
        self.ax_loss.legend(handles=[h for h in (self.line_run, self.line_ref) if h.get_visible()],
                            loc="upper right", fontsize=9)
        finite = [v for v in ys + ref.history.losses if math.isfinite(v)]
        self.ax_loss.set_xlim(0, max(len(ys), len(ref.history.losses)) - 1 or 1)
        self.ax_loss.set_ylim(0, max(finite) * 1.05 if finite else 1)
        bad = next((i for i, v in enumerate(run.history.losses) if not math.isfinite(v)), None)
        self.nan_marker.set_visible(bad is not None)
        self.nan_x.set_visible(bad is not None)
        self.nan_text.set_visible(bad is not None)
        if bad is not None:  # matplotlib draws nothing for NaN: mark the last finite point and the step it broke
            last = next((v for v in reversed(ys[:bad]) if math.isfinite(v)), 0.0)
            self.nan_marker.set_xdata([bad, bad])
            self.nan_x.set_data([max(bad - 1, 0)], [last])
            self.nan_text.xy = (max(bad - 1, 0), last)
            self.nan_text.set_text(f"{label}: inf/NaN from step {bad}")
        if run.level == "O0":
            title = mark("loss: O0, the fp32 reference")
        else:  # say how far apart the two curves are: where they coincide, the title is what tells them apart
            both = [abs(a - b) for a, b in zip(run.history.losses, ref.history.losses)
                    if math.isfinite(a) and math.isfinite(b)]
            title = f"loss: {label} vs O0" + (f" (max |Δ| = {max(both):.1e})" if both and bad is None else "")
        self.loss_title.set_text(title + (f" — inf/NaN from step {bad}" if bad is not None else ""))
        # memory bars
        mem, mem0 = run.memory.as_dict(), ref.memory.as_dict()
        for bar, key in zip(self.bars_ref, MEMORY_FIELDS):
            bar.set_height(mem0[key] / 1024)
        for bar, key in zip(self.bars_run, MEMORY_FIELDS):
            bar.set_height(mem[key] / 1024)
            bar.set_color(colour)
        self.bars_run.set_label(label)
        self.ax_mem.legend(loc="upper right", fontsize=9)
        top = max(max(mem0[k] for k in MEMORY_FIELDS), max(mem[k] for k in MEMORY_FIELDS)) / 1024
        self.ax_mem.set_ylim(0, top * 1.15)
        self.mem_title.set_text(f"memory: {_fmt_bytes(mem['total'])} vs O0 {_fmt_bytes(mem0['total'])}")

