"""Test-session set-up shared by unit tests, notebook tests (nbval) and browser tests.

Keeps Jupyter's, IPython's and matplotlib's files out of $HOME (the kernels nbval starts inherit this
environment). torch.compile's cache is not set here: the kit points it at its own folder only around its own
compile calls (ampkit.sinking.cache), and the tests exercise that path.
"""
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
_state = Path(tempfile.mkdtemp(prefix="ampkit-test-"))
for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter-config"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                 ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl")):
    os.environ.setdefault(var, str(_state / sub))
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")


def pytest_configure(config):
    """nbval starts one kernel a notebook with jupyter_client's TCP transport, whose five ports are picked free and
    then bound by the kernel a moment later: with two pytest-xdist workers starting kernels and servers at once,
    another process may take a port in between, and the kernel dies before its first reply ("Kernel died before
    replying to kernel_info", seen once in a fresh clone's make test). jupyter_client's start_new_kernel shuts the
    dead kernel down before it raises; a new start picks new ports, so a start that failed that way is tried
    again, twice at most (a kernel that dies every time still fails the notebook)."""
    try:
        from nbval import kernel as nbval_kernel
    except ImportError:
        return
    start = nbval_kernel.RunningKernel.__init__
    if getattr(start, "_ampkit_retries", False):
        return

    def start_with_retries(self, *args, **kwargs):
        for attempt in range(3):
            try:
                return start(self, *args, **kwargs)
            except RuntimeError as err:
                if "Kernel died before replying" not in str(err) or attempt == 2:
                    raise
                print(f"\nnbval: the kernel died at its start ({err}); starting it again", flush=True)

    start_with_retries._ampkit_retries = True
    nbval_kernel.RunningKernel.__init__ = start_with_retries
