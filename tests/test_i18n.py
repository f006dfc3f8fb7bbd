"""The kit's language (ampkit.i18n) and figure text in it (ampkit.widgets.figtext): one setting, never the locale;
Chinese figures with a CJK font and no missing glyph; English figure text and one line without a font."""
import subprocess
import sys
import warnings

import pytest

from ampkit import i18n
from ampkit.widgets import figtext
from ampkit.widgets.style import new_figure, png_bytes


@pytest.fixture(autouse=True)
def _english_afterwards():
    yield
    i18n.set_language(None)


def test_the_rule_argument_then_environment_then_english(monkeypatch):
    monkeypatch.delenv("AMPKIT_LANG", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")          # the machine's locale: never read
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    assert i18n.language() == "en"
    monkeypatch.setenv("AMPKIT_LANG", "zh-CN")
    assert i18n.language() == "zh_CN"
    i18n.set_language("en")
    assert i18n.language() == "en"
    i18n.set_language(None)
    assert i18n.language() == "zh_CN"


def test_a_bad_language_names_the_choices(monkeypatch):
    with pytest.raises(ValueError, match="en, zh_CN"):
        i18n.set_language("fr")
    monkeypatch.setenv("AMPKIT_LANG", "klingon")
    with pytest.raises(ValueError, match=r"\$AMPKIT_LANG.*en, zh_CN"):
        i18n.language()


def test_tr_translates_then_formats():
    i18n.set_language("en")
    assert i18n.tr("{n} of {m}", n=1, m=2) == "1 of 2"
    assert i18n.tr("{not a field") == "{not a field"          # no fields given: no format
    i18n.set_language("zh_CN")
    assert i18n.tr("an English text no catalog has") == "an English text no catalog has"


def test_importing_the_language_module_reads_nothing_and_sets_nothing():
    code = ("import os; before = dict(os.environ); import ampkit.i18n as i; "
            "assert dict(os.environ) == before and i._chosen is None; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.fixture
def catalog(monkeypatch):
    """A small figure catalog in place of the compiled one."""
    monkeypatch.setattr(figtext, "_templates", lambda lang: (
        {"loss": "损失", "training step": "训练步"},
        [(figtext._pattern("static 2^{}: final loss {}")[0], "静态 2^{0}：最终损失 {1}"),
         (figtext._pattern("{} of {} steps skipped")[0], "{1} 步中跳过了 {0} 步")]))
    figtext._translate.cache_clear()
    yield
    figtext._translate.cache_clear()


def _figure():
    fig = new_figure(5, 3)
    ax = fig.add_subplot()
    ax.plot([0, 1], [1, 0], label="static 2^16: final loss 0.31")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss")
    ax.set_title("3 of 150 steps skipped\nloss")
    ax.legend()
    return fig, ax


def test_templates_translate_and_reorder(catalog):
    i18n.set_language("zh_CN")
    assert figtext.translate_figure_text("static 2^16: final loss 0.31") == "静态 2^16：最终损失 0.31"
    assert figtext.translate_figure_text("3 of 150 steps skipped") == "150 步中跳过了 3 步"
    assert figtext.translate_figure_text("fp16") == "fp16"          # not in the catalog: unchanged
    i18n.set_language("en")
    assert figtext.translate_figure_text("loss") == "loss"


def test_chinese_figure_with_a_cjk_font_has_no_missing_glyph(catalog):
    if figtext.cjk_font() is None:
        pytest.skip("no CJK font here (CI installs fonts-noto-cjk: .ci/run)")
    i18n.set_language("zh_CN")
    fig, ax = _figure()
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # "Glyph ... missing from font(s)" would raise here
        png = png_bytes(fig)
    assert png[:4] == b"\x89PNG"
    assert ax.get_xlabel() == "训练步" and ax.get_title() == "150 步中跳过了 3 步\n损失"
    assert ax.get_legend().get_texts()[0].get_text() == "静态 2^16：最终损失 0.31"
    assert figtext.cjk_font() in ax.xaxis.label.get_fontfamily()
    i18n.set_language("en")                   # the same figure drawn again in English: its English is back
    png_bytes(fig)
    assert ax.get_xlabel() == "training step" and ax.get_title() == "3 of 150 steps skipped\nloss"


def test_without_a_cjk_font_figures_stay_english_with_one_line(catalog, monkeypatch, capsys):
    monkeypatch.setattr(figtext, "cjk_font", lambda: None)
    monkeypatch.setattr(figtext, "_hint_shown", False)
    i18n.set_language("zh_CN")
    for _ in range(2):
        fig, ax = _figure()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            png_bytes(fig)
        assert ax.get_xlabel() == "training step" and ax.get_ylabel() == "loss"
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "fonts-noto-cjk" in printed[0]


def test_code_that_changes_a_text_after_a_draw_is_translated_again(catalog):
    if figtext.cjk_font() is None:
        pytest.skip("no CJK font here")
    i18n.set_language("zh_CN")
    fig, ax = _figure()
    png_bytes(fig)
    ax.set_title("static 2^10: final loss 0.5")
    png_bytes(fig)
    assert ax.get_title() == "静态 2^10：最终损失 0.5"


def test_math_in_a_chinese_text_becomes_plain_or_stays_english(monkeypatch):
    monkeypatch.setattr(figtext, "_templates", lambda lang: (
        {"static scale": "静态 $2^{16}$", "a ratio": "比值 $\\frac{a}{b}$"}, []))
    figtext._translate.cache_clear()
    i18n.set_language("zh_CN")
    assert figtext.translate_figure_text("static scale") == "静态 2¹⁶"   # mathtext has no CJK glyphs: plain
    assert figtext.translate_figure_text("a ratio") == "a ratio"         # math that cannot be plain: English
    figtext._translate.cache_clear()
