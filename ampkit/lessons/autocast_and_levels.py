"""Notebook 02's experiment: one model trained at each precision level, measured and cached for the picker.

Taught in notebook ``02_autocast_and_levels.ipynb`` (the O-level picker and the levels side by side).
:func:`run_level` builds a seeded model, trains it with :func:`ampkit.train.train` at a level/dtype and measures
memory, step time and the per-layer dtype trace (:class:`LevelRun`); :class:`LevelRunCache` keeps the runs by
(model, level, dtype) so that toggling back is instant. :class:`ampkit.widgets.precision.OLevelPicker` draws them.
A lesson, above the engine (:mod:`ampkit.train`, :mod:`ampkit.precision`): the engine does not know it.

>>> run_level("mlp", "O1", "bf16", steps=2).label
'O1 bf16'
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ampkit._util import check_int
from ampkit.data import make_data
from ampkit.formats import format_name
from ampkit.i18n import tr
from ampkit.models import MODEL_NAMES, build_model
from ampkit.precision import (
    LayerTrace,
    MemoryReport,
    apply_level,
    level_label,
    memory_report,
    resolve_level,
    trace_dtypes,
)
from ampkit.train import History, make_optimizer, train

__all__ = ["LevelRun", "run_level", "LevelRunCache", "CLASSIFIERS"]

#: The models whose output is one class score vector per sample (what this lab's cross-entropy trains).
CLASSIFIERS: tuple[str, ...] = tuple(name for name in MODEL_NAMES if name != "decoder")


@dataclass(frozen=True)
class LevelRun:
    """Everything the O-level picker shows for one (model, level, dtype): history (vs O0 elsewhere), memory
    after training, per-layer dtype trace, median step time (s)."""

    model: str
    level: str
    dtype: str
    history: History
    memory: MemoryReport
    trace: list[LayerTrace]
    step_time: float

    @property
    def label(self) -> str:
        """What ran: ``"O0"`` (fp32) or e.g. ``"O2 bf16"``."""
        return level_label(self.level, self.dtype)


def run_level(model: str, level: str, dtype: str | torch.dtype = "bf16", steps: int = 60, seed: int = 0,
              batch_size: int = 64, lr: float = 0.05, optimizer: str = "sgd", scaler_factory: Callable | None = None,
              model_kw: dict | None = None, data_kw: dict | None = None, n_samples: int | None = None,
              progress: bool = False,
              callback: Callable | None = None, num_threads: int | None = None) -> LevelRun:
    """Build model ``model`` (a :func:`~ampkit.models.build_model` name, seeded), train it on its synthetic data
    at ``level``/``dtype``, and measure memory (from the tensors), step time and the dtype trace.
    ``model_kw`` goes to the model's constructor, ``data_kw`` to its data set (:func:`~ampkit.data.make_data`).

    ``scaler_factory()`` makes a fresh scaler for the run (e.g. ``lambda: torch.amp.GradScaler("cpu")``).
    ``num_threads`` sets torch's CPU threads for the run only (restored after): the kit's tiny models are
    overhead-bound, and on a busy CPU one thread is faster and steadier than several waiting on each other.

    >>> r = run_level("mlp", "O2", "bf16", steps=3)
    >>> r.memory.masters == r.memory.weights * 2
    True
    """
    if num_threads is not None:
        num_threads = check_int("num_threads (or None)", num_threads)
    if model not in CLASSIFIERS:   # the decoder predicts a token per position: its loss is models.lm_loss
        raise ValueError(tr("run_level trains the classifier models {models}; got {model!r} "
                            "(the 'decoder' language model is taught in notebook 07 with ampkit.models.lm_loss)",
                            models=", ".join(CLASSIFIERS), model=model))
    net = build_model(model, seed=seed, **(model_kw or {}))
    X, y = make_data(model, n_samples, seed=seed, **(data_kw or {}))
    mp = apply_level(net, make_optimizer(optimizer, net.parameters(), lr), level, dtype)
    scaler = scaler_factory() if scaler_factory is not None else None
    before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        hist = train(mp, (X, y), steps=steps, batch_size=batch_size, seed=seed, scaler=scaler, progress=progress,
                     callback=callback)
    finally:
        torch.set_num_threads(before)
    trace = trace_dtypes(mp, X[:2])
    return LevelRun(model=model, level=mp.level, dtype=format_name(mp.dtype), history=hist,
                    memory=memory_report(mp), trace=trace, step_time=hist.step_time())


class LevelRunCache:
    """Results of :func:`run_level` kept by (model, level, dtype) so that toggling back is instant.

    The other settings (steps, lr, ...) are fixed per cache (given once, here).

    >>> cache = LevelRunCache(steps=2)
    >>> cache.has("mlp", "O1", "bf16"), cache.get("mlp", "O1", "bf16").level, cache.has("mlp", "o1", "bfloat16")
    (False, 'O1', True)
    """

    def __init__(self, **run_kw):
        self.run_kw = run_kw
        self._store: dict[tuple[str, str, str], LevelRun] = {}

    @staticmethod
    def key(model: str, level: str, dtype: str | torch.dtype) -> tuple[str, str, str]:
        """The cache key: ``(model, "O1", "bfloat16")`` for any spelling of the level and dtype."""
        return (model, resolve_level(level), format_name(dtype))

    def has(self, model: str, level: str, dtype: str | torch.dtype) -> bool:
        return self.key(model, level, dtype) in self._store

    def get(self, model: str, level: str, dtype: str | torch.dtype, callback: Callable | None = None) -> LevelRun:
        """The cached run, computed now (``callback(step, history)`` sees its progress) if missing."""
        k = self.key(model, level, dtype)
        if k not in self._store:
            self._store[k] = run_level(model, k[1], k[2], callback=callback, **self.run_kw)
        return self._store[k]

    def __len__(self) -> int:
        return len(self._store)
