"""Who may see the room view and who may report to it: rules over the user model that JupyterHub returns for a
token (``GET /hub/api/user``: ``name``, ``kind``, ``scopes``). Pure; the service applies them.

>>> view_problem({"name": "instructor", "kind": "user", "scopes": ["access:services", "admin-ui"]}) is None
True
>>> report_problem({"name": "ana", "kind": "user", "scopes": [REPORT_SCOPE]}, {"user": "ben"})
"a report for 'ben' sent with ana's token: a learner reports only as themselves"
"""
from __future__ import annotations

from ampkit.classroom.roomview import REPORT_SCOPE, VIEW_SCOPE


def has_scope(scopes, required: str) -> bool:
    """JupyterHub's rule for one filtered scope: ``access:services!service=x`` is held through
    ``access:services!service=x`` itself or the unfiltered ``access:services``."""
    base = required.partition("!")[0]
    return required in scopes or base in scopes


def view_problem(model: dict | None) -> str | None:
    """Why this user may not see the room view (``None``: they may): only holders of :data:`VIEW_SCOPE`, which
    JupyterHub's admin role has (``access:services``) and learners do not."""
    if not model:
        return "not logged in to the hub"
    if model.get("kind", "user") != "user" or not has_scope(model.get("scopes", ()), VIEW_SCOPE):
        return f"{model.get('name', '?')} may not see the room view: it is for the hub's admins (the instructor)"
    return None


def report_problem(model: dict | None, body: dict) -> str | None:
    """Why this report is refused (``None``: accepted): the token must be a user's with :data:`REPORT_SCOPE`
    (every learner's server token has it; a service's token does not), and a ``user`` in the body, when present,
    must be the token's owner."""
    if not model:
        return "no valid hub token: send the learner's JUPYTERHUB_API_TOKEN"
    name = model.get("name", "?")
    if model.get("kind", "user") != "user":
        return f"{model.get('kind')} {name} may not report: only a learner's own kernel reports"
    if not has_scope(model.get("scopes", ()), REPORT_SCOPE):
        return f"the token of {name} lacks the scope {REPORT_SCOPE} (a learner's server token has it)"
    claimed = body.get("user") if isinstance(body, dict) else None
    if claimed is not None and claimed != name:
        return f"a report for {claimed!r} sent with {name}'s token: a learner reports only as themselves"
    return None
