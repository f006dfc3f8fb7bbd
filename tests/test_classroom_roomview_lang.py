"""The room view's page in the room's language (issue #39 item 18): every word in each of the kit's languages, the
Chinese page with no English sentence, the language read from $AMPKIT_LANG, which the hub sets for the service
from ``make hub LANG=zh_CN``."""
from __future__ import annotations

import html
import re
import shutil
import subprocess

import pytest

from ampkit._kit import LANGUAGES
from ampkit.classroom.hub import configure, settings_from_env
from ampkit.classroom.roomview import SERVICE
from ampkit.classroom.roomview.page import LANG_VAR, WORDS, page_html, page_language

CJK = re.compile(r"[\u4e00-\u9fff]")
#: what the Chinese page shows as it is: the name of Jupyter's document, the solution mark, a file name
AS_IS = {"notebook", "sol", "room-view-sent.jsonl", "zh-CN"}


def visible_text(page: str) -> str:
    """The text a browser shows before the script runs (tags, style and script removed)."""
    body = re.sub(r"(?s)<(script|style)>.*?</\1>", "", page)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def english_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z][A-Za-z.\-]+", text) if w not in AS_IS and not w.endswith(".jsonl")]


def test_every_word_in_every_language_with_the_same_fields():
    assert set(WORDS) == set(LANGUAGES)
    for lang, words in WORDS.items():
        assert words.keys() == WORDS["en"].keys(), lang
        for key, text in words.items():
            assert set(re.findall(r"\{\w+\}", text)) == set(re.findall(r"\{\w+\}", WORDS["en"][key])), (lang, key)
    for key, text in WORDS["zh_CN"].items():
        assert CJK.search(text) or text in AS_IS, key
        assert english_words(re.sub(r"\{\w+\}", "", text)) == [], (key, text)


def test_the_chinese_page_shows_chinese_and_the_english_page_english():
    zh, en = page_html("ana", "tok", lang="zh_CN"), page_html("ana", "tok")
    assert '<html lang="zh-CN">' in zh and "<title>教室视图</title>" in zh and "登录用户：ana · 每 2 秒刷新一次" in zh
    assert english_words(visible_text(zh).replace("ana", "")) == []
    assert "Show of hands" in visible_text(en) and "举手统计" not in en
    assert english_words("Show of hands") == ["Show", "of", "hands"]            # the check sees English
    script = zh[zh.index("<script>"):]
    assert '"predictions": "{exercise}：在查看答案之前有 {n} 个预测"' in script    # the script's words, same page
    for english in ("prediction(s)", "s ago", "with an error", "ran the solution", "not updated"):
        assert english not in script, english                                    # no English sentence in the JS
    with pytest.raises(ValueError, match="speaks en, zh_CN"):
        page_html("ana", "tok", lang="fr")


@pytest.mark.skipif(shutil.which("node") is None, reason="node checks the page's script")
def test_the_pages_script_parses(tmp_path):
    for lang in LANGUAGES:
        page = page_html("ana", "tok", lang=lang)
        (tmp_path / "page.js").write_text(page[page.index("<script>") + 8:page.index("</script>")])
        subprocess.run(["node", "--check", str(tmp_path / "page.js")], check=True)


def test_the_language_comes_from_ampkit_lang():
    assert page_language({}) == "en" and page_language({LANG_VAR: ""}) == "en"
    assert page_language({LANG_VAR: "zh_CN"}) == "zh_CN"
    with pytest.raises(ValueError, match="AMPKIT_LANG='fr': the room view speaks en, zh_CN"):
        page_language({LANG_VAR: "fr"})


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_hub_starts_the_service_in_the_rooms_language(tmp_path, lang):
    from traitlets.config import Config

    env = {"AMPKIT_HUB_STATE": str(tmp_path / "state"), "AMPKIT_HUB_VENV": str(tmp_path / "venv"),
           "AMPKIT_HUB_ROOM_VIEW_PORT": "18998", "AMPKIT_HUB_LANG": lang}
    c = Config()
    configure(c, settings_from_env(env, tmp_path), env)
    [svc] = [x for x in c.JupyterHub.services if x["name"] == SERVICE]
    assert svc["environment"] == {LANG_VAR: lang}
    assert page_language(svc["environment"]) == lang
