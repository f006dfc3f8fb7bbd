"""MindSpore's and PaddlePaddle's own code, run beside PyTorch: what the notebook
``09_mindspore_and_paddle`` needs around the frameworks' code (which the notebook's cells run as their tutorials
write it).

Neither framework is a dependency of the kit: ``make frameworks`` installs both in ``.venv-frameworks``, and every
function here imports them only when called, so ``import ampkit.lessons`` works without them. What each function
reads from a framework is its public API unless its docstring names an internal.

- :func:`start_frameworks`: imports MindSpore *before* Paddle (the other order fails in one process: ``undefined
  symbol``), quiets Paddle's C++ log lines and moves the process's working folder to a scratch folder, because
  MindSpore's network rewriting (O1) writes ``rewritten_network/`` into the current folder.
- :func:`cell_rows`, :func:`rewritten_casts`: what ``auto_mixed_precision`` did to a real network, from its objects.
- :func:`mindspore_lists`, :func:`paddle_lists`, :func:`list_differences`: the frameworks' own AMP lists.
- :func:`mindspore_scales`, :func:`torch_scales`, :func:`paddle_scales`, :func:`kit_scales`: one overflow stream
  replayed through the real scalers and the kit's presets (scale after every step).
- :func:`captured_mindspore_log`: MindSpore's log records, caught (its CPU sinking fallback is logged at INFO).
- :func:`run_apart`: one of this module's functions run in a fresh Python process (a MindSpore PyNative error
  poisons later, unrelated operations in the same process); :func:`mindspore_bf16_matmul` is one.

>>> first_line(ValueError("one\\ntwo"))
'ValueError: one'
>>> parse_flags_text("o.o")
[True, False, True]
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator

from ampkit.i18n import Word, tr

__all__ = ["FRAMEWORKS", "missing_frameworks", "start_frameworks", "first_line", "cell_rows", "rewritten_casts",
           "mindspore_lists", "paddle_lists", "list_differences", "parse_flags_text", "mindspore_scales",
           "torch_scales", "paddle_scales", "kit_scales", "captured_mindspore_log", "pir_op_rows", "run_apart",
           "mindspore_bf16_matmul", "table_md", "mindspore_net", "NET_SOURCE"]

#: The import names of the two frameworks, in the order they must be imported in one process.
FRAMEWORKS: tuple[str, ...] = ("mindspore", "paddle")


def missing_frameworks() -> list[str]:
    """The frameworks of :data:`FRAMEWORKS` that this Python cannot import (found without importing them).

    >>> set(missing_frameworks()) <= set(FRAMEWORKS)
    True
    """
    return [name for name in FRAMEWORKS if importlib.util.find_spec(name) is None]


_scratch: list[str] = []


def start_frameworks() -> dict[str, str]:
    """Import MindSpore, then Paddle; return the versions of both and of torch.

    Paddle's C++ INFO/WARNING lines are switched off (``GLOG_minloglevel=2``, read when Paddle loads) and the
    process's working folder becomes a fresh scratch folder (removed when the process ends): MindSpore's O1 rewrite
    saves the rewritten network's source to ``./rewritten_network/`` (``mindspore/rewrite/symbol_tree/
    symbol_tree.py``, ``_get_cls_through_file``), which must not land in the learner's notebooks folder.
    """
    missing = missing_frameworks()
    if missing:
        raise ImportError(tr("notebook 09 needs {missing} in this Python: run `make frameworks` and choose the "
                             "kernel 'ampkit + MindSpore + PaddlePaddle' (or run .venv-frameworks/bin/python)",
                             missing=", ".join(missing)))
    if "paddle" in sys.modules and "mindspore" not in sys.modules:
        raise RuntimeError("paddle is already imported and mindspore is not: in one process import mindspore "
                           "first (the other order fails with 'undefined symbol'); restart the kernel")
    os.environ.setdefault("GLOG_minloglevel", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # paddle's import warns that no ccache is installed (for C++ extensions)
        import mindspore
        import paddle
    import torch

    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="ampkit-09-"))
        atexit.register(shutil.rmtree, _scratch[0], ignore_errors=True)
    os.chdir(_scratch[0])
    return {"mindspore": mindspore.__version__, "paddle": paddle.__version__, "torch": torch.__version__}


def table_md(rows: list[dict]) -> str:
    """Rows (dicts with the same keys) as a Markdown table.

    >>> print(table_md([{"op": "matmul", "dtype": "bf16"}]))
    | op | dtype |
    |---|---|
    | matmul | bf16 |
    """
    if not rows:
        raise ValueError("rows must be a non-empty list of dicts")
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]).replace("|", "\\|") for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def first_line(err: BaseException) -> str:
    """``"TypeName: first line of the message"``: what a framework said, without its C++ call stack."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0].strip() if text else ''}"


