"""The O-level picker (notebook 02, ``02_autocast_and_levels.ipynb``): O0 → O3 × fp16/bf16, drawn in the browser.

A view over :func:`ampkit.lessons.autocast_and_levels.run_level` (cached per (model, level, dtype) in a
:class:`ampkit.lessons.autocast_and_levels.LevelRunCache`), :func:`ampkit.precision.trace_dtypes` and
:func:`ampkit.precision.memory_report`. The engine trains the runs; :func:`run_state` turns one into what the page
draws (``js/olevel.js``): its losses as Python's repr, the first non-finite step, the per-layer dtype table, the
memory per category and the summary lines as the engine prints them. The page only SELECTS among the trained runs,
so the saved notebook toggles them with no kernel; a run not trained yet is trained by the kernel when the page asks
(its progress streamed as messages), and without a kernel the page says so in one line. Step times are measurements:
they are sent as messages (:meth:`OLevelPicker.timings`), never kept in the saved state, so a re-execution does not
churn it.
"""
from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets as W
import traitlets

from ampkit.device import autocast_dtypes, device_report
from ampkit.dtypes import short_name
from ampkit.i18n import mark, tr
from ampkit.lessons.autocast_and_levels import LevelRun, LevelRunCache
from ampkit.precision import LEVELS, LayerTrace, level_label, resolve_level, speed_phrase
from ampkit.widgets.front import Control, FrontView
from ampkit.widgets.style import DTYPE_COLOURS, STATUS_COLOURS, dtype_colour, new_figure, png_bytes

__all__ = ["OLevelPicker", "dtype_table_html", "summary_html", "summary_lines", "run_state", "loss_title",
           "nonfinite_at", "MEMORY_FIELDS"]

#: The memory categories shown as bars (keys of :meth:`ampkit.precision.MemoryReport.as_dict`).
MEMORY_FIELDS: tuple[str, ...] = ("weights", "grads", "optimizer state", "master weights", "master grads")
_MEMORY_LABELS = (mark("weights"), mark("grads"), mark("optim. state"), mark("master weights"), mark("master grads"))
_COLUMNS = (mark("layer"), mark("type"), mark("params"), mark("input"), mark("output"), mark("note"))


def nonfinite_at(ys: list[float]) -> int | None:
    """The first step whose loss is inf/NaN (where :func:`ampkit.widgets.style.mark_nonfinite` puts its mark), or
    ``None``: the one rule the pages draw by.

    >>> nonfinite_at([1.0, 0.5, float("nan"), 0.4]), nonfinite_at([1.0])
    (2, None)
    """
    return next((i for i, y in enumerate(ys) if not math.isfinite(y)), None)


def table_caption(level: str, dtype: str) -> str:
    """The table's caption: which level and low dtype (O0 names none: it is fp32 only)."""
    what = tr("fp32 only (the low-dtype toggle does not apply)") if level == "O0" else short_name(dtype)
    return tr("<b>{level}</b> with {what}: dtypes per layer in one forward pass", level=level, what=what)


def dtype_table_html(trace: list[LayerTrace], level: str, dtype: str) -> str:
    """The per-layer dtype table (layer, type, params, input, output, note) as HTML, dtypes coloured."""
    def cell(s: str) -> str:
        colour = DTYPE_COLOURS.get(s)
        return f"<td style='color:{colour}'><b>{s}</b></td>" if colour else f"<td>{html.escape(s)}</td>"

    head = "".join(f"<th>{tr(h)}</th>" for h in _COLUMNS)
    body = []
    for t in trace:
        r = t.as_row()
        body.append(f"<tr><td><code>{html.escape(r['layer'])}</code></td><td>{r['type']}</td>"
                    f"{cell(r['params'])}{cell(r['input'])}{cell(r['output'])}"
                    f"<td>{html.escape(tr(r['note']))}</td></tr>")
    return (f"<div class='ampkit-precision-table'><p>{table_caption(level, dtype)}</p><table>{head}{''.join(body)}"
            "</table></div>")


def _fmt_bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.2f} MiB"


