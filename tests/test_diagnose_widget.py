"""The AMP doctor (notebook 05), headless: the reports the view sends to the page (ampkit/widgets/js/amp_doctor.js) are
the engine's (run_scenario's DoctorReport, every scenario broken and fixed); the traits the page sets select them;
a run the page asks for is run by the kernel; the still figures stay readable."""
import json
import math

import pytest
import torch
import traitlets

from ampkit.lessons.amp_in_practice import SCENARIOS, run_scenario
from ampkit.models import MLP
from ampkit.widgets.amp_doctor import AmpDoctor, headroom_figure, report_html, report_key, scales_figure, sent_report


def _same_number(sent, value) -> bool:
    return sent == repr(value) if not math.isfinite(value) else sent == value


def check_sent(entry: dict, report) -> None:
    """One sent report against the engine's DoctorReport: words as printed, evidence as numbers."""
    assert (entry["scenario"], entry["fixed"], entry["healthy"]) == (report.scenario, report.fixed, report.healthy)
    assert (entry["diagnosis"], entry["fix"]) == (report.diagnosis, report.fix)
    ev, sent = report.evidence, entry["evidence"]
    assert sent["kind"] == ev["kind"]
    if ev["kind"] == "headroom":
        assert sent["dtype"] == ev["dtype"]
        assert [b[:2] for b in sent["bars"]] == [[n, k] for n, k in zip(ev["names"], ev["kinds"])]
        for (_, _, bits, printed, status), v in zip(sent["bars"], ev["bits"]):
            if math.isnan(v):
                assert (bits, status) == (None, "nan")
            elif v == math.inf:
                assert (bits, status) == (None, "zero")
            elif v < 0:
                assert (bits, printed, status) == (v, f"{v:+.1f}", "overflow")
            else:
                assert (bits, printed, status) == (v, f"{v:.1f}", "ok")
    if ev["kind"] == "scales":
        assert sent["log2"] == [math.log2(s) for s in ev["scales"]]
        assert sent["skipped"] == "".join("1" if s else "0" for s in ev["skipped"])
    assert len(sent.get("losses", [])) == len(ev.get("losses", []))
    assert all(_same_number(a, b) for a, b in zip(sent.get("losses", []), ev.get("losses", [])))


def test_every_report_sent_is_the_engines():
    doc = AmpDoctor()
    assert [s["name"] for s in doc.scenarios] == list(SCENARIOS) and all(s["fixable"] for s in doc.scenarios)
    assert sorted(doc.reports) == sorted(report_key(n, f) for n in SCENARIOS for f in (False, True))
    for name in SCENARIOS:
        for fixed in (False, True):
            report = run_scenario(name, fixed=fixed)               # a fresh run: the same seeded report
            check_sent(doc.reports[report_key(name, fixed)], report)
            doc.scenario, doc.fixed = name, fixed                  # what the page sets
            assert doc.report.diagnosis == report.diagnosis and doc.report.healthy == report.healthy
            assert ("healthy (fix applied)" if fixed else "broken") in doc.report_html
    assert json.loads(json.dumps(doc.reports, allow_nan=False)) == doc.reports      # plain JSON, no NaN
    assert len(json.dumps(doc.get_state(), default=str)) < 60_000


def test_nan_and_overflow_are_sent_as_marked():
    entry = sent_report(run_scenario("log of zero"))
    assert entry["evidence"]["losses"] == ["nan"] * 12 and entry["evidence"]["skipped"] == "1" * 12
    bars = sent_report(run_scenario("fp16 forward overflow"))["evidence"]["bars"]
    assert [b[4] for b in bars] == ["ok", "ok", "overflow", "overflow", "ok"]
    assert bars[2][3].startswith("-") and bars[2][2] < 0
    fake = type("R", (), dict(scenario="x", fixed=False, healthy=False, diagnosis="d", fix="f",
                              evidence={"kind": "headroom", "names": ["a", "b"], "kinds": ["Linear", "ReLU"],
                                        "bits": [float("nan"), math.inf], "dtype": "fp16"}))()
    assert [b[2:] for b in sent_report(fake)["evidence"]["bars"]] == [[None, "", "nan"], [None, "", "zero"]]


