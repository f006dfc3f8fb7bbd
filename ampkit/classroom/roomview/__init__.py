"""The room view: the instructor's live page of the room (a JupyterHub service, admins only), fed by the
learners' kernels (``ampkit/classroom/report.py``). No notebook of its own: it watches every notebook's cells and
exercise checks. The operator's notes are ``hub/README.md`` ("The room view") and ``docs/instructor-guide.md``.

- ``room``: the state and the show of hands (pure);
- ``auth``: who may see the page and who may report (pure rules over the hub's user model);
- ``hubconfig``: the JupyterHub settings that register the service and let learners' kernels report;
- ``service`` (``python -m ampkit.classroom.roomview``): the web service; ``page``: its HTML.

Standard library only at import time: tornado and JupyterHub are imported when the service starts.
"""
from __future__ import annotations

#: The service's name: its page is ``/services/room-view/`` on the hub.
SERVICE = "room-view"
#: The custom scope every learner's server token gets, so that their kernel may report.
REPORT_SCOPE = "custom:ampkit-room-view:report"
#: The scope that opens the page: JupyterHub's access to this one service, which only the admin role holds.
VIEW_SCOPE = f"access:services!service={SERVICE}"

__all__ = ["REPORT_SCOPE", "SERVICE", "VIEW_SCOPE"]
