"""A kernel driven as the browser drives it: over jupyter_server's kernel websocket (its default protocol: JSON
text frames, binary frames for messages with buffers), run cells, follow the widget models the kernel opens and
move a widget by a comm_msg "update". Used by the room's load test (``benchmarks/bench_hub.py``, through a
JupyterHub's proxy); it serves no notebook of its own. ``websocket-client`` (a jupyter_server dependency) is
imported when a socket opens, not at import time.

>>> import json
>>> decode_frame(json.dumps({"msg_type": "status"}))["msg_type"]
'status'
"""
from __future__ import annotations

import datetime
import json
import time
import uuid


class KernelError(RuntimeError):
    """The kernel failed, timed out or did not send what a browser would have received."""


def decode_frame(raw: str | bytes) -> dict:
    """One websocket frame as a message dict: a text frame is JSON; a binary one is jupyter_server's
    ``serialize_binary_message``: a 4-byte count n, n 4-byte offsets, the JSON message, then its buffers."""
    if isinstance(raw, str):
        return json.loads(raw)
    n = int.from_bytes(raw[:4], "big")
    if n < 1 or len(raw) < 4 * (n + 1):
        raise KernelError(f"not a kernel message: a binary frame of {len(raw)} bytes announcing {n} parts")
    offsets = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(n)] + [len(raw)]
    msg = json.loads(raw[offsets[0]: offsets[1]])
    msg["buffers"] = [raw[a:b] for a, b in zip(offsets[1:-1], offsets[2:])]
    return msg


class KernelSocket:
    """One kernel's websocket (``ws://.../api/kernels/ID/channels``), authorised by an API ``token`` or, as a
    browser does, by the learner's ``cookie`` header (with the page's ``origin``)."""

    def __init__(self, url: str, token: str | None, timeout: float, cookie: str | None = None,
                 origin: str | None = None):
        import websocket

        self._timeout_error = websocket.WebSocketTimeoutException
        self.session = uuid.uuid4().hex
        header = [f"Authorization: token {token}"] if token else []
        self.ws = websocket.create_connection(url + f"?session_id={self.session}", timeout=timeout, header=header,
                                              cookie=cookie, origin=origin)
        self.comms: dict[str, dict] = {}

    def send(self, msg_type: str, content: dict, channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "channel": channel, "header": {
                "msg_id": msg_id, "msg_type": msg_type, "username": "bench", "session": self.session,
                "version": "5.3", "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
            "parent_header": {}, "metadata": {}, "content": content, "buffers": []}))
        return msg_id

    def recv(self, deadline: float) -> dict:
        """The next message (any channel) before ``deadline`` (time.monotonic); widget states are tracked."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise KernelError("timed out waiting for the kernel")
        self.ws.settimeout(left)
        try:
            raw = self.ws.recv()
        except self._timeout_error:
            raise KernelError("timed out waiting for the kernel") from None
        msg = decode_frame(raw)
        if msg.get("msg_type") == "comm_open":
            c = msg["content"]
            self.comms[c["comm_id"]] = dict(c.get("data", {}).get("state", {}))
        elif msg.get("msg_type") == "comm_msg" and msg["content"].get("comm_id") in self.comms:
            data = msg["content"].get("data", {})   # later state (e.g. add_class sends _dom_classes as an update)
            if data.get("method") in ("update", "echo_update"):
                self.comms[msg["content"]["comm_id"]].update(data.get("state", {}))
        return msg

    def wait_ready(self, timeout: float) -> None:
        """Ask ``kernel_info_request`` until the kernel answers (a new kernel may drop the first ones)."""
        deadline = time.monotonic() + timeout
        while True:
            msg_id = self.send("kernel_info_request", {})
            try:
                while True:
                    m = self.recv(min(deadline, time.monotonic() + 2))
                    if m["msg_type"] == "kernel_info_reply" and m["parent_header"].get("msg_id") == msg_id:
                        return
            except KernelError:
                if time.monotonic() >= deadline:
                    raise KernelError("the kernel did not answer kernel_info_request") from None

    def execute(self, code: str, timeout: float) -> None:
        """Run one cell (an execute_request) and wait for its reply and idle; a cell's error raises KernelError."""
        msg_id = self.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        deadline, reply, idle = time.monotonic() + timeout, None, False
        while reply is None or not idle:
            m = self.recv(deadline)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "execute_reply":
                reply = m["content"]
            elif m["msg_type"] == "status" and m["content"].get("execution_state") == "idle":
                idle = True
        if reply.get("status") != "ok":
            raise KernelError(f"cell failed: {reply.get('ename')}: {reply.get('evalue')}\n    {code[:120]!r}")

    def find_widget(self, want: dict | None = None, dom_class: str | None = None) -> str:
        """The comm id of the first widget model whose state has every ``want`` item, or the CSS ``dom_class``."""
        for comm_id, state in self.comms.items():
            if want and all(state.get(k) == v for k, v in want.items()):
                return comm_id
            if dom_class and dom_class in state.get("_dom_classes", ()):
                return comm_id
        raise KernelError(f"no widget model {want or dom_class} among the {len(self.comms)} the kernel opened")

    def move(self, slider: str, image: str | None, value: int, timeout: float, trait: str = "value") -> float:
        """Set ``slider``'s ``trait`` as the browser does (comm_msg "update"); the seconds until the kernel has gone
        idle, having sent ``image``'s update first when ``image`` is given (a view whose picture the kernel draws;
        idle without it raises KernelError). A view drawn in the browser (``image=None``) has redrawn itself before
        the message left the page: this is the kernel's share of the move."""
        t0 = time.perf_counter()
        msg_id = self.send("comm_msg", {"comm_id": slider, "data": {"method": "update", "state": {trait: value},
                                                                   "buffer_paths": []}})
        deadline, drawn, idle = time.monotonic() + timeout, image is None, False
        while not (drawn and idle):
            m = self.recv(deadline)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            c = m["content"]
            if m["msg_type"] == "comm_msg" and c.get("comm_id") == image and c["data"].get("method") == "update":
                drawn = True
            elif m["msg_type"] == "status" and c.get("execution_state") == "idle":
                idle = True
                if not drawn:
                    raise KernelError(f"slider to {value}: the kernel went idle without a new image")
        return time.perf_counter() - t0

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:   # noqa: BLE001
            pass
