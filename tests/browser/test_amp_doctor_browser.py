"""Notebook 05's AMP doctor in a real JupyterLab, drawn in the browser (ampkit/widgets/js/amp_doctor.js) from the
reports the engine computed when the view started (every scenario, broken and with its fix).

- Run All: the doctor shows the forward-overflow report; the picker and the two run buttons switch reports, "Run it
  again" asks the kernel for a new run (the seeded run gives the same report). At each step the findings, the
  headroom bars (per module: status, printed bits, height), the loss-scale trace (per step, skipped steps marked)
  and the loss trace (NaN marked) are what ampkit.lessons.amp_in_practice.run_scenario reports.
- The saved notebook, opened and not run (no kernel): every report is reachable with the picker and the buttons and
  equals the engine's; "Run it again" says to run the notebook.
"""
from __future__ import annotations

import html
import math
import random
import re

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "05_amp_in_practice.ipynb"
VIEW = ".jp-OutputArea .ampkit-doctor"
# amp_doctor.js's geometry: 760 px wide; headroom 390 high (plot y 58 … 308), scales 300 (58 … 250), losses 260
# (58 + 14 … 210); the steps' x from 80 in both traces
W = 760


def _x(i: int, n: int, left: int) -> float:
    return left + (i + 0.5) / n * (W - left - 16)


def expected(name: str, fixed: bool) -> dict:
    """What the page must draw for the report (name, fixed), from a fresh engine run."""
    from ampkit.i18n import tr
    from ampkit.lessons.amp_in_practice import run_scenario
    from ampkit.widgets.amp_doctor import report_html

    r = run_scenario(name, fixed=fixed)
    ev = r.evidence
    out: dict = {"state": f"{name}|{int(fixed)}",
                 "report": html.unescape(re.sub(r"<[^>]+>", "", report_html(r))), "bars": [], "scales": [],
                 "skips": [], "losses": [], "nans": []}
    if ev["kind"] == "headroom":
        ok = [b for b in ev["bits"] if math.isfinite(b) and b >= 0]
        top = max([1.0] + ok) * 1.3
        for name_, b in zip(ev["names"], ev["bits"]):
            if math.isfinite(b) and b >= 0:
                y = 308 - b / top * 250
                out["bars"].append([name_, "ok", y, 308 - y, tr("{value} bits", value=f"{b:.1f}")])
            else:                              # an overflow: drawn to the top, its value written on it
                out["bars"].append([name_, "overflow", 58, 250, tr("OVERFLOW") + tr("{value} bits", value=f"{b:+.1f}")])
    if ev["kind"] == "scales":
        ks = [math.log2(s) for s in ev["scales"]]
        lo, hi = math.floor(min(ks)) - 1, math.ceil(max(ks)) + 1
        out["scales"] = [[_x(i, len(ks), 80), 250 - (k - lo) / (hi - lo) * 192] for i, k in enumerate(ks)]
        out["skips"] = [i for i, s in enumerate(ev["skipped"]) if s]
    losses = ev.get("losses", [])
    finite = [v for v in losses if math.isfinite(v)]
    lo, hi = min([0.0] + finite), (max(finite) * 1.15 or 1.0) if finite else 1.0
    out["losses"] = [[_x(i, len(losses), 80), 210 - (v - lo) / (hi - lo) * 138] for i, v in enumerate(losses)
                     if math.isfinite(v)]
    out["nans"] = [i for i, v in enumerate(losses) if not math.isfinite(v)]
    return out


def shown(page) -> dict:
    return page.evaluate("""(sel) => {
        const v = document.querySelector(sel);
        const num = (e, a) => Number(e.getAttribute(a));
        const all = (s) => [...v.querySelectorAll(s)];
        return {
          state: v.dataset.drawn, report: v.querySelector('.ampkit-doctor-report').textContent,
          bars: all('.ampkit-doctor-bar').map((b) => [b.dataset.module, b.dataset.status, num(b, 'y'), num(b, 'height'),
            v.querySelector(`.ampkit-doctor-bar-label[data-module='${b.dataset.module}']`).textContent]),
          scales: all('.ampkit-doctor-scale').map((c) => [num(c, 'cx'), num(c, 'cy')]),
          skips: all('.ampkit-doctor-skip').map((c) => Number(c.dataset.step)),
          losses: all('.ampkit-doctor-loss').map((c) => [num(c, 'cx'), num(c, 'cy')]),
          nans: all('.ampkit-doctor-loss-nan').map((c) => Number(c.dataset.step)),
          pressed: all('button.ampkit-doctor-show[aria-pressed=true]').map((b) => b.dataset.fixed),
          picked: v.querySelector('select.ampkit-doctor-picker').value,
        };
    }""", VIEW)


