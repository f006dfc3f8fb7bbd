"""The room view on a real hub (``make test-hub``): two learners in headless Chromium log in through the hub's form,
open notebook 03, answer an exercise's check with different predictions and run a cell that raises; the
instructor's page (a third browser, admin login) updates by itself to show both, with the show of hands; a learner
gets 403 on the room view; and the report API refuses a learner reporting as another, a service, and no token.

Self-contained: its own hub from hub/jupyterhub_config.py on 127.0.0.1 (free ports, a temporary folder, a service
token to make learners' tokens), stopped with everything it started at the end, also on a failure. The learners
are processes of this user (the default spawner), named ``rvtest-*``; no system user is made.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from roomtools.hub_client import free_port, loopback_env, service_config, stop_hub_process

from ampkit.classroom import report as reporting
from ampkit.classroom.report import SENT_FILE
from ampkit.classroom.roomview import REPORT_SCOPE, SERVICE

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
ARTIFACTS = Path(os.environ.get("AMPKIT_ARTIFACTS", ROOT / "artifacts" / "browser"))
ANA, BEN = "rvtest-ana", "rvtest-ben"
#: as tests/browser/conftest.py: Debian's chromium, headless, nothing fetched from outside
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    for candidate in (os.environ.get("AMPKIT_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


pytestmark = pytest.mark.skipif(not (VENV / "bin" / "jupyterhub").exists(),
                                reason="needs the hub extra: make hub-install (make test-hub installs it)")


class Hub:
    """One hub on 127.0.0.1 from the room's config, with a test service token that may make learners' tokens."""

    def __init__(self, cafile: str = "", **more_env):
        self.tmp = Path(tempfile.mkdtemp(prefix="ampkit-rvtest-"))
        self.tmp.chmod(0o711)                     # isolated learners' homes are below it: they must enter it
        self.port, self.token = free_port(), secrets.token_hex(32)
        self.url = f"{'https' if cafile else 'http'}://127.0.0.1:{self.port}"
        self.ctx = ssl.create_default_context(cafile=cafile) if cafile else None
        self.password, self.admin_password = secrets.token_hex(8), secrets.token_hex(20)
        (self.tmp / "config.py").write_text(service_config(
            "rvtest", self.token, ["admin:users", "admin:servers", "tokens"],
            "c.Spawner.start_timeout = c.Spawner.http_timeout = 300   # a busy 2-core machine\n",
            config=ROOT / "hub" / "jupyterhub_config.py"))
        env = loopback_env(self.port, self.tmp / "state", VENV, self.password,
                           AMPKIT_HUB_ADMIN_PASSWORD=self.admin_password, AMPKIT_HUB_KERNEL_THREADS="1", **more_env)
        self.log_path = self.tmp / "hub.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(self.tmp / "config.py")],
                                     cwd=self.tmp, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]

    def request(self, method: str, path: str, body=None, token: str | None = "") -> tuple[int, str]:
        """(status, body) of one request; ``token`` None sends none, "" sends the test service's."""
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"token {token or self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def wait_up(self, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.proc.poll() is None, f"the hub exited:\n{self.log()}"
            try:
                # the room view's route is in the proxy once it answers (401 without a token: it is up)
                if self.request("GET", "/hub/api/")[0] == 200 and \
                        self.request("POST", f"/services/{SERVICE}/api/report", {}, token=None)[0] == 401:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"the hub or its room view did not answer within {timeout:.0f} s:\n{self.log()}")

    def stop(self) -> None:
        import psutil  # the hub extra

        try:   # every process under the hub, first: kernels run in sessions of their own
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        stop_hub_process(self.proc, wait=90)             # SIGTERM, then whatever is left of its process group
        for p in tree:                                   # and of its tree
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(10)
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def hub():
    h = Hub()
    try:
        h.wait_up()
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="module")
def browser():
    if not find_chromium():
        pytest.fail("no chromium: install Debian's chromium (tests/browser/conftest.py finds it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=find_chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def log_in(browser, hub: Hub, name: str, password: str, next_url: str = ""):
    """A new browser (its own cookies) that logs in through the hub's login form."""
    page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{hub.url}/hub/login" + (f"?next={next_url}" if next_url else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    return page


def wait_kernel_idle(page, timeout_ms: int = 300_000) -> None:
    """Until the notebook's kernel says Idle in the status bar (a cell run before that may be lost)."""
    page.wait_for_function("() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]"
                           ".some(e => /\\| Idle/.test(e.textContent))", timeout=timeout_ms)


def run_new_cell(page, code: str) -> None:
    """Insert a code cell at the top of the open notebook, type ``code`` and run it (Ctrl+Enter); again if JupyterLab
    did not start it (the first cell's prompt still empty)."""
    wait_kernel_idle(page)
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.keyboard.type(code)
    prompt = page.locator(".jp-NotebookPanel .jp-Cell").first.locator(".jp-InputPrompt")
    for _ in range(3):
        page.keyboard.press("Control+Enter")
        try:
            page.wait_for_function("(e) => /\\[(\\*|\\d+)\\]/.test(e.textContent)", arg=prompt.element_handle(),
                                   timeout=20_000)
            return
        except Exception:
            page.locator(".jp-NotebookPanel .jp-Cell").first.locator(".cm-content").click()
    raise AssertionError(f"JupyterLab did not run the cell {code!r}")


def output_with(page, text: str, timeout_ms: int = 180_000):
    try:
        return page.wait_for_selector(f".jp-OutputArea-output:has-text({json.dumps(text, ensure_ascii=False)})",
                                      timeout=timeout_ms)
    except Exception:
        shot(page, "FAILED-roomview-output")
        raise


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_two_learners_and_the_instructors_page_updating(hub, browser):
    learners = {ANA: log_in(browser, hub, ANA, hub.password), BEN: log_in(browser, hub, BEN, hub.password)}
    for name, page in learners.items():
        page.wait_for_url(f"**/user/{name}/lab**", timeout=300_000)
    # the instructor's page, open before anything is reported: it must update by itself
    room = log_in(browser, hub, "instructor", hub.admin_password, f"/services/{SERVICE}/")
    room.wait_for_url(f"**/services/{SERVICE}/", timeout=120_000)
    room.wait_for_selector("#status:has-text('updated')")
    assert room.locator("#learners tbody tr").count() == 0

    for name, page in learners.items():
        page.goto(f"{hub.url}/user/{name}/lab/tree/notebooks/03_loss_scaling.ipynb")
        try:
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached")
        except Exception:
            shot(page, f"FAILED-roomview-open-{name}")
            print(hub.log())
            raise
    predictions = {ANA: 35, BEN: 16}
    for name, page in learners.items():           # the prediction: expected_1 of notebook 03 is 35
        run_new_cell(page, f'from ampkit.exercises import check; check("exercise 1", {predictions[name]}, 35)')
    output_with(learners[ANA], "exercise 1: correct.")
    output_with(learners[BEN], "your answer was 16.")
    assert "room-view-sent.jsonl" in learners[ANA].inner_text(".jp-NotebookPanel")   # the learner is told, once
    run_new_cell(learners[BEN], 'check("exercise 1 (solution)", 35, 35)')            # ben then runs the solution
    output_with(learners[BEN], "exercise 1 (solution): correct.")
    for page in learners.values():
        run_new_cell(page, "1/0")
    for page in learners.values():
        output_with(page, "ZeroDivisionError")

    # the page updates by itself (no reload): both learners, their error, the show of hands
    for name in learners:
        try:
            room.wait_for_selector(f"#learners tr[data-name='{name}'] td.error:has-text('ZeroDivisionError')",
                                   timeout=60_000)
        except Exception:
            shot(room, "FAILED-roomview-instructor")
            print("\n".join(line for line in hub.log().splitlines() if "room-view" in line))
            raise
        assert room.inner_text(f"#learners tr[data-name='{name}'] td.notebook") == "03_loss_scaling.ipynb"
    room.wait_for_selector("#hands tr[data-label='16']")
    for v in ("16", "35"):                                         # one hand each
        assert room.inner_text(f"#hands tr[data-label='{v}'] td.count") == "1"
    summary = room.inner_text("#hands-summary")
    assert "03_loss_scaling.ipynb · exercise 1: 2 prediction(s) before the solution" in summary
    assert "1 ran the solution" in summary
    assert room.inner_text(f"#learners tr[data-name='{ANA}'] td.checks") == "✓"
    assert room.inner_text(f"#learners tr[data-name='{BEN}'] td.checks") == "sol"
    shot(room, "roomview-instructor")
    shot(learners[BEN], "roomview-learner")

    # a learner may not see the room view: 403, through the browser's own login
    response = learners[ANA].goto(f"{hub.url}/services/{SERVICE}/")
    assert response.status == 403, (response.status, learners[ANA].url)

    # what ana's kernel sent is in her own folder, line for line what the service got
    sent = (hub.tmp / "state" / "users" / ANA / SENT_FILE).read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in sent]
    assert "check" in kinds and kinds[-1] == "cell" and json.loads(sent[-1])["error"] == "ZeroDivisionError"
    assert all(json.loads(line)["user"] == ANA for line in sent)


