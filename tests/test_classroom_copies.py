"""Learner copies (ampkit.classroom.copies, `make workshop`): outputs cleared, solutions hidden, links still
resolving, the committed notebooks untouched, regeneration idempotent and careful with a learner's typing, and a copy
that runs from its own folder."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ampkit.classroom.copies import (
    MANIFEST,
    edited_copies,
    is_solution,
    learner_copy,
    main,
    rewrite_links,
    source_fingerprint,
    write_workshop,
)

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_REL_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")


def _digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in COMMITTED}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _src(cell: dict) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


@pytest.fixture(scope="module")
def workshop(tmp_path_factory):
    """One generated workshop folder, a sibling of a ``notebooks`` folder like the kit's own layout."""
    dest = tmp_path_factory.mktemp("kit") / "workshop"
    before = _digest()
    written = write_workshop(dest)
    assert _digest() == before  # the committed notebooks are only read
    return dest, written


def test_every_notebook_copied(workshop):
    dest, written = workshop
    assert [p.name for p in written] == [p.name for p in COMMITTED] and len(written) >= 7
    assert (dest / "README.md").is_file() and (dest / MANIFEST).is_file()


def test_outputs_counts_widget_state_and_timings_cleared(workshop):
    dest, _ = workshop
    for path in COMMITTED:
        nb = json.loads((dest / path.name).read_text())
        assert "widgets" not in nb["metadata"]
        # notebook 09 opens in the kernel `make frameworks` installs (MindSpore and Paddle), the others in python3
        own = "ampkit-frameworks" if nb["metadata"].get("ampkit", {}).get("needs") else "python3"
        assert nb["metadata"]["kernelspec"]["name"] == own, path.name
        for cell in nb["cells"]:
            assert "execution" not in cell["metadata"]
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


def test_solutions_and_setup_cells_hidden(workshop):
    dest, _ = workshop
    for path in COMMITTED:
        original, copy = _cells(path), _cells(dest / path.name)
        assert [c.get("id") for c in copy] == [c.get("id") for c in original]  # cell ids kept
        solutions = [c for c in copy if "solution" in c["metadata"].get("tags", [])]
        assert len(solutions) >= 3, path.name
        for cell in copy:
            if is_solution(cell):
                assert cell["metadata"]["jupyter"]["source_hidden"] is True, path.name
        for o, c in zip(original, copy):
            if o.get("metadata", {}).get("jupyter", {}).get("source_hidden"):  # e.g. the exercises' set-up cell
                assert c["metadata"]["jupyter"]["source_hidden"] is True
        setup = [c for c in copy if c["metadata"].get("jupyter", {}).get("source_hidden") and not is_solution(c)]
        # the set-up: ``ex = exercises(...)`` (or, before a notebook's exercises moved into ampkit, its expected_N)
        assert setup and any("exercises(" in _src(c) or "expected_1" in _src(c) for c in setup), path.name


def test_next_to_notebooks_the_sources_are_the_committed_ones():
    """workshop/ is a sibling of notebooks/: the copies' sources (links included) are exactly the committed ones."""
    for path in COMMITTED:
        nb = json.loads(path.read_text())
        copy = learner_copy(nb, ROOT / "notebooks", ROOT / "workshop")
        assert [_src(c) for c in copy["cells"]] == [_src(c) for c in nb["cells"]]


def test_every_relative_link_resolves_from_the_copy(workshop):
    """Wherever the copies go, each relative link points at the file it pointed at from notebooks/."""
    dest, _ = workshop
    checked = 0
    for path in COMMITTED:
        for original, copy in zip(_cells(path), _cells(dest / path.name)):
            for was, now in zip(_REL_LINK.findall(_src(original)), _REL_LINK.findall(_src(copy))):
                if re.match(r"^([a-zA-Z]+:|#|/)", was):
                    assert now == was
                    continue
                want = (ROOT / "notebooks" / was.split("#")[0]).resolve()
                got = (dest / now.split("#")[0]).resolve()
                assert got == want or got == (dest / Path(was.split("#")[0]).name).resolve(), (was, now)
                checked += 1
    assert checked >= 7


