"""ampkit.sinking.workload, .measure and .bench: the lesson's loader and network, op counting, timing, the
calibration, real runs of the four modes and the simulator's predictions next to them."""
from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F
from _sink_threads import no_thread_left_behind  # noqa: F401  (autouse fixture)

from ampkit.data import batches
from ampkit.sinking import (
    BatchLoader,
    Calibration,
    ManySmallOps,
    ModeMeasurement,
    RunCosts,
    SinkBench,
    SinkLog,
    count_ops,
    predict_vs_measured,
    speedup,
)
from ampkit.sinking import mode_runs as sink_bench
from ampkit.sinking.measure import best_per_call, median_per_call
from ampkit.timeline import simulate


def test_batch_loader_passes_reshuffle_reproducibly():
    X, y = torch.arange(10.0)[:, None], torch.arange(10)
    a, b = BatchLoader(X, y, 3, seed=1), BatchLoader(X, y, 3, seed=1)
    pa = [torch.cat([t for _, t in a]).tolist() for _ in range(2)]
    pb = [torch.cat([t for _, t in b]).tolist() for _ in range(2)]
    assert pa == pb and pa[0] != pa[1] and sorted(pa[0]) == list(range(10)) and len(a) == 4
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        BatchLoader(X, y, 0)
    with pytest.raises(TypeError, match="batch_size must be an int >= 1"):
        BatchLoader(X, y, 2.0)
    with pytest.raises(ValueError, match="prep_seconds must be a number >= 0"):
        BatchLoader(X, y, 2, prep_seconds=-1)
    with pytest.raises(TypeError, match="prep_seconds must be a finite number"):
        BatchLoader(X, y, 2, prep_seconds="slow")
    with pytest.raises(TypeError, match="X and y must be torch tensors"):
        BatchLoader([1], y, 2)


def test_batch_loader_pass_k_is_ampkit_data_batches_seeded_by_seed_and_k():
    X, y = torch.randn(37, 3), torch.arange(37)
    loader = BatchLoader(X, y, 8, seed=3)
    for k in range(2):
        got = [t.tolist() for _, t in loader]
        assert got == [t.tolist() for _, t in batches(X, y, 8, seed=3 * 100_003 + k)]
    assert loader.passes == 2


def test_many_small_ops_and_count_ops():
    m = ManySmallOps(width=4, depth=3)
    x = torch.ones(2, 4)
    with torch.no_grad():
        assert count_ops(m, x) == 15                 # 3 x (select w_i, mul, select b_i, add, tanh)
    assert count_ops(m, x) == 18                     # + autograd saves each tanh output (a detach)
    assert count_ops(lambda: F.mse_loss(m(x), x).backward()) > 2 * 9
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        ManySmallOps(depth=0)


def test_bench_calibrate_and_compare_structure():
    bench = SinkBench(prep_seconds=0.0, compile=False, n_samples=64, depth=2, width=8)
    cal = bench.calibrate(repeats=1)
    assert isinstance(cal, Calibration) and cal.graph_step is None and not cal.async_device
    assert cal.n_ops == count_ops(bench.models[False].step, *bench.sample) and cal.copy == 0.0
    assert all(v >= 0 for v in (cal.launch, cal.op, cal.sync, cal.callback, cal.prep, cal.eager_step, cal.handoff))
    assert "launch" in "\n".join(cal.lines())
    p = cal.params(sink_size=4)
    assert p.n_ops == cal.n_ops and p.sink_size == 4 and p.async_device is False and p.handoff == cal.handoff
    meas = bench.measure(steps=8, sink_size=4, rounds=3)
    assert list(meas) == ["none", "data", "data+graph", "data+graph+loop"]
    assert meas["data+graph+loop"].syncs == 2 and meas["none"].syncs == 8
    for m in meas.values():                  # the median of 3 interleaved runs, every run kept in order
        assert len(m.runs) == 3 and m.step_time == sorted(m.runs)[1] and m.spread == (min(m.runs), max(m.runs))
    rows = predict_vs_measured(cal, meas, sink_size=4)
    assert [r["mode"] for r in rows] == list(meas) and rows[0]["measured_ratio"] == 1.0
    assert all(set(r) >= {"measured", "predicted", "measured_ratio", "predicted_ratio", "error"} for r in rows)


def test_best_per_call_keeps_the_fastest_repeat():
    delays = iter([0.03, 0.0, 0.03])
    assert best_per_call(lambda: time.sleep(next(delays)), calls=1, repeats=3) < 0.02
    slept = best_per_call(lambda: time.sleep(0.002), calls=2, repeats=2)
    assert slept >= 0.002                                   # per call, not per repeat


def test_median_per_call_keeps_the_middle_repeat_not_the_fastest():
    delays = iter([0.03, 0.0, 0.015])
    got = median_per_call(lambda: time.sleep(next(delays)), calls=1, repeats=3)
    assert 0.015 <= got < 0.03                              # the middle repeat; best_per_call would give < 0.015
    assert median_per_call(lambda: time.sleep(0.002), calls=2, repeats=1) >= 0.002
    with pytest.raises(ValueError, match="repeats must be an int >= 1"):
        median_per_call(lambda: None, calls=1, repeats=0)


def test_calibrate_reports_the_median_repeat(monkeypatch):
    # calibrate() must use the median of its repeats (the real runs are medians too), not the fastest
    bench = SinkBench(prep_seconds=0.0, compile=False, n_samples=64, depth=2, width=8)
    used = []
    real = sink_bench.median_per_call
    monkeypatch.setattr(sink_bench, "median_per_call", lambda *a, **k: used.append(a[1:3]) or real(*a, **k))
    bench.calibrate(repeats=3)
    assert len(used) == 7 and all(repeats == 3 for _, repeats in used)   # launch, step, sync, callback, prep, 2 handoff


