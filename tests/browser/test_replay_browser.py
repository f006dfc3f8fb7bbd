"""Notebook 03's ScalerReplay in a real JupyterLab, drawn in the browser (ampkit/widgets/js/replay.js).

- Run All: random key moves on the four sliders (most settings two or more controls away from the initial one: the
  kernel replays them), preset boxes ticked with the keyboard, the presets' start at log2(init): at every step the
  drawn trajectory (the SVG path, step by step), the skipped steps marked, the readout and every overlaid preset
  equal what ampkit.scaling computes for that setting.
- The saved notebook, opened and not run (no kernel): every setting one control away from the initial one, through
  every position of each slider, equals the engine's replay (and the presets, started at each log2(init)); a setting
  two controls away shows the nearest computed one greyed and the line "run the notebook to compute this on your
  machine".
"""
from __future__ import annotations

import functools
import html
import math
import random
import re

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "03_loss_scaling.ipynb"
VIEW = ".jp-OutputArea .ampkit-replay"
PLOT = f"{VIEW} svg.ampkit-replay-plot"
ORIGIN = (16, 5, 0.5, 1)                 # the notebook's ScalerReplay(fp32.grad_max, init_log2=16, growth_interval=5)
# replay.js's geometry: 780 x 410, plot from x = 58 to 780 - 212, y = 36 to 410 - 46; log2(scale) from -2 to 64
W, H, LEFT, RIGHT, TOP, BOTTOM, Y0, Y1 = 780, 410, 58, 212, 36, 46, -2.0, 64.0
SHOWN_JS = """() => {
  const v = document.querySelector('.jp-OutputArea .ampkit-replay');
  const svg = v.querySelector('svg.ampkit-replay-plot');
  const presets = {};
  for (const g of svg.querySelectorAll('.ampkit-replay-preset')) presets[g.dataset.preset] = {
    d: g.querySelector('.ampkit-preset-line').getAttribute('d'),
    skips: [...g.querySelectorAll('.ampkit-preset-skip')].map(e => Number(e.dataset.step)),
    applied: [...g.querySelectorAll('.ampkit-preset-applied')].map(e => Number(e.dataset.step))};
  return {ranges: [...v.querySelectorAll('input[type=range]')].map(r => Number(r.value)),
          setting: svg.dataset.setting, drawn: svg.dataset.drawn, exact: svg.dataset.exact,
          opacity: svg.querySelector('.ampkit-replay-main').getAttribute('opacity'),
          d: svg.querySelector('.ampkit-replay-line').getAttribute('d'),
          skips: [...svg.querySelectorAll('.ampkit-replay-skips path')].map(e => Number(e.dataset.step)),
          readout: v.querySelector('.ampkit-replay-readout').textContent,
          note: v.querySelector('.ampkit-replay-uncomputed').textContent,
          presets, preset_text: v.querySelector('.ampkit-preset-readout').textContent,
          checked: [...v.querySelectorAll('input.ampkit-replay-preset')].filter(b => b.checked)
                     .map(b => b.dataset.preset),
          at_init: v.querySelector('input.ampkit-preset-at-init').checked};
}"""


@functools.cache
def grad_max() -> tuple[float, ...]:
    """The notebook's fp32.grad_max, computed here the way the notebook computes it."""
    import torch

    from ampkit.lessons import train_task, underflow_task

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the notebook does
    try:
        return tuple(train_task(underflow_task(), "fp32", steps=150).grad_max)
    finally:
        torch.set_num_threads(threads)


def key(setting) -> str:
    """A setting as the page names it (replay.js keyOf, a port of the engine's replay.py _key)."""
    from ampkit.widgets.replay import _key

    return _key(setting)


def _y(v: float) -> float:
    return H - BOTTOM - (min(max(v, Y0), Y1) - Y0) / (Y1 - Y0) * (H - TOP - BOTTOM)


def _drawn(s: float) -> float:
    """Where the engine's scale is drawn: log2 (0 at the bottom, inf at the top), to 1/1000 of an octave."""
    y = math.log2(s) if 0 < s < math.inf else (Y0 if s <= 0 else Y1)
    return y if y.is_integer() else round(y, 3)


