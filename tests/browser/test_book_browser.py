"""The book (issue #31) read in a real browser: both editions built once (tests/book_fixture.py), served from a
loopback HTTP server, opened in Chromium with every request to another host refused and counted (none may be made)
and every console error or page error collected (none may happen).

- every page of both editions (the lessons, the guides, the start page, search and the index): it loads; every
  picture is drawn (naturalWidth > 0); every internal link leads to a file of the site (its #fragment aside); no
  math source shown as text (TeX ``$…$``, ``\\(``, ``\\[``: the book has no math renderer, so no math may be left);
  no answer open; the language switch points at the same page of the other edition;
- every kit view of every lesson: drawn from its saved state (page.js says ``n/n``), the caption under it says
  where its numbers were computed, in the page's language; a control of it moved (a range input by the keyboard,
  else a select, a radio or check box, a button that needs no kernel) changes its drawing; then the language switch,
  clicked, lands on the same lesson in the other edition;
- the answers of one lesson per edition: each folded (not visible) until its summary is clicked, then visible;
- the search page finds an English and a Chinese term, and lists a lesson for each;
- pictures to look at (artifacts/browser/): ``book-<lang>-<NN>.png`` per lesson (the first view in sight), one page
  at phone width and one in print.
"""
from __future__ import annotations

import html
import re
import time
import urllib.parse
from pathlib import Path

import pytest
from book_site import Site

from conftest import ARTIFACTS, find_chromium

pytestmark = pytest.mark.browser

LANGS = ("en", "zh_CN")
CJK = re.compile(r"[\u4e00-\u9fff]")
# math source a reader would see as text: TeX between dollars ($$, $x^2$, as ampkit._nbstatic._TEX; a shell's
# ${NAME} is no math), \( \) and \[ \]
TEX = re.compile(r"\$\$|(?<![\\\w])\$(?!\{)[^$\n]+?\$(?!\w)|\\\(|\\\)|\\\[|\\\]"
                 r"|\\(?:frac|mathrm|times|cdot|sqrt|approx)\b")
# a button of a view that asks the kernel (measure here, run again, run the missing levels): not a control to move
KERNEL_BUTTONS = ("ampkit-sink-measure", "ampkit-doctor-rerun", "ampkit-olevel-run-all")
# the Chinese ones are the glossary's terms (docs/glossary.md), typed whole as a reader types them: the search page does
# not split a query, so each must be an index term (book/conf.py gives jieba the glossary's terms)
SEARCH = {"en": ("overflow", "GradScaler"), "zh_CN": ("上溢", "损失缩放", "混合精度", "次正规数")}

# The visible text of the page's article, code aside (a code cell may print a dollar sign), one string.
_VISIBLE_TEXT = """() => {
  const root = document.querySelector('article') ?? document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const parts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest('pre, code, script, style, kbd, samp, .highlight, svg')) continue;
    if (!el.checkVisibility()) continue;
    parts.push(n.textContent);
  }
  return parts.join('');
}"""

# Scroll the window so that the element's top is 80 px below the window's top (a little of what leads to it shows).
_TO_TOP = "(e) => window.scrollBy(0, e.getBoundingClientRect().top - 80)"

# Every <img>: drawn? (lazy ones are asked to load now, then decoded)
_IMAGES = """async () => {
  const imgs = [...document.querySelectorAll('img')];
  for (const img of imgs) img.loading = 'eager';
  await Promise.all(imgs.map((img) => img.decode().catch(() => null)));
  return imgs.map((img) => ({src: img.currentSrc || img.src, w: img.naturalWidth}));
}"""

# Each view, by index: what it offers to move (in the order tried), as selectors inside the view.
_CONTROLS = """(view) => {
  const found = [];
  view.querySelectorAll('input[type=range]').forEach((e, i) => found.push(['range', i]));
  view.querySelectorAll('select').forEach((e, i) => found.push(['select', i]));
  view.querySelectorAll('input[type=radio], input[type=checkbox]').forEach((e, i) => found.push(['check', i]));
  view.querySelectorAll('button').forEach((e, i) => found.push(['button', i]));
  return found;
}"""


@pytest.fixture(scope="module")
def site(book, browser):
    if not find_chromium():
        pytest.fail("no chromium (.ci/run installs Debian's chromium)")
    s = Site(book.site, browser)
    try:
        yield s
    finally:
        s.close()


def _pages(book, lang: str) -> list[str]:
    return sorted(p.name for p in (book.site / lang).glob("*.html"))


def _lessons(book, lang: str) -> list[str]:
    return [n for n in _pages(book, lang) if re.match(r"\d\d_", n)]


def _shot(page, name: str) -> Path:
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


