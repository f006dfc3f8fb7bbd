"""The names of the O0–O3 precision levels and what they mean in PyTorch, Apex, MindSpore and Paddle.

Taught in ``02_autocast_and_levels.ipynb``. The levels are Apex's (now deprecated) and MindSpore's names, with
PyTorch machinery underneath (:func:`ampkit.precision.apply_level` does what each one says):

- **O0** fp32 everywhere (the reference).
- **O1** weights stay fp32; the forward pass runs under ``torch.autocast`` (op-level lists decide each op).
- **O2** model cast to the low dtype *except* normalisation layers (:data:`NORM_TYPES` stay fp32, their inputs
  cast up and outputs cast back, like Apex ``keep_batchnorm_fp32`` and MindSpore's black list); fp32 master
  weights are what the optimizer steps; outputs cast to fp32 for the loss.
- **O3** everything in the low dtype, norms included, no master weights (the "speed ceiling").

Level names: ``"O0"``…``"O3"`` (letter O, digit). Lower-case ``"o2"`` is accepted as the same level (it cannot be
mistaken for anything else); anything else — surrounding spaces (``"o1 "``), a zero (``"02"``), an int (``2``),
``"O4"`` — is a ``ValueError`` listing the valid levels.

>>> resolve_level("o2"), level_label("O2", "bfloat16")
('O2', 'O2 bf16')
"""
from __future__ import annotations

import torch
from torch import nn

from ampkit.device import speed_than
from ampkit.dtypes import short_name
from ampkit.formats import resolve_format
from ampkit.i18n import Word, mark, tr

__all__ = ["LEVELS", "LEVEL_MAP", "NORM_TYPES", "resolve_level", "level_map_rows", "level_label", "speed_phrase"]

#: The four levels, in order of how much runs in low precision.
LEVELS: tuple[str, ...] = ("O0", "O1", "O2", "O3")

#: Layers O2 keeps in fp32 (the normalisation layers: their statistics need fp32's precision).
NORM_TYPES: tuple[type[nn.Module], ...] = tuple(
    t for t in (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm,
                getattr(nn, "RMSNorm", None)) if t is not None)

#: What each level means in ampkit (PyTorch), NVIDIA Apex amp, MindSpore and PaddlePaddle, read from each
#: framework's source and docs (cited in docs/reference.md): Apex ``apex/amp/_initialize.py`` and ``frontend.py``;
#: MindSpore ``mindspore/train/amp.py`` (``auto_mixed_precision``, ``build_train_network``) and ``Cell.to_float``;
#: Paddle ``paddle.amp.auto_cast`` / ``paddle.amp.decorate``.
LEVEL_MAP: dict[str, dict[str, str]] = {
    "O0": {"ampkit (PyTorch)": mark("fp32 everywhere"),
           "Apex amp": mark("pure fp32, loss scale 1"),
           "MindSpore": mark("no change (fp32)"),
           "Paddle": mark("no auto_cast (fp32)")},
    "O1": {"ampkit (PyTorch)": mark("fp32 weights; forward under torch.autocast (op lists); output cast to fp32 "
                                    "for the loss"),
           "Apex amp": mark("patches torch functions with fp16 / fp32 / promote lists; fp32 weights; dynamic loss "
                            "scale"),
           "MindSpore": mark("white-list cells/ops (Conv, Dense, MatMul, ReLU...) compute in fp16, results cast "
                             "back to fp32"),
           "Paddle": mark("auto_cast(level='O1'): white-list ops in fp16/bf16, black-list ops in fp32, the rest "
                          "follow their inputs")},
    "O2": {"ampkit (PyTorch)": mark("model stored in the low dtype except norms; fp32 master weights; output cast "
                                    "to fp32"),
           "Apex amp": mark("model cast to fp16, BatchNorm kept fp32, fp32 master weights, output cast to fp32, "
                            "dynamic loss scale"),
           "MindSpore": mark("every cell except the black list (BatchNorm, LayerNorm) computes in fp16: its inputs "
                             "and parameters are cast when it runs, the stored parameters stay fp32; output cast to "
                             "fp32; build_train_network/Model add a DynamicLossScaleManager"),
           "Paddle": mark("auto_cast(level='O2') + paddle.amp.decorate: parameters cast to fp16/bf16 except norms, "
                          "fp32 master weights")},
    "O3": {"ampkit (PyTorch)": mark("everything stored in the low dtype, norms included; no master weights; output "
                                    "cast to fp32"),
           "Apex amp": mark("pure fp16 incl. BatchNorm, no master weights, output cast to fp32, loss scale 1 "
                            "('speed ceiling')"),
           "MindSpore": mark("every cell computes in fp16 (parameters cast when used); output cast to fp32; "
                             "no loss-scale manager"),
           "Paddle": mark("no O3 level (nearest: O2 without master weights)")},
}