def path_steps(d: str, steps: int) -> list[float]:
    """The y (pixels) of each step of a step path drawn by replay.js ("M x,y H x V y H x ...")."""
    unit = (W - LEFT - RIGHT) / steps
    out, y, x = [], None, None
    for cmd, a, b in re.findall(r"([MHV])(-?[\d.e+-]+)(?:,(-?[\d.e+-]+))?", d):
        if cmd == "M":
            x, y = float(a), float(b)
        elif cmd == "V":
            y = float(a)
        else:
            n = round((float(a) - x) / unit)
            out += [y] * n
            x = float(a)
    return out


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def expected(setting, presets, at_init: bool, exact: bool = True) -> dict:
    from ampkit.scaling import replay
    from ampkit.scaling.presets import replay_presets
    from ampkit.widgets.replay import nearest_computed, preset_readout_html, replay_readout_html

    drawn = tuple(setting) if exact else nearest_computed(setting, ORIGIN)
    i, g, b, h = drawn
    r = replay(list(grad_max()), "fp16", init_scale=2.0 ** i, growth_interval=g, backoff_factor=b, hysteresis=h)
    refs = replay_presets(list(presets), list(grad_max()), "fp16", log2_init=setting[0] if at_init else None)
    return {"setting": key(setting), "drawn": key(drawn), "exact": str(exact).lower(),
            "opacity": "1" if exact else "0.3", "ys": [_y(_drawn(s)) for s in r.scales],
            "skips": [t for t, o in enumerate(r.overflow) if o], "readout": _text(replay_readout_html(r)),
            "note": "" if exact else "run the notebook to compute this on your machine",
            "presets": {n: {"ys": [_y(_drawn(s)) for s in p.scales],
                            "skips": [t for t, (o, a) in enumerate(zip(p.overflow, p.applied)) if o and not a],
                            "applied": [t for t, (o, a) in enumerate(zip(p.overflow, p.applied)) if o and a]}
                        for n, p in refs.items()},
            "preset_text": _text(preset_readout_html(refs)), "checked": list(refs), "at_init": at_init}


def check(page, setting, presets=(), at_init=False, exact=True) -> None:
    """Wait for the view to draw ``setting`` (exact: the engine's replay of it, from what was sent or from the
    kernel), then compare everything drawn with the engine."""
    from ampkit.scaling.presets import PRESETS

    presets = [n for n in PRESETS if n in presets]
    page.wait_for_function("([sel, k, e]) => { const s = document.querySelector(sel);"
                           " return s && s.dataset.setting === k && s.dataset.exact === e; }",
                           arg=[PLOT, key(setting), str(exact).lower()], timeout=30_000)
    if not exact:   # the line: at once where the page cannot send (no widget manager), else when no kernel answers
        page.wait_for_function("(sel) => document.querySelector(sel).textContent !== ''",
                               arg=f"{VIEW} .ampkit-replay-uncomputed", timeout=10_000)
    got, want = page.evaluate(SHOWN_JS), expected(setting, presets, at_init, exact)
    from ampkit.widgets.replay import GRID

    assert got["ranges"] == [GRID[n].index(v) for n, v in zip(GRID, setting)]
    steps = len(grad_max())
    assert path_steps(got.pop("d"), steps) == pytest.approx(want.pop("ys"), abs=1e-6), setting
    for name, p in want.pop("presets").items():
        shown = got["presets"].pop(name)
        assert path_steps(shown.pop("d"), steps) == pytest.approx(p.pop("ys"), abs=1e-6), (name, setting)
        assert shown == p, (name, setting)
    assert got.pop("presets") == {}
    got.pop("ranges")
    assert got == want


def move(page, index: int, keys: list[str]) -> None:
    """Press ``keys`` on the replay's ``index``-th range input (log2(init), growth every, backoff, hysteresis)."""
    handle = page.locator(f"{VIEW} input[type=range]").nth(index)
    handle.scroll_into_view_if_needed()
    handle.focus()
    for k in keys:
        handle.press(k)


def toggle(page, selector: str) -> None:
    box = page.locator(f"{VIEW} {selector}").first
    box.scroll_into_view_if_needed()
    box.focus()
    box.press("Space")                       # keyboard operable: a native checkbox


