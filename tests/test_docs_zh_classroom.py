"""The Chinese classroom pages (issue #39 item 18): docs/classroom.zh-CN.md and hub/README.zh-CN.md exist, follow
their English pages section by section, are linked from both READMEs and from the English pages, every link and
anchor in them resolves, and every `make` command they quote is a target of the Makefile."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_docs_generated_zh import headings  # (level, title) of each heading, outside code blocks

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"docs/classroom.zh-CN.md": "docs/classroom.md", "hub/README.zh-CN.md": "hub/README.md"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (CJK kept), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def links(text: str) -> list[str]:
    text = re.sub(r"(?s)```.*?```", "", text)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


def make_targets() -> set[str]:
    found = set()
    for mk in [ROOT / "Makefile", *sorted((ROOT / "make").glob("*.mk"))]:
        for line in mk.read_text().splitlines():
            if m := re.match(r"^([a-z][\w-]*(?: [a-z][\w-]*)*)\s*:(?!=)", line):
                found.update(m.group(1).split())
    return found


def quoted_make_targets(text: str) -> set[str]:
    return set(re.findall(r"\bmake ([a-z][\w-]*)", text))


@pytest.mark.parametrize("page, english", PAGES.items())
def test_each_chinese_page_follows_its_english_page(page, english):
    zh, en = (ROOT / page).read_text(), (ROOT / english).read_text()
    assert [lvl for lvl, _ in headings(zh)] == [lvl for lvl, _ in headings(en)], page   # same outline
    assert all(CJK.search(t) for _, t in headings(zh)), page
    assert f"]({Path(english).name})" in zh.split("\n\n")[1], page                     # English link at the top
    assert f"]({Path(page).name})" in en.split("\n\n")[1], english                      # and back


def test_both_readmes_link_both_pages():
    for readme in ("README.md", "README.zh-CN.md"):
        text = (ROOT / readme).read_text()
        for page in PAGES:
            assert f"]({page})" in text, (readme, page)


@pytest.mark.parametrize("page", list(PAGES) + ["docs/instructor-guide.zh-CN.md"])
def test_every_link_and_anchor_resolves(page):
    text = (ROOT / page).read_text()
    for target in links(text):
        file, _, frag = target.partition("#")
        path = (ROOT / page).parent / file if file else ROOT / page
        assert path.exists(), (page, target)
        if frag and path.suffix == ".md":
            assert frag in {anchor(t) for _, t in headings(path.read_text())}, (page, target)


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    assert links("见 [x](missing.md#no) 和 [y](https://example.com) 和 `[z](code.md)`") == ["missing.md#no",
                                                                                        "code.md"]
    assert anchor("30 人同时登录：登录风暴") == "30-人同时登录登录风暴"
    assert "how-many-cores-a-room-of-30-needs" in {anchor(t) for _, t in headings((ROOT / PAGES[
        "docs/classroom.zh-CN.md"]).read_text())}


@pytest.mark.parametrize("page", PAGES)
def test_every_make_command_quoted_is_a_target(page):
    targets = make_targets()
    assert {"hub", "hub-install", "workshop", "lab"} <= targets            # the parser reads the make files
    missing = quoted_make_targets((ROOT / page).read_text()) - targets
    assert not missing, f"{page} quotes make targets the Makefile does not have: {sorted(missing)}"
    assert quoted_make_targets("运行 `make no-such-target`") - targets == {"no-such-target"}
