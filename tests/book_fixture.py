"""The book (``ampkit._book``), built once per test session into a temporary folder: import the fixture into a test
module (``from book_fixture import book_fixture``; the fixture is named ``book``) and every test there shares one
build (tests/test_book.py; a browser test of the site can use it too). Skipped with a reason where the site extra
(Sphinx, MyST-NB, furo, jieba) is missing."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Book:
    site: Path      # site/: en/, zh_CN/, index.html
    facts: dict     # what ampkit._book.build_site returned (seconds, pages per edition, warnings)


@pytest.fixture(scope="session", name="book")
def book_fixture(tmp_path_factory) -> Book:
    for module in ("sphinx", "myst_nb", "furo", "jieba"):
        pytest.importorskip(module, reason="the site extra is not installed: pip install -e '.[site]'")
    from ampkit._book import build_site

    base = tmp_path_factory.mktemp("book")
    facts = build_site(base / "site", repo="someone/ampkit", work=base / "src")
    return Book(base / "site", facts)
