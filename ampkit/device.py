"""Which device to train on, which low-precision dtypes autocast supports there, and which one is *fast*.

Used by every notebook; introduced in ``00_start_here.ipynb`` and explained in ``02_autocast_and_levels.ipynb``.
"Fast" is decided from what the hardware and torch report (:mod:`ampkit.hardware`: CPU flags, CUDA compute
capability), so it never changes from run to run:

    native        = ampkit.hardware.native_dtypes(device)
    fast_dtype    = bf16 if bf16 in native else fp16 if fp16 in native else None
    default_dtype = fast_dtype or (bf16 if autocast supports it else fp16)   # bf16 needs no loss scaler

A matmul probe then *measures* each dtype against float32 (median and range of interleaved repeats) and is shown
beside the decision as its explanation. On a CPU without those instructions fp16 matmuls run 10-100x *slower*
than fp32 and bf16 can be slower too; with AVX512-BF16/AMX, bf16 is faster. The figures are the learner's own.

>>> rep = device_report("cpu")
>>> torch.bfloat16 in rep.autocast_dtypes
True
"""
from __future__ import annotations

import functools
import statistics
import time
import warnings
from dataclasses import dataclass, field

import torch

from ampkit._util import sync
from ampkit.formats import format_name, resolve_format
from ampkit.hardware import NATIVE_RULES, device_name, native_dtypes
from ampkit.i18n import mark, tr

__all__ = ["pick_device", "DeviceReport", "Ratio", "speed_words", "speed_than", "device_report", "autocast_dtypes",
           "fast_dtype", "check_autocast_dtype"]

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
        raise ValueError(tr("unknown device {device!r}; valid choices: {choices}", device=prefer,
                            choices=", ".join(_VALID_DEVICES))) from None
    if dev.type not in _VALID_DEVICES:
        raise ValueError(tr("unsupported device {device!r}; valid choices: {choices}", device=prefer,
                            choices=", ".join(_VALID_DEVICES)))
    if dev.type not in available:
        raise ValueError(tr("device {device!r} is not available here; available: {choices}", device=prefer,
                            choices=", ".join(available)))
    return dev



def speed_than(ratio: float, reference: str) -> str:
    """``reference time / this time`` against ``reference``, in words: one message, so that a language can put the
    reference where it belongs (Chinese says 速度为 float32 的 2.0 倍 / 耗时约为 float32 的 4.0 倍).

    >>> speed_than(2.0, "float32"), speed_than(0.25, "O0")
    ('2.0x faster than float32', '4.0x slower than O0')
    """
    if not ratio > 0:
        return tr("not measured")
    if ratio >= 1:
        return tr("{x}x faster than {reference}", x=_times(ratio), reference=reference)
    return tr("{x}x slower than {reference}", x=_times(1 / ratio), reference=reference)


@dataclass(frozen=True)
class Ratio:
    """A measured float32-time / dtype-time ratio: the median of ``repeats`` interleaved timings and its range."""

    median: float
    low: float
    high: float
    repeats: int

    def phrase(self, reference: str = "float32") -> str:
        """The ratio in words, as the kit's speed readouts say it ("4.0x slower than float32", not "0.25x").

        >>> Ratio(0.25, 0.2, 0.5, 5).phrase()
        '4.0x slower than float32 (median of 5 repeats; range 2.0-5.0x slower)'
        >>> Ratio(2.2, 1.8, 2.5, 5).phrase()
        '2.2x faster than float32 (median of 5 repeats; range 1.8-2.5x faster)'
        >>> Ratio(0.02, 0.0125, 1.5, 3).phrase("fp32")
        '50x slower than fp32 (median of 3 repeats; range 80x slower to 1.5x faster)'
        """
        if self.low >= 1:
            spread = tr("{lo}-{hi}x faster", lo=_times(self.low), hi=_times(self.high))
        elif self.high < 1:
            spread = tr("{lo}-{hi}x slower", lo=_times(1 / self.high), hi=_times(1 / self.low))
        else:
            spread = tr("{lo}x slower to {hi}x faster", lo=_times(1 / self.low), hi=_times(self.high))
        return tr("{comparison} (median of {n} repeats; range {spread})",
                  comparison=speed_than(self.median, reference), n=self.repeats, spread=spread)

    def __str__(self) -> str:
        return self.phrase()


def _times(x: float) -> str:
    return f"{x:.1f}" if x < 9.95 else f"{x:.0f}"


def speed_words(ratio: float) -> str:
    """``reference time / this time`` in words, as every speed readout of the kit says it (never "0.25x").

    >>> speed_words(2.0), speed_words(0.25), speed_words(0.02)
    ('2.0x faster', '4.0x slower', '50x slower')
    """
    if not ratio > 0:
        return tr("not measured")
    return tr("{x}x faster", x=_times(ratio)) if ratio >= 1 else tr("{x}x slower", x=_times(1 / ratio))


