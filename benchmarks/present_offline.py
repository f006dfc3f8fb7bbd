"""The presenter's dashboard on a stalled venue network: `make present NB=03` opened in chromium while every request
to another machine hangs (never answered, as on a network that accepts connections and then stalls), once with
Voilà's own `lab` template and once with the kit's `ampkit` template.

    python benchmarks/present_offline.py [--json PATH] [--timeout 120]

For each: the seconds from the page's first byte to the loss scaler's slider on screen, and the requests that left
this machine. Writes benchmarks/results/present_offline.json. One run each (timings vary from run to run; they
include Voilà running notebook 03). Not part of `make test`; the test that every request stays on 127.0.0.1 is
tests/browser/test_present_browser.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from ampkit._net import free_port as _free_port

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "present_offline.json"
SLIDER = ".ampkit-scaler input.ampkit-scale-range"   # notebook 03's loss scaler, drawn in the browser
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def measure(template: str, browser, timeout: float) -> dict:
    port, work = _free_port(), Path(tempfile.mkdtemp(prefix="ampkit-present-"))
    env = dict(os.environ)
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        env[var] = str(work / var.lower())
    extra = [] if template == "ampkit" else [f"--template={template}"]
    cmd = [sys.executable, "-m", "ampkit.classroom.present", "03", f"--port={port}", "--no-browser", *extra]
    log = open(work / "voila.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.3)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        outside: list[str] = []

        def stall(route):  # another machine: never answered (a stalled network); this one: as usual
            if urlsplit(route.request.url).hostname == "127.0.0.1":
                route.continue_()
            else:
                outside.append(route.request.url)

        context.route("**/*", stall)
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/", wait_until="commit", timeout=60_000)
        t0 = time.monotonic()
        try:
            page.wait_for_selector(SLIDER, state="visible", timeout=timeout * 1000)
            seconds = round(time.monotonic() - t0, 1)
        except Exception:
            seconds = None
        context.close()
        return {"template": template, "seconds_to_slider": seconds, "timeout_s": timeout,
                "requests_to_other_machines": sorted(set(outside))}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("AMPKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            runs = [measure(t, browser, a.timeout) for t in ("lab", "ampkit")]
        finally:
            browser.close()
    result = {"what": "make present NB=03 in headless chromium, every request to another machine stalled",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cores": os.cpu_count(), "runs": runs,
              "note": "one run each; the time includes Voilà running notebook 03; seconds_to_slider null: the "
                      "slider was not on screen after timeout_s (a stylesheet in the page's head that never arrives "
                      "holds the page); other machines give other figures"}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
