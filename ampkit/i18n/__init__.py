"""The kit's language: English (the source) or Simplified Chinese, chosen by one setting (every notebook).

The generated Chinese notebooks (``notebooks/zh_CN/``) set it in their first cell. Messages the package prints or
shows (widget labels and readouts, the doctor's report, the exercises' messages, errors a learner reads) pass
through ``tr``; figure text is translated when a figure is drawn (``ampkit.widgets.figtext``). The catalogs are
gettext catalogs (``ampkit/locale/zh_CN/LC_MESSAGES/ampkit.po``, compiled to ``ampkit.mo`` by
``make translations``); they are read with the standard library's ``gettext``.

The rule, in order (the machine's locale is never read):

    language = set_language(...)            if it was called
             = $AMPKIT_LANG                 if it is set (make lab LANG=zh_CN sets it for the kernels)
             = "en"
    tr(msgid, **fields) = catalog(language).get(msgid, msgid).format(**fields)   (no fields: no format)

>>> set_language("en"); tr("{n} steps skipped", n=3)
'3 steps skipped'
>>> set_language("zh-CN"); language()
'zh_CN'
>>> set_language(None)   # back to $AMPKIT_LANG or English
"""
from __future__ import annotations

import gettext
import os
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from ampkit._kit import LANGUAGES as _LANGUAGES

__all__ = ["LANGUAGES", "ENV_VAR", "DOMAIN", "LOCALE_DIR", "set_language", "language", "tr", "mark", "catalog",
           "is_chinese", "Word", "Wide", "format_wide"]

#: the languages the kit speaks; English is the source, the others come from gettext catalogs (one home: ampkit._kit,
#: which the room's tools share)
LANGUAGES = _LANGUAGES
#: the environment variable read when ``set_language`` was not called
ENV_VAR = "AMPKIT_LANG"
DOMAIN = "ampkit"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
_ALIASES = {"en": "en", "en_us": "en", "en_gb": "en", "english": "en", "c": "en",
            "zh_cn": "zh_CN", "zh": "zh_CN", "zh_hans": "zh_CN", "zh_hans_cn": "zh_CN", "chinese": "zh_CN"}
_chosen: str | None = None


def _normalize(lang: str, where: str) -> str:
    key = str(lang).strip().split(".")[0].replace("-", "_").lower()   # "zh-CN", "zh_CN.UTF-8", "ZH_cn"
    if key not in _ALIASES:
        raise ValueError(f"{where}: unknown language {lang!r}; the kit speaks {', '.join(LANGUAGES)} "
                         f"(English, Simplified Chinese)")
    return _ALIASES[key]


def set_language(lang: str | None) -> None:
    """Choose the kit's language for this Python process: ``"en"`` or ``"zh_CN"`` (``"zh-CN"``, ``"zh"`` too).
    ``None`` forgets the choice (then ``$AMPKIT_LANG``, else English).

    >>> set_language("zh-CN"); language()                  # any common spelling, normalized
    'zh_CN'
    >>> set_language(None)                                  # forget it: $AMPKIT_LANG, else English
    """
    global _chosen
    _chosen = None if lang is None else _normalize(lang, "set_language")


def language() -> str:
    """The language in force now (see the rule in the module docstring).

    >>> set_language("en"); language()
    'en'
    >>> set_language(None)
    """
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV_VAR, "").strip()
    return _normalize(env, f"${ENV_VAR}") if env else "en"


def is_chinese() -> bool:
    """Whether the language in force is Simplified Chinese.

    >>> set_language("zh"); is_chinese()
    True
    >>> set_language(None)
    """
    return language() == "zh_CN"