# --- every page ----------------------------------------------------------------------------------------------------
def test_every_page_loads_offline_whole(book, site):
    """Every page of both editions and the site's root page: loaded from the loopback server alone, with no console
    error; every picture drawn; every internal link to a file of the site (and its #fragment to an id there); no math
    source as text; no answer open; the language switch to the same page of the other edition."""
    broken_links, broken_anchors, broken_images, tex, open_answers, switches = [], [], [], [], [], []
    ids: dict[Path, set[str]] = {}   # the ids of each page a link points into
    seen = 0
    t0 = time.perf_counter()
    # the site's root page links to both editions and sends the reader on to the English one (a meta refresh)
    root = (book.site / "index.html").read_text(encoding="utf-8")
    for href in re.findall(r'href="([^"]+)"', root):
        if not (book.site / href).is_file():
            broken_links.append(f"index.html: {href}")
    with site.page.expect_navigation(url=site.url("en/index.html")):
        site.page.goto(site.url("index.html"))
    for rel in [f"{lang}/{name}" for lang in LANGS for name in _pages(book, lang)]:
        page = site.open(rel)
        seen += 1
        for img in page.evaluate(_IMAGES):
            if img["w"] <= 0:
                broken_images.append(f"{rel}: {img['src'][:120]}")
        for href in page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)"):
            target = site.file_of(href)
            if target is None:
                continue
            if not target.is_file():
                broken_links.append(f"{rel}: {href.replace(site.base, '')}")
                continue
            fragment = urllib.parse.unquote(urllib.parse.urlsplit(href).fragment)
            if fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
                if html.escape(fragment, quote=True) not in ids[target]:
                    broken_anchors.append(f"{rel}: {href.replace(site.base, '')}")
        found = TEX.findall(page.evaluate(_VISIBLE_TEXT))
        if found:
            tex.append(f"{rel}: {found[:5]}")
        n_open = page.locator("details[open]").count()
        if n_open:
            open_answers.append(f"{rel}: {n_open} <details> open at load")
        lang, name = rel.split("/")
        other = LANGS[1 - LANGS.index(lang)]
        switch = page.locator(".ampkit-lang-switch a")
        want = site.url(f"{other}/{name}")
        got = switch.first.evaluate("(a) => a.href") if switch.count() else None
        if got != want or not (book.site / other / name).is_file():
            switches.append(f"{rel}: language switch -> {got} (want {want})")
    print(f"\n{seen} pages opened and read in {time.perf_counter() - t0:.1f} s")
    assert seen >= 2 * 8, seen
    assert not broken_links, "internal links to no file of the site:\n" + "\n".join(broken_links)
    assert not broken_anchors, "internal links to no anchor of their page:\n" + "\n".join(broken_anchors)
    assert not broken_images, "pictures not drawn:\n" + "\n".join(broken_images)
    assert not tex, "math source shown as text:\n" + "\n".join(tex)
    assert not open_answers, "\n".join(open_answers)
    assert not switches, "\n".join(switches)
    site.assert_clean()


# --- every view of every lesson ------------------------------------------------------------------------------------
def _move(page, view, kind: str, index: int) -> str | None:
    """Work the ``index``-th control of ``kind`` in ``view``; return what was done, or None when it is not a control
    to move (disabled, a button that asks the kernel, already at the state it would pick)."""
    if kind == "range":
        ctl = view.locator("input[type=range]").nth(index)
        if ctl.is_disabled():
            return None
        ctl.scroll_into_view_if_needed()
        ctl.focus()
        at_end = ctl.evaluate("(e) => Number(e.value) >= Number(e.max)")
        key = "Home" if at_end else "ArrowRight"
        ctl.press(key)
        return f"range {index}: {key}"
    if kind == "select":
        ctl = view.locator("select").nth(index)
        values = ctl.evaluate("(s) => [...s.options].filter(o => !o.disabled).map(o => o.value)")
        current = ctl.input_value()
        others = [v for v in values if v != current]
        if ctl.is_disabled() or not others:
            return None
        ctl.select_option(others[0])
        return f"select {index}: {others[0]!r}"
    if kind == "check":
        ctl = view.locator("input[type=radio], input[type=checkbox]").nth(index)
        if ctl.is_disabled() or not ctl.is_visible() or (ctl.get_attribute("type") == "radio" and ctl.is_checked()):
            return None
        ctl.click()
        return f"{ctl.get_attribute('type')} {index}"
    ctl = view.locator("button").nth(index)
    cls = ctl.get_attribute("class") or ""
    pressed = ctl.get_attribute("aria-pressed") == "true" or "ampkit-on" in cls.split() or "active" in cls.split()
    if ctl.is_disabled() or not ctl.is_visible() or pressed or any(k in cls for k in KERNEL_BUTTONS):
        return None
    ctl.click()
    return f"button {index} ({(ctl.text_content() or '').strip()[:30]!r})"


