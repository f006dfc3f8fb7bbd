"""Notebook 04 in a real JupyterLab: the sink timeline is drawn in the browser (ampkit/widgets/js/sink.js), which
computes the timeline of each setting itself (the arithmetic against the engine: test_front_sink_arith_browser.py).

- Run All: the view shows data+graph+loop at sink_size 4 (8 steps, 2 syncs); random key moves on its five sliders,
  clicks on the mode buttons and the device checkbox; after each, every bar (lane, kind, start and end, and its x and
  width on the time axis), the empty-lane notes, the readout and the title equal what the engine (ampkit.timeline's
  summarise and gantt_bars, through SinkTimeline) computes for the setting the page shows. "measure on this machine"
  runs the kernel's calibration: the sliders take the measured costs, the status says them.
- The saved notebook, opened and not run (no kernel): the same random moves, the same checks; "measure" says in one
  line that it needs the notebook run.
- The same in the notebook's static HTML page (ampkit._nbexport: no kernel, no widget manager, nothing fetched).
"""
from __future__ import annotations

import json
import math
import random
import re
import time

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "04_data_sinking.ipynb"
VIEW = ".jp-OutputArea .ampkit-sink"
PLOT = VIEW + " svg.ampkit-sink-plot"
# sink.js's geometry: the time axis runs from x = 78 to x = 860 - 16
X0, X1 = 78, 844
# the sliders in DOM order: (trait, min, max, step, log)
RANGES = [("sink_steps", 1, 32, 1, False), ("prep_us", 0, 4, 0.01, True), ("launch_us", -1, 2, 0.01, True),
          ("op_count", 1, 400, 1, False), ("op_us", -1, 3, 0.01, True)]
MODES = ("none", "data", "data+graph", "data+graph+loop")


def shown(page, view: str = VIEW) -> dict:
    """What the view shows: its setting and fixed costs (as Python's repr), bars, notes, readout cells, title."""
    return page.evaluate("""(sel) => {
        const v = document.querySelector(sel);
        const plot = v.querySelector('svg.ampkit-sink-plot');
        const num = (e, a) => Number(e.getAttribute(a));
        return {state: JSON.parse(plot.dataset.state), base: JSON.parse(plot.dataset.base), end: plot.dataset.end,
                bars: [...plot.querySelectorAll('.ampkit-sink-bar')].map(b => [b.dataset.lane, b.dataset.kind,
                       b.dataset.t0, b.dataset.t1, num(b, 'x'), num(b, 'width'), b.getAttribute('fill')]),
                notes: [...plot.querySelectorAll('.ampkit-sink-empty')].map(n => [n.dataset.lane, n.textContent]),
                legend: plot.querySelectorAll('.ampkit-sink-legend rect').length,
                cells: Object.fromEntries([...v.querySelectorAll('.ampkit-sink-summary td')]
                                          .map(td => [td.className || 'mode', td.textContent])),
                title: plot.querySelector('.ampkit-sink-title').textContent,
                status: v.querySelector('.ampkit-sink-status').textContent,
                pressed: [...v.querySelectorAll('.ampkit-sink-mode[aria-pressed=true]')].map(b => b.dataset.mode)};
    }""", view)


def engine_view(got: dict):
    """A SinkTimeline set to the page's setting and fixed costs: the engine's timeline of what the page shows."""
    from ampkit.timeline import SimParams
    from ampkit.widgets.sink_timeline import SinkTimeline

    b = {k: None if v is None else float(v) for k, v in got["base"].items()}
    view = SinkTimeline()
    view._base = SimParams(copy=b["copy"], sync=b["sync"], callback=b["callback"], handoff=b["handoff"],
                           graph_launch=b["graph_launch"], graph_compute=None if b["fusion"] is None else 1.0,
                           depth=int(b["depth"]))
    view.base_costs = {**b, "depth": int(b["depth"])}
    s = got["state"]
    view.sink_mode, view.device_async = s["sink_mode"], s["device_async"]
    view.sink_steps, view.op_count = int(float(s["sink_steps"])), int(float(s["op_count"]))
    view.prep_us, view.launch_us, view.op_us = (float(s[k]) for k in ("prep_us", "launch_us", "op_us"))
    return view


