"""The data sink: a background worker moves the next batches to the device ahead of use (notebook
``04_data_sinking``).

:class:`DevicePrefetcher` iterates a loader in a worker thread and hands the training loop batches that already sit on
the device (pinned memory + ``non_blocking`` copies on a side stream on CUDA; a bounded queue everywhere), so data
preparation overlaps compute. :func:`check_batch` and :func:`check_same_device` turn the two usual mistakes (a batch
that is not tensors, a model and a batch on different devices) into clear errors.

>>> with DevicePrefetcher([torch.zeros(2), torch.ones(2)], device="cpu", depth=1) as sink:
...     [b.sum().item() for b in sink]
[0.0, 2.0]
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from ampkit._util import check_int, first_tensor, iter_tensors, map_tensors, walk
from ampkit.device import pick_device
from ampkit.i18n import mark, tr

__all__ = ["DevicePrefetcher", "check_batch", "batch_device", "same_device", "check_same_device"]

_VALID_BATCH = mark("a torch.Tensor, or a tuple/list/dict of tensors")


def check_batch(batch: Any, index: int = 0) -> None:
    """Raise a ``TypeError`` naming the bad item's type unless ``batch`` is a tensor or a tuple/list/dict of them.

    >>> check_batch((torch.zeros(1), [torch.ones(1)]))
    >>> check_batch([torch.zeros(1), 3.0], index=7)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: batch 7 contains an item of type float at [1]; a data sink moves a torch.Tensor, or a tuple/list/dict ...
    """
    for where, leaf in walk(batch):
        if not isinstance(leaf, torch.Tensor):
            at = tr(" at {where}", where=where) if where else ""
            raise TypeError(tr("batch {index} contains an item of type {type}{at}; a data sink moves "
                               "{valid} (convert numbers and arrays with torch.as_tensor)", index=index,
                               type=type(leaf).__name__, at=at, valid=tr(_VALID_BATCH)))


def batch_device(batch: Any) -> torch.device | None:
    """The device of the first tensor in ``batch`` (``None`` when it holds none).

    >>> batch_device((torch.zeros(1), torch.ones(1)))
    device(type='cpu')
    """
    t = first_tensor(batch)
    return None if t is None else t.device


def same_device(a: torch.device, b: torch.device) -> bool:
    """Whether two devices are the same one (``cuda`` without an index matches any ``cuda:N``).

    >>> same_device(torch.device("cpu"), torch.device("cpu")), same_device(torch.device("cpu"), torch.device("meta"))
    (True, False)
    """
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_same_device(model: nn.Module, batch: Any) -> None:
    """Raise a ``ValueError`` when ``model``'s parameters and ``batch``'s tensors live on different devices.

    >>> check_same_device(nn.Linear(2, 2), torch.zeros(1, 2))
    """
    p = next(iter(model.parameters()), None)
    d = batch_device(batch)
    if p is None or d is None or same_device(p.device, d):
        return
    raise ValueError(tr("the model is on {model} but the batch is on {batch}; move the model with model.to(...) or "
                        "let the data sink move the data: DevicePrefetcher(loader, device='{model}')",
                        model=p.device, batch=d))


_ITEM, _END, _ERR = "item", "end", "error"


class DevicePrefetcher:
    """Data sink: iterate ``loader`` in a background worker that moves the next ``depth`` batches to ``device``.

    - Every batch is delivered exactly once, in order (one worker, a FIFO queue of at most ``depth`` batches).
    - On CUDA the worker pins host memory, copies with ``non_blocking=True`` on a side stream and records an event;
      the training loop's stream waits for that event (no host sync) and the tensors are marked as used there.
    - An exception in the loader (or a batch that is not tensors) is raised in the training loop at the batch
      where it happened, with a note saying so; the worker is stopped, never left hanging.
    - :meth:`close` (or leaving a ``with`` block, or finishing the iteration) stops and joins the worker.
    - ``wait_seconds`` counts how long the training loop waited for data: near 0 means the sink keeps up.

    Each ``iter()`` starts a fresh pass over ``loader`` (stopping any pass still running).

    >>> sink = DevicePrefetcher(range(3), device="cpu")
    >>> next(iter(sink))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: batch 0 contains an item of type int; a data sink moves a torch.Tensor, or a tuple/list/dict of ...
    """

    THREAD_NAME = "ampkit-data-sink"

    def __init__(self, loader: Iterable, device: str | torch.device | None = None, depth: int = 2, *,
                 pin_memory: bool | None = None, non_blocking: bool = True):
        depth = check_int("depth (how many batches the data sink prepares ahead)", depth)
        if not isinstance(loader, Iterable):
            raise TypeError(tr("loader must be an iterable of batches ({valid}); got {type}", valid=tr(_VALID_BATCH),
                               type=type(loader).__name__))
        self.device = pick_device(device)     # None: the best available; ValueError naming the valid ones
        if self.device.type == "cuda" and self.device.index is None:   # the worker thread needs a concrete index
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.loader = loader
        self.depth = depth
        self.cuda = self.device.type == "cuda"
        self.pin_memory = self.cuda if pin_memory is None else bool(pin_memory and self.cuda)
        self.non_blocking = non_blocking
        self.delivered = 0
        self.wait_seconds = 0.0
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue | None = None
        self._stop: threading.Event | None = None

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    # -- worker side ------------------------------------------------------------------------------------------
    def _move(self, batch: Any, stream) -> tuple[Any, Any]:
        if not self.cuda:
            return map_tensors(batch, lambda t: t.to(self.device)), None

        def move(t: torch.Tensor) -> torch.Tensor:
            if self.pin_memory and t.device.type == "cpu" and not t.is_pinned():
                t = t.pin_memory()
            return t.to(self.device, non_blocking=self.non_blocking)

        with torch.cuda.stream(stream):
            moved = map_tensors(batch, move)
            event = torch.cuda.Event()
            event.record(stream)
        return moved, event

    @staticmethod
    def _put(q: queue.Queue, stop: threading.Event, item: tuple) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.02)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, q: queue.Queue, stop: threading.Event) -> None:
        it = None
        index = 0
        try:
            stream = None
            if self.cuda:
                torch.cuda.set_device(self.device)
                stream = torch.cuda.Stream(self.device)
            it = iter(self.loader)
            while not stop.is_set():
                try:
                    batch = next(it)
                except StopIteration:
                    break
                check_batch(batch, index)
                moved, event = self._move(batch, stream)
                if not self._put(q, stop, (_ITEM, moved, event)):
                    return
                index += 1
            self._put(q, stop, (_END, None, None))
        except BaseException as exc:  # handed to the training loop, raised there
            if hasattr(exc, "add_note"):
                exc.add_note(tr("(raised in the data sink's worker thread while loading batch {index})", index=index))
            self._put(q, stop, (_ERR, exc, None))
        finally:
            close = getattr(it, "close", None)
            if it is not None and it is not self.loader and callable(close):
                with contextlib.suppress(Exception):
                    close()

    # -- training-loop side -----------------------------------------------------------------------------------
    def __iter__(self) -> DevicePrefetcher:
        self.close()
        self._queue = queue.Queue(maxsize=self.depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(self._queue, self._stop),
                                        name=self.THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def __next__(self) -> Any:
        if self._thread is None:
            raise StopIteration
        assert self._queue is not None  # made with the thread
        t0 = time.perf_counter()
        while True:
            try:
                kind, value, event = self._queue.get(timeout=0.05)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.close()
                    raise RuntimeError("the data sink's worker stopped without a result") from None
        self.wait_seconds += time.perf_counter() - t0
        if kind == _END:
            self.close()
            raise StopIteration
        if kind == _ERR:
            self.close()
            raise value
        if event is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(event)
            for t in iter_tensors(value):
                if t.device.type == "cuda":
                    t.record_stream(current)
        self.delivered += 1
        return value

    @property
    def alive(self) -> bool:
        """Whether the worker thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker and wait for it (up to ``timeout`` s: a loader blocked inside ``next()`` cannot be
        interrupted; the thread is a daemon and exits after that batch)."""
        if self._thread is None:
            return
        assert self._stop is not None and self._queue is not None  # made with the thread
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                warnings.warn(tr("the data sink's worker is still inside the loader after {timeout} s; it will stop "
                                 "after its current batch", timeout=timeout), RuntimeWarning, stacklevel=2)
        self._thread = None

    def __enter__(self) -> DevicePrefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close(timeout=0.5)