def _drawing(view) -> str:
    return view.evaluate("(v) => v.innerHTML")


def _move_until_changed(page, view) -> tuple[str | None, int]:
    """Try the view's controls in order until one changes its drawing; (what moved it, controls offered)."""
    controls = view.evaluate(_CONTROLS)
    for kind, index in controls:
        before = _drawing(view)
        done = _move(page, view, kind, index)
        if done is None:
            continue
        try:
            view.evaluate("""(v, before) => new Promise((ok, no) => {
                               const t0 = performance.now();
                               const poll = () => v.innerHTML !== before ? ok(true)
                                 : performance.now() - t0 > 3000 ? no(new Error('unchanged')) : setTimeout(poll, 30);
                               poll(); })""", before)
            return done, len(controls)
        except Exception:
            continue
    return None, len(controls)


def test_every_view_moves_and_says_where_it_was_computed(book, site):
    """Each lesson of both editions: every view drawn, its caption (where its numbers were computed) in the page's
    language, one control of it moves its drawing; a picture of the page at its first view; the language switch
    lands on the same lesson of the other edition."""
    from ampkit._book import WORDS

    problems, still, moved, wide = [], [], [], []
    t0 = time.perf_counter()
    for lang in LANGS:
        other = LANGS[1 - LANGS.index(lang)]
        for name in _lessons(book, lang):
            rel, stem = f"{lang}/{name}", name[:-5]
            facts = book.facts["editions"][lang]["pages"][stem]
            page = site.open(rel)
            places = page.locator(".ampkit-static-view")
            n = places.count()
            if n != facts["views"]:
                problems.append(f"{rel}: {n} view placeholders, the build says {facts['views']}")
            if n:
                drawn = page.evaluate("() => document.body.dataset.ampkitViews")
                if drawn != f"{n}/{n}":
                    problems.append(f"{rel}: page.js drew {drawn} views")
            executed = facts.get("executed")
            caption = (WORDS[lang]["computed"].format(**executed) if executed
                       else WORDS[lang]["computed_unknown"])
            for i in range(n):
                place = places.nth(i)
                under = place.evaluate("(p) => { const c = p.nextElementSibling;"
                                       " return c && c.matches('.ampkit-computed') ? c.innerText : null; }")
                if under is None:
                    problems.append(f"{rel} view {i}: no caption under it")
                elif under.strip() != caption or (lang == "zh_CN") != bool(CJK.search(under)):
                    problems.append(f"{rel} view {i}: caption {under!r} (want {caption!r})")
                elif not place.locator("xpath=following-sibling::*[1]").is_visible():
                    problems.append(f"{rel} view {i}: its caption is not visible")
            if n:
                page.locator(".ampkit-static-view .ampkit-front").first.evaluate(_TO_TOP)
            else:
                page.evaluate("() => window.scrollTo(0, 0)")
            _shot(page, f"book-{lang}-{name[:2]}")
            for i, (sw, cw) in enumerate(page.evaluate("() => [...document.querySelectorAll('.ampkit-static-view')]"
                                                       ".map(p => [p.scrollWidth, p.clientWidth])")):
                if sw > cw + 1:   # the view scrolls sideways in the text column (a look, not a failure)
                    wide.append(f"{rel} view {i}: {sw} px in a {cw} px column")
            views = page.locator(".ampkit-static-view .ampkit-front")
            if views.count() != n:
                problems.append(f"{rel}: {views.count()} of {n} views drawn")
            for i in range(views.count()):
                view = views.nth(i)
                t1 = time.perf_counter()
                done, offered = _move_until_changed(page, view)
                if done:
                    moved.append(f"{rel} view {i}: {done} ({time.perf_counter() - t1:.2f} s)")
                elif offered:
                    problems.append(f"{rel} view {i}: none of its {offered} controls changed its drawing")
                else:
                    still.append(f"{rel} view {i} ({view.evaluate('(v) => v.firstElementChild?.className')})")
            # the language switch, clicked
            with page.expect_navigation():
                page.locator(".ampkit-lang-switch a").first.click()
            if page.url != site.url(f"{other}/{name}"):
                problems.append(f"{rel}: the language switch led to {page.url}")
    print(f"\n{len(moved)} views moved, {len(still)} with no control, in {time.perf_counter() - t0:.1f} s")
    print("\n".join(moved))
    if still:
        print("views with no control (pictures only):\n" + "\n".join(still))
    if wide:
        print("views wider than the text column (they scroll sideways):\n" + "\n".join(wide))
    assert moved, "no view moved"
    assert not problems, "\n".join(problems)
    site.assert_clean()


