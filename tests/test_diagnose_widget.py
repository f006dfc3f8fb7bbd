"""The AMP doctor widget, headless: run a scenario, the report and the figure appear; the fix turns it healthy."""
import pytest
import torch

from ampkit.lessons.amp_in_practice import SCENARIOS
from ampkit.models import MLP
from ampkit.widgets.amp_doctor import AmpDoctor, headroom_figure, report_html, scales_figure


def test_run_then_fix_each_scenario_kind():
    doc = AmpDoctor()
    assert list(doc.picker.options) == list(SCENARIOS)
    for name in ("fp16 forward overflow", "log of zero", "model.half() + GradScaler"):
        doc.picker.value = name
        doc.run_button.click()
        assert "broken" in doc.output.value and doc.report.scenario == name
        assert doc.image.value[:4] == b"\x89PNG"
        doc.fix_button.click()
        assert "healthy (fix applied)" in doc.output.value


def test_my_model_choice_and_bad_scenario():
    m = MLP(4, 8, 2)
    doc = AmpDoctor("my model", model=m, batch=(torch.randn(4, 4), torch.zeros(4, dtype=torch.long)))
    assert doc.run().scenario == "my model" and "no inf/NaN" in doc.output.value
    with pytest.raises(ValueError, match="the doctor knows"):
        AmpDoctor("my model")   # without a model, "my model" is not offered
    with pytest.raises(ValueError, match="fp16 forward overflow"):
        AmpDoctor("nan everywhere")


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