def test_copies_elsewhere_rewrite_links_to_the_same_files(tmp_path):
    dest = tmp_path / "room" / "day1"
    write_workshop(dest)
    found = 0
    for path in COMMITTED:
        for cell in _cells(dest / path.name):
            for target in _REL_LINK.findall(_src(cell)):
                if target.endswith("reference.md") and not re.match(r"^[a-zA-Z]+:", target):
                    found += 1
                    assert (dest / target.split("#")[0]).resolve() == (ROOT / "docs" / "reference.md").resolve()
    assert found >= 7  # every notebook cites docs/reference.md


def test_rewrite_links_keeps_external_anchors_and_sibling_notebooks():
    src, dest = "/kit/notebooks", "/kit/room"
    text = ("[a](https://pytorch.org/docs) [b](#top) [c](04_data_sinking.ipynb) [d](../docs/reference.md#x) "
            "<a href=\"../docs/reference.md\">e</a> [f](/abs/file.md) [g](mailto:x@y.z)")
    out = rewrite_links(text, src, dest)
    assert "(https://pytorch.org/docs)" in out and "(#top)" in out and "(04_data_sinking.ipynb)" in out
    assert "(../docs/reference.md#x)" in out and 'href="../docs/reference.md"' in out  # same depth: same link
    assert "(/abs/file.md)" in out and "(mailto:x@y.z)" in out
    deeper = rewrite_links(text, src, "/kit/room/day1")
    assert "(../../docs/reference.md#x)" in deeper and 'href="../../docs/reference.md"' in deeper
    assert "(04_data_sinking.ipynb)" in deeper


def test_learner_copy_hides_an_untagged_solution_and_leaves_its_input_alone():
    nb = {"cells": [{"cell_type": "code", "source": ["with solution(\"Exercise 1\", \"x\"):\n", "    pass"],
                     "metadata": {}, "outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}],
                     "execution_count": 3},
                    {"cell_type": "code", "source": "answer_1 = ...", "metadata": {"tags": ["nbval-ignore-output"]},
                     "outputs": [], "execution_count": 4}],
          "metadata": {"widgets": {"state": {}}}, "nbformat": 4, "nbformat_minor": 5}
    frozen = json.dumps(nb, sort_keys=True)
    out = learner_copy(nb)
    assert json.dumps(nb, sort_keys=True) == frozen  # input not modified
    assert out["cells"][0]["metadata"]["jupyter"]["source_hidden"] is True
    assert "jupyter" not in out["cells"][1]["metadata"]  # an exercise's answer cell stays open
    assert out["cells"][1]["metadata"]["tags"] == ["nbval-ignore-output"]


@pytest.mark.parametrize("bad", [None, [], {"cells": "x"}, "notebook.ipynb"])
def test_learner_copy_rejects_what_is_not_a_notebook(bad):
    with pytest.raises(TypeError, match="parsed notebook"):
        learner_copy(bad)


def test_regenerating_is_idempotent_and_replaces_test_run_outputs(tmp_path):
    dest = tmp_path / "workshop"
    write_workshop(dest)
    first = {p.name: p.read_bytes() for p in dest.iterdir()}
    # an instructor's test run left outputs in a copy: not the learner's work, replaced without asking
    nb = json.loads((dest / "00_start_here.ipynb").read_text())
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran"}]
    (dest / "00_start_here.ipynb").write_text(json.dumps(nb))
    assert edited_copies(dest) == []
    write_workshop(dest)
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == first


def test_regenerating_refuses_to_lose_a_learners_typing_unless_forced(tmp_path):
    dest = tmp_path / "workshop"
    write_workshop(dest)
    target = dest / "01_fp16_range.ipynb"
    nb = json.loads(target.read_text())
    answer = next(c for c in nb["cells"] if c["cell_type"] == "code" and "answer_1" in _src(c))
    answer["source"] = "answer_1 = 65504  # my prediction"
    target.write_text(json.dumps(nb))
    edited = target.read_bytes()
    (dest / "my_notes.ipynb").write_text("{}")  # the learner's own file
    assert edited_copies(dest) == ["01_fp16_range.ipynb"]
    with pytest.raises(FileExistsError, match="01_fp16_range.ipynb.*FORCE=1"):
        write_workshop(dest)
    assert target.read_bytes() == edited  # nothing written
    write_workshop(dest, force=True)
    assert "my prediction" not in target.read_text()
    assert (dest / "my_notes.ipynb").read_text() == "{}"  # never touched
    assert edited_copies(dest) == []


