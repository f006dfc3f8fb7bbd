"""One process, both frameworks: MindSpore 2.10.0 must be imported before PaddlePaddle 3.3.1 (``make test-frameworks``;
issue 33). Paddle first leaves MindSpore's CPU kernels unable to load ("undefined symbol:
dnnl_threadpool_interop_stream_create", a oneDNN function — that Paddle's oneDNN, loaded first, lacks it is an
inference from the name, not read in either source), which is why
``make test-frameworks`` runs each framework's tests in a pytest process of its own and notebook 09 imports
MindSpore first. Each order runs in a fresh subprocess.
"""
import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_mindspore_first_works():
    r = _run("import mindspore, paddle; from mindspore import ops, Tensor; import numpy as np; "
             "print(ops.relu(Tensor(np.array([-1.0, 2.0], np.float32))).asnumpy().tolist(), "
             "paddle.nn.functional.relu(paddle.to_tensor([-1.0, 2.0])).numpy().tolist())")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-4:] == ["[0.0,", "2.0]", "[0.0,", "2.0]"]


def test_paddle_first_breaks_mindspore():
    r = _run("import paddle, mindspore")
    if r.returncode == 0:
        pytest.fail("paddle then mindspore imported cleanly: the import-order rule may be obsolete (update "
                    "make/frameworks.mk, fw notes and notebook 09)")
    assert "undefined symbol: dnnl_threadpool_interop_stream_create" in r.stderr
