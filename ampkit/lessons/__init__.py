"""The notebooks' own experiments: one module per notebook, above the engine and below the widgets.

A function that exists to make one lesson's figure or table lives here, not in the engine (``precision``,
``scaling``, ``sinking``, ``fp8``, ``diagnose``, ``train``), which never imports this package; the widgets
(:mod:`ampkit.widgets`) and the notebooks do. The layers are written down in ``docs/architecture.md`` and tested
by ``tests/test_layers.py``.

=======================  ===========================================================================================
module                   notebook: what it holds
=======================  ===========================================================================================
``autocast_and_levels``  02: :func:`run_level`, :class:`LevelRun`, :class:`LevelRunCache`
``loss_scaling``         03: :func:`underflow_task`, :func:`train_task`, :func:`gradient_agreement`
``amp_in_practice``      05: the AMP doctor's broken runs (``run_scenario``, ``outlier_run``, ``SCENARIOS``)
``fp8_scaling``          06: fp8 vs bf16 vs fp32 runs (``train_mode``), recorded amaxes (``record_amax_run``)
``transformer_systems``  08: compiled vs eager (``compile_vs_eager``), checkpointing, FSDP2 policies, the hunter
=======================  ===========================================================================================

>>> from ampkit.lessons import underflow_task
>>> underflow_task().loss_weight < 1
True
"""
from __future__ import annotations

from ampkit.lessons.autocast_and_levels import LevelRun, LevelRunCache, run_level
from ampkit.lessons.loss_scaling import (
           GradAgreement,
           TaskRun,
           UnderflowTask,
           gradient_agreement,
           train_task,
           underflow_task,
)

__all__ = ["LevelRun", "LevelRunCache", "run_level", "GradAgreement", "TaskRun", "UnderflowTask",
           "gradient_agreement", "train_task", "underflow_task"]
