"""One home for each small rule the kit shares (issue #39, item 20): fp32's largest number and fp16's smallest
normal in ``ampkit.formats``, the kit's languages and the repository's root in ``ampkit._kit`` (standard library
only, so that the room's tools share it), the launcher of local process groups in ``ampkit._ranks``. Found by
reading every module's source; a planted copy is found too."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: a rule's copies, as source text: (pattern, the one module allowed to hold it, the name to import instead)
COPIES = [
    (r"finfo\((?:torch|np|numpy)\.float32\)\.max", "ampkit/formats/registry.py", "ampkit.formats.FP32_MAX"),
    (r"finfo\((?:torch|np|numpy)\.float16\)\.tiny", "ampkit/formats/registry.py", "ampkit.formats.FP16_TINY"),
    (r"finfo\((?:torch|np|numpy)\.float16\)\.max", "ampkit/formats/registry.py", "ampkit.formats.FP16_MAX"),
    (r"""\(\s*["']en["']\s*,\s*["']zh_CN["']\s*\)""", "ampkit/_kit.py", "ampkit._kit.LANGUAGES"),
    (r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[\d\](?!\s*/\s*[\"']locale)", "ampkit/_kit.py",
     "ampkit._kit.ROOT"),
    # the two-process launchers of notebooks 05 and 08 (diagnose.distributed, lessons...sharded) were two copies
    (r"os\.killpg|get_context\([\"']fork[\"']\)", "ampkit/_ranks.py", "ampkit._ranks.run_ranks"),
]


def copies(text: str, pattern: str) -> list[str]:
    """The lines of ``text`` (outside comments and docstring examples) that hold the pattern."""
    return [line.strip() for line in text.splitlines()
            if re.search(pattern, line) and not line.lstrip().startswith(("#", ">>>"))]


@pytest.mark.parametrize("pattern, home, name", COPIES, ids=[c[2] for c in COPIES])
def test_each_rule_has_one_home(pattern, home, name):
    found = {str(p.relative_to(ROOT)): hits for p in sorted((ROOT / "ampkit").rglob("*.py"))
             if (hits := copies(p.read_text(encoding="utf-8"), pattern))}
    assert list(found) == [home], f"import {name} instead of a copy: {found}"


def test_a_planted_copy_is_found():
    planted = "_FP32_MAX = torch.finfo(torch.float32).max\nLANGS = ('en', 'zh_CN')\nR = Path(__file__).parents[2]\n"
    assert [len(copies(planted, c[0])) for c in COPIES] == [1, 0, 0, 1, 1, 0]
    assert copies("            os.killpg(p.pid, signal.SIGKILL)", COPIES[5][0])      # a launcher's kill
    assert copies("LOCALE_DIR = Path(__file__).resolve().parents[1] / 'locale'", COPIES[4][0]) == []   # not the root


def test_the_homes_hold_the_values_the_copies_had():
    import torch

    from ampkit import _kit, i18n
    from ampkit._book import EDITIONS
    from ampkit.classroom import present
    from ampkit.classroom.hub import settings
    from ampkit.formats import FP16_TINY, FP32_MAX, info

    assert FP32_MAX == torch.finfo(torch.float32).max == info("fp32").max
    assert FP16_TINY == torch.finfo(torch.float16).tiny == info("fp16").smallest_normal == 2.0**-14
    assert i18n.LANGUAGES is settings.LANGUAGES is present.LANGUAGES is EDITIONS is _kit.LANGUAGES
    assert (_kit.ROOT / "pyproject.toml").is_file() and _kit.ROOT == ROOT
