"""AMP diagnosis tools for your own training loop: the non-finite hunter and its watch-and-replay, overflow
headroom, scaler health and the 2-process data-parallel recipe (the doctor's broken-run scenarios are notebook 05's
own: :mod:`ampkit.lessons.amp_in_practice`).

Taught in ``05_amp_in_practice.ipynb``. Logic only (data in, data out); the view is
``ampkit.widgets.amp_doctor``.
"""
from __future__ import annotations

from ampkit.diagnose.headroom import LayerHeadroom, check_model, check_scalar_loss, format_limits, measure_headroom
from ampkit.diagnose.health import RUN_KINDS, Diagnosis, RecordingScaler, ScalerHistory, classify_run
from ampkit.diagnose.hunter import AnomalyFinding, NonFiniteEvent, NonFiniteHunter, anomaly_report, hunt
from ampkit.diagnose.watch import StepFinding, WatchedStep, watch

__all__ = ["NonFiniteEvent", "NonFiniteHunter", "hunt", "AnomalyFinding", "anomaly_report",
           "watch", "WatchedStep", "StepFinding",
           "LayerHeadroom", "measure_headroom", "format_limits", "check_model", "check_scalar_loss",
           "ScalerHistory", "RecordingScaler", "Diagnosis", "classify_run", "RUN_KINDS"]
