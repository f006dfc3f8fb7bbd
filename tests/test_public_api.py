"""The public API: every name in __all__ exists, `import ampkit` needs no frontend, widgets import lazily."""
import importlib
import subprocess
import sys

import pytest

import ampkit


def test_top_level_is_the_modules_only():
    """No notebook or the README calls a top-level function (each imports its module): the top level re-exports
    none, only the modules (loaded lazily, tests/test_lazy_import.py) and __version__."""
    names = [n for n in ampkit.__all__ if not isinstance(getattr(ampkit, n), type(ampkit))]
    assert names == [], names


def test_all_names_exist_once():
    assert len(ampkit.__all__) == len(set(ampkit.__all__))
    for name in ampkit.__all__:
        assert getattr(ampkit, name) is not None, name


def _public_modules() -> list[str]:
    """Every public module of the kit's teaching API, found by walking the package (no list to keep up to date):
    no part of its dotted name starts with ``_``; the room's tools (``ampkit.classroom``: commands, not an API)
    stand apart."""
    import pkgutil

    return sorted(m.name for m in pkgutil.walk_packages(ampkit.__path__, "ampkit.")
                  if not any(p.startswith("_") for p in m.name.split(".")[1:])
                  and not m.name.startswith("ampkit.classroom"))


def test_the_walk_finds_every_face():
    found = set(_public_modules())
    assert {"ampkit.scaling.presets", "ampkit.widgets.attention", "ampkit.lessons.transformers_in_16_bits.activations",
            "ampkit.lessons.transformers_compiled_and_sharded.compiled", "ampkit.fp8.tiles"} <= found
    assert not any(".classroom" in m or "._" in m for m in found) and len(found) > 80


@pytest.mark.parametrize("module", _public_modules())
def test_each_module_declares_all(module):
    """The one check of every face: a docstring, an ``__all__`` without repeats, each name there."""
    mod = importlib.import_module(module)
    assert mod.__doc__ and mod.__all__, module
    assert len(mod.__all__) == len(set(mod.__all__)), module
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_import_ampkit_needs_no_widgets_or_plots():
    code = "import sys, ampkit; print(sorted(m for m in ('ipywidgets', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_widgets_import_lazily():
    code = ("import sys; from ampkit.widgets import RoundingSlider; a = 'matplotlib' in sys.modules; "
            "from ampkit.widgets import VisualLossScaler; print(a, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr
    import ampkit.widgets as w

    assert set(w.__all__) <= set(dir(w))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        w.Nope  # noqa: B018
