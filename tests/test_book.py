"""The book (``ampkit._book``, issue #31): both editions built once (tests/book_fixture.py), then the built files read
(no browser here):

- built in well under two minutes; Sphinx warns about nothing;
- nothing fetched from another host: every built file scanned (script/link/img/iframe/source addresses, ES module
  imports, css ``url()``/``@import``); no MathJax, no math, no TeX shown literally;
- every notebook page: each kit view of the notebook as its placeholder with the still picture and the caption in
  the page's language, the saved state of exactly those views, ``_static/page.js`` (the package's file) imported
  once; every solution and set-up code inside a closed ``<details>`` (nothing of an answer outside one); the run box
  (make lab, conda, Binder for the repository);
- a book: the start page lists the lessons in order, prev/next follow it, a language switch on every page lands on
  the same page of the other edition, no internal link or image is broken, search indexes Chinese words;
- the Makefile, the extra, the pins and the Pages workflow agree.
"""
from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path

import pytest

from ampkit._book import EDITIONS, WORDS, _rewrite_links, _run_box, prepare, repository
from ampkit._nbexport import RUNTIME
from ampkit._nbstatic import _TEX

ROOT = Path(__file__).resolve().parents[1]
STATE = "application/vnd.jupyter.widget-state+json"
VIEW = "application/vnd.jupyter.widget-view+json"
bs4 = pytest.importorskip("bs4")   # nbconvert's own dependency
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_REMOTE = r"\s*(?:https?:)?//"


@functools.lru_cache(maxsize=None)
def _soup(path: Path):
    """The page, parsed once per session (html.parser takes ~0.15 s a page): read it, never change it."""
    return bs4.BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def _notebook(lang: str, stem: str):
    import nbformat

    return nbformat.read(ROOT / "notebooks" / ("" if lang == "en" else lang) / f"{stem}.ipynb", as_version=4)


def test_both_editions_build_fast_and_sphinx_warns_about_nothing(book):
    assert book.facts["seconds"] < 120, book.facts["seconds"]
    for lang in EDITIONS:
        assert book.facts["editions"][lang]["sphinx_warnings"] == [], lang
        assert sorted(p.name for p in (book.site / lang).glob("[0-9][0-9]_*.html")) == \
            [f"{n}.html" for n in NOTEBOOKS]
    # the site holds the pages, not MyST-NB's copies of the notebooks (written beside each build, not into the site)
    assert sorted(p.name for p in book.site.iterdir()) == [".nojekyll", "en", "index.html", "zh_CN"]
    assert not list(book.site.rglob("*.ipynb")) and not list(book.site.rglob(".buildinfo"))
    index = (book.site / "index.html").read_text(encoding="utf-8")
    assert 'href="en/index.html"' in index and 'href="zh_CN/index.html"' in index and "中文" in index


