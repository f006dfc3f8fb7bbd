"""The non-finite hunter finds a known first inf/NaN op in forward and in backward; detect_anomaly for comparison."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampkit.diagnose import NonFiniteHunter, anomaly_report, hunt
from ampkit.models import MLP


def _overflowing_mlp():
    torch.manual_seed(0)
    m = MLP(8, 16, 3, depth=2)
    with torch.no_grad():
        m.net[2].weight.mul_(1e4)   # the second hidden Linear
    return m


def test_forward_overflow_found_at_its_layer_in_fp16():
    m = _overflowing_mlp()
    x, y = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)) * 100, torch.zeros(4, dtype=torch.long)

    def step():
        with torch.autocast("cpu", dtype=torch.float16):
            out = m(x)
        F.cross_entropy(out.float(), y).backward()

    ev = hunt(m, step)
    assert ev is not None and ev.phase == "forward" and ev.module == "net.2" and ev.op == "aten.addmm"
    assert ev.out_dtype == "fp16" and ev.inputs_finite and 0 < ev.input_max < 65504
    assert "net.2" in ev.describe()
    # anomaly mode blames a backward function, not the layer: it only checks backward outputs
    found = anomaly_report(step)
    assert found.raised and found.function.endswith("Backward0") and "net.2" not in found.message


def test_same_step_in_bf16_is_clean():
    m = _overflowing_mlp()
    x, y = torch.randn(4, 8) * 100, torch.zeros(4, dtype=torch.long)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)
        F.cross_entropy(out.float(), y).backward()

    assert hunt(m, step) is None


class SqrtHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.sqrt(torch.relu(self.lin(x)))   # sqrt(0) is finite; its gradient 0.5/sqrt(0) is inf


def test_backward_first_inf_names_node_and_module():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), SqrtHead())
    x = torch.randn(8, 4)
    with NonFiniteHunter(m) as h:
        m(x).sum().backward()
    ev = h.first
    assert ev is not None and ev.phase == "backward" and ev.node == "SqrtBackward0" and ev.module == "1"
    assert h.n_ops > 10
    # the hooks are gone afterwards
    assert not m[0]._forward_hooks and not m[0]._forward_pre_hooks


def test_clean_step_reports_nothing_and_hunter_off_costs_nothing():
    m = MLP(4, 8, 2)
    before = (dict(m._forward_hooks), dict(m._forward_pre_hooks))
    h = NonFiniteHunter(m)
    assert (dict(m._forward_hooks), dict(m._forward_pre_hooks)) == before  # nothing installed until entered
    with h:
        F.cross_entropy(m(torch.randn(3, 4)), torch.zeros(3, dtype=torch.long)).backward()
    assert h.first is None and h.n_ops > 0


def test_nonfinite_input_is_flagged_as_coming_from_outside():
    lin = nn.Linear(2, 2)
    x = torch.tensor([[float("nan"), 1.0]])
    with NonFiniteHunter(lin) as h:
        lin(x)
    assert h.first is not None and not h.first.inputs_finite


def test_bad_input():
    with pytest.raises(TypeError, match="nn.Module"):
        NonFiniteHunter("model")
    with pytest.raises(TypeError, match="callable"):
        hunt(nn.Linear(1, 1), None)
    with pytest.raises(TypeError, match="callable"):
        anomaly_report(3)


def test_uninitialised_memory_is_not_a_finding():
    """empty/empty_like hand back whatever the memory held (dropout fills its mask that way): not a result."""
    h = NonFiniteHunter()
    x, garbage = torch.ones(3), torch.full((3,), float("nan"))
    h._seen(torch.ops.aten.empty_like.default, (x,), {}, garbage)
    h._seen(torch.ops.aten.empty.memory_format, ([3],), {}, garbage)
    assert h.first is None and h.n_ops == 2
    h._seen(torch.ops.aten.add.Tensor, (x, x), {}, garbage)
    assert h.first is not None and h.first.op == "aten.add" and h.first.op_index == 2


def test_dropout_step_is_clean_under_the_hunter():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 64), nn.Dropout(0.5), nn.Linear(64, 2))
    for _ in range(20):
        assert hunt(m, lambda: m(torch.randn(16, 8)).sum().backward()) is None