def test_a_run_the_page_asks_for_is_run_by_the_kernel():
    doc = AmpDoctor("log of zero", precompute=False)
    assert list(doc.reports) == ["log of zero|0"]
    doc.fixed = True                                  # not computed at start: the kernel runs it when selected
    assert list(doc.reports) == ["log of zero|0", "log of zero|1"] and doc.report.healthy
    doc.rerun = {"n": 3, "scenario": "transient spikes", "fixed": False}     # "Run it again" on the page
    assert doc.scenario == "transient spikes" and not doc.fixed
    assert doc.last_run == {"n": 3, "key": "transient spikes|0", "same": True}
    check_sent(doc.reports["transient spikes|0"], run_scenario("transient spikes"))
    assert doc.run(True).healthy and doc.fixed and doc.last_run["n"] == 4         # .run(), as the notebook calls it
    with pytest.raises(traitlets.TraitError, match="the doctor knows"):
        doc.scenario = "nan everywhere"
    sent = []
    doc.send = sent.append                            # the page's "hello" is answered: a kernel is behind it
    doc._handle_custom_msg({"event": "hello"}, [])  # answered by FrontView (ampkit.widgets.front), as every view
    doc._handle_custom_msg({"event": "other"}, [])
    assert sent == [{"event": "here"}]


def test_my_model_choice_and_bad_scenario():
    m = MLP(4, 8, 2)
    doc = AmpDoctor("my model", model=m, batch=(torch.randn(4, 4), torch.zeros(4, dtype=torch.long)))
    assert doc.scenarios[-1] == {"name": "my model", "fixable": False} and "my model|1" not in doc.reports
    assert doc.report.scenario == "my model" and "no inf/NaN" in doc.report_html
    doc.fixed = True                                  # my model has no run with a fix: its report is shown
    assert doc.key == "my model|0" and doc.run().scenario == "my model"
    with pytest.raises(ValueError, match="the doctor knows"):
        AmpDoctor("my model")   # without a model, "my model" is not offered
    with pytest.raises(ValueError, match="fp16 forward overflow"):
        AmpDoctor("nan everywhere")


def test_the_still_picture_is_the_report_shown():
    doc = AmpDoctor("transient spikes", fixed=True)
    still = doc.still()
    assert still.children[0].value == report_html(doc.report) and "healthy (fix applied)" in still.children[0].value
    assert still.children[1].value[:4] == b"\x89PNG"
    assert set(doc.words()) >= {"no_kernel", "rerun", "broken_run", "fixed_run", "overflow", "nan"}


def test_figures_are_readable():
    fig = headroom_figure(["a", "b"], {"fp16": [3.0, -1.0], "bf16": [120.0, 116.0]})
    assert fig.get_figwidth() >= 6.5 and fig.axes[0].get_ylabel().startswith("headroom")
    fig = scales_figure({"run": {"scales": [4.0, 2.0, 2.0], "skipped": [True, False, False]}})
    assert fig.axes[0].get_xlabel() == "step" and len(fig.axes[0].lines) == 2
    assert "&lt;" in report_html(type("R", (), dict(healthy=False, scenario="<x>", fixed=False, diagnosis="d",
                                                    fix="f"))())


def test_every_headroom_bar_is_visible():
    """An overflowing module's bar is the tallest (drawn to the top, hatched, in the overflow colour) with its
    value written on it; each tick names the module and what it is."""
    fig = headroom_figure(["net.0", "net.1", "net.2"], {"fp16": [14.5, 14.5, -0.9], "bf16": [127.0, 127.0, 111.0]},
                          kinds=["Linear", "ReLU activation", "Linear"])
    ax = fig.axes[0]
    top = ax.get_ylim()[1]
    bars = [p for p in ax.patches if p.get_height() > 0]
    assert len(bars) == 6                                   # 3 modules x 2 formats, none of height <= 0
    over = [p for p in bars if p.get_hatch() == "//"]
    assert len(over) == 1 and over[0].get_height() == top
    assert over[0].get_x() < 2 < over[0].get_x() + over[0].get_width() + 0.5    # at module 2
    texts = [t.get_text() for t in ax.texts]
    assert any("OVERFLOW" in t and "-0.9" in t for t in texts)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[1] == "net.1\nReLU\nactivation" and ticks[2] == "net.2\nLinear"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == ["fp16", "bf16"] and legend[2].startswith("overflow")
    nan = headroom_figure(["a"], {"fp16": [float("nan")]}).axes[0]
    assert [p.get_height() for p in nan.patches if p.get_hatch() == "//"] == [nan.get_ylim()[1]]
    with pytest.raises(ValueError, match="kinds must have one entry per module name"):
        headroom_figure(["a", "b"], {"fp16": [1.0, 2.0]}, kinds=["Linear"])
    with pytest.raises(ValueError, match="one value per module name"):
        headroom_figure(["a", "b"], {"fp16": [1.0]})


def test_doctor_figure_labels_kinds():
    from ampkit.lessons.amp_in_practice import run_scenario
    from ampkit.widgets.amp_doctor import report_figure

    ax = report_figure(run_scenario("fp16 forward overflow")).axes[0]
    assert "ReLU\nactivation" in ax.get_xticklabels()[1].get_text()
    assert sum(p.get_hatch() == "//" for p in ax.patches) == 2
