"""AMP diagnosis tools for your own training loop: the non-finite hunter and its watch-and-replay, overflow
headroom, scaler health and the 2-process data-parallel recipe.

Taught in ``05_amp_in_practice.ipynb`` (and used on the decoder in ``08_transformers_compiled_and_sharded.ipynb``).
Logic only (data in, data out); the view is :class:`ampkit.widgets.AmpDoctor`, and the doctor's broken-run
scenarios are notebook 05's own (:mod:`ampkit.lessons.amp_in_practice`).

===============  ====================================================================================================
module           holds
===============  ====================================================================================================
``hunter``       :class:`NonFiniteHunter` / :func:`hunt`: the first op whose output went inf/NaN, and where
``watch``        :func:`watch`: every step checked cheaply, only a failing step replayed under the hunter
``headroom``     :func:`measure_headroom`: each layer's largest activation against fp16's limits
``health``       :class:`RecordingScaler`, :func:`classify_run`: a scaler's history read as a diagnosis
``distributed``  :func:`run_data_parallel`: one rank's inf under DDP-style and sharded gradients (2 gloo processes)
===============  ====================================================================================================

>>> h = ScalerHistory(scales=[2.0**16 / 2**i for i in range(10)], skipped=[True] * 10)
>>> classify_run(h).kind
'persistent'
"""
from __future__ import annotations

from ampkit.diagnose.distributed import STRATEGIES, RankResult, run_data_parallel
from ampkit.diagnose.headroom import LayerHeadroom, check_model, check_scalar_loss, format_limits, measure_headroom
from ampkit.diagnose.health import RUN_KINDS, Diagnosis, RecordingScaler, ScalerHistory, classify_run
from ampkit.diagnose.hunter import AnomalyFinding, NonFiniteEvent, NonFiniteHunter, anomaly_report, hunt
from ampkit.diagnose.watch import StepFinding, WatchedStep, watch

__all__ = [
    # the hunter and watch-and-replay
    "NonFiniteEvent", "NonFiniteHunter", "hunt", "AnomalyFinding", "anomaly_report",
    "watch", "WatchedStep", "StepFinding",
    # overflow headroom
    "LayerHeadroom", "measure_headroom", "format_limits", "check_model", "check_scalar_loss",
    # scaler health
    "ScalerHistory", "RecordingScaler", "Diagnosis", "classify_run", "RUN_KINDS",
    # across processes
    "RankResult", "run_data_parallel", "STRATEGIES",
]
