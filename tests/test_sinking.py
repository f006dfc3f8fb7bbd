"""ampkit.sinking: the data sink (prefetcher) and the loop sink (MindSpore semantics), with bad input (the package's
face: tests/test_public_api.py). (Graph sink: test_sinking_compile.py; SinkModel: test_sinking_trainer.py;
workload, measurements and bench: test_sinking_mode_runs.py.)"""
from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F
from _sink_threads import no_thread_left_behind  # noqa: F401  (autouse fixture)
from torch import nn

from ampkit.sinking import (
    BatchLoader,
    DevicePrefetcher,
    LossMonitor,
    SinkInfo,
    SinkModel,
    check_batch,
    check_same_device,
    check_sink_size,
    loop_sink,
)
from ampkit.sinking.loop import endless
from ampkit.sinking.prefetch import batch_device, same_device


def tagged(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.full((2, 3), float(i)), torch.tensor([i])) for i in range(n)]

# ----------------------------------------------------------------------------------------------- data sink
@pytest.mark.parametrize("size", [0, 1, 2, 5, 17])
@pytest.mark.parametrize("depth", [1, 2, 3, 8])
def test_prefetcher_every_batch_once_in_order(size, depth):
    data = tagged(size)
    with DevicePrefetcher(data, device="cpu", depth=depth) as sink:
        got = [int(y.item()) for x, y in sink]
        assert not sink.alive          # finished iteration stops the worker
    assert got == list(range(size))
    assert sink.delivered == size


def test_prefetcher_keeps_structure_and_values():
    batch = {"x": torch.arange(4.0), "pair": (torch.ones(2), [torch.zeros(1)])}
    (out,) = list(DevicePrefetcher([batch], device="cpu"))
    assert set(out) == {"x", "pair"} and isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
    assert torch.equal(out["x"], batch["x"]) and torch.equal(out["pair"][1][0], torch.zeros(1))


def test_prefetcher_runs_ahead_but_only_depth_batches():
    made = []

    def loader():
        for i in range(100):
            made.append(i)
            yield torch.tensor([i])

    sink = iter(DevicePrefetcher(loader(), device="cpu", depth=2))
    first = next(sink)
    # while the training loop holds batch 0, the worker fills the queue (1, 2) and prepares batch 3,
    # then blocks: it never runs further ahead than the queue allows.
    deadline = time.monotonic() + 5
    while len(made) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.1)
    assert len(made) == 4 and first.item() == 0
    assert [next(sink).item() for _ in range(3)] == [1, 2, 3]
    sink.close()
    assert not sink.alive


def test_prefetcher_new_pass_per_iter():
    sink = DevicePrefetcher(tagged(3), device="cpu")
    assert [int(y) for _, y in sink] == [0, 1, 2]
    assert [int(y) for _, y in sink] == [0, 1, 2]


@pytest.mark.parametrize("fail_at", [0, 1, 4])
def test_loader_exception_is_raised_in_the_training_loop(fail_at):
    def loader():
        for i in range(10):
            if i == fail_at:
                raise KeyError(f"corrupt record {i}")
            yield torch.tensor([i])

    seen = []
    sink = DevicePrefetcher(loader(), device="cpu", depth=2)
    with pytest.raises(KeyError, match=f"corrupt record {fail_at}") as info:
        for b in sink:
            seen.append(b.item())
    assert seen == list(range(fail_at))
    assert any("worker thread" in n for n in getattr(info.value, "__notes__", []))
    assert not sink.alive


def test_non_tensor_batches_name_the_bad_type():
    import numpy as np

    for bad, name in (([1, 2], "int"), ("text", "str"), (np.zeros(3), "ndarray"), ((torch.ones(1), None), "NoneType")):
        with pytest.raises(TypeError, match=f"batch 1 contains an item of type {name}.*torch.Tensor"):
            list(DevicePrefetcher([torch.zeros(1), bad], device="cpu"))
    with pytest.raises(TypeError, match=r"item of type float at \['lr'\]"):
        check_batch({"x": torch.ones(1), "lr": 0.1})


def test_close_stops_a_worker_blocked_on_a_full_queue_and_an_endless_loader():
    def endless():
        i = 0
        while True:
            i += 1
            yield torch.tensor([i])

    sink = DevicePrefetcher(endless(), device="cpu", depth=1)
    it = iter(sink)
    next(it)
    assert sink.alive
    sink.close()
    assert not sink.alive
    with DevicePrefetcher(endless(), device="cpu", depth=3) as s2:
        next(iter(s2))
    assert not s2.alive


def test_exception_in_the_training_loop_with_context_manager_leaves_no_thread():
    with pytest.raises(RuntimeError, match="boom"):
        with DevicePrefetcher(tagged(50), device="cpu", depth=2) as sink:
            for i, _ in enumerate(sink):
                if i == 3:
                    raise RuntimeError("boom")
    assert not sink.alive