def check_against_engine(got: dict) -> None:
    from ampkit.widgets.sinking import KIND_COLOURS

    view = engine_view(got)
    end = float(got["end"])
    assert end == max(view.timeline.total / 1e-6, 1e-9) * 1.01
    want = [[e.lane, e.kind, e.start, e.end] for e in view.bars]
    assert [[lane, kind, float(t0), float(t1)] for lane, kind, t0, t1, *_ in got["bars"]] == want
    for (_lane, kind, t0, t1, x, width, fill) in got["bars"]:
        x_want = X0 + float(t0) / 1e-6 / end * (X1 - X0)
        assert x == pytest.approx(x_want, abs=1e-6)
        assert x + width == pytest.approx(X0 + float(t1) / 1e-6 / end * (X1 - X0), abs=1e-6)
        assert fill == KIND_COLOURS[kind]
    used = {e.lane for e in view.bars}
    assert [lane for lane, _ in got["notes"]] == [lane for lane in ("loader", "device") if lane not in used]
    cells = dict(re.findall(r"<td class='(ampkit-sink-\w+)'>(.*?)</td>", view.readout_html))
    assert {k: v for k, v in got["cells"].items() if k != "mode"} == cells
    assert got["cells"]["mode"] == view.sink_mode and got["pressed"] == [view.sink_mode]
    assert got["title"] == view.title_text
    assert got["legend"] == 8


def wait_for(page, expect: dict, timeout: float = 30.0, view: str = VIEW) -> dict:
    """Wait until the page shows the setting ``expect`` (log sliders: their value 10**exponent), then return it."""
    deadline = time.monotonic() + timeout
    while True:
        got = shown(page, view)
        s = got["state"]
        ok = all((math.isclose(float(s[k]), v, rel_tol=1e-12) if isinstance(v, float) else
                  (s[k] == v if isinstance(v, (str, bool)) else float(s[k]) == v)) for k, v in expect.items())
        if ok:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"the page shows {s}, expected {expect}")
        page.wait_for_timeout(100)


def position(value: float, log: bool) -> float:
    return round(math.log10(value), 2) if log else value


def press(page, index: int, key: str, presses: int = 1, view: str = VIEW) -> None:
    """Focus the view's ``index``-th range input and press ``key`` ``presses`` times."""
    handle = page.locator(f"{view} input[type=range]").nth(index)
    handle.scroll_into_view_if_needed()
    handle.focus()
    for _ in range(presses):
        handle.press(key)


def random_moves(page, rng: random.Random, expect: dict, moves: int, view: str = VIEW) -> None:
    """Random keys on the sliders, clicks on the modes and the device checkbox; each state checked."""
    pos = {t: position(expect[t], log) for t, _lo, _hi, _st, log in RANGES}
    for _ in range(moves):
        r = rng.random()
        if r < 0.2:
            mode = rng.choice([m for m in MODES if m != expect["sink_mode"]])
            page.locator(f"{view} button.ampkit-sink-mode[data-mode='{mode}']").first.click()
            expect["sink_mode"] = mode
        elif r < 0.3:
            page.locator(f"{view} input.ampkit-sink-async").first.click()
            expect["device_async"] = not expect["device_async"]
        else:
            i = rng.randrange(len(RANGES))
            trait, lo, hi, st, log = RANGES[i]
            presses, key = rng.randint(1, 12 if log else 6), rng.choice(["ArrowRight", "ArrowLeft"])
            press(page, i, key, presses, view)
            pos[trait] = round(min(hi, max(lo, pos[trait] + (presses if key == "ArrowRight" else -presses) * st)), 2)
            expect[trait] = 10 ** pos[trait] if log else int(pos[trait])
        check_against_engine(wait_for(page, expect, view=view))


START = {"sink_mode": "data+graph+loop", "sink_steps": 4, "op_count": 60, "device_async": True}


