"""ampkit.timeline: hand-computed timelines for simple cases, invariants for random ones, bad input."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ampkit.timeline import CPU_LIKE, EVENT_KINDS, GPU_LIKE, LANES, SINK_MODES, Event, SimParams, simulate, simulate_all


def bars(tl, lane):
    return [(e.kind, round(e.start, 9), round(e.end, 9)) for e in tl.lane_events(lane)]


def test_no_sinking_async_device_by_hand():
    # host: prep [0,1], blocking copy [1,1.5]; op1 launched [1.5,1.6] runs [1.6,2.6]; op2 launched [1.6,1.7]
    # runs [2.6,3.6] (device busy); the host waits [1.7,3.6] for the loss, then syncs [3.6,3.8].
    p = SimParams(prep=1.0, copy=0.5, n_ops=2, launch=0.1, op=1.0, sync=0.2)
    tl = simulate("none", p, steps=1)
    assert bars(tl, "host") == [("prep", 0, 1), ("copy", 1, 1.5), ("launch", 1.5, 1.6), ("launch", 1.6, 1.7),
                                ("wait", 1.7, 3.6), ("sync", 3.6, 3.8)]
    assert bars(tl, "device") == [("copy", 1, 1.5), ("compute", 1.6, 2.6), ("compute", 2.6, 3.6)]
    assert bars(tl, "loader") == []
    assert tl.total == pytest.approx(3.8)
    assert tl.syncs == 1
    assert tl.utilisation == pytest.approx(2.0 / 3.8)
    assert tl.steps_per_s == pytest.approx(1 / 3.8)


def test_no_sinking_synchronous_device_is_the_plain_sum():
    # On a CPU the host computes each op itself: prep + copy + n_ops * (launch + op) + sync.
    p = SimParams(prep=1.0, copy=0.5, n_ops=2, launch=0.1, op=1.0, sync=0.2, async_device=False)
    tl = simulate("none", p, steps=1)
    assert bars(tl, "host") == [("prep", 0, 1), ("copy", 1, 1.5), ("launch", 1.5, 1.6), ("wait", 1.6, 2.6),
                                ("launch", 2.6, 2.7), ("wait", 2.7, 3.7), ("sync", 3.7, 3.9)]
    assert tl.total == pytest.approx(3.9)
    assert simulate("none", p, steps=5).step_time == pytest.approx(3.9)


def test_data_sink_prep_bound_by_hand():
    # The loader needs 2 per batch, the step 1: the host waits for data; steady state 2 per step.
    p = SimParams(prep=2.0, n_ops=1, op=1.0, depth=1)
    tl = simulate("data", p, steps=3)
    assert bars(tl, "loader") == [("prep", 0, 2), ("prep", 2, 4), ("prep", 4, 6)]
    assert bars(tl, "host") == [("wait", 0, 2), ("wait", 2, 3), ("wait", 3, 4), ("wait", 4, 5), ("wait", 5, 6),
                                ("wait", 6, 7)]
    assert bars(tl, "device") == [("compute", 2, 3), ("compute", 4, 5), ("compute", 6, 7)]
    assert tl.total == pytest.approx(7.0)


def test_data_sink_queue_depth_blocks_the_loader():
    # Compute-bound (3 per step, prep 1) with a queue of 1: batch 2 is ready at 3 but can only be put
    # once the host took batch 1 (at 4); batch 3 waits for batch 2's take (at 7).
    p = SimParams(prep=1.0, n_ops=1, op=3.0, depth=1)
    tl = simulate("data", p, steps=4)
    assert bars(tl, "loader") == [("prep", 0, 1), ("prep", 1, 2), ("prep", 2, 3), ("wait", 3, 4), ("prep", 4, 5),
                                  ("wait", 5, 7)]
    assert bars(tl, "device") == [("compute", 1, 4), ("compute", 4, 7), ("compute", 7, 10), ("compute", 10, 13)]
    assert tl.total == pytest.approx(13.0)
    deeper = simulate("data", SimParams(prep=1.0, n_ops=1, op=3.0, depth=2), steps=4)
    # depth 2: batch 2's put needs batch 0 taken (at 1), batch 3's needs batch 1 taken (at 4): no waiting
    assert bars(deeper, "loader") == [("prep", 0, 1), ("prep", 1, 2), ("prep", 2, 3), ("prep", 3, 4)]
    assert deeper.total == pytest.approx(13.0)   # depth does not change a compute-bound step


def test_data_sink_handoff_costs_the_host_per_batch():
    # taking a batch from the worker thread costs the host 0.5 before it can launch the step
    p = SimParams(prep=1.0, handoff=0.5, n_ops=1, op=1.0)
    tl = simulate("data", p, steps=2)
    assert bars(tl, "host") == [("wait", 0, 1), ("handoff", 1, 1.5), ("wait", 1.5, 2.5), ("handoff", 2.5, 3),
                                ("wait", 3, 4)]
    assert bars(tl, "device") == [("compute", 1.5, 2.5), ("compute", 3, 4)]
    assert tl.total == pytest.approx(4.0)
    assert simulate("none", p, steps=2).total == pytest.approx(4.0)   # no worker, no handoff: prep + op


def test_graph_sink_one_launch_per_step():
    p = SimParams(n_ops=10, launch=1.0, op=0.5, async_device=False)
    assert simulate("data", p, steps=2).step_time == pytest.approx(15.0)       # 10 * (1 + 0.5)
    tl = simulate("data+graph", p, steps=2)
    assert tl.step_time == pytest.approx(6.0)                                   # 1 launch + 5 compute
    assert [k for k, *_ in bars(tl, "host")].count("launch") == 2
    fused = SimParams(n_ops=10, launch=1.0, op=0.5, graph_launch=2.0, graph_compute=1.0, async_device=False)
    assert simulate("data+graph", fused, steps=1).total == pytest.approx(3.0)


def test_loop_sink_lets_the_host_run_ahead_by_hand():
    p = SimParams(n_ops=1, launch=1.0, op=2.0, sync=0.5, graph_launch=1.0, graph_compute=2.0, sink_size=2)
    per_step = simulate("data+graph", p, steps=4)
    # each step: launch [h, h+1], compute [h+1, h+3], sync [h+3, h+3.5]
    assert per_step.total == pytest.approx(14.0) and per_step.syncs == 4
    loop = simulate("data+graph+loop", p, steps=4)
    assert bars(loop, "device") == [("compute", 1, 3), ("compute", 3, 5), ("compute", 6.5, 8.5),
                                    ("compute", 8.5, 10.5)]
    assert bars(loop, "host")[:4] == [("launch", 0, 1), ("launch", 1, 2), ("wait", 2, 5), ("sync", 5, 5.5)]
    assert loop.total == pytest.approx(11.0) and loop.syncs == 2


def test_callbacks_cost_once_per_sink():
    p = SimParams(n_ops=1, op=1.0, callback=0.25, sink_size=4)
    assert simulate("data+graph", p, steps=8).total == pytest.approx(8 * 1.25)
    loop = simulate("data+graph+loop", p, steps=8)
    assert loop.total == pytest.approx(8 + 2 * 0.25)
    assert [e.kind for e in loop.events].count("callback") == 2


def test_run_always_ends_with_a_sync():
    p = SimParams(n_ops=1, op=1.0, sync=0.1, sink_size=4)
    assert simulate("data+graph+loop", p, steps=6).syncs == 2   # after step 4 and after the last step


def test_presets_show_the_lesson():
    for preset in (GPU_LIKE, CPU_LIKE):
        tls = simulate_all(preset, steps=16)
        assert set(tls) == set(SINK_MODES)
        times = [tls[m].step_time for m in SINK_MODES]
        assert times == sorted(times, reverse=True)    # every sink helps with these costs
    gpu = simulate_all(GPU_LIKE, steps=16)
    assert gpu["data+graph+loop"].utilisation > gpu["none"].utilisation


@st.composite
def params(draw):
    f = st.floats(0.0, 5.0, allow_nan=False)
    return SimParams(prep=draw(f), copy=draw(f), n_ops=draw(st.integers(1, 6)), launch=draw(f), op=draw(f),
                     sync=draw(f), callback=draw(f), handoff=draw(st.just(0.0) | f), graph_launch=draw(st.none() | f),
                     graph_compute=draw(st.none() | f), depth=draw(st.integers(1, 4)),
                     sink_size=draw(st.integers(1, 6)), async_device=draw(st.booleans()))


@settings(max_examples=150, deadline=None)
@given(params(), st.integers(1, 12))
def test_invariants(p, steps):
    tls = simulate_all(p, steps)
    for mode, tl in tls.items():
        for lane in LANES:
            evs = sorted(tl.lane_events(lane), key=lambda e: e.start)
            for a, b in zip(evs, evs[1:]):
                assert a.end <= b.start + 1e-9, (mode, lane, a, b)     # one thing at a time per lane
            assert all(e.end > e.start and 0 <= e.step < steps for e in evs)
        assert all(e.end <= tl.total + 1e-9 for e in tl.events if e.lane != "loader")
        compute = tl.busy("device", ("compute",))
        expected = steps * (p.graph_compute_time if "graph" in mode else p.step_compute)
        assert math.isclose(compute, expected, rel_tol=1e-9, abs_tol=1e-9)
        assert tl.total >= expected - 1e-9
        assert 0.0 <= tl.utilisation <= 1.0 + 1e-9
    # without a handoff cost the data sink never makes it slower; the loop sink never makes the graph sink slower
    if p.handoff == 0:
        assert tls["data"].total <= tls["none"].total + 1e-9
    assert tls["data+graph+loop"].total <= tls["data+graph"].total + 1e-9
    assert tls["data+graph+loop"].syncs == -(-steps // p.sink_size)
    assert tls["none"].syncs == steps


@pytest.mark.parametrize("kw, error, match", [
    (dict(sink_size=0), ValueError, "sink_size .*must be an int >= 1"),
    (dict(sink_size=-1), ValueError, "sink_size .*must be an int >= 1"),
    (dict(sink_size=2.0), TypeError, "sink_size .*must be an int >= 1"),
    (dict(depth=0), ValueError, "depth"),
    (dict(n_ops=0), ValueError, "n_ops must be an int >= 1"),
    (dict(n_ops=True), TypeError, "n_ops must be an int >= 1"),
    (dict(prep=-1.0), ValueError, "prep must be a number >= 0"),
    (dict(prep="1us"), TypeError, "prep must be a finite number"),
    (dict(handoff=-1e-6), ValueError, "handoff must be a number >= 0"),
    (dict(op=float("nan")), ValueError, "op must be a finite number"),
    (dict(graph_compute=-1.0), ValueError, "graph_compute must be None or a number >= 0"),
])
def test_bad_params(kw, error, match):
    with pytest.raises(error, match=match):
        SimParams(**kw)


def test_bad_mode_and_steps():
    with pytest.raises(ValueError, match="mode must be one of 'none', 'data', 'data\\+graph', 'data\\+graph\\+loop'"):
        simulate("graph", SimParams())
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        simulate("none", SimParams(), steps=0)
    with pytest.raises(TypeError, match="steps must be an int >= 1"):
        simulate("none", SimParams(), steps=2.5)
    with pytest.raises(TypeError, match="params must be a SimParams"):
        simulate("none", {"prep": 1.0})


def test_event_duration():
    assert Event("host", "prep", 1.0, 3.5, 0).duration == 2.5


# ----------------------------------------------------------------------------------------------- drawing helpers
from ampkit.timeline import gantt_bars, summarise  # noqa: E402


def test_gantt_bars_merge_touching_bars_of_a_kind():
    p = SimParams(n_ops=3, launch=1.0, op=1.0, sink_size=2)
    tl = simulate("data+graph+loop", p, steps=2)
    bars = gantt_bars(tl)
    # the two graph launches touch ([0,1], [1,2]) and so do the two graph computes ([1,4], [4,7])
    assert [(e.lane, e.kind, e.start, e.end) for e in bars] == [
        ("host", "launch", 0.0, 2.0), ("host", "wait", 2.0, 7.0), ("device", "compute", 1.0, 7.0)]


def test_gantt_bars_cap_keeps_coverage_and_wide_bars():
    p = SimParams(prep=50.0, n_ops=200, launch=1.0, op=0.5, async_device=False)
    tl = simulate("none", p, steps=8)
    bars = gantt_bars(tl, max_bars=300)
    assert len(bars) <= 300 < len(tl.events)
    for lane in ("host", "device"):
        orig = sorted(tl.lane_events(lane), key=lambda e: e.start)
        lane_bars = [b for b in bars if b.lane == lane]
        assert lane_bars[0].start == orig[0].start and lane_bars[-1].end == orig[-1].end
    preps = [b for b in bars if b.kind == "prep"]
    assert len(preps) == 8 and all(b.duration == 50.0 for b in preps)   # wide bars survive untouched
    with pytest.raises(ValueError, match="max_bars must be an int >= 1"):
        gantt_bars(tl, max_bars=0)


def test_summarise_by_hand():
    p = SimParams(prep=1.0, n_ops=2, op=1.0, sink_size=3)
    tl, s = summarise("data", p, steps=4)
    assert s.step_time == pytest.approx(9 / 4) and s.speedup == pytest.approx(12 / 9)
    assert s.steps_per_s == pytest.approx(4 / 9) and s.utilisation == pytest.approx(8 / 9)
    tl, s = summarise("data+graph+loop", p)
    assert tl.steps == 8 and s.syncs_per_step == pytest.approx(3 / 8)      # default: max(8, 2 * sink_size)
    with pytest.raises(ValueError, match="mode must be one of"):
        summarise("loop", p)


def test_every_event_kind_is_listed_in_kinds():
    seen = {e.kind for p in (GPU_LIKE, CPU_LIKE, SimParams(prep=1.0, copy=1.0, n_ops=2, launch=1.0, op=1.0, sync=1.0,
                                                            callback=1.0, handoff=1.0, depth=1, sink_size=2))
            for tl in simulate_all(p, steps=4).values() for e in tl.events}
    assert seen == set(EVENT_KINDS)


def test_the_simulator_returns_data_and_leaves_colours_and_html_to_the_view():
    import ampkit.timeline as timeline
    from ampkit.widgets.sinking import KIND_COLOURS

    assert set(KIND_COLOURS) == set(EVENT_KINDS)
    assert not hasattr(timeline, "KIND_COLOURS") and not hasattr(timeline.Summary, "html")
