"""The room's language (``make hub LANG=zh_CN``): the hub config serves the Chinese edition, its kernels and its
JupyterLab in Chinese; only a LANG on make's command line counts. No hub is started here (as
tests/test_classroom_hub.py, whose config loader and scratch kit these tests reuse)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_classroom_hub import _kit_copy, _load_config

from ampkit import i18n
from ampkit.classroom import hub

ROOT = Path(__file__).resolve().parents[1]


class FakeSpawner:
    def __init__(self, home: Path):
        self.home_dir = str(home)

    class log:
        @staticmethod
        def info(*a):
            pass


def test_the_hubs_editions_are_the_kits():
    assert hub.settings.LANGUAGES == i18n.LANGUAGES


def test_english_room_is_unchanged(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch)
    assert c.Spawner.default_url == "/lab/tree/notebooks"
    assert "AMPKIT_LANG" not in c.Spawner.environment and "JUPYTERLAB_SETTINGS_DIR" not in c.Spawner.environment
    home = tmp_path / "state" / "users" / "ann"
    c.Spawner.pre_spawn_hook(FakeSpawner(home))
    assert (home / "notebooks" / "03_loss_scaling.ipynb").is_file() and not (home / "notebooks" / "zh_CN").exists()
    assert not (home / ".jupyter").exists()                  # JupyterLab's own default language (English)


def test_chinese_room_opens_the_chinese_edition_in_chinese(tmp_path, monkeypatch):
    c = _load_config(tmp_path, monkeypatch, AMPKIT_HUB_LANG="zh_CN")
    assert c.Spawner.default_url == "/lab/tree/notebooks/zh_CN"
    assert c.Spawner.environment["AMPKIT_LANG"] == "zh_CN"          # the kernels' views and messages
    home = tmp_path / "state" / "users" / "ann"
    spawner = FakeSpawner(home)
    settings_dir = Path(c.Spawner.environment["JUPYTERLAB_SETTINGS_DIR"](spawner))
    assert settings_dir == home / ".jupyter" / "lab" / "user-settings-zh_CN"
    c.Spawner.pre_spawn_hook(spawner)
    locale = settings_dir / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
    assert json.loads(locale.read_text()) == {"locale": "zh_CN"}    # as make lab-language writes it
    copied = sorted(p.name for p in (home / "notebooks" / "zh_CN").glob("*.ipynb"))
    source = hub.settings_from_env({"AMPKIT_HUB_LANG": "zh_CN"}, ROOT).notebook_source
    assert source.name == "zh_CN" and copied == sorted(p.name for p in source.glob("*.ipynb"))
    assert "03_loss_scaling.ipynb" in copied
    text = (home / "notebooks" / "zh_CN" / "03_loss_scaling.ipynb").read_text()
    assert "损失缩放" in text                                          # the Chinese notebook, not the English one
    assert (home / "notebooks" / "zh_CN" / "../../docs/reference.md").resolve().is_file()   # its links resolve
    # a learner who switches JupyterLab back to English keeps their choice at the next login
    locale.write_text('{"locale": "en"}\n')
    c.Spawner.pre_spawn_hook(spawner)
    assert json.loads(locale.read_text()) == {"locale": "en"}


def test_chinese_source_is_the_chinese_workshop_copies_when_they_exist(tmp_path):
    (tmp_path / "notebooks" / "zh_CN").mkdir(parents=True)
    (tmp_path / "workshop").mkdir()
    (tmp_path / "workshop" / "00_x.ipynb").write_text("{}")         # the English copies do not count
    zh = {"AMPKIT_HUB_LANG": "zh_CN"}
    assert hub.settings_from_env(zh, tmp_path).notebook_source == tmp_path / "notebooks" / "zh_CN"
    (tmp_path / "workshop" / "zh_CN").mkdir()
    (tmp_path / "workshop" / "zh_CN" / "00_x.ipynb").write_text("{}")
    assert hub.settings_from_env(zh, tmp_path).notebook_source == tmp_path / "workshop" / "zh_CN"
    assert hub.settings_from_env({}, tmp_path).notebook_source == tmp_path / "workshop"


@pytest.mark.parametrize("lang", ["zh", "fr", "zh-CN"])
def test_an_unknown_language_names_the_editions(lang):
    with pytest.raises(ValueError, match="editions are en, zh_CN"):
        hub.settings_from_env({"AMPKIT_HUB_LANG": lang}, ROOT)


def test_language_pack_problem(tmp_path):
    venv = tmp_path / "venv"
    assert hub.extras.language_pack_problem(venv, "en") is None
    problem = hub.extras.language_pack_problem(venv, "zh_CN")
    assert "make lab-language LANG=zh_CN" in problem and "English menus" in problem
    (venv / "lib" / "python3.11" / "site-packages" / "jupyterlab_language_pack_zh_CN").mkdir(parents=True)
    assert hub.extras.language_pack_problem(venv, "zh_CN") is None


def _plan(kit: Path, *args: str, env=None) -> str:
    return subprocess.run(["make", "-n", "hub", "VENV=fakevenv", *args], cwd=kit, capture_output=True, text=True,
                          timeout=60, env=env).stdout


def test_make_hub_lang_from_the_command_line_only(tmp_path):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    kit = _kit_copy(tmp_path)
    zh = _plan(kit, "LANG=zh_CN")
    assert "AMPKIT_HUB_LANG=zh_CN" in zh and "jupyterlab_language_pack_zh_CN" in zh   # the pack, first
    assert "ls workshop/zh_CN/*.ipynb" in zh and "workshop LANG=zh_CN" in zh
    assert zh.index("jupyterlab_language_pack_zh_CN") < zh.index("jupyterhub -f hub/jupyterhub_config.py")
    env = {**dict(os.environ), "LANG": "zh_CN"}                 # the machine's locale: ignored
    shell = _plan(kit, env=env)
    assert "AMPKIT_HUB_LANG=en" in shell and "language_pack" not in shell and "ls workshop/*.ipynb" in shell
    bad = subprocess.run(["make", "-n", "hub", "VENV=fakevenv", "LANG=fr"], cwd=kit, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "LANG=en and LANG=zh_CN" in bad.stderr


def test_hub_settings_cli_reports_the_learners_folder():
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.hub", "settings"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "AMPKIT_HUB_LANG": "zh_CN"})
    got = json.loads(out.stdout)
    assert got["lang"] == "zh_CN" and got["learner_notebooks"] == "notebooks/zh_CN"
    assert got["notebook_source"].endswith("zh_CN")
