"""ampkit.widgets.fp8: the amax-history explorer drawn in the browser, headless — what the page is sent for every
setting equals :func:`explorer_state` (random settings), the controls, bad input, the size of the saved state."""
import html
import json
import math
import random
import re

import pytest
import torch
import traitlets

from ampkit.fp8 import ALGOS, delayed_scales, fp8_max
from ampkit.lessons.fp8_scaling import AmaxRecording, record_amax_run
from ampkit.widgets.fp8 import MARGINS, AmaxHistoryExplorer, explorer_state, readout_html, run_code, run_decode


@pytest.fixture(scope="module")
def rec():
    return record_amax_run(steps=50, spikes={20: 16.0}, grad_spikes={30: 32.0})


@pytest.fixture(scope="module")
def view(rec):
    return AmaxHistoryExplorer(rec, history_len=8)


def page_selection(sent: dict, tensor: str, history: int, algo: str, margin: int) -> dict:
    """What js/amax.js's selected() reads from the sent state (the same decoding, in Python)."""
    t = sent["tensors"][tensor]
    kept = [float(v) for v in t["kept"][margin].split()]
    sid = run_decode(t["pick"][margin][algo])[history - 1]
    jit_id, jit_n, jit_flushed = t["jit"][margin].split("|")
    lid, n, worst, worst_pct, flushed = t["readout"][margin].split(";")[sid].split("|")
    steps = sent["sat_lists"][int(lid)]
    return {"kept": [kept[i] for i in run_decode(t["series"][sid])],
            "jit": [kept[i] for i in run_decode(t["series"][int(jit_id)])],
            "sat": [int(i) for i in steps.split(",")] if steps else [], "n": n, "worst": worst,
            "worst_pct": worst_pct, "flushed": flushed, "jit_n": jit_n, "jit_flushed": jit_flushed}


def page_readout(words: dict, sel: dict, tensor: str, fmt: str, history: int, algo: str, margin: int, total: int
                 ) -> str:
    """The readout's text as js/amax.js assembles it from the view's words and the sent numbers."""
    def fill(template: str, **fields) -> str:
        return re.sub(r"</?[a-z]+>", "", template.format(**fields))
    worst = fill(words["worst"], step=sel["worst"], pct=sel["worst_pct"]) if sel["sat"] else words["none"]
    return (fill(words["head"], tensor=tensor, fmt=fmt, history=history, algo=algo, margin=margin) + " "
            + fill(words["saturated"], n=sel["n"], total=total) + " " + fill(words["flushed"], worst=worst) + " "
            + sel["flushed"] + "." + fill(words["jit"], n=sel["jit_n"], pct=sel["jit_flushed"]))


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[a-z/][^>]*>", "", markup))


def test_run_code_round_trips():
    rng = random.Random(0)
    for _ in range(300):
        values = [rng.choice([rng.randrange(5), rng.randrange(200)]) for _ in range(rng.randrange(0, 40))]
        for i in range(1, len(values)):          # runs of copies and of +1 steps, as the scale series have
            if rng.random() < 0.5:
                values[i] = values[i - 1] + rng.choice([0, 1])
        assert run_decode(run_code(values)) == values
    assert run_code([5, 6, 7, 7, 7, 7]) == "5+3 7*3" and run_code([]) == ""


def assert_sent_is_the_engines(view: AmaxHistoryExplorer, keys: list) -> None:
    """For each setting, what the page selects — the line of the largest value the delayed scale keeps,
    just-in-time's, the saturating steps and the readout — equals explorer_state's."""
    sent, rec = view.states, view.rec
    for key in keys:
        s = explorer_state(rec, *key)
        sel = page_selection(sent, *key)
        top = fp8_max(s.fmt)
        assert sel["kept"] == pytest.approx(torch.log2(top / s.delayed_scale.double()).tolist(), abs=5e-4), key
        assert sel["jit"] == pytest.approx(torch.log2(top / s.current_scale.double()).tolist(), abs=5e-4), key
        assert sel["sat"] == torch.nonzero(s.delayed_saturated > 0).flatten().tolist(), key
        assert int(sel["n"]) == s.saturating_steps and (not sel["sat"] or int(sel["worst"]) == s.worst_step)
        assert page_readout(view.words(), sel, key[0], s.fmt, *key[1:], rec.steps) == text_of(readout_html(s)), key
        t = sent["tensors"][key[0]]
        amax = [float(v) for v in t["amax"].split()]            # Python's float() reads "-inf", "inf", "nan"
        want = torch.log2(s.amax.double()).tolist()
        assert [str(a) for a in amax if not math.isfinite(a)] == [str(a) for a in want if not math.isfinite(a)]
        assert [a for a in amax if math.isfinite(a)] == pytest.approx([a for a in want if math.isfinite(a)],
                                                                      abs=5e-4)
        lo, hi = t["ylim"]
        assert lo <= min(sel["kept"] + sel["jit"]) and max(sel["kept"] + sel["jit"]) <= hi


