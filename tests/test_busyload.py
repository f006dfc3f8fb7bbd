"""The browser suite's background load (tests/browser/busyload.py) really loads the CPU and really stops."""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "browser"))
from busyload import BusyLoad, requested  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_busy_load_spins_and_stops():
    with BusyLoad(2) as load:
        assert load.running() == 2
        pids = [p.pid for p in load.procs]
        # each one burns CPU: 0.1 s of it each, however busy the machine is (a fixed 0.6 s sleep was not enough
        # with two test workers and a browser sharing the 2 cores)
        deadline = time.monotonic() + 60
        while not all(_cpu_seconds(pid) > 0.1 for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_cpu_seconds(pid) > 0.1 for pid in pids), [_cpu_seconds(pid) for pid in pids]
    assert load.running() == 0 and not any(Path(f"/proc/{pid}").exists() for pid in pids)


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_busy_load_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="whole number"):
        BusyLoad(bad)


def test_requested_reads_env(monkeypatch):
    monkeypatch.setenv("AMPKIT_BUSY_LOAD", "2")
    assert requested() == 2
    monkeypatch.delenv("AMPKIT_BUSY_LOAD")
    assert requested() == 0
    monkeypatch.setenv("AMPKIT_BUSY_LOAD", "two")
    with pytest.raises(ValueError, match="AMPKIT_BUSY_LOAD"):
        requested()