_PRECISION = {"FP16": "fp16", "BF16": "bf16", "FP32": "fp32"}


#: The source of the network of section 1, written to a module of its own (``ampkit_09_net.py``) in the scratch
#: folder: MindSpore's O1 rewrite reads a network class's source file and imports what that file imports, which it
#: cannot do for a class defined in a notebook cell ("source code not available") or inside a function.
NET_SOURCE = '''from mindspore import nn


class Net(nn.Cell):
    """Dense -> BatchNorm1d -> ReLU -> Dense."""

    def __init__(self, n_in=8, hidden=16, n_out=4):
        super().__init__()
        self.fc1 = nn.Dense(n_in, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(hidden, n_out)

    def construct(self, x):
        return self.fc2(self.relu(self.bn(self.fc1(x))))
'''


def mindspore_net(n_in: int = 8, hidden: int = 16, n_out: int = 4):
    """A new ``Net`` of :data:`NET_SOURCE` (``fc1``, ``bn``, ``relu``, ``fc2``), imported from its file in the
    scratch folder that :func:`start_frameworks` made."""
    if not _scratch:
        raise RuntimeError("call start_frameworks() first: the network's module lives in its scratch folder")
    import importlib

    path = os.path.join(_scratch[0], "ampkit_09_net.py")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(NET_SOURCE)
    if _scratch[0] not in sys.path:
        sys.path.insert(0, _scratch[0])
    return importlib.import_module("ampkit_09_net").Net(n_in, hidden, n_out)


def cell_rows(net) -> list[dict[str, str]]:
    """One row per cell of a MindSpore network: its name, type, and the precision ``to_float`` set on it (``"-"``:
    none set; read from the cell's ``get_mixed_precision_type()``), with its parameters' stored dtypes."""
    rows = []
    for name, cell in net.cells_and_names():
        kind = cell.get_mixed_precision_type()
        params = sorted({str(p.dtype) for p in cell.get_parameters(expand=False)})
        # shown as a table: headers and words in the kit's language, still equal to their English (Words)
        rows.append({Word("cell"): name or Word("(network)"), Word("type"): type(cell).__name__,
                     "to_float": _PRECISION.get(getattr(kind, "name", ""), "-"),
                     Word("own parameters"): ", ".join(params) or "-"})
    return rows


_CAST = re.compile(r"^\s*(\w+) = amp_cast\((.+?), mindspore\.(float16|bfloat16|float32)\)\s*$")
_CALL = re.compile(r"^\s*\w+ = self\.(\w+)\((.*)\)\s*$")


def rewritten_casts(cell) -> list[tuple[str, str]]:
    """``(operation, dtype)`` for each primitive call in the ``construct`` that MindSpore's O1 rewrite generated for
    ``cell`` whose arguments it casts first (``amp_cast(x, mindspore.float16)``): which operations run in the low
    dtype. Reads the generated source (``inspect.getsource`` of the rewritten class)."""
    import inspect

    src = inspect.getsource(type(cell).construct)
    cast_to: dict[str, str] = {}
    out = []
    for line in src.splitlines():
        m = _CAST.match(line)
        if m:
            cast_to[m.group(1)] = m.group(3)
            continue
        m = _CALL.match(line)
        if m:
            args = [a.strip() for a in m.group(2).split(",") if a.strip()]
            dtypes = {cast_to[a] for a in args if a in cast_to}
            if dtypes:
                out.append((m.group(1), "/".join(sorted(dtypes))))
    return out


def _ms_name(cls: type) -> str:
    return ("nn." if cls.__module__.startswith("mindspore.nn") else "ops.") + cls.__name__


