"""JupyterHub for a workshop room on one machine: `make hub` (hub/README.md says what it does and does not do).

Every setting comes from ampkit.classroom.hub (`configure`), read from AMPKIT_HUB_* environment variables that
`make hub` sets from its make variables (HUB_IP, HUB_PORT, HUB_IDLE_TIMEOUT...). Importing it costs the hub process
no torch: `import ampkit` is lazy and the room's tools import neither torch nor widgets; the learners' kernels do.
Add your own settings below the `configure(...)` line (they override it), or in a file passed with a second `-f`.
"""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's kit, also when jupyterhub runs from a venv without it installed

from ampkit.classroom import hub  # noqa: E402

c = get_config()  # noqa: F821 — injected by traitlets when JupyterHub loads this file
hub.configure(c, hub.settings_from_env(os.environ, REPO))
