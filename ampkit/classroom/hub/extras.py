"""What ``make hub`` needs besides the kit: JupyterHub and its culler in the venv, configurable-http-proxy (an npm
package) and a Node.js that can run it. Each missing piece is named with the line that installs it. Used by
``ampkit.classroom.hub`` (``make hub``, ``make hub-check``, ``make hub-install``; see ``hub/README.md``).

Standard library only.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["CHP_PACKAGE", "NODE_MIN", "language_pack_problem", "missing_extras", "missing_message", "node_problem",
           "node_version"]

CHP_PACKAGE = "configurable-http-proxy@5"
#: configurable-http-proxy 5 declares Node.js >= 20 (its package.json "engines"); older Node is refused up front.
NODE_MIN = 20


def missing_extras(venv: str | os.PathLike, node_prefix: str | os.PathLike | None = None) -> list[str]:
    """What ``make hub`` lacks in ``venv``: the names of the missing pieces (empty when all are there)."""
    venv = Path(venv)
    node_prefix = Path(node_prefix) if node_prefix else venv / "hub-node"
    missing = [name for name in ("jupyterhub", "jupyterhub-singleuser") if not (venv / "bin" / name).exists()]
    if not list(venv.glob("lib/python3*/site-packages/jupyterhub_idle_culler/__init__.py")):
        missing.append("jupyterhub-idle-culler")
    if not (node_prefix / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        missing.append("configurable-http-proxy")
    return missing


def missing_message(missing: list[str], venv: str = ".venv", node_prefix: str | None = None) -> str:
    """The one message ``make hub`` prints when its extras are missing: what is missing and how to install it."""
    node_prefix = node_prefix or f"{venv}/hub-node"
    lines = [f"make hub needs JupyterHub's extras; missing: {', '.join(missing)}.",
             "Install them with:  make hub-install", "or by hand:"]
    if set(missing) - {"configurable-http-proxy"}:
        lines.append(f'  {venv}/bin/python -m pip install -e ".[hub]"')
    if "configurable-http-proxy" in missing:
        npm = "npm" if shutil.which("npm") else f"npm (install Node.js >= {NODE_MIN} first: https://nodejs.org)"
        lines.append(f"  {npm} install --prefix {node_prefix} {CHP_PACKAGE}")
    return "\n".join(lines)


def language_pack_problem(venv: str | os.PathLike, lang: str) -> str | None:
    """Why the Chinese room's JupyterLab would show English menus (its language pack, the ``zh`` extra, is not in
    ``venv``), or None. ``make hub LANG=zh_CN`` installs it first (``make lab-language``)."""
    if lang == "en" or list(Path(venv).glob(f"lib/python3*/site-packages/jupyterlab_language_pack_{lang}/")):
        return None
    return (f"JupyterLab's {lang} language pack is not installed in {venv}: learners would see English menus. "
            f"Install it with:  make lab-language LANG={lang}  (or {venv}/bin/python -m pip install -e \".[zh]\")")


def node_problem(version: str | None) -> str | None:
    """Why this machine's Node.js cannot run the hub's proxy (``version``: what ``node --version`` printed, None when
    there is no node), or None.

    >>> node_problem("v20.20.2") is None, node_problem("v18.19.0")[:50]
    (True, 'configurable-http-proxy 5 needs Node.js >= 20; thi')
    """
    major = None
    if version:
        found = version.strip().lstrip("v").split(".")[0]
        major = int(found) if found.isdigit() else None
    if major is not None and major >= NODE_MIN:
        return None
    has = f"this machine has {version.strip()}" if version else "node was not found"
    return (f"configurable-http-proxy 5 needs Node.js >= {NODE_MIN}; {has} (node --version). Install Node.js "
            f"{NODE_MIN} or newer (https://nodejs.org), then run make hub-install again.")


def node_version() -> str | None:
    """``node --version`` of this machine (``"v20.20.2"``), or None without node."""
    import subprocess

    node = shutil.which("node")
    if not node:
        return None
    try:
        return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
