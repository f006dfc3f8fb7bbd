"""Every exercise's self-check can fail: the kit's solution never gets its value by the same computation as the
expected value (issue #39 item 4: 03's exercise 6 rebuilt the very ``replay_flags(...)`` call its check compared
with). Checked on each exercise module's source (``ast``): for ``expected_N`` and ``solution_N``, local names are
inlined, module constants replaced by their values and folded, import aliases resolved, parameters and
comprehension variables renamed by position; then

* the two returned expressions must differ,
* no computing call (a call with a non-constant argument or receiver) that the returned value is built from, and
  no call into ampkit (``backward_operand_formats()`` too) or a module helper anywhere, may appear in both, directly
  or through a module helper,
* a solution never reads an ``expected_N``,

and a solution's source carries no comment (it is shown to the learner in either language: it explains itself with
``tr()`` prints). The checker is tested on synthetic modules that must be flagged.
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import io
import re
import tokenize

import pytest

from ampkit.exercises import exercise_modules, exercise_numbers

NEUTRAL = {n for n in dir(builtins) if not n.startswith("_")} | {"tr", "mark"}


def _imports(tree: ast.Module) -> dict[str, str]:
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names |= {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name): a.name for a in node.names}
    return names


def _bind(target: ast.AST, value: ast.AST, env: dict[str, ast.AST | None]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            _bind(t, v, env)
    else:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                env[n.id] = None    # bound some other way: opaque


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


class _Substitute(ast.NodeTransformer):
    def __init__(self, env: dict[str, ast.AST | None], aliases: dict[str, str]):
        self.env, self.aliases = env, aliases

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = self.env.get(node.id)
        if value is not None and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(value)
        if node.id in self.aliases and node.id not in self.env:
            return ast.Name(self.aliases[node.id], ast.Load())
        return node


def _fold(node: ast.AST) -> ast.AST:
    """Evaluate subexpressions made of constants and operators only (``"o" + "." * 3`` -> ``"o..."``)."""
    class Fold(ast.NodeTransformer):
        def generic_visit(self, n):
            n = super().generic_visit(n)
            if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List)) and all(
                    isinstance(x, (ast.Constant, ast.operator, ast.unaryop, ast.expr_context, ast.BinOp, ast.UnaryOp,
                                   ast.Tuple, ast.List)) for x in ast.walk(n)):
                try:
                    code = compile(ast.fix_missing_locations(ast.Expression(n)), "<fold>", "eval")
                    return ast.Constant(eval(code, {}))  # noqa: S307 (constants and operators only)
                except Exception:
                    return n
            return n
    return Fold().visit(node)


def _names(fn: ast.FunctionDef) -> dict[str, str]:
    """Parameters by position (``_p0``...), then comprehension, lambda and loop variables in order (``_v0``...)."""
    names = {a.arg: f"_p{i}" for i, a in enumerate(fn.args.args)}
    for n in ast.walk(fn):
        targets = [g.target for g in n.generators] if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp,
                                                                      ast.DictComp)) else []
        targets += [n.target] if isinstance(n, ast.For) else []
        for t in targets:
            for v in ast.walk(t):
                if isinstance(v, ast.Name) and v.id not in names:
                    names[v.id] = f"_v{len(names)}"
        for a in (n.args.args if isinstance(n, ast.Lambda) else []):
            names.setdefault(a.arg, f"_v{len(names)}")
    return names


def _canonical(node: ast.AST, names: dict[str, str]) -> str:
    """The dump of ``node`` with the function's variables renamed (:func:`_names`), keywords sorted."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in names:
            n.id = names[n.id]
        elif isinstance(n, ast.arg) and n.arg in names:
            n.arg = names[n.arg]
        elif isinstance(n, ast.Call):
            n.keywords.sort(key=lambda k: k.arg or "")
    return ast.dump(node, annotate_fields=False)


