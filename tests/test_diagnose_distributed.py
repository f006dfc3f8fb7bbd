"""The 2-process gloo recipe: identical parameters under DDP, the found_inf rule with sharded gradients, and
nothing left running when the workers cannot start, fail, or run past the timeout."""
import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ampkit.diagnose.distributed import run_data_parallel


def _workers_with(port: int) -> list[str]:
    """Processes whose command line carries this run's port (the workers), read from /proc."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "ampkit.diagnose.distributed" in cmd and f'"port": {port}' in cmd:
                found.append(d.name)
    return found


def test_ddp_ranks_agree_and_params_identical():
    ranks = run_data_parallel(steps=3, mode="ddp", poison_rank=0, poison_step=1)
    assert [r.rank for r in ranks] == [0, 1]
    assert ranks[0].skipped == ranks[1].skipped == [False, True, False]   # rank 0's inf made rank 1 skip too
    assert ranks[0].scales == ranks[1].scales == [2.0 ** 16, 2.0 ** 16, 2.0 ** 15]
    assert ranks[0].params == ranks[1].params


def test_sharded_gradients_need_found_inf_all_reduced():
    plain = run_data_parallel(steps=2, mode="sharded", scaler="torch", poison_rank=0, poison_step=1)
    assert plain[0].skipped == [False, True] and plain[1].skipped == [False, False]   # the ranks disagree
    synced = run_data_parallel(steps=2, mode="sharded", scaler="sharded", poison_rank=0, poison_step=1)
    assert synced[0].skipped == synced[1].skipped == [False, True]


def test_port_taken_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"port {port} .* is taken"):
            run_data_parallel(port=port)


def test_workers_that_cannot_start_or_fail_leave_nothing():
    with pytest.raises(RuntimeError, match="could not start worker process"):
        run_data_parallel(python="/nonexistent/python", start="spawn")
    with pytest.raises(RuntimeError, match="rank 0 failed"):
        run_data_parallel(python="/bin/false", start="spawn")


def _children() -> list[int]:
    """Live (not zombie) child processes of this test process, read from /proc."""
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                kids.append(int(d.name))
    return kids


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_timeout_kills_every_worker(start, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # fork is refused on a GPU machine (tested below)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = set(_children())
    with pytest.raises(TimeoutError, match="all were stopped"):
        run_data_parallel(port=port, timeout=0.3 if start == "spawn" else 0.001, start=start)
    assert _workers_with(port) == []
    assert set(_children()) <= before


def test_bad_arguments():
    with pytest.raises(ValueError, match="'ddp', 'sharded'"):
        run_data_parallel(mode="fsdp")
    with pytest.raises(ValueError, match="world_size"):
        run_data_parallel(world_size=1)
    with pytest.raises(ValueError, match="start='spawn'"):
        run_data_parallel(python="/usr/bin/python3", start="fork")


def test_fork_is_refused_and_not_the_default_where_torch_sees_a_gpu(monkeypatch):
    """Where torch sees a GPU, a forked child fails in its backward pass once the parent ran one (autograd's device
    threads; seen on the first H100 run of notebook 05): workers are spawned there."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ValueError, match="forked child can use neither CUDA nor autograd"):
        run_data_parallel(start="fork")

    def no_process(*args, **kwargs):
        raise OSError("not started: this test only looks at which start method was chosen")

    monkeypatch.setattr(subprocess, "Popen", no_process)      # only the spawn path starts a Popen
    with pytest.raises(RuntimeError, match="could not start worker process 0 .* not started"):
        run_data_parallel()


def test_a_forked_workers_error_reaches_its_log_under_a_kernels_streams(monkeypatch):
    """In a Jupyter kernel sys.stderr is the kernel's stream object, not fd 2: the error must still be in the log."""
    import ampkit.diagnose.distributed as distributed  # the launcher looks its worker up in the rank: replaced here

    def boom(cfg):
        raise RuntimeError("boom from the worker")

    monkeypatch.setattr(distributed, "_worker", boom)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # fork is refused on a GPU machine (tested above)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    with pytest.raises(RuntimeError, match="(?s)rank . failed.*boom from the worker"):
        run_data_parallel(start="fork", timeout=20)


def test_a_rank_stopped_before_its_log_exists_still_gets_the_timeout_message(tmp_path):
    """A forked rank stopped by a very short timeout may not have opened its log: the TimeoutError still says
    what happened (it once raised FileNotFoundError instead, in a fresh clone with two test workers)."""
    from ampkit._ranks import _tail  # the kit's one launcher (also notebook 08's)

    assert _tail(tmp_path / "rank0.log", 1000) == "(no output: the rank had not opened its log yet)"
    (tmp_path / "rank0.log").write_text("x" * 50 + "last words")
    assert _tail(tmp_path / "rank0.log", 10) == "last words"
