"""``make hub LANG=zh_CN`` for real: a hub on 127.0.0.1 with ``AMPKIT_HUB_LANG=zh_CN`` starts a learner's server
that opens the Chinese edition, whose JupyterLab has chosen Chinese (the language pack's locale) and whose kernel
runs with ``AMPKIT_LANG=zh_CN`` (the views' labels in Chinese)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from roomtools.kernel_ws import KernelSocket

from conftest import LoopbackHub

NAME = "hubtest-zh"


@pytest.fixture(scope="module")
def zh_hub():
    h = LoopbackHub({"AMPKIT_HUB_LANG": "zh_CN"})
    try:
        h.wait_up()
        h.start_server(NAME)
        yield h
    finally:
        h.stop()


def test_the_learner_opens_the_chinese_edition(zh_hub):
    status, user = zh_hub.api("GET", f"/users/{NAME}")
    assert status == 200 and user["servers"][""]["ready"]
    home = Path(zh_hub.state) / "users" / NAME
    copied = sorted(p.name for p in (home / "notebooks" / "zh_CN").glob("*.ipynb"))
    assert "03_loss_scaling.ipynb" in copied and not list((home / "notebooks").glob("*.ipynb"))
    status, raw = zh_hub.request("GET", f"/user/{NAME}/api/contents/notebooks/zh_CN/03_loss_scaling.ipynb")
    assert status == 200 and "损失缩放" in json.dumps(json.loads(raw)["content"], ensure_ascii=False)
    assert _redirect(zh_hub, f"/user/{NAME}/").rstrip("?").endswith(f"/user/{NAME}/lab/tree/notebooks/zh_CN")


def _redirect(hub, path: str) -> str:
    """Where the learner's server sends ``path`` (its Location header), without following it."""
    import urllib.error
    import urllib.request

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    req = urllib.request.Request(hub.url + path, headers={"Authorization": f"token {hub.token}"})
    try:
        urllib.request.build_opener(NoFollow).open(req, timeout=30)
    except urllib.error.HTTPError as e:
        assert e.code in (301, 302, 303, 307), e.code
        return e.headers["Location"]
    raise AssertionError(f"{path} did not redirect")


def test_jupyterlab_has_chosen_chinese(zh_hub):
    status, raw = zh_hub.request("GET", f"/user/{NAME}/lab/api/settings/@jupyterlab/translation-extension:plugin")
    assert status == 200, raw[:300]
    assert json.loads(json.loads(raw)["raw"])["locale"] == "zh_CN"
    status, raw = zh_hub.request("GET", f"/user/{NAME}/lab/api/translations/zh_CN")
    assert status == 200 and json.loads(raw)["data"], "the language pack is not installed in the learners' venv"


def test_the_kernel_speaks_chinese(zh_hub):
    status, raw = zh_hub.request("POST", f"/user/{NAME}/api/kernels", {"name": "python3"})
    assert status == 201, raw[:300]
    kernel = json.loads(raw)
    ws = KernelSocket(zh_hub.url.replace("http", "ws", 1) + f"/user/{NAME}/api/kernels/{kernel['id']}/channels",
                      zh_hub.token, timeout=60)
    try:
        ws.wait_ready(120)
        ws.execute("import os\nfrom ampkit import i18n\nassert os.environ['AMPKIT_LANG'] == 'zh_CN'\n"
                   "assert i18n.language() == 'zh_CN', i18n.language()\n"
                   "assert i18n.tr('growth every') != 'growth every'", timeout=120)
    finally:
        ws.close()
