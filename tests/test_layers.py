"""The layer rules of docs/architecture.md, checked on every module's source (``ast`` only: nothing is imported).

Each ``ampkit`` module belongs to one layer; a layer may import only the layers its row names. On top of the
layers: the engine's own seams (scalers know no loop and no sinking; levels know no scalers), ipywidgets only in
``widgets/``, and the room's tools (``classroom/``) import neither torch nor widgets nor the kit. And no module
reaches into another ampkit module's private names (``from x import _y``, ``obj._y`` where ``_y`` is defined
only in another module), except the few listed in :data:`PRIVATE_ALLOWED` with the reason.

The checker is tested too: a synthetic module with a forbidden import (or a private reach) must be reported.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ampkit"

GROUND = {"ampkit._util", "ampkit._version", "ampkit.formats", "ampkit.device", "ampkit.hardware", "ampkit.dtypes",
          "ampkit.models", "ampkit.data", "ampkit.protocols", "ampkit.i18n"}
ENGINE = {"ampkit.precision", "ampkit.scaling", "ampkit.sinking", "ampkit.fp8", "ampkit.diagnose", "ampkit.train",
          "ampkit.timeline"}
FRONT = {"ampkit", "ampkit.__main__", "ampkit.doctor", "ampkit.exercises", "ampkit._nbtools", "ampkit._nbstatic",
         "ampkit._i18ntools"}

#: layer -> the layers its modules may import (besides their own package), and why (docs/architecture.md).
MAY_IMPORT: dict[str, set[str]] = {
    "ground": {"ground"},
    "engine": {"ground", "engine"},
    "lessons": {"ground", "engine", "lessons"},
    "widgets": {"ground", "engine", "lessons", "widgets"},
    "front": {"ground", "engine", "lessons", "widgets", "front", "classroom"},
    "classroom": {"classroom"},
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
THIRD_PARTY = {"ipywidgets": {"widgets"}, "torch": set(MAY_IMPORT) - {"classroom"},
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
    ("ampkit.precision.mixed", "from ampkit.scaling.protocol import ScaleRule\n", "levels know no scalers"),
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
    ("ampkit.diagnose.replay", "def f(s):\n    return getattr(s, '_next_scale')\n", "private '_next_scale'"),
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
