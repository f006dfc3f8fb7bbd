"""The room view's web service: a JupyterHub service (``hubconfig.py`` registers it; the hub starts it, routes
``/services/room-view/`` to it and gives it an OAuth client). Its routes, under that prefix:

- ``GET  /``                the instructor's page (``page.py``), polling ``api/room`` every 2 s;
- ``GET  api/room``         the room as JSON (``room.Room.snapshot``), ``?exercise=`` picks the show of hands;
- ``POST api/report``       one report from a learner's kernel, with that learner's own hub token;
- ``GET  oauth_callback``   JupyterHub's OAuth login.

The page and ``api/room`` use JupyterHub's own OAuth (``HubOAuthenticated``): a browser logs in through the hub,
and ``auth.view_problem`` lets in only holders of ``access:services!service=room-view`` (the admin role);
everyone else gets 403. ``api/report`` takes a token only (never a cookie, so no other page can post with an
instructor's browser), asks the hub whose it is (``HubAuth.user_for_token``) and applies ``auth.report_problem``.

tornado and JupyterHub are imported by :func:`make_app`, not at import time (the room's tools stay standard
library only). State is in memory: a restart of the service (or the hub) starts an empty room; learners' next
cells and checks fill it again.
"""
from __future__ import annotations

import json
import os
import sys
import time

from ampkit.classroom.roomview.auth import report_problem, view_problem
from ampkit.classroom.roomview.page import page_html, page_language
from ampkit.classroom.roomview.room import QUIET_AFTER, ReportError, Room

MAX_BODY = 4096


def make_app(room: Room, hub_auth=None, clock=time.monotonic, cookie_secret: bytes | None = None,
             lang: str | None = None):
    """The tornado application of the service (``hub_auth``: a ``HubOAuth``, default from the environment the
    hub gives a managed service; ``lang``: the page's language, default ``$AMPKIT_LANG``, which the hub sets)."""
    room_lang: str = page_language() if lang is None else lang
    from urllib.parse import urlparse

    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated, UserNotAllowed
    from tornado import web
    from tornado.log import app_log

    auth = hub_auth or HubOAuth(cache_max_age=60)
    prefix = auth.base_url if auth.base_url.endswith("/") else auth.base_url + "/"

    class Viewer(HubOAuthenticated, web.RequestHandler):
        hub_auth = auth

        def check_hub_user(self, model):
            problem = view_problem(model)
            if problem:
                app_log.warning("room view: %s", problem)
                raise UserNotAllowed(model)
            return model

        def set_default_headers(self):
            self.set_header("Cache-Control", "no-store")

    class PageHandler(Viewer):
        @web.authenticated
        def get(self):
            self.set_header("Content-Type", "text/html; charset=utf-8")
            xsrf = self.xsrf_token
            self.write(page_html(self.current_user["name"], xsrf.decode() if isinstance(xsrf, bytes) else xsrf,
                                 room_lang))

    class RoomHandler(Viewer):
        @web.authenticated
        def get(self):
            exercise = self.get_argument("exercise", "") or None
            try:
                snap = room.snapshot(clock(), exercise)
            except ReportError as e:
                raise web.HTTPError(400, str(e)) from None
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps(snap))

    class ReportHandler(web.RequestHandler):
        def check_xsrf_cookie(self):   # token-authenticated only: no cookie is ever read here
            return

        async def post(self):
            token = auth.get_token(self, in_cookie=False)
            model = await auth.user_for_token(token, sync=False) if token else None
            if len(self.request.body) > MAX_BODY:
                raise web.HTTPError(413, f"a report is at most {MAX_BODY} bytes")
            try:
                body = json.loads(self.request.body or b"null")
            except ValueError:
                raise web.HTTPError(400, "the body is not JSON") from None
            problem = report_problem(model, body)
            if problem or not model:   # report_problem refuses a missing model; the check also tells the type checker
                raise web.HTTPError(403 if model else 401, problem)
            try:
                room.add(model["name"], body, clock())
            except ReportError as e:
                raise web.HTTPError(400, str(e)) from None
            self.set_status(204)

        def write_error(self, status_code, **kwargs):
            exc = kwargs.get("exc_info", (None, None))[1]
            self.finish({"status": status_code, "message": getattr(exc, "log_message", None) or self._reason})

    class CallbackHandler(HubOAuthCallbackHandler):
        hub_auth = auth    # the same HubOAuth as the pages: it keeps the login's PKCE code verifier

    callback = urlparse(auth.oauth_redirect_uri).path if auth.oauth_redirect_uri else prefix + "oauth_callback"
    return web.Application([
        (prefix, PageHandler), (prefix + "api/room", RoomHandler), (prefix + "api/report", ReportHandler),
        (callback, CallbackHandler)],
        cookie_secret=cookie_secret or os.urandom(32), login_url=auth.login_url or None)


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.roomview --port N``: run the service on 127.0.0.1 (the hub starts it)."""
    import argparse
    import asyncio
    import logging
    import signal

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.roomview", description=main.__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--quiet-after", type=float, default=QUIET_AFTER,
                   help=f"seconds without a report before a learner shows as quiet (default {QUIET_AFTER:.0f})")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[%(levelname).1s %(asctime)s room-view] %(message)s")
    logging.getLogger("tornado.access").setLevel(logging.INFO)   # each request in the hub's log
    if not os.environ.get("JUPYTERHUB_API_TOKEN"):
        print("room view: JUPYTERHUB_API_TOKEN is not set: this service is started by the hub (make hub), "
              "not by hand", file=sys.stderr)
        return 2
    try:
        lang = page_language()
    except ValueError as e:
        print(f"room view: {e}", file=sys.stderr)
        return 2

    async def serve():
        app = make_app(Room(quiet_after=a.quiet_after), lang=lang)
        server = app.listen(a.port, address="127.0.0.1", xheaders=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"room view: serving on http://127.0.0.1:{a.port}", file=sys.stderr, flush=True)
        await stop.wait()
        server.stop()

    asyncio.run(serve())
    return 0
