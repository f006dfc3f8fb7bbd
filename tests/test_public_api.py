"""The public API, the one place that checks the faces: derived by walking the package (no list to keep up to date).

A *face* is what a learner imports from: a package's ``__init__`` or a single module (its own face). Every public
module declares an ``__all__`` of names that exist, without repeats; every package face is written one way (a
docstring with its modules' table and a ``>>>`` example, explicit eager imports, an explicit ``__all__`` list: no
star import, no PEP 562 ``__getattr__``) and re-exports its own submodules' public names as the same objects (a
name from elsewhere only from another face). The one exception is the lazy top level (ampkit/__init__.py says why).
Which names the notebooks may import: tests/test_notebook_imports.py.
"""
import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import ampkit


def test_top_level_is_the_modules_only():
    """No notebook or the README calls a top-level function (each imports its module): the top level re-exports
    none, only the modules (loaded lazily, tests/test_lazy_import.py) and __version__."""
    names = [n for n in ampkit.__all__ if not isinstance(getattr(ampkit, n), type(ampkit))]
    assert names == [], names
    assert len(ampkit.__all__) == len(set(ampkit.__all__))


def _public_modules(ispkg: bool | None = None) -> list[str]:
    """Every public module of the kit's teaching API, found by walking the package: no part of its dotted name
    starts with ``_``; the room's tools (``ampkit.classroom``: commands, not an API) stand apart. ``ispkg``: only
    packages (True) or only plain modules (False)."""
    return sorted(m.name for m in pkgutil.walk_packages(ampkit.__path__, "ampkit.")
                  if not any(p.startswith("_") for p in m.name.split(".")[1:])
                  and not m.name.startswith("ampkit.classroom") and ispkg in (None, m.ispkg))


def _submodules(face: str) -> list[str]:
    """The public modules and subpackages directly inside package ``face``."""
    path = importlib.import_module(face).__path__
    return sorted(m.name for m in pkgutil.iter_modules(path, face + ".")
                  if not m.name.rsplit(".", 1)[1].startswith("_"))


PACKAGE_FACES = _public_modules(ispkg=True)
#: every face: the packages and the top-level single modules (each its own face)
FACES = set(PACKAGE_FACES) | {m for m in _public_modules(ispkg=False) if m.count(".") == 1}


def test_the_walk_finds_every_face():
    found = set(_public_modules())
    assert {"ampkit.scaling.presets", "ampkit.widgets.attention", "ampkit.lessons.transformers_in_16_bits.activations",
            "ampkit.lessons.transformers_compiled_and_sharded.compiled", "ampkit.fp8.tiles"} <= found
    assert not any(".classroom" in m or "._" in m for m in found) and len(found) > 80
    assert {"ampkit.widgets", "ampkit.lessons", "ampkit.lessons.transformers_in_16_bits", "ampkit.scaling",
            "ampkit.i18n"} <= set(PACKAGE_FACES)


