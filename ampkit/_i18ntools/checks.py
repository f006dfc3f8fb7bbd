"""What makes a translation wrong, entry by entry (``tests/test_translations.py`` runs these on every catalog).

    missing      no translation
    stale        marked fuzzy: its English changed since it was translated
    untranslated English prose left as it was (markdown with words and no Chinese character)
    tokens       a number, `code span`, $formula$ or link of the English is not in the translation, unchanged
    fields       a {field} of a message or template differs
    code         a code cell's translation is not the same program: only comments and the text of strings may
                 change, figure text may not (it is translated when drawn), and it must still parse
    glossary     an English term of docs/glossary.md is in the English, its Chinese term is not in the translation
"""
from __future__ import annotations

import ast
import io
import re
import string
import tokenize
from pathlib import Path

import polib

from ampkit._i18ntools.extract import FIGURE, figure_nodes
from ampkit._kit import ROOT

__all__ = ["CJK", "entry_problems", "catalog_problems", "glossary_terms", "GLOSSARY"]

GLOSSARY = ROOT / "docs" / "glossary.md"
CJK = re.compile(r"[\u4e00-\u9fff]")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$", re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)|(https?://[^\s)>\]]+)")
_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(?:\.\d+)?(?![A-Za-z_\d])")
_PROSE = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’-]+[A-Za-z]{2,}){2,}")


def _tokens(text: str) -> set[str]:
    found = set()
    for m in _FENCE.finditer(text):
        found.add(m.group(0).split("\n", 1)[1] if "\n" in m.group(0) else m.group(0))
    rest = _FENCE.sub(" ", text)
    for m in _CODE_SPAN.finditer(rest):
        found.add(m.group(0))
    rest = _CODE_SPAN.sub(" ", rest)
    for m in _MATH.finditer(rest):
        found.add(m.group(0))
    rest = _MATH.sub(" ", rest)
    for m in _LINK.finditer(rest):
        found.add((m.group(1) or m.group(2)).rstrip(".,;:"))   # a bare URL's sentence punctuation is not part of it
    rest = _LINK.sub(" ", rest)
    found.update(_NUMBER.findall(rest))
    return found


def _fields(text: str) -> set[str]:
    try:
        return {f"{{{f}}}" for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError:
        return {"<unbalanced braces>"}


class _Blank(ast.NodeTransformer):
    """Every string constant blanked, except figure text (which must stay)."""

    def __init__(self, keep: set[int]):
        self.keep = keep

    def visit_JoinedStr(self, node):
        if id(node) in self.keep:
            return node
        # the text around fields may move; a string inside a field's expression is text too ({'on' if x else 'off'})
        fields = [self.visit(v) for v in node.values if not isinstance(v, ast.Constant)]
        return ast.copy_location(ast.JoinedStr(values=fields), node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and id(node) not in self.keep:
            return ast.copy_location(ast.Constant(""), node)
        return node


def _program(source: str) -> str:
    tree = ast.parse(source)
    keep = {id(n) for f in figure_nodes(tree) for n in ast.walk(f)}
    return ast.dump(_Blank(keep).visit(tree))


def _prose_of_code(source: str) -> str:
    """The comments and strings of a code cell (what a translator translates), as one text; figure text is not in it
    (it stays English in the code and is translated in its own ``figure`` entry), nor a field's format spec."""
    parts = []
    try:
        parts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type == tokenize.COMMENT]
        tree = ast.parse(source)
        figure = {id(n) for f in figure_nodes(tree) for n in ast.walk(f)}
        specs = {id(c) for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec
                 for c in ast.walk(n.format_spec)}   # a field's format (">8s") is layout, which a translation may fit
        parts += [n.value for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in figure | specs]
    except (SyntaxError, tokenize.TokenError):
        parts.append(source)
    return "\n".join(parts)


def glossary_rows(path: Path = GLOSSARY) -> list[list[str]]:
    """The cells of each row of the glossary's tables (header and ``|---|`` lines included; callers filter)."""
    if not path.exists():
        return []
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("|")]


def glossary_terms(path: Path = GLOSSARY) -> list[tuple[str, str, re.Pattern]]:
    """(English, Chinese, pattern) for every glossary row marked as checked (✓ in its last column)."""
    rows: list[tuple[str, str, re.Pattern]] = []
    for cols in glossary_rows(path):
        if len(cols) < 4 or not cols[-1].startswith("✓"):
            continue
        en, zh = cols[0].strip("*` "), cols[1].strip("*` ")
        words = r"[\s-]+".join(re.escape(w) for w in en.split())
        rows.append((en, zh, re.compile(rf"(?<![\w-]){words}(?:s|es|ed|d|ing)?(?![\w-])", re.IGNORECASE)))
    return rows


def literal_emphasis(markdown: str) -> bool:
    """Whether CommonMark (GitHub, the book's MyST) shows a ``**`` of ``markdown`` as text instead of bold.

    >>> literal_emphasis("讲解**自动混合精度（AMP）**的"), literal_emphasis("讲解**自动混合精度**（AMP）的")
    (True, False)
    """
    try:
        from markdown_it import MarkdownIt  # the site extra's (MyST); without it, nothing to say
    except ImportError:
        return False
    html = MarkdownIt("commonmark").render(markdown)
    return "**" in re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", html, flags=re.S)


