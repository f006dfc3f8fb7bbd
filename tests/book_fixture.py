"""The book (``ampkit._book``), built once per test run into a temporary folder: tests/conftest.py imports the
fixture (named ``book``), so every test module shares one build (tests/test_book.py, the browser test). Under
``make test``'s pytest-xdist the workers share it too: the first to ask builds it into the run's common temporary
folder while holding a lock, the others wait for the lock and read the facts it wrote. Skipped with a reason where
the site extra (Sphinx, MyST-NB, furo, jieba) is missing."""
from __future__ import annotations

import fcntl
import json
import os
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

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):     # .../pytest-N/popen-gwK: the run's folder is its parent
        shared = shared.parent
    base = shared / "book"
    base.mkdir(exist_ok=True)
    done = base / "facts.json"
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # released when the file closes, also if the build raises
        if not done.exists():
            facts = build_site(base / "site", repo="someone/ampkit", work=base / "src")
            done.write_text(json.dumps(facts), encoding="utf-8")
        facts = json.loads(done.read_text(encoding="utf-8"))
    return Book(base / "site", facts)
