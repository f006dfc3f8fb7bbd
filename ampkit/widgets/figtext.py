"""Figure text in the kit's language: every figure of every notebook, translated when it is drawn.

Figures keep English in their code (the Chinese notebooks run the same code). :func:`localize` runs at the start
of every draw of a kit figure (``style.new_figure``): in Chinese it replaces each text it finds in the catalog's
``figure`` context and gives that text a CJK font as a fallback after the figure's own font, for this text only
(no ``rcParams`` change). A catalog entry may be a template: ``"static 2^{}: final loss {}"`` matches any text of
that shape and its translation places the parts with ``{0}``, ``{1}`` (or ``{}`` in order).

Without a CJK font the text stays English and one line says how to install one (never boxes for characters):

    draw(fig): if language() == "en": restore English
               elif cjk_font() is None: keep English; print FONT_HINT once
               else: for each text t: t <- translation(t.english), fonts <- [t's fonts..., CJK font]
"""
from __future__ import annotations

import re
import string
from functools import lru_cache

from matplotlib import font_manager
from matplotlib.text import Text

from ampkit.i18n import catalog, language, mark, tr

__all__ = ["CJK_FAMILIES", "FONT_HINT", "cjk_font", "translate_figure_text", "localize"]

#: CJK fonts that cover Simplified Chinese, best first (Debian/Ubuntu, Fedora, macOS, Windows)
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Zen Hei",
                "WenQuanYi Micro Hei", "Droid Sans Fallback", "PingFang SC", "Hiragino Sans GB", "Heiti SC",
                "Microsoft YaHei", "SimHei", "Noto Sans CJK JP")
FONT_HINT = mark("No Chinese (CJK) font found, so figure text stays in English. Install one and restart the kernel: "
             "sudo apt install fonts-noto-cjk (Debian/Ubuntu), sudo dnf install google-noto-sans-cjk-fonts (Fedora); "
             "macOS and Windows have one already.")
_CTX = "figure\x04"
_LETTERS = re.compile(r"[A-Za-z]{2}")
_hint_shown = False
_changed_any = False   # some text was ever translated: English must then be restored on a draw


@lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The first of :data:`CJK_FAMILIES` that matplotlib can use, or ``None``.

    A font installed after matplotlib built its font cache is found on disk and added to the font list (as a
    rebuilt cache would have it); nothing else changes."""
    known = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in known:
            return family
    fresh = font_manager.FontManager()   # scans the system's font folders now (~0.3 s, once)
    for family in CJK_FAMILIES:
        paths = sorted({f.fname for f in fresh.ttflist if f.name == family})
        if paths:
            for path in paths:
                font_manager.fontManager.addfont(path)
            return family
    return None


def _pattern(template: str) -> tuple[re.Pattern, int]:
    parts, fields = [], 0
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append("(.+?)")
            fields += 1
    return re.compile("^" + "".join(parts) + "$", re.DOTALL), fields


@lru_cache(maxsize=4)
def _templates(lang: str) -> tuple[dict[str, str], list[tuple[re.Pattern, str]]]:
    messages = getattr(catalog(lang), "_catalog", {})   # gettext.GNUTranslations keeps "ctx\x04msgid" -> msgstr
    exact, shaped = {}, []
    plain = {}   # the package's mark()-ed messages without fields: figure text held in a variable
    for key, value in messages.items():
        if isinstance(key, str) and value and "\x04" not in key and key and "{" not in key:
            plain[key] = value
        if not isinstance(key, str) or not key.startswith(_CTX) or not value:
            continue
        msgid = key[len(_CTX):]
        pattern, fields = _pattern(msgid)
        if fields:
            shaped.append((pattern, value))
        else:
            exact[msgid.replace("{{", "{").replace("}}", "}")] = value.replace("{{", "{").replace("}}", "}")
    shaped.sort(key=lambda p: -len(p[0].pattern))   # the most specific shape first
    for key, value in plain.items():
        exact.setdefault(key, value)
    return exact, shaped


@lru_cache(maxsize=4096)
def _translate(text: str, lang: str) -> str | None:
    exact, shaped = _templates(lang)
    if text in exact:
        return exact[text]
    lines = text.split("\n")
    if len(lines) > 1:   # a multi-line text: a multi-line template as a whole, else each line on its own
        for pattern, value in shaped:
            m = pattern.match(text) if "\n" in pattern.pattern else None
            if m:
                return value.format(*(_translate(g, lang) or g for g in m.groups()))
        done = [_translate(line, lang) for line in lines]
        return None if all(d is None for d in done) else "\n".join(d or line for d, line in zip(done, lines))
    for pattern, value in shaped:
        m = pattern.match(text)
        if m:
            # a field's text may be figure text itself (a "with the fix" inside a title): translated too
            return value.format(*(_translate(g, lang) or g for g in m.groups()))
    return None


_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_POWER = re.compile(r"\$\s*([0-9.]+|[A-Za-z])\s*\^\s*\{?\s*([-+−]?[0-9]+)\s*\}?\s*\$")
_SUPERSCRIPT = str.maketrans("0123456789-+−", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺⁻")
_SYMBOLS = {r"\times": "×", r"\approx": "≈", r"\cdot": "·", r"\leq": "≤", r"\geq": "≥", r"\,": " ",
            r"\sqrt": "√", r"\infty": "∞", r"\Delta": "Δ", r"\sigma": "σ"}


def plain_math(text: str) -> str | None:
    """Chinese text cannot hold mathtext (matplotlib draws a text with ``$`` in its math fonts, which have no CJK
    glyphs): the simple math the kit writes becomes plain Unicode (``$2^{16}$`` -> 2¹⁶); ``None`` when some is left.

    >>> plain_math("静态 $2^{-14}$ 与 $2^{16}$"), plain_math("$\\frac{a}{b}$ 倍")
    ('静态 2⁻¹⁴ 与 2¹⁶', None)
    """
    text = _POWER.sub(lambda m: m.group(1) + m.group(2).translate(_SUPERSCRIPT), text)
    for tex, char in _SYMBOLS.items():
        text = text.replace(tex, char)
    text = re.sub(r"\$([^$\\{}^_]*)\$", r"\1", text)   # $x$ with nothing mathematical left in it
    return None if "$" in text or "\\" in text else text


def translate_figure_text(text: str, lang: str | None = None) -> str:
    """``text`` as a figure in ``lang`` (default: the current language) shows it; unchanged when not in the
    catalog (numbers, names, code), and English when its translation keeps math that Chinese text cannot hold."""
    lang = lang or language()
    if lang == "en" or not _LETTERS.search(text):
        return text
    done = _translate(text, lang) or text
    if "$" in done and _CJK.search(done):
        done = plain_math(done) or text
    return done


def localize(artist) -> None:
    """Translate every text of ``artist`` (a figure, or any artist in one) into the current language (see the module
    docstring); idempotent."""
    global _hint_shown, _changed_any
    lang = language()
    if lang == "en" and not _changed_any:   # the common case, on every redraw: nothing to translate or restore
        return
    font = None
    for t in artist.findobj(Text):
        shown = t.get_text()
        if getattr(t, "_ampkit_shown", None) != shown:   # new text (or changed by the code): remember its English
            t._ampkit_english = shown
        english = t._ampkit_english if hasattr(t, "_ampkit_english") else shown
        target = translate_figure_text(english, lang) if lang != "en" else english
        if target != english:
            font = font or cjk_font()
            if font is None:
                if not _hint_shown:
                    _hint_shown = True
                    print(tr(FONT_HINT))
                target = english
        if _CJK.search(target):   # translated here, or Chinese already (a tr() message a figure shows)
            font = font or cjk_font()
            if font is not None and font not in t.get_fontfamily():
                t.set_fontfamily([*t.get_fontfamily(), font])
        if target != shown:
            _changed_any = True
            t.set_text(target)
        t._ampkit_shown = target