@dataclass(frozen=True)
class DeviceReport:
    """What a device offers for mixed precision.

    Which dtype is *fast* is decided from what the hardware and torch report (``native``: CPU instruction-set
    flags from ``torch.cpu.get_capabilities()``, the CUDA compute capability), never from a timing, so it is the
    same on every run. The timing probe (``speedup``) is shown beside it as an explanation.
    """

    device: torch.device
    name: str
    autocast_dtypes: tuple[torch.dtype, ...]
    #: float32 matmul time divided by the dtype's time (> 1 means faster than fp32): median of the probe's repeats.
    speedup: dict[torch.dtype, float] = field(default_factory=dict)
    probe_size: int = 0
    #: low dtype -> the hardware feature that makes it fast here; a dtype missing here has no native support.
    native: dict[torch.dtype, str] = field(default_factory=dict)
    #: low dtype -> the measured ratio with its spread (the explanation shown beside the decision).
    ratios: dict[torch.dtype, Ratio] = field(default_factory=dict)
    #: CUDA only: "sm_XY" and which tensor-core dtypes it has, else "".
    tensor_cores: str = ""

    @property
    def fast_dtypes(self) -> tuple[torch.dtype, ...]:
        """Autocast dtypes with native hardware support here (bf16 first): decided from hardware, not timing."""
        return tuple(dt for dt in (torch.bfloat16, torch.float16) if dt in self.autocast_dtypes and dt in self.native)

    @property
    def fast_dtype(self) -> torch.dtype | None:
        """The low dtype to prefer for speed here, or ``None`` when none has native support.

        Rule: among the natively supported dtypes, bf16 before fp16 (bf16 needs no loss scaler).

        >>> fast_dtype("cpu") in (torch.bfloat16, torch.float16, None)   # decided from the hardware, never a timing
        True
        """
        fast = self.fast_dtypes
        return fast[0] if fast else None

    @property
    def default_dtype(self) -> torch.dtype | None:
        """The dtype a widget starts with: :attr:`fast_dtype`, else bf16 where autocast supports it, else fp16.

        bf16 is the fallback because it needs no loss scaler; it may still run slower than fp32 on such hardware.
        """
        if self.fast_dtype is not None:
            return self.fast_dtype
        for dt in (torch.bfloat16, torch.float16):
            if dt in self.autocast_dtypes:
                return dt
        return None

    def verdict(self, dt: torch.dtype) -> str:
        """The hardware decision for ``dt`` in words: ``"native here (AVX512-BF16)"`` or
        ``"not native here (needs AVX512-BF16 or AMX-BF16 instructions ...)"``."""
        why = self.native.get(dt)
        if why:
            return tr("native here ({why})", why=why)
        needs = NATIVE_RULES.get(self.device.type, {}).get(format_name(dt), mark("hardware support"))
        return tr("not native here (needs {needs})", needs=tr(needs))

    def measured(self, dt: torch.dtype) -> str:
        """The measured matmul ratio for ``dt`` in words (the explanation beside the decision)."""
        r = self.ratios.get(dt)
        return r.phrase() if r else speed_than(self.speedup.get(dt, float("nan")), "float32")

    def default_reason(self) -> str:
        """Why :attr:`default_dtype` is the default (``""`` when there is none)."""
        default = self.default_dtype
        if default is None:
            return ""
        if default == self.fast_dtype:
            return (tr("native here; preferred because bf16 needs no loss scaler") if default == torch.bfloat16 else
                    tr("native here; fp16 training needs a loss scaler (torch.amp.GradScaler)"))
        return (tr("no 16-bit dtype is native here; bf16 needs no loss scaler") if default == torch.bfloat16 else
                tr("no 16-bit dtype is native here; the only one autocast supports"))

    def lines(self) -> list[str]:
        """Human-readable summary, one fact per line: the decision (hardware) and the measurement (explanation).

        >>> rep = DeviceReport(torch.device("cpu"), "x", (torch.bfloat16,), native={torch.bfloat16: "AMX-BF16"},
        ...                    ratios={torch.bfloat16: Ratio(2.0, 1.5, 2.5, 3)}, probe_size=8)
        >>> print("\\n".join(rep.lines()[2:]))
          bfloat16: native here (AMX-BF16)
              measured 8x8 matmul: 2.0x faster than float32 (median of 3 repeats; range 1.5-2.5x faster)
        default low dtype: bfloat16 (native here; preferred because bf16 needs no loss scaler)
        """
        out = [tr("device: {type} ({name})", type=self.device.type, name=self.name)]
        if self.tensor_cores:
            out.append(tr("tensor cores: {cores}", cores=self.tensor_cores))
        out.append(tr("autocast supports: ") + (", ".join(format_name(d) for d in self.autocast_dtypes) or tr("none")))
        for dt in self.autocast_dtypes:
            out.append("  " + tr("{name}: {detail}", name=format_name(dt), detail=self.verdict(dt)))
            out.append("      " + tr("measured {size}matmul: {speed}", size=f"{self.probe_size}x{self.probe_size} ",
                                     speed=self.measured(dt)))
        if self.default_dtype is not None:
            out.append(tr("default low dtype: {dtype} ({why})", dtype=format_name(self.default_dtype),
                          why=self.default_reason()))
        return out


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


