"""Notebook 09, section 6 (#39 item 12), against the real MindSpore 2.10 (``make test-frameworks``): the step blog
posts publish (graph mode, a conv net at O2, a fixed loss scale multiplied before ``value_and_grad`` and divided
after, ``all_finite``, ``@ms.jit``) fails to compile when it divides the gradients into a list and trains when it
divides them into a tuple; ×1024 ÷1024 gives back (almost) the unscaled gradients; ``Model.train`` does not sink by
default; ``without_jit_notes`` hides only its two notes. A failed graph compile writes ``rank_0/om/analyze_fail.ir``
into the working folder: the module runs in a temporary one."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")
from mindspore import nn  # noqa: E402

from ampkit.lessons.mindspore_and_paddle_copied import (  # noqa: E402
    JIT_NOTES,
    round_trip_rows,
    scaled_gradients,
    signature_defaults,
    without_jit_notes,
)


class SimpleCNN(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, pad_mode="valid")
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(4 * 6 * 6, 10)

    def construct(self, x):
        return self.fc(self.flatten(self.relu(self.conv1(x))))


rs = np.random.RandomState(0)
IMAGES = ms.Tensor(rs.randn(8, 3, 8, 8).astype(np.float32))
TARGETS = ms.Tensor(rs.randint(0, 10, 8).astype(np.int32))
LOSS = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


def _copied_step(as_tuple: bool):
    ms.set_seed(0)
    net = ms.amp.auto_mixed_precision(SimpleCNN(), "O2")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    loss_scale = 1024.0

    def forward_fn(data, label):
        return LOSS(net(data), label) * loss_scale

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters)

    if as_tuple:
        @ms.jit
        def train_step(data, label):
            loss, grads = grad_fn(data, label)
            grads = tuple(g / loss_scale for g in grads)
            if ms.amp.all_finite(grads):
                optimizer(grads)
            return loss / loss_scale
    else:
        @ms.jit
        def train_step(data, label):
            loss, grads = grad_fn(data, label)
            grads = [g / loss_scale for g in grads]
            if ms.amp.all_finite(grads):
                optimizer(grads)
            return loss / loss_scale
    return train_step


@pytest.fixture(scope="module", autouse=True)
def temp_cwd(tmp_path_factory):
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("mindspore-cwd"))
    yield
    os.chdir(here)


@pytest.fixture
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_a_list_of_gradients_does_not_compile_and_a_tuple_trains(graph_mode):
    with pytest.raises(RuntimeError, match="types of arguments in HyperMap must be consistent"):
        _copied_step(as_tuple=False)(IMAGES, TARGETS)
    step = _copied_step(as_tuple=True)
    losses = [float(step(IMAGES, TARGETS)) for _ in range(3)]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_times_1024_divided_by_1024_gives_back_the_unscaled_gradients():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(1)
    fp32, o2 = SimpleCNN(), ms.amp.auto_mixed_precision(SimpleCNN(), "O2")
    for p, q in zip(o2.get_parameters(), fp32.get_parameters()):
        p.set_data(q.data.copy())
    ref = scaled_gradients(fp32, LOSS, IMAGES, TARGETS, 1.0)
    plain = scaled_gradients(o2, LOSS, IMAGES, TARGETS, 1.0)
    scaled = scaled_gradients(o2, LOSS, IMAGES, TARGETS, 1024.0)
    assert {g.dtype for g in plain} == {np.dtype(np.float32)}          # the optimizer's gradients are fp32
    same = sum(int(np.count_nonzero(a.view(np.uint32) == b.view(np.uint32))) for a, b in zip(plain, scaled))
    assert same >= 0.95 * sum(a.size for a in plain)
    rows = round_trip_rows([p.name for p in o2.trainable_params()], ref, plain, scaled, 1024.0)
    for r in rows:
        assert abs(r["max error, ×1024 ÷1024"] - r["max error, unscaled"]) <= 0.1 * r["max error, unscaled"]
    with pytest.raises(ValueError, match="positive"):
        scaled_gradients(o2, LOSS, IMAGES, TARGETS, 0.0)


def test_model_train_does_not_sink_by_default():
    from mindspore.train import Model

    assert signature_defaults(Model.train, "dataset_sink_mode", "sink_size") == {"dataset_sink_mode": False,
                                                                                   "sink_size": -1}


def test_without_jit_notes_keeps_only_its_two_notes(capfd):
    from mindspore import log

    with without_jit_notes() as notes:
        os.write(2, b"[ERROR] CORE: Get realpath failed, path[/tmp/ipykernel_1/2.py]\n[ERROR] something else\n")
        log._get_logger().warning("The function \"f\" has been compiled again. Try to reuse ...")
        log._get_logger().warning("another warning")
        sys.stderr.flush()
    err = capfd.readouterr().err
    assert len(notes) == 2 and all(any(n in line for n in JIT_NOTES) for line in notes)
    assert "something else" in err and "another warning" in err and "realpath" not in err
