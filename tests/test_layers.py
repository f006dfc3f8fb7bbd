"""The layer rules of docs/architecture.md, checked on every module's source (``ast`` only: nothing is imported).

Each ``ampkit`` module belongs to one layer; a layer may import only the layers its row names. On top of the
layers: the engine's own seams (scalers know no loop and no sinking; levels know no scalers), ipywidgets only in
``widgets/``, and the room's tools (``classroom/``) import neither torch nor widgets nor the kit. And no module
reaches into another ampkit module's private names (``from x import _y``, ``obj._y`` where ``_y`` is defined
only in another module), except the few listed in :data:`PRIVATE_ALLOWED` with the reason. No two modules import
each other, directly or around a loop (:func:`cycle_problems`; imports inside functions and under ``TYPE_CHECKING``
count), and the room's tools import only the standard library and ``ampkit.classroom`` when they are imported
(:func:`classroom_problems`): JupyterHub, tornado, nbformat inside the functions that need them.

The checker is tested too: a synthetic module with a forbidden import (or a private reach, a cycle, a third-party
import at a room's tool's import time) must be reported.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ampkit"

GROUND = {"ampkit._util", "ampkit._version", "ampkit.formats", "ampkit.device", "ampkit.hardware", "ampkit.dtypes",
          "ampkit.models", "ampkit.data", "ampkit.protocols", "ampkit.i18n", "ampkit._ranks"}
ENGINE = {"ampkit.precision", "ampkit.scaling", "ampkit.sinking", "ampkit.fp8", "ampkit.diagnose", "ampkit.train",
          "ampkit.timeline"}
#: below every layer: modules that import only the standard library, so that the room's tools may share them
#: (``free_port``); :func:`test_the_shared_modules_import_only_the_standard_library` keeps them so.
SHARED = {"ampkit._net", "ampkit._kit"}
FRONT = {"ampkit", "ampkit.__main__", "ampkit.doctor", "ampkit.exercises", "ampkit._nbtools", "ampkit._nbstatic",
         "ampkit._nbexport", "ampkit._i18ntools", "ampkit._book"}

#: layer -> the layers its modules may import (besides their own package), and why (docs/architecture.md).
MAY_IMPORT: dict[str, set[str]] = {
    "shared": {"shared"},
    "ground": {"shared", "ground"},
    "engine": {"shared", "ground", "engine"},
    "lessons": {"shared", "ground", "engine", "lessons"},
    "widgets": {"shared", "ground", "engine", "lessons", "widgets"},
    "front": {"shared", "ground", "engine", "lessons", "widgets", "front", "classroom"},
    "classroom": {"shared", "classroom"},
}
#: engine seams: (importer package, imported package) pairs that the engine's own directions forbid.
ENGINE_SEAMS = {
    ("ampkit.scaling", "ampkit.train"): "scalers know no loop",
    ("ampkit.scaling", "ampkit.sinking"): "scalers know no sinking",
    ("ampkit.scaling", "ampkit.precision"): "scalers know no levels (they meet through ampkit.protocols)",
    ("ampkit.precision", "ampkit.scaling"): "levels know no scalers (they meet through ampkit.protocols)",
    ("ampkit.precision", "ampkit.train"): "levels know no loop",
}
#: third-party imports allowed only in some layers.
THIRD_PARTY = {"ipywidgets": {"widgets"}, "anywidget": {"widgets"}, "torch": set(MAY_IMPORT) - {"classroom", "shared"},
               "matplotlib": {"widgets", "front"}}

#: private names that one module may read from another, and why.
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("ampkit.protocols", "_found_inf_per_device"):
        "torch.amp.GradScaler forgets its inf check in update(); its private _found_inf_per_device is the only "
        "reader, used in this one place (GradScalerSkips) so that no caller needs it",
    ("ampkit.diagnose._snapshot", "_per_opt"):
        "the doctor's replay restores a scaler's per-optimizer stage exactly (torch's GradScaler has the same "
        "private _per_optimizer_states); a public state would be a new scaler API",
    ("ampkit.diagnose._snapshot", "_per_optimizer_states"):
        "as _per_opt above, for torch.amp.GradScaler (the replay works with torch's scaler too)",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> str | None:
    """The layer of an ampkit module name (``None`` for a name outside ampkit)."""
    if name != "ampkit" and not name.startswith("ampkit."):
        return None
    top = ".".join(name.split(".")[:2])
    if name in FRONT:
        return "front"
    if name in SHARED:
        return "shared"
    for layer, tops in (("ground", GROUND), ("engine", ENGINE), ("front", FRONT)):
        if top in tops:
            return layer
    second = name.split(".")[1] if "." in name else ""
    if second in ("lessons", "widgets", "classroom"):
        return second
    raise AssertionError(f"{name}: not in any layer; add it to a layer in tests/test_layers.py and the table in "
                         f"docs/architecture.md")


def imports(module: str, tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    """Every import in ``tree`` (also inside functions and ``if TYPE_CHECKING``): (line, module, names)."""
    out = []
    package = module if module == "ampkit" or (PKG / Path(*module.split(".")[1:]) / "__init__.py").exists() \
        else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [a.name for a in node.names]
            out.append((node.lineno, base, names))
            # `from ampkit.scaling import task` imports the module ampkit.scaling.task
            out += [(node.lineno, f"{base}.{n}", []) for n in names if (PKG.parent / base.replace(".", "/") / n
                                                                        ).with_suffix(".py").exists()]
    return out


def defined_private_names(tree: ast.AST) -> set[str]:
    """Private names a module defines: functions, classes, assignments and ``self._x = ...`` attributes."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {n for n in out if n.startswith("_") and not n.startswith("__")}


