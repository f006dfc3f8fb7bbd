"""The login storm's real browsers: one learner in headless Chromium (Debian's ``/usr/bin/chromium`` through
Playwright; never ``playwright install``), as a person clicks: the hub's login page, the spawn-pending page,
JupyterLab, notebook 03's Run All, its slider moved with the keyboard. Used by ``benchmarks/bench_storm.py``.
Each learner has its own Playwright and Chromium (the sync API is one per thread), closed at the end.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from roomtools import storm  # tests/roomtools/ (bench_storm.py puts tests/ on sys.path)

NOTEBOOK = "03_loss_scaling"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]
SLIDER = ".jp-OutputArea .ampkit-scaler input.ampkit-scale-range"   # the view drawn in the browser
IMAGE = ".jp-OutputArea svg.ampkit-scale-plot"                      # its drawing (data-k: the position drawn)
RUN_ALL_DONE = """() => { const c = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell')]
                      .filter(cell => !cell.querySelector('.jp-InputPlaceholder'))
                      .map(cell => cell.querySelector('.jp-InputPrompt'));
                    return c.length > 0 && c.every(p => p && /\\[\\d+\\]/.test(p.textContent))
                      && !!document.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']"); }"""
KERNEL_IDLE = """() => !!document.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
                      && !document.querySelector('.jp-Dialog')"""


def chromium() -> str:
    for c in (os.environ.get("AMPKIT_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if c and os.path.exists(c):
            return c
    raise storm.StormError("no chromium found (install Debian's `chromium`, or set AMPKIT_CHROMIUM)")


WIDGET_SHOWN = """() => [...document.querySelectorAll('.jp-OutputArea .jupyter-widgets, .jp-OutputArea .ampkit-front')]
                        .some((e) => e.getClientRects().length > 0)"""


def _poll(page, predicate: str, deadline: float, what: str) -> None:
    """Wait for a JS predicate, answering JupyterLab's "Select Kernel" dialog if it pops up."""
    dialog = page.locator(".jp-Dialog:has-text('Select Kernel') .jp-mod-accept")
    while time.monotonic() < deadline:
        if dialog.count():
            dialog.first.click()
        if page.evaluate(predicate):
            return
        page.wait_for_timeout(250)
    raise storm.StormError(f"timed out waiting for {what}")


def browser_learner(h, rec: dict, t0: float, args, abort) -> None:
    """One learner in Chromium; fills ``rec`` like ``bench_storm.http_learner``. Never raises."""
    from playwright.sync_api import sync_playwright

    name, stage = rec["name"], "login"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(60_000)
                time.sleep(max(0.0, t0 + rec["arrival_s"] - time.monotonic()))
                start = time.monotonic()
                deadline = start + args.learner_timeout
                page.goto(f"{h.url}/hub/login")
                page.fill("#username_input", name)
                page.fill("#password_input", h.password)
                page.click("#login_submit")
                page.wait_for_url(lambda u: "/hub/login" not in u, timeout=60_000)
                while "Too many users" in page.content() or "Active user limit" in page.content():
                    rec["retries"] += 1                        # the learner reads "Try again in ..." and reloads
                    if rec["retries"] > 10 or time.monotonic() + 30 > deadline:
                        raise storm.StormError("still told to retry (429)")
                    page.wait_for_timeout(30_000)
                    page.reload()
                if "/hub/login" in page.url:
                    raise storm.StormError(f"login refused: {page.locator('.login_error').inner_text()}")
                rec["login_s"] = round(time.monotonic() - start, 2)
                stage = "spawn"
                page.wait_for_url(re.compile(rf"/user/{name}/lab"),
                                  timeout=max(1000, int(1000 * (deadline - time.monotonic()))))
                rec["ready_s"] = round(time.monotonic() - start, 2)
                stage = "kernel"
                page.goto(f"{h.url}/user/{name}/lab/tree/notebooks/{NOTEBOOK}.ipynb")
                page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached")
                _poll(page, KERNEL_IDLE, deadline, "the kernel to start")
                page.locator(".jp-NotebookPanel .jp-Cell").first.click()
                t_run = time.monotonic()
                page.click(".lm-MenuBar-item:has-text('Run')")
                page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
                # any view drawn and shown (not the first match only, as wait_for_selector checks), answering the
                # "Select Kernel" dialog if JupyterLab asks again
                _poll(page, WIDGET_SHOWN, deadline, "a view to be drawn")
                rec["first_widget_s"] = round(time.monotonic() - start, 2)
                _poll(page, RUN_ALL_DONE, deadline, "Run All to finish")
                rec["run_all_s"] = round(time.monotonic() - t_run, 2)
                stage = "slider"
                handle = page.locator(SLIDER).first
                image = page.locator(IMAGE).first
                handle.scroll_into_view_if_needed()
                handle.focus()
                for _ in range(args.updates):
                    if abort.is_set():
                        raise storm.StormError("aborted")
                    before = image.get_attribute("data-k")
                    t = time.perf_counter()
                    handle.press("ArrowRight")         # a new position each time: a real redraw
                    page.wait_for_function("([sel, old]) => { const e = document.querySelector(sel);"
                                           " return e && e.getAttribute('data-k') !== old; }",
                                           arg=[IMAGE, before], timeout=int(1000 * args.update_timeout))
                    rec["update_ms"].append(round(1000 * (time.perf_counter() - t), 1))
                    page.wait_for_timeout(int(1000 * args.pause))
            except Exception:
                try:                                   # what the learner saw when it failed, to look at
                    shots = Path(__file__).resolve().parents[1] / "artifacts" / "storm"
                    shots.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shots / f"FAILED-{name}-{stage}.png"))
                except Exception:                      # noqa: BLE001 — the failure itself is what is reported
                    pass
                raise
            finally:
                browser.close()
    except Exception as exc:   # noqa: BLE001 — reported in the JSON; the storm goes on
        rec["failed"], rec["error"] = stage, f"{type(exc).__name__}: {exc}"[:300]
