"""Facts about the kit itself that every layer shares, the room's tools included (standard library only, so that
``ampkit.classroom`` may import it): where the repository is, and which languages the kit speaks.

>>> (ROOT / "ampkit" / "_kit.py").is_file(), LANGUAGES[0]
(True, 'en')
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "LANGUAGES"]

#: the repository's root, the folder that holds ``ampkit/``, ``notebooks/`` and ``docs/`` (the kit runs from its
#: checkout: ``make install`` installs it editable)
ROOT = Path(__file__).resolve().parents[1]
#: the kit's languages, English (the source) first: its editions (``notebooks/``, ``notebooks/zh_CN/``), the
#: catalogs' languages, ``make lab LANG=...``, the hub's ``AMPKIT_HUB_LANG``, the book's sites
LANGUAGES = ("en", "zh_CN")