def layer_problems(module: str, source: str, private_elsewhere: dict[str, set[str]] | None = None) -> list[str]:
    """Every rule ``module`` (an ampkit module name) breaks in ``source``; ``private_elsewhere`` maps a private
    name to the other ampkit modules that define it (for the ``obj._y`` check)."""
    tree = ast.parse(source)
    me = layer_of(module)
    top = ".".join(module.split(".")[:2])
    problems = []
    for line, target, names in imports(module, tree):
        where = f"{module}:{line}"
        root = target.split(".")[0]
        if root in THIRD_PARTY and me not in THIRD_PARTY[root]:
            problems.append(f"{where}: imports {target} ({me} may not import {root})")
        theirs = layer_of(target)
        if theirs is None:
            continue
        if theirs not in MAY_IMPORT[me]:
            problems.append(f"{where}: imports {target} ({me} may import only {sorted(MAY_IMPORT[me])}, "
                            f"not {theirs})")
        their_top = ".".join(target.split(".")[:2])
        if (top, their_top) in ENGINE_SEAMS:
            problems.append(f"{where}: imports {target} ({ENGINE_SEAMS[top, their_top]})")
        for n in names:
            if n.startswith("_") and not n.startswith("__") and target != module \
                    and (module, n) not in PRIVATE_ALLOWED:
                problems.append(f"{where}: imports the private name {n} from {target}")
    mine = defined_private_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name)
                                                    and node.value.id in ("self", "cls")):
            n, shown = node.attr, ast.unparse(node)          # obj._y
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            n, shown = node.value, repr(node.value)          # getattr(obj, "_y")
        else:
            continue
        if not n.startswith("_") or n.startswith("__") or n == "_" or (module, n) in PRIVATE_ALLOWED:
            continue
        others = (private_elsewhere or {}).get(n, set()) - {module}
        if (n not in mine and others) or n in TORCH_PRIVATE:
            problems.append(f"{module}:{node.lineno}: reads the private {shown} "
                            f"(defined in {', '.join(sorted(others)) or 'torch'})")
    return problems


#: torch's privates that the kit must not read outside PRIVATE_ALLOWED (the ones it once read).
TORCH_PRIVATE = {"_found_inf_per_device", "_per_optimizer_states"}


def _sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted(PKG.rglob("*.py"))}


def _private_index(sources: dict[str, str]) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for name, src in sources.items():
        for n in defined_private_names(ast.parse(src)):
            index.setdefault(n, set()).add(name)
    return index


def test_every_module_keeps_the_layer_rules():
    sources = _sources()
    index = _private_index(sources)
    problems = [p for name, src in sources.items() for p in layer_problems(name, src, index)]
    assert not problems, "\n".join(problems)


def test_every_allowed_exception_is_still_needed():
    sources = _sources()
    for (module, name), why in PRIVATE_ALLOWED.items():
        assert module in sources and f"{name}" in sources[module], f"{module} no longer uses {name}: drop it"
        assert len(why) > 40


