"""The non-finite hunter: the *first* op whose output turns inf/NaN, forward or backward, with its module's name.

Taught in ``05_amp_in_practice.ipynb``. A NaN loss at step 300 says nothing about where it came from;
:class:`NonFiniteHunter` watches every op (a ``TorchDispatchMode``: below autograd, so it sees the forward ops and
the backward ops alike) and stops recording at the first op that produced inf/NaN from finite inputs. Module names
come from forward pre/post hooks (a name stack) and, in backward, from the autograd node being run
(``torch._C._current_autograd_node``) mapped back to the module whose forward created it.

:func:`anomaly_report` runs the same step under ``torch.autograd.detect_anomaly`` for comparison: anomaly mode checks
only the *backward* functions' outputs, so a forward overflow is reported at the first backward node that turns
NaN (often the loss), not at the layer that overflowed.

Off (not entered), the hunter costs nothing: no hook or mode is installed until ``__enter__``. On, it makes a small
step several times slower; :func:`ampkit.diagnose.watch.watch` runs every step bare and replays under the hunter
only a step that went inf/NaN. Ops that return uninitialised memory (``empty``, ``empty_like``: dropout fills its
mask that way) are counted but not judged: their output is whatever the memory held.

>>> import torch
>>> lin = torch.nn.Linear(2, 1); _ = lin.weight.data.fill_(1e30); _ = lin.bias.data.zero_()
>>> with NonFiniteHunter(lin) as h:
...     _ = lin(torch.full((1, 2), 1e10))
>>> h.first.phase, h.first.module, h.first.op
('forward', '(model)', 'aten.addmm')
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ampkit._util import iter_tensors
from ampkit.dtypes import short_name
from ampkit.i18n import tr

__all__ = ["NonFiniteEvent", "NonFiniteHunter", "hunt", "AnomalyFinding", "anomaly_report"]

ROOT = "(model)"


@dataclass(frozen=True)
class NonFiniteEvent:
    """Where a value first became inf/NaN. ``input_max``: the largest finite magnitude among the op's inputs;
    ``inputs_finite``: False when a non-finite value came in from outside (data, parameters)."""

    phase: str                 # "forward", "backward" or "outside the model" (loss, optimizer step)
    module: str                # dotted module name, "(model)" for the top level, "" when unknown
    op: str                    # aten op, e.g. "aten.addmm"
    node: str                  # the autograd node in backward (e.g. "AddmmBackward0"), "" in forward
    in_dtypes: tuple[str, ...]
    out_dtype: str
    kind: str                  # "inf", "nan" or "inf and nan"
    input_max: float
    inputs_finite: bool
    op_index: int              # how many ops ran before it in this hunt

    def describe(self) -> str:
        where = tr(" in module '{module}'", module=self.module) if self.module else ""
        node = f" ({self.node})" if self.node else ""
        phase = {"forward": tr("in the forward pass"), "backward": tr("in the backward pass"),
                 "outside the model": tr("outside the model")}.get(self.phase, tr("in {phase}", phase=self.phase))
        kind = tr("inf and nan") if self.kind == "inf and nan" else self.kind
        return (tr("first {kind} {phase}: {op}{node}{where}, inputs {ins} -> {out}; largest finite input magnitude "
                   "{mx:.3g}", kind=kind, phase=phase, op=self.op, node=node, where=where,
                   ins="/".join(self.in_dtypes) or "-", out=self.out_dtype, mx=self.input_max)
                + ("" if self.inputs_finite else tr("; a non-finite value came in from outside")))


def _nonfinite_kind(t: torch.Tensor) -> str | None:
    if t.is_floating_point() and t.numel():
        # fast path: one fp32-accumulated sum, no full-size boolean tensor; inf/NaN anywhere makes it non-finite
        # (a finite sum is proof; a non-finite one is confirmed element-wise below: it may be an fp32 overflow)
        if math.isfinite(float(torch.sum(t.detach(), dtype=torch.float32))):
            return None
        if not bool(torch.isfinite(t).all()):
            nan, inf = bool(torch.isnan(t).any()), bool(torch.isinf(t).any())
            return "inf and nan" if nan and inf else ("nan" if nan else "inf")
    return None


def _finite_max(tensors: list[torch.Tensor]) -> float:
    best = 0.0
    for t in tensors:
        if t.is_floating_point() and t.numel():
            a = t.detach().abs().float()
            a = a[torch.isfinite(a)]
            if a.numel():
                best = max(best, float(a.max()))
    return best


# ops whose output is uninitialised memory (filled by the next op, e.g. dropout's mask): garbage, not a result
_UNINITIALISED = {torch.ops.aten.empty, torch.ops.aten.empty_like, torch.ops.aten.empty_strided,
                  torch.ops.aten.new_empty, torch.ops.aten.new_empty_strided, torch.ops.aten.empty_permuted}


class _Mode(TorchDispatchMode):
    def __init__(self, hunter: NonFiniteHunter):
        super().__init__()
        self.hunter = hunter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.hunter._seen(func, args, kwargs or {}, out)
        return out


class NonFiniteHunter:
    """Context manager: ``with NonFiniteHunter(model) as h: <forward + backward>``; then ``h.first`` is the first
    :class:`NonFiniteEvent` (``None`` if everything stayed finite), ``h.n_ops`` how many ops it watched.

    ``model`` gives the module names (optional: without it ops are reported without a module).
    """

    def __init__(self, model: nn.Module | None = None):
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"NonFiniteHunter takes an nn.Module (for module names) or None; got "
                            f"{type(model).__name__}")
        self.model = model
        self.first: NonFiniteEvent | None = None
        self.n_ops = 0
        self._stack: list[str] = []
        self._node_names: dict[int, str] = {}
        self._keep: list = []   # nodes kept alive so that their ids are not reused during the hunt
        self._handles: list = []
        self._mode: _Mode | None = None

    # --- module names --------------------------------------------------------------------------------------
    def _pre(self, name: str) -> Callable:
        def hook(module, args):
            self._stack.append(name)
        return hook

    def _post(self, name: str) -> Callable:
        def hook(module, args, out):
            if self._stack and self._stack[-1] == name:
                self._stack.pop()
            # label the autograd nodes this module created (inner modules ran first and labelled theirs)
            todo = [t.grad_fn for t in iter_tensors(out) if t.grad_fn is not None]
            while todo:
                node = todo.pop()
                if node is None or id(node) in self._node_names:
                    continue
                self._node_names[id(node)] = name
                self._keep.append(node)
                todo.extend(fn for fn, _ in node.next_functions if fn is not None)
        return hook

    def _module_name(self) -> tuple[str, str, str]:
        node = torch._C._current_autograd_node()
        if node is not None:
            return "backward", node.name(), self._node_names.get(id(node), "")
        if self._stack:
            return "forward", "", self._stack[-1]
        return "outside the model", "", ""   # the loss, the optimizer step, the scaler

    # --- the check -----------------------------------------------------------------------------------------
    def _seen(self, func, args, kwargs, out) -> None:
        self.n_ops += 1
        if self.first is not None or getattr(func, "overloadpacket", None) in _UNINITIALISED:
            return
        outs = list(iter_tensors(out))
        kinds = [k for k in (_nonfinite_kind(t) for t in outs) if k]
        if not kinds:
            return
        out_ptrs = {t.data_ptr() for t in outs}
        # an in-place op's input is its output: judge only the inputs it did not overwrite
        inputs = [t for t in iter_tensors((args, kwargs)) if t.data_ptr() not in out_ptrs or not t.numel()]
        phase, node, module = self._module_name()
        self.first = NonFiniteEvent(
            phase=phase, module=module, op=str(getattr(func, "overloadpacket", func)), node=node,
            in_dtypes=tuple(dict.fromkeys(short_name(t.dtype) for t in inputs if t.is_floating_point())),
            out_dtype=short_name(outs[0].dtype), kind=sorted(kinds, key=len)[-1],
            input_max=_finite_max(inputs),
            inputs_finite=not any(_nonfinite_kind(t) for t in inputs), op_index=self.n_ops - 1)

    def __enter__(self) -> NonFiniteHunter:
        self.first, self.n_ops = None, 0
        if self.model is not None:
            for name, mod in self.model.named_modules():
                label = name or ROOT
                self._handles.append(mod.register_forward_pre_hook(self._pre(label)))
                self._handles.append(mod.register_forward_hook(self._post(label)))
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        assert self._mode is not None  # set by __enter__
        self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles, self._stack, self._node_names, self._keep = [], [], {}, []


def hunt(model: nn.Module, step: Callable[[], object]) -> NonFiniteEvent | None:
    """Run ``step()`` (a forward + backward, or a whole training step) under a :class:`NonFiniteHunter` of
    ``model``; return the first non-finite event or ``None``.

    >>> lin = nn.Linear(2, 1); _ = lin.weight.data.fill_(1.0); _ = lin.bias.data.fill_(-2.0)    # outputs exactly 0
    >>> event = hunt(lin, lambda: lin(torch.ones(1, 2)).sqrt().sum().backward())   # sqrt's gradient at 0: 1/0
    >>> event.phase, event.op, event.node, event.kind
    ('backward', 'aten.div', 'SqrtBackward0', 'inf')
    >>> fine = nn.Linear(2, 1)
    >>> hunt(fine, lambda: fine(torch.ones(1, 2)).sum().backward()) is None          # all finite: nothing to report
    True
    """
    if not callable(step):
        raise TypeError(f"hunt(model, step): step must be a callable running one step; got {type(step).__name__}")
    with NonFiniteHunter(model) as h:
        step()
    return h.first


@dataclass(frozen=True)
class AnomalyFinding:
    """What ``torch.autograd.detect_anomaly`` said: the backward function it blamed (``""`` if it raised nothing),
    its message's first line, and whether the forward trace it printed mentions a module file line."""

    raised: bool
    function: str
    message: str


def anomaly_report(step: Callable[[], object]) -> AnomalyFinding:
    """Run ``step()`` under ``torch.autograd.detect_anomaly(check_nan=True)``; catch the error it raises.

    >>> anomaly_report(lambda: torch.ones(2, requires_grad=True).sum().backward()).raised
    False
    """
    if not callable(step):
        raise TypeError(f"anomaly_report(step): step must be callable; got {type(step).__name__}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # anomaly mode warns that it is slow and prints forward traces
        try:
            with torch.autograd.detect_anomaly(check_nan=True):
                step()
        except RuntimeError as e:
            msg = str(e).splitlines()[0]
            fn = msg.split("'")[1] if msg.count("'") >= 2 else ""
            return AnomalyFinding(True, fn, msg)
    return AnomalyFinding(False, "", "")