def test_replay_follows_random_moves_with_the_kernel(lab):
    from ampkit.widgets.replay import GRID

    page = lab.open_and_run(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    check(page, ORIGIN)
    rng = random.Random(30)
    pos = [GRID[n].index(v) for n, v in zip(GRID, ORIGIN)]
    presets: list[str] = []
    at_init = False
    for turn in range(14):
        if turn in (4, 9):                   # tick a preset box (and the presets' start) with the keyboard
            name = "torch" if turn == 4 else "deepspeed"
            toggle(page, f"input.ampkit-replay-preset[data-preset='{name}']")
            presets.append(name)
            if turn == 9:
                toggle(page, "input.ampkit-preset-at-init")
                at_init = True
        i = rng.randrange(4)
        n = len(GRID[list(GRID)[i]])
        if rng.random() < 0.15:
            keys, pos[i] = (["End"], n - 1) if rng.random() < 0.5 else (["Home"], 0)
        else:
            presses = rng.randint(1, 6)
            right = rng.random() < 0.6
            keys = ["ArrowRight" if right else "ArrowLeft"] * presses
            pos[i] = min(n - 1, max(0, pos[i] + (presses if right else -presses)))
        move(page, i, keys)
        setting = tuple(GRID[name][p] for name, p in zip(GRID, pos))
        check(page, setting, presets, at_init)          # two or more controls away: the kernel's replay
    lab.screenshot(page, "03_loss_scaling-replay-live", near=PLOT)
    lab.assert_clean(page)


def test_replay_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: every setting one control away from the initial one is drawn as the engine
    replays it; a setting two controls away shows the nearest computed one, greyed, and says so in one line."""
    from ampkit.scaling import log2_ceiling
    from ampkit.widgets.replay import GRID

    page = lab.open_saved(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    check(page, ORIGIN)
    edge = page.evaluate("(sel) => document.querySelector(sel).querySelectorAll('.ampkit-replay-ceiling path')[1]"
                         ".getAttribute('d')", PLOT)         # where fp16 overflows, step by step: the engine's
    want = [_y(Y1 if math.isnan(c) else c if c.is_integer() else round(c, 3)) for c in log2_ceiling(grad_max(), "fp16")]
    assert path_steps(edge, len(grad_max())) == pytest.approx(want, abs=1e-6)
    presets = ["torch", "deepspeed", "mindspore-fixed-apply"]
    for name in presets:
        toggle(page, f"input.ampkit-replay-preset[data-preset='{name}']")
    toggle(page, "input.ampkit-preset-at-init")
    rng = random.Random(3)
    for i, name in enumerate(GRID):    # every position of every slider, the others at the origin; 14 of them checked
        n = len(GRID[name])            # (random, seeded, with both ends): 56 states of the 571 (make test's budget;
        checked = {0, n - 1} | set(rng.sample(range(n), min(n, 12)))  # the unit test checks them all in Python)
        move(page, i, ["Home"])
        at = 0
        for p in sorted(checked):      # the keys between two checked positions pressed in one go
            move(page, i, ["ArrowRight"] * (p - at))
            at = p
            check(page, tuple(GRID[name][p] if j == i else ORIGIN[j] for j in range(4)), presets, True)
        move(page, i, ["Home"] + ["ArrowRight"] * GRID[name].index(ORIGIN[i]))
        check(page, ORIGIN, presets, True)
    lab.screenshot(page, "03_loss_scaling-replay-no-kernel", near=PLOT)
    # two controls away: not computed; the nearest computed setting greyed and the line
    move(page, 1, ["ArrowRight"] * 3)
    check(page, (16, 8, 0.5, 1), presets, True)
    move(page, 3, ["ArrowRight"] * 2)
    check(page, (16, 8, 0.5, 3), presets, True, exact=False)
    assert page.evaluate("(sel) => document.querySelector(sel).closest('.jupyter-widgets-disconnected') !== null",
                         VIEW)                           # how the page knows at once that no kernel will answer
    lab.screenshot(page, "03_loss_scaling-replay-uncomputed", near=PLOT)
    move(page, 1, ["ArrowLeft"] * 3)                    # back to one control away: drawn again, no line
    check(page, (16, 5, 0.5, 3), presets, True)
    toggle(page, "input.ampkit-preset-at-init")         # the presets from their own defaults
    check(page, (16, 5, 0.5, 3), presets, False)
    lab.assert_clean(page)
