"""MindSpore's ``Model`` in PyTorch: one trainer with data sink, graph sink and loop sink (notebook
``04_data_sinking``).

:class:`SinkModel` holds a network, a loss, an optimizer, a precision level (:func:`ampkit.precision.apply_level`)
and a loss scaler, and trains with :func:`ampkit.sinking.loop.loop_sink` like
``Model.train(epochs, data, callbacks, dataset_sink_mode, sink_size)``.

Its step is :func:`ampkit.train.train_step`, the kit's one training step. With the graph sink on, the compiled graph
is the forward pass *and* the loss together, handed to ``train_step`` as its ``forward_loss`` (so the loss stays in
the graph), and the step runs inside the kit's compile cache (AOTAutograd compiles the backward graph at the first
backward).

>>> from ampkit.models import build_model
>>> from ampkit.sinking.workload import BatchLoader
>>> net = build_model("mlp"); opt = torch.optim.SGD(net.parameters(), lr=0.1)
>>> m = SinkModel(net, nn.functional.cross_entropy, opt)
>>> from ampkit.data import make_data; X, y = make_data("mlp", 64)
>>> m.train(2, BatchLoader(X, y, 16), sink_size=3).steps
6
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ampkit.i18n import tr
from ampkit.precision import apply_level
from ampkit.sinking.compile import compile_step
from ampkit.sinking.loop import SinkInfo, SinkLog, loop_sink
from ampkit.sinking.prefetch import check_same_device
from ampkit.train import train_step

if TYPE_CHECKING:  # typing only
    from ampkit.protocols import Scaler

__all__ = ["SinkModel"]


class SinkModel:
    """MindSpore's ``Model`` in PyTorch: a network, a loss, an optimizer, a precision level and a loss scaler,
    trained with any combination of data sink, graph sink and loop sink.

    ``level``/``dtype`` go to :func:`ampkit.precision.apply_level`; ``scaler`` is any object with
    ``torch.amp.GradScaler``'s calls (ampkit's scalers or torch's). ``graph_sink=True`` compiles the forward pass
    and loss once (:func:`ampkit.sinking.compile.compile_step`; AOTAutograd compiles the backward into a second
    graph), while the optimizer and scaler run as a few eager ops. The message of that compile is in
    ``graph_message``.

    The dynamic scaler's skip decision needs no host sync with ``torch.amp.GradScaler`` and an optimizer made with
    ``fused=True`` (the fused kernels read ``found_inf`` on the device); other scalers read it back every step.
    """

    def __init__(self, network: nn.Module, loss_fn: Callable, optimizer: torch.optim.Optimizer, *,
                 level: str = "O0", dtype: str | torch.dtype = "bf16", scaler: Scaler | None = None,
                 graph_sink: bool = False, compile_mode: str | None = "auto"):
        if not isinstance(network, nn.Module):
            raise TypeError(f"network must be a torch.nn.Module; got {type(network).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable (e.g. torch.nn.functional.cross_entropy); "
                            f"got {type(loss_fn).__name__}")
        self.mp = apply_level(network, optimizer, level, dtype)
        self.network = network
        self.loss_fn = loss_fn
        self.scaler = scaler
        p = next(iter(network.parameters()), None)
        self.device = p.device if p is not None else torch.device("cpu")
        self.graph_sink = bool(graph_sink)
        self.loss_graph = compile_step(self._forward_loss, device=self.device, mode=compile_mode,
                                        enabled=self.graph_sink)
        self._checked = False

    @property
    def graph_message(self) -> str:
        """What the graph sink did (compiled, off, or why it fell back)."""
        return self.loss_graph.message

    def _forward_loss(self, x: Any, y: Any) -> torch.Tensor:
        return self.loss_fn(self.mp.forward(x), y)

    def step(self, x: Any, y: Any) -> torch.Tensor:
        """One training step on a batch; returns the loss tensor on the device (no host sync)."""
        if not self._checked:
            check_same_device(self.network, (x, y))
            self._checked = True
        if not self.loss_graph.compiled:
            return train_step(self.mp, x, y, self.loss_fn, self.scaler)
        graph = self.loss_graph                 # the forward + loss as one compiled graph
        first, t0 = graph.calls == 0, time.perf_counter()
        with graph.cache_context():             # the kit's compile cache while forward or backward may compile
            loss = train_step(self.mp, x, y, self.loss_fn, self.scaler, forward_loss=graph)
        if first and graph.compiled:
            graph.record_compile(time.perf_counter() - t0, tr("first step: forward and backward graphs"))
        return loss

    def train(self, epochs: int, data: Iterable, callbacks: Sequence[Callable[[SinkInfo], Any]] = (), *,
              sink_size: int | None = -1, dataset_sink_mode: bool = True, prefetch_depth: int = 2,
              progress: bool = False) -> SinkLog:
        """Train like MindSpore's ``Model.train(epochs, data, callbacks, dataset_sink_mode, sink_size)``.

        ``dataset_sink_mode=True``: data sink (a :class:`DevicePrefetcher` of ``prefetch_depth`` batches) and loop
        sink of ``sink_size`` steps (see :func:`loop_sink`). ``False``: neither — every step reads its loss back
        and calls the callbacks, and ``sink_size`` is ignored, as in MindSpore.
        """
        self.network.train()
        if dataset_sink_mode:
            return loop_sink(self.step, data, epochs, sink_size, callbacks, prefetch_depth=prefetch_depth,
                             device=self.device, progress=progress)
        return loop_sink(self.step, data, epochs, None, callbacks, device=self.device, progress=progress)