def test_prefetcher_overlaps_a_slow_loader_with_work():
    # not a timing assertion: the loop's waiting time is recorded, and a sink that was given enough time
    # to fill its queue makes the loop wait (almost) nothing for the first batches.
    made = []

    def loader():
        for b in BatchLoader(torch.zeros(8, 2), torch.zeros(8), 2, prep_seconds=0.01):
            made.append(1)
            yield b

    sink = iter(DevicePrefetcher(loader(), device="cpu", depth=3))
    deadline = time.monotonic() + 5
    while len(made) < 4 and time.monotonic() < deadline:   # "compute" while the worker prepares batches 0..3
        time.sleep(0.01)
    [next(sink) for _ in range(3)]
    assert sink.delivered == 3 and sink.wait_seconds < 0.05
    sink.close()


@pytest.mark.parametrize("depth, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError),
                                          ("2", TypeError)])
def test_bad_depth(depth, error):
    with pytest.raises(error, match="depth .* must be an int >= 1"):
        DevicePrefetcher([torch.zeros(1)], device="cpu", depth=depth)


def test_bad_loader_and_device():
    with pytest.raises(TypeError, match="loader must be an iterable"):
        DevicePrefetcher(42, device="cpu")
    with pytest.raises(ValueError, match="unknown device 'tpu:9'; valid choices: cuda, mps, cpu"):
        DevicePrefetcher([], device="tpu:9")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="not available here"):
            DevicePrefetcher([], device="cuda")


def test_batch_device_and_same_device():
    assert batch_device({"a": 3, "b": [torch.zeros(1, device="meta")]}) == torch.device("meta")
    assert batch_device((1, "x")) is None
    assert same_device(torch.device("cuda"), torch.device("cuda", 1))          # no index matches any index
    assert not same_device(torch.device("cuda", 0), torch.device("cuda", 1))
    assert not same_device(torch.device("cpu"), torch.device("meta"))


def test_model_and_data_on_different_devices():
    model = nn.Linear(3, 2)
    check_same_device(model, (torch.zeros(1, 3), torch.zeros(1)))
    with pytest.raises(ValueError, match="model is on cpu but the batch is on meta"):
        check_same_device(model, torch.zeros(1, 3, device="meta"))
    net = nn.Linear(3, 2)
    sm = SinkModel(net, F.mse_loss, torch.optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="model is on cpu but the batch is on meta.*DevicePrefetcher"):
        sm.step(torch.zeros(4, 3, device="meta"), torch.zeros(4, 2, device="meta"))


# ----------------------------------------------------------------------------------------------- loop sink
N = 5


def run_tagged(sink_size, epochs=3, prefetch_depth=0, n=N):
    order = []

    def step(x, y):
        order.append(int(y.item()))
        return x.mean()

    calls = []
    mon = LossMonitor()
    log = loop_sink(step, tagged(n), epochs, sink_size, [mon, calls.append], prefetch_depth=prefetch_depth,
                    device="cpu")
    return log, order, calls, mon


@pytest.mark.parametrize("prefetch_depth", [0, 2])
@pytest.mark.parametrize("sink_size", [-1, 1, 3, N, N + 3, 2 * N + 1])
def test_loop_sink_follows_mindspore_semantics(sink_size, prefetch_depth):
    epochs = 3
    log, order, calls, mon = run_tagged(sink_size, epochs, prefetch_depth)
    if sink_size == -1:
        steps_per_epoch = N
        expected = list(range(N)) * epochs                      # one full pass per epoch
    else:
        steps_per_epoch = sink_size
        expected = [i % N for i in range(epochs * sink_size)]   # endless data, next epoch continues
    assert order == expected
    assert log.steps == epochs * steps_per_epoch
    assert log.losses == [float(i) for i in expected]           # losses come back in step order
    assert log.syncs == epochs                                  # one host sync per sink
    assert log.callback_calls == 2 * epochs                     # each callback once per sink
    assert [c.epoch for c in calls] == list(range(1, epochs + 1))
    assert [c.step for c in calls] == [steps_per_epoch * e for e in range(1, epochs + 1)]
    assert all(c.sink_steps == steps_per_epoch for c in calls)
    assert mon.records[-1] == (epochs, epochs * steps_per_epoch, float(expected[-1]))


@pytest.mark.parametrize("prefetch_depth", [0, 2])
def test_no_loop_sink_syncs_every_step(prefetch_depth):
    log, order, calls, _ = run_tagged(None, 2, prefetch_depth)
    assert order == list(range(N)) * 2
    assert log.syncs == log.steps == 2 * N and len(calls) == 2 * N
    assert [c.sink_steps for c in calls] == [1] * (2 * N)