def mindspore_lists() -> dict[str, frozenset[str]]:
    """MindSpore's own lists, by name as the kit writes them (``"nn.Dense"``, ``"ops.MatMul"``):
    ``mindspore.amp.get_white_list()`` (what O1 converts) and ``get_black_list()`` (what O2 keeps in fp32)."""
    from mindspore import amp

    return {"O1 white": frozenset(map(_ms_name, amp.get_white_list())),
            "O2 black": frozenset(map(_ms_name, amp.get_black_list()))}


def paddle_lists(level: str = "O1") -> dict[str, dict[str, frozenset[str]]]:
    """Paddle's own lists at ``level`` (``"OD"``, ``"O1"`` or ``"O2"``): ``{"float16": {"white": ..., "black": ...},
    "bfloat16": {...}}`` from ``paddle.amp.white_list()`` and ``paddle.amp.black_list()``."""
    import paddle

    white, black = paddle.amp.white_list(), paddle.amp.black_list()
    if level not in white["float16"]:
        raise ValueError(f"level must be one of {', '.join(white['float16'])}; got {level!r}")
    return {dt: {"white": frozenset(white[dt][level]), "black": frozenset(black[dt][level])}
            for dt in ("float16", "bfloat16")}


def list_differences(framework: Iterable[str], kit: Iterable[str]) -> dict[str, list[str]]:
    """What a framework's list and the kit's copy do not share.

    >>> list_differences({"a", "b"}, {"b", "c"})
    {'only in the framework': ['a'], 'only in the kit': ['c']}
    """
    framework, kit = set(framework), set(kit)
    return {"only in the framework": sorted(framework - kit), "only in the kit": sorted(kit - framework)}


def parse_flags_text(flags: str) -> list[bool]:
    """An overflow stream written as text: ``"o"`` an overflowing step, ``"."`` a clean one."""
    if not isinstance(flags, str) or set(flags) - {"o", "."}:
        raise ValueError(f"flags must be a str of 'o' (overflow) and '.' (clean step); got {flags!r}")
    return [f == "o" for f in flags]


def mindspore_scales(flags: str, scale_value: float, scale_factor: int, scale_window: int) -> list[float]:
    """The scale of a real ``mindspore.amp.DynamicLossScaler`` after each step of ``flags``: its ``adjust`` called
    with the step's finiteness, as the tutorial's train step calls it with ``all_finite(grads)``."""
    import mindspore as ms
    from mindspore import amp

    scaler = amp.DynamicLossScaler(scale_value=scale_value, scale_factor=scale_factor, scale_window=scale_window)
    out = []
    for overflow in parse_flags_text(flags):
        scaler.adjust(ms.Tensor(not overflow))
        out.append(float(scaler.scale_value.asnumpy()))
    return out


def torch_scales(flags: str, **kwargs) -> list[float]:
    """The scale of a real ``torch.amp.GradScaler("cpu", **kwargs)`` after each step of ``flags``: a real
    ``scale → backward → step → update`` on one parameter whose gradient is inf on an overflowing step."""
    import torch

    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([p], lr=0.0)
    scaler = torch.amp.GradScaler("cpu", **kwargs)
    out = []
    for overflow in parse_flags_text(flags):
        x = torch.tensor([1.0, float("inf") if overflow else 2.0])
        scaler.scale((p * x).sum()).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        out.append(scaler.get_scale())
    return out


def _grad_scaler_on_cpu(**kwargs):
    """A real ``paddle.amp.GradScaler(**kwargs)`` that runs on a CPU: Paddle's **internal**
    ``paddle.amp.grad_scaler.in_dynamic_mode`` answers False while it is built, so its device check is skipped
    (the one home of that bypass: :func:`paddle_scales` and tests_frameworks/test_paddle_scaler.py use it)."""
    import paddle
    from paddle.amp import grad_scaler

    real = grad_scaler.in_dynamic_mode
    grad_scaler.in_dynamic_mode = lambda: False
    try:
        return paddle.amp.GradScaler(**kwargs)
    finally:
        grad_scaler.in_dynamic_mode = real


