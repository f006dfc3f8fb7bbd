"""The login storm, its pure part and its browser-less learner: K learners log in through the hub's real login form
within one minute. Here: reading JupyterHub's login form (``parse_login_form``, ``login_error``) and its answers
(``retry_after`` for a 429, ``progress_events`` for the spawn-pending page's event stream), the storm's arrival
schedule (``schedule``), the core count a room needs (``recommended_cores``), and ``HttpLearner``: one learner's
cookies and requests, as a browser sends them (urllib, a cookie jar, redirects followed). The driver is
``benchmarks/bench_storm.py``; it serves the room (``hub/README.md``) and no notebook of its own.

Standard library only, like the rest of ``tests/roomtools/`` (test and benchmark code, not shipped to learners).

>>> schedule(3, window_s=60, seed=1) == schedule(3, window_s=60, seed=1)
True
"""
from __future__ import annotations

import http.cookiejar
import json
import math
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser


class StormError(RuntimeError):
    """A learner's login, spawn or kernel failed the way a browser would have seen it (the message says where)."""


# ---- the login form and the hub's answers -------------------------------------------------------------------------

@dataclass(frozen=True)
class LoginForm:
    action: str                 # where the form posts (JupyterHub: /hub/login?next=...)
    xsrf: str                   # the hidden _xsrf field
    fields: tuple[str, ...]     # the names of its inputs (username, password, _xsrf, ...)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self.errors: list[str] = []
        self._in_error = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action") or "", "method": (a.get("method") or "get").lower(),
                               "inputs": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["inputs"][a["name"]] = a.get("value") or ""
        elif tag == "p" and "login_error" in (a.get("class") or "").split():
            self._in_error = True
            self.errors.append("")

    def handle_endtag(self, tag):
        if tag == "p":
            self._in_error = False

    def handle_data(self, data):
        if self._in_error:
            self.errors[-1] += data


def parse_login_form(html: str) -> LoginForm:
    """JupyterHub's login page (``templates/login.html``): the POST form with ``username``, ``password`` and the
    hidden ``_xsrf``. A page without it raises StormError naming what was found instead."""
    p = _FormParser()
    p.feed(html)
    for form in p.forms:
        if form["method"] == "post" and {"username", "password"} <= set(form["inputs"]):
            if not form["inputs"].get("_xsrf"):
                raise StormError("the login form has no _xsrf value: the hub would refuse the POST (403)")
            return LoginForm(form["action"], form["inputs"]["_xsrf"], tuple(form["inputs"]))
    found = ", ".join(f"{f['method'].upper()} {f['action'] or '(no action)'}" for f in p.forms) or "no form"
    raise StormError(f"not JupyterHub's login page: expected a POST form with username and password; found {found}")


def login_error(html: str) -> str | None:
    """The message a refused login shows (``<p class="login_error">``, e.g. 'Invalid username or password'), or
    None when the page shows none."""
    p = _FormParser()
    p.feed(html)
    return " ".join(e.strip() for e in p.errors).strip() or None if p.errors else None


def retry_after(headers, default: float = 30.0) -> float:
    """Seconds a 429 asks to wait (its ``Retry-After`` header: JupyterHub's ``concurrent_spawn_limit`` sets one,
    ``active_server_limit`` does not), else ``default``."""
    raw = (headers.get("Retry-After") if headers is not None else None) or ""
    try:
        return max(0.0, float(raw))
    except ValueError:
        return default


def progress_url(html: str) -> str | None:
    """The event stream the spawn-pending page listens to (``new EventSource("...")``, with its ``_xsrf``)."""
    m = re.search(r'new EventSource\("([^"]+)"\)', html)
    return m.group(1).replace("&amp;", "&") if m else None


def progress_events(lines) -> list[dict]:
    """The JSON events of a server-sent event stream (``data: {...}`` lines)."""
    return [json.loads(ln[5:].strip()) for ln in lines if ln.startswith("data:") and ln[5:].strip()]


# ---- the schedule and the sizing ----------------------------------------------------------------------------------