def test_loop_sink_reads_losses_back_once_per_sink(monkeypatch):
    counts = {"item": 0, "tolist": 0}
    item, tolist = torch.Tensor.item, torch.Tensor.tolist

    def counted(name, fn):
        def wrapper(self, *a, **k):
            counts[name] += 1
            return fn(self, *a, **k)
        return wrapper

    monkeypatch.setattr(torch.Tensor, "item", counted("item", item))
    monkeypatch.setattr(torch.Tensor, "tolist", counted("tolist", tolist))
    log = loop_sink(lambda x, y: (x * 2).sum(), tagged(4), epochs=3, sink_size=4)
    assert counts == {"item": 0, "tolist": 3} and log.syncs == 3


def test_loop_sink_endless_with_a_one_shot_iterator():
    from ampkit.data import batches

    X, y = torch.arange(12.0)[:, None], torch.arange(12)
    log = loop_sink(lambda x, t: x.sum(), batches(X, y, 4, shuffle=False, epochs=None), 2, sink_size=5)
    assert log.steps == 10
    with pytest.raises(ValueError, match="data ran out after 3 batches: it is a one-shot iterator"):
        loop_sink(lambda x, t: x.sum(), batches(X, y, 4, shuffle=False), 2, sink_size=5)
    with pytest.raises(ValueError, match="epoch 2 got no batches .*one-shot"):
        loop_sink(lambda x, t: x.sum(), batches(X, y, 4, shuffle=False), 2, sink_size=-1)


def test_loop_sink_loader_error_propagates_without_hanging():
    def loader():
        yield torch.ones(1)
        raise OSError("disk gone")

    class Again:
        def __iter__(self):
            return loader()

    for size in (-1, 3, None):
        with pytest.raises(OSError, match="disk gone"):
            loop_sink(lambda x: x.sum(), Again(), 2, size, prefetch_depth=2, device="cpu")


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                        ("4", TypeError)])
def test_bad_sink_size(bad, error):
    with pytest.raises(error, match="sink_size must be -1 .*a positive integer.*None"):
        check_sink_size(bad)
    with pytest.raises(error, match="sink_size must be -1"):
        loop_sink(lambda x: x.sum(), [torch.ones(1)], 1, bad)


def test_loop_sink_bad_input():
    with pytest.raises(ValueError, match="epochs must be an int >= 1"):
        loop_sink(lambda x: x.sum(), [torch.ones(1)], 0)
    with pytest.raises(TypeError, match="epochs must be an int >= 1"):
        loop_sink(lambda x: x.sum(), [torch.ones(1)], 2.0)
    with pytest.raises(ValueError, match="prefetch_depth \\(0: no data sink\\) must be an int >= 0"):
        loop_sink(lambda x: x.sum(), [torch.ones(1)], 1, prefetch_depth=-1)
    with pytest.raises(TypeError, match="must return the loss as a torch.Tensor .*got float"):
        loop_sink(lambda x: x.sum().item(), [torch.ones(1)], 1)
    with pytest.raises(ValueError, match="scalar loss; got shape \\(2,\\)"):
        loop_sink(lambda x: x, [torch.ones(2)], 1)
    with pytest.raises(ValueError, match="no batches"):
        loop_sink(lambda x: x.sum(), [], 1, sink_size=2)
    with pytest.raises(TypeError, match="callbacks must be callables"):
        loop_sink(lambda x: x.sum(), [torch.ones(1)], 1, callbacks=[3])
    with pytest.raises(TypeError, match="data must be an iterable"):
        loop_sink(lambda x: x.sum(), 7, 1)


def test_endless_repeats_a_reiterable_and_stops_a_one_shot_iterator():
    it = endless([1, 2, 3])
    assert [next(it) for _ in range(7)] == [1, 2, 3, 1, 2, 3, 1]
    with pytest.raises(ValueError, match="data ran out after 2 batches"):
        list(endless(iter([1, 2])))
    with pytest.raises(ValueError, match="data yielded no batches"):
        next(endless([]))


def test_progress_bar_updates_once_per_sink():
    log = loop_sink(lambda x: x.sum(), [torch.ones(1)] * 4, 2, sink_size=3, progress=True)
    assert log.steps == 6


def test_sink_info_and_loss_monitor(capsys):
    mon = LossMonitor(verbose=True)
    mon(SinkInfo(2, 8, 4, (1.0, 0.5)))
    assert capsys.readouterr().out.strip() == "epoch: 2 step: 8, loss is 0.500000"


def test_without_a_data_sink_the_loop_copies_batches_to_the_device():
    seen = []

    def step(x):
        seen.append(x.device.type)
        return torch.zeros(())

    loop_sink(step, [torch.ones(2)] * 3, 1, sink_size=-1, device="meta")
    assert seen == ["meta"] * 3