@pytest.mark.parametrize("module, source, expected", [
    ("ampkit.scaling.scalers", "from ampkit.lessons.loss_scaling import train_task\n", "engine may import only"),
    ("ampkit.train", "def f():\n    import ampkit.widgets.style\n", "not widgets"),
    ("ampkit.precision.mixed", "from ampkit.scaling.errors import ScaleRule\n", "levels know no scalers"),
    ("ampkit.scaling.rules", "from ampkit.train import train_step\n", "scalers know no loop"),
    ("ampkit.formats.bits", "from ampkit.precision import apply_level\n", "ground may import only"),
    ("ampkit.lessons.loss_scaling", "from ampkit.widgets.scaling import ScalerReplay\n", "not widgets"),
    ("ampkit.classroom.hub", "import torch\n", "classroom may not import torch"),
    ("ampkit.classroom.hub", "from ampkit.widgets import style\n", "classroom may import only"),
    ("ampkit.classroom.hub", "import ipywidgets as W\n", "may not import ipywidgets"),
    ("ampkit.classroom.hub", "from ampkit.formats import info\n", "not ground"),
    ("ampkit.fp8.linear", "import ipywidgets\n", "engine may not import ipywidgets"),
    ("ampkit.scaling.rules", "from ampkit.scaling.base import _f32\n", "private name _f32"),
    ("ampkit.scaling.rules", "from .base import _f32\n", "private name _f32 from ampkit.scaling.base"),
    ("ampkit.precision.mixed", "def f(s, o):\n    return s._found_inf_per_device(o)\n", "private s._found_inf"),
    ("ampkit.scaling.rules", "def f(s):\n    return s._next_scale(True)\n", "private s._next_scale"),
    ("ampkit.diagnose.watch", "def f(s):\n    return getattr(s, '_next_scale')\n", "private '_next_scale'"),
])
def test_the_checker_reports_a_planted_violation(module, source, expected):
    problems = layer_problems(module, source, {"_next_scale": {"ampkit.scaling.base"}})
    assert any(expected in p for p in problems), problems


def test_the_checker_passes_clean_sources():
    assert layer_problems("ampkit.widgets.scaling", "from ampkit.lessons.loss_scaling import train_task\n"
                          "import ipywidgets as W\nfrom ampkit.scaling import replay\n") == []
    assert layer_problems("ampkit.scaling.rules", "class A:\n    def f(self):\n        return self._x\n",
                          {"_x": {"ampkit.other"}}) == []


def test_every_module_has_a_layer():
    for name in _sources():
        assert layer_of(name) is not None


# ---- no import cycles ---------------------------------------------------------------------------------------------

def import_graph(sources: dict[str, str]) -> dict[str, dict[str, int]]:
    """Module -> {ampkit module it imports: the line}, over every import (module level, inside functions and under
    ``if TYPE_CHECKING``). ``from pkg import sub`` with ``sub`` a module is an edge to ``pkg.sub`` only: the
    package's ``__init__`` that Python runs first is not counted (else every package that gathers its submodules
    would be a cycle); ``from pkg import name`` with ``name`` defined in the package is an edge to ``pkg``."""
    graph: dict[str, dict[str, int]] = {}
    for module, source in sources.items():
        edges = graph.setdefault(module, {})
        for line, target, names in imports(module, ast.parse(source)):
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in sources]
            targets = subs + ([target] if len(subs) < len(names) or not names else [])
            for t in targets:
                if t in sources and t != module:
                    edges.setdefault(t, line)
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[tuple[list[str], list[str]]]:
    """Each group of modules that import each other (a strongly connected component of ``graph`` with more than one
    module): one cycle through it (``[a, b, ..., a]``, from its first module) and all its modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:            # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:                  # a shortest way back to the group's first module
        start = min(group)
        paths = {start: [start]}
        frontier = [start]
        while frontier and start not in [w for v in frontier for w in graph.get(v, {})]:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, {})):
                    if w in group and w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
            frontier = nxt
        last = next(v for v in frontier if start in graph.get(v, {}))
        cycles.append((paths[last] + [start], sorted(group)))
    return sorted(cycles)


def cycle_problems(sources: dict[str, str]) -> list[str]:
    graph = import_graph(sources)
    return [" -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}: an import cycle"
            + (f" (the modules that import each other: {', '.join(group)})" if len(group) > 2 else "")
            for cycle, group in import_cycles(graph)]


def test_no_module_imports_itself_back():
    problems = cycle_problems(_sources())
    assert not problems, ("modules that import each other (module:line of each import); move what both need into "
                          "a module both import:\n" + "\n".join(problems))


@pytest.mark.parametrize("sources, expected", [
    ({"ampkit.classroom.a": "from ampkit.classroom import b\n",                      # both at module level
      "ampkit.classroom.b": "from ampkit.classroom.a import X\n"},
     "ampkit.classroom.a:1 -> ampkit.classroom.b:1 -> ampkit.classroom.a"),
    ({"ampkit.classroom.a": "def f():\n    from ampkit.classroom import b\n",       # inside a function
      "ampkit.classroom.b": "import ampkit.classroom.a\n"},
     "ampkit.classroom.a:2 -> ampkit.classroom.b:1 -> ampkit.classroom.a"),
    ({"ampkit.classroom.a": "from typing import TYPE_CHECKING\n"                    # three modules, a TYPE_CHECKING one
                            "if TYPE_CHECKING:\n    from ampkit.classroom.c import S\n",
      "ampkit.classroom.c": "from ampkit.classroom.d import T\n",
      "ampkit.classroom.d": "def f():\n    from ampkit.classroom.a import g\n"},
     "ampkit.classroom.a:3 -> ampkit.classroom.c:1 -> ampkit.classroom.d:2 -> ampkit.classroom.a: an import cycle "
     "(the modules that import each other: ampkit.classroom.a, ampkit.classroom.c, ampkit.classroom.d)"),
    ({"ampkit.classroom.hub": "X = 1\nfrom ampkit.classroom.hub.cli import main  # noqa: E402\n",
      "ampkit.classroom.hub.cli": "from ampkit.classroom.hub import X\n"},          # the package and its submodule
     "ampkit.classroom.hub:2 -> ampkit.classroom.hub.cli:1 -> ampkit.classroom.hub"),
])
def test_the_cycle_check_reports_a_planted_cycle(sources, expected):
    problems = cycle_problems(sources)
    assert len(problems) == 1 and problems[0].startswith(expected) and "an import cycle" in problems[0], problems


def test_the_cycle_check_passes_a_package_that_gathers_its_submodules():
    assert cycle_problems({"ampkit.scaling": "from ampkit.scaling.rules import Rule\n",
                           "ampkit.scaling.rules": "from ampkit.scaling import base\n",   # the module, not __init__
                           "ampkit.scaling.base": "import math\n"}) == []


# ---- the room's tools: the standard library only at import time ---------------------------------------------------

def module_level_imports(module: str, tree: ast.Module) -> list[tuple[int, str, list[str]]]:
    """The imports that run when ``module`` is imported: the module's own statements (also inside top-level
    ``if``/``try``/``with`` and class bodies), not those inside functions nor under ``if TYPE_CHECKING``."""
    found: list[ast.stmt] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                walk(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
            elif isinstance(node, (ast.With, ast.ClassDef)):
                walk(node.body)

    walk(tree.body)
    return imports(module, ast.Module(body=found, type_ignores=[]))


def classroom_problems(module: str, source: str) -> list[str]:
    """The imports of an ``ampkit.classroom`` module that run at import time and name neither the standard library
    nor ``ampkit.classroom``: the room's tools run where only Python is installed (docs/architecture.md)."""
    problems = []
    for line, target, _ in module_level_imports(module, ast.parse(source)):
        ours = target == "ampkit.classroom" or target.startswith("ampkit.classroom.") or target in SHARED
        if not ours and target.split(".")[0] not in sys.stdlib_module_names:
            problems.append(f"{module}:{line}: imports {target} at import time (the room's tools import only the "
                            "standard library, ampkit.classroom and the shared modules there; import it inside the "
                            "function that "
                            "needs it)")
    return problems


