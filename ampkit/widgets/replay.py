"""Notebook 03's dynamic-scaler replay (``03_loss_scaling.ipynb``, section 5), drawn in the browser.

:class:`ScalerReplay` replays :class:`ampkit.scaling.DynamicLossScaler`'s rule (:func:`ampkit.scaling.replay`) over
a run's recorded largest gradient per step, with sliders for its settings (log2 of the initial scale, the growth
interval, the backoff factor, the hysteresis), and overlays every framework's preset
(:func:`ampkit.scaling.presets.replay_presets`) on the same steps. It is a
:class:`~ampkit.widgets.front.FrontView`: ``js/replay.js`` draws it in SVG from what the engine sent.

The sliders reach 49 × 500 × 17 × 8 ≈ 3.3 million settings — too many to compute in advance. When the view starts,
the engine replays the initial setting and every setting ONE control away from it (each slider position with the
others at their initial values: 571 replays), and every preset from its own default and from each log2(init)
(750 replays, so the presets follow the init slider anywhere); each replay is sent once as one short line
(:func:`replay_line`, :func:`preset_line`: the scale per step as run-length log2 values, the skipped steps, the
readout's numbers as the engine prints them). The page SELECTS among them. Any other setting is replayed by the
kernel on a move (one replay, sent alone: :attr:`ScalerReplay.current`); without a kernel the page shows the nearest
computed setting greyed, and says in one line that the notebook computes it (:func:`nearest_computed`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import traitlets

from ampkit.dtypes import short_name
from ampkit.formats import format_name
from ampkit.i18n import mark, tr
from ampkit.scaling import Replay, RuleReplay, log2_ceiling, replay
from ampkit.scaling.presets import PRESETS, replay_presets
from ampkit.widgets.front import FrontView
from ampkit.widgets.style import BAND_COLOURS, DPI, STATUS_COLOURS, dtype_colour, new_figure, png_bytes

__all__ = ["ScalerReplay", "replay_readout_html", "preset_readout_html", "replay_line", "preset_line",
           "nearest_computed", "PRESET_STYLES", "GRID"]

_PALETTE = ("#0969da", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#9a6700", "#a475f9", "#0550ae",
            "#116329", "#953800", "#4d2d00", "#3e1f79", "#24292f", "#bf3989")
_MARKERS = ("o", "s", "^", "D", "v", "P", "*", "<", ">", "h", "p", "d", "8", "H")
_LINESTYLES = ("-", "--", "-.", ":")
#: Per preset name: (colour, marker, linestyle) of its trajectory in the replay — distinct for every preset.
PRESET_STYLES: dict[str, tuple[str, str, str]] = {
    name: (_PALETTE[i % len(_PALETTE)], _MARKERS[i % len(_MARKERS)], _LINESTYLES[i % len(_LINESTYLES)])
    for i, name in enumerate(PRESETS)}
#: Every position of each slider: log2(init), growth interval, backoff factor, hysteresis.
GRID: dict[str, tuple] = {"init": tuple(range(0, 49)), "interval": tuple(range(1, 501)),
                          "backoff": tuple(round(0.1 + 0.05 * i, 2) for i in range(17)),
                          "hysteresis": tuple(range(1, 9))}
_NAMES = tuple(GRID)
_BOTTOM, _TOP = -2.0, 64.0     # the y axis: log2(scale); a scale of 0 is drawn at the bottom, inf at the top
_WIDTH_IN, _HEIGHT_IN = 7.6, 3.8


def _y(s: float) -> float:
    """log2 of a scale for the replay's axis (0 and below drawn at its bottom, inf at its top)."""
    return math.log2(s) if 0 < s < math.inf else (_BOTTOM if s <= 0 else _TOP)


def _num(v: float) -> str:
    """A log2 value as sent: an integer as such, else to 3 decimals (1/1000 of an octave: far below a pixel)."""
    return str(int(v)) if float(v).is_integer() else f"{round(v, 3):g}"


def _runs(scales: Sequence[float]) -> str:
    """The drawn log2 of each step's scale, run-length coded: ``"16*5 17*5 16"`` (``*1`` left out)."""
    out: list[str] = []
    for y in map(_num, map(_y, scales)):
        if out and out[-1].split("*")[0] == y:
            head, _, n = out[-1].partition("*")
            out[-1] = f"{head}*{int(n or 1) + 1}"
        else:
            out.append(y)
    return " ".join(out)