def test_sink_timeline_follows_every_control_and_measures(lab):
    page = lab.open_and_run(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    got = wait_for(page, START)
    check_against_engine(got)
    assert got["cells"]["ampkit-sink-syncs"] == "0.25"      # 8 steps shown, a sync after every 4
    assert page.evaluate("(e) => e.getBoundingClientRect().width", page.locator(PLOT).first.element_handle()) == 860
    lab.screenshot(page, "04_data_sinking-timeline-start", near=PLOT)

    lab.move_range(page, 0, "ArrowRight", presses=12)         # sink_size 16: 32 steps shown, 2 syncs
    got = wait_for(page, {**START, "sink_steps": 16})
    check_against_engine(got)
    assert got["cells"]["ampkit-sink-syncs"] == "0.0625"
    assert float(got["cells"]["ampkit-sink-step"].split()[0]) < 296.2
    lab.screenshot(page, "04_data_sinking-timeline-16", near=PLOT)

    expect = {**START, "sink_steps": 16, "prep_us": float(got["state"]["prep_us"]),
              "launch_us": float(got["state"]["launch_us"]), "op_us": float(got["state"]["op_us"])}
    random_moves(page, random.Random(3), expect, moves=10)

    page.locator(f"{VIEW} button.ampkit-sink-measure").first.click()     # the kernel measures (the notebook's cal)
    lab.wait_for_text(page, VIEW + " .ampkit-sink-status", "measured on cpu")
    page.wait_for_function("(sel) => document.querySelector(sel).querySelector('input.ampkit-sink-async').checked"
                           " === false", arg=VIEW, timeout=30_000)
    got = shown(page)
    check_against_engine(got)
    assert got["state"]["device_async"] is False and "launch" in got["status"]
    lab.screenshot(page, "04_data_sinking-timeline-measured", near=PLOT)
    lab.assert_clean(page)


def test_sink_timeline_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: every control moves the view, each state the engine's; measure says why
    it cannot."""
    page = lab.open_saved(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    got = wait_for(page, START)
    check_against_engine(got)
    expect = {**START, **{k: float(got["state"][k]) for k in ("prep_us", "launch_us", "op_us")}}
    random_moves(page, random.Random(11), expect, moves=14)
    lab.move_range(page, 3, "End")                           # 400 ops per step: more events than bars (blocks)
    lab.move_range(page, 4, "Home")
    got = wait_for(page, {**expect, "op_count": 400, "op_us": 0.1})
    check_against_engine(got)
    lab.screenshot(page, "04_data_sinking-timeline-no-kernel", near=PLOT)

    page.locator(f"{VIEW} button.ampkit-sink-measure").first.click()
    lab.wait_for_text(page, VIEW + " .ampkit-sink-status", "run the notebook to compute this on your machine")
    lab.screenshot(page, "04_data_sinking-timeline-no-kernel-measure", near=VIEW + " .ampkit-sink-status")
    assert json.dumps(shown(page)["state"]) == json.dumps(got["state"])      # nothing else changed
    lab.assert_clean(page)


def test_sink_timeline_moves_in_a_static_page(tmp_path, browser):
    """The notebook exported by ampkit._nbexport (a file:// page, no kernel, no widget manager, every other request
    refused): the view is drawn from the saved state, moves, and each state is the engine's; measure says the line."""
    from ampkit._nbexport import write_html
    from conftest import ROOT

    out = tmp_path / "04.html"
    write_html(ROOT / "notebooks" / NOTEBOOK, out)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, refused = [], []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file://", "blob:", "data:"))
               else (refused.append(route.request.url), route.abort()))
    try:
        page.goto(out.as_uri())
        view = ".ampkit-sink"
        page.wait_for_selector(view + " svg.ampkit-sink-plot")
        got = wait_for(page, START, view=view)
        check_against_engine(got)
        expect = {**START, **{k: float(got["state"][k]) for k in ("prep_us", "launch_us", "op_us")}}
        random_moves(page, random.Random(5), expect, moves=8, view=view)
        page.locator(view + " button.ampkit-sink-measure").click()
        page.wait_for_function("(sel) => document.querySelector(sel).textContent.includes('run the notebook')",
                               arg=view + " .ampkit-sink-status", timeout=10_000)
        assert page.locator(".ampkit-static-view img").count() == 0           # the still picture replaced
        assert not errors and not refused, (errors, refused)
    finally:
        page.close()
