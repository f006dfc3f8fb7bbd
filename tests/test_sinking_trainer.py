"""ampkit.sinking.trainer: SinkModel trains identically with and without loop sink and data sink, across O-levels
and loss scalers; its eager step is ampkit.train.train_step; its graph sink trains like eager."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _sink_threads import no_thread_left_behind  # noqa: F401  (autouse fixture)
from torch import nn

from ampkit.models import build_model
from ampkit.scaling import DynamicLossScaler, StaticLossScaler
from ampkit.sinking import BatchLoader, LossMonitor, SinkModel
from ampkit.sinking.loop import endless
from ampkit.train import train_step


def make_model(level="O0", dtype="bf16", scaler=None, graph_sink=False, fused=False, seed=0):
    net = build_model("mlp", seed=seed, in_features=8, hidden=32, out_features=3)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, fused=True) if fused else \
        torch.optim.SGD(net.parameters(), lr=0.05)
    return SinkModel(net, F.cross_entropy, opt, level=level, dtype=dtype, scaler=scaler, graph_sink=graph_sink)


def make_loader(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(96, 8, generator=g)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
    return BatchLoader(X, y, 16, seed=seed)          # 6 batches per pass, reshuffled each pass


def params_of(m: SinkModel) -> list[torch.Tensor]:
    return [p.detach().clone() for p in m.network.parameters()]


def scaler_for(name):
    return {"none": None, "torch": torch.amp.GradScaler("cpu", init_scale=2.0 ** 10),
            "dynamic": DynamicLossScaler(init_scale=2.0 ** 10, growth_interval=4),
            "static": StaticLossScaler(128.0)}[name]


def train_variants(level, dtype, scaler_name):
    """The same 12 steps (two passes over 6 batches), with and without loop sink / data sink."""
    runs = {}
    for name, kw in {"no sinking": dict(dataset_sink_mode=False),
                     "sink -1": dict(sink_size=-1),
                     "sink 4": dict(sink_size=4),
                     "sink 5, no data sink": dict(sink_size=5, prefetch_depth=0)}.items():
        m = make_model(level, dtype, scaler_for(scaler_name))
        epochs = {"no sinking": 2, "sink -1": 2, "sink 4": 3, "sink 5, no data sink": 2}[name]
        log = m.train(epochs, make_loader(), callbacks=[LossMonitor()], **kw)
        if name == "sink 5, no data sink":   # 10 steps + 2 more to reach the same 12
            log2 = m.train(1, _rest(make_loader(), skip=10, n=2), sink_size=-1, prefetch_depth=0)
            log.losses.extend(log2.losses)
        runs[name] = (log, params_of(m))
    return runs


class _rest:
    """Batches ``skip .. skip+n`` of the endless stream of a loader (its passes chained)."""

    def __init__(self, loader, skip, n):
        self.loader, self.skip, self.n = loader, skip, n

    def __iter__(self):
        stream = endless(self.loader)
        for _ in range(self.skip):
            next(stream)
        for _ in range(self.n):
            yield next(stream)


@pytest.mark.parametrize("level, dtype, scaler_name", [
    ("O0", "bf16", "none"), ("O1", "bf16", "none"), ("O2", "bf16", "none"), ("O3", "bf16", "none"),
    ("O1", "fp16", "torch"), ("O2", "fp16", "torch"), ("O1", "fp16", "dynamic"), ("O2", "fp16", "dynamic"),
    ("O2", "fp16", "static"), ("O3", "fp16", "none"), ("O0", "bf16", "dynamic"),
])
def test_results_identical_with_and_without_loop_sinking(level, dtype, scaler_name):
    runs = train_variants(level, dtype, scaler_name)
    ref_log, ref_params = runs["no sinking"]
    assert ref_log.steps == 12 and ref_log.syncs == 12
    for name, (log, params) in runs.items():
        assert log.losses == ref_log.losses, name
        assert all(torch.equal(a, b) for a, b in zip(params, ref_params)), name
    assert runs["sink 4"][0].syncs == 3 and runs["sink -1"][0].syncs == 2
    assert all(v == v for v in ref_log.losses)    # finite (not NaN)


def test_sink_model_matches_train_step():
    m = make_model("O1", "bf16")
    ref = make_model("O1", "bf16")
    batch = next(iter(make_loader()))
    assert torch.equal(m.step(*batch), train_step(ref.mp, *batch, F.cross_entropy))


def test_fused_optimizer_and_grad_scaler_need_no_per_step_sync(monkeypatch):
    calls = {"n": 0}
    item = torch.Tensor.item

    def counted(self, *a, **k):
        calls["n"] += 1
        return item(self, *a, **k)

    m = make_model("O2", "fp16", torch.amp.GradScaler("cpu", init_scale=2.0 ** 10), fused=True)
    monkeypatch.setattr(torch.Tensor, "item", counted)
    log = m.train(2, make_loader(), sink_size=6, prefetch_depth=0)
    assert log.steps == 12 and calls["n"] == 0 and log.syncs == 2


def test_graph_sink_trains_like_eager():
    eager, graph = make_model(graph_sink=False), make_model(graph_sink=True)
    loader_a, loader_b = make_loader(), make_loader()
    la = eager.train(2, loader_a, sink_size=-1)
    lb = graph.train(2, loader_b, sink_size=-1)
    assert "graph sink off" in eager.graph_message
    if graph.loss_graph.compiled:
        assert "compiled with torch.compile" in graph.graph_message
    else:
        assert "unavailable" in graph.graph_message
    assert la.losses == pytest.approx(lb.losses, rel=1e-5, abs=1e-6)
    for a, b in zip(params_of(eager), params_of(graph)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sink_model_bad_input():
    with pytest.raises(TypeError, match="network must be a torch.nn.Module"):
        SinkModel(lambda x: x, F.mse_loss, None)
    net = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        SinkModel(net, "mse", torch.optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="level must be one of O0, O1, O2, O3"):
        SinkModel(net, F.mse_loss, torch.optim.SGD(net.parameters(), lr=0.1), level="O4")
    m = make_model()
    with pytest.raises(ValueError, match="sink_size must be -1"):
        m.train(1, make_loader(), sink_size=0)


def test_first_compiled_step_records_forward_and_backward_compile_time():
    m = make_model(graph_sink=True)
    if not m.loss_graph.compiled:
        pytest.skip(m.graph_message)
    x, y = next(iter(make_loader()))
    m.step(x, y)
    assert m.loss_graph.compile_seconds > 0 and "first step: forward and backward" in m.graph_message