def _steps(flags: Sequence[bool]) -> str:
    """The steps where ``flags`` holds, consecutive ones as ranges: ``"3 7-9"``."""
    out, i = [], 0
    while i < len(flags):
        if flags[i]:
            j = i
            while j + 1 < len(flags) and flags[j + 1]:
                j += 1
            out.append(str(i) if i == j else f"{i}-{j}")
            i = j
        i += 1
    return " ".join(out)


def _final(r: Replay) -> str:
    return "0" if r.final_scale == 0 else f"{math.log2(r.final_scale):.1f}"


def _log2_text(s: float) -> str:
    return "0" if s == 0 else ("inf" if math.isinf(s) else f"{math.log2(s):g}")


def replay_line(r: Replay) -> str:
    """What the page gets of one replay of the sliders' rule: ``trajectory;skipped steps;skipped;final`` — the
    log2 scale per step (run-length), the steps that overflowed (and were skipped), and the readout's numbers as
    :func:`replay_readout_html` prints them.

    >>> replay_line(replay([1e-3] * 6, init_scale=2.0**26, growth_interval=2))
    '26 25*2 26 25*2;0 3;2;26.0'
    """
    return f"{_runs(r.scales)};{_steps(r.overflow)};{r.skipped};{_final(r)}"


def preset_line(r: RuleReplay) -> str:
    """What the page gets of one preset's replay: ``trajectory;skipped steps;applied overflow steps;stopped at;final;
    skipped;applied`` (``-``: the run was not stopped), the readout's numbers as :func:`preset_readout_html` prints.

    >>> preset_line(replay_presets(["mindspore-fixed-apply"], [2.0**-10] * 3, log2_init=30)["mindspore-fixed-apply"])
    '30*3;;0-2;-;30;0;3'
    """
    skipped = [o and not a for o, a in zip(r.overflow, r.applied)]
    applied = [o and a for o, a in zip(r.overflow, r.applied)]
    stop = "-" if r.stopped_at is None else str(r.stopped_at)
    return (f"{_runs(r.scales)};{_steps(skipped)};{_steps(applied)};{stop};{_log2_text(r.final_scale)};"
            f"{r.skipped};{r.applied_overflow}")


def replay_readout_html(r: Replay) -> str:
    """The replay's readout: skipped steps and final scale."""
    final = "0" if r.final_scale == 0 else f"2<sup>{_final(r)}</sup>"
    skipped = tr("skipped steps (overflow): <b class='ampkit-skipped'>{n}</b> of {total}", n=r.skipped,
                 total=len(r.scales))
    return f"<div class='ampkit-replay-readout'>{skipped} · {tr('final scale {s}', s=final)}</div>"


def preset_readout_html(replays: dict[str, RuleReplay]) -> str:
    """One line per replayed preset: its final scale, skipped steps, overflowing updates APPLIED, run stopped."""
    if not replays:
        return f"<div class='ampkit-preset-readout'>{tr('no framework preset selected')}</div>"
    lines = []
    for name, r in replays.items():
        colour = PRESET_STYLES[name][0]
        stop = "" if r.stopped_at is None else " · <b>" + tr("run stopped at step {step}", step=r.stopped_at) + "</b>"
        final = _log2_text(r.final_scale)
        facts = tr("final scale {s} · skipped <span class='ampkit-preset-skipped'>{skipped}</span> · "
                   "overflow APPLIED <span class='ampkit-preset-applied'>{applied}</span>",
                   s=final if final in ("0", "inf") else f"2<sup>{final}</sup>", skipped=r.skipped,
                   applied=r.applied_overflow)
        lines.append(f"<span style='color:{colour}'>■</span> <b>{name}</b> ({tr(PRESETS[name].framework)}): "
                     f"{facts}{stop}")
    return "<div class='ampkit-preset-readout'>" + "<br>".join(lines) + "</div>"


def _position(name: str, value: Any) -> int:
    return GRID[name].index(value)


# port: js/replay.js nearest
def nearest_computed(setting: Sequence, origin: Sequence) -> tuple:
    """The computed setting the page shows (greyed) for ``setting`` when no kernel can replay it: ``setting`` itself
    if it is at most one control away from ``origin``, else the control that moved farthest from ``origin`` (in
    slider positions, as a share of the slider's length; the first such control on a tie) with the others back at
    ``origin`` — the computed setting nearest to it.

    >>> nearest_computed((20, 300, 0.5, 3), (16, 5, 0.5, 1))        # interval: 295 of 499 positions away
    (16, 300, 0.5, 1)
    >>> nearest_computed((20, 100, 0.5, 3), (16, 5, 0.5, 1))        # hysteresis: 2 of 7
    (16, 5, 0.5, 3)
    """
    moved = [i for i in range(4) if setting[i] != origin[i]]
    if len(moved) <= 1:
        return tuple(setting)
    far = [abs(_position(n, setting[i]) - _position(n, origin[i])) / (len(GRID[n]) - 1) for i, n in enumerate(_NAMES)]
    best = max(range(4), key=lambda i: (far[i], -i))
    return tuple(setting[i] if i == best else origin[i] for i in range(4))