def schedule(k: int, window_s: float = 60.0, seed: int = 0) -> list[float]:
    """K arrival times (seconds from the storm's start), sorted, all inside ``[0, window_s)``: one per equal slot
    of the window, at a seeded random point in it (a room arriving over a minute, not in one burst)."""
    if k < 1:
        raise ValueError(f"k={k}: expected at least one learner")
    if window_s <= 0:
        raise ValueError(f"window_s={window_s}: expected a positive number of seconds")
    rng = random.Random(seed)
    slot = window_s / k
    return [round(i * slot + rng.uniform(0, slot * 0.999), 3) for i in range(k)]


@dataclass(frozen=True)
class Cores:
    """The cores a room needs, and why: the largest of three needs (each rounded up to a whole core)."""

    learners: int
    by_run_all: int       # everyone's Run All inside the budget: learners x CPU-s per Run All / budget
    by_slider: int        # the CPU share per learner at which the slider met its target (measured curve)
    by_login: int         # everyone's server started inside the budget: learners x CPU-s per spawn / budget
    cores: int

    @property
    def limiting(self) -> str:
        """The need (or needs, when they tie) that sets the core count."""
        needs = (("Run All", self.by_run_all), ("slider", self.by_slider), ("login", self.by_login))
        return " and ".join(name for name, n in needs if n == self.cores)


def recommended_cores(learners: int, run_all_cpu_s: float, spawn_cpu_s: float, slider_share: float | None,
                      run_all_budget_s: float = 120.0, login_budget_s: float = 60.0) -> Cores:
    """Cores for ``learners`` at once: ceil(learners x ``run_all_cpu_s`` / ``run_all_budget_s``) (every Run All of
    the room done inside the budget), ceil(learners x ``slider_share``) (``slider_share`` = measured cores / the
    largest K whose median slider update met the target; None when no K met it: then every learner a core), and
    ceil(learners x ``spawn_cpu_s`` / ``login_budget_s``); the largest of the three.

    >>> recommended_cores(30, run_all_cpu_s=12.0, spawn_cpu_s=2.0, slider_share=0.1).cores
    3
    """
    if learners < 1:
        raise ValueError(f"learners={learners}: expected at least one")
    for name, v in (("run_all_cpu_s", run_all_cpu_s), ("spawn_cpu_s", spawn_cpu_s),
                    ("run_all_budget_s", run_all_budget_s), ("login_budget_s", login_budget_s)):
        if not v > 0:
            raise ValueError(f"{name}={v}: expected a positive number of seconds")
    share = 1.0 if slider_share is None else slider_share
    if not share > 0:
        raise ValueError(f"slider_share={slider_share}: expected a positive share of a core, or None")

    def up(x):
        return max(1, math.ceil(x - 1e-9))

    run_all = up(learners * run_all_cpu_s / run_all_budget_s)
    slider = up(learners * share)
    login = up(learners * spawn_cpu_s / login_budget_s)
    return Cores(learners, run_all, slider, login, max(run_all, slider, login))


# ---- one learner's HTTP traffic -----------------------------------------------------------------------------------

