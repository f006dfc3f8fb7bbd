"""ampkit: a Jupyter teaching kit that makes mixed-precision training visible.

The package serves the notebooks in ``notebooks/``; each module's docstring names the notebook that teaches it:

====================================  ================================================================================
notebook                              modules
====================================  ================================================================================
00_start_here                         ``device`` (cuda > mps > cpu; which 16-bit dtype is native), ``doctor``
01_fp16_range                         ``formats`` (range, precision, rounding, bands of every format)
02_autocast_and_levels                ``precision`` (O0–O3, dtype traces, the autocast probe), ``models``, ``data``,
                                      ``train`` (the one training loop)
03_loss_scaling                       ``scaling`` (No/Static/Dynamic scalers with torch.amp.GradScaler's calls)
04_data_sinking                       ``sinking`` (data, graph and loop sink), ``timeline`` (the step simulator)
05_amp_in_practice                    ``diagnose`` (non-finite hunter, overflow headroom, scaler health, AMP doctor)
06_fp8_scaling                        ``fp8`` (per-tensor, delayed and MX block scaling; a simulated fp8 linear layer)
07_transformers_in_16_bits            ``lessons.transformers_in_16_bits`` (a decoder in 16 bits: attention, norms, the
                                      loss, bf16 weights, a model stored in fp16)
08_transformers_compiled_and_sharded  ``lessons.transformers_compiled_and_sharded`` (compiled, checkpointed, sharded,
                                      hunted)
every notebook                        ``exercises`` (self-checks, hidden solutions), ``widgets`` (the views)
====================================  ================================================================================

Faces, one style: a package's face is its ``__init__`` (``ampkit.widgets``, ``ampkit.lessons``,
``ampkit.lessons.transformers_in_16_bits``, ...); a single module (``models``, ``train``, ``timeline``, ...) is its
own face. Every package face is written the same way: a docstring with the table of its modules and a ``>>>``
example, explicit eager imports ``from ampkit.pkg.module import (A, B, ...)`` and an explicit ``__all__``; each name
is its module's own object (tests/test_public_api.py derives the faces by walking the package and checks this). A
notebook imports only from faces: ``from ampkit.widgets import show``, never ``from ampkit.widgets.style import
show`` (tests/test_notebook_imports.py), so one import line tells a learner where to look.

The one exception is this top level, which is lazy (PEP 562) because its names are the modules themselves:
``import ampkit`` loads only ``ampkit._version``; a module named above loads on first use, as an attribute
(``ampkit.formats.ulp``) or an import (``from ampkit import formats``). Were it eager, ``import
ampkit.classroom`` would load torch and the widgets. No notebook calls a top-level function (each imports its
module), so the top level re-exports none: its names are the modules and ``__version__``. The room's tools
(``ampkit.classroom``) thus import neither torch nor widgets, and run from a checkout before the kit is installed
(``python -m ampkit.classroom.offline``). Widgets live in ``ampkit.widgets``, the only part that imports
ipywidgets; importing the kit changes no global state.

>>> import ampkit
>>> ampkit.formats.info("fp16").max
65504.0
"""
from __future__ import annotations

import importlib
import pkgutil

from ampkit._version import __version__ as __version__

#: every public module and subpackage (no leading underscore), found on disk so that a new one needs no edit here
__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str):
    """``ampkit.formats`` and the like: import the module on first use (then it is a plain attribute)."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; its modules: {', '.join(__all__)}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
