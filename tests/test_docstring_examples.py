"""Every public function of the ground and engine layers shows itself in a ``>>>`` example (the design's rule; the
examples run as doctests under ``--doctest-modules``, so an example is also a test).

"Public function": a function defined at the top of a module (not imported into it) whose name is in that module's
``__all__``. The layers are those of ``tests/test_layers.py`` (a package counts with its submodules). The check reads
each module's source with ``ast`` (nothing is imported). Public classes are not required to carry an example (57 of
93 have none yet; their methods are exercised through the examples and the tests).

The checker is tested too: a synthetic module with an undocumented public function must be reported, and one whose
example lives only in the module docstring or in a private helper must be reported as well.
"""
from __future__ import annotations

import ast

from test_layers import ENGINE, GROUND, PKG, module_name


def layer_modules() -> dict[str, str]:
    """Module name -> source of every ground and engine module (packages with their submodules)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        name = module_name(path)
        if ".".join(name.split(".")[:2]) in GROUND | ENGINE:
            out[name] = path.read_text()
    return out


def public_names(tree: ast.Module) -> set[str]:
    """The names in the module's literal ``__all__`` (empty when it has none)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return set(ast.literal_eval(node.value))
    return set()


def missing_examples(module: str, source: str) -> list[str]:
    """``module.function`` for each public function of ``source`` whose docstring has no ``>>>`` example."""
    tree = ast.parse(source)
    public = public_names(tree)
    return [f"{module}.{node.name} (line {node.lineno})" for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in public
            and ">>>" not in (ast.get_docstring(node) or "")]


def test_every_public_function_of_ground_and_engine_has_an_example():
    modules = layer_modules()
    assert len(modules) > 50, "the layer walk found too few modules: is tests/test_layers.py's layer table intact?"
    missing = [m for name, src in modules.items() for m in missing_examples(name, src)]
    assert not missing, (f"{len(missing)} public function(s) without a >>> example in their docstring (a short "
                         f"one: the rule in a line or two, an output that teaches something):\n" + "\n".join(missing))


def test_the_walk_counts_the_functions_it_checks():
    """The walk sees real functions: a few known public ones of each layer are among those checked."""
    checked = {f"{name}.{node.name}" for name, src in layer_modules().items() for node in ast.parse(src).body
               if isinstance(node, ast.FunctionDef) and node.name in public_names(ast.parse(src))}
    assert {"ampkit._util.check_int", "ampkit.fp8.quantize.quantize", "ampkit.train.train_step",
            "ampkit.sinking.cache.kit_compile_cache"} <= checked
    assert len(checked) > 150


PLANTED = '''
"""A module whose docstring shows an example.

>>> documented()
1
"""
__all__ = ["documented", "bare", "only_in_module_doc", "Klass"]

from elsewhere import imported   # imported names are their own module's business


def documented():
    """One.

    >>> documented()
    1
    """
    return 1


def bare():
    """No example here."""


def only_in_module_doc():
    return 2


def _private():
    """>>> _private()"""


def not_exported():
    pass


class Klass:
    def method(self):
        pass
'''


def test_the_checker_reports_a_planted_function_without_example():
    missing = missing_examples("ampkit.planted", PLANTED)
    assert [m.split(" ")[0] for m in missing] == ["ampkit.planted.bare", "ampkit.planted.only_in_module_doc"]
    assert "line 21" in missing[0]


def test_the_checker_passes_a_module_once_its_examples_are_written():
    fixed = PLANTED.replace('"""No example here."""', '"""No longer.\n\n    >>> bare()\n    """').replace(
        "def only_in_module_doc():\n", 'def only_in_module_doc():\n    """>>> only_in_module_doc()\n    2"""\n')
    assert missing_examples("ampkit.planted", fixed) == []
    assert missing_examples("ampkit.no_all", "def f():\n    pass\n") == []     # no __all__: nothing is public
