"""The book: the whole notebook series as a bilingual static site, built offline from the executed notebooks
(developer tool, like :mod:`ampkit._nbexport`; issue #31).

    python -m ampkit._book build -o site [--repo owner/name]      (``make site``; ``make site-serve`` serves it)

Two Sphinx sites (MyST-NB, the furo theme; ``book/conf.py``, one file for both), ``site/en/`` from
``notebooks/NN_*.ipynb`` and ``site/zh_CN/`` from ``notebooks/zh_CN/NN_*.ipynb``, plus ``site/index.html`` that sends
the reader to ``en/``. Each edition also carries the README, the instructor guide, the glossary and the reference
(English only: the Chinese site says so). No notebook is executed (``nb_execution_mode = "off"``); the inputs are
copied, changed as below, into a build folder (``build/book/<lang>/``), never written back:

- every kit view's output becomes the placeholder of :func:`ampkit._nbexport.static_view_html` (with its still
  picture) and a caption saying where its numbers were computed (``nb.metadata.ampkit.executed``; a notebook without
  that stamp gets a caption without the machine, and a warning in the build's facts); the notebook's saved widget
  state leaves the metadata (MyST-NB would load require.js and the widget manager from a CDN for it) and goes into
  the page as a ``<script type="application/vnd.jupyter.widget-state+json">`` with one ``<script type="module">``
  importing ``_static/page.js`` (``ampkit/widgets/static/page.js``), which draws the views with no kernel;
- a solution cell (tag ``solution``) is folded whole, input and output, under "Solution (click to reveal)"; the
  exercises' set-up cell (``source_hidden``) shows its output and folds its input;
- a "Run this lesson" box: ``make lab``, the conda line, and Binder when the repository is known (``--repo``, else
  ``GITHUB_REPOSITORY``, else ``git remote get-url origin``);
- links between these files become links between pages; a link to any other file of the repository goes to it on
  GitHub (when the repository is known) or becomes its plain text.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ampkit._kit import LANGUAGES, ROOT
from ampkit._nbexport import kit_views_only, notebook_title, static_view_html

__all__ = ["build_site", "prepare", "repository", "search_terms", "EDITIONS", "WORDS"]

BOOK = ROOT / "book"
EDITIONS = LANGUAGES   # the book's two sites: the kit's languages (ampkit._kit)
_VIEW = "application/vnd.jupyter.widget-view+json"
_STATE = "application/vnd.jupyter.widget-state+json"
_GUIDES = ("readme", "instructor-guide", "glossary", "reference")
#: What the book itself says, per edition (the Chinese in the glossary's terms: docs/glossary.md).
WORDS: dict[str, dict[str, str]] = {
    "en": {
        "computed": "Computed when this notebook was executed: {cpu}, torch {torch}. "
                    "Run the notebook to compute them on your machine.",
        "computed_unknown": "Computed when this notebook was executed (the machine was not recorded). "
                            "Run the notebook to compute them on your machine.",
        "solution": "Solution (click to reveal)", "solution_hide": "Hide the solution",
        "setup": "Set-up code: it computes the expected answers (click to show)",
        "setup_hide": "Hide the set-up code",
        "run": "Run this lesson",
        "clone": "On your machine: `git clone https://github.com/{repo}.git && cd {name} && make lab`, then open "
                 "`{file}` in JupyterLab.",
        "no_repo": "On your machine: get the kit's files (a clone of its repository, or a copy of its folder), "
                   "then in that folder run `make lab` and open `notebooks/{file}` in JupyterLab.",
        "conda": "With conda instead of `make`: `conda env create -f environment.yml && conda activate ampkit`, "
                 "then `jupyter lab {path}`.",
        "binder": "In your browser, with nothing to install: [open this notebook on Binder]({url}).",
        "lessons": "Lessons", "guides": "Guides",
        "order": "The lessons, in order:",
        "reference_note": "",
        "reference_title": "",
    },
    "zh_CN": {
        "computed": "这些数字是在执行本 notebook 时算出的：{cpu}，torch {torch}。在你的机器上运行这个 notebook，"
                    "就能自己算出它们。",
        "computed_unknown": "这些数字是在执行本 notebook 时算出的（没有记下是哪台机器）。在你的机器上运行这个 "
                            "notebook，就能自己算出它们。",
        "solution": "答案（点击展开）", "solution_hide": "收起答案",
        "setup": "练习的准备代码：它会算出预期答案（点击展开）", "setup_hide": "收起准备代码",
        "run": "运行本课",
        "clone": "在你的机器上：`git clone https://github.com/{repo}.git && cd {name} && make lab LANG=zh_CN`，"
                 "然后在 JupyterLab 中打开 `{file}`。",
        "no_repo": "在你的机器上：先取得工具包的文件（克隆它的仓库，或复制它的文件夹），然后在该文件夹中运行 "
                   "`make lab LANG=zh_CN`，在 JupyterLab 中打开 `notebooks/zh_CN/{file}`。",
        "conda": "不用 `make`、改用 Conda：`conda env create -f environment.yml && conda activate ampkit`，"
                 "然后运行 `jupyter lab {path}`。",
        "binder": "在浏览器中运行，无需安装：[在 Binder 上打开这个 notebook]({url})。",
        "lessons": "课程", "guides": "指南",
        "order": "各课按顺序如下：",
        "reference_note": "本页的来源列表只有英文版。",
        "reference_title": "参考资料：本工具包依据的事实及其来源（英文）",
    },
}


def repository(repo: str | None = None) -> str | None:
    """``owner/name`` of the repository: ``repo``, else ``GITHUB_REPOSITORY``, else ``git remote get-url origin``
    (a GitHub URL), else None.

    >>> repository("someone/ampkit")
    'someone/ampkit'
    """
    repo = repo or os.environ.get("GITHUB_REPOSITORY")
    if not repo:
        try:
            url = subprocess.run(["git", "remote", "get-url", "origin"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            url = ""
        m = re.search(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
        repo = m.group(1) if m else None
    if repo and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError(f"--repo {repo!r}: expected owner/name, e.g. someone/ampkit")
    return repo


def _sources(lang: str) -> dict[str, str]:
    """Repository path -> page name, for the edition ``lang`` (the notebooks and the guides)."""
    nb_dir = "notebooks" if lang == "en" else f"notebooks/{lang}"
    pages = {f"{nb_dir}/{p.name}": p.stem for p in sorted((ROOT / nb_dir).glob("[0-9][0-9]_*.ipynb"))}
    suffix = "" if lang == "en" else ".zh-CN"
    pages.update({f"README{suffix}.md": "readme", f"docs/instructor-guide{suffix}.md": "instructor-guide",
                  "docs/glossary.md": "glossary", "docs/reference.md": "reference"})
    return pages


def _rewrite_links(text: str, src: str, lang: str, repo: str | None) -> str:
    """Markdown links of the file ``src`` (a repository path) as links of the book: to a page of this edition, to the
    same page of the other edition (the ``edition:`` scheme, book/conf.py), or to the file on GitHub."""
    own = _sources(lang)
    other_lang = EDITIONS[1 - EDITIONS.index(lang)]
    other = _sources(other_lang)
    base = Path(src).parent

    def link(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:|#", target):
            return m.group(0)
        path, _, frag = target.partition("#")
        rel = os.path.normpath(base / path).replace(os.sep, "/")
        anchor = f"#{frag}" if frag else ""
        if rel in own:
            suffix = ".ipynb" if rel.endswith(".ipynb") else ".md"
            return f"[{label}]({own[rel]}{suffix}{anchor})"
        if rel in other:   # the edition: and edition-anchor: schemes of book/conf.py
            return f"[{label}](edition-anchor:{other_lang}/{other[rel]}.html{anchor})" if frag else \
                f"[{label}](edition:{other_lang}/{other[rel]}.html)"
        if not (ROOT / rel).exists():
            raise ValueError(f"{src}: link to {target!r}, which is no file of the repository")
        if repo:
            kind = "tree" if (ROOT / rel).is_dir() else "blob"
            return f"[{label}](https://github.com/{repo}/{kind}/HEAD/{rel}{anchor})"
        return label

    return re.sub(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)", link, text)


def _caption(executed: dict | None, lang: str) -> str:
    words = WORDS[lang]
    text = words["computed"].format(**executed) if executed else words["computed_unknown"]
    return f'<p class="ampkit-computed">{html.escape(text)}</p>'


def _run_box(file: str, lang: str, repo: str | None) -> str:
    words = WORDS[lang]
    nb_path = f"notebooks/{file}" if lang == "en" else f"notebooks/{lang}/{file}"
    lines = [words["clone"].format(repo=repo, name=repo.split("/")[1], file=nb_path) if repo
             else words["no_repo"].format(file=file), words["conda"].format(path=nb_path)]
    if repo:
        lines.append(words["binder"].format(url=f"https://mybinder.org/v2/gh/{repo}/HEAD?labpath={nb_path}"))
    body = "\n".join(f"- {line}" for line in lines)
    return f"```{{admonition}} {words['run']}\n:class: ampkit-run\n\n{body}\n```\n"


def _lines(source: Any) -> str:
    return source if isinstance(source, str) else "".join(source)


def convert_notebook(path: Path, lang: str, repo: str | None) -> tuple[Any, dict, list[str]]:
    """The notebook at ``path`` as the book shows it, its facts (views, solutions, set-up cells) and warnings."""
    import nbformat

    rel = path.relative_to(ROOT).as_posix()
    nb = kit_views_only(nbformat.read(path, as_version=4), path.stem)
    state = nb.metadata.pop("widgets", {}).get(_STATE, {})
    models = state.get("state", {})
    executed = nb.metadata.get("ampkit", {}).get("executed")
    if executed and not {"cpu", "torch"} <= set(executed):
        raise ValueError(f"{rel}: metadata.ampkit.executed is {executed!r}; it needs 'cpu' and 'torch'")
    warnings = [] if executed else [f"{rel}: no metadata.ampkit.executed (re-execute it: make notebooks); "
                                    "its views' captions do not name the machine"]
    facts: dict[str, Any] = {"title": notebook_title(nb, path.stem), "views": 0, "solutions": 0, "setup": 0,
                             "source": rel, "executed": executed}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _rewrite_links(_lines(cell.source), rel, lang, repo)
            continue
        if cell.cell_type != "code":
            continue
        tags = list(cell.metadata.get("tags", []))
        if "ampkit-language" in tags:       # the Chinese edition's first cell sets the kernel's language: a page
            tags.append("remove-cell")       # is in its language already
        elif "solution" in tags:
            tags.append("hide-cell")
            cell.metadata["mystnb"] = {"code_prompt_show": WORDS[lang]["solution"],
                                       "code_prompt_hide": WORDS[lang]["solution_hide"]}
            facts["solutions"] += 1
        elif cell.metadata.get("jupyter", {}).get("source_hidden"):
            tags.append("hide-input")
            cell.metadata["mystnb"] = {"code_prompt_show": WORDS[lang]["setup"],
                                       "code_prompt_hide": WORDS[lang]["setup_hide"]}
            facts["setup"] += 1
        cell.metadata["tags"] = tags
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if _VIEW in data and data[_VIEW].get("model_id") in models:
                out["data"] = {"text/html": static_view_html(data) + _caption(executed, lang)}
                out["metadata"] = {}
                facts["views"] += 1
    first_md = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    nb.cells.insert(first_md + 1, nbformat.v4.new_markdown_cell(_run_box(path.name, lang, repo)))
    if facts["views"]:
        state_json = json.dumps(state).replace("</", "<\\/")
        page = (f'<script type="{_STATE}">{state_json}</script>\n'
                '<script type="module">import { renderViews } from "./_static/page.js"; '
                "renderViews(document);</script>")
        # (MyST-NB skips a cell whose source is empty; this one's is never shown: remove-input)
        runtime = nbformat.v4.new_code_cell("# the views' saved state and page.js (ampkit._book)",
                                            metadata={"tags": ["remove-input"]})
        runtime.outputs = [nbformat.v4.new_output("display_data", data={"text/html": page})]
        nb.cells.append(runtime)
    return nb, facts, warnings


def _guide(src: str, lang: str, repo: str | None) -> str:
    text = _rewrite_links((ROOT / src).read_text(encoding="utf-8"), src, lang, repo)
    note = WORDS[lang]["reference_note"]
    if src == "docs/reference.md" and note:      # the Chinese title (sidebar, prev/next), then the note
        text = re.sub(r"^# (.+)\n", lambda m: f"# {WORDS[lang]['reference_title']}\n\n> {note} ({m.group(1)})\n",
                      text, count=1, flags=re.M)
    return text


def _index(lang: str, lessons: dict[str, dict]) -> str:
    """The start page: the README's title and its paragraph on what the series teaches, the lessons in order (with
    the README's 'what you learn' column), then the table of contents."""
    readme = (ROOT / ("README.md" if lang == "en" else "README.zh-CN.md")).read_text(encoding="utf-8")
    title = re.search(r"^# (.+)$", readme, re.M)
    intro = re.search(r"^(ampkit (?:is|是).+?)\n\n", readme, re.M | re.S)
    if not title or not intro:
        raise ValueError(f"README ({lang}): no '# title' line, or no paragraph starting 'ampkit is/是', "
                         "for the start page")
    learn = dict(re.findall(r"^\|\s*`(\d\d_\w+)`\s*\|\s*([^|]+?)\s*\|", readme, re.M))
    words = WORDS[lang]
    items = "\n".join(f"{i}. [{f['title']}]({name}.ipynb)" + (f" — {learn[name]}" if name in learn else "")
                      for i, (name, f) in enumerate(lessons.items(), 1))
    toc = (f"```{{toctree}}\n:caption: {words['lessons']}\n:hidden:\n\n" + "\n".join(lessons) + "\n```\n\n"
           f"```{{toctree}}\n:caption: {words['guides']}\n:maxdepth: 1\n\n" + "\n".join(_GUIDES) + "\n```\n")
    return f"# {title.group(1)}\n\n{_rewrite_links(intro.group(1), 'README.md', lang, None)}\n\n" \
           f"{words['order']}\n\n{items}\n\n{toc}"