def check(page, name: str, fixed: bool) -> None:
    """Wait for the view to draw the report, then compare everything drawn with the engine's report."""
    want = expected(name, fixed)
    page.wait_for_function("([sel, s]) => document.querySelector(sel)?.dataset.drawn === s",
                           arg=[VIEW, want["state"]], timeout=30_000)
    got = shown(page)
    assert got["state"] == want["state"] and got["picked"] == name and got["pressed"] == [str(int(fixed))]
    assert got["report"] == want["report"]
    assert [b[:2] + b[4:] for b in got["bars"]] == [b[:2] + b[4:] for b in want["bars"]]
    for g, w in zip(got["bars"], want["bars"]):
        assert g[2:4] == pytest.approx(w[2:4], abs=1e-6), (name, fixed, g)
    for key in ("scales", "losses"):
        assert len(got[key]) == len(want[key]), (key, name, fixed)
        for g, w in zip(got[key], want[key]):
            assert g == pytest.approx(w, abs=1e-6), (key, name, fixed)
    assert got["skips"] == want["skips"] and got["nans"] == want["nans"]


def pick(page, name: str, fixed: bool | None = None) -> None:
    view = page.locator(VIEW).first
    if name is not None:
        view.locator("select.ampkit-doctor-picker").select_option(name)
    if fixed is not None:
        view.locator(f"button.ampkit-doctor-show[data-fixed='{int(fixed)}']").click()


def test_pick_a_scenario_see_it_fixed_and_run_it_again(lab):
    page = lab.open_and_run(NOTEBOOK)
    lab.assert_clean(page)
    view = page.locator(VIEW).first
    view.scroll_into_view_if_needed()
    check(page, "fp16 forward overflow", False)
    assert "net.2" in lab.text(page, ".ampkit-doctor-diagnosis")
    lab.screenshot(page, "amp_doctor_initial", near=VIEW)

    pick(page, "log of zero")
    check(page, "log of zero", False)
    assert "persistent" in lab.text(page, ".ampkit-doctor-diagnosis")
    lab.screenshot(page, "amp_doctor_log_of_zero", near=VIEW)
    pick(page, None, True)
    check(page, "log of zero", True)
    assert lab.text(page, ".ampkit-doctor-verdict") == "log of zero: healthy (fix applied)"

    view.locator("button.ampkit-doctor-rerun").click()         # a new run in the kernel: the same seeded report
    page.wait_for_function("(sel) => document.querySelector(sel + ' .ampkit-doctor-status').dataset.answer === 'same'",
                           arg=VIEW, timeout=30_000)
    assert lab.text(page, ".ampkit-doctor-status") == "ran again in the kernel: the same report"
    check(page, "log of zero", True)

    for name, fixed in (("transient spikes", True), ("adam eps in fp16", False), ("model.half() + GradScaler", True)):
        pick(page, name, fixed)
        check(page, name, fixed)
    lab.screenshot(page, "amp_doctor_half_fixed", near=VIEW)
    pick(page, "adam eps in fp16", False)
    lab.screenshot(page, "amp_doctor_adam_nan", near=VIEW)
    lab.assert_clean(page)


def test_amp_doctor_switches_reports_without_a_kernel(lab):
    """The saved notebook, nothing run: every report is reachable and equals the engine's; a new run needs a kernel."""
    from ampkit.lessons.amp_in_practice import SCENARIOS

    page = lab.open_saved(NOTEBOOK)
    page.locator(VIEW).first.scroll_into_view_if_needed()
    check(page, "fp16 forward overflow", False)
    states = [(n, f) for n in SCENARIOS for f in (False, True)]
    random.Random(5).shuffle(states)
    for name, fixed in states:
        pick(page, name, fixed)
        check(page, name, fixed)
    page.locator(VIEW).first.locator("button.ampkit-doctor-rerun").click()
    assert lab.text(page, ".ampkit-doctor-status") == "run the notebook to compute this on your machine"
    name, fixed = states[-1]
    check(page, name, fixed)                                  # the report stays drawn
    pick(page, "fp16 forward overflow", True)
    check(page, "fp16 forward overflow", True)
    lab.screenshot(page, "amp_doctor_no_kernel_bf16", near=VIEW)
    lab.assert_clean(page)
