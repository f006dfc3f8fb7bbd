"""The legacy ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings: what each warns, and whether it ends up enabled.

Taught in notebook ``03_loss_scaling.ipynb`` (section 6, the real loop in plain PyTorch): tutorials still write
``torch.cuda.amp.autocast()`` and ``torch.cuda.amp.GradScaler()``; on this torch they warn (deprecated in favour of
``torch.amp``), and without CUDA they disable themselves — a loop written with them runs in fp32, unscaled.
:func:`legacy_amp_spellings` builds each object (without entering it) and records what happened.

>>> [c.spelling for c in legacy_amp_spellings()][:2]
['torch.cuda.amp.autocast()', 'torch.cuda.amp.GradScaler()']
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ampkit.i18n import Word

__all__ = ["LegacyCall", "legacy_amp_spellings"]


@dataclass(frozen=True)
class LegacyCall:
    """One legacy spelling: what was called, the spelling to use instead (a Word: its "or" prints in the page's
    language), the deprecation warning it raised (category name and message, or None), any other warnings, and
    whether the object came out enabled."""

    spelling: str
    replacement: str
    category: str | None
    message: str | None
    other_warnings: tuple[str, ...]
    enabled: bool


_LEGACY = (
    ("torch.cuda.amp.autocast()",
     Word("{new}  (or {alias})", new="torch.amp.autocast('cuda')", alias="torch.autocast('cuda')"),
     lambda: torch.cuda.amp.autocast()),
    ("torch.cuda.amp.GradScaler()", "torch.amp.GradScaler('cuda')", lambda: torch.cuda.amp.GradScaler()),
    ("torch.cpu.amp.autocast()",
     Word("{new}  (or {alias})", new="torch.amp.autocast('cpu')", alias="torch.autocast('cpu')"),
     lambda: torch.cpu.amp.autocast()),
    ("torch.cpu.amp.GradScaler()", "torch.amp.GradScaler('cpu')", lambda: torch.cpu.amp.GradScaler()),
)


def legacy_amp_spellings() -> list[LegacyCall]:
    """Construct each legacy ``torch.{cuda,cpu}.amp`` object (without entering it) and record its warnings.

    Warning filters are restored afterwards; nothing global changes.

    >>> for call in legacy_amp_spellings():
    ...     print(f"{call.spelling:28} {call.category}: use {call.replacement}")
    torch.cuda.amp.autocast()    FutureWarning: use torch.amp.autocast('cuda')  (or torch.autocast('cuda'))
    torch.cuda.amp.GradScaler()  FutureWarning: use torch.amp.GradScaler('cuda')
    torch.cpu.amp.autocast()     FutureWarning: use torch.amp.autocast('cpu')  (or torch.autocast('cpu'))
    torch.cpu.amp.GradScaler()   FutureWarning: use torch.amp.GradScaler('cpu')
    """
    out = []
    for spelling, replacement, make in _LEGACY:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            obj = make()
        dep = [w for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
        rest = tuple(f"{w.category.__name__}: {w.message}" for w in caught if w not in dep)
        enabled = obj.is_enabled() if hasattr(obj, "is_enabled") else bool(getattr(obj, "_enabled", False))
        out.append(LegacyCall(spelling, replacement, dep[0].category.__name__ if dep else None,
                              str(dep[0].message) if dep else None, rest, bool(enabled)))
    return out
