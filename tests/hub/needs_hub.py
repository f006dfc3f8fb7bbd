"""`make test-hub`'s first step: exit 0 when tests/hub can run here, else print one line saying why not and exit 2.

tests/hub starts real JupyterHubs on 127.0.0.1: it needs the hub extra (``make hub-install``) and, for the isolated
mode's system users, root. Run as ``python tests/hub/needs_hub.py [--venv .venv] [--node-prefix DIR]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ampkit.classroom import hub  # noqa: E402

NOT_READY = 2


def problem(venv: str, node_prefix: str | None, euid: int, have_useradd: bool, have_openssl: bool) -> str | None:
    """The one line `make test-hub` prints when it cannot run, or None."""
    missing = hub.missing_extras(venv, node_prefix)
    if missing:
        return f"make test-hub needs the hub extra; missing: {', '.join(missing)}. Install it with: make hub-install"
    if euid != 0 or not have_useradd:
        return ("make test-hub needs root and useradd (it creates and removes the system users ampkit-hubtest-*): "
                "run it as root, e.g. sudo make test-hub, on a Linux machine")
    if not have_openssl:
        return "make test-hub needs the openssl program (make hub-cert makes the certificate with it)"
    return None


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--venv", default=".venv")
    p.add_argument("--node-prefix", default=None)
    a = p.parse_args()
    why = problem(a.venv, a.node_prefix, os.geteuid(), bool(shutil.which("useradd")), bool(shutil.which("openssl")))
    if why:
        print(why)
        return NOT_READY
    return 0


if __name__ == "__main__":
    sys.exit(main())
