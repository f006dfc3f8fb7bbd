"""What a level does to each layer, seen from inside: the per-layer dtype trace of one forward pass
(:func:`trace_dtypes`) and the bytes training holds (:func:`memory_report`).

Taught in ``02_autocast_and_levels.ipynb`` (section 3, "layer by layer", and the memory comparison).

>>> import torch; from ampkit.models import build_model
>>> rows = [r.as_row() for r in trace_dtypes(build_model("mlp"), torch.zeros(2, 16), "O3", "fp16")]
>>> rows[0]["params"], rows[1]["params"], rows[-1]["output"]
('—', 'fp16', 'fp32')
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ampkit._util import first_tensor
from ampkit.dtypes import short_name
from ampkit.i18n import Word, tr
from ampkit.precision.levels import NORM_TYPES
from ampkit.precision.mixed import LEVEL_ATTR, MixedPrecision, apply_level

__all__ = ["LayerTrace", "trace_dtypes", "MemoryReport", "memory_report"]


def dtype_cell(dt: torch.dtype | None) -> str:
    """A dtype as a table cell: its short name (``bf16``), ``—`` where there is none."""
    return "—" if dt is None else short_name(dt)


def first_dtype(obj: Any) -> torch.dtype | None:
    """The dtype of the first tensor in ``obj`` (a tensor or a nested tuple/list/dict), or ``None``."""
    t = first_tensor(obj)
    return None if t is None else t.dtype


@dataclass(frozen=True)
class LayerTrace:
    """One layer's dtypes in one forward pass: its own parameters, what it received and what it returned."""

    name: str
    kind: str
    param_dtype: torch.dtype | None
    input_dtype: torch.dtype | None
    output_dtype: torch.dtype | None
    n_params: int
    note: str = ""

    def as_row(self) -> dict[str, str]:
        """Strings for a table (``bf16``/``fp16``/``fp32``, ``—`` where there is nothing)."""
        return {"layer": self.name, "type": self.kind, "params": dtype_cell(self.param_dtype),
                "input": dtype_cell(self.input_dtype), "output": dtype_cell(self.output_dtype), "note": self.note}


_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
#: Modules whose op is on autocast's lower-precision list on every device (linear, conv*, prelu).
_LOWERED_MODULES = (nn.Linear, nn.modules.conv._ConvNd, nn.PReLU)


def _leveled_copy(model: nn.Module | MixedPrecision, level: str, dtype: str | torch.dtype) -> MixedPrecision:
    if isinstance(model, MixedPrecision):
        mp = copy.copy(model)
        mp.model = copy.deepcopy(model.model)
        return mp
    if isinstance(model, nn.Module):
        if hasattr(model, LEVEL_ATTR):
            raise ValueError("this model already has a level applied; pass its MixedPrecision instead")
        m = copy.deepcopy(model)
        return apply_level(m, torch.optim.SGD(m.parameters(), lr=0.0), level, dtype)
    raise TypeError(f"model must be an nn.Module or a MixedPrecision; got {type(model).__name__}")


def _note(mp: MixedPrecision, module: nn.Module, i, o, pdt) -> str:
    """Why this layer's dtypes are what they are, where the level explains it."""
    if mp.level == "O2" and isinstance(module, NORM_TYPES):
        return tr("kept fp32 (input cast up, output cast back to {dtype})", dtype=short_name(mp.dtype))
    if mp.level == "O1" and not any(True for _ in module.children()):
        if o == mp.dtype and isinstance(module, _LOWERED_MODULES):
            return tr("autocast lowers this op")
        if i == mp.dtype and o == torch.float32:
            return tr("autocast casts this op up to fp32")
        if i == mp.dtype and o == mp.dtype and pdt == torch.float32:
            return tr("not on this device's fp32 list: runs in the {dtype} it receives", dtype=short_name(mp.dtype))
    return ""


