"""The kit's MindSpore O-level map and lists against the REAL ``mindspore.amp.auto_mixed_precision`` O0–O3 of
MindSpore 2.10 (``make test-frameworks``; issue 33).

The kit's side: ``MINDSPORE_O1_WHITE`` / ``MINDSPORE_O2_BLACK`` (:mod:`ampkit.precision.frameworks`, read from
``mindspore/train/amp.py`` at 2.10) and ``LEVEL_MAP["O*"]["MindSpore"]`` (:mod:`ampkit.precision.levels`). From
them the test predicts, for each layer of :class:`msnets.SmallNet`, whether it computes in fp16 or fp32:
O0 none in fp16; O1 the layers whose cell or one of whose ops (the cell's own primitives) is on the white list;
O2 every layer but the black-list cells; O3 every layer. Parameters stay fp32 and the output is fp32 at every level.

The framework's side, read off the real network objects: at O0, O2 and O3 the dtype each layer's innermost cell
returns (forward hooks; O2 wraps a black-list cell as ``_OutputTo16(cell.to_float(float32))``, and O2/O3 wrap the
network in ``_OutputTo32``); at O1 — whose rewritten layers cast their results back to fp32, so their outputs say
nothing — the rewritten layer class's source, which calls ``amp_cast(..., mindspore.float16)`` before its ops where
the layer runs in fp16. No difference found: kit and framework agree layer by layer.

MindSpore's O1 writes the rewritten source into ``os.getcwd()/rewritten_network/`` (no setting moves it): the
module runs in a temporary working folder, and the last test checks that the repository has no such folder.
bf16 on a CPU is refused at run time ("Unsupported data type"), checked in a subprocess (a PyNative error can
surface again in later, unrelated ops of the same process).
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")
from mindspore import amp, nn  # noqa: E402
from msnets import LAYERS, SmallNet  # noqa: E402

from ampkit.precision.frameworks import MINDSPORE_O1_WHITE, MINDSPORE_O2_BLACK  # noqa: E402
from ampkit.precision.levels import LEVEL_MAP, LEVELS  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def temp_cwd(tmp_path_factory):
    """MindSpore's O1 writes rewritten_network/ into the working folder: a temporary one, kept for the module (the
    rewritten classes are imported from there)."""
    here = os.getcwd()
    cwd = tmp_path_factory.mktemp("mindspore-cwd")
    os.chdir(cwd)
    yield cwd
    os.chdir(here)


def _names(classes) -> set[str]:
    return {("nn." if issubclass(c, nn.Cell) else "ops.") + c.__name__ for c in classes}


def test_white_and_black_lists_are_mindspores():
    assert _names(amp.get_white_list()) == MINDSPORE_O1_WHITE and len(MINDSPORE_O1_WHITE) == 20
    assert _names(amp.get_black_list()) == MINDSPORE_O2_BLACK


def _kit_prediction(level: str, net: SmallNet) -> dict[str, str]:
    """fp16/fp32 per layer, from the kit's tables only."""
    out = {}
    for name in LAYERS:
        cell = getattr(net, name)
        cell_name = "nn." + type(cell).__name__
        ops = {"ops." + type(p).__name__ for p in cell._primitives.values() if p is not None}
        low = {"O0": False, "O1": bool(({cell_name} | ops) & MINDSPORE_O1_WHITE),
               "O2": cell_name not in MINDSPORE_O2_BLACK, "O3": True}[level]
        out[name] = "fp16" if low else "fp32"
    return out


def _recorder(seen: dict, layer: str, depth: int):
    """A forward hook keeping the output dtype of the deepest cell seen so far for ``layer``."""
    def hook(cell, inputs, output):
        if layer not in seen or depth > seen[layer][0]:
            seen[layer] = (depth, {ms.float16: "fp16", ms.float32: "fp32"}[output.dtype])
    return hook


def _observed_by_outputs(net) -> dict[str, str]:
    """The dtype the innermost cell of each layer returns, from forward hooks."""
    seen: dict[str, tuple[int, str]] = {}
    for full, cell in net.cells_and_names():
        parts = [p for p in full.split(".") if p and p != "_backbone"]
        if len(parts) != 1:
            continue
        cell.register_forward_hook(_recorder(seen, parts[0], full.count(".")))
    out = net(ms.Tensor(np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)))
    assert out.dtype == ms.float32
    return {k: v for k, (_, v) in seen.items()}