# --- answers -------------------------------------------------------------------------------------------------------
def test_answers_are_folded_until_asked(book, site):
    """One lesson per edition, every folded block (answers, set-up code): its body not visible until its summary is
    clicked, then visible; the build's count of solutions found on the page."""
    from ampkit._book import WORDS

    stem = "03_loss_scaling"
    for lang in LANGS:
        page = site.open(f"{lang}/{stem}.html")
        facts = book.facts["editions"][lang]["pages"][stem]
        # the solution cells folded by the build (MyST-NB's hide-cell), and every other fold of the page (the
        # set-up cell, the notebook's own <details> answers and, inside the folded cells, their outputs' ones)
        solutions = page.locator("article .cell.tag_solution > details")
        assert solutions.count() == facts["solutions"] >= 1, (lang, solutions.count(), facts)
        for i in range(solutions.count()):
            assert WORDS[lang]["solution"] in solutions.nth(i).locator(":scope > summary").text_content(), (lang, i)
        blocks = page.locator("article details")
        assert blocks.count() >= facts["solutions"] + facts["setup"], (lang, blocks.count(), facts)
        summaries = [blocks.nth(i).locator(":scope > summary").text_content().strip() for i in range(blocks.count())]
        for i in range(blocks.count()):
            block = blocks.nth(i)
            body = block.locator(":scope > :not(summary)")
            assert body.count() >= 1, (lang, i, summaries[i])
            assert block.get_attribute("open") is None, (lang, i)
            assert not any(body.nth(j).is_visible() for j in range(body.count())), \
                (lang, i, summaries[i], "visible before it was asked for")
            block.locator(":scope > summary").click()
            page.wait_for_function("(d) => d.open", arg=block.element_handle())
            assert all(body.nth(j).is_visible() for j in range(body.count())), (lang, i, summaries[i])
            inner = block.evaluate("(d) => [...d.children].filter(c => c.tagName !== 'SUMMARY')"
                                   ".map(c => c.innerText).join('')")
            assert inner.strip(), (lang, i, summaries[i], "nothing shown once opened")
        _shot(page, f"book-{lang}-answers-open")
    site.assert_clean()


# --- search --------------------------------------------------------------------------------------------------------
def _search(site, lang: str, term: str) -> list[str]:
    """The lessons (file names) the site's own search (offline, searchindex.js) lists for ``term``."""
    page = site.open(f"{lang}/search.html?q={urllib.parse.quote(term)}")
    page.wait_for_function("""() => { const s = document.querySelector('#search-results .search-summary');
                                      return !!s && s.innerText.trim() !== ''; }""", timeout=20_000)
    hits = page.evaluate("() => [...document.querySelectorAll('#search-results ul.search li a')]"
                         ".map(a => a.getAttribute('href'))")
    lessons = sorted({h.split("#")[0].split("?")[0] for h in hits if re.match(r"\d\d_\w+\.html", h)})
    print(f"\n{lang} search {term!r}: {len(hits)} hits, lessons {lessons}")
    _shot(page, f"book-{lang}-search")
    site.assert_clean()
    return lessons


@pytest.mark.parametrize("lang,term", [(lang, t) for lang, terms in SEARCH.items() for t in terms])
def test_search_finds_a_term_in_each_language(site, lang, term):
    """English words, Chinese glossary terms (overflow, loss scaling, mixed precision, subnormal): a lesson listed."""
    assert _search(site, lang, term), (lang, term)


# --- phone and print -----------------------------------------------------------------------------------------------
def test_phone_width_and_print(book, site):
    """A lesson at phone width (390 px: nothing wider than the screen but the views' and code's own scrollers) and in
    print (the pictures there), each photographed to be looked at."""
    page = site.new_page()
    try:
        page.set_viewport_size({"width": 390, "height": 844})
        for lang in LANGS:
            site.open(f"{lang}/03_loss_scaling.html", page)
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390 + 1, f"{lang}: the page is {width} px wide at a 390 px screen"
            _shot(page, f"book-{lang}-phone-top")
            page.locator(".ampkit-static-view .ampkit-front").first.evaluate(_TO_TOP)
            _shot(page, f"book-{lang}-phone-view")
        page.set_viewport_size({"width": 1000, "height": 1400})
        page.emulate_media(media="print")
        site.open("en/03_loss_scaling.html", page)
        _shot(page, "book-en-print-top")
        page.locator(".ampkit-static-view .ampkit-front").first.evaluate(_TO_TOP)
        _shot(page, "book-en-print-view")
    finally:
        page.close()
    site.assert_clean()
