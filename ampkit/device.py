"""Which device to train on, which low-precision dtypes autocast supports there, and which one is *fast*.

Used by every notebook; introduced in ``00_start_here.ipynb`` and explained in ``02_autocast_and_levels.ipynb``.
"Fast" is measured, not assumed: a tiny matmul probe times each dtype against float32 on this machine
(a CPU without AVX512-FP16/AMX runs fp16 matmuls *much slower* than fp32, while bf16 is several times faster).

>>> rep = device_report("cpu")
>>> torch.bfloat16 in rep.autocast_dtypes
True
"""
from __future__ import annotations

import functools
import platform
import time
import warnings
from dataclasses import dataclass, field

import torch

from ampkit.formats import format_name, resolve_format

__all__ = ["pick_device", "DeviceReport", "device_report", "autocast_dtypes", "fast_dtype", "check_autocast_dtype"]

_LOW_DTYPES = (torch.float16, torch.bfloat16)
_VALID_DEVICES = ("cuda", "mps", "cpu")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def pick_device(prefer: str | torch.device | None = None) -> torch.device:
    """The device to train on: the one asked for, else the best available (cuda > mps > cpu).

    Raises ``ValueError`` for an unknown or unavailable device, naming the available ones.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    available = [d for d, ok in (("cuda", torch.cuda.is_available()), ("mps", _mps_available()), ("cpu", True)) if ok]
    if prefer is None:
        return torch.device(available[0])
    try:
        dev = torch.device(prefer)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {prefer!r}; valid choices: {', '.join(_VALID_DEVICES)}") from None
    if dev.type not in _VALID_DEVICES:
        raise ValueError(f"unsupported device {prefer!r}; valid choices: {', '.join(_VALID_DEVICES)}")
    if dev.type not in available:
        raise ValueError(f"device {prefer!r} is not available here; available: {', '.join(available)}")
    return dev


@dataclass(frozen=True)
class DeviceReport:
    """What a device offers for mixed precision, measured on this machine."""

    device: torch.device
    name: str
    autocast_dtypes: tuple[torch.dtype, ...]
    #: float32 matmul time divided by the dtype's time (> 1 means faster than fp32), from the probe.
    speedup: dict[torch.dtype, float] = field(default_factory=dict)
    probe_size: int = 0

    @property
    def fast_dtypes(self) -> tuple[torch.dtype, ...]:
        """Low dtypes whose probe matmul ran clearly faster than float32 here (speed-up >= 1.25)."""
        return tuple(dt for dt in self.autocast_dtypes if self.speedup.get(dt, 0.0) >= 1.25)

    @property
    def fast_dtype(self) -> torch.dtype | None:
        """The fastest low dtype here, or ``None`` when none beats float32."""
        fast = self.fast_dtypes
        return max(fast, key=lambda dt: self.speedup[dt]) if fast else None

    def lines(self) -> list[str]:
        """Human-readable summary, one fact per line."""
        out = [f"device: {self.device.type} ({self.name})"]
        out.append("autocast supports: " + (", ".join(format_name(d) for d in self.autocast_dtypes) or "none"))
        for dt in self.autocast_dtypes:
            s = self.speedup.get(dt)
            verdict = "fast" if dt in self.fast_dtypes else "NOT fast"
            out.append(f"  {format_name(dt)}: matmul {s:.2f}x the speed of float32 (n={self.probe_size}) -> {verdict} here")
        return out


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    if dev.type == "mps":
        return "Apple GPU (MPS)"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _autocast_works(dev: torch.device, dtype: torch.dtype) -> bool:
    a = torch.ones(8, 8, device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autocast(dev.type, dtype=dtype):
                out = a @ a
        except (RuntimeError, AssertionError, ValueError):
            return False
    return out.dtype == dtype


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def _probe_speedups(dev: torch.device, dtypes: tuple[torch.dtype, ...], n: int, rounds: int = 5) -> dict:
    """float32 time / dtype time for an ``n x n`` matmul, best of ``rounds`` interleaved timings.

    Interleaving and taking the minimum keeps the ratio meaningful on a busy machine (both dtypes see the same
    disturbance); on CPU the probe runs single-threaded for the same reason.
    """
    g = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    pairs = {dt: (a32.to(dev, dt), b32.to(dev, dt)) for dt in (torch.float32, *dtypes)}
    best = dict.fromkeys(pairs, float("inf"))
    threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)
    try:
        for a, b in pairs.values():  # warm-up (kernel selection, JIT)
            a @ b
        _sync(dev)
        for _ in range(rounds):
            for dt, (a, b) in pairs.items():
                t0 = time.perf_counter()
                a @ b
                _sync(dev)
                best[dt] = min(best[dt], time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return {dt: best[torch.float32] / best[dt] for dt in dtypes}


@functools.lru_cache(maxsize=None)
def _report(dev_str: str, n: int) -> DeviceReport:
    dev = torch.device(dev_str)
    supported = tuple(dt for dt in _LOW_DTYPES if _autocast_works(dev, dt))
    return DeviceReport(dev, _device_name(dev), supported, _probe_speedups(dev, supported, n), n)


def device_report(device: str | torch.device | None = None, probe_size: int | None = None) -> DeviceReport:
    """Probe ``device`` (default: :func:`pick_device`) once and cache the result.

    The probe is an ``n x n`` matmul per dtype (n=256 on CPU, where fp16 can be ~100x slower than fp32,
    1024 on accelerators); it takes well under a second.
    """
    dev = pick_device(device)
    n = probe_size or (256 if dev.type == "cpu" else 1024)
    return _report(str(dev), int(n))


def autocast_dtypes(device: str | torch.device | None = None) -> tuple[torch.dtype, ...]:
    """The low-precision dtypes ``torch.autocast`` accepts on ``device`` (found by running it)."""
    dev = pick_device(device)
    return tuple(dt for dt in _LOW_DTYPES if _autocast_works(dev, dt))


def fast_dtype(device: str | torch.device | None = None) -> torch.dtype | None:
    """The measured-fastest autocast dtype on ``device``; ``None`` when no low dtype beats float32 there."""
    return device_report(device).fast_dtype


def check_autocast_dtype(dtype: str | torch.dtype, device: str | torch.device | None = None) -> torch.dtype:
    """Return ``dtype`` as a torch dtype if autocast supports it on ``device``; else a ``ValueError`` naming those it does.

    >>> check_autocast_dtype("bf16", "cpu")
    torch.bfloat16
    """
    dev = pick_device(device)
    supported = autocast_dtypes(dev)
    names = ", ".join(format_name(d) for d in supported) or "none"
    try:
        dt = resolve_format(dtype)
    except ValueError:
        raise ValueError(f"autocast dtype must be one of {names} on {dev.type}; got {dtype!r}") from None
    if dt not in supported:
        raise ValueError(f"autocast on {dev.type} does not support {format_name(dt)}; supported: {names}")
    return dt
