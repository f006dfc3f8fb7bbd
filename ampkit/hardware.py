"""What the hardware says about 16-bit dtypes: the CPU's instruction-set flags and the CUDA compute capability.

Introduced in ``00_start_here.ipynb``: which low dtypes are *native* (have matmul instructions / tensor cores) is
read from the hardware, never from a timing, so it is the same on every run. :mod:`ampkit.device` builds its
report (and the measured matmul ratio that explains it) on these functions.

    bf16 native: CPU has AVX512-BF16 / AMX-BF16 (x86) or BF16 (Arm); CUDA compute capability >= 8.0
    fp16 native: CPU has AVX512-FP16 / AMX-FP16;                    CUDA compute capability >= 7.0; MPS

>>> cuda_native_dtypes((7, 5))[1]
'sm_75: float16 tensor cores'
"""
from __future__ import annotations

import platform
import subprocess

import torch

from ampkit.formats import format_name
from ampkit.i18n import mark, tr

__all__ = ["NATIVE_RULES", "cpu_native_dtypes", "cuda_native_dtypes", "cpu_capabilities", "native_dtypes",
           "device_name"]

#: Why a low dtype counts as fast: the hardware feature it needs, per device type (see docs/reference.md).
NATIVE_RULES = {
    "cuda": {"float16": mark("fp16 tensor cores (compute capability >= 7.0, Volta and later)"),
             "bfloat16": mark("bf16 tensor cores (compute capability >= 8.0, Ampere and later)")},
    "cpu": {"bfloat16": mark("AVX512-BF16 or AMX-BF16 instructions (x86), or the BF16 extension (Arm)"),
            "float16": mark("AVX512-FP16 or AMX-FP16 instructions (x86)")},
    "mps": {"float16": mark("Apple GPUs compute in fp16 natively")},
}


def cpu_native_dtypes(capabilities: dict | None = None, machine: str | None = None,
                      cpuinfo: str | None = None) -> dict[torch.dtype, str]:
    """Low dtypes with native matmul instructions on this CPU, each with the feature found.

    ``capabilities`` is what ``torch.cpu.get_capabilities()`` reports (x86 instruction-set flags); on Arm, whose
    flags torch does not list there, the kernel's ``/proc/cpuinfo`` ``Features`` line is read (``bf16``).

    >>> cpu_native_dtypes({"avx512_bf16": True, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False})
    {torch.bfloat16: 'AVX512-BF16'}
    >>> cpu_native_dtypes({"avx512_bf16": False}, machine="x86_64")
    {}
    """
    caps = cpu_capabilities() if capabilities is None else capabilities
    machine = (machine or platform.machine()).lower()
    found: dict[torch.dtype, str] = {}
    bf16 = [label for key, label in (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16")) if caps.get(key)]
    fp16 = [label for key, label in (("amx_fp16", "AMX-FP16"), ("avx512_fp16", "AVX512-FP16")) if caps.get(key)]
    if caps.get("bf16"):  # torch lists Arm's BF16 extension under this name on arm64
        bf16.append("Arm BF16 extension")
    elif machine in ("aarch64", "arm64"):
        text = _read_cpuinfo() if cpuinfo is None else cpuinfo
        if "bf16" in _cpuinfo_flags(text, "features") or (machine == "arm64" and _macos_has_bf16()):
            bf16.append("Arm BF16 extension")
    if bf16:
        found[torch.bfloat16] = " + ".join(bf16)
    if fp16:
        found[torch.float16] = " + ".join(fp16)
    return found


def cuda_native_dtypes(capability: tuple[int, int]) -> tuple[dict[torch.dtype, str], str]:
    """Tensor-core dtypes of a CUDA device with this compute capability, and a one-line description.

    fp16 tensor cores arrived with Volta (7.0), bf16 with Ampere (8.0); older GPUs have none.

    >>> sorted(format_name(d) for d in cuda_native_dtypes((8, 6))[0])
    ['bfloat16', 'float16']
    >>> cuda_native_dtypes((6, 1))
    ({}, 'sm_61: none (tensor cores arrived with compute capability 7.0)')
    """
    major, minor = capability
    sm = f"sm_{major}{minor}"
    found: dict[torch.dtype, str] = {}
    if capability >= (8, 0):
        found[torch.bfloat16] = tr("bf16 tensor cores ({sm})", sm=sm)
    if capability >= (7, 0):
        found[torch.float16] = tr("fp16 tensor cores ({sm})", sm=sm)
    if not found:
        return found, tr("{sm}: none (tensor cores arrived with compute capability 7.0)", sm=sm)
    return found, tr("{sm}: {dtypes} tensor cores", sm=sm,
                     dtypes=", ".join(format_name(d) for d in sorted(found, key=str)))


def cpu_capabilities() -> dict:
    """This CPU's instruction-set flags: ``torch.cpu.get_capabilities()``, else the ``flags`` of /proc/cpuinfo.

    >>> caps = cpu_capabilities()                    # e.g. {'avx2': True, 'avx512_bf16': False, ...}: host-dependent
    >>> isinstance(caps, dict) and all(isinstance(flag, str) for flag in caps)
    True
    """
    get = getattr(torch.cpu, "get_capabilities", None)
    if get is not None:
        try:
            return dict(get())
        except Exception:  # pragma: no cover - a torch build without cpuinfo
            pass
    return dict.fromkeys(_cpuinfo_flags(_read_cpuinfo(), "flags"), True)


def _read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def _cpuinfo_flags(text: str, field: str) -> set[str]:
    """The words of every ``field : ...`` line of /proc/cpuinfo text (``flags`` on x86, ``Features`` on Arm)."""
    flags: set[str] = set()
    for line in text.splitlines():
        if line.lower().startswith(field):
            flags.update(line.split(":", 1)[1].split())
    return flags


def _macos_has_bf16() -> bool:
    try:
        out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip() == "1"


def native_dtypes(dev: torch.device) -> tuple[dict[torch.dtype, str], str]:
    """Low dtype -> the hardware feature that makes it native on ``dev``, and (CUDA only) its tensor-core line.

    >>> native, cores = native_dtypes(torch.device("cpu"))
    >>> set(native) <= {torch.bfloat16, torch.float16}, cores        # a CPU has no tensor-core line
    (True, '')
    """
    if dev.type == "cuda":
        return cuda_native_dtypes(torch.cuda.get_device_capability(dev))
    if dev.type == "mps":
        return {torch.float16: NATIVE_RULES["mps"]["float16"]}, ""
    return cpu_native_dtypes(), ""


def device_name(dev: torch.device) -> str:
    """The device's marketing name: the GPU's, Apple's, or the CPU's ``model name``.

    >>> device_name(torch.device("mps"))
    'Apple GPU (MPS)'
    """
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    if dev.type == "mps":
        return "Apple GPU (MPS)"
    for line in _read_cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "CPU"
