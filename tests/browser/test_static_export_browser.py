"""What a reader without a kernel sees: every committed notebook (both editions) exported to HTML by nbconvert, as a
learner would with File › Save and Export As › HTML, opened in Chromium with no network (so no MathJax from a CDN).

- every exercise's answer is inside a closed ``<details class="ampkit-solution">``: the explanation (markdown) and
  the computed check (output); none of it is rendered text until its summary is clicked, and one click shows it;
- no TeX is left in the rendered markdown (``$…$`` would show literally: nbconvert loads MathJax from cdnjs,
  ``HTMLExporter.mathjax_url``);
- no output is a bare ``False``.

- no hint and no line of a solution's code (``ampkit.exercises.revealing_texts``: every exercise module's, both
  languages) is rendered text: the cells hold ``ex.check(N, ...)`` and ``ex.solution(N)`` only, and the solution's
  code is inside its closed block. ``ampkit._nbstatic`` checks the same on the stored notebooks.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ampkit.exercises import exercise_modules, revealing_texts
from conftest import ARTIFACTS, ROOT, find_chromium

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "notebooks" / "zh_CN").glob("[0-9][0-9]_*.ipynb"))
_TEX = re.compile(r"(?<![\w\\])\$[^$\n]{1,80}?\$(?!\w)")


def _squeeze(text: str) -> str:
    """Only the letters, digits and CJK characters of ``text``: markdown and HTML markup, punctuation and white
    space (markdown joins lines with a space, none between Chinese characters) differ between source and page."""
    return re.sub(r"[\W_]+", "", text)


def _explanations(path: Path) -> list[str]:
    """The text inside each markdown <details class="ampkit-solution"> (after its summary), markup stripped."""
    found = []
    for c in json.loads(path.read_text())["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if c["cell_type"] == "markdown" and "ampkit-solution" in src:
            body = src.split("</summary>", 1)[1].rsplit("</details>", 1)[0]
            found.append(_squeeze(re.sub(r"<[^>]+>|\]\([^)]*\)", " ", body)))
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from nbconvert import HTMLExporter

    out = tmp_path_factory.mktemp("export")
    exporter = HTMLExporter(template_name="lab")
    pages = {}
    for nb in NOTEBOOKS:
        body, _ = exporter.from_filename(str(nb))
        page = out / f"{nb.parent.name}-{nb.stem}.html"
        page.write_text(body)
        pages[nb] = page
    return pages


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_static_export_hides_answers_and_shows_no_tex(nb, exported, browser):
    if not find_chromium():
        pytest.fail("no chromium (.ci/run installs Debian's chromium)")
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    # offline, as on a train: only the file itself loads (MathJax, require.js and fonts from a CDN fail)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                  else route.abort())
    page = context.new_page()
    try:
        page.goto(exported[nb].as_uri())
        explanations = _explanations(nb)
        details = page.locator("details.ampkit-solution")
        n_solutions = sum("solution" in c.get("metadata", {}).get("tags", [])
                          for c in json.loads(nb.read_text())["cells"])
        assert len(explanations) == n_solutions >= 3
        # one closed <details> for each explanation and one for each solution's computed output
        assert details.count() == 2 * n_solutions
        assert page.evaluate("() => [...document.querySelectorAll('details.ampkit-solution')].every(d => !d.open)")
        shown = _squeeze(page.locator("body").inner_text())
        for text in explanations:
            probe = text[:40]
            assert probe and probe not in shown, f"answer readable without a click: {probe!r}"
        secrets = {_squeeze(t) for m in exercise_modules() for t in revealing_texts(m)} - {""}
        assert not [s for s in secrets if s in shown], "a hint or a solution's code readable without a click"
        markdown = " ".join(page.locator(".jp-MarkdownCell").all_inner_texts())
        assert not _TEX.search(markdown), _TEX.search(markdown).group(0)
        outputs = [t.strip() for t in page.locator(".jp-OutputArea-output").all_inner_texts()]
        assert "False" not in outputs and "True" not in outputs
        # one deliberate click shows the first explanation
        first = details.first
        first.locator("summary").click()
        assert first.evaluate("d => d.open")
        assert explanations[0][:40] in _squeeze(first.inner_text())
        # and the page's text now holds it: the check above for closed blocks reads what a reader sees
        assert explanations[0][:40] in _squeeze(page.locator("body").inner_text())
        if nb.name.startswith("07"):
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"static-export-{nb.parent.name}-07.png"))
    finally:
        context.close()