# port: js/replay.js keyOf
def _key(setting: Sequence) -> str:
    """The setting as the page names it: ``"16 5 0.5 1"`` (JavaScript's String of each number)."""
    return f"{int(setting[0])} {int(setting[1])} {float(setting[2])!r} {int(setting[3])}"


class _Control:
    """One control as the notebooks knew it (``view.init.value = 40``): its value lives in a trait of the view."""

    def __init__(self, view: ScalerReplay, name: str):
        self._view, self._name = view, name
        if name in GRID:
            self.min, self.max = GRID[name][0], GRID[name][-1]

    @property
    def value(self) -> Any:
        if self._name in GRID:
            return self._view.setting[_NAMES.index(self._name)]
        return tuple(self._view.shown) if self._name == "presets" else self._view.at_init

    @value.setter
    def value(self, value: Any) -> None:
        if self._name in GRID:
            new = list(self._view.setting)
            new[_NAMES.index(self._name)] = value
            self._view.setting = new
        elif self._name == "presets":
            self._view.shown = list(value)
        else:
            self._view.at_init = value


class ScalerReplay(FrontView):
    """A dynamic scaler replayed over a run's recorded gradient maxima, drawn in the browser (``js/replay.js``):
    sliders for its settings, and the framework presets overlaid (each from its own default scale, or from
    log2(init) when ``presets_start_at_init``); ``x`` marks a skipped overflow step, a red ``X`` an overflowing
    update that was APPLIED. ``.state`` is the engine's :class:`~ampkit.scaling.Replay` of the setting,
    ``.preset_states`` the selected presets' replays; the controls ``.init``, ``.interval``, ``.backoff``,
    ``.hysteresis``, ``.presets``, ``.start_at_init`` hold their ``.value`` (traits ``setting``, ``shown``,
    ``at_init``).

    >>> rp = ScalerReplay([1e-6] * 50, growth_interval=5)
    >>> rp.state.skipped
    0
    >>> rp.presets.value = ("torch", "mindspore-fixed-apply"); rp.start_at_init.value = True; rp.init.value = 40
    >>> rp.preset_states["mindspore-fixed-apply"].applied_overflow
    50
    """

    _front = "replay"
    setting: traitlets.List[Any] = traitlets.List().tag(sync=True)       # [log2(init), interval, backoff, hysteresis]
    origin: traitlets.List[Any] = traitlets.List().tag(sync=True)        # the initial setting
    shown: traitlets.List[str] = traitlets.List().tag(sync=True)         # the presets overlaid, in PRESETS' order
    at_init = traitlets.Bool(False).tag(sync=True)                      # the presets start at log2(init)
    grid = traitlets.Dict().tag(sync=True)             # per slider: its positions, one line of numbers
    fmt = traitlets.Unicode("float16").tag(sync=True)
    fmt_key = traitlets.Unicode("fp16").tag(sync=True)                  # the format's key in look.colours.dtype
    steps = traitlets.Int(0).tag(sync=True)
    ceiling = traitlets.Unicode("").tag(sync=True)     # per step, log2 of the scale from which it overflows
    y_range: traitlets.List[float] = traitlets.List([_BOTTOM, _TOP]).tag(sync=True)
    lines: traitlets.List[str] = traitlets.List().tag(sync=True)         # every computed replay, once
    axes = traitlets.Dict().tag(sync=True)             # per slider, per position: the index of its replay in lines
    preset_index = traitlets.Dict().tag(sync=True)     # per preset, its own start then log2(init) 0..48: -> lines
    preset_info: traitlets.List[dict] = traitlets.List().tag(sync=True)
    current = traitlets.Unicode("").tag(sync=True)     # "key|line": the kernel's replay of a setting not sent above

    def __init__(self, grad_max: Sequence[float], fmt: str = "float16", init_log2: int = 16,
                 growth_interval: int = 20, backoff: float = 0.5, hysteresis: int = 1,
                 presets: Sequence[str] = (), presets_start_at_init: bool = False):
        self.grad_max = [float(g) for g in grad_max]
        if not self.grad_max:
            raise ValueError(tr("grad_max must hold one gradient magnitude per step (e.g. TaskRun.grad_max)"))
        fmt = format_name(fmt)
        try:
            origin = self._valid_setting([init_log2, growth_interval, backoff, hysteresis])
        except traitlets.TraitError as e:
            raise ValueError(str(e)) from None
        self._replays: dict[tuple, Replay] = {}
        self._presets: dict[tuple[str, int | None], RuleReplay] = {}
        self._fmt = fmt
        pool: dict[str, int] = {}

        def index(line: str) -> int:
            return pool.setdefault(line, len(pool))

        axes: dict[str, str] = {}
        for i, name in enumerate(_NAMES):   # every setting one control away from the initial one
            lines = [index(replay_line(self._replay(tuple(v if j == i else origin[j] for j in range(4)))))
                     for v in GRID[name]]
            axes[name] = " ".join(map(str, lines))
        self._computed = {tuple(k) for k in self._replays}
        starts: list[int | None] = [None, *GRID["init"]]
        preset_index = {}
        for name in PRESETS:                # every preset from its default and from each log2(init)
            preset_index[name] = " ".join(str(index(preset_line(self._preset(name, k)))) for k in starts)
        ceiling = " ".join("n" if math.isnan(c) else _num(c) for c in log2_ceiling(self.grad_max, fmt))
        self.init, self.interval = _Control(self, "init"), _Control(self, "interval")
        self.backoff, self.hysteresis = _Control(self, "backoff"), _Control(self, "hysteresis")
        self.presets, self.start_at_init = _Control(self, "presets"), _Control(self, "at_init")
        super().__init__(fmt=fmt, fmt_key=short_name(fmt), steps=len(self.grad_max), ceiling=ceiling, lines=list(pool),
                         axes=axes, preset_index=preset_index, origin=list(origin),
                         grid={n: " ".join(map(repr, v)) for n, v in GRID.items()},
                         preset_info=[{"name": n, "framework": tr(p.framework), "colour": PRESET_STYLES[n][0],
                                       "marker": PRESET_STYLES[n][1], "dash": PRESET_STYLES[n][2]}
                                      for n, p in PRESETS.items()],
                         setting=list(origin), shown=list(presets), at_init=bool(presets_start_at_init))
        self._select(None)

    def _replay(self, setting: tuple) -> Replay:
        if setting not in self._replays:
            if len(self._replays) > 4096:                      # bounded: the one-away replays stay
                self._replays = {k: v for k, v in self._replays.items() if k in self._computed}
            i, g, b, h = setting
            self._replays[setting] = replay(self.grad_max, self._fmt, init_scale=2.0 ** i, growth_interval=g,
                                            backoff_factor=b, hysteresis=h)
        return self._replays[setting]

    def _preset(self, name: str, k: int | None) -> RuleReplay:
        if (name, k) not in self._presets:
            self._presets[(name, k)] = replay_presets([name], self.grad_max, self._fmt, log2_init=k)[name]
        return self._presets[(name, k)]

    @staticmethod
    def _valid_setting(value: Sequence) -> list:
        if not isinstance(value, (list, tuple)) or len(value) != 4:
            raise traitlets.TraitError(tr("setting is [log2(init), growth interval, backoff, hysteresis]; got {v!r}",
                                          v=value))
        out = []
        for name, v in zip(_NAMES, value):
            grid = GRID[name]
            if name == "backoff" and isinstance(v, (int, float)) and grid[0] - 1e-9 <= v <= grid[-1] + 1e-9:
                v = min(grid, key=lambda g: abs(g - v))       # the slider's step: 0.05
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v not in grid:
                raise traitlets.TraitError(tr("{name} must be in [{lo}, {hi}] (the slider's positions); got {v!r}",
                                              name=name, lo=grid[0], hi=grid[-1], v=v))
            out.append(float(v) if name == "backoff" else int(v))
        return out

    @traitlets.validate("setting")
    def _check_setting(self, proposal: dict) -> list:
        return self._valid_setting(proposal["value"])

    @traitlets.validate("shown")
    def _check_shown(self, proposal: dict) -> list:
        names = list(proposal["value"])
        bad = [n for n in names if n not in PRESETS]
        if bad:
            raise traitlets.TraitError(tr("unknown preset {name!r}; the presets are: {names}", name=bad[0],
                                          names=", ".join(PRESETS)))
        return [n for n in PRESETS if n in names]

    @traitlets.observe("setting", "shown", "at_init")
    def _select(self, change: dict | None) -> None:
        if not self.setting:
            return
        setting = tuple(self.setting)
        self.state: Replay = self._replay(setting)
        start = self.setting[0] if self.at_init else None
        self.preset_states: dict[str, RuleReplay] = {n: self._preset(n, start) for n in self.shown}
        if change is not None and change["name"] == "setting" and setting not in self._computed:
            self.current = f"{_key(setting)}|{replay_line(self.state)}"   # the one replay the page lacks

    @property
    def readout_html(self) -> str:
        """The replay's readout for the current setting, as the page shows it."""
        return replay_readout_html(self.state)

    @property
    def presets_html(self) -> str:
        """The selected presets' readout, as the page shows it."""
        return preset_readout_html(self.preset_states)

    def words(self) -> dict:
        return {"init": "log2(init)", "interval": tr("growth every"), "backoff": tr("backoff"),
                "hysteresis": tr("hysteresis"), "presets": tr("presets"),
                "at_init": tr("presets start at log2(init)"),
                "skipped": tr("skipped steps (overflow): <b class='ampkit-skipped'>{n}</b> of {total}"),
                "final": tr("final scale {s}"), "none": tr("no framework preset selected"),
                "facts": tr("final scale {s} · skipped <span class='ampkit-preset-skipped'>{skipped}</span> · "
                            "overflow APPLIED <span class='ampkit-preset-applied'>{applied}</span>"),
                "stopped": tr("run stopped at step {step}"),
                "uncomputed": tr("run the notebook to compute this on your machine"),
                "ceiling": tr("{fmt} overflows here", fmt=self._fmt), "line": tr("ampkit (sliders)"),
                "marks": tr("its skipped steps"), "preset_skip": tr("preset: step skipped"),
                "preset_applied": tr("preset: inf/NaN APPLIED"), "xlabel": tr("training step"),
                "ylabel": tr("log2(loss scale)"),
                "title": tr("Dynamic scaler replayed over this run's largest gradients")}

    def still(self) -> W.Widget:
        return W.VBox([W.HTML(self.readout_html), W.HTML(self.presets_html),
                       W.Image(value=_still_png(self), format="png", width=int(_WIDTH_IN * DPI))])