def test_the_report_api_takes_only_a_learners_own_token_for_themselves(hub):
    for name in (ANA, BEN):      # accounts exist after the browser test; made here when run alone
        hub.request("POST", f"/hub/api/users/{name}")
    status, body = hub.request("POST", f"/hub/api/users/{ANA}/tokens", {"scopes": [REPORT_SCOPE], "expires_in": 600})
    assert status == 201, body
    ana_token = json.loads(body)["token"]
    report = {"v": 1, "kind": "cell", "notebook": "03_loss_scaling.ipynb", "error": None, "at": None}
    path = f"/services/{SERVICE}/api/report"
    assert hub.request("POST", path, {**report, "user": ANA}, token=ana_token)[0] == 204
    status, body = hub.request("POST", path, {**report, "user": BEN}, token=ana_token)
    assert status == 403 and "reports only as themselves" in body
    status, body = hub.request("POST", path, report, token="")          # a service's token, not a learner's
    assert status == 403 and "only a learner's own kernel" in body
    assert hub.request("POST", path, report, token=None)[0] == 401
    assert hub.request("POST", path, {**report, "kind": "chat"}, token=ana_token)[0] == 400
    # a learner's token does not open the instructor's data
    assert hub.request("GET", f"/services/{SERVICE}/api/room", token=ana_token)[0] == 403