def _fetches(path: Path) -> list[str]:
    """What a browser would fetch from another host because of ``path`` (a built file)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    if path.suffix == ".html":
        soup = _soup(path)
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"),
                          ("source", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
                          ("object", "data")):
            found += [f"{path.name}: <{tag} {attr}={t[attr]}>" for t in soup.find_all(tag)
                      if re.match(_REMOTE, t.get(attr) or "")]
        scripts = [s.string or "" for s in soup.find_all("script")]
        styles = [s.string or "" for s in soup.find_all("style")] + [t["style"] for t in soup.find_all(style=True)]
    else:
        scripts = [text] if path.suffix == ".js" else []
        styles = [text] if path.suffix == ".css" else []
    for code in scripts:
        found += [f"{path.name}: {m}" for m in re.findall(
            r"""(?:\bimport\s*\(?|\bfrom|\bfetch\s*\(|importScripts\s*\()\s*["'`](?:https?:)?//[^"'`]+""", code)]
    for css in styles:
        found += [f"{path.name}: {m}" for m in re.findall(
            r"url\(\s*[\"']?(?:https?:)?//[^)]+\)|@import\s+(?:url\()?[\"']?(?:https?:)?//[^\"')]+", css)]
    return found


def test_no_built_file_fetches_from_another_host(book):
    files = [p for p in book.site.rglob("*") if p.suffix in (".html", ".js", ".css")]
    assert len(files) > 60
    assert [f for p in files for f in _fetches(p)] == []
    # the scanner finds what it must
    probe = book.site.parent / "probe.html"
    probe.write_text('<script src="https://cdn.example/x.js"></script><style>@import url("//fonts.example/f");'
                     '</style><script type="module">import { a } from "https://esm.example/a.js";</script>')
    assert len(_fetches(probe)) == 3


def test_no_math_renderer_and_no_tex_shown_literally(book):
    for page in sorted(book.site.glob("*/*.html")):
        soup = _soup(page)
        scripts = [(s.get("src") or "") + (s.string or "") for s in soup.find_all("script")]
        assert not [s for s in scripts if "mathjax" in s.lower()], page           # no math renderer loaded
        assert not soup.select(".math, span.math, div.math, mjx-container"), page  # no math for one to render
        article = copy.copy(soup.find("article"))
        for tag in article.find_all(["pre", "code", "script", "style"]):
            tag.decompose()
        prose = re.sub(r"\$\{\w+\}", "", article.get_text(" "))   # a shell's ${NAME} is no TeX
        assert not _TEX.search(prose) and "\\(" not in prose and "\\[" not in prose, page
        assert "**" not in prose, (page, prose[max(0, prose.find("**") - 80):prose.find("**") + 80])  # bold as '**'


def _views(nb) -> list[str]:
    models = nb.metadata.get("widgets", {}).get(STATE, {}).get("state", {})
    return [o["data"][VIEW]["model_id"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if VIEW in o.get("data", {}) and o["data"][VIEW]["model_id"] in models]


@pytest.mark.parametrize("lang", EDITIONS)
def test_every_view_is_a_placeholder_with_its_state_caption_and_the_shared_runtime(book, lang):
    from ampkit._nbexport import kit_views_only

    assert (book.site / lang / "_static" / "page.js").read_bytes() == RUNTIME.read_bytes()
    total = 0
    for stem in NOTEBOOKS:
        nb = kit_views_only(_notebook(lang, stem), stem)
        expected = _views(nb)
        soup = _soup(book.site / lang / f"{stem}.html")
        places = soup.select(".jp-OutputArea-output.ampkit-static-view[data-model-id]")
        assert [p["data-model-id"] for p in places] == expected, stem
        assert book.facts["editions"][lang]["pages"][stem]["views"] == len(expected)
        assert all(p.select_one("img.ampkit-static-still[src^='data:image/png;base64,']") for p in places), stem
        executed = book.facts["editions"][lang]["pages"][stem]["executed"]   # the stamp as the build read it
        caption = WORDS[lang]["computed"].format(**executed) if executed else WORDS[lang]["computed_unknown"]
        for p in places:
            assert p.find_next_sibling("p", class_="ampkit-computed").get_text() == caption, stem
        warned = any(stem in w for w in book.facts["editions"][lang]["warnings"])
        assert warned == (not executed), stem   # no stamp: a warning in the facts, and a caption without a machine
        states = soup.find_all("script", type=STATE)
        modules = [s.string for s in soup.find_all("script", type="module")]
        if expected:
            assert len(states) == 1 and set(expected) <= set(json.loads(states[0].string)["state"]), stem
            assert modules == ['import { renderViews } from "./_static/page.js"; renderViews(document);'], stem
        else:
            assert states == [] and modules == [], stem
        total += len(expected)
    assert total >= 5


def _outside_details(soup):
    """The page's article without its closed ``<details>``: what a reader sees before opening anything."""
    article = copy.copy(soup.find("article"))
    while (closed := article.find(lambda t: t.name == "details" and not t.has_attr("open"))) is not None:
        closed.decompose()
    return article


@pytest.mark.parametrize("lang", EDITIONS)
def test_answers_are_folded_until_the_reader_opens_them(book, lang):
    summary = WORDS[lang]["solution"]
    for stem in NOTEBOOKS:
        nb = _notebook(lang, stem)
        solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
        setups = [c for c in nb.cells if c.metadata.get("jupyter", {}).get("source_hidden")
                  and "solution" not in c.metadata.get("tags", [])]
        soup = _soup(book.site / lang / f"{stem}.html")
        folded = [d for d in soup.select("article details.hide") if not d.has_attr("open")]
        titles = [d.summary.find("p", class_="collapsed").get_text() for d in folded]
        assert titles.count(summary) == len(solutions), stem
        assert len(titles) == len(solutions) + len(setups), stem
        visible = _outside_details(soup)
        plain = visible.get_text()
        assert "with solution(" not in plain, stem                 # no solution's code outside a fold
        assert not re.search(r"\bexpected_\d+\s*=", plain), stem   # nor the set-up's computed answers
        assert visible.select(".ampkit-solution") == [], stem       # nor what solution(...) printed


@pytest.mark.parametrize("lang", EDITIONS)
def test_every_lesson_has_the_run_box(book, lang):
    for stem in NOTEBOOKS:
        soup = _soup(book.site / lang / f"{stem}.html")
        box = soup.select_one(".admonition.ampkit-run")
        assert box is not None and WORDS[lang]["run"] in box.get_text(), stem
        text = re.sub(r"\s+", " ", box.get_text())
        nb_path = f"notebooks/{stem}.ipynb" if lang == "en" else f"notebooks/{lang}/{stem}.ipynb"
        assert "make lab" in text and "conda env create -f environment.yml && conda activate ampkit" in text
        binder = [a["href"] for a in box.find_all("a") if "mybinder.org" in a["href"]]
        assert binder == [f"https://mybinder.org/v2/gh/someone/ampkit/HEAD?labpath={nb_path}"], stem
    no_repo = _run_box(f"{NOTEBOOKS[0]}.ipynb", lang, None)
    assert "mybinder" not in no_repo and "make lab" in no_repo


def test_a_lesson_opens_with_its_title_not_the_language_cell():
    """The Chinese notebooks' first cell (tag ampkit-language) sets the kernel's language; a page is in its
    language already, so the cell is left out and the page opens with the notebook's title."""
    from ampkit._book import convert_notebook

    for lang, path in (("zh_CN", ROOT / "notebooks" / "zh_CN" / "03_loss_scaling.ipynb"),
                       ("en", ROOT / "notebooks" / "03_loss_scaling.ipynb")):
        nb, _, _ = convert_notebook(path, lang, None)
        shown = [c for c in nb.cells if "remove-cell" not in c.metadata.get("tags", [])]
        assert shown[0].cell_type == "markdown" and shown[0].source.lstrip().startswith("# "), lang
        assert not any("set_language" in c.source for c in shown), lang


def _targets(path: Path, soup) -> list[tuple[str, str]]:
    refs = [("a", a["href"]) for a in soup.find_all("a", href=True)]
    refs += [("img", i["src"]) for i in soup.find_all("img", src=True)]
    refs += [("link", t["href"]) for t in soup.find_all("link", href=True)]
    refs += [("script", s["src"]) for s in soup.find_all("script", src=True)]
    return [(k, r) for k, r in refs if not re.match(r"[a-z]+:|//", r)]


def test_no_internal_link_or_image_is_broken(book):
    ids: dict[Path, set[str]] = {}
    pages = sorted(book.site.rglob("*.html"))
    soups = {p: _soup(p) for p in pages}
    for p, soup in soups.items():
        ids[p] = {t["id"] for t in soup.find_all(id=True)} | \
            {t["name"] for t in soup.find_all("a", attrs={"name": True})}
    broken = []
    for p, soup in soups.items():
        for kind, ref in _targets(p, soup):
            target, _, frag = ref.partition("#")
            dest = (p.parent / target.split("?")[0]).resolve() if target else p
            if not dest.exists():
                broken.append(f"{p.relative_to(book.site)}: <{kind}> {ref}")
            elif frag and dest.suffix == ".html" and frag not in ids.get(dest, set()):
                broken.append(f"{p.relative_to(book.site)}: <{kind}> {ref} (no such anchor)")
    assert broken == []


@pytest.mark.parametrize("lang", EDITIONS)
def test_the_language_switch_lands_on_the_same_page(book, lang):
    other = EDITIONS[1 - EDITIONS.index(lang)]
    pages = sorted((book.site / lang).glob("*.html"))
    assert len(pages) >= len(NOTEBOOKS) + 5
    for page in pages:
        switch = _soup(page).select("p.ampkit-lang-switch a")
        assert len(switch) == 1, page
        assert (page.parent / switch[0]["href"]).resolve() == (book.site / other / page.name).resolve(), page
    assert _soup(book.site / "zh_CN" / "index.html").select_one("p.ampkit-lang-switch a").get_text().startswith(
        "English")
    # the theme's own words on the Chinese pages are Chinese (book/locale/zh_CN; the footer is the book's own)
    soup = _soup(book.site / "zh_CN" / f"{NOTEBOOKS[1]}.html")
    chrome = soup.get_text(" ")
    assert all(w in chrome for w in ("回到顶部", "下一页", "上一页", "本页内容", "跳到正文")), chrome[-600:]
    assert not any(w in chrome for w in ("Back to top", "Next", "Previous", "On this page", "Made with")), lang
    labels = {t["aria-label"] for page in (book.site / "zh_CN").glob("*.html")
              for t in _soup(page).find_all(attrs={"aria-label": True})}
    assert labels and not [label for label in labels if re.search(r"[A-Za-z]{4,}", label)], labels


@pytest.mark.parametrize("lang", EDITIONS)
def test_a_book_start_page_in_order_with_prev_next(book, lang):
    soup = _soup(book.site / lang / "index.html")
    listed = [a["href"] for a in soup.select("article ol a")]
    assert listed == [f"{n}.html" for n in NOTEBOOKS]
    assert WORDS[lang]["order"] in soup.get_text()
    for before, after in zip(NOTEBOOKS, NOTEBOOKS[1:]):
        nxt = _soup(book.site / lang / f"{before}.html").select_one("a.next-page")
        assert nxt is not None and nxt["href"] == f"{after}.html", before
    guides = {a["href"] for a in soup.select(".sidebar-tree a")}
    assert {"readme.html", "instructor-guide.html", "glossary.html", "reference.html"} <= guides


def _search_index(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def test_search_indexes_both_languages(book):
    zh = _search_index(book.site / "zh_CN" / "searchindex.js")
    en = _search_index(book.site / "en" / "searchindex.js")
    docs = zh["docnames"]

    def pages(index: dict, word: str) -> set[str]:
        found = set()
        for kind in ("terms", "titleterms"):
            hits = index[kind].get(word, [])
            found |= {index["docnames"][i] for i in ([hits] if isinstance(hits, int) else hits)}
        return found

    # the search page's script runs: language_data.js names a stemmer class it defines (Sphinx 9.0.4 names
    # "ChineseStemmer", which does not exist: book/conf.py's _chinese_stemmer)
    for lang in EDITIONS:
        js = (book.site / lang / "_static" / "language_data.js").read_text(encoding="utf-8")
        stemmer = re.search(r"window\.Stemmer = (\w+);", js).group(1)
        assert re.search(rf"\bvar {stemmer}\s*=", js), (lang, stemmer)
    # a word of a Chinese notebook's prose (jieba splits it out; without jieba no Chinese word is indexed)
    assert "01_fp16_range" in pages(zh, "舍入") and "01_fp16_range" in docs
    assert "03_loss_scaling" in pages(zh, "缩放")
    # a glossary term is an index term whole (the search page does not split what the reader types): jieba keeps it,
    # from the glossary's terms (search_terms), besides its parts
    for term in ("损失缩放", "混合精度", "次正规数", "数据下沉"):
        assert len(pages(zh, term)) >= 2, term
    assert "01_fp16_range" in pages(en, "underflow") or "01_fp16_range" in pages(en, "underflow".rstrip("w"))


def test_links_between_the_files_become_links_between_pages():
    text = "[g](docs/glossary.md) [z](README.zh-CN.md#x) [h](hub/README.md) [w](https://x.org/a.md) [a](#here)"
    assert _rewrite_links(text, "README.md", "en", "o/r") == (
        "[g](glossary.md) [z](edition-anchor:zh_CN/readme.html#x) "
        "[h](https://github.com/o/r/blob/HEAD/hub/README.md) [w](https://x.org/a.md) [a](#here)")
    assert _rewrite_links("[h](../hub/README.md) [n](../notebooks/01_fp16_range.ipynb)", "docs/reference.md", "zh_CN",
                          None) == "h [n](edition:en/01_fp16_range.html)"   # no repository: the label, no link
    with pytest.raises(ValueError, match="no file of the repository"):
        _rewrite_links("[x](docs/nothing.md)", "README.md", "en", None)


def test_bad_input_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="en, zh_CN"):
        prepare("fr", tmp_path, None)
    with pytest.raises(ValueError, match="owner/name"):
        repository("not a repo")


def test_make_extra_pins_and_pages_workflow_agree():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^include .*make/site\.mk", makefile, re.M)
    assert "site" in re.search(r"^TEST_EXTRAS \?= (.+)$", makefile, re.M).group(1).split(",")
    mk = (ROOT / "make" / "site.mk").read_text(encoding="utf-8")
    assert "-m ampkit._book build" in mk and "--bind 127.0.0.1" in mk and "SITE_PORT" in mk
    assert re.search(r"^site/$", (ROOT / ".gitignore").read_text(encoding="utf-8"), re.M)
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]["site"]
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pinned = dict(r.lower().split("==") for r in extra)
    assert set(pinned) == {"sphinx", "myst-nb", "furo", "jieba"}
    lowered = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    assert {n: lowered.get(n) for n in pinned} == pinned      # the extra pins what constraints.txt pins
    yaml = pytest.importorskip("yaml", reason="PyYAML (the test extra) checks the workflow's syntax")
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8"))
    steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
    runs = " ".join(s.get("run", "") for s in steps)
    uses = [s.get("uses", "") for s in steps]
    # torch: the CPU build of the release written once, in ampkit/_version.py (read there, not copied)
    assert "make site" in runs and "torch==$(sed" in runs and "TORCH_TESTED" in runs and "ampkit/_version.py" in runs
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs
    assert any(u.startswith("actions/upload-pages-artifact") for u in uses)
    assert any(u.startswith("actions/deploy-pages") for u in uses)
    assert any(u.startswith("actions/setup-python") and s.get("with", {}).get("python-version") == "3.11"
               for u, s in zip(uses, steps))
