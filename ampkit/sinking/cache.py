"""The kit's ``torch.compile`` cache, used only around the kit's own compiles (notebook ``04_data_sinking``).

Inductor (``torch.compile``'s default backend) keeps the kernels it builds in the folder named by the environment
variable ``TORCHINDUCTOR_CACHE_DIR``, and reads that variable every time it compiles
(``torch._inductor.runtime.cache_dir_utils.cache_dir``). ampkit never sets it when imported: :func:`kit_compile_cache`
sets it only while one of the kit's graph-sink steps compiles and restores it afterwards, so the learner's own
``torch.compile`` calls keep whatever cache they chose. ``python -m ampkit warmup`` compiles notebook 04's step
through the same context, so the notebook finds its kernels there already.

Which folder: ``$TORCHINDUCTOR_CACHE_DIR`` when the user set it, else :func:`kit_cache_dir`. (Inductor writes its
own default, ``<tmp>/torchinductor_<user>``, into the variable the first time it compiles anything; that value
counts as "not set".)

>>> import os
>>> before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
>>> with kit_compile_cache() as folder:
...     os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)
True
>>> os.environ.get("TORCHINDUCTOR_CACHE_DIR") == before
True
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ampkit._kit import ROOT

__all__ = ["ENV_VAR", "kit_cache_dir", "compile_cache_dir", "kit_compile_cache"]

#: The environment variable inductor reads for its cache folder.
ENV_VAR = "TORCHINDUCTOR_CACHE_DIR"

#: The checkout this file lives in (``<root>/ampkit/sinking/cache.py``), when it is one.


def kit_cache_dir() -> Path:
    """The kit's own cache folder: ``<repo>/.cache/torchinductor`` in a checkout, else
    ``~/.cache/ampkit/torchinductor``.

    >>> kit_cache_dir().name
    'torchinductor'
    """
    if (ROOT / "pyproject.toml").exists():
        return ROOT / ".cache" / "torchinductor"
    return Path.home() / ".cache" / "ampkit" / "torchinductor"


def _inductor_default() -> str | None:
    """The folder inductor falls back to (and writes into the variable) when nobody chose one."""
    try:   # deferred: torch._inductor is heavy and only needed once a compile is near
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        return os.path.abspath(default_cache_dir())
    except Exception:  # pragma: no cover - older or newer torch without this helper
        return None


def compile_cache_dir() -> Path:
    """The folder the kit's compiles use: ``$TORCHINDUCTOR_CACHE_DIR`` if the user set it, else
    :func:`kit_cache_dir`. Reads the environment, never changes it.

    >>> compile_cache_dir().is_absolute()
    True
    """
    chosen = os.environ.get(ENV_VAR, "").strip()
    if chosen and os.path.abspath(chosen) != _inductor_default():
        return Path(chosen).resolve()
    return kit_cache_dir()


def _clear_inductor_path_caches() -> None:
    """Forget the cache paths inductor memoised (what ``torch._inductor``'s own ``temporary_cache_dir`` does)."""
    try:   # deferred: torch._inductor is heavy (see _inductor_default)
        from torch._inductor.utils import clear_caches
    except Exception:  # pragma: no cover - inductor unavailable: nothing memoised
        return
    clear_caches()


@contextlib.contextmanager
def kit_compile_cache() -> Iterator[Path]:
    """Point inductor at :func:`compile_cache_dir` for the duration of the block, then restore the variable exactly
    (removed again if it was unset). Compiles started inside the block read and write that folder.

    Nested use is free: an inner block finds the variable already set and changes nothing.

    >>> with kit_compile_cache() as outer, kit_compile_cache() as inner:     # nested: the inner block changes nothing
    ...     inner == outer == compile_cache_dir()
    True
    """
    folder = compile_cache_dir()
    before = os.environ.get(ENV_VAR)
    changed = before != str(folder)
    if changed:
        os.environ[ENV_VAR] = str(folder)
        _clear_inductor_path_caches()
    try:
        yield folder
    finally:
        if changed:
            if before is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = before
            _clear_inductor_path_caches()
