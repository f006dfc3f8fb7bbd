"""The room view's web service (ampkit/classroom/roomview/service.py): its routes with JupyterHub's own HubOAuth,
against a stand-in for the hub's API (needs the hub extra; tests/hub/test_roomview_hub.py runs them on a real hub)."""
from __future__ import annotations

import json
import threading

import pytest

from ampkit.classroom.roomview import REPORT_SCOPE, SERVICE
from ampkit.classroom.roomview.room import Room

ADMIN = {"name": "instructor", "kind": "user", "admin": True, "scopes": ["access:services", "admin-ui"]}
ANA = {"name": "ana", "kind": "user", "scopes": ["read:users!user=ana", REPORT_SCOPE]}


def cell(notebook="03.ipynb", error=None):
    return {"v": 1, "user": "x", "kind": "cell", "notebook": notebook, "error": error, "at": None}


def test_service_routes_with_jupyterhubs_own_auth_against_a_stand_in_hub():
    pytest.importorskip("jupyterhub")   # the hub extra (make hub-install); tests/hub runs the same on a real hub
    import asyncio
    import concurrent.futures

    from jupyterhub.services.auth import HubOAuth
    from tornado import web
    from tornado.httpclient import AsyncHTTPClient

    from ampkit.classroom.roomview.service import make_app

    models = {"admin-tok": ADMIN, "ana-tok": ANA, "svc-tok": {"name": "culler", "kind": "service",
                                                              "scopes": [REPORT_SCOPE]}}

    class WhoAmI(web.RequestHandler):   # GET /hub/api/user, as JupyterHub answers it for a token
        def get(self):
            model = models.get(self.request.headers.get("Authorization", "").partition(" ")[2])
            if model is None:
                raise web.HTTPError(403)
            self.write({"kind": "user", **model})

    from ampkit._net import free_port

    hub_port, port = free_port(), free_port()
    hub_loop, hub_up = asyncio.new_event_loop(), threading.Event()

    def stand_in_hub():   # its own thread and loop, as the hub is its own process (HubOAuth's page check blocks)
        asyncio.set_event_loop(hub_loop)
        web.Application([("/hub/api/user", WhoAmI)]).listen(hub_port, "127.0.0.1")
        hub_loop.call_soon(hub_up.set)
        hub_loop.run_forever()

    threading.Thread(target=stand_in_hub, daemon=True).start()
    assert hub_up.wait(10)

    async def run():
        auth = HubOAuth(api_url=f"http://127.0.0.1:{hub_port}/hub/api", api_token="service-token",
                        oauth_client_id="service-room-view", base_url=f"/services/{SERVICE}/",
                        oauth_redirect_uri=f"http://127.0.0.1:{port}/services/{SERVICE}/oauth_callback",
                        login_url=f"http://127.0.0.1:{hub_port}/hub/api/oauth2/authorize", cache_max_age=0)
        room = Room()
        server = make_app(room, hub_auth=auth, clock=lambda: 100.0).listen(port, "127.0.0.1")
        client = AsyncHTTPClient()
        base = f"http://127.0.0.1:{port}/services/{SERVICE}/"

        async def call(path, token=None, body=None):
            headers = {"Authorization": f"token {token}"} if token else {}
            r = await client.fetch(base + path, method="POST" if body is not None else "GET", headers=headers,
                                   body=None if body is None else json.dumps(body), raise_error=False,
                                   follow_redirects=False)
            return r.code, r.body.decode()

        try:
            results = {
                "report": await call("api/report", "ana-tok", cell(error="KeyError") | {"user": "ana"}),
                "as_other": await call("api/report", "ana-tok", cell() | {"user": "ben"}),
                "service": await call("api/report", "svc-tok", cell()),
                "no_token": await call("api/report", None, cell()),
                "bad_token": await call("api/report", "nope", cell()),
                "bad_report": await call("api/report", "ana-tok", {"kind": "chat"}),
                "page_admin": await call("", "admin-tok"),
                "room_admin": await call("api/room", "admin-tok"),
                "page_learner": await call("", "ana-tok"),
                "room_learner": await call("api/room", "ana-tok"),
                "page_anonymous": await call("", None),
            }
        finally:
            server.stop()
        return results, room

    try:
        # a fresh thread: an earlier test in the same session may have left this thread's event loop running
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            r, room = pool.submit(asyncio.run, asyncio.wait_for(run(), 120)).result()
    finally:
        hub_loop.call_soon_threadsafe(hub_loop.stop)
    assert r["report"][0] == 204 and room.learners["ana"].last_error == "KeyError"
    assert r["as_other"][0] == 403 and "reports only as themselves" in r["as_other"][1]
    assert r["service"][0] == 403 and "only a learner's own kernel" in r["service"][1]
    assert r["no_token"][0] == 401 and r["bad_token"][0] == 401
    assert r["bad_report"][0] == 400 and "'kind': expected one of cell, check" in r["bad_report"][1]
    assert r["page_admin"][0] == 200 and "Room view" in r["page_admin"][1]
    assert r["room_admin"][0] == 200 and json.loads(r["room_admin"][1])["learners"][0]["error"] == "KeyError"
    assert r["page_learner"][0] == 403 and r["room_learner"][0] == 403
    assert r["page_anonymous"][0] == 302          # to the hub's login (OAuth)
    assert list(room.learners) == ["ana"]         # nothing refused reached the room