class _Module:
    def __init__(self, source: str):
        self.tree = ast.parse(source)
        self.aliases = _imports(self.tree)
        self.functions = {f.name: f for f in self.tree.body if isinstance(f, ast.FunctionDef)}
        self.constants: dict[str, ast.AST | None] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                value = _fold(_Substitute(self.constants, self.aliases).visit(copy.deepcopy(node.value)))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    # a literal constant is inlined (``FLAGS`` and ``"o..."`` are one argument); one built by a call
                    # (an input tensor) stays a name: sharing an input is not sharing the computation
                    _bind(t, value if _is_literal(value) else ast.Name(t.id if isinstance(t, ast.Name) else "_"),
                          self.constants)

    def _flow(self, name: str) -> tuple[list[ast.AST], list[ast.AST], dict[str, str]]:
        """The function's expressions with local names inlined, its returned expressions, its parameters."""
        fn = self.functions[name]
        params = [a.arg for a in fn.args.args]
        env: dict[str, ast.AST | None] = {**self.constants, **{p: None for p in params}}
        exprs, returns = [], []

        def sub(e: ast.AST) -> ast.AST:
            return _fold(_Substitute(env, self.aliases).visit(copy.deepcopy(e)))

        # names changed in place (``needs.add(x)``, ``d[k] = v``) are opaque: their first value is not their last
        calls = [n.func for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        mutated = {f.value.id for f in calls if isinstance(f.value, ast.Name)} | \
                  {t.value.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign):
                value = sub(stmt.value)
                exprs.append(value)
                for t in stmt.targets:
                    _bind(t, value, env)
                    env.update({n.id: None for n in ast.walk(t) if isinstance(n, ast.Name) and n.id in mutated})
            elif isinstance(stmt, (ast.AugAssign, ast.For, ast.comprehension)):
                exprs.append(sub(stmt.value if isinstance(stmt, ast.AugAssign) else stmt.iter))
                _bind(stmt.target, ast.Constant(None), env)
                env.update({n.id: None for n in ast.walk(stmt.target) if isinstance(n, ast.Name)})
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                returns.append(sub(stmt.value))
            elif isinstance(stmt, (ast.Expr, ast.If, ast.While, ast.Assert)):
                exprs.append(sub(getattr(stmt, "value", None) or stmt.test))
        return exprs + returns, returns, _names(fn)

    def _computing(self, call: ast.Call) -> bool:
        """A call to a module helper or into ampkit, or one whose arguments or receiver are not all constants."""
        func = call.func
        head = func.id if isinstance(func, ast.Name) else ""
        if head in self.functions or self._engine(call):
            return True
        dotted = ast.unparse(func)
        if head in NEUTRAL or dotted.startswith("math."):
            return False
        parts = [*call.args, *(k.value for k in call.keywords)]
        if isinstance(func, ast.Attribute):
            parts.append(func.value)
        return any(isinstance(n, (ast.Call, ast.Name)) and not (isinstance(n, ast.Name) and n.id.isupper())
                   and not (isinstance(n, ast.Name) and n.id in self.aliases.values())
                   for p in parts for n in ast.walk(p))

    def _engine(self, call: ast.Call) -> bool:
        """A call into ampkit (an engine or lesson function, or a method of what one returned) or a module helper."""
        text = ast.unparse(call.func)
        return text.startswith("ampkit.") or text.split("(")[0] in self.functions

    def calls(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """Canonical computing calls ``name`` makes: every one its returned value is built from, and every call into
        ampkit anywhere in it (a loop included), through the module's helpers too. Shared set-up outside the kit
        (a model's forward and backward) does not count: the value must not be the same kit computation."""
        exprs, returns, names = self._flow(name)
        found = set()
        for e in exprs:
            on_path = any(e is r for r in returns)
            for n in ast.walk(e):
                if not (isinstance(n, ast.Call) and self._computing(n) and (on_path or self._engine(n))):
                    continue
                found.add(_canonical(n, names))
                callee = n.func.id if isinstance(n.func, ast.Name) else ""
                if callee in self.functions and callee not in seen | {name}:
                    found |= self.calls(callee, seen | {name})
        return found

    def returned(self, name: str) -> set[str]:
        _, returns, names = self._flow(name)
        # a local built in a loop (``needs`` after ``needs.add(...)``) is opaque: its name alone says nothing
        return {_canonical(r, names) for r in returns
                if not (isinstance(r, ast.Name) and r.id not in names and not r.id.isupper())}

    def reads_expected(self, name: str) -> bool:
        return any(isinstance(n, ast.Name) and re.fullmatch(r"expected_\d+", n.id)
                   for n in ast.walk(self.functions[name]))


def dependence_problems(source: str) -> list[str]:
    """Each exercise of a module's ``source`` whose solution computes its value the way its expected value does."""
    m = _Module(source)
    problems = []
    for name in sorted(m.functions):
        match = re.fullmatch(r"expected_(\d+)", name)
        sol = f"solution_{match.group(1)}" if match else ""
        if not match or sol not in m.functions:
            continue
        if m.reads_expected(sol):
            problems.append(f"{sol} reads an expected value")
        if m.returned(name) & m.returned(sol):
            problems.append(f"{sol} returns the same expression as {name}")
        shared = m.calls(name) & m.calls(sol)
        if shared:
            problems.append(f"{sol} computes by the same call as {name}: {len(shared)} shared call(s)")
    return problems


def comment_problems(source: str) -> list[str]:
    return [f"line {t.start[0]}: {t.string}" for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT]


MODULES = exercise_modules()


def test_every_notebook_from_00_to_09_has_an_exercise_module():
    """exercise_modules() skips a module that cannot be imported here: 00-09's must all import, or their hints and
    solutions would go unchecked. 09's too, although its expected values need the frameworks' environment: it
    imports MindSpore and Paddle only inside its functions (this environment has neither)."""
    from ampkit.exercises import PACKAGE, SETS

    wanted = {f"{PACKAGE}.{SETS[nb]}" for nb in SETS if nb[:2] <= "09"}
    assert wanted <= {m.__name__ for m in MODULES}
    assert all(len(exercise_numbers(m)) >= 3 for m in MODULES)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_solutions_work_it_out_another_way(module):
    assert dependence_problems(inspect.getsource(module)) == []
    for n in exercise_numbers(module):
        assert hasattr(module, f"solution_{n}") and getattr(module, f"HINT_{n}", ""), n
        assert comment_problems(inspect.getsource(getattr(module, f"solution_{n}"))) == [], n


GOOD = '''
import math
from ampkit.scaling import replay_flags, preset
FLAGS = "o" + "." * 15
def expected_1():
    return math.log2(replay_flags(preset("deepspeed", hysteresis=1), FLAGS).final_scale)
def solution_1():
    s = 16 - FLAGS.count("o")
    return s + 1 + (FLAGS.count(".") - 4) // 3
'''

BAD = {
    "renamed local (03's exercise 6 before the fix)": GOOD.replace(
        '    s = 16 - FLAGS.count("o")\n    return s + 1 + (FLAGS.count(".") - 4) // 3',
        '    walk = replay_flags(preset(hysteresis=1, name="x"), FLAGS)\n'
        '    walk = replay_flags(preset("deepspeed", hysteresis=1), "o" + 15 * ".")\n'
        '    log2s = [math.log2(s) for s in walk.scales] + [math.log2(walk.final_scale)]\n    return log2s[-1]'),
    "an import alias": GOOD.replace("import math\n", "import math\nfrom ampkit.scaling import replay_flags as rf\n")
    .replace('    s = 16 - FLAGS.count("o")\n', '    s = rf(preset("deepspeed", hysteresis=1), FLAGS)\n')
    .replace('return s + 1 + (FLAGS.count(".") - 4) // 3', "return math.log2(s.final_scale) + 0"),
    "the same expression": GOOD.replace('    s = 16 - FLAGS.count("o")\n    return s + 1 + (FLAGS.count(".") - 4) // 3',
                                        '    x = preset("deepspeed", hysteresis=1)\n'
                                        '    return math.log2(replay_flags(x, FLAGS).final_scale)'),
    "a shared helper": GOOD + '''
def _engine(n):
    return replay_flags(preset("deepspeed"), "o" * n)
def expected_2(g):
    return _engine(3).final_scale
def solution_2(grads):
    print(grads)
    return _engine(1 + 2).final_scale * 1
''',
    "a kit call without arguments": GOOD + "from ampkit.lessons import measured\ndef expected_2():\n"
    "    return sum(measured().values())\ndef solution_2():\n    m = measured()\n    return m['a'] + m['b']\n",
    "reads expected": GOOD + "def expected_2():\n    return 1\ndef solution_2():\n    return expected_2() + 0\n",
    "renamed parameter and comprehension variable": GOOD + '''
def expected_2(g):
    return max(k for k in range(9) if replay_flags(preset("torch"), g[k]).final_scale > 1)
def solution_2(grads):
    ok = [j for j in range(9) if replay_flags(preset("torch"), grads[j]).final_scale > 1]
    return ok[-1]
''',
}


def test_the_checker_flags_dependent_solutions_and_passes_independent_ones():
    assert dependence_problems(GOOD) == []
    for what, source in BAD.items():
        assert dependence_problems(source), what
    assert comment_problems("def solution_1():\n    return 2  # the answer\n")
    assert not comment_problems("def solution_1():\n    print('# not a comment')\n    return 2\n")
