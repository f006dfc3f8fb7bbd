"""The loop sink: ``sink_size`` steps run without reading anything back, then one sync (notebook
``04_data_sinking``).

:func:`loop_sink` follows MindSpore's ``Model.train(..., dataset_sink_mode=True, sink_size=N)``: losses stay on the
device until the end of a sink, then they are read back at once and each callback (e.g. :class:`LossMonitor`) is
called once with a :class:`SinkInfo`; the result is a :class:`SinkLog`. ``prefetch_depth > 0`` adds the data sink
(:class:`ampkit.sinking.prefetch.DevicePrefetcher`).

>>> log = loop_sink(lambda x: x.sum(), [torch.ones(2)] * 3, epochs=2, sink_size=2)
>>> log.steps, log.syncs, log.losses
(4, 2, [2.0, 2.0, 2.0, 2.0])
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ampkit._util import check_int, map_tensors
from ampkit.i18n import mark, tr
from ampkit.sinking.prefetch import DevicePrefetcher, same_device

__all__ = ["check_sink_size", "SinkInfo", "LossMonitor", "SinkLog", "loop_sink", "endless"]

_SINK_SIZE_RULE = mark("sink_size must be -1 (one full pass of the data per epoch), a positive integer (steps per "
                   "epoch, data iterated endlessly) or None (no loop sink)")


def check_sink_size(sink_size: int | None) -> int | None:
    """Validate ``sink_size``: ``None`` (no loop sink), ``-1`` (one full pass per epoch) or an integer > 0.

    >>> check_sink_size(-1), check_sink_size(4), check_sink_size(None)
    (-1, 4, None)
    """
    if sink_size is None:
        return None
    try:
        value = check_int("sink_size", sink_size, minimum=None)
    except TypeError:
        raise TypeError(tr("{rule}; got {type} {value!r}", rule=tr(_SINK_SIZE_RULE), type=type(sink_size).__name__,
                           value=sink_size)) from None
    if value == 0 or value < -1:
        raise ValueError(tr("{rule}; got {value!r}", rule=tr(_SINK_SIZE_RULE), value=sink_size))
    return value


@dataclass(frozen=True)
class SinkInfo:
    """What callbacks receive once per sink: ``epoch`` (1-based), ``step`` (steps done so far, like MindSpore's
    ``cur_step_num``), ``sink_steps`` (steps in this sink) and ``losses`` (this sink's losses, read back at once)."""

    epoch: int
    step: int
    sink_steps: int
    losses: tuple[float, ...]

    @property
    def loss(self) -> float:
        """The sink's last loss (what MindSpore's LossMonitor prints)."""
        return self.losses[-1]


class LossMonitor:
    """A callback recording ``(epoch, step, loss)`` once per sink; prints MindSpore-style lines when ``verbose``.

    >>> mon = LossMonitor(); mon(SinkInfo(1, 3, 3, (0.9, 0.8, 0.7))); mon.records
    [(1, 3, 0.7)]
    """

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.records: list[tuple[int, int, float]] = []

    def __call__(self, info: SinkInfo) -> None:
        self.records.append((info.epoch, info.step, info.loss))
        if self.verbose:
            print(f"epoch: {info.epoch} step: {info.step}, loss is {info.loss:.6f}")


@dataclass
class SinkLog:
    """Result of :func:`loop_sink`: every step's loss, counts of steps, syncs and callback calls, the sinks."""

    epochs: int
    sink_size: int | None
    losses: list[float] = field(default_factory=list)
    sinks: list[SinkInfo] = field(default_factory=list)
    syncs: int = 0
    callback_calls: int = 0
    seconds: float = 0.0
    data_wait_seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.losses)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")


def _call_step(step_fn: Callable, batch: Any) -> torch.Tensor:
    if isinstance(batch, (tuple, list)):
        loss = step_fn(*batch)
    elif isinstance(batch, dict):
        loss = step_fn(**batch)
    else:
        loss = step_fn(batch)
    if not isinstance(loss, torch.Tensor):
        raise TypeError(tr("the step must return the loss as a torch.Tensor (no .item() inside: loop sinking keeps "
                           "losses on the device); got {type}", type=type(loss).__name__))
    if loss.numel() != 1:
        raise ValueError(tr("the step must return a scalar loss; got shape {shape}", shape=tuple(loss.shape)))
    return loss.detach().reshape(())


def endless(data: Iterable) -> Generator[Any, None, None]:
    """Iterate ``data`` forever, pass after pass (a one-shot iterator is read until it runs out, then an error).

    >>> it = endless([1, 2]); [next(it) for _ in range(5)]
    [1, 2, 1, 2, 1]
    """
    total = 0
    while True:
        n = 0
        for batch in data:
            n += 1
            total += 1
            yield batch
        if n == 0:
            if total == 0:
                raise ValueError(tr("data yielded no batches"))
            raise ValueError(tr("data ran out after {total} batches: it is a one-shot iterator; sink_size > 0 iterates "
                                "the data endlessly, so pass a re-iterable (a list, a DataLoader, BatchLoader) or an "
                                "endless iterator (e.g. ampkit.data.batches(..., epochs=None))", total=total))


