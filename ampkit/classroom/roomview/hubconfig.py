"""The JupyterHub settings of the room view: the service (its own process, URL and OAuth client), the scope that
lets learners' kernels report, and the kernelspec that loads the reporter into every learner's kernel.

Why a kernelspec: a kernelspec is Jupyter's own record of how a kernel starts. The hub puts
``hub/room-view`` first on the learners' ``JUPYTER_PATH`` (Jupyter's documented search path for data files),
where ``kernels/python3/kernel.json`` starts the usual ``ipykernel_launcher`` with ``--ext=ampkit.classroom.report``
(IPython's ``InteractiveShellApp.extra_extensions``); the extension registers an IPython ``post_run_cell`` event.
Nothing is written into a learner's folder, every kernel of the room gets it, and outside the hub (``make lab``,
the tests) ``JUPYTER_PATH`` is not set and nothing changes.

>>> from ampkit.classroom.hub.settings import settings_from_env
>>> kernel_report_url(settings_from_env({"AMPKIT_HUB_IP": "0.0.0.0"}, "/kit"))
'http://127.0.0.1:8000/services/room-view/api/report'
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING

from ampkit._net import free_port
from ampkit.classroom.report import CA_VAR, URL_VAR
from ampkit.classroom.roomview import REPORT_SCOPE, SERVICE
from ampkit.classroom.roomview.page import LANG_VAR

if TYPE_CHECKING:
    from ampkit.classroom.hub.settings import HubSettings

#: JupyterHub's default scopes of a learner server's token (its ``server`` role), to which the report scope is added.
SERVER_TOKEN_SCOPES = ("users:activity!user", "access:servers!server")


def kernel_report_url(s: HubSettings) -> str:
    """Where a learner's kernel posts its reports: the hub's own address (through its proxy), as seen from this
    machine: an 'every interface' address becomes the loopback one."""
    ip = ipaddress.ip_address(s.ip)
    host = ("::1" if ip.version == 6 else "127.0.0.1") if ip.is_unspecified else s.ip
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if s.ssl_cert else 'http'}://{host}:{s.port}/services/{SERVICE}/api/report"


def kernel_path(s: HubSettings) -> str:
    """The folder put first on the learners' ``JUPYTER_PATH``: its ``kernels/python3`` loads the reporter."""
    return str(Path(s.repo) / "hub" / "room-view")


def add_room_view(c, s: HubSettings) -> int:
    """Register the room view in the hub config ``c``; returns the service's port (on 127.0.0.1)."""
    port = s.room_view_port or free_port()
    python = str(Path(s.venv) / "bin" / "python")
    c.JupyterHub.services = list(c.JupyterHub.services) + [{
        "name": SERVICE, "url": f"http://127.0.0.1:{port}", "cwd": s.repo, "oauth_no_confirm": True,
        "display": True, "environment": {LANG_VAR: s.lang},   # the page in the room's language (make hub LANG=)
        "command": [python, "-m", "ampkit.classroom.roomview", f"--port={port}"]}]
    # every learner (JupyterHub's `user` role) may report, and their server's token carries that scope;
    # the page needs access:services!service=room-view, which only the `admin` role holds
    c.JupyterHub.custom_scopes = {REPORT_SCOPE: {
        "description": "Report your notebook's name, cell errors and exercise answers to the room view."}}
    c.JupyterHub.extra_user_scopes = {REPORT_SCOPE}
    c.Spawner.server_token_scopes = [*SERVER_TOKEN_SCOPES, REPORT_SCOPE]
    env = {URL_VAR: kernel_report_url(s), "JUPYTER_PATH": kernel_path(s)}
    if s.ssl_cert:   # the certificate's text, not its path: an isolated learner cannot read the hub's folder
        env[CA_VAR] = Path(s.ssl_cert).read_text()
    c.Spawner.environment = {**c.Spawner.environment, **env}
    return port