@pytest.mark.parametrize("module", _public_modules())
def test_each_module_declares_all(module):
    """Every public module: a docstring, an ``__all__`` without repeats, each name there."""
    mod = importlib.import_module(module)
    assert mod.__doc__ and mod.__all__, module
    assert len(mod.__all__) == len(set(mod.__all__)), module
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def style_problems(face: str, source: str, submodules: list[str]) -> list[str]:
    """What keeps package ``face`` (its ``__init__`` source) from the one style."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    out = []
    if ">>>" not in doc:
        out.append(f"{face}: no >>> example in the docstring")
    missing = [m for m in submodules if f"``{m.rsplit('.', 1)[1]}``" not in doc]
    if missing or (submodules and "\n===" not in doc):
        out.append(f"{face}: the docstring's module table misses {missing or 'itself'}")
    alls = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            out.append(f"{face}: star import from {node.module} (name each import)")
        elif isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
            out.append(f"{face}: module-level {node.name} (a lazy face: import the names eagerly)")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                alls.append(node)
    if len(alls) != 1 or not isinstance(alls[0], ast.Assign) or not isinstance(alls[0].value, ast.List) or not all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in alls[0].value.elts):
        out.append(f"{face}: __all__ must be assigned once, as a list of strings")
    return out


@pytest.mark.parametrize("face", PACKAGE_FACES)
def test_each_package_face_is_written_one_way(face):
    source = inspect.getsource(importlib.import_module(face))
    assert style_problems(face, source, _submodules(face)) == []


def test_the_style_check_catches_a_planted_lazy_face():
    lazy = ('"""A face.\n\n>>> 1\n1\n"""\nfrom ampkit.x.a import *  # noqa\n__all__ = list(_HOME)\n'
            'def __getattr__(name):\n    pass\n')
    problems = style_problems("ampkit.x", lazy, ["ampkit.x.a"])
    assert len(problems) == 4, problems   # star import, __getattr__, __all__ not a list, no table naming ``a``
    good = ('"""A face.\n\n====  ====\n``a``  it\n====  ====\n\n>>> 1\n1\n"""\n'
            'from ampkit.x.a import f\n__all__ = ["f"]\n')
    assert style_problems("ampkit.x", good, ["ampkit.x.a"]) == []


def face_problems(face: str) -> list[str]:
    """Each name on package ``face``: where one of its own modules lists the name in ``__all__``, the same object as
    there (every such module: one home per name); otherwise defined in the face itself or imported from another face
    (a top-level module or a package) that lists it, as the same object."""
    mod = importlib.import_module(face)
    subs = {s: importlib.import_module(s) for s in _submodules(face)}
    imported = {a.asname or a.name: node.module for node in ast.parse(inspect.getsource(mod)).body
                if isinstance(node, ast.ImportFrom) and node.module for a in node.names}
    out = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        homes = [s for s, m in subs.items() if name in m.__all__]
        for s in homes:
            if getattr(subs[s], name) is not obj:
                out.append(f"{face}.{name} is not {s}.{name}")
        source = imported.get(name)
        if source is None:
            continue                                   # defined in the face itself (ampkit.i18n)
        if source.startswith(face + "."):
            if not homes:
                out.append(f"{face}.{name}: from {source}, which does not list it in __all__")
        elif source not in FACES or name not in importlib.import_module(source).__all__:
            out.append(f"{face}.{name}: from {source}, which is not a face listing it")
        elif getattr(importlib.import_module(source), name) is not obj:
            out.append(f"{face}.{name} is not {source}.{name}")
    return out


@pytest.mark.parametrize("face", PACKAGE_FACES)
def test_each_package_face_re_exports_its_modules_own_objects(face):
    assert face_problems(face) == []


def test_the_face_check_catches_planted_faults(tmp_path, monkeypatch):
    """A face that re-exports a helper its module does not list, a name two modules hold as different objects, and
    a name from outside the kit's faces: each is reported."""
    pkg = tmp_path / "plantedface"
    pkg.mkdir()
    (pkg / "a.py").write_text('"""a"""\n__all__ = ["f"]\n\ndef f(): pass\n\ndef g(): pass\n')
    (pkg / "b.py").write_text('"""b"""\n__all__ = ["f"]\n\ndef f(): pass\n')
    (pkg / "__init__.py").write_text('"""face"""\nfrom json import dumps\nfrom plantedface.a import f, g\n'
                                     '__all__ = ["f", "g", "dumps"]\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problems = face_problems("plantedface")
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "plantedface"]:
            del sys.modules[name]
    assert problems == ["plantedface.f is not plantedface.b.f",
                        "plantedface.g: from plantedface.a, which does not list it in __all__",
                        "plantedface.dumps: from json, which is not a face listing it"], problems


def test_import_ampkit_needs_no_widgets_or_plots():
    code = "import sys, ampkit; print(sorted(m for m in ('ipywidgets', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