def test_the_shared_modules_import_only_the_standard_library():
    """What the room's tools may import from the kit (:data:`SHARED`) imports only the standard library, anywhere."""
    sources = _sources()
    for name in SHARED:
        outside = [f"{name}:{line}: imports {target}" for line, target, _ in imports(name, ast.parse(sources[name]))
                   if target.split(".")[0] not in sys.stdlib_module_names]
        assert not outside, "\n".join(outside)


def test_the_rooms_tools_import_only_the_standard_library():
    problems = [p for name, src in _sources().items() if layer_of(name) == "classroom"
                for p in classroom_problems(name, src)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source, expected", [
    ("import nbformat\n", "imports nbformat at import time"),
    ("from tornado import web\n", "imports tornado at import time"),
    ("import ampkit\n", "imports ampkit at import time"),
    ("from ampkit import formats\n", "imports ampkit at import time"),
    ("from ampkit.scaling import rules\n", "imports ampkit.scaling.rules at import time"),
    ("try:\n    import psutil\nexcept ImportError:\n    psutil = None\n", "imports psutil"),
    ("import sys\nif sys.platform == 'linux':\n    import jupyterhub.spawner\n", "imports jupyterhub.spawner"),
    ("class A:\n    import yaml\n", "imports yaml"),
])
def test_the_classroom_check_reports_a_planted_import(source, expected):
    problems = classroom_problems("ampkit.classroom.hub", source)
    assert any(expected in p for p in problems), problems


def test_the_classroom_check_passes_deferred_and_own_imports():
    assert classroom_problems("ampkit.classroom.roomview.service",
                              "from __future__ import annotations\nimport json\nfrom typing import TYPE_CHECKING\n"
                              "from ampkit.classroom.roomview.room import Room\nfrom .page import page_html\n"
                              "if TYPE_CHECKING:\n    import psutil\n"
                              "def f():\n    from tornado import web\n    import nbformat\n") == []