def _probe_ratios(dev: torch.device, dtypes: tuple[torch.dtype, ...], n: int, repeats: int = 5) -> dict:
    """float32 time / dtype time for an ``n x n`` matmul: median and range of ``repeats`` interleaved timings.

    Each repeat times every dtype back to back, so a burst of load hits all dtypes alike; on
    CPU the probe runs single-threaded for the same reason. The result explains the hardware decision; it never
    makes it.
    """
    g = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    pairs = {dt: (a32.to(dev, dt), b32.to(dev, dt)) for dt in (torch.float32, *dtypes)}
    ratios: dict[torch.dtype, list[float]] = {dt: [] for dt in dtypes}
    threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)
    try:
        for a, b in pairs.values():  # warm-up (kernel selection, JIT)
            a @ b
        sync(dev)
        for _ in range(repeats):
            t = {}
            for dt, (a, b) in pairs.items():
                t0 = time.perf_counter()
                a @ b
                sync(dev)
                t[dt] = time.perf_counter() - t0
            for dt in dtypes:
                ratios[dt].append(t[torch.float32] / t[dt])
    finally:
        torch.set_num_threads(threads)
    return {dt: Ratio(statistics.median(r), min(r), max(r), repeats) for dt, r in ratios.items()}


@functools.lru_cache(maxsize=None)
def _report(dev_str: str, n: int) -> DeviceReport:
    dev = torch.device(dev_str)
    supported = tuple(dt for dt in _LOW_DTYPES if _autocast_works(dev, dt))
    ratios = _probe_ratios(dev, supported, n)
    native, cores = native_dtypes(dev)
    return DeviceReport(dev, device_name(dev), supported, {dt: r.median for dt, r in ratios.items()}, n,
                        native=native, ratios=ratios, tensor_cores=cores)


def device_report(device: str | torch.device | None = None, probe_size: int | None = None) -> DeviceReport:
    """Probe ``device`` (default: :func:`pick_device`) once and cache the result.

    The probe is an ``n x n`` matmul per dtype (n=256 on CPU, where fp16 can be ~100x slower than fp32,
    1024 on accelerators); it takes well under a second.

    >>> r = device_report("cpu", probe_size=16)      # cached: a second call with the same arguments costs nothing
    >>> r.device, set(r.fast_dtypes) <= set(r.autocast_dtypes), r is device_report("cpu", probe_size=16)
    (device(type='cpu'), True, True)
    """
    dev = pick_device(device)
    n = probe_size or (256 if dev.type == "cpu" else 1024)
    return _report(str(dev), int(n))


def autocast_dtypes(device: str | torch.device | None = None) -> tuple[torch.dtype, ...]:
    """The low-precision dtypes ``torch.autocast`` accepts on ``device`` (found by running it).

    >>> torch.bfloat16 in autocast_dtypes("cpu")     # every CPU build autocasts to bf16 (fast or not)
    True
    """
    dev = pick_device(device)
    return tuple(dt for dt in _LOW_DTYPES if _autocast_works(dev, dt))


def fast_dtype(device: str | torch.device | None = None) -> torch.dtype | None:
    """The natively supported autocast dtype to prefer on ``device`` (bf16 first); ``None`` when none is native.

    >>> fast_dtype("cpu") in (torch.bfloat16, torch.float16, None)   # decided from the hardware, never a timing
    True
    """
    return device_report(device).fast_dtype


def check_autocast_dtype(dtype: str | torch.dtype, device: str | torch.device | None = None) -> torch.dtype:
    """Return ``dtype`` as a torch dtype if autocast supports it on ``device``; else a ``ValueError`` naming those
    it does.

    >>> check_autocast_dtype("bf16", "cpu")
    torch.bfloat16
    """
    dev = pick_device(device)
    supported = autocast_dtypes(dev)
    names = ", ".join(format_name(d) for d in supported) or tr("none")
    try:
        dt = resolve_format(dtype)
    except ValueError:
        raise ValueError(tr("autocast dtype must be one of {names} on {device}; got {dtype!r}", names=names,
                            device=dev.type, dtype=dtype)) from None
    if dt not in supported:
        raise ValueError(tr("autocast on {device} does not support {dtype}; supported: {names}", device=dev.type,
                            dtype=format_name(dt), names=names))
    return dt
