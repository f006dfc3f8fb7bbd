"""The notebooks' own experiments: one module (or subpackage) per notebook, above the engine and below the widgets.

Taught in notebooks 02–10. A function that exists to make one lesson's figure or table lives here, not in the engine
(``precision``, ``scaling``, ``sinking``, ``fp8``, ``diagnose``, ``train``), which never imports this package; the
widgets (:mod:`ampkit.widgets`) and the notebooks do. The layers are written down in ``docs/architecture.md`` and
tested by ``tests/test_layers.py``. Every lesson's public names are here: a notebook imports them from
``ampkit.lessons``.

=====================================  ==============================================================================
module                                 notebook: what it holds
=====================================  ==============================================================================
``autocast_and_levels``                02: :func:`run_level`, :class:`LevelRun`, :class:`LevelRunCache`
``loss_scaling``                       03: :func:`underflow_task`, :func:`train_task`, :func:`gradient_agreement`
``amp_in_practice``                    05: the AMP doctor's broken runs (:func:`run_scenario`, :func:`outlier_run`,
                                       :data:`SCENARIOS`)
``fp8_scaling``                        06: fp8 vs bf16 vs fp32 runs (:func:`train_mode`), recorded amaxes
                                       (:func:`record_amax_run`), the GEMM operands (:func:`gemm_tensors`)
``transformers_in_16_bits``            07: a decoder in 16 bits: activations (:func:`train_side_by_side`,
                                       :func:`attention_overflow`), weights (:func:`plateau_experiment`,
                                       :func:`finetune_stored`)
``transformers_compiled_and_sharded``  08: compiled vs eager (:func:`compile_vs_eager`), checkpointing, FSDP2
                                       policies (:func:`sharded_gradients`), the hunter (:func:`hunt_decoder`)
``mindspore_and_paddle``               09: around MindSpore's and Paddle's own code (imported only when called):
                                       :func:`start_frameworks`, the real scalers (:func:`mindspore_scales`, ...)
``mindspore_and_paddle_copied``        09: the code copied from blog posts (:func:`scaled_gradients`,
                                       :func:`round_trip_rows`, :func:`without_jit_notes`, ...)
``fp4``                                10: E2M1's line (:func:`line_point`), MX scale rules per amax
                                       (:func:`rule_table`), NVFP4's two levels, 2D weights, the Hadamard cases
                                       (:func:`hadamard_cases`), stochastic rounding (:func:`sr_stats`), the recipe
                                       end to end (:func:`recipe_runs`)
=====================================  ==============================================================================

>>> from ampkit.lessons import underflow_task
>>> underflow_task().loss_weight < 1
True
"""
from __future__ import annotations

from ampkit.lessons.amp_in_practice import (
    SCENARIOS,
    SPIKE_FACTOR,
    DoctorReport,
    OutlierRun,
    diagnose_model,
    outlier_run,
    run_scenario,
    scenario_names,
)
from ampkit.lessons.autocast_and_levels import CLASSIFIERS, LevelRun, LevelRunCache, run_level
from ampkit.lessons.fp4 import (
    FP4_MODEL,
    HADAMARD_CASES,
    LINE_POINTS,
    RECIPE_RUNS,
    RunSummary,
    crest_factor,
    hadamard_cases,
    hadamard_gradient,
    line_point,
    recipe_runs,
    rel_error,
    rule_table,
    run_summary,
    sr_stats,
    tensor_scale_effect,
    two_levels,
    weight_2d,
)
from ampkit.lessons.fp8_scaling import (
    TRAIN_FORMATS,
    AmaxRecording,
    RunResult,
    backward_operand_formats,
    flush_per_step,
    gemm_tensors,
    make_task,
    record_amax_run,
    saturation_per_step,
    train_mode,
)
from ampkit.lessons.loss_scaling import (
    GradAgreement,
    TaskRun,
    UnderflowTask,
    gradient_agreement,
    train_task,
    underflow_task,
)
from ampkit.lessons.mindspore_and_paddle import (
    FRAMEWORKS,
    NET_SOURCE,
    captured_mindspore_log,
    cell_rows,
    first_line,
    kit_scales,
    list_differences,
    mindspore_bf16_matmul,
    mindspore_lists,
    mindspore_net,
    mindspore_scales,
    missing_frameworks,
    paddle_lists,
    paddle_scales,
    parse_flags_text,
    pir_op_rows,
    rewritten_casts,
    run_apart,
    start_frameworks,
    table_md,
    torch_scales,
)
from ampkit.lessons.mindspore_and_paddle_copied import (
    JIT_NOTES,
    round_trip_rows,
    scaled_gradients,
    signature_defaults,
    without_jit_notes,
)
from ampkit.lessons.transformers_compiled_and_sharded import (
    BACKENDS,
    BACKWARD_AUTOCAST,
    POLICIES,
    SMALL,
    Checkpointed,
    CheckpointResult,
    CompileRun,
    CountingBackend,
    DecoderHunt,
    DefaultVariant,
    Fp32Region,
    LinearCalls,
    ShardedGrads,
    ShardedRun,
    autocast_rules,
    backward_autocast,
    checkpoint_experiment,
    compile_vs_eager,
    current_backward_autocast,
    decoder_batches,
    default_variant,
    first_forward_inf,
    fp16_attention_finite,
    fp32_region_grad,
    hunt_decoder,
    linear_calls,
    overflow_gain,
    overflowing_decoder,
    raw_logit_max,
    saved_activation_bytes,
    sharded_gradients,
    small_decoder,
    with_checkpointing,
)
from ampkit.lessons.transformers_in_16_bits import (
    DTYPES,
    FIXES,
    MISMATCHES,
    RECIPES,
    AttentionOverflow,
    FineTune,
    LoRALinear,
    LossParts,
    Run,
    SdpaCheck,
    attention_overflow,
    dtype_mismatch,
    finetune_stored,
    gradient_errors,
    kept_in_bf16,
    largest_logit,
    loss_difference_parts,
    loss_rows,
    lost_updates,
    norm_rows,
    overflow_threshold,
    plateau_experiment,
    predicted_zero_share,
    sdpa_vs_manual,
    softmax_with_inf,
    step_activation_bytes,
    train_in_bf16,
    train_side_by_side,
    underflow_share,
    unscale_error,
)

