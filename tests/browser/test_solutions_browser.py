"""Exercise solutions are hidden on a first read in JupyterLab, Notebook 7 and Voilà — and open with one click.

Each exercise's answer is hidden (see ``ampkit/exercises.py``): its explanation is markdown inside a closed
``<details class="ampkit-solution">`` (closed in every viewer, a static one too), the solution cell is
``ex.solution(N)`` (collapsed too: cell metadata ``{"jupyter": {"source_hidden": true}}``, which JupyterLab and
Notebook 7 honour; Voilà hides every input) and its output, the solution's code and what it printed, is a closed
``<details class='ampkit-solution'>``: two closed blocks per exercise. nbval still executes every solution cell
(``ex.solution`` asserts it agrees with the engine), so these tests only check what a learner sees, in the three
front-ends.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampkit.classroom.present import VOILA_DENYLIST
from conftest import (
    BENIGN_CONSOLE,
    ROOT,
    Lab,
    _free_port,
    find_chromium,
    isolated_env,
    stop_process_group,
    wait_until_up,
)

pytestmark = pytest.mark.browser

NOTEBOOK = "00_start_here.ipynb"
DETAILS = "details.ampkit-solution"
SOLUTION_BODY = "def solution_"  # every solution's code (ex.solution(N) shows it): never visible until clicked
ANSWER_1 = "70144"  # Exercise 1's answer (what bf16 stores for 70000), in its explanation only


def _explanations(notebook: str = NOTEBOOK) -> list[str]:
    """The explanation of each exercise (the markdown inside its closed <details>, after the summary), first 20
    characters."""
    found = []
    for c in _cells(notebook):
        src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        if c["cell_type"] == "markdown" and DETAILS.split(".")[1] in src:
            found.append(src.split("</summary>", 1)[1].strip()[:20])
    assert len(found) == _n_solutions(notebook), "one <details> explanation per solution cell"
    return found


def _cells(notebook: str = NOTEBOOK) -> list[dict]:
    return json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]


def _n_solutions(notebook: str = NOTEBOOK) -> int:
    return sum("solution" in c.get("metadata", {}).get("tags", []) for c in _cells(notebook))


def _n_source_hidden(notebook: str = NOTEBOOK) -> int:
    """Cells whose source is collapsed: the solutions plus the exercises' set-up cell."""
    return sum(bool(c.get("metadata", {}).get("jupyter", {}).get("source_hidden")) for c in _cells(notebook))


def test_notebook_hides_every_solution_both_ways():
    """The notebook under test has solutions, each source-hidden and showing a closed <details> (committed outputs)."""
    solutions = [c for c in _cells() if "solution" in c.get("metadata", {}).get("tags", [])]
    assert len(solutions) >= 3
    for cell in solutions:
        assert cell["metadata"]["jupyter"]["source_hidden"] is True
        html = "".join(o.get("data", {}).get("text/html", "") if isinstance(o.get("data", {}).get("text/html"), str)
                       else "".join(o.get("data", {}).get("text/html", [])) for o in cell["outputs"])
        assert "<details class='ampkit-solution'>" in html and "<details class='ampkit-solution' open" not in html


