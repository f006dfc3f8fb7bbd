"""The static pages of the lessons (``python -m ampkit._nbexport``): what an export costs and how soon the views
move in a browser with no kernel and no network (issue #30 "Views drawn in the browser", item 2).

For every committed notebook (``notebooks/NN_*.ipynb``; ``--zh`` adds ``notebooks/zh_CN``), each figure means:

- **export seconds**: ``python -m ampkit._nbexport NB -o PAGE`` run as a command, wall clock (``export_s``: the
  interpreter starting and importing nbconvert included) and the export's own figure, ``write_html``'s seconds as
  the command prints them (``write_s``); the page's size (``page_kb``);
- **page open -> views drawn**: the page opened from disk (``file://``) in headless Chromium, nothing fetched
  (the runtime ``ampkit/widgets/static/page.js`` is inlined): milliseconds from the navigation's start (the page's
  ``performance`` time origin) to the moment ``ampkit/widgets/static/page.js`` sets ``body[data-ampkit-views]``
  (``"drawn/places"``, stamped inside the page by a ``MutationObserver`` installed before any script runs), the
  median of ``--rounds`` openings (default 3, each in a new page); ``views`` is that attribute (every kit view
  drawn when both numbers are equal; ``page_errors``: the page's errors and console errors, e.g. why a view was
  not drawn); ``load_ms`` the page's load event for comparison. A notebook with no kit
  view (08) has no runtime and no attribute: ``-``.
- **key press -> redrawn** in the static page (``key_presses``): in the first opening, each drawn view's first
  control (a range, or AmpDoctor's ``<select>``) pressed 15 times (3 up, 3 down, ...; a control at its top starts
  down), timed inside the page as ``bench_browser_latency.py`` does (the view's last change after the press, quiet
  after 300 ms); ``no_change`` counts presses after which nothing changed within 5 s. Target (issue #30): <= 16 ms.

No target in the issue; printed for comparison. Skips, with a message, when no chromium or no playwright is found.

    .venv/bin/python benchmarks/bench_static_pages.py [--zh] [--rounds N] [--json [PATH]] [NN ...]
        # PATH: benchmarks/results/static_pages.json; NN: only notebooks whose names start so (e.g. 03)
"""
from __future__ import annotations

import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_browser_latency import INSTALL_JS, load_harness, percentile
from bench_notebooks import host_info

ROOT = Path(__file__).resolve().parents[1]
STAMP_JS = """(() => {
  window.__ampkitDrawn = null;
  const seen = () => {
    const v = document.body && document.body.dataset.ampkitViews;
    if (v && window.__ampkitDrawn === null) window.__ampkitDrawn = {ms: performance.now(), views: v};
    return !!v;
  };
  const obs = new MutationObserver(() => { if (seen()) obs.disconnect(); });
  obs.observe(document, {subtree: true, attributes: true, attributeFilter: ["data-ampkit-views"], childList: true});
})();"""