__all__ = [
    # 02 autocast_and_levels
    "LevelRun", "LevelRunCache", "run_level", "CLASSIFIERS",
    # 03 loss_scaling
    "UnderflowTask", "underflow_task", "TaskRun", "train_task", "GradAgreement", "gradient_agreement",
    # 05 amp_in_practice
    "DoctorReport", "SCENARIOS", "run_scenario", "diagnose_model", "scenario_names", "outlier_run", "OutlierRun",
    "SPIKE_FACTOR",
    # 06 fp8_scaling
    "TRAIN_FORMATS", "RunResult", "train_mode", "AmaxRecording", "record_amax_run", "saturation_per_step",
    "flush_per_step", "make_task", "gemm_tensors", "backward_operand_formats",
    # 07 transformers_in_16_bits
    "DTYPES", "RECIPES", "Run", "train_side_by_side", "step_activation_bytes", "gradient_errors",
    "AttentionOverflow", "attention_overflow", "largest_logit", "overflow_threshold", "softmax_with_inf",
    "SdpaCheck", "sdpa_vs_manual", "norm_rows", "loss_rows", "underflow_share", "predicted_zero_share",
    "plateau_experiment", "lost_updates", "kept_in_bf16", "train_in_bf16", "unscale_error", "MISMATCHES",
    "dtype_mismatch", "LoRALinear", "FIXES", "FineTune", "finetune_stored", "LossParts", "loss_difference_parts",
    # 08 transformers_compiled_and_sharded
    "SMALL", "small_decoder", "decoder_batches",
    "BACKENDS", "BACKWARD_AUTOCAST", "CompileRun", "CountingBackend", "Fp32Region", "autocast_rules",
    "backward_autocast", "current_backward_autocast", "compile_vs_eager", "fp32_region_grad",
    "Checkpointed", "CheckpointResult", "checkpoint_experiment", "saved_activation_bytes", "with_checkpointing",
    "LinearCalls", "linear_calls", "DefaultVariant", "default_variant",
    "POLICIES", "ShardedGrads", "ShardedRun", "sharded_gradients",
    "DecoderHunt", "hunt_decoder", "overflowing_decoder", "raw_logit_max", "first_forward_inf", "overflow_gain",
    "fp16_attention_finite",
    # 09 mindspore_and_paddle
    "FRAMEWORKS", "missing_frameworks", "start_frameworks", "first_line", "table_md", "cell_rows", "rewritten_casts",
    "mindspore_lists", "paddle_lists", "list_differences", "parse_flags_text", "mindspore_scales", "torch_scales",
    "paddle_scales", "kit_scales", "captured_mindspore_log", "pir_op_rows", "run_apart", "mindspore_bf16_matmul",
    "mindspore_net", "NET_SOURCE", "signature_defaults", "scaled_gradients", "round_trip_rows",
    "without_jit_notes", "JIT_NOTES",
    # 10 fp4
    "LINE_POINTS", "line_point", "rule_table", "rel_error", "two_levels", "tensor_scale_effect", "weight_2d",
    "HADAMARD_CASES", "hadamard_gradient", "crest_factor", "hadamard_cases", "sr_stats", "RECIPE_RUNS", "FP4_MODEL",
    "recipe_runs", "RunSummary", "run_summary",
]