def trace_dtypes(model: nn.Module | MixedPrecision, x: torch.Tensor, level: str = "O0",
                 dtype: str | torch.dtype = "bf16") -> list[LayerTrace]:
    """Per layer (in call order): parameter, input and output dtypes of one forward pass of ``x`` under ``level``.

    ``model`` is a fresh fp32 model (a deep copy gets the level; the original is untouched) or a
    :class:`MixedPrecision` (its own level is used, on a copy). Containers (``Sequential``...) are skipped; the
    model itself is the row ``(model)``; the last row, ``(to loss)``, is what :meth:`MixedPrecision.forward` hands
    to the loss (the model's output cast to fp32). Under O2 a norm's row shows the fp32 it computes in.

    >>> from ampkit.models import build_model
    >>> rows = trace_dtypes(build_model("mlp"), torch.zeros(2, 16), "O1", "bf16")
    >>> rows[1].name, rows[1].param_dtype, rows[1].output_dtype
    ('net.0', torch.float32, torch.bfloat16)
    """
    mp = _leveled_copy(model, level, dtype)
    records: dict[str, dict] = {}
    order: list[str] = []
    handles = []
    for name, module in mp.model.named_modules():
        if isinstance(module, _CONTAINERS):
            continue
        label = name or "(model)"

        def pre(mod, args, _label=label):
            if _label not in records:
                order.append(_label)
                records[_label] = {"in": first_dtype(args), "out": None}

        def post(mod, args, out, _label=label):
            if records[_label]["out"] is None:
                records[_label]["out"] = first_dtype(out)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, prepend=True))
    try:
        with torch.no_grad():
            returned = mp.forward(x)
    finally:
        for h in handles:
            h.remove()
    modules = dict(mp.model.named_modules())
    rows = []
    for label in order:
        module = modules["" if label == "(model)" else label]
        own = list(module.parameters(recurse=False))
        pdt = own[0].dtype if own else None
        i, o = records[label]["in"], records[label]["out"]
        rows.append(LayerTrace(label, type(module).__name__, pdt, i, o, sum(p.numel() for p in own),
                               _note(mp, module, i, o, pdt)))
    # What the loss sees: MixedPrecision.forward casts the model's output to fp32 (as Apex O2/O3 and MindSpore
    # O2/O3 do), so the last row is that cast, after the model's own output.
    model_out, loss_in = records.get("(model)", {}).get("out"), first_dtype(returned)
    note = (tr("cast to fp32 for the loss") if model_out != loss_in else tr("already fp32: no cast"))
    rows.append(LayerTrace("(to loss)", "MixedPrecision.forward", None, model_out, loss_in, 0, note))
    return rows


# --------------------------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class MemoryReport:
    """Bytes held by training tensors, measured from the tensors themselves (numel x element size)."""

    weights: int
    grads: int
    optimizer_state: int
    masters: int
    master_grads: int
    buffers: int

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer_state + self.masters + self.master_grads + self.buffers

    def as_dict(self) -> dict[str, int]:
        """Field name → bytes, plus ``total`` (the names are Words: shown in the kit's language, equal to their
        English)."""
        return {Word("weights"): self.weights, Word("grads"): self.grads,
                Word("optimizer state"): self.optimizer_state, Word("master weights"): self.masters,
                Word("master grads"): self.master_grads, Word("buffers"): self.buffers, Word("total"): self.total}


def _nbytes(tensors: Iterable) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def memory_report(mp: MixedPrecision) -> MemoryReport:
    """Measure what ``mp`` holds now: model weights and grads, optimizer state, fp32 masters and their grads.

    Grads and optimizer state exist only after a backward/step, so measure after one training step.

    >>> from ampkit.models import build_model
    >>> m = build_model("mlp"); mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O3", "bf16")
    >>> memory_report(mp).weights == sum(p.numel() for p in m.parameters()) * 2
    True
    """
    if not isinstance(mp, MixedPrecision):
        raise TypeError(f"memory_report takes the MixedPrecision from apply_level; got {type(mp).__name__}")
    params = list(mp.model.parameters())
    state = [v for st in mp.optimizer.state.values() for v in st.values()]
    return MemoryReport(weights=_nbytes(params), grads=_nbytes(p.grad for p in params),
                        optimizer_state=_nbytes(state), masters=_nbytes(mp.masters),
                        master_grads=_nbytes(m.grad for m in mp.masters), buffers=_nbytes(mp.model.buffers()))