def summary_lines(run: LevelRun, ref: LevelRun) -> dict[str, str]:
    """The summary's lines as the engine prints them (simple inline markup only): ``speed`` (a measurement: never
    part of a saved state), ``memory`` and ``loss`` (deterministic for a seeded run)."""
    mem, mem0 = run.memory.as_dict(), ref.memory.as_dict()
    loss, loss0 = run.history.final_loss(), ref.history.final_loss()
    verdict = (f"<b>{tr('diverged (inf/NaN loss)')}</b>" if run.history.diverged
               else tr("{value} (O0: {ref})", value=f"{loss:.4f}", ref=f"{loss0:.4f}"))
    if run.level == "O0":
        speed = tr("<b>{ms:.2f} ms</b> (this is the reference)", ms=run.step_time * 1e3)
    elif run.step_time > 0 and ref.step_time > 0:
        speed = (f"<b>{run.step_time * 1e3:.2f} ms</b> vs O0 {ref.step_time * 1e3:.2f} ms: "
                 f"<b>{speed_phrase(run.step_time, ref.step_time)}</b>")
    else:
        speed = tr("not measured")
    return {
        "speed": tr("step time (median, measured here; noisy on a busy machine): {speed}", speed=speed),
        "memory": tr("training memory (weights + grads + optimizer state + masters, from the tensors): "
                     "<b>{total}</b> vs O0 {total0} (weights {weights}, masters {masters})",
                     total=_fmt_bytes(mem["total"]), total0=_fmt_bytes(mem0["total"]),
                     weights=_fmt_bytes(mem["weights"]), masters=_fmt_bytes(mem["master weights"])),
        "loss": tr("final loss (mean of last 10 steps): {verdict}", verdict=verdict)}


def summary_html(run: LevelRun, ref: LevelRun) -> str:
    """One line per measured fact of ``run`` next to the O0 reference ``ref``: step time, memory, final loss."""
    lines = summary_lines(run, ref)
    if run.history.diverged:
        lines["loss"] = lines["loss"].replace("<b>", f"<b style='color:{STATUS_COLOURS['bad']}'>")
    items = "".join(f"<li>{lines[k]}</li>" for k in ("speed", "memory", "loss"))
    return f"<div class='ampkit-precision-summary'><b>{run.label}</b> <ul>{items}</ul></div>"


def loss_title(run: LevelRun, ref: LevelRun) -> str:
    """The loss plot's title: how far the run is from O0 (where the curves coincide, the title tells them apart)."""
    bad = nonfinite_at(run.history.losses)
    if run.level == "O0":
        title = tr("loss: O0, the fp32 reference")
    else:
        both = [abs(a - b) for a, b in zip(run.history.losses, ref.history.losses)
                if math.isfinite(a) and math.isfinite(b)]
        title = (tr("loss: {label} vs O0 (max |Δ| = {gap:.1e})", label=run.label, gap=max(both))
                 if both and bad is None else tr("loss: {label} vs O0", label=run.label))
    return title + (tr(" — inf/NaN from step {step}", step=bad) if bad is not None else "")


def run_state(run: LevelRun, ref: LevelRun) -> dict[str, Any]:
    """What the page draws of ``run`` (against O0, ``ref``): deterministic for a seeded run, no timing in it.

    >>> from ampkit.lessons.autocast_and_levels import run_level
    >>> o0, o3 = run_level("mlp_ln", "O0", steps=3), run_level("mlp_ln", "O3", "fp16", steps=3, optimizer="adam")
    >>> s = run_state(o3, o0)
    >>> s["label"], s["colour"], s["bad"], s["losses"].split()[1:]
    ('O3 fp16', 'fp16', 1, ['nan', 'nan'])
    """
    mem, mem0 = run.memory.as_dict(), ref.memory.as_dict()
    lines = summary_lines(run, ref)
    return {"label": run.label, "level": run.level, "colour": "fp32" if run.level == "O0" else short_name(run.dtype),
            "losses": " ".join(repr(float(v)) for v in run.history.losses),
            "bad": nonfinite_at(run.history.losses), "title": loss_title(run, ref),
            "caption": table_caption(run.level, run.dtype),
            "rows": [[r["layer"], r["type"], r["params"], r["input"], r["output"], tr(r["note"])]
                     for r in (t.as_row() for t in run.trace)],
            "memory": [mem[k] for k in MEMORY_FIELDS], "memory0": [mem0[k] for k in MEMORY_FIELDS],
            "memory_title": tr("memory: {total} vs O0 {total0}", total=_fmt_bytes(mem["total"]),
                               total0=_fmt_bytes(mem0["total"])),
            "lines": [lines["memory"], lines["loss"]], "diverged": run.history.diverged}




