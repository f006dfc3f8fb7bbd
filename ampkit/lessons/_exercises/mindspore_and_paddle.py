"""Notebook 09_mindspore_and_paddle's exercises: a real Paddle GradScaler over an overflow stream, the dtype MindSpore's
O3 stores, the steps ``Model.train(..., dataset_sink_mode=True)`` runs on a CPU, the bf16 operations of Paddle's
static program, and which fp16 gradients the blog post's fixed ×1024 then ÷1024 changes.

State from the notebook: section 4's scaler settings (``paddle_settings``), section 1's ``runs``, section 5's
``model``, ``features`` and ``labels``, section 3's ``pir_rows`` and section 2's ``pd_lists``. MindSpore and Paddle
are imported only inside the functions: this module imports in the main environment (which has neither), where
the static-view and independence tests read it; its expected values need the frameworks' environment.
See :mod:`ampkit.exercises` for the layout.
"""
from __future__ import annotations

from typing import Any

import torch

from ampkit.formats import info
from ampkit.i18n import mark, tr
from ampkit.sinking import loop_sink

EX1_FLAGS = "o.oo..."
EX3_EPOCHS, EX3_SAMPLES, EX3_BATCH, EX3_SINK = 3, 32, 4, 5
EX5_VALUES, EX5_SCALE = (2.0**-24, 1.5, 60.0, 100.0), 1024.0

HINT_1 = mark("Paddle counts overflows IN A ROW: it decreases (x decr_ratio) at every 2nd overflow in a row and a "
              "clean step resets that count; it grows (x incr_ratio) after 3 clean steps in a row.")
HINT_2 = mark("to_float casts a cell's inputs and parameters when the cell runs; what does the stored Parameter hold? "
              "Section 1's table has a column for it.")
HINT_3 = mark("section 5: on a CPU, sink_size changes only the LossMonitor's labels, not how many steps run.")
HINT_4 = mark("look at the table of section 3's static program: which operation's output (not a cast's) is bfloat16? "
              "The bias add and softmax get fp32 inputs.")
HINT_5 = mark("multiplying by 1024 = 2**10 adds 10 to the exponent and leaves the significand's bits as they are, so "
              "dividing gives the same bits back, subnormals included (x 1024 makes them normal), unless the product "
              "does not fit: above 65504 it becomes inf, and inf / 1024 is inf.")


def expected_1(paddle_settings: dict[str, Any]) -> float:
    """The real frameworks: a Paddle ``GradScaler`` with section 4's settings run over ``EX1_FLAGS`` (the line Paddle
    prints at each decrease is kept out of the answer cell's output: it would tell the answer)."""
    import contextlib
    import io

    from ampkit.lessons.mindspore_and_paddle import paddle_scales

    with contextlib.redirect_stdout(io.StringIO()):
        return paddle_scales(EX1_FLAGS, **paddle_settings)[-1]


def solution_1(paddle_settings: dict[str, Any]) -> float:
    scale, bad, good = float(paddle_settings["init_loss_scaling"]), 0, 0
    for step, flag in enumerate(EX1_FLAGS):
        if flag == "o":
            bad, good = bad + 1, 0
            if bad == paddle_settings["decr_every_n_nan_or_inf"]:
                scale, bad = scale * paddle_settings["decr_ratio"], 0
        else:
            bad, good = 0, good + 1
            if good == paddle_settings["incr_every_n_steps"]:
                scale, good = scale * paddle_settings["incr_ratio"], 0
        print(tr("step {step} {flag!r}: overflows in a row {bad}, clean steps in a row {good}, scale {scale:g}",
                 step=step, flag=flag, bad=bad, good=good, scale=scale))
    return scale


def expected_2(runs: dict[str, tuple]) -> str:
    """The real frameworks: the dtype of ``fc1.weight`` in section 1's O3 network after its three steps."""
    return str(next(p for p in runs["O3"][0].get_parameters() if p.name == "fc1.weight").dtype)