def search_terms(glossary: Path = ROOT / "docs" / "glossary.md") -> list[str]:
    """The glossary's Chinese terms (its table's second column), for jieba to keep whole when Sphinx indexes the
    Chinese edition: the browser does not split a query, so "损失缩放" is found only if it is an index term.

    >>> "损失缩放" in search_terms() and "混合精度" in search_terms()
    True
    """
    from ampkit._i18ntools.checks import glossary_rows

    terms = []
    for cells in glossary_rows(glossary):
        if len(cells) > 1 and cells[0] != "English":   # words of Chinese characters only
            words = [t.strip() for t in re.split(r"[、/，,；;（）()]", cells[1])]
            terms += [t for t in words if re.fullmatch(r"[\u4e00-\u9fff]+", t)]
    return sorted(set(terms))


def _write(path: Path, text: str) -> None:
    """Write ``text`` unless the file holds it already (Sphinx then rebuilds only what changed)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def prepare(lang: str, src: Path, repo: str | None) -> dict:
    """Write the Sphinx source folder of edition ``lang`` into ``src``; returns its facts."""
    import nbformat

    if lang not in EDITIONS:
        raise ValueError(f"edition {lang!r}: the book's editions are {', '.join(EDITIONS)}")
    pages: dict[str, dict] = {}
    warnings: list[str] = []
    wanted = {"index.md"}
    for rel, name in _sources(lang).items():
        if rel.endswith(".ipynb"):
            nb, facts, warns = convert_notebook(ROOT / rel, lang, repo)
            _write(src / f"{name}.ipynb", nbformat.writes(nb))
            wanted.add(f"{name}.ipynb")
            pages[name] = facts
            warnings += warns
        else:
            _write(src / f"{name}.md", _guide(rel, lang, repo))
            wanted.add(f"{name}.md")
            pages[name] = {"source": rel}
    lessons = {n: f for n, f in pages.items() if "views" in f}
    if not lessons:
        raise ValueError(f"no notebooks/NN_*.ipynb for the edition {lang}")
    _write(src / "index.md", _index(lang, lessons))
    if lang == "zh_CN":   # jieba's user dictionary (book/conf.py: html_search_options)
        _write(src / "search-terms.txt", "".join(f"{t}\n" for t in search_terms()))
    for po in (BOOK / "locale" / lang).rglob("*.po"):   # the theme's words in the edition's language (book/conf.py)
        _write(src / "locale" / lang / po.relative_to(BOOK / "locale" / lang), po.read_text(encoding="utf-8"))
    for stale in [*src.glob("*.md"), *src.glob("*.ipynb")]:   # a page whose source is gone
        if stale.name not in wanted:
            stale.unlink()
    return {"pages": pages, "warnings": warnings}


def _sphinx(lang: str, src: Path, out: Path) -> subprocess.Popen:
    """sphinx-build of edition ``lang`` from ``src`` into ``out``. MyST-NB writes its copies of the notebooks into
    ``out/../jupyter_execute`` (myst_nb/sphinx_ext.py, fixed), so ``out`` is a folder of the edition's own under
    ``build/book``: the two builds never write the same file, and the site holds only the pages."""
    env = {**os.environ, "AMPKIT_BOOK_LANG": lang, "AMPKIT_BOOK_SRC": str(src.resolve()), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(BOOK), "-d",
           str(src.parent / f".doctrees-{lang}"), "-w", str(src.parent / f"warnings-{lang}.txt"), str(src), str(out)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


_SITE_INDEX = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ampkit</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="0; url=en/index.html">
<link rel="icon" href="en/_static/favicon.svg"></head>
<body><p><a href="en/index.html">ampkit (English)</a> · <a href="zh_CN/index.html" lang="zh-CN">ampkit（中文）</a></p>
</body></html>
"""


