"""The package's own messages in Chinese (``ampkit.i18n``): exercises' verdicts, a widget readout, the doctor's
report and a validator error are Chinese when the language is zh_CN, and unchanged English otherwise."""
from __future__ import annotations

import re

import pytest
import torch

from ampkit import i18n

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def zh():
    if not (i18n.LOCALE_DIR / "zh_CN" / "LC_MESSAGES" / "ampkit.mo").exists():
        pytest.skip("ampkit.mo not compiled (make translations)")
    i18n.set_language("zh_CN")
    yield
    i18n.set_language(None)


@pytest.fixture
def en():
    i18n.set_language("en")
    yield
    i18n.set_language(None)


def _verdicts(capsys) -> list[str]:
    from ampkit.exercises import check

    check("exercise 1", ..., 3)
    check("exercise 1", 2, 3, hint="count the bits")
    check("exercise 1", 3, 3)
    return capsys.readouterr().out.splitlines()


def test_exercise_verdicts_english(en, capsys):
    assert _verdicts(capsys) == [
        "✏️ exercise 1: not answered yet — replace the `...` with your answer and run the cell again.",
        "❌ exercise 1: not yet — your answer was 2. Hint: count the bits",
        "✅ exercise 1: correct.",
    ]


def test_exercise_verdicts_chinese(zh, capsys):
    lines = _verdicts(capsys)
    assert len(lines) == 3 and all(CJK.search(line) for line in lines)
    assert "exercise 1" in lines[0] and "2" in lines[1] and "count the bits" in lines[1]


def test_solution_header(en):
    from ampkit.exercises import solution_html

    assert "— computed here (click to reveal)" in solution_html("Exercise 1")
    i18n.set_language("zh_CN")
    assert CJK.search(solution_html("Exercise 1")) or not _compiled()


def _compiled() -> bool:
    return (i18n.LOCALE_DIR / "zh_CN" / "LC_MESSAGES" / "ampkit.mo").exists()


def _scaler_readout() -> str:
    from ampkit.widgets.scaling import VisualLossScaler

    v = VisualLossScaler(torch.tensor([2.0**-30, 2.0**-20, 1e-3]), log2_scale=0)
    return v.readout_html, v.text["format"]


def test_widget_readout_english(en):
    readout, label = _scaler_readout()
    assert label == "format"
    assert "<b>scale 2<sup>0</sup> in float16</b>: " in readout
    assert "flushed to zero 33.33 %" in readout and "safe window (no overflow, ≤ 0.1 % flushed): " in readout


def test_widget_readout_chinese(zh):
    readout, label = _scaler_readout()
    assert CJK.search(label)
    text = re.sub("<[^>]+>", "", readout)
    assert CJK.search(text) and "33.33%" in text and "33.33 %" not in text   # Chinese: no space before %
    assert "flushed" not in text and "safe window" not in text


def test_doctor_report(monkeypatch, capsys):
    from ampkit import doctor

    monkeypatch.setattr(doctor, "run_checks", lambda: [doctor.check_python((3, 11, 0))])
    i18n.set_language("en")
    try:
        assert doctor.main() == 0
        english = capsys.readouterr().out
        assert english.splitlines()[0] == "ampkit doctor"
        assert "[ OK ] python: 3.11.0 (need >= 3.10)" in english
        assert "All required checks passed: you are ready for the workshop." in english
        if not _compiled():
            return
        i18n.set_language("zh_CN")
        assert doctor.main() == 0
        chinese = capsys.readouterr().out
        assert CJK.search(chinese.splitlines()[0]) and "3.11.0" in chinese and "3.10" in chinese
        assert "ready for the workshop" not in chinese and CJK.search(chinese.splitlines()[-1])
    finally:
        i18n.set_language(None)


def test_validator_error(en):
    from ampkit.formats import resolve_format

    with pytest.raises(ValueError, match=r"^unsupported format 'fp17'; supported formats: float32, float16"):
        resolve_format("fp17")
    if not _compiled():
        return
    i18n.set_language("zh_CN")
    with pytest.raises(ValueError) as err:
        resolve_format("fp17")
    assert CJK.search(str(err.value)) and "'fp17'" in str(err.value) and "float16" in str(err.value)