def solution_2(runs: dict[str, tuple]) -> str:
    weight = runs["O3"][0].parameters_dict()["fc1.weight"]
    values = weight.asnumpy()
    width = values.nbytes // values.size
    print(tr("fc1.weight holds {n} values in {nbytes} bytes: {width} bytes each; fp16 would take 2", n=values.size,
             nbytes=values.nbytes, width=width))
    print(tr("O3's to_float casts the weight to fp16 each time fc1 runs; the stored Parameter, which the optimizer "
             "updates, stays as it was"))
    return {2: "Float16", 4: "Float32"}[width]


def expected_3(model: Any, features: Any, labels: Any) -> int:
    """The real frameworks: ``Model.train`` with sinking asked for, on this CPU; one LossMonitor line per step."""
    import contextlib
    import io

    import mindspore.dataset as ds
    from mindspore.train import LossMonitor

    from ampkit.lessons.mindspore_and_paddle import captured_mindspore_log

    data = ds.NumpySlicesDataset({"x": features[:EX3_SAMPLES], "y": labels[:EX3_SAMPLES]}, shuffle=False)
    printed = io.StringIO()
    with captured_mindspore_log(), contextlib.redirect_stdout(printed):
        model.train(EX3_EPOCHS, data.batch(EX3_BATCH), callbacks=[LossMonitor(1)], dataset_sink_mode=True,
                    sink_size=EX3_SINK)
    return len(printed.getvalue().splitlines())


def solution_3() -> int:
    batches = -(-EX3_SAMPLES // EX3_BATCH)
    steps = EX3_EPOCHS * batches
    print(tr("{samples} samples in batches of {batch}: {batches} batches; a CPU does not sink, so each of the {epochs} "
             "epochs is one pass: {epochs} x {batches} = {steps} steps", samples=EX3_SAMPLES, batch=EX3_BATCH,
             batches=batches, epochs=EX3_EPOCHS, steps=steps))
    sunk = loop_sink(lambda i: torch.tensor(0.0), [(i,) for i in range(batches)], epochs=EX3_EPOCHS,
                     sink_size=EX3_SINK)
    print(tr("a real sink of {sink} (Ascend, a GPU; the kit's loop_sink): {epochs} x {sink} = {steps} steps",
             sink=EX3_SINK, epochs=EX3_EPOCHS, steps=sunk.steps))
    return steps


def expected_4(pir_rows: list[dict[str, str]]) -> set[str]:
    """The real frameworks: the operations of section 3's executed static program whose result is bfloat16."""
    return {r["op"].removeprefix("pd_op.") for r in pir_rows if "bfloat16" in r["outputs"] and r["op"] != "pd_op.cast"}


def solution_4(pir_rows: list[dict[str, str]], pd_lists: dict[str, dict[str, set[str]]]) -> set[str]:
    lists = pd_lists["bfloat16"]
    names = [r["op"].split(".")[-1] for r in pir_rows]
    listed = {op: "white" if op in lists["white"] else "black" if op in lists["black"] else "gray"
              for op in names if op != "cast"}
    print(tr("the program's operations, casts left out, on Paddle's bf16 lists: {listed}", listed=listed))
    print(tr("a white-list operation computes in bf16; the black list stays in fp32; a gray one follows its inputs, "
             "and the bias add gets the fp32 bias and matmul's result cast back to fp32"))
    return {op for op, kind in listed.items() if kind == "white"}


def expected_5() -> set[float]:
    """The real frameworks: MindSpore multiplies fp16 tensors by ``EX5_SCALE`` and divides them back; the values
    whose bits changed."""
    import mindspore as ms
    import numpy as np

    values = np.array(EX5_VALUES, np.float16)
    back = ((ms.Tensor(values) * EX5_SCALE) / EX5_SCALE).asnumpy()
    assert back.dtype == np.float16, back.dtype
    return {float(v) for v, b in zip(values, back) if v.view(np.uint16) != b.view(np.uint16)}


def solution_5() -> set[float]:
    largest = info("fp16").max
    for value in EX5_VALUES:
        product = value * EX5_SCALE
        fits = product <= largest
        print(tr("{value:g} x {scale:g} = {product:g}: {verdict}", value=value, scale=EX5_SCALE, product=product,
                 verdict=tr("fits in fp16, exact (a power of two); / 1024 gives the same bits") if fits
                 else tr("above {largest:g}: inf, and inf / 1024 stays inf", largest=largest)))
    return {value for value in EX5_VALUES if value * EX5_SCALE > largest}
