"""Sphinx configuration of the book (issue #31), one file for both editions: AMPKIT_BOOK_LANG=en or zh_CN.

Built by ``python -m ampkit._book build`` (``make site``), which writes the sources (the executed notebooks,
changed for the page, and the guides) into build/book/<lang>/ and runs sphinx-build with ``-c book``.
Nothing a page loads comes from another host: MyST-NB's ipywidgets scripts are off (the notebooks' widget state is
moved into the page by ampkit._book), no page may contain math (Sphinx would load MathJax from a CDN; the committed
notebooks hold none), furo brings no web fonts.
"""
import os
from pathlib import Path

from ampkit._kit import LANGUAGES, ROOT  # the kit's languages (the book's editions) and the repository's root

LANG = os.environ.get("AMPKIT_BOOK_LANG", "")
if LANG not in LANGUAGES:
    raise ValueError(f"AMPKIT_BOOK_LANG={LANG!r}: the book's editions are {' and '.join(LANGUAGES)}")
OTHER = LANGUAGES[1 - LANGUAGES.index(LANG)]
HERE = Path(__file__).resolve().parent

project = "ampkit"
language = LANG
extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_ipywidgets_js = {}            # MyST-NB's default loads require.js and the widget manager from a CDN
nb_merge_streams = True
myst_heading_anchors = 3
# a link to a page of the other edition: [text](edition:zh_CN/readme.html), with an anchor
# [text](edition-anchor:zh_CN/readme.html#anchor) (ampkit/_book.py writes them)
myst_url_schemes = {
    "http": None, "https": None, "mailto": None,
    "edition": {"url": "../{{path}}"},
    "edition-anchor": {"url": "../{{path}}#{{fragment}}"},
}
suppress_warnings = ["myst.header"]   # the guides start with a paragraph before their first heading

html_theme = "furo"
html_title = "ampkit" if LANG == "en" else "ampkit（中文版）"
html_static_path = [str(HERE / "static"), str(ROOT / "ampkit" / "widgets" / "static")]   # book.css, page.js
html_css_files = ["book.css"]
html_favicon = str(HERE / "static" / "favicon.svg")   # declared, so a browser asks for no /favicon.ico
templates_path = [str(HERE / "templates")]
html_copy_source = False
html_show_sourcelink = False
html_show_sphinx = False            # the footer's credits are the book's own (templates/page.html)
html_show_copyright = False
locale_dirs = ["locale"]            # the Chinese words of furo's that Sphinx's catalog lacks (book/locale, copied)
html_search_language = "zh" if LANG == "zh_CN" else "en"   # zh splits words with jieba (sphinx/search/zh.py)
# the glossary's Chinese terms as jieba's user dictionary (added to its own), so that "损失缩放" is an index term and
# not only "损失" and "缩放": the search page does not split what the reader types (ampkit/_book.py, search_terms)
_TERMS = Path(os.environ.get("AMPKIT_BOOK_SRC", ".")) / "search-terms.txt"
html_search_options = {"dict": str(_TERMS)} if LANG == "zh_CN" and _TERMS.is_file() else {}
html_context = {
    "ampkit_lang": LANG,
    "ampkit_other": OTHER,
    "ampkit_switch": "中文版" if LANG == "en" else "English version（英文版）",
    "ampkit_switch_lang": "zh-CN" if OTHER == "zh_CN" else "en",
    "ampkit_credits": "Built with Sphinx, MyST-NB and the furo theme from the executed notebooks." if LANG == "en"
    else "本书由已执行的 notebook 用 Sphinx、MyST-NB 和 furo 主题生成。",
}
html_theme_options = {"top_of_page_buttons": [], "navigation_with_keys": True}


def _no_math(app, pagename, templatename, context, doctree):
    """Stop the build where a page has math: Sphinx would load MathJax from a CDN for it."""
    if context.get("has_maths_elements"):
        raise RuntimeError(f"page {pagename!r} has math, and the book serves no math renderer offline: "
                           "write it in Unicode or <sup>/<sub> (ampkit._nbstatic)")


def _chinese_stemmer(app, exception):
    """Sphinx 9.0.4's Chinese search ends language_data.js with ``window.Stemmer = ChineseStemmer;`` while the file
    defines only EnglishStemmer (sphinx/search/__init__.py, get_js_stemmer_code: the class is named from
    language_name; zh.py uses english-stemmer.js), so every search on the Chinese site stops with "ChineseStemmer is
    not defined" (sphinx-doc/sphinx issue #14229, fixed by PR #14416 after 9.0.4): name the class the file defines,
    as that fix does. A Sphinx with the fix leaves nothing to change."""
    path = Path(app.outdir) / "_static" / "language_data.js"
    if exception is None and path.exists():
        js = path.read_text(encoding="utf-8")
        if "window.Stemmer = ChineseStemmer;" in js and "var ChineseStemmer" not in js and "var EnglishStemmer" in js:
            path.write_text(js.replace("window.Stemmer = ChineseStemmer;", "window.Stemmer = EnglishStemmer;"),
                            encoding="utf-8")


# what a screen reader says for a control on a Chinese page: words written into furo's templates and MyST-NB's folds
# (myst_nb/sphinx_.py, visit_HideCellInput), which no catalog translates
ARIA_ZH = {
    "Toggle hidden content": "展开或收起隐藏的内容",
    "Toggle Light / Dark / Auto color theme": "切换浅色、深色或自动配色",
    "Toggle table of contents sidebar": "显示或隐藏本页内容",
    "Toggle site navigation sidebar": "显示或隐藏网站导航",
}


def _aria_zh(app, exception):
    """The Chinese edition's pages say their controls' labels in Chinese (ARIA_ZH)."""
    if exception is not None or LANG != "zh_CN":
        return
    for page in Path(app.outdir).rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        changed = html
        for en, zh in ARIA_ZH.items():
            changed = changed.replace(f'aria-label="{en}"', f'aria-label="{zh}"')
        if changed != html:
            page.write_text(changed, encoding="utf-8")


def setup(app):
    app.connect("html-page-context", _no_math, priority=100)
    app.connect("build-finished", _chinese_stemmer)
    app.connect("build-finished", _aria_zh)