class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects followed like a browser; their URLs kept (the last one says where the learner landed)."""

    def __init__(self, seen: list):
        self.seen = seen

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.seen.append(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class HttpLearner:
    """One learner's browser without the page: a cookie jar, redirects followed, the XSRF cookie sent back as the
    ``X-XSRFToken`` header on the single-user server's API (what JupyterLab does)."""

    def __init__(self, base: str, name: str, timeout: float = 60.0):
        self.base, self.name, self.timeout = base.rstrip("/"), name, timeout
        self.jar = http.cookiejar.CookieJar()
        self.redirects: list[str] = []
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                  _Redirects(self.redirects))
        self.retries = 0            # 429s answered by waiting and trying again

    def request(self, method: str, path: str, data: bytes | None = None, headers: dict | None = None,
                timeout: float | None = None) -> tuple[int, str, str, object]:
        """(status, final URL, body text, headers); an HTTP error status is returned, not raised."""
        url = path if path.startswith("http") else self.base + path
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with self.opener.open(req, timeout=timeout or self.timeout) as r:
                return r.status, r.geturl(), r.read().decode(errors="replace"), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.geturl() or url, e.read().decode(errors="replace"), e.headers

    def cookie(self, name: str, path_prefix: str = "") -> str | None:
        for c in self.jar:
            if c.name == name and c.path.startswith(path_prefix):
                return c.value
        for c in self.jar:
            if c.name == name:
                return c.value
        return None

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    def login(self, password: str, deadline: float, max_retries: int = 10) -> str:
        """GET /hub/login, POST the form; wait out 429s (Retry-After) as a learner told to retry would, reloading
        the page. Returns the URL landed on (the server, or the spawn-pending page)."""
        status, _, html, _ = self.request("GET", "/hub/login")
        if status != 200:
            raise StormError(f"GET /hub/login answered {status}")
        form = parse_login_form(html)
        body = urllib.parse.urlencode({"username": self.name, "password": password, "_xsrf": form.xsrf}).encode()
        action = form.action if form.action.startswith(("/", "http")) else "/hub/login"
        status, url, html, headers = self.request("POST", action, body,
                                                  {"Content-Type": "application/x-www-form-urlencoded"})
        while status == 429:
            if self.retries >= max_retries:
                raise StormError(f"still 429 after {self.retries} retries: {_h1(html)}")
            wait = retry_after(headers)
            if time.monotonic() + wait > deadline:
                raise StormError(f"429 ({_h1(html)}) and no time left to retry")
            self.retries += 1
            time.sleep(wait)
            status, url, html, headers = self.request("GET", url)
        err = login_error(html) if "/hub/login" in url else None
        if err or status >= 400:
            raise StormError(f"login refused ({status}): {err or _h1(html)}")
        self._last_html = html
        return url

    def wait_ready(self, url: str, deadline: float) -> str:
        """From the spawn-pending page: read its event stream (what the page's EventSource reads) until the server
        is ready, then open the server as the page does. Returns the URL landed on (/user/NAME/lab...)."""
        if "/spawn-pending/" in url:
            stream = progress_url(getattr(self, "_last_html", ""))
            if stream is None:
                raise StormError("the spawn-pending page has no progress event stream")
            req = urllib.request.Request(self.base + stream if stream.startswith("/") else stream,
                                         headers={"Accept": "text/event-stream"})
            ready, last = None, {}
            try:
                with self.opener.open(req, timeout=max(1.0, deadline - time.monotonic())) as r:
                    for raw in r:
                        if time.monotonic() > deadline:
                            raise StormError("the server was not ready in time (progress stream still open)")
                        ev = progress_events([raw.decode(errors="replace").strip()])
                        if ev:
                            last = ev[-1]
                            if last.get("ready") or last.get("failed"):
                                ready = last
                                break
            except (OSError, TimeoutError) as exc:
                raise StormError(f"the spawn's progress stream broke: {exc}") from None
            if not ready or ready.get("failed"):
                raise StormError(f"the server did not start: {(ready or last).get('message', 'no event')}")
            url = ready.get("url") or f"/user/{self.name}/"
        status, url, html, _ = self.request("GET", url)
        if status != 200 or f"/user/{self.name}/" not in url:
            raise StormError(f"opening the learner's server gave {status} at {url}")
        return url

    def api(self, method: str, path: str, body=None, timeout: float | None = None):
        """The single-user server's REST API with the learner's cookies (and the XSRF header JupyterLab sends)."""
        xsrf = self.cookie("_xsrf", f"/user/{self.name}")
        headers = {"Content-Type": "application/json", **({"X-XSRFToken": xsrf} if xsrf else {})}
        data = None if body is None else json.dumps(body).encode()
        status, _, text, _ = self.request(method, f"/user/{self.name}/api{path}", data, headers, timeout)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text[:300]


def _h1(html: str) -> str:
    """The error page's message (``<p>`` after JupyterHub's ``<h1>status : reason</h1>``), short."""
    m = re.search(r"<h1>(.*?)</h1>\s*(?:<p>(.*?)</p>)?", html, re.S)
    return " ".join(x.strip() for x in m.groups() if x) if m else html.strip()[:120]
