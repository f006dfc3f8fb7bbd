"""The book's site in a browser that may reach nothing else (tests/browser/test_book_browser.py): a loopback HTTP
server over the built site and one Chromium context whose every request to another host is refused and counted,
with every console or page error collected."""
from __future__ import annotations

import functools
import sys
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):   # no line per request on stderr
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A browser that moved on before a file was sent (a click on the language switch) closes its connection:
        nothing to report. Anything else is printed, as the server does."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class Site:
    """The built site behind a loopback server, and one Chromium context that may reach nothing else."""

    def __init__(self, root: Path, browser):
        self.root = root
        self.server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.outside: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.new_page()

    def _route(self, route):
        url = route.request.url
        if url.startswith((self.base + "/", "data:", "blob:")):
            return route.continue_()
        self.outside.append(url)
        return route.abort()

    def new_page(self):
        page = self.context.new_page()
        page.set_default_timeout(30_000)
        page.on("console", lambda m: self.errors.append(f"{page.url}: console {m.text}") if m.type == "error"
                else None)
        page.on("pageerror", lambda exc: self.errors.append(f"{page.url}: page error: {exc}"))
        return page

    def url(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def open(self, rel: str, page=None):
        """Go to ``rel`` (a path in the site); wait until page.js has drawn the views, where the page has some."""
        page = page or self.page
        response = page.goto(self.url(rel), wait_until="load")
        assert response is not None and response.status == 200, (rel, response and response.status)
        if page.locator(".ampkit-static-view").count():
            page.wait_for_function("() => !!document.body.dataset.ampkitViews", timeout=30_000)
        # furo scrolls smoothly: Playwright would wait out each glide before it acts (~1.5 s a control)
        page.add_style_tag(content="html { scroll-behavior: auto !important; }")
        return page

    def file_of(self, url: str) -> Path | None:
        """The file of the site a same-host URL names (query and fragment aside), or None for another host."""
        parts = urllib.parse.urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != self.base:
            return None
        path = urllib.parse.unquote(parts.path).lstrip("/")
        target = self.root / path
        return target / "index.html" if (not path or path.endswith("/")) else target

    def assert_clean(self) -> None:
        assert not self.outside, f"{len(self.outside)} request(s) to another host: {self.outside[:5]}"
        assert not self.errors, "\n".join(self.errors[:10])

    def close(self) -> None:
        self.context.close()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