def paddle_scales(flags: str, **kwargs) -> list[float]:
    """The scale of a real ``paddle.amp.GradScaler(**kwargs)`` after each step of ``flags`` (forward and
    ``scale`` under ``auto_cast(dtype='float16')``, then ``backward``, ``step``, ``update``).

    On a CPU the scaler switches itself off in dynamic mode ("AmpScaler can only be enabled on CUDAPlace..."). To
    run its rule at all this reaches into an **internal**: ``paddle.amp.grad_scaler.in_dynamic_mode`` is made to
    answer False while the scaler is built, so the device check is skipped; the scale is read from
    ``state_dict()["scale"]``. ``scale``'s own check (the AMP dtype must be float16) is met by the ``auto_cast``
    block, which sets that dtype even where it changes no op. Paddle prints a line at each decrease; it is kept."""
    import paddle

    scaler = _grad_scaler_on_cpu(**kwargs)
    w = paddle.create_parameter([2], "float32")
    opt = paddle.optimizer.SGD(learning_rate=0.0, parameters=[w])
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # auto_cast's CPU warning, once per step
        for overflow in parse_flags_text(flags):
            x = paddle.to_tensor([1.0, float("inf") if overflow else 2.0])
            with paddle.amp.auto_cast(level="O1", dtype="float16"):
                scaled = scaler.scale((w * x).sum())
            scaled.backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            out.append(float(scaler.state_dict()["scale"][0]))
    return out


def kit_scales(name: str, flags: str, **kwargs) -> list[float]:
    """The kit's preset ``name`` (:data:`ampkit.scaling.PRESETS`) replayed on ``flags``: the scale after each step."""
    from ampkit.scaling import preset, replay_flags

    walk = replay_flags(preset(name, **kwargs), parse_flags_text(flags))
    return [float(s) for s in walk.scales[1:]] + [float(walk.final_scale)]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_mindspore_log(level: int = logging.INFO) -> Iterator[list[str]]:
    """Inside the block MindSpore's Python logger records from ``level`` up into the yielded list instead of
    printing them (its handlers are put back afterwards)."""
    from mindspore import log

    logger = log._get_logger()   # an internal: MindSpore's logger object (its public API only logs to it)
    handler = _Records()
    before = (logger.level, list(logger.handlers))
    logger.handlers = [handler]
    logger.setLevel(level)
    try:
        yield handler.messages
    finally:
        logger.setLevel(before[0])
        logger.handlers = before[1]


def pir_op_rows(program) -> list[dict[str, str]]:
    """The operations of a Paddle static (PIR) program with their input and output dtypes (parameters and data
    inputs left out)."""
    def short(values):
        return ", ".join(str(v.dtype).replace("paddle.", "") for v in values)

    return [{Word("op"): op.name(), Word("inputs"): short(op.operands_source()), Word("outputs"): short(op.results())}
            for op in program.global_block().ops if not op.name().startswith(("builtin.", "pd_op.data"))]


def mindspore_bf16_matmul() -> dict[str, str]:
    """A ``Dense`` layer at O3 in bfloat16 on MindSpore's CPU backend: what it says (run it with :func:`run_apart`;
    the failure would surface again in this process's later operations)."""
    import mindspore as ms
    import numpy as np
    from mindspore import amp, nn

    ms.set_device("CPU")
    net = amp.auto_mixed_precision(nn.Dense(4, 2), "O3", dtype=ms.bfloat16)
    try:
        out = net(ms.Tensor(np.ones((2, 4), np.float32)))
        return {"result": str(out.dtype)}
    except Exception as err:   # the framework's own refusal is the result
        return {"error": first_line(err)}


def run_apart(function: str, timeout: float = 120.0) -> dict:
    """Run this module's ``function`` (no arguments, a JSON-able result) in a fresh Python process (this one's
    interpreter, in a scratch folder) and return its result. The process runs the function's source alone (with
    :func:`first_line`), so it imports the framework and nothing of the kit."""
    import inspect

    if function not in __all__ or not function.startswith("mindspore_bf16"):
        raise ValueError(f"function must be one of mindspore_bf16_matmul; got {function!r}")
    code = "\n".join(["import json, warnings", "warnings.simplefilter('ignore')", inspect.getsource(first_line),
                      inspect.getsource(globals()[function]), f"print('@@' + json.dumps({function}()))"])
    with tempfile.TemporaryDirectory(prefix="ampkit-09-") as tmp:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "GLOG_minloglevel": "2"})
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("@@")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{function} failed in its own process (exit {done.returncode}): {done.stderr[-600:]}")
    return json.loads(lines[-1][2:])