def test_predict_vs_measured_absolute_error():
    # CPU-like: eager step = 10 ops x (1 + 1) us = 20 us; a simulator 20 % fast in every mode gets every ratio right
    cal = Calibration("cpu", 1e-6, 1e-6, 10, 0.0, 0.0, 0.0, 0.0, 2e-5, 5e-6, 1.0, "", False)
    meas = {"none": ModeMeasurement("none", 2.5e-5, 10, 10, 0.0, (2.5e-5, 2e-5)),
            "data+graph": ModeMeasurement("data+graph", 6.25e-6, 10, 10, 0.0, (6.25e-6, 5e-6))}
    rows = predict_vs_measured(cal, meas)
    assert [r["abs_error"] for r in rows] == pytest.approx([-0.2, -0.2])
    assert [r["error"] for r in rows] == pytest.approx([0.0, 0.0])             # the ratios hide it
    assert rows[0]["abs_error_range"] == pytest.approx((-0.2, 0.0))           # run by run: 25 us and 20 us
    assert "abs_error_range" not in predict_vs_measured(cal, {"none": ModeMeasurement("none", 2e-5, 1, 1, 0.0)})[0]


def test_run_costs_add_up_and_compare_with_the_calibration():
    bench = SinkBench(prep_seconds=1e-3, compile=False, n_samples=64, depth=2, width=8)
    cal = bench.calibrate(repeats=1)
    c = bench.in_run_costs(steps=4, rounds=1, pause_repeats=3)
    assert isinstance(c, RunCosts) and c.steps == 4
    assert c.prep + c.step + c.rest == pytest.approx(c.total)
    assert c.prep >= 1e-3 and c.step > 0 and c.step_alone > 0 and c.step_after_pause > 0
    diff = c.differences(cal)
    sim_none = simulate("none", cal.params(), 4).step_time
    assert sum(diff.values()) == pytest.approx(c.total - sim_none)            # the pieces explain the whole gap
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        bench.in_run_costs(steps=0)


def test_predict_vs_measured_by_hand():
    # CPU-like: no data, eager step = 10 ops x (1 + 1) us = 20 us; graph step 5 us; sync and callbacks free.
    cal = Calibration("cpu", 1e-6, 1e-6, 10, 0.0, 0.0, 0.0, 0.0, 2e-5, 5e-6, 1.0, "", False)
    meas = {"none": ModeMeasurement("none", 2e-5, 10, 10, 0.0),
            "data+graph": ModeMeasurement("data+graph", 1e-5, 10, 10, 0.0)}
    rows = predict_vs_measured(cal, meas)
    assert rows[1]["predicted"] == pytest.approx(5e-6)
    assert rows[1]["predicted_ratio"] == pytest.approx(0.25) and rows[1]["measured_ratio"] == pytest.approx(0.5)
    assert rows[1]["error"] == pytest.approx(-0.5)


def test_measure_keeps_every_run_and_reports_the_lower_median(monkeypatch):
    bench = SinkBench(prep_seconds=0.0, compile=False, n_samples=64, depth=2, width=8)
    times = iter([5.0, 1.0, 3.0, 2.0] * 2)

    def fake_loop_sink(step, data, epochs, sink_size, callbacks, **kw):
        log = SinkLog(epochs, sink_size, losses=[0.0] * 4, syncs=4)
        log.seconds = next(times) * 4
        return log

    monkeypatch.setattr(sink_bench, "loop_sink", fake_loop_sink)
    meas = bench.measure(steps=4, modes=("none", "data"), rounds=4)
    assert meas["none"].runs == (5.0, 3.0, 5.0, 3.0) and meas["data"].runs == (1.0, 2.0, 1.0, 2.0)
    assert meas["none"].step_time == 3.0 and meas["data"].step_time == 1.0      # lower median of an even count
    with pytest.raises(ValueError, match="rounds must be an int >= 1"):
        bench.measure(rounds=0)


def test_predict_vs_measured_ranges_round_by_round():
    cal = Calibration("cpu", 1e-6, 1e-6, 10, 0.0, 0.0, 0.0, 0.0, 2e-5, 5e-6, 1.0, "", False)
    meas = {"none": ModeMeasurement("none", 2e-5, 10, 10, 0.0, (2e-5, 4e-5)),
            "data+graph": ModeMeasurement("data+graph", 1e-5, 10, 10, 0.0, (1e-5, 1e-5))}
    rows = predict_vs_measured(cal, meas)
    assert rows[0]["measured_ratio_range"] == (1.0, 1.0) and rows[0]["error_range"] == (0.0, 0.0)
    assert rows[1]["measured_ratio_range"] == pytest.approx((0.25, 0.5))
    assert rows[1]["error_range"] == pytest.approx((-0.5, 0.0))                 # predicted ratio 0.25
    no_runs = predict_vs_measured(cal, {k: ModeMeasurement(k, m.step_time, 10, 10, 0.0) for k, m in meas.items()})
    assert "error_range" not in no_runs[1]


def test_speedup_round_by_round():
    meas = {"none": ModeMeasurement("none", 4.0, 8, 8, 0.0, (4.0, 6.0, 4.0, 8.0)),
            "data": ModeMeasurement("data", 2.0, 8, 8, 0.0, (2.0, 2.0, 4.0, 2.0))}
    r = speedup(meas, "data")
    assert (r.median, r.low, r.high, r.repeats) == (2.0, 1.0, 4.0, 4)
    assert speedup(meas, "none", "data").phrase("data").startswith("3.0x slower than data")   # lower median
    with pytest.raises(ValueError, match="no measurement of mode 'data\\+graph'"):
        speedup(meas, "data+graph")