class _Run:
    """One :func:`loop_sink` call's state: the pending (unsynced) losses, the log, the callbacks, the data source."""

    def __init__(self, step_fn: Callable, log: SinkLog, callbacks: list, prefetch_depth: int,
                 device: str | torch.device | None, bar: Any):
        self.step_fn, self.log, self.callbacks, self.bar = step_fn, log, callbacks, bar
        self.prefetch_depth, self.device = prefetch_depth, device
        self.dev = torch.device(device) if device is not None else None
        self.pending: list[torch.Tensor] = []

    def step(self, batch: Any) -> None:
        dev = self.dev
        if dev is not None and not self.prefetch_depth:   # no data sink: the host copies each batch, blocking
            batch = map_tensors(batch, lambda t: t if same_device(t.device, dev) else t.to(dev))
        self.pending.append(_call_step(self.step_fn, batch))

    def flush(self, epoch: int) -> None:
        if not self.pending:
            return
        values = torch.stack(self.pending).float().tolist()   # the one host sync of this sink
        self.pending.clear()
        log = self.log
        log.syncs += 1
        log.losses.extend(values)
        info = SinkInfo(epoch, len(log.losses), len(values), tuple(values))
        log.sinks.append(info)
        for cb in self.callbacks:
            cb(info)
            log.callback_calls += 1
        if self.bar is not None:
            self.bar.update(len(values))

    @contextlib.contextmanager
    def source(self, stream: Iterable) -> Iterator[Iterable]:
        """``stream`` itself, or through a data sink (closed, and its waiting time logged, on the way out)."""
        if not self.prefetch_depth:
            yield stream
            return
        sink = DevicePrefetcher(stream, self.device, self.prefetch_depth)
        try:
            yield sink
        finally:
            self.log.data_wait_seconds += sink.wait_seconds
            sink.close()


def loop_sink(step_fn: Callable[..., torch.Tensor], data: Iterable, epochs: int = 1, sink_size: int | None = -1,
              callbacks: Sequence[Callable[[SinkInfo], Any]] = (), *, prefetch_depth: int = 0,
              device: str | torch.device | None = None, progress: bool = False) -> SinkLog:
    """Train with MindSpore's loop-sink semantics; ``step_fn(*batch)`` runs one step and returns the loss tensor.

    - ``sink_size > 0``: the data is iterated endlessly; each epoch runs ``sink_size`` steps (the next epoch
      continues where the last stopped), so ``epochs * sink_size`` steps run in total.
    - ``sink_size = -1``: each epoch is one full pass over ``data``.
    - ``sink_size = None``: no loop sink (MindSpore's ``dataset_sink_mode=False``): one pass per epoch, the loss
      read back and callbacks called after *every* step.

    With a loop sink, losses stay on the device until the end of the sink; then they are read back with one
    sync and each callback is called once with a :class:`SinkInfo`. ``prefetch_depth > 0`` adds the data sink
    (a :class:`DevicePrefetcher` moving batches to ``device``); without it, batches are copied to ``device`` (when
    given) by the training loop itself, blocking.

    >>> data = [(torch.tensor(float(i)),) for i in range(6)]           # six batches; the "loss" is 2 * x
    >>> sunk = loop_sink(lambda x: 2 * x, data, epochs=2, sink_size=3, callbacks=[print])
    SinkInfo(epoch=1, step=3, sink_steps=3, losses=(0.0, 2.0, 4.0))
    SinkInfo(epoch=2, step=6, sink_steps=3, losses=(6.0, 8.0, 10.0))
    >>> plain = loop_sink(lambda x: 2 * x, data, epochs=2, sink_size=None)      # no sink: a read-back per step
    >>> (sunk.syncs, len(sunk.losses)), (plain.syncs, len(plain.losses))
    ((2, 6), (12, 12))
    """
    sink_size = check_sink_size(sink_size)
    epochs = check_int("epochs", epochs)
    prefetch_depth = check_int("prefetch_depth (0: no data sink)", prefetch_depth, minimum=0)
    if not isinstance(data, Iterable):
        raise TypeError(f"data must be an iterable of batches; got {type(data).__name__}")
    callbacks = list(callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise TypeError(f"callbacks must be callables taking a SinkInfo; got {type(cb).__name__}")
    log = SinkLog(epochs, sink_size)
    bar = None
    if progress:
        from tqdm.auto import tqdm  # deferred: in a notebook tqdm.auto loads ipywidgets
        total = epochs * sink_size if sink_size and sink_size > 0 else (
            epochs * len(data) if hasattr(data, "__len__") else None)  # type: ignore[arg-type]
        bar = tqdm(total=total, desc="steps", leave=False)
    run = _Run(step_fn, log, callbacks, prefetch_depth, device, bar)
    t0 = time.perf_counter()
    try:
        if sink_size is not None and sink_size > 0:
            stream = endless(data)
            try:
                with run.source(stream) as source:
                    it = iter(source)
                    for epoch in range(1, epochs + 1):
                        for _ in range(sink_size):
                            run.step(next(it))
                        run.flush(epoch)
            finally:
                with contextlib.suppress(Exception):   # still running in a worker that did not stop in time
                    stream.close()
        else:
            for epoch in range(1, epochs + 1):
                n = 0
                with run.source(data) as source:
                    for batch in source:
                        n += 1
                        run.step(batch)
                        if sink_size is None:
                            run.flush(epoch)
                if n == 0:
                    one_shot = tr(" (data is a one-shot iterator that is used up; pass a re-iterable)") \
                        if isinstance(data, Iterator) else ""
                    raise ValueError(tr("epoch {epoch} got no batches{one_shot}", epoch=epoch, one_shot=one_shot))
                run.flush(epoch)
    finally:
        if bar is not None:
            bar.close()
    log.seconds = time.perf_counter() - t0
    return log
