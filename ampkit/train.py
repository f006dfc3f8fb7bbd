"""The training loop every notebook shares: any precision level, any loss scaler, per-step history.

Introduced in ``02_autocast_and_levels.ipynb`` (levels side by side); reused by 03 (loss scaling) and
04 (data sinking). :func:`train_step` is the kit's one training step (no host sync, so a sunk loop can call it
many times); :func:`train` wraps it with batching, timing, skip detection, an optional progress bar and a
per-step ``callback`` (the live loss plot, :class:`ampkit.widgets.loss_plot.LiveLossPlot`, is one).

A *scaler* is any object with torch.amp.GradScaler's calls (``scale``, ``unscale_``, ``step``, ``update``,
``get_scale``): ``torch.amp.GradScaler("cpu")`` or ampkit's scalers (both satisfy :class:`ampkit.scaling.Scaler`).

>>> from ampkit.models import build_model; from ampkit.data import make_blobs
>>> hist = train(build_model("mlp"), make_blobs(256), level="O1", dtype="bf16", steps=5)
>>> len(hist.losses), hist.level
(5, 'O1')
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ampkit._util import check_int, check_positive_finite
from ampkit.data import batches
from ampkit.formats import format_name
from ampkit.i18n import tr
from ampkit.precision import (
    MixedPrecision,
    apply_level,
    level_label,
)
from ampkit.protocols import Scaler

__all__ = ["train_step", "History", "train", "evaluate", "make_optimizer", "OPTIMIZERS", "Progress"]

#: Optimizer names accepted by :func:`make_optimizer` / :func:`train`.
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adamw")


def train_step(mp: MixedPrecision | nn.Module, x: Any, y: Any, loss_fn: Callable,
               scaler: Scaler | torch.amp.GradScaler | None = None, *, optimizer: torch.optim.Optimizer | None = None,
               forward_loss: Callable | None = None,
               after_backward: Callable[[MixedPrecision], Any] | None = None) -> torch.Tensor:
    """The kit's one training step. ``scaler``: a :class:`ampkit.scaling.Scaler` (or ``None``). In order::

        mp.zero_grad()
        loss = loss_fn(mp.forward(x), y)     # or forward_loss(x, y): forward + loss as one (e.g. compiled) function
        mp.backward(loss, scaler)            # scaler.scale(loss).backward(); under O2 also the fp32 master grads
        after_backward(mp)                   # optional: read or clip the grads (scaler.unscale_(mp.optimizer) first)
        mp.step(scaler)                      # scaler.step(optimizer) + scaler.update(), or optimizer.step()
        return loss.detach()                 # fp32, still on the device

    ``mp`` is the :class:`~ampkit.precision.MixedPrecision` from :func:`~ampkit.precision.apply_level`, or a plain
    ``nn.Module`` together with ``optimizer=`` (then a plain fp32 step of the model as it is, through
    :meth:`MixedPrecision.plain <ampkit.precision.MixedPrecision.plain>`; keep a MixedPrecision instead to ask
    ``last_step_skipped()`` afterwards). Nothing here calls ``.item()``, so nothing waits for the device (the
    scaler's own ``step`` may: torch's GradScaler reads ``found_inf`` unless the optimizer is fused).

    >>> import torch; from ampkit.models import build_model; from ampkit.precision import apply_level
    >>> m = build_model("mlp"); mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O0")
    >>> train_step(mp, torch.zeros(4, 16), torch.zeros(4, dtype=torch.long), F.cross_entropy).dtype
    torch.float32
    >>> lin = torch.nn.Linear(16, 4)
    >>> train_step(lin, torch.zeros(4, 16), torch.zeros(4, dtype=torch.long), F.cross_entropy,
    ...            optimizer=torch.optim.SGD(lin.parameters(), lr=0.1)).shape
    torch.Size([])
    """
    if not isinstance(mp, MixedPrecision):
        if not isinstance(mp, nn.Module):
            raise TypeError(tr("train_step takes a MixedPrecision (from apply_level) or an nn.Module with optimizer=; "
                               "got {type}", type=type(mp).__name__))
        if optimizer is None:
            raise TypeError(tr("a plain nn.Module needs its optimizer: train_step(model, x, y, loss_fn, "
                               "optimizer=torch.optim.SGD(model.parameters(), lr=0.1))"))
        mp = MixedPrecision.plain(mp, optimizer)
    elif optimizer is not None and optimizer is not mp.optimizer:
        raise ValueError(tr("optimizer= is for a plain nn.Module; a MixedPrecision steps its own mp.optimizer"))
    mp.zero_grad()
    loss = forward_loss(x, y) if forward_loss is not None else loss_fn(mp.forward(x), y)
    mp.backward(loss, scaler)
    if after_backward is not None:
        after_backward(mp)
    mp.step(scaler)
    return loss.detach()


@dataclass
class History:
    """Per-step records of one training run: loss (float), wall time (s), loss scale used (``None`` without a
    scaler) and whether the scaler skipped the step."""

    level: str
    dtype: str
    losses: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    scales: list[float | None] = field(default_factory=list)
    skipped: list[bool] = field(default_factory=list)
    accuracy: float | None = None

    @property
    def steps(self) -> int:
        return len(self.losses)

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped)

    def final_loss(self, last: int = 10) -> float:
        """Mean loss over the last ``last`` steps (NaN if any is non-finite)."""
        tail = self.losses[-last:]
        return float("nan") if not tail else sum(tail) / len(tail)

    def step_time(self) -> float:
        """Median step time in seconds, the first (warm-up) step left out when there are more."""
        t = self.times[1:] if len(self.times) > 1 else self.times
        return statistics.median(t) if t else float("nan")

    @property
    def diverged(self) -> bool:
        """True when a loss became inf/NaN."""
        return any(not math.isfinite(v) for v in self.losses)


def make_optimizer(name: str | Callable, params, lr: float) -> torch.optim.Optimizer:
    """``"sgd"`` (momentum 0.9), ``"adam"``, ``"adamw"``, or a callable ``params -> Optimizer``.

    >>> type(make_optimizer("adam", [torch.nn.Parameter(torch.zeros(2))], 1e-3)).__name__
    'Adam'
    """
    if callable(name):
        opt = name(params)
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"optimizer factory must return a torch.optim.Optimizer; got {type(opt).__name__}")
        return opt
    lr = check_positive_finite("lr", lr, example="0.05")
    key = name.strip().lower() if isinstance(name, str) else name
    if key == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if key == "adam":
        return torch.optim.Adam(params, lr=lr)
    if key == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    raise ValueError(tr("optimizer must be one of {choices} or a callable; got {name!r}",
                        choices=", ".join(OPTIMIZERS), name=name))


class Progress:
    """:func:`train`'s progress bar: tqdm's meter line (``O2 fp16: 100%|██████████| 30/30 [00:00<00:00, …]``).

    In a Jupyter kernel the line is one plain-text output redrawn in place through an IPython display handle (at
    most every ``mininterval`` seconds, and always when the run ends), so a notebook saved after the run stores
    the *finished* line: tqdm's notebook widget would store its first state ("0/30") as the text a reader without
    a kernel sees. Elsewhere (a terminal, a script) it is tqdm's own bar on stderr, cleared when done.

    >>> bar = Progress(3, "O1 bf16", notebook=False, file=None)
    >>> for loss in (0.9, 0.5, 0.2):
    ...     bar.update(f"loss={loss}")
    >>> bar.close(); bar.n, bar.line().split("|")[2].split("[")[0].strip()
    (3, '3/3')
    """

    def __init__(self, total: int, desc: str = "", notebook: bool | None = None, mininterval: float = 0.1,
                 file: Any = "stderr"):
        self.total, self.desc, self.n, self.postfix = check_int("total", total), desc, 0, ""
        self.mininterval = mininterval
        self._t0 = self._shown = time.perf_counter()
        if notebook is None:   # deferred: IPython is needed only when a bar is asked for
            from IPython import get_ipython

            shell = get_ipython()
            notebook = shell is not None and shell.__class__.__name__ != "TerminalInteractiveShell"
        self._handle = self._tqdm = None
        if notebook:
            from IPython.display import display

            self._handle = display({"text/plain": self.line()}, raw=True, display_id=True)
        elif file is not None:
            import sys

            from tqdm import tqdm

            self._tqdm = tqdm(total=self.total, desc=desc, leave=False, unit="step",
                              file=sys.stderr if file == "stderr" else file)

    def line(self) -> str:
        """The meter as it stands: description, bar, count, elapsed<remaining, rate and the postfix."""
        from tqdm import tqdm

        return tqdm.format_meter(self.n, self.total, time.perf_counter() - self._t0, prefix=f"{self.desc}: ",
                                 unit="step", postfix=self.postfix or None)

    def update(self, postfix: str = "") -> None:
        """One more step done; ``postfix`` (e.g. ``"loss=0.239"``) follows the rate."""
        self.n, self.postfix = self.n + 1, postfix
        if self._tqdm is not None:
            self._tqdm.update(1)
            self._tqdm.set_postfix_str(postfix, refresh=False)
        elif self._handle is not None and time.perf_counter() - self._shown >= self.mininterval:
            self._shown = time.perf_counter()
            self._handle.update({"text/plain": self.line()}, raw=True)

    def close(self) -> None:
        """Draw the final state (in a notebook, the line that stays behind) or clear tqdm's bar."""
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._handle is not None:
            self._handle.update({"text/plain": self.line()}, raw=True)