def _observed_o1(net) -> dict[str, str]:
    """At O1: does the rewritten layer's code cast to float16 before its ops?"""
    out = {}
    for name in LAYERS:
        src = inspect.getsource(type(getattr(net, name)))
        out[name] = "fp16" if "mindspore.float16)" in src and "amp_cast(" in src else "fp32"
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_each_layers_precision_is_what_the_kits_tables_predict(level):
    net = SmallNet()
    expected = _kit_prediction(level, net)
    real = amp.auto_mixed_precision(net, level)
    observed = _observed_o1(real) if level == "O1" else _observed_by_outputs(real)
    if level == "O1":
        assert _observed_by_outputs(real) == dict.fromkeys(LAYERS, "fp32")   # results cast back to fp32
    assert observed == expected
    assert {p.dtype for p in real.get_parameters()} == {ms.float32}          # parameters stay fp32
    assert "fp32" in LEVEL_MAP[level]["MindSpore"]


def test_what_each_level_does_to_the_network_object():
    """O0 returns the network; O1 a rewritten subclass of it; O2/O3 wrap it in _OutputTo32, O2 with each black-list
    cell as _OutputTo16(cell) with the cell set to fp32 (to_float) and the rest to fp16."""
    net = SmallNet()
    assert amp.auto_mixed_precision(net, "O0") is net
    o1 = amp.auto_mixed_precision(SmallNet(), "O1")
    assert isinstance(o1, SmallNet) and type(o1) is not SmallNet
    o2 = amp.auto_mixed_precision(SmallNet(), "O2")
    assert type(o2).__name__ == "_OutputTo32"
    inner = o2._backbone
    fp = {n: getattr(inner, n) for n in LAYERS}
    for n, cell in fp.items():
        if "nn." + type(cell).__name__ in MINDSPORE_O2_BLACK:
            raise AssertionError(f"{n} not wrapped")
        if type(cell).__name__ == "_OutputTo16":
            assert cell._backbone.get_mixed_precision_type().name == "FP32"
            assert "nn." + type(cell._backbone).__name__ in MINDSPORE_O2_BLACK
        else:
            assert cell.get_mixed_precision_type().name == "FP16"
    o3 = amp.auto_mixed_precision(SmallNet(), "O3")
    assert type(o3).__name__ == "_OutputTo32"
    assert {getattr(o3._backbone, n).get_mixed_precision_type().name for n in LAYERS} == {"FP16"}


def test_o1_writes_rewritten_network_into_the_working_folder(temp_cwd):
    amp.auto_mixed_precision(SmallNet(), "O1")
    assert any((temp_cwd / "rewritten_network").glob("*.py"))


def test_bf16_is_refused_on_a_cpu():
    code = ("import sys, numpy as np, mindspore as ms; sys.path.insert(0, %r); from msnets import SmallNet; "
            "net = ms.amp.auto_mixed_precision(SmallNet(), 'O3', dtype=ms.bfloat16); "
            "net(ms.Tensor(np.ones((2, 1, 4, 4), np.float32)))" % str(Path(__file__).parent))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert r.returncode != 0 and "Unsupported data type" in r.stderr, r.stderr[-2000:]


def test_nothing_was_written_into_the_repository():
    for folder in (REPO, REPO / "tests_frameworks", REPO / "notebooks"):
        assert not (folder / "rewritten_network").exists() and not (folder / "rank_0").exists()


def test_o1_casts_every_primitive_inside_a_white_list_cell():
    """#39: O1 casts not only the white-list operations: inside a cell whose class is on the white list (Dense) every
    primitive call but Cast gets fp16 inputs (``_insert_cast_for_operators`` with ``force_cast``); a cell on no list
    (Softmax) gets none, unless a primitive of its own is on the white list."""
    from ampkit.lessons.mindspore_and_paddle import rewritten_casts

    o1 = amp.auto_mixed_precision(SmallNet(), "O1")
    dense = dict(rewritten_casts(o1.d1))
    assert {"matmul", "bias_add"} <= {op for op, dt in dense.items() if dt == "float16"}
    assert rewritten_casts(o1.sm) == [] and rewritten_casts(o1.bn) == []