def test_over_https_a_kernels_reporter_trusts_the_hubs_own_certificate(tmp_path):
    """HUB_HTTPS=1 (make hub-cert's certificate): the reporter reaches the room view at https://127.0.0.1 with the
    certificate's text from its environment (an isolated learner cannot read the hub's folder)."""
    state = tmp_path / "state"
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.tls", "cert", "--state", str(state)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    from ampkit.classroom import tls

    cert = tls.cert_files(state)[0]
    h = Hub(cafile=str(cert), AMPKIT_HUB_HTTPS="1", AMPKIT_HUB_STATE=str(state))
    try:
        h.wait_up()
        h.request("POST", f"/hub/api/users/{ANA}")
        status, body = h.request("POST", f"/hub/api/users/{ANA}/tokens", {"scopes": [REPORT_SCOPE],
                                                                          "expires_in": 600})
        assert status == 201, body
        url = f"{h.url}/services/{SERVICE}/api/report"
        config = reporting.Config(url=url, token=json.loads(body)["token"], user=ANA,
                                  sent_file=tmp_path / SENT_FILE, ca=cert.read_text())
        r = reporting.Reporter(config)
        assert r.post(reporting.encode(reporting.cell_report("03.ipynb", None, user=ANA))) == 204
        untrusting = reporting.Reporter(reporting.Config(url=url, token=config.token, user=ANA,
                                                         sent_file=tmp_path / SENT_FILE))
        assert untrusting.post(b"{}") == 0          # without the certificate: refused by TLS, nothing sent
    finally:
        h.stop()
