"""ampkit.lessons.mindspore_and_paddle (notebook 09) without the frameworks: its pure helpers, its refusals, and the
one real scaler the main environment has (torch's) against the kit's preset. What needs MindSpore or Paddle runs in
notebook 09 and tests_frameworks/ under `make test-frameworks`."""
from __future__ import annotations

import importlib.util
import json
import random
import sys
import types
from pathlib import Path

import pytest

from ampkit.lessons import mindspore_and_paddle as mp

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks" / "09_mindspore_and_paddle.ipynb"


def test_missing_frameworks_is_what_this_python_cannot_import():
    assert mp.FRAMEWORKS == ("mindspore", "paddle")          # the import order that works in one process
    assert mp.missing_frameworks() == [n for n in mp.FRAMEWORKS if importlib.util.find_spec(n) is None]


def test_start_frameworks_without_them_says_how_to_get_them(monkeypatch):
    monkeypatch.setattr(mp, "missing_frameworks", lambda: ["paddle"])
    with pytest.raises(ImportError, match=r"needs paddle.*make frameworks.*ampkit \+ MindSpore \+ PaddlePaddle"):
        mp.start_frameworks()


def test_start_frameworks_refuses_paddle_imported_first(monkeypatch):
    monkeypatch.setattr(mp, "missing_frameworks", lambda: [])
    monkeypatch.setitem(sys.modules, "paddle", types.ModuleType("paddle"))
    monkeypatch.delitem(sys.modules, "mindspore", raising=False)
    with pytest.raises(RuntimeError, match="import mindspore first"):
        mp.start_frameworks()


def test_mindspore_net_needs_the_scratch_folder(monkeypatch):
    monkeypatch.setattr(mp, "_scratch", [])
    with pytest.raises(RuntimeError, match="start_frameworks"):
        mp.mindspore_net()
    compile(mp.NET_SOURCE, "ampkit_09_net.py", "exec")          # the network's module is a valid file


def test_table_md_and_its_refusal():
    assert mp.table_md([{"a": 1, "b": "x|y"}, {"a": 2, "b": "z"}]).splitlines() == [
        "| a | b |", "|---|---|", "| 1 | x\\|y |", "| 2 | z |"]
    with pytest.raises(ValueError, match="non-empty list"):
        mp.table_md([])


def test_first_line_keeps_the_framework_sentence_without_its_stack():
    err = TypeError("Select CPU operator[MatMul] fail! Unsupported data type!\nThe supported data types are ...\n"
                    "- C++ Call Stack:")
    assert mp.first_line(err) == "TypeError: Select CPU operator[MatMul] fail! Unsupported data type!"
    assert mp.first_line(ValueError("")) == "ValueError: "


def test_parse_flags_text_and_bad_flags():
    assert mp.parse_flags_text("") == []
    assert mp.parse_flags_text(".o.") == [False, True, False]
    for bad in ("oxo", "O", ["o"], None):
        with pytest.raises(ValueError, match=r"'o' \(overflow\) and '\.' \(clean step\)"):
            mp.parse_flags_text(bad)


def test_list_differences():
    assert mp.list_differences({"softmax", "scatter"}, {"softmax"}) == {"only in the framework": ["scatter"],
                                                                        "only in the kit": []}
    assert mp.list_differences([], ["relu"]) == {"only in the framework": [], "only in the kit": ["relu"]}


def test_rewritten_casts_reads_a_generated_construct(tmp_path, monkeypatch):
    """A construct shaped like MindSpore's O1 output (amp_cast before a primitive call): the calls with a cast
    argument, with the dtype they were cast to."""
    (tmp_path / "fake_rewrite.py").write_text(
        "def amp_cast(x, dtype):\n    return x\n\n\nclass mindspore:\n    float16, float32 = 'f16', 'f32'\n\n\n"
        "class DenseOpt:\n"
        "    def construct(self, x):\n"
        "        x_var_1 = amp_cast(x, mindspore.float16)\n"
        "        weight_var = amp_cast(self.weight, mindspore.float16)\n"
        "        x = self.matmul(x_var_1, weight_var)\n"
        "        x = amp_cast(x, mindspore.float32)\n"
        "        y = self.activation(x)\n"
        "        z = self.other(w)\n"
        "        return y\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fake_rewrite")
    assert mp.rewritten_casts(module.DenseOpt()) == [("matmul", "float16"), ("activation", "float32")]


def test_run_apart_only_runs_its_own_experiment():
    for bad in ("os.system", "paddle_scales", ""):
        with pytest.raises(ValueError, match="mindspore_bf16_matmul"):
            mp.run_apart(bad)


def test_torch_scaler_and_the_kit_preset_agree_step_by_step():
    """The real torch.amp.GradScaler('cpu') against the kit's "torch" preset, scale after every step, on random
    streams (no floor: scales below 1 included)."""
    rng = random.Random(9)
    for _ in range(5):
        flags = "".join(rng.choice("o..") for _ in range(rng.randint(5, 25)))
        kwargs = {"init_scale": 2.0 ** rng.randint(0, 4), "growth_interval": rng.randint(1, 4),
                  "growth_factor": rng.choice([2.0, 3.0]), "backoff_factor": rng.choice([0.5, 0.25])}
        assert mp.torch_scales(flags, **kwargs) == mp.kit_scales("torch", flags, **kwargs), (flags, kwargs)
    assert min(mp.torch_scales("oooo", init_scale=2.0)) == 0.125


def test_notebook_09_declares_what_it_needs_in_both_editions():
    """The main suite skips notebook 09 (conftest.py reads metadata.ampkit.needs; the Chinese edition's through its
    source); `make test-frameworks` runs it."""
    meta = json.loads(NB.read_text())["metadata"]["ampkit"]
    assert meta["needs"] == list(mp.FRAMEWORKS)
    zh = json.loads((NB.parent / "zh_CN" / NB.name).read_text())["metadata"]["ampkit"]
    assert (NB.parent / "zh_CN" / zh["source"]).resolve() == NB.resolve()


def test_signature_defaults_reads_the_signature_and_names_what_exists():
    from ampkit.lessons import mindspore_and_paddle_copied as mc

    def train(epoch, dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1):
        pass

    assert mc.signature_defaults(train, "dataset_sink_mode", "sink_size") == {"dataset_sink_mode": False,
                                                                               "sink_size": -1}
    with pytest.raises(ValueError, match=r"no parameter sink_mode; its parameters: epoch, dataset, callbacks"):
        mc.signature_defaults(train, "sink_mode")


def test_round_trip_rows_counts_bits_and_relative_errors():
    """Bits compared as bits (-0.0 is not 0.0), errors relative to the reference's largest magnitude."""
    import numpy as np

    from ampkit.lessons import mindspore_and_paddle_copied as mc

    ref = np.array([4.0, -2.0, 0.0], np.float32)
    plain = np.array([4.0, -2.0, 0.0], np.float32)
    scaled = np.array([4.0, -2.5, -0.0], np.float32)
    (row,) = mc.round_trip_rows(["w"], [ref], [plain], [scaled], 1024.0)
    assert row == {"parameter": "w", "same bits as unscaled": "1 of 3", "max error, unscaled": 0.0,
                   "max error, ×1024 ÷1024": 0.125}
    with pytest.raises(ValueError, match="one entry per parameter"):
        mc.round_trip_rows(["w", "b"], [ref], [plain], [scaled], 1024.0)