def test_a_folder_the_kit_did_not_make_is_not_overwritten(tmp_path):
    dest = tmp_path / "workshop"
    dest.mkdir()
    shutil.copy(COMMITTED[0], dest / COMMITTED[0].name)  # no manifest: someone else's notebooks
    with pytest.raises(FileExistsError, match=COMMITTED[0].name):
        write_workshop(dest)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(write_workshop(empty)) == len(COMMITTED)  # an empty folder is fine


def test_a_notebook_the_kit_no_longer_has_is_removed_when_unedited(tmp_path):
    src = tmp_path / "notebooks"
    src.mkdir()
    for p in COMMITTED[:2]:
        shutil.copy(p, src / p.name)
    dest = tmp_path / "workshop"
    write_workshop(dest, src=src)
    (src / COMMITTED[1].name).unlink()
    write_workshop(dest, src=src)
    assert sorted(p.name for p in dest.glob("*.ipynb")) == [COMMITTED[0].name]


def test_bad_destinations(tmp_path):
    with pytest.raises(ValueError, match="another folder"):
        write_workshop(ROOT / "notebooks")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        write_workshop(tmp_path / "file")
    (tmp_path / "none").mkdir()
    with pytest.raises(ValueError, match="no NN_name.ipynb"):
        write_workshop(tmp_path / "out", src=tmp_path / "none")


def test_fingerprint_counts_sources_only():
    nb = {"cells": [{"cell_type": "code", "source": "x = 1", "outputs": [], "metadata": {}}]}
    ran = {"cells": [{"cell_type": "code", "source": ["x = 1"], "outputs": [{"output_type": "stream"}],
                      "metadata": {"execution": {}}, "execution_count": 1}]}
    typed = {"cells": [{"cell_type": "code", "source": "x = 2", "outputs": [], "metadata": {}}]}
    assert source_fingerprint(nb) == source_fingerprint(ran) != source_fingerprint(typed)


def test_main_writes_then_refuses_with_a_message(tmp_path, capsys):
    dest = tmp_path / "ws"
    assert main(["--out", str(dest)]) == 0
    assert f"{len(COMMITTED)} learner copies" in capsys.readouterr().out
    nb = json.loads((dest / "00_start_here.ipynb").read_text())
    nb["cells"].append({"cell_type": "code", "source": "print('mine')", "metadata": {}, "outputs": [],
                        "execution_count": None})
    (dest / "00_start_here.ipynb").write_text(json.dumps(nb))
    assert main(["--out", str(dest)]) == 2
    assert "00_start_here.ipynb" in capsys.readouterr().err
    assert main(["--out", str(dest), "--force"]) == 0


def test_make_workshop_runs_the_copier_with_force_when_asked():
    if not shutil.which("make"):
        pytest.skip("make not installed")
    venv = Path(sys.executable).parent.parent
    common = ["make", "-n", "-o", f"{venv}/.ampkit-installed", f"VENV={venv}", "workshop"]
    plain = subprocess.run(common, capture_output=True, text=True, cwd=ROOT, timeout=60)
    forced = subprocess.run(common + ["FORCE=1"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert plain.returncode == forced.returncode == 0, plain.stderr + forced.stderr
    assert f"{venv}/bin/python -m ampkit.classroom.copies" in plain.stdout and "--force" not in plain.stdout
    assert "-m ampkit.classroom.copies --force" in forced.stdout


def test_a_copy_runs_from_its_own_folder(workshop):
    """Notebook 00's learner copy, executed top to bottom in a fresh kernel with the workshop folder as its working
    directory (the kit comes from the install, not from notebooks/): no error, and the solutions arrive closed."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    dest, _ = workshop
    nb = nbformat.read(dest / "00_start_here.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=False,
                                     resources={"metadata": {"path": str(dest)}})
    client.execute()
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert html.count("<details class='ampkit-solution'>") >= 3
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    assert json.loads((dest / "00_start_here.ipynb").read_text())["cells"][1].get("outputs", []) == []  # not saved
