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


@pytest.mark.parametrize("module", ["formats", "models", "data", "precision", "train", "scaling", "sinking",
                                    "timeline", "device", "hardware", "dtypes", "doctor", "exercises", "diagnose",
                                    "lessons.amp_in_practice", "diagnose.distributed", "diagnose.replay", "fp8",
                                    "fp8.tiles", "lessons", "lessons.autocast_and_levels", "lessons.loss_scaling",
                                    "lessons.fp8_scaling",
                                    "widgets", "widgets.start", "widgets.snapshot",
                                    "widgets.formats", "widgets.range_map", "widgets.precision", "widgets.scaling",
                                    "widgets.sinking", "widgets.train", "widgets.style", "widgets.amp_doctor",
                                    "widgets.fp8", "widgets.fp8_blocks"])
def test_each_module_declares_all(module):
    mod = importlib.import_module(f"ampkit.{module}")
    assert mod.__doc__ and mod.__all__
    for name in mod.__all__:
        assert hasattr(mod, name), f"ampkit.{module}.{name}"


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
