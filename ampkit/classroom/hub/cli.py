"""``python -m ampkit.classroom.hub check|settings|node``: what ``make hub``, ``make hub-check`` and
``make hub-install`` run before JupyterHub starts (the package: :mod:`ampkit.classroom.hub`). Standard library only."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

from ampkit._kit import ROOT
from ampkit.classroom import isolation
from ampkit.classroom.hub.extras import (
    language_pack_problem,
    missing_extras,
    missing_message,
    node_problem,
    node_version,
)
from ampkit.classroom.hub.settings import exposure_problem, settings_from_env


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.hub check [--venv .venv] [--node-prefix DIR]``: exit 2 with what to install
    when the hub's extras are missing, or what is wrong with the ``AMPKIT_HUB_*`` settings. ``... settings``: the
    resolved settings as JSON. ``... node``: exit 2 with one line when Node.js is missing or older than 20."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.hub", description=main.__doc__)
    p.add_argument("command", choices=("check", "settings", "node"))
    p.add_argument("--venv", default=".venv")
    p.add_argument("--node-prefix", default=None)
    a = p.parse_args(argv)
    if a.command == "node":
        problem = node_problem(node_version())
        if problem:
            print(f"make hub-install: {problem}", file=sys.stderr)
        return 2 if problem else 0
    try:
        s = settings_from_env(dict(os.environ), ROOT)
        problem = exposure_problem(s) or isolation.start_problem(s)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        print(f"make hub: {problem}", file=sys.stderr)
        return 2
    if a.command == "settings":
        print(json.dumps({**asdict(s), "bind_url": s.bind_url, "notebook_source": str(s.notebook_source),
                          "learner_notebooks": s.learner_notebooks}, indent=1))
        return 0
    missing = missing_extras(a.venv, a.node_prefix)
    if missing:
        print(missing_message(missing, a.venv, a.node_prefix), file=sys.stderr)
        return 2
    problem = node_problem(node_version()) or language_pack_problem(a.venv, s.lang)  # the proxy runs on node
    if problem:
        print(f"make hub: {problem}", file=sys.stderr)
        return 2
    return 0
