"""JupyterHub for a workshop room on one machine: `make hub` (hub/README.md says what it does and does not do).

Every setting comes from ampkit/classroom/hub.py (`configure`), read from AMPKIT_HUB_* environment variables that
`make hub` sets from its make variables (HUB_IP, HUB_PORT, HUB_IDLE_TIMEOUT...). That file is loaded by its path,
not as `import ampkit...`: the hub process then never imports the kit (and torch); the learners' kernels do.
Add your own settings below the `configure(...)` line (they override it), or in a file passed with a second `-f`.
"""
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("ampkit_classroom_hub", REPO / "ampkit" / "classroom" / "hub.py")
hub = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hub          # dataclasses look their module up by name
_spec.loader.exec_module(hub)

c = get_config()  # noqa: F821 — injected by traitlets when JupyterHub loads this file
hub.configure(c, hub.settings_from_env(os.environ, REPO))