def _still_png(v: ScalerReplay) -> bytes:
    """The replay and the selected presets as a PNG (renderers without JavaScript)."""
    fig = new_figure(_WIDTH_IN, _HEIGHT_IN)
    ax = fig.add_subplot()
    steps = list(range(len(v.grad_max)))
    ceiling = log2_ceiling(v.grad_max, v.fmt)
    ax.fill_between(steps, ceiling, _TOP, step="post", color=BAND_COLOURS["overflow"], alpha=0.12, lw=0,
                    label=f"{v.fmt} overflows here")
    ax.step(steps, ceiling, where="post", color=BAND_COLOURS["overflow"], lw=1, ls="--")
    ys = [_y(s) for s in v.state.scales]
    ax.step(steps, ys, where="post", color=dtype_colour(v.fmt), lw=1.8, label=mark("ampkit (sliders)"))
    over = [i for i, o in enumerate(v.state.overflow) if o]
    ax.scatter(over, [ys[i] for i in over], marker="x", s=40, color="#24292f", zorder=3,
               label=mark("its skipped steps"))
    told = False                     # the APPLIED mark's legend entry: once
    for n, r in v.preset_states.items():
        colour, marker, ls = PRESET_STYLES[n]
        py = [_y(s) for s in r.scales]
        ax.step(range(len(py)), py, where="post", color=colour, marker=marker, ls=ls, lw=1.3, ms=5, label=n,
                markevery=max(1, len(steps) // 10))
        skip = [i for i, (o, a) in enumerate(zip(r.overflow, r.applied)) if o and not a]
        app = [i for i, (o, a) in enumerate(zip(r.overflow, r.applied)) if o and a]
        ax.scatter(skip, [py[i] for i in skip], marker="x", s=36, color=colour, zorder=4)
        ax.scatter(app, [py[i] for i in app], marker="X", s=70, color=STATUS_COLOURS["bad"], edgecolors="#24292f",
                   linewidths=0.6, zorder=5, label=mark("preset: inf/NaN APPLIED") if app and not told else None)
        told = told or bool(app)
    ax.set_xlabel("training step")
    ax.set_ylabel("log2(loss scale)")
    ax.set_xlim(0, len(steps))
    ax.set_ylim(_BOTTOM, _TOP)
    ax.set_title("Dynamic scaler replayed over this run's largest gradients", fontsize=11)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    return png_bytes(fig)