def resolve_level(level: str) -> str:
    """Canonical level name: ``"O2"`` for ``"O2"`` or ``"o2"``; ``ValueError`` naming O0–O3 otherwise.

    >>> resolve_level("o1")
    'O1'
    """
    valid = ", ".join(LEVELS)
    if isinstance(level, str) and level.upper() in LEVELS:
        return level.upper()
    hint = ""
    if isinstance(level, str) and level.strip().upper() in LEVELS:
        hint = tr(" (no surrounding spaces)")
    elif isinstance(level, str) and level.strip() in ("00", "01", "02", "03"):
        hint = tr(" (the letter O, not the digit zero)")
    elif isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 3:
        hint = tr(" (a string such as 'O{level}', not the int {level})", level=level)
    raise ValueError(tr("level must be one of {valid} (lower-case o0-o3 also accepted); got {level!r}{hint}",
                        valid=valid, level=level, hint=hint))


def level_map_rows() -> list[dict[str, str]]:
    """:data:`LEVEL_MAP` as table rows (``{"level": "O0", "ampkit (PyTorch)": ..., "Apex amp": ..., ...}``).

    >>> [r["level"] for r in level_map_rows()]
    ['O0', 'O1', 'O2', 'O3']
    """
    # shown as a table: the cells in the kit's language; the level's key stays "level" (a Word)
    return [{Word("level"): lv, **{k: tr(v) for k, v in LEVEL_MAP[lv].items()}} for lv in LEVELS]


def level_label(level: str, dtype: str | torch.dtype | None = None) -> str:
    """How to name a run by what actually runs: ``"O0"`` (fp32: the low dtype is unused), else ``"O2 bf16"``.

    >>> level_label("O0", "bf16"), level_label("o2", torch.float16)
    ('O0', 'O2 fp16')
    """
    level = resolve_level(level)
    if level == "O0" or dtype is None:
        return level
    return f"{level} {short_name(resolve_format(dtype))}"


def speed_phrase(time_s: float, ref_s: float, ref: str = "O0") -> str:
    """A measured time next to a reference, in words: ``"2.2x faster than O0"`` or ``"1.8x slower than O0"``.

    Within 5% either way it says ``"about as fast as O0"``; otherwise the ratio is worded by
    :func:`ampkit.device.speed_than` (one decimal below 10x, whole numbers above). The ratio is an explanation of
    one measurement (noisy on a busy machine): show it, never branch on it.

    >>> speed_phrase(0.5, 1.1), speed_phrase(1.8, 1.0), speed_phrase(1.0, 1.02), speed_phrase(1.0, 0.02)
    ('2.2x faster than O0', '1.8x slower than O0', 'about as fast as O0', '50x slower than O0')
    """
    if not (isinstance(time_s, (int, float)) and isinstance(ref_s, (int, float))) or not (time_s > 0 and ref_s > 0):
        raise ValueError(tr("times must be positive numbers of seconds; got {a!r} and {b!r}", a=time_s, b=ref_s))
    ratio = ref_s / time_s
    if 1 / 1.05 < ratio < 1.05:
        return tr("about as fast as {ref}", ref=ref)
    return speed_than(ratio, ref)