def export(nb: Path, out: Path) -> tuple[float, float]:
    """Run the export command; (wall seconds, the seconds it printed for write_html)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ampkit._nbexport", str(nb), "-o", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"export of {nb.name} failed: {r.stderr.strip().splitlines()[-1:]}")
    m = re.search(r"in ([0-9.]+) s", r.stdout)
    return wall, float(m.group(1)) if m else float("nan")


QUIET_JS = """(quiet) => { const s = window.__ampkitLat;
                            return s.first !== null && performance.now() - s.last > quiet; }"""
DIRECTION_JS = """(c) => c.tagName === 'SELECT' ? (c.selectedIndex < c.options.length - 1 ? 1 : -1)
                                          : (Number(c.value) < Number(c.max) ? 1 : -1)"""


def press_controls(page) -> list[dict]:
    """In an opened page, each drawn view's first control (a range or a <select>), 15 key presses: ms from the key
    press to the view's last change (``bench_browser_latency``'s in-page stamps; quiet after 300 ms)."""
    out = []
    views = page.locator(".ampkit-static-view[data-rendered=true]")
    for i in range(views.count()):
        control = views.nth(i).locator("input[type=range], select").first
        if control.count() == 0:
            continue                      # a view with buttons only (BlockScalingExplorer) or none (LiveLossPlot)
        control.scroll_into_view_if_needed()
        page.evaluate(INSTALL_JS, control.element_handle())
        select = control.evaluate("(c) => c.tagName === 'SELECT'")
        up, down = ("ArrowDown", "ArrowUp") if select else ("ArrowRight", "ArrowLeft")
        if page.evaluate(DIRECTION_JS, control.element_handle()) < 0:
            up, down = down, up
        control.focus()
        redrawn, missed = [], 0
        for key in ([up] * 3 + [down] * 3) * 2 + [up] * 3:
            control.press(key)
            try:
                page.wait_for_function(QUIET_JS, arg=300, timeout=5_000, polling=50)
            except Exception:                 # the press changed nothing within 5 s
                missed += 1
                continue
            s = page.evaluate("() => window.__ampkitLat")
            redrawn.append(s["last"] - s["t0"])
        name = views.nth(i).evaluate("(v) => v.querySelector('.ampkit-static-rendered > [class]')?.className ?? ''")
        out.append({"view": i, "classes": name[:80], "control": "select" if select else "range",
                    "redrawn_median_ms": round(statistics.median(redrawn), 2) if redrawn else None,
                    "redrawn_p90_ms": round(percentile(redrawn, 0.9), 2) if redrawn else None,
                    "presses": len(redrawn), "no_change": missed})
    return out


def open_page(browser, page_path: Path, rounds: int) -> dict:
    """Open the page ``rounds`` times: ms to body[data-ampkit-views] and to the load event (medians)."""
    has_views = 'class="jp-OutputArea-output ampkit-static-view' in page_path.read_text(encoding="utf-8")
    drawn, load, views, errors, presses = [], [], None, [], []
    for _ in range(rounds):
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.add_init_script(STAMP_JS)
        page.goto(page_path.as_uri(), wait_until="load", timeout=120_000)
        if has_views:
            page.wait_for_function("() => window.__ampkitDrawn !== null", timeout=60_000, polling=50)
            s = page.evaluate("() => window.__ampkitDrawn")
            drawn.append(s["ms"])
            views = s["views"]
        load.append(page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd"))
        if has_views and not presses:
            presses = press_controls(page)
        page.close()
    return {"views": views, "drawn_ms": round(statistics.median(drawn), 1) if drawn else None,
            "drawn_ms_each": [round(x, 1) for x in drawn], "load_ms": round(statistics.median(load), 1),
            "page_errors": list(dict.fromkeys(errors))[:3], "key_presses": presses}


def main(argv: list[str]) -> int:
    harness = load_harness()
    chromium = harness.find_chromium()
    if chromium is None:
        print("bench_static_pages: SKIPPED — no chromium found (install Debian's `chromium`, or set AMPKIT_CHROMIUM)")
        return 0
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("bench_static_pages: SKIPPED — playwright is not installed (pip install -e '.[test]')")
        return 0
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    json_at = argv.index("--json") if "--json" in argv else None
    json_path = argv[json_at + 1] if json_at is not None and len(argv) > json_at + 1 \
        and not argv[json_at + 1].startswith("-") else None
    skip = {json_path, str(rounds) if "--rounds" in argv else None}
    wanted = [a for a in argv if not a.startswith("-") and a not in skip]
    books = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if "--zh" in argv:
        books += sorted((ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb"))
    books = [b for b in books if not wanted or any(b.name.startswith(w) for w in wanted)]
    load_start = os.getloadavg()
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ampkit-static-") as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=harness.CHROMIUM_ARGS)
        try:
            for nb in books:
                rel = str(nb.relative_to(ROOT))
                out = Path(tmp) / (nb.parent.name + "-" + nb.stem + ".html")
                try:
                    wall, write_s = export(nb, out)
                    rows[rel] = {"export_s": round(wall, 2), "write_s": write_s,
                                 "page_kb": round(out.stat().st_size / 1024, 1), **open_page(browser, out, rounds)}
                except Exception as exc:      # one notebook failing is reported; the others are measured
                    rows[rel] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
                r = rows[rel]
                if "error" in r:
                    print(f"  {rel:50} NOT MEASURED  {r['error']}", flush=True)
                    continue
                drawn = "-" if r["drawn_ms"] is None else f"{r['drawn_ms']:.0f} ms"
                print(f"  {rel:50} export {r['export_s']:5.2f} s (write_html {r['write_s']:.2f} s), "
                      f"{r['page_kb']:6.0f} KB; views {r['views'] or '-':5} drawn {drawn:>7} after the page opened "
                      f"(load {r['load_ms']:.0f} ms)" + (f"  PAGE ERRORS {r['page_errors']}" if r["page_errors"]
                                                         else ""), flush=True)
                for k in r["key_presses"]:
                    med = "-" if k["redrawn_median_ms"] is None else f"{k['redrawn_median_ms']:.1f} ms"
                    print(f"      view {k['view']} ({k['classes'][:40]}): key press -> redrawn {med} median over "
                          f"{k['presses']} presses on its {k['control']}"
                          + (f", {k['no_change']} presses changed nothing" if k["no_change"] else ""), flush=True)
        finally:
            browser.close()
    print(f"(medians of {rounds} openings in headless Chromium; load average {load_start[0]:.1f} at the start)")
    if json_at is not None:
        out = Path(json_path) if json_path else ROOT / "benchmarks" / "results" / "static_pages.json"
        out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                   "host": host_info(), "load_average_at_start": [round(x, 2) for x in load_start],
                                   "command": "python benchmarks/bench_static_pages.py " + " ".join(argv),
                                   "pages": rows}, indent=1) + "\n")
        print(f"written: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