def entry_problems(e: polib.POEntry, terms=None) -> list[str]:
    kind = (e.comment or "").split(":", 1)[0]
    if e.msgctxt == FIGURE:
        kind = "figure"
    where = f"[{e.msgctxt or ''}] {e.msgid[:60]!r}"
    if not e.msgstr:
        return [f"missing: {where}"]
    problems = []
    if "fuzzy" in e.flags:
        problems.append(f"stale (fuzzy; its English changed): {where}")
    english = e.msgid
    if kind == "code":
        if e.msgstr == e.msgid and not (e.tcomment or "").startswith("same:"):
            problems.append(f"untranslated code cell (write '# same: why' as a translator comment if right): {where}")
        try:
            if _program(e.msgstr) != _program(e.msgid):
                problems.append(f"code: not the same program (only comments and string text may change; figure "
                                f"text stays English): {where}")
        except SyntaxError as err:
            problems.append(f"code: the translation does not parse ({err.msg}, line {err.lineno}): {where}")
        english, translated = _prose_of_code(e.msgid), _prose_of_code(e.msgstr)
        missing = set(_NUMBER.findall(english)) - set(_NUMBER.findall(translated))
    else:
        translated = e.msgstr
        if kind in ("markdown", "message", "figure") and _PROSE.search(_tokens_removed(english)) \
                and not CJK.search(e.msgstr):
            problems.append(f"untranslated (no Chinese in it): {where}")
        missing = {t for t in _tokens(english) if t not in e.msgstr and not _kept_as_chinese(t, e.msgstr)}
        if kind in ("message", "figure") and _fields(e.msgid) != _fields(e.msgstr) and \
                not (kind == "figure" and _positional_ok(e.msgid, e.msgstr)):
            problems.append(f"fields: {sorted(_fields(e.msgid))} in English, {sorted(_fields(e.msgstr))} in the "
                            f"translation: {where}")
    if missing:
        problems.append(f"tokens: {sorted(missing)[:6]} not in the translation: {where}")
    if kind == "markdown" and literal_emphasis(e.msgstr) and not literal_emphasis(e.msgid):
        problems.append(f"bold shown as '**' (CommonMark: a '**' between a full-width mark and a Chinese character "
                        f"neither opens nor closes; move it outside the mark, e.g. **术语**（AMP）): {where}")
    prose = english if kind == "code" else _tokens_removed(english)
    for en, zh, pattern in terms or ():
        if pattern.search(prose) and zh not in translated:
            problems.append(f"glossary: {en!r} must be {zh!r}: {where}")
    return problems


def _uncommented(block: str) -> str:
    """A code block without its ``#`` comments and trailing blanks (a translator translates the comments)."""
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line).rstrip() for line in block.splitlines())


def _kept_as_chinese(token: str, translated: str) -> bool:
    r"""An English token the translation keeps in its Chinese form.

    A fenced code block with its comments translated (the code unchanged), and a MindSpore page of the English
    site replaced by the same page of the Chinese site (``/en/`` -> ``/zh-CN/``, same file name).

    >>> _kept_as_chinese("x = 1  # one\n```", "```python\nx = 1  # 一\n```"), _kept_as_chinese("x = 2\n```", "x = 1")
    (True, False)
    >>> en = "https://www.mindspore.cn/docs/en/r2.4.10/a/sink_mode.html"
    >>> _kept_as_chinese(en, "见 [下沉模式](https://www.mindspore.cn/docs/zh-CN/r2.4.10/a/sink_mode.html)。")
    True
    """
    if token.endswith("```"):
        bodies = [m.group(0).split("\n", 1)[1] for m in _FENCE.finditer(translated) if "\n" in m.group(0)]
        return any(_uncommented(b) == _uncommented(token) for b in bodies)
    if re.match(r"https?://(www\.)?mindspore\.cn/", token) and "/en/" in token:
        leaf = token.split("#")[0].rstrip("/").rsplit("/", 1)[-1]
        return any("/zh-CN/" in u and u.split("#")[0].rstrip("/").rsplit("/", 1)[-1] == leaf
                   for m in _LINK.finditer(translated) for u in [(m.group(1) or m.group(2)).rstrip(".,;:")]
                   if "mindspore.cn/" in u)
    return False


def _tokens_removed(text: str) -> str:
    return _LINK.sub(" ", _MATH.sub(" ", _CODE_SPAN.sub(" ", _FENCE.sub(" ", text))))


def _positional_ok(en: str, zh: str) -> bool:
    """A figure template's ``{}`` fields may be numbered in the translation (``{0}``, ``{1}``): same count."""
    n = len([f for _, f, _, _ in string.Formatter().parse(en) if f is not None])
    got = [f for _, f, _, _ in string.Formatter().parse(zh) if f is not None]
    return len(got) == n and all(f == "" or f.isdigit() for f in got)


def catalog_problems(path: Path, terms=None) -> list[str]:
    po = polib.pofile(str(path), wrapwidth=0)
    terms = glossary_terms() if terms is None else terms
    return [f"{path.name}: {p}" for e in po if not e.obsolete for p in entry_problems(e, terms)]