@lru_cache(maxsize=None)
def catalog(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of ``lang`` (a ``NullTranslations`` for English or a missing catalog).

    >>> catalog("zh_CN").gettext("not measured"), catalog("en").gettext("not measured")
    ('未测量', 'not measured')
    """
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang], fallback=True)


def tr(msgid: str, /, **fields) -> str:
    """``msgid`` in the current language; with ``fields``, ``str.format``-ed after translation.

    The argument must be a literal string (the catalog extractor reads it from the source): write
    ``tr("{n} steps", n=n)``, never ``tr(f"{n} steps")``.

    >>> set_language("zh_CN"); tr("not measured")
    '未测量'
    >>> set_language("en"); tr("not measured")
    'not measured'
    >>> set_language("zh_CN"); tr("")                # an empty string stays empty (gettext gives the catalog's header)
    ''
    >>> set_language(None)
    """
    if not msgid:
        return msgid
    text = catalog(language()).gettext(msgid)
    return text.format(**fields) if fields else text


def mark(msgid: str, /) -> str:
    """Mark a literal for the catalog without translating it here (it is translated later, where it is shown:
    ``tr(variable)`` or a figure's text). Returns ``msgid`` unchanged.

    >>> label = mark("not measured")                # collected by the extractor, still English here
    >>> label, catalog("zh_CN").gettext(label)      # translated where it is shown: tr(label)
    ('not measured', '未测量')
    """
    return msgid


class Word(str):
    """A word or phrase of the kit's data that a page shows (a verdict, a list's name, a table's header or cell):
    its text is ``tr(msgid, **fields)`` in the language in force when it was made, formatting it (an f-string)
    gives it in the language in force then, and it still equals (and hashes as) its English, so code keeps testing
    ``row["observed"] == "lower"`` and looking it up in dicts keyed by English, in either language. ``english``
    gives the English back. Like ``tr``, ``msgid`` must be a literal string (the catalog extractor reads
    ``Word("...")``); a variable holding a marked string, or a Word, works too.

    >>> set_language("zh_CN"); w = Word("not measured")
    >>> w, w == "not measured", {"not measured": 1}[w], w.english
    ('未测量', True, 1, 'not measured')
    >>> f"[{w:>8}]"                                  # a Chinese character is two columns wide
    '[  未测量]'
    >>> set_language("en"); Word("{n} steps skipped", n=3), f"{w}"      # formatted: the language in force now
    ('3 steps skipped', 'not measured')
    >>> set_language(None)
    """

    english: str
    _message: tuple[str, dict]

    def __new__(cls, msgid: str, /, **fields) -> "Word":
        if isinstance(msgid, Word):
            msgid, fields = msgid._message
        msgid = str(msgid)
        word = super().__new__(cls, tr(msgid, **fields))
        word.english = msgid.format(**fields) if fields else msgid
        word._message = (msgid, fields)
        return word

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Word):
            return self.english == other.english
        return isinstance(other, str) and (self.english == other or str.__eq__(self, other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.english)

    def __format__(self, spec: str) -> str:
        """In the language in force now; a width counts a Chinese character as two columns (a printed table's
        columns stay aligned)."""
        msgid, fields = self._message
        return format_wide(tr(msgid, **fields), spec)

    def __reduce__(self):
        msgid, fields = self._message
        return _word, (msgid, fields)


_SPEC = re.compile(r"(?P<head>(?:.?[<>=^])?[-+ ]?#?0?)(?P<width>\d*)(?P<tail>.*)\Z", re.S)


def format_wide(text: str, spec: str) -> str:
    """``format(text, spec)`` with the width counted in columns: a Chinese character (or any wide one) is two, so the
    columns of a printed table line up whatever the language. The one home of this rule (Word and Wide use it).

    >>> "|" + format_wide("损失", ">6") + "|" + format_wide("loss", ">6") + "|"
    '|  损失|  loss|'
    """
    m = _SPEC.match(spec)
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    if m and m["width"] and wide:
        spec = f"{m['head']}{max(int(m['width']) - wide, 0)}{m['tail']}"
    return format(text, spec)


class Wide(str):
    """A text (of a notebook, a framework, any data) that pads by columns when formatted, as a Word does: for a table
    cell built from text the kit does not translate itself (``f"{Wide(note):>28s}"``).

    >>> f"[{Wide('降为低精度（文档）'):>20s}]", f"[{Wide('fp32（文档）'):>20s}]"
    ('[  降为低精度（文档）]', '[        fp32（文档）]')
    """

    def __format__(self, spec: str) -> str:
        return format_wide(str(self), spec)


def _word(msgid: str, fields: dict) -> Word:
    return Word(msgid, **fields)