def build_site(out: Path, repo: str | None = None, work: Path | None = None) -> dict:
    """Build both editions into ``out`` (``out/en``, ``out/zh_CN``, ``out/index.html``), their Sphinx sources in
    ``work`` (default ``build/book``), the two Sphinx builds side by side. Returns the facts: ``seconds``, and per
    edition its ``pages`` (name -> title, views, solutions, set-up cells, source), ``warnings`` (the book's: a
    notebook without its execution stamp) and ``sphinx_warnings`` (what Sphinx warned about, ``-w``). Raises when a
    build fails."""
    t0 = time.perf_counter()
    out, work = Path(out), Path(work) if work else ROOT / "build" / "book"
    repo = repository(repo)
    facts: dict[str, Any] = {"repo": repo, "editions": {}}
    for lang in EDITIONS:
        facts["editions"][lang] = prepare(lang, work / lang, repo)
    html = {lang: work / f"out-{lang}" / "html" for lang in EDITIONS}
    procs = {lang: _sphinx(lang, work / lang, html[lang]) for lang in EDITIONS}
    for lang, proc in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"sphinx-build of the {lang} edition failed ({proc.returncode}):\n{stderr[-4000:]}")
        warned = (work / f"warnings-{lang}.txt").read_text(encoding="utf-8")
        facts["editions"][lang]["sphinx_warnings"] = [line for line in warned.splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    for stale in [out / lang for lang in EDITIONS] + [out / "jupyter_execute"]:
        if stale.exists():
            shutil.rmtree(stale)
    for lang in EDITIONS:
        shutil.copytree(html[lang], out / lang, ignore=shutil.ignore_patterns(".buildinfo"))
    (out / "index.html").write_text(_SITE_INDEX, encoding="utf-8")
    (out / ".nojekyll").write_text("", encoding="utf-8")
    facts["seconds"] = round(time.perf_counter() - t0, 1)
    return facts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m ampkit._book", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the site (both editions)")
    build.add_argument("-o", "--out", default="site", help="the site's folder (default: site)")
    build.add_argument("--repo", help="owner/name on GitHub, for the Binder and source links "
                                      "(default: GITHUB_REPOSITORY, else the git remote 'origin')")
    args = parser.parse_args(argv)
    facts = build_site(Path(args.out), args.repo)
    for lang, ed in facts["editions"].items():
        lessons = [f for f in ed["pages"].values() if "views" in f]
        print(f"{lang}: {len(ed['pages']) + 1} pages, {len(lessons)} notebooks, "
              f"{sum(f['views'] for f in lessons)} views, {sum(f['solutions'] for f in lessons)} solutions folded")
        for line in ed["warnings"] + ed["sphinx_warnings"]:
            print(f"  warning: {line}", file=sys.stderr)
    print(f"{args.out}/ built in {facts['seconds']} s (repository: {facts['repo'] or 'unknown: no Binder links'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
