"""The Chinese edition in the room: `make lab|present|workshop LANG=zh_CN` (and only a LANG given to make: the
shell's locale never switches it), presenter mode and learner copies of notebooks/zh_CN/."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ampkit.classroom import copies, present

ROOT = Path(__file__).resolve().parents[1]


def _make(tmp_path, *args, env_lang=None):
    if not shutil.which("make"):
        pytest.skip("make not installed")
    (tmp_path / "ampkit").mkdir(exist_ok=True)
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "ampkit/_version.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "make", tmp_path / "make", dirs_exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}   # not a sub-make
    env.update({"LANG": env_lang} if env_lang else {})
    (tmp_path / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    for stamp in (".ampkit-installed", ".ampkit-test-installed"):   # installed: show only the target's own steps
        (tmp_path / ".venv" / stamp).touch()
    return subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)


def test_make_lab_lang_zh_cn_opens_the_chinese_edition_with_the_language_pack(tmp_path):
    out = _make(tmp_path, "lab", "LANG=zh_CN")
    assert out.returncode == 0, out.stderr
    assert "jupyterlab_language_pack_zh_CN" in out.stdout and '".[zh]"' in out.stdout
    assert '{"locale": "%s"}' in out.stdout and "translation-extension/plugin.jupyterlab-settings" in out.stdout
    lab = next(line for line in out.stdout.splitlines() if " lab --ip=" in line)
    assert "AMPKIT_LANG=zh_CN" in lab and "--ServerApp.root_dir=notebooks/zh_CN" in lab
    assert "JUPYTERLAB_SETTINGS_DIR=" in lab and ".cache/lab-zh_CN/settings" in lab


def test_the_machines_locale_does_not_switch_the_edition(tmp_path):
    out = _make(tmp_path, "lab", env_lang="zh_CN.UTF-8")
    assert out.returncode == 0, out.stderr
    lab = next(line for line in out.stdout.splitlines() if " lab --ip=" in line)
    assert "AMPKIT_LANG" not in lab and "--ServerApp.root_dir=notebooks " in lab + " "


def test_a_bad_lang_is_one_clear_line(tmp_path):
    out = _make(tmp_path, "lab", "LANG=fr")
    assert out.returncode != 0 and "LANG=en and LANG=zh_CN" in out.stderr


def test_present_and_workshop_take_the_same_setting(tmp_path):
    out = _make(tmp_path, "present", "workshop", "LANG=zh_CN", "NB=03")
    assert out.returncode == 0, out.stderr
    assert "ampkit.classroom.present 03 --lang=zh_CN" in out.stdout
    assert "ampkit.classroom.copies --lang=zh_CN" in out.stdout


def test_presenter_mode_of_the_chinese_edition(capsys):
    folder, env = present.edition("zh_CN")
    assert folder == ROOT / "notebooks" / "zh_CN" and env == {"AMPKIT_LANG": "zh_CN"}
    cmd = present.voila_command("03", folder=folder, open_browser=False)
    assert any(part.endswith("notebooks/zh_CN/03_loss_scaling.ipynb") for part in cmd)
    assert present.main(["--lang", "zh_CN", "--list"]) == 0
    assert "03_loss_scaling" in capsys.readouterr().out
    with pytest.raises(ValueError, match="en, zh_CN"):
        present.edition("fr")


def test_learner_copies_of_the_chinese_edition(tmp_path):
    out = tmp_path / "room"
    assert copies.main(["--lang", "zh_CN", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.glob("*.ipynb"))
    assert names == sorted(p.name for p in (ROOT / "notebooks" / "zh_CN").glob("*.ipynb"))
    nb = json.loads((out / names[0]).read_text())
    assert "set_language" in "".join(nb["cells"][0]["source"])   # the language cell comes along
