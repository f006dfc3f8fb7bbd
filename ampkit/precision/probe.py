"""The live autocast op probe: which ops ``torch.autocast`` lowers, casts up to fp32, promotes or leaves alone on
*this* device, found by running them, next to what the PyTorch docs list (:data:`DOCUMENTED_AUTOCAST`).

Taught in ``02_autocast_and_levels.ipynb`` (section 2, "the op table, probed live").

>>> [r.observed for r in probe_autocast_ops("cpu", "bf16", ops=["matmul", "relu"])]
['lower', 'unlisted']
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ampkit.device import check_autocast_dtype, pick_device
from ampkit.i18n import Word, mark, tr
from ampkit.precision.trace import dtype_cell, first_dtype

__all__ = ["OpProbe", "DOCUMENTED_AUTOCAST", "probe_autocast_ops"]

#: What the PyTorch AMP docs ("Autocast Op Reference") list for each probed op, per device type:
#: ``lower`` (runs in the low dtype), ``fp32`` (cast up to float32), ``promote`` (widest input type),
#: ``unlisted`` (not on any list: runs in whatever dtype it receives).
DOCUMENTED_AUTOCAST: dict[str, dict[str, str]] = {
    "cpu": {
        **dict.fromkeys(["linear", "matmul", "mm", "bmm", "addmm", "conv2d", "prelu",
                         "scaled_dot_product_attention"], "lower"),
        **dict.fromkeys(["prod", "mse_loss", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits",
                         "l1_loss"], "fp32"),
        **dict.fromkeys(["cat", "stack", "index_copy"], "promote"),
        **dict.fromkeys(["softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "exp", "log", "pow",
                         "sum", "mean", "cumsum", "relu", "gelu", "add", "mul", "addcmul", "dot", "atan2"],
                        "unlisted"),
    },
    "cuda": {
        **dict.fromkeys(["linear", "matmul", "mm", "bmm", "addmm", "conv2d", "prelu",
                         "scaled_dot_product_attention"], "lower"),
        **dict.fromkeys(["softmax", "log_softmax", "layer_norm", "group_norm", "exp", "log", "pow", "sum", "prod",
                         "cumsum", "mse_loss", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits",
                         "l1_loss"], "fp32"),
        **dict.fromkeys(["addcmul", "dot", "atan2"], "promote"),
        **dict.fromkeys(["batch_norm", "mean", "relu", "gelu", "add", "mul", "cat", "stack", "index_copy"],
                        "unlisted"),
    },
}
# the classes as Words (equal to their English; formatted in the kit's language: a page prints them)
DOCUMENTED_AUTOCAST = {dev: {op: Word(c) for op, c in ops.items()} for dev, ops in DOCUMENTED_AUTOCAST.items()}

#: the classes' words, marked for the catalog: a row's ``observed``/``documented`` is a :class:`~ampkit.i18n.Word`
_CLASS_WORDS = (mark("lower"), mark("promote"), mark("unlisted"))


def _probe_ops() -> dict[str, tuple[Callable, int]]:
    """op name → (function of (a, b), how many float inputs it takes)."""
    tgt = torch.arange(8)
    return {
        "linear": (lambda a, b: F.linear(a, b), 2),
        "matmul": (lambda a, b: a @ b, 2),
        "mm": (torch.mm, 2),
        "bmm": (lambda a, b: torch.bmm(a[None], b[None]), 2),
        "addmm": (lambda a, b: torch.addmm(a, a, b), 2),
        "conv2d": (lambda a, b: F.conv2d(a[None, None], b[None, None, :3, :3]), 2),
        "prelu": (lambda a, b: F.prelu(a, b[0, :1]), 2),
        "scaled_dot_product_attention": (lambda a, b: F.scaled_dot_product_attention(a[None], b[None], b[None]), 2),
        "softmax": (lambda a, b: torch.softmax(a, -1), 1),
        "log_softmax": (lambda a, b: torch.log_softmax(a, -1), 1),
        "layer_norm": (lambda a, b: F.layer_norm(a, (a.shape[-1],)), 1),
        "group_norm": (lambda a, b: F.group_norm(a[None], 2), 1),
        "batch_norm": (lambda a, b: F.batch_norm(a, None, None, training=True), 1),
        "exp": (lambda a, b: torch.exp(a), 1),
        "log": (lambda a, b: torch.log(a.abs() + 1), 1),
        "pow": (lambda a, b: torch.pow(a, 2), 1),
        "sum": (lambda a, b: a.sum(), 1),
        "mean": (lambda a, b: a.mean(), 1),
        "prod": (lambda a, b: a.prod(), 1),
        "cumsum": (lambda a, b: a.cumsum(0), 1),
        "relu": (lambda a, b: torch.relu(a), 1),
        "gelu": (lambda a, b: F.gelu(a), 1),
        "mse_loss": (F.mse_loss, 2),
        "l1_loss": (F.l1_loss, 2),
        "cross_entropy": (lambda a, b: F.cross_entropy(a, tgt.to(a.device)), 1),
        "nll_loss": (lambda a, b: F.nll_loss(a, tgt.to(a.device)), 1),
        "binary_cross_entropy_with_logits": (lambda a, b: F.binary_cross_entropy_with_logits(a, torch.sigmoid(b)),
                                             2),
        "add": (lambda a, b: a + b, 2),
        "mul": (lambda a, b: a * b, 2),
        "cat": (lambda a, b: torch.cat([a, b]), 2),
        "stack": (lambda a, b: torch.stack([a, b]), 2),
        "index_copy": (lambda a, b: a.index_copy(0, tgt.to(a.device), b), 2),
        "addcmul": (lambda a, b: torch.addcmul(a, a, b), 2),
        "dot": (lambda a, b: torch.dot(a[0], b[0]), 2),
        "atan2": (torch.atan2, 2),
    }


@dataclass(frozen=True)
class OpProbe:
    """How autocast treated one op, found by running it: output dtypes for fp32, low and mixed inputs."""

    op: str
    observed: str
    documented: str
    agrees: bool
    out_fp32_in: torch.dtype | None
    out_low_in: torch.dtype | None
    out_mixed_in: torch.dtype | None
    note: str = ""

    def as_row(self) -> dict[str, str]:
        """Strings for a table."""
        return {"op": self.op, "fp32 in →": dtype_cell(self.out_fp32_in), "low in →": dtype_cell(self.out_low_in),
                "mixed in →": dtype_cell(self.out_mixed_in), "observed": self.observed,
                "documented": self.documented, "agrees": tr("yes") if self.agrees else tr("NO"), "note": self.note}


def _out_dtype(fn: Callable, a, b, autocast: tuple[str, torch.dtype] | None) -> torch.dtype | None:
    ctx = torch.autocast(autocast[0], dtype=autocast[1]) if autocast else contextlib.nullcontext()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with ctx:
                return first_dtype(fn(a, b))
    except (RuntimeError, TypeError, ValueError):
        return None


def _classify(low: torch.dtype, n_float: int, o32, olow, omix, eager_mix) -> str:
    """The probe's rules: fp32 in → low out: ``lower``; low in → fp32 out: ``fp32``; mixed in → fp32 out where
    plain PyTorch errors or differs: ``promote``; otherwise ``unlisted``."""
    if o32 == low:
        return "lower"
    if olow == torch.float32:
        return "fp32"
    if n_float == 2 and omix == torch.float32 and eager_mix != torch.float32:
        return "promote"
    return "unlisted"


def probe_autocast_ops(device: str | torch.device | None = None, dtype: str | torch.dtype = "bf16",
                       ops: list[str] | None = None) -> list[OpProbe]:
    """Discover, by running each op under ``torch.autocast(device, dtype)``, whether autocast lowers it, casts it
    to fp32, promotes it to the widest input, or leaves it alone; compare with :data:`DOCUMENTED_AUTOCAST`.

    Each op runs on 8x8 inputs that are all fp32, all low, and mixed (low, fp32). Rules: fp32 in → low out:
    ``lower``; low in → fp32 out: ``fp32``; mixed in → fp32 out where plain PyTorch (no autocast) errors or
    differs: ``promote``; otherwise ``unlisted``. A documented ``promote`` op observed as ``unlisted`` agrees when
    mixed inputs already give fp32 by ordinary type promotion.

    >>> rows = probe_autocast_ops("cpu", "bf16", ops=["linear", "mse_loss"])
    >>> [(r.op, r.observed) for r in rows]
    [('linear', 'lower'), ('mse_loss', 'fp32')]
    """
    dev = pick_device(device)
    low = check_autocast_dtype(dtype, dev)
    table = _probe_ops()
    if ops is None:
        ops = list(table)
    unknown = [o for o in ops if o not in table]
    if unknown:
        raise ValueError(tr("unknown op(s) {unknown}; probe-able ops: {ops}", unknown=unknown, ops=", ".join(table)))
    documented = DOCUMENTED_AUTOCAST.get(dev.type, {})
    g = torch.Generator().manual_seed(0)
    a32 = torch.randn(8, 8, generator=g).to(dev)
    b32 = torch.randn(8, 8, generator=g).to(dev)
    ac = (dev.type, low)
    rows = []
    for op in ops:
        fn, n_float = table[op]
        o32 = _out_dtype(fn, a32, b32, ac)
        olow = _out_dtype(fn, a32.to(low), b32.to(low), ac)
        omix = _out_dtype(fn, a32.to(low), b32, ac) if n_float == 2 else None
        eager_mix = _out_dtype(fn, a32.to(low), b32, None) if n_float == 2 else None
        observed = _classify(low, n_float, o32, olow, omix, eager_mix)
        doc = documented.get(op, "?")
        agrees = doc == observed
        note = ""
        if not agrees and doc == "promote" and observed == "unlisted" and omix == torch.float32:
            agrees = True
            note = tr("ordinary type promotion already gives the widest type")
        elif observed == "promote":
            note = "without autocast, mixed inputs fail"
        elif observed == "unlisted" and olow == low:
            note = tr("stays in the low dtype when fed low-precision input")
        # the classes are Words: shown in the kit's language, equal to their English
        rows.append(OpProbe(op, Word(observed), Word(doc), agrees, o32, olow, omix, note))
    return rows
