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


def _missing_needs(path: Path, _seen: dict = {}) -> list[str]:  # noqa: B006 (a cache per path, on purpose)
    """The modules a notebook's ``metadata.ampkit.needs`` names (a Chinese notebook: its English source's, found through
    ``metadata.ampkit.source``) that this Python cannot import (notebook 09 needs mindspore and paddle: ``make
    frameworks`` installs them in ``.venv-frameworks``)."""
    if path not in _seen:
        import importlib.util
        import json

        try:
            meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("ampkit", {})
            needs = meta.get("needs")
            if needs is None and meta.get("source"):    # a generated edition: its English source says what it needs
                source = json.loads((path.parent / meta["source"]).read_text(encoding="utf-8"))
                needs = source.get("metadata", {}).get("ampkit", {}).get("needs")
        except (OSError, ValueError):
            needs = None
        needs = needs or []
        _seen[path] = [name for name in needs if importlib.util.find_spec(name) is None]
    return _seen[path]


def slowest_first(items: list, order_file: Path = ROOT / "tests" / "slowest_first.txt") -> list:
    """``items`` with whole files moved into the order ``tests/slowest_first.txt`` lists (the slowest file of a
    measured `make test` first: benchmarks/bench_make_test.py --order writes it); files it does not list keep their
    collection order after those, and a file's own tests keep theirs. `make test` runs two pytest-xdist workers with
    ``--dist loadfile --no-loadscope-reorder``: each worker takes the next whole file from this order when it is
    free, so the long files start first and the two workers finish close together instead of one running the
    longest notebook alone at the end."""
    try:
        listed = [ln.strip() for ln in order_file.read_text(encoding="utf-8").splitlines()
                  if ln.strip() and not ln.startswith("#")]
    except OSError:
        return items
    rank = {name: i for i, name in enumerate(listed)}
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::")[0], len(first_seen))

    def key(item) -> tuple[int, int]:
        name = item.nodeid.split("::")[0]
        return (rank.get(name, len(rank)), first_seen[name])

    return sorted(items, key=key)   # stable: a file's tests stay in their order


def pytest_collection_modifyitems(config, items):
    """Files are ordered slowest first (:func:`slowest_first`). A notebook that needs what this environment lacks is
    skipped, cell by cell, with the reason (its kernel is never started): the main `make test` skips notebook 09 in
    both editions; `make test-frameworks` runs it."""
    import pytest

    items[:] = slowest_first(items)

    for item in items:
        path = Path(str(getattr(item, "path", "")))
        if path.suffix == ".ipynb":
            missing = _missing_needs(path)
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"{path.name} needs {', '.join(missing)}: run it with "
                                                        "`make test-frameworks`"))