def _require_chromium() -> None:
    if find_chromium():
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the browser tests but no chromium was found (.ci/run installs Debian's chromium)")
    pytest.skip("no chromium found (install Debian's `chromium`, or set AMPKIT_CHROMIUM)")


class _Server:
    """A Jupyter front-end (``jupyter notebook`` or ``voila``) on 127.0.0.1, a free port and a random token, serving a
    throw-away copy of notebooks/ with the committed outputs kept; killed with its whole process group."""

    name = "server"
    disabled: tuple[str, ...] = ()  # lab extensions switched off in this server's own (temporary) config

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.root = workdir / "notebooks"
        shutil.copytree(ROOT / "notebooks", self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.env = isolated_env(workdir)
        self.log_path = workdir / f"{self.name}.log"
        self.log = open(self.log_path, "w")
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> None:
        if self.disabled:
            # --level=user: this server's JUPYTER_CONFIG_DIR (a temporary folder); the default level (sys-prefix)
            # would write into the venv and switch these extensions off for every later server and test
            subprocess.run([sys.executable, "-m", "jupyter", "labextension", "disable", "--level=user", *self.disabled],
                           env=self.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
        root_flag = ["--allow-root"] if os.geteuid() == 0 and self.name != "voila" else []
        self.proc = subprocess.Popen(self.command() + root_flag, cwd=self.root, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        # any HTTP answer means it is up (Voilà has no /api/status: it answers 403)
        wait_until_up(self.proc, f"{self.url}/api/status?token={self.token}", self.name, timeout, self.read_log,
                      any_http_answer=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def read_log(self) -> str:
        self.log.flush()
        return self.log_path.read_text()[-5000:]

    def stop(self) -> None:
        stop_process_group(self.proc)
        self.log.close()


class NotebookServer(_Server):
    """Notebook 7 (``jupyter notebook``): the JupyterLab notebook widget in the classic single-document layout."""

    name = "notebook7"
    disabled = ("@jupyterlab/apputils-extension:announcements", "@voila-dashboards/jupyterlab-preview")

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jupyter", "notebook", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
                "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}"]


class VoilaServer(_Server):
    """Voilà serving one notebook: it executes it on each visit and shows only the outputs."""

    name = "voila"
    disabled = VOILA_DENYLIST  # the extensions `make present` keeps out of Voilà (no use, and errors, there)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "voila", str(self.root / NOTEBOOK), "--no-browser", "--Voila.ip=127.0.0.1",
                f"--port={self.port}", "--Voila.port_retries=0", f"--token={self.token}"]


@pytest.fixture
def served(tmp_path, request):
    """Start the server class given by indirect parametrisation; always stop it (its whole process group)."""
    _require_chromium()
    server = request.param(tmp_path)
    try:
        server.start()
        yield server
    except Exception:
        print(f"{server.name} log tail:\n{server.read_log()}")
        raise
    finally:
        server.stop()


def _open_browser_page(browser, url: str, errors: list[str], extra_benign: tuple[str, ...] = ()):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)

    def on_console(msg):
        if msg.type == "error" and not any(b in msg.text for b in BENIGN_CONSOLE + extra_benign):
            errors.append(f"console error: {msg.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc} {getattr(exc, 'stack', '')}"[:1500]))
    page.goto(url)
    return page


def _details_state(page, root: str = "") -> list[bool]:
    """``open`` of every solution <details> in the page (in DOM order)."""
    return page.evaluate(f"() => [...document.querySelectorAll({json.dumps((root + ' ' + DETAILS).strip())})]"
                         ".map(d => d.open)")


def _open_first_and_check(page, details_selector: str) -> str:
    """Click the first exercise's two <summary>s (its explanation, then its computed check): each opens and shows
    what it hid; return the text of both."""
    explanation, computed = page.locator(details_selector).nth(0), page.locator(details_selector).nth(1)
    explanation.scroll_into_view_if_needed()
    hidden_text = explanation.inner_text() + computed.inner_text()
    assert "solution (click to reveal)" in hidden_text and "computed here (click to reveal)" in hidden_text
    assert ANSWER_1 not in hidden_text and "(solution): correct" not in hidden_text
    shown = []
    for i, block in enumerate((explanation, computed)):
        block.locator("summary").click()
        page.wait_for_function(f"() => document.querySelectorAll({json.dumps(details_selector)})[{i}].open === true")
        shown.append(block.inner_text())
    assert ANSWER_1 in shown[0], shown[0]  # Exercise 1's explanation is now on screen
    assert "exercise 1 (solution): correct" in shown[1] and "def solution_1(" in shown[1], shown[1]
    return "\n".join(shown)


def test_jupyterlab_solutions_collapsed_and_open_on_click(lab):
    page = lab.open_and_run(NOTEBOOK)
    selector = f".jp-NotebookPanel {DETAILS}"
    n = 2 * _n_solutions()
    page.wait_for_function(f"n => document.querySelectorAll({json.dumps(selector)}).length === n", arg=n)
    assert _details_state(page, ".jp-NotebookPanel") == [False] * n  # re-executed by Run All: still closed
    # the sources are collapsed: JupyterLab shows a placeholder (the "..." bar) instead of each hidden input
    placeholders = page.locator(".jp-NotebookPanel .jp-InputPlaceholder").count()
    assert placeholders == _n_source_hidden() > n // 2
    assert SOLUTION_BODY not in page.locator(".jp-NotebookPanel").inner_text()
    lab.screenshot(page, "solutions-jupyterlab-closed", near=selector)
    _open_first_and_check(page, selector)
    assert _details_state(page, ".jp-NotebookPanel") == [True, True] + [False] * (n - 2)
    lab.screenshot(page, "solutions-jupyterlab-opened", near=selector)
    lab.assert_clean(page)


@pytest.mark.parametrize("served", [NotebookServer], indirect=True, ids=["notebook7"])
def test_notebook7_solutions_collapsed_and_open_on_click(served, browser):
    errors: list[str] = []
    page = _open_browser_page(browser, f"{served.url}/notebooks/{NOTEBOOK}?token={served.token}", errors)
    try:
        selector = f".jp-Notebook {DETAILS}"
        n = 2 * _n_solutions()
        # the committed outputs are shown as saved: every solution's closed <details>
        page.wait_for_function(f"n => document.querySelectorAll({json.dumps(selector)}).length === n", arg=n,
                               timeout=60_000)
        assert _details_state(page, ".jp-Notebook") == [False] * n
        placeholders = page.locator(".jp-Notebook .jp-InputPlaceholder").count()
        assert placeholders == _n_source_hidden() > n // 2
        assert SOLUTION_BODY not in page.locator(".jp-Notebook").inner_text()
        Lab.screenshot(None, page, "solutions-notebook7-closed", near=selector)
        _open_first_and_check(page, selector)
        assert _details_state(page, ".jp-Notebook") == [True, True] + [False] * (n - 2)
        Lab.screenshot(None, page, "solutions-notebook7-opened", near=selector)
        # Notebook 7.6.5's own start-up error (JupyterLab's shortcuts plugin reads `plugins[id].schema` of a plugin
        # Notebook 7 does not load; raised from notebook_core before any notebook is shown): not the kit's
        assert not [e for e in errors if not ("reading 'schema'" in e and "notebook_core" in e)], "\n".join(errors)
    finally:
        page.context.close()


def test_collapsed_solution_placeholder_gives_nothing_away(lab):
    """What a collapsed solution shows (JupyterLab's `.jp-InputPlaceholder`: its first line) must not start the
    explanation. Only opens the notebook (no Run All): the placeholders are there as soon as the cells are."""
    page = lab.browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    lab._pages.append(page)
    page.goto(f"{lab.server.url}/lab/tree/{NOTEBOOK}?token={lab.server.token}&reset")
    page.wait_for_function("n => document.querySelectorAll('.jp-NotebookPanel .jp-InputPlaceholder').length === n",
                           arg=_n_source_hidden(), timeout=60_000)
    shown = " ".join(page.locator(".jp-NotebookPanel .jp-InputPlaceholder").all_text_contents())
    spoilers = [e for e in _explanations() if e in shown]
    assert not spoilers, f"collapsed solutions show the start of their explanation: {spoilers}"


@pytest.mark.parametrize("served", [VoilaServer], indirect=True, ids=["voila"])
def test_voila_solutions_collapsed_and_open_on_click(served, browser):
    errors: list[str] = []
    # Voilà's page may ask for web fonts / MathJax from a CDN: on a closed network those loads fail, harmlessly
    page = _open_browser_page(browser, f"{served.url}/?token={served.token}", errors,
                              extra_benign=("Failed to load resource", "net::ERR_NAME_NOT_RESOLVED"))
    try:
        n = 2 * _n_solutions()
        # Voilà executes the notebook for this visit; the solutions come in as their cells run
        page.wait_for_function(f"n => document.querySelectorAll({json.dumps(DETAILS)}).length === n", arg=n,
                               timeout=90_000)
        assert _details_state(page) == [False] * n
        text = page.locator("body").inner_text()
        assert "ex.solution(" not in text and SOLUTION_BODY not in text  # no input is shown at all
        assert "(solution): correct" not in text  # the solutions' printed checks are inside the closed <details>
        Lab.screenshot(None, page, "solutions-voila-closed", near=DETAILS)
        _open_first_and_check(page, DETAILS)
        assert _details_state(page) == [True, True] + [False] * (n - 2)
        Lab.screenshot(None, page, "solutions-voila-opened", near=DETAILS)
        assert "ex.solution(" not in page.locator("body").inner_text()
        assert not errors, "\n".join(errors)
    finally:
        page.context.close()
