"""Overflow headroom: a known activation max gives a known margin in powers of two; bad input errors."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampkit.diagnose import check_scalar_loss, format_limits, measure_headroom
from ampkit.diagnose.headroom import module_kind


def _model():
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    with torch.no_grad():
        for lin in (m[0], m[2]):
            lin.weight.fill_(1.0)
            lin.bias.zero_()
        m[2].weight.fill_(2.0 ** 10)
    return m


def test_known_headroom():
    m = _model()
    x = torch.full((1, 2), 2.0 ** 4)
    rows = measure_headroom(m, [(x, torch.zeros(1, dtype=torch.long))] * 2, F.cross_entropy, "fp16")
    by = {r.name: r for r in rows}
    assert [r.name for r in rows] == ["0", "1", "2"]
    assert [r.kind for r in rows] == ["Linear", "ReLU activation", "Linear"]
    assert by["0"].act_max == 2.0 ** 5                      # 16 + 16
    assert by["2"].act_max == 2.0 ** 16                     # 2 * 32 * 1024 > 65504
    assert by["2"].status == "overflow" and by["2"].overflow_bits < 0
    assert by["0"].overflow_bits == pytest.approx(math.log2(65504 / 32))
    assert by["0"].status == "ok"
    bf = {r.name: r for r in measure_headroom(m, [(x, torch.zeros(1, dtype=torch.long))], F.cross_entropy, "bf16")}
    assert bf["2"].status == "ok" and bf["2"].dtype == "bf16"
    assert m[0].weight.grad is None   # left clean


def test_flushing_gradients():
    m = nn.Sequential(nn.Linear(4, 4))
    x = torch.randn(8, 4)
    rows = measure_headroom(m, [(x, None)], lambda out, y: out.sum() * 1e-9, "fp16")
    assert rows[0].grad_small_fraction == 1.0 and rows[0].status == "flushes"


def test_limits_and_bad_input():
    assert format_limits(torch.bfloat16)[0] == "bf16"
    with pytest.raises(ValueError, match="fp16, bf16, fp32"):
        format_limits("e4m3")
    with pytest.raises(ValueError, match="no parameters"):
        measure_headroom(nn.ReLU(), [(torch.zeros(1), None)], lambda o, y: o.sum())
    with pytest.raises(ValueError, match="scalar"):
        measure_headroom(nn.Linear(2, 2), [(torch.zeros(3, 2), None)], lambda o, y: o)
    with pytest.raises(TypeError, match="torch.Tensor"):
        check_scalar_loss(1.0)


def test_module_kind_names_activations():
    assert module_kind(nn.GELU()) == "GELU activation" and module_kind(nn.Softmax(dim=1)) == "Softmax activation"
    assert module_kind(nn.Conv1d(1, 1, 1)) == "Conv1d" and module_kind(nn.Dropout()) == "Dropout"


@pytest.mark.parametrize("steps,exc,words", [(0, ValueError, "steps must be an int >= 1; got 0"),
                                             (-2, ValueError, ">= 1"), (1.5, TypeError, "steps must be an int"),
                                             (True, TypeError, "steps must be an int")])
def test_steps_must_be_positive(steps, exc, words):
    m = _model()
    batch = [(torch.ones(1, 2), torch.zeros(1, dtype=torch.long))]
    with pytest.raises(exc, match=words):
        measure_headroom(m, batch, F.cross_entropy, "fp16", steps=steps)


def test_no_batches_or_bad_batches_are_errors_not_empty_lists():
    m = _model()
    with pytest.raises(ValueError, match="no \\(x, y\\) pair"):
        measure_headroom(m, [], F.cross_entropy)
    with pytest.raises(ValueError, match="no \\(x, y\\) pair"):
        measure_headroom(m, iter(()), F.cross_entropy)
    with pytest.raises(TypeError, match="iterable of \\(x, y\\) pairs"):
        measure_headroom(m, torch.ones(3, 2), F.cross_entropy)
    with pytest.raises(TypeError, match="each batch must be an \\(x, y\\) pair; got Tensor"):
        measure_headroom(m, [torch.ones(1, 2)], F.cross_entropy)
    with pytest.raises(TypeError, match="of length 3"):
        measure_headroom(m, [(torch.ones(1, 2), None, None)], F.cross_entropy)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        measure_headroom(m, [(torch.ones(1, 2), None)], "cross_entropy")
    assert m[0].weight.grad is None   # nothing left behind by a refused call


def test_steps_limits_the_batches_used():
    m = _model()
    seen = []

    def loss(out, y):
        seen.append(y)
        return out.sum()
    batches = [(torch.full((1, 2), float(i)), i) for i in range(5)]
    measure_headroom(m, batches, loss, "fp16", steps=2)
    assert seen == [0, 1]
