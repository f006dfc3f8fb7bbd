"""A learner takes their work home (issue 22, item 1): in JupyterLab's file browser, right-click a folder →
"Download as an Archive" gives one .zip of the whole folder. JupyterLab 4's own "Download" takes files only; the
menu item comes from the jupyter-archive extension (server and lab parts), which the kit installs with its hub and
browser extras. The same clicks work in a learner's server on the hub (hub/README.md, "Taking work home")."""
from __future__ import annotations

import importlib.util
import io
import json
import urllib.request
import zipfile

import pytest
from test_solutions_browser import _open_browser_page

pytestmark = pytest.mark.browser

FOLDER = "take-home-check"
FILES = {"notes.txt": "what I changed in notebook 03\n", "results/run-1.csv": "step,loss\n1,0.25\n"}


def _put(server, path: str, model: dict) -> None:
    req = urllib.request.Request(f"{server.url}/api/contents/{path}?token={server.token}", method="PUT",
                                 data=json.dumps(model).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


def _delete(server, path: str) -> None:
    req = urllib.request.Request(f"{server.url}/api/contents/{path}?token={server.token}", method="DELETE")
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except OSError:
        pass


def test_a_folder_downloads_as_one_archive(lab_server, browser):
    assert importlib.util.find_spec("jupyter_archive"), "jupyter-archive is in the browser extra: make install-test"
    server = lab_server
    for folder in (FOLDER, f"{FOLDER}/results"):
        _put(server, folder, {"type": "directory"})
    for name, text in FILES.items():
        _put(server, f"{FOLDER}/{name}", {"type": "file", "format": "text", "content": text})
    notebook = (server.root / "03_loss_scaling.ipynb").read_bytes()
    _put(server, f"{FOLDER}/03_loss_scaling.ipynb",
         {"type": "notebook", "format": "json", "content": json.loads(notebook)})
    errors: list[str] = []
    page = _open_browser_page(browser, f"{server.url}/lab?token={server.token}&reset", errors)
    try:
        item = page.locator(f".jp-DirListing-item[data-isdir='true'][title^='Name: {FOLDER}\\a']")
        item.wait_for(timeout=60_000)
        item.click(button="right")
        entry = page.locator("li.lm-Menu-item[data-command='filebrowser:download-archive']")
        entry.wait_for(timeout=30_000)
        assert entry.inner_text().strip() == "Download as an Archive"
        with page.expect_download(timeout=60_000) as info:
            entry.click()
        download = info.value
        assert download.suggested_filename == f"{FOLDER}.zip"
        with zipfile.ZipFile(io.BytesIO(open(download.path(), "rb").read())) as zf:
            names = set(zf.namelist())
            assert {f"{FOLDER}/{n}" for n in FILES} | {f"{FOLDER}/03_loss_scaling.ipynb"} <= names, names
            for name, text in FILES.items():
                assert zf.read(f"{FOLDER}/{name}").decode() == text
            saved = json.loads(zf.read(f"{FOLDER}/03_loss_scaling.ipynb"))
            assert saved["cells"] == json.loads(notebook)["cells"]
        assert not errors, "\n".join(errors)
    finally:
        page.context.close()
        _delete(server, f"{FOLDER}/results/run-1.csv")
        for name in ("notes.txt", "03_loss_scaling.ipynb", "results"):
            _delete(server, f"{FOLDER}/{name}")
        _delete(server, FOLDER)