def _batch_source(data, batch_size: int, seed: int):
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
        return batches(data[0], data[1], batch_size, seed=seed, epochs=None)
    if isinstance(data, Iterable):
        return iter(data)
    raise TypeError("data must be an (X, y) tuple of tensors or an iterable of (x, y) batches")


def train(model: nn.Module | MixedPrecision, data, level: str = "O0", dtype: str | torch.dtype = "bf16",
          scaler: Scaler | None = None, steps: int = 100, batch_size: int = 64, lr: float = 0.05,
          optimizer: str | Callable = "sgd", loss_fn: Callable = F.cross_entropy, seed: int = 0,
          progress: bool = False, callback: Callable | None = None,
          eval_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> History:
    """Train ``model`` for ``steps`` steps at ``level``/``dtype`` and return its :class:`History`.

    ``model``: a fresh fp32 model (the level is applied to it, in place, with a new ``optimizer``) or a
    :class:`MixedPrecision` from :func:`~ampkit.precision.apply_level` (its level and optimizer are used).
    ``data``: ``(X, y)`` tensors (shuffled mini-batches of ``batch_size``, seeded by ``seed``, cycled) or any
    iterable of ``(x, y)`` batches (training stops early if it runs out). ``scaler``: Scaler protocol:
    ampkit.scaling.Scaler (or ``None``). ``progress`` shows a progress bar (:class:`Progress`); ``eval_data`` gives
    ``History.accuracy`` (argmax accuracy) at the end.

    ``callback(step, history)`` runs after each step (``history`` holds that step already); if the callback also
    has an ``on_train_end(history)`` method, it is called once after the last step. A live loss plot is such a
    callback: ``train(..., callback=ampkit.widgets.loss_plot.LiveLossPlot(every=15))``.

    >>> from ampkit.models import build_model; from ampkit.data import make_blobs
    >>> train(build_model("mlp"), make_blobs(256), steps=3).steps
    3
    """
    steps = check_int("steps", steps)
    if isinstance(model, MixedPrecision):
        mp = model
    elif isinstance(model, nn.Module):
        mp = apply_level(model, make_optimizer(optimizer, model.parameters(), lr), level, dtype)
    else:
        raise TypeError(f"model must be an nn.Module or a MixedPrecision; got {type(model).__name__}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable as callback(step, history); got {type(callback).__name__}")
    hist = History(level=mp.level, dtype=format_name(mp.dtype))
    source = _batch_source(data, batch_size, seed)
    bar = Progress(steps, level_label(mp.level, mp.dtype)) if progress else None
    mp.model.train()
    for step in range(steps):
        try:
            x, y = next(source)
        except StopIteration:
            break
        x, y = x.to(mp.device), y.to(mp.device)
        scale = float(scaler.get_scale()) if scaler is not None else None
        t0 = time.perf_counter()
        loss = train_step(mp, x, y, loss_fn, scaler)
        value = loss.item()  # waits for the device: the step is done
        hist.times.append(time.perf_counter() - t0)
        hist.losses.append(value)
        hist.scales.append(scale)
        hist.skipped.append(mp.last_step_skipped() if scaler is not None else False)
        if bar is not None:
            bar.update(f"loss={value:.4g}")
        if callback is not None:
            callback(step, hist)
    if bar is not None:
        bar.close()
    if callback is not None and hasattr(callback, "on_train_end"):
        callback.on_train_end(hist)
    if eval_data is not None:
        hist.accuracy = evaluate(mp, *eval_data)
    return hist


def evaluate(mp: MixedPrecision, X: torch.Tensor, y: torch.Tensor) -> float:
    """Argmax accuracy of ``mp``'s model on ``(X, y)`` under its level (eval mode, no grad).

    >>> from ampkit.precision import apply_level
    >>> model = nn.Linear(2, 2); _ = model.weight.data.copy_(torch.eye(2)); _ = model.bias.data.zero_()  # argmax(x)
    >>> mp = apply_level(model, torch.optim.SGD(model.parameters(), lr=0.1), "O1", "bf16")
    >>> evaluate(mp, torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.2, 0.1]]), torch.tensor([0, 1, 1, 0]))
    0.75
    >>> model.training                                     # eval mode only while it measures
    True
    """
    was_training = mp.model.training
    mp.model.eval()
    try:
        with torch.no_grad():
            out = mp.forward(X.to(mp.device))
    finally:
        mp.model.train(was_training)
    return float((out.argmax(-1).cpu() == y).float().mean())