class OLevelPicker(FrontView):
    """An O-level slider (O0 → O3) and a low-dtype toggle (dtypes with native hardware support marked ⚡) for one
    small model, drawn in the browser (``js/olevel.js``): the per-layer dtype table, the loss curve and the memory
    bars against O0, the summary as the engine prints it.

    When it starts (``auto_run``), every level of the chosen dtype is trained (seeded; a few tenths of a second); a
    (level, dtype) not trained yet is trained when selected, or by :meth:`run_all` (the page's "run all missing").
    Training uses ``num_threads`` CPU threads (default 1: the model is tiny, so extra threads mostly add waiting;
    see :func:`ampkit.lessons.autocast_and_levels.run_level`) on the CPU; the default dtype is
    :attr:`ampkit.device.DeviceReport.default_dtype` there (decided from the instruction set, never from a timing:
    bf16 on every CPU), unless ``dtype`` pins one. The traits ``level`` and ``low`` are the controls (``.slider`` and
    ``.dtype`` hold them as ``.value`` too); ``.state`` is the selected run, ``.reference`` its O0.

    >>> picker = OLevelPicker(steps=5, dtype="bf16")
    >>> picker.slider.value = "O2"
    >>> picker.state.level, picker.rows[1]["params"], sorted(picker.runs)
    ('O2', 'bf16', ['O0', 'O1 bf16', 'O2 bf16', 'O3 bf16'])
    """

    _front = "olevel"
    level = traitlets.Unicode("O0").tag(sync=True)
    low = traitlets.Unicode("bf16").tag(sync=True)
    levels: traitlets.List[str] = traitlets.List(list(LEVELS)).tag(sync=True)
    dtypes: traitlets.List[list] = traitlets.List().tag(sync=True)        # [[value, label], ...]
    runs = traitlets.Dict().tag(sync=True)                                # run label -> run_state(...)
    labels = traitlets.Dict().tag(sync=True)                              # "O1 bf16" -> level_label's name
    steps = traitlets.Int(60).tag(sync=True)
    model_name = traitlets.Unicode("mlp_ln").tag(sync=True)

    def __init__(self, model: str = "mlp_ln", steps: int = 60, lr: float = 3e-3, optimizer: str = "adam",
                 seed: int = 0, level: str = "O0", dtype: str | None = None, auto_run: bool = True,
                 device: str = "cpu", num_threads: int | None = 1):
        self.model = model
        self.auto_run = auto_run
        self.cache = LevelRunCache(steps=steps, lr=lr, optimizer=optimizer, seed=seed, num_threads=num_threads)
        rep = device_report(device)
        fast = rep.fast_dtypes  # decided from the hardware, never from a timing
        options = [((short_name(d) + (tr(" ⚡ native here") if d in fast else "")), short_name(d))
                   for d in autocast_dtypes(device)]
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
        self.slider = Control(self, "level", options=list(LEVELS))
        self.dtype = Control(self, "low", options=options)
        self.state: LevelRun | None = None
        self.reference: LevelRun | None = None
        self.rows: list[dict[str, str]] = []
        self.progress: tuple[str, int, int] | None = None   # the last progress sent: (run label, steps done, of)
        self._ready = False
        super().__init__(dtypes=[[v, label] for label, v in options], steps=steps, model_name=model,
                         labels={f"{lv} {v}": level_label(lv, v) for lv in LEVELS for v in values},
                         level=resolve_level(level), low=default)
        self.on_msg(self._on_msg)
        if auto_run:
            for lv in LEVELS:   # every level of the chosen dtype: the page toggles them with no kernel
                self._train(lv, default)
        self._ready = True
        self._select(None)

    @traitlets.validate("level")
    def _valid_level(self, proposal: dict) -> str:
        try:
            return resolve_level(proposal["value"])
        except (ValueError, AttributeError, TypeError) as err:
            raise traitlets.TraitError(str(err)) from None

    @traitlets.validate("low")
    def _valid_low(self, proposal: dict) -> str:
        values = [v for v, _ in self.dtypes]
        try:
            value = short_name(proposal["value"])
        except (TypeError, ValueError):
            value = ""
        if values and value not in values:
            raise traitlets.TraitError(tr("low must be one of {choices}; got {value!r}", choices=", ".join(values),
                                          value=proposal["value"]))
        return value

    # ----------------------------------------------------------------- the engine's runs
    def _cached(self, level: str, dtype: str) -> LevelRun | None:
        """The trained run of (level, dtype); O0 runs in fp32 whichever low dtype: any O0 trained stands for it."""
        for dt in ([dtype] + [v for v, _ in self.dtypes] if level == "O0" else [dtype]):
            if self.cache.has(self.model, level, dt):
                return self.cache.get(self.model, level, dt)
        return None

    def _train(self, level: str, dtype: str) -> LevelRun:
        """Train (level, dtype) unless trained, send its state to the page; progress goes out as messages."""
        run = self._cached(level, dtype)
        if run is None:
            label = level_label(level, dtype)
            steps = self.cache.run_kw["steps"]

            def progress(step: int, _hist: Any) -> None:
                self.progress = (label, step + 1, steps)
                self.send({"type": "progress", "label": label, "step": step + 1, "steps": steps})

            run = self.cache.get(self.model, level, dtype, callback=progress)
        ref = run if level == "O0" else self._train("O0", dtype)
        if run.label not in self.runs:
            self.runs = {**self.runs, run.label: run_state(run, ref)}
            if self._ready:
                self._send_timings()
        return run

    def run_all(self) -> None:
        """Train every (level, dtype) not trained yet, so that the page toggles all of them (also with no kernel)."""
        for dt in [v for v, _ in self.dtypes]:
            for lv in LEVELS:
                self._train(lv, dt)
        self._select(None)
        self.send({"type": "status", "key": "all_done", "n": len(self.runs)})

    def timings(self) -> dict[str, str]:
        """Each trained run's step-time line (a measurement: sent to the page as a message, never saved)."""
        out = {}
        for label in self.runs:
            level, _, dt = label.partition(" ")
            run = self._cached(level, dt or self.low)
            ref = self._cached("O0", dt or self.low)
            if run is not None and ref is not None:
                out[label] = summary_lines(run, ref)["speed"]
        return out

    def _send_timings(self) -> None:
        self.send({"type": "timings", "lines": self.timings()})

    def hello(self) -> None:
        """A page said hello (after FrontView answered "here"): the step times measured so far."""
        self._send_timings()

    def _on_msg(self, _widget: Any, content: dict, _buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "run_all":
            self.run_all()

    @traitlets.observe("level", "low")
    def _select(self, change: dict | None) -> None:
        if not self._ready:
            return
        run = self._cached(self.level, self.low)
        if run is None and self.auto_run:
            run = self._train(self.level, self.low)
        if run is None:
            self.state = self.reference = None
            self.rows = []
            self.send({"type": "status", "key": "missing"})
            return
        self.state, self.reference = run, self._cached("O0", self.low)
        self.rows = [t.as_row() for t in run.trace]

    # ----------------------------------------------------------------- what the page shows, for the still and tests
    @property
    def table_html(self) -> str:
        """The selected run's dtype table as HTML (the page draws the same rows)."""
        return "" if self.state is None else dtype_table_html(self.state.trace, self.state.level, self.state.dtype)

    @property
    def summary_html(self) -> str:
        """The selected run's summary (with its measured step time) as HTML."""
        return "" if self.state is None or self.reference is None else summary_html(self.state, self.reference)

    def words(self) -> dict:
        return {"level": tr("O-level"), "low": tr("low dtype"), "run_all": tr("run all missing"),
                "run_all_tip": tr("train every (level, dtype) not yet trained"),
                "training": tr("training {label}: step {step} of {steps}"),
                "no_kernel": tr("run the notebook to compute this on your machine"),
                "missing": tr("{label} not computed yet: press “run all missing”"),
                "all_done": tr("all {n} runs computed"),
                "speed_saved": tr("step time: measured when the notebook runs (not kept in the saved page)"),
                "columns": [tr(c) for c in _COLUMNS], "memory_labels": [tr(m) for m in _MEMORY_LABELS],
                "xlabel": tr("training step"), "ylabel": tr("loss (cross-entropy, nats)"),
                "mem_ylabel": tr("memory (KiB)"), "ref": tr("O0 (fp32, the reference)"),
                "nonfinite": tr("{label}: inf/NaN from step {step}")}

    def still(self) -> W.Widget:
        if self.state is None or self.reference is None:
            return W.HTML(tr("{label} not computed yet: press “run all missing”", label=self.level))
        return W.VBox([W.HTML(tr("{name}: {detail}", name=tr("O-level"), detail=self.level) + tr(", ")
                              + tr("{name}: {detail}", name=tr("low dtype"), detail=self.low)),
                       W.Image(value=_still_png(self.state, self.reference), format="png", width=900),
                       W.HTML(self._still_summary()), W.HTML(self.table_html)])

    def _still_summary(self) -> str:
        """The summary without its step time (a measurement: the still picture must not change on re-execution)."""
        assert self.state is not None and self.reference is not None
        lines = summary_lines(self.state, self.reference)
        items = "".join(f"<li>{lines[k]}</li>" for k in ("memory", "loss"))
        return f"<div class='ampkit-precision-summary'><b>{self.state.label}</b> <ul>{items}</ul></div>"


def _still_png(run: LevelRun, ref: LevelRun) -> bytes:
    """The loss curve against O0 and the memory bars as a PNG (renderers without JavaScript)."""
    fig = new_figure(9.0, 3.3)
    ax, ax_mem = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
    colour = DTYPE_COLOURS["fp32"] if run.level == "O0" else dtype_colour(run.dtype)
    ys = [v if math.isfinite(v) else float("nan") for v in run.history.losses]
    ax.plot(range(len(ys)), ys, color=colour, lw=2.6, alpha=0.85, label=run.label)
    if run.level != "O0":
        ax.plot(range(len(ref.history.losses)), ref.history.losses, color="#24292f", lw=1.3, ls=(0, (4, 3)),
                label="O0 (fp32)", zorder=3)
    bad = nonfinite_at(run.history.losses)
    if bad is not None:
        last = next((v for v in reversed(ys[:bad]) if math.isfinite(v)), 0.0)
        ax.axvline(bad, color=STATUS_COLOURS["bad"], ls=":", lw=1.2)
        ax.plot([max(bad - 1, 0)], [last], marker="X", ms=10, ls="none", color=STATUS_COLOURS["bad"], zorder=5)
    ax.set(xlabel=mark("training step"), ylabel=mark("loss (cross-entropy, nats)"))
    ax.set_title(loss_title(run, ref), fontsize=10)
    ax.legend(loc="upper right", fontsize=9)
    mem, mem0 = run.memory.as_dict(), ref.memory.as_dict()
    x = range(len(MEMORY_FIELDS))
    ax_mem.bar([i - 0.2 for i in x], [mem0[k] / 1024 for k in MEMORY_FIELDS], width=0.4,
               color=DTYPE_COLOURS["fp32"], alpha=0.45, label="O0 (fp32)")
    ax_mem.bar([i + 0.2 for i in x], [mem[k] / 1024 for k in MEMORY_FIELDS], width=0.4, color=colour,
               label=run.label)
    ax_mem.set_xticks(list(x), [tr(m).replace(" ", "\n", 1) for m in _MEMORY_LABELS], fontsize=9)
    ax_mem.set_ylabel("memory (KiB)")
    ax_mem.legend(loc="upper right", fontsize=9)
    ax_mem.set_title(f"memory: {_fmt_bytes(mem['total'])} vs O0 {_fmt_bytes(mem0['total'])}", fontsize=10)
    return png_bytes(fig)