def test_random_settings_sent_equal_the_engine(rec, view):
    rng = random.Random(30)
    keys = [(t, rng.randint(1, rec.steps), rng.choice(ALGOS), rng.choice(MARGINS)) for t in rec.amax
            for _ in range(150)]
    keys += [(t, h, a, m) for t in rec.amax for h in (1, rec.steps) for a in ALGOS for m in (0, MARGINS[-1])]
    assert_sent_is_the_engines(view, keys)


def test_an_amax_of_zero_inf_or_nan():
    """Step 3's amax is 0 (the layer did not run), step 5's inf, step 7's NaN: every setting is still the engine's,
    and the axis spans the finite values."""
    vals = torch.rand(12, 64, generator=torch.Generator().manual_seed(0))
    vals[3], vals[5, -1], vals[7, -1] = 0.0, float("inf"), float("nan")
    vals = vals.sort(dim=1).values
    odd = AmaxRecording(amax={"activation": vals[:, -1].clone()}, values={"activation": vals},
                        formats={"activation": "e4m3"}, spikes={}, grad_spikes={})
    view = AmaxHistoryExplorer(odd, history_len=2)
    assert view.states["tensors"]["activation"]["amax"].split()[3::2][:3] == ["-inf", "inf", "nan"]
    assert_sent_is_the_engines(view, [("activation", h, a, m) for h in range(1, 13) for a in ALGOS for m in MARGINS])


def test_controls_select_the_engines_state(rec, view):
    for h in range(1, rec.steps + 1):
        view.history.value = h
        assert torch.equal(view.state.delayed_scale, delayed_scales(rec.amax["activation"], "e4m3", h, "max"))
        assert view.readout_html == readout_html(explorer_state(rec, "activation", h, "max", 0))
    view.history.value = 4
    assert "saturated at" in view.readout_html and view.state.saturating_steps >= 1 and view.state.worst_step == 20
    for algo in ("most_recent", "max"):
        for margin in range(0, 4):
            view.algo.value, view.margin.value = algo, margin
            assert (view.state.algo, view.state.margin) == (algo, margin) and f"margin {margin}" in view.readout_html
            assert (view.amax_algo, view.scale_margin) == (algo, margin)
    view.tensor.value = "gradient"
    assert view.state.fmt == "e5m2" and "gradient in e5m2" in view.readout_html
    view.history.value, view.algo.value = 4, "max"
    counts = []                                   # a larger margin never saturates more steps
    for m in range(0, 6):
        view.margin.value = m
        counts.append(view.state.saturating_steps)
    assert counts == sorted(counts, reverse=True)
    assert int((view.state.current_saturated > 0).sum()) == 0   # just-in-time: its amax is the step's own
    view.tensor.value, view.margin.value, view.history.value = "activation", 0, 8


def test_bad_input_names_the_choices(rec, view):
    with pytest.raises(ValueError, match="activation"):
        explorer_state(rec, "weights", 4, "max", 0)
    with pytest.raises(ValueError):
        explorer_state(rec, "activation", 0, "max", 0)
    with pytest.raises(ValueError, match="'activation', 'gradient'"):
        AmaxHistoryExplorer(rec, tensor="weights")
    for attr, value, choices in (("history", 0, "1 … 50"), ("history", rec.steps + 1, "1 … 50"),
                                 ("margin", 9, "0, 1, 2"), ("algo", "mean", "'max', 'most_recent'"),
                                 ("tensor", "weights", "'activation', 'gradient'")):
        with pytest.raises(traitlets.TraitError, match=re.escape(choices)):
            getattr(view, attr).value = value
    assert (view.history_len, view.scale_margin, view.amax_algo, view.amax_tensor) == (8, 0, "max", "activation")


def test_saved_state_is_small_and_deterministic(rec, view):
    size = len(json.dumps(view.states))
    assert size < 45_000, size            # 2 tensors x 50 histories x 2 algorithms x 9 margins (1800 settings)
    again = AmaxHistoryExplorer(rec, history_len=8)
    assert again.states == view.states
    full = len(json.dumps(view.get_state(), default=str))
    assert full < 120_000, full


def test_still_picture(view):
    still = view.still()
    assert still.children[1].value[:4] == b"\x89PNG" and "saturated at" in still.children[0].value
    assert not math.isnan(view.states["tensors"]["gradient"]["ylim"][0])
