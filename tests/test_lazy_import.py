"""`import ampkit` is lazy (PEP 562, ampkit/__init__.py): the room's tools (`ampkit.classroom`, which serves every
notebook of a workshop) import neither torch nor widgets nor matplotlib, and the modules load on first use."""
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ampkit
import ampkit.classroom

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ipywidgets", "matplotlib")
CLASSROOM = ["ampkit.classroom"] + sorted(m.name for m in pkgutil.iter_modules(ampkit.classroom.__path__,
                                                                                 "ampkit.classroom."))

PROBE = r"""
import json, sys, time
start = time.perf_counter()
import importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({"seconds": time.perf_counter() - start, "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def _probe(*modules: str) -> dict:
    """Import `modules` in a fresh Python from the checkout: how long it took and which heavy modules came in."""
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_classroom_module_is_found():
    assert {"ampkit.classroom.hub", "ampkit.classroom.offline", "ampkit.classroom.lock"} <= set(CLASSROOM)


@pytest.mark.parametrize("module", CLASSROOM)
def test_the_rooms_tools_import_neither_torch_nor_widgets(module):
    assert _probe(module)["loaded"] == []


def test_import_ampkit_alone_loads_no_torch_and_reports_the_classroom_import_time():
    assert _probe("ampkit")["loaded"] == []
    every = _probe(*CLASSROOM)
    assert every["loaded"] == []
    # measured, never asserted (speed is not a test): shown with -s or in the report of a failing run
    print(f"\nimport of all {len(CLASSROOM)} ampkit.classroom modules: {every['seconds'] * 1000:.0f} ms, no torch")


def test_a_planted_heavy_import_is_caught():
    """The probe sees torch when a module does load it (here the engine's formats)."""
    assert "torch" in _probe("ampkit.formats")["loaded"]


def test_modules_are_lazy_attributes_and_the_version_stays():
    from ampkit import _version

    assert ampkit.__version__ == _version.__version__
    assert {"formats", "scaling", "precision", "sinking", "widgets", "classroom", "doctor"} <= set(ampkit.__all__)
    assert ampkit.formats.info("fp16").max == 65504.0
    assert ampkit.formats is sys.modules["ampkit.formats"]
    assert set(ampkit.__all__) <= set(dir(ampkit)) and "__version__" in dir(ampkit)
    with pytest.raises(AttributeError, match="has no attribute 'info'; its modules: .*formats"):
        ampkit.info  # noqa: B018 - the old re-exported callables are gone: ampkit.formats.info


def test_python_m_ampkit_still_runs_its_commands():
    out = subprocess.run([sys.executable, "-m", "ampkit"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "doctor" in out.stderr and "warmup" in out.stderr
