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

The top level is lazy (PEP 562): ``import ampkit`` loads only ``ampkit._version``; a module named above loads on
first use, as an attribute (``ampkit.formats.ulp``) or an import (``from ampkit import formats``). No notebook
calls a top-level function (each imports its module), so the top level re-exports none: its names are the modules
and ``__version__``. The room's tools (``ampkit.classroom``) thus import neither torch nor widgets, and run from a
checkout before the kit is installed (``python -m ampkit.classroom.offline``). Widgets live in ``ampkit.widgets``,
the only part that imports ipywidgets; importing the kit changes no global state.

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
