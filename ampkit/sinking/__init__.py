"""Data sink, graph sink and loop sink in PyTorch, on CPU and GPU (notebook ``04_data_sinking``).

MindSpore's ``Model.train(epochs, dataset, dataset_sink_mode=True, sink_size=N)`` offers three ways to keep the host
out of the device's way (and supports none of them on CPU). ampkit teaches the same ideas with PyTorch machinery,
one module each:

==============  =====================================================================================================
module          holds
==============  =====================================================================================================
``prefetch``    **data sink** — :class:`DevicePrefetcher`: a background worker moves the next batches to the device
                ahead of use, so data preparation overlaps compute; :func:`check_batch`, :func:`check_same_device`.
``compile``     **graph sink** — :func:`compile_step` / :class:`CompiledStep`: the step compiled once with
                ``torch.compile``, falling back to eager with a clear message where compiling is unavailable.
``cache``       where those compiles keep their kernels (:func:`kit_compile_cache`, entered only while compiling).
``loop``        **loop sink** — :func:`loop_sink`: ``sink_size`` steps without reading anything back, then one sync;
                callbacks (:class:`LossMonitor`) fire once per sink with a :class:`SinkInfo`; a :class:`SinkLog`.
``trainer``     :class:`SinkModel`: MindSpore's ``Model`` — all three sinks around one network, loss, optimizer.
``workload``    the lesson's workload: :class:`BatchLoader`, :class:`ManySmallOps`, :func:`count_ops`.
``measure``     :class:`Calibration`, :class:`ModeMeasurement`, :class:`RunCosts`, :func:`predict_vs_measured`,
                :func:`speedup`.
``mode_runs``   :class:`SinkBench`, :func:`calibrate`, :func:`measure_modes`, :func:`warm_compile_cache`.
==============  =====================================================================================================

The timeline simulator lives in :mod:`ampkit.timeline`; its views are :class:`ampkit.widgets.SinkTimeline`,
:func:`ampkit.widgets.gantt_figure` and :func:`ampkit.widgets.measured_figure`.

Importing this package changes nothing global. The graph sink's compiles use the kit's compile cache
(``.cache/torchinductor`` in the repository unless ``TORCHINDUCTOR_CACHE_DIR`` is set), entered only while a step
compiles, so a second run of the notebook finds the kernels already built.

>>> import torch
>>> with DevicePrefetcher([torch.zeros(2), torch.ones(2)], device="cpu", depth=1) as sink:
...     [b.sum().item() for b in sink]
[0.0, 2.0]
"""
from __future__ import annotations

from ampkit.sinking.cache import compile_cache_dir, kit_cache_dir, kit_compile_cache
from ampkit.sinking.compile import CompiledStep, compile_step, compile_unavailable_reason
from ampkit.sinking.loop import LossMonitor, SinkInfo, SinkLog, check_sink_size, loop_sink
from ampkit.sinking.measure import Calibration, ModeMeasurement, RunCosts, predict_vs_measured, speedup
from ampkit.sinking.mode_runs import SinkBench, calibrate, measure_modes, warm_compile_cache
from ampkit.sinking.prefetch import DevicePrefetcher, batch_device, check_batch, check_same_device
from ampkit.sinking.trainer import SinkModel
from ampkit.sinking.workload import BatchLoader, ManySmallOps, count_ops

__all__ = [
    "kit_cache_dir", "compile_cache_dir", "kit_compile_cache",
    "DevicePrefetcher", "check_batch", "batch_device", "check_same_device",
    "compile_unavailable_reason", "compile_step", "CompiledStep", "warm_compile_cache",
    "check_sink_size", "SinkInfo", "SinkLog", "LossMonitor", "loop_sink", "SinkModel",
    "BatchLoader", "ManySmallOps", "count_ops",
    "Calibration", "calibrate", "measure_modes", "ModeMeasurement", "RunCosts", "predict_vs_measured", "speedup",
    "SinkBench",
]
