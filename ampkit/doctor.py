"""``python -m ampkit doctor``: is this machine ready for the workshop?

Run in ``00_start_here.ipynb``. Each check is a plain function result (tested); ``main`` only prints.

>>> results = run_checks(probe_device=False)
>>> all(r.status in ("OK", "FAIL", "WARN", "INFO") for r in results)
True
"""
from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ampkit._version import TORCH_TESTED
from ampkit.i18n import mark, tr

__all__ = ["Check", "run_checks", "main", "check_device", "check_torch_features", "cpu_flags_detail", "CPU_FLAGS"]

_FIX_TEXT = mark("Fix: run `make lab` from the kit's folder (or, in your venv, "
                 "`pip install -c constraints.txt torch=={version} && pip install -c constraints.txt -e .`).")
FIX = _FIX_TEXT.format(version=TORCH_TESTED)


def _fix() -> str:
    """:data:`FIX` in the kit's language."""
    return tr(_FIX_TEXT, version=TORCH_TESTED)
_TORCH_FLOOR = ".".join(TORCH_TESTED.split(".")[:2])


def _feature_probes() -> list[tuple[str, str, Callable[[], object]]]:
    """(feature, the notebooks that need it, a probe returning True when this torch has it)."""
    import torch  # deferred: the doctor checks that torch is installed before it imports it

    def cpu_fp16_autocast():
        with torch.autocast("cpu", dtype=torch.float16):
            return (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float16

    def cpu_grad_scaler():
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.amp.GradScaler("cpu").is_enabled()

    return [
        (mark("CPU fp16 autocast"), "02, 03, 05", cpu_fp16_autocast),
        ("torch.amp.GradScaler('cpu')", "03, 05", cpu_grad_scaler),
        (mark("fp8 dtypes (float8_e4m3fn, float8_e5m2)"), "01, 06",
         lambda: hasattr(torch, "float8_e4m3fn") and hasattr(torch, "float8_e5m2")),
        (mark("torch.cpu.get_capabilities (CPU instruction flags)"), "00, 02",
         lambda: callable(getattr(torch.cpu, "get_capabilities", None))),
        ("torch.compile", "04", lambda: callable(getattr(torch, "compile", None))),
    ]


def check_torch_features(probes=None) -> list[Check]:
    """Each torch feature the notebooks use, found by trying it (not by version): OK, or WARN naming the notebooks
    that need it and the fix; plus whether this torch is the tested release, older or newer."""
    import torch  # deferred, as above

    checks = []
    here, tested = _version_tuple(torch.__version__), _version_tuple(TORCH_TESTED)
    if here[:2] == tested[:2]:
        checks.append(Check(mark("torch release"), "OK", tr("{version}: the release the kit is tested with",
                                                     version=torch.__version__)))
    elif here < tested:
        checks.append(Check("torch release", "WARN", tr("{version} is older than the tested {tested}; "
                                                       "the features below say what is missing",
                                                       version=torch.__version__, tested=TORCH_TESTED), False, _fix()))
    else:
        checks.append(Check("torch release", "INFO", tr("{version} is newer than the tested {tested}; "
                                                       "expected to work, not tested",
                                                       version=torch.__version__, tested=TORCH_TESTED), False))
    for name, notebooks, probe in (probes if probes is not None else _feature_probes()):
        try:
            ok = bool(probe())
        except Exception as exc:  # a probe that raises means the feature is not usable here
            ok, name = False, f"{name} ({type(exc).__name__})"
        checks.append(Check(name, "OK" if ok else "WARN",
                            tr("available") if ok else tr("missing in torch {version}: notebooks {notebooks} need it",
                                                          version=torch.__version__, notebooks=notebooks),
                            False, _fix()))
    return checks


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report. ``required`` failures make the doctor exit non-zero."""

    name: str
    status: str  # "OK", "FAIL", "WARN" or "INFO"
    detail: str
    required: bool = True
    fix: str = ""

    def line(self) -> str:
        tag = {"OK": "[ OK ]", "FAIL": "[FAIL]", "WARN": "[WARN]", "INFO": "[INFO]"}[self.status]
        text = f"{tag} " + tr("{name}: {detail}", name=tr(self.name), detail=self.detail)   # Chinese: full-width
        return text + (f"\n       -> {self.fix}" if self.fix and self.status in ("FAIL", "WARN") else "")


def _version_tuple(v: str) -> tuple[int, ...]:
    nums = []
    for part in v.split("+")[0].split(".")[:3]:
        m = re.match(r"\d+", part)
        nums.append(int(m.group(0)) if m else 0)
    return tuple(nums)


def check_python(version: tuple[int, int, int] | None = None) -> Check:
    v = version or sys.version_info[:3]
    text = ".".join(map(str, v))
    ok = tuple(v[:2]) >= (3, 10)
    return Check("python", "OK" if ok else "FAIL", tr("{version} (need >= 3.10)", version=text),
                 fix=tr("install Python 3.10 or newer"))


def check_package(module: str, dist: str, minimum: str, required: bool = True, why: str = "") -> Check:
    """Is ``dist`` installed (``module`` findable, not imported: importing jupyterlab alone takes seconds)
    and at least ``minimum``?"""
    label = tr("{what} ({detail})", what=dist, detail=tr(why)) if why else dist
    try:
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"no module named {module!r}")
        version = md.version(dist)
    except Exception as exc:  # ImportError, PackageNotFoundError, or a broken install
        return Check(label, "FAIL" if required else "WARN",
                     tr("not installed ({error}: {exc})", error=type(exc).__name__, exc=exc), required, _fix())
    if _version_tuple(version) < _version_tuple(minimum):
        return Check(label, "FAIL" if required else "WARN",
                     tr("{version} is too old (need >= {minimum})", version=version, minimum=minimum), required, _fix())
    return Check(label, "OK", version, required)


def check_widgets_extension() -> Check:
    """Are the JupyterLab widgets extension and anywidget's installed? Without either, the kit's views (anywidgets,
    drawn in the browser) show only their still picture and do not move."""
    name = mark("JupyterLab widgets extension")
    fix = tr("the kit's views will show only their still picture and not move. Install `jupyterlab_widgets` into "
             "the environment that runs JupyterLab (`pip install 'ipywidgets>=8' jupyterlab_widgets`), then restart "
             "JupyterLab and reload the browser tab.")
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:
        return Check(name, "FAIL", tr("jupyter_core missing"), True, _fix())
    found = {ext: any(os.path.exists(os.path.join(base, *ext.split("/"), "package.json"))
                      for base in jupyter_path("labextensions"))
             for ext in ("@jupyter-widgets/jupyterlab-manager", "anywidget")}
    if not found["@jupyter-widgets/jupyterlab-manager"]:
        return Check(name, "FAIL", tr("@jupyter-widgets/jupyterlab-manager not found"), True, fix)
    if not found["anywidget"]:
        return Check(name, "FAIL", tr("anywidget's JupyterLab extension not found"), True,
                     tr("the views drawn in the browser will show as still pictures. Install `anywidget` into the "
                        "environment that runs JupyterLab (`pip install anywidget`), then restart JupyterLab and "
                        "reload the browser tab."))
    try:
        version = md.version("jupyterlab_widgets")
    except md.PackageNotFoundError:
        version = tr("found")
    return Check(name, "OK", f"@jupyter-widgets/jupyterlab-manager {version}, anywidget")


#: The CPU instruction-set flags (``torch.cpu.get_capabilities()`` keys) that decide which 16-bit dtype is native.
CPU_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")


def cpu_flags_detail(capabilities) -> str:
    """The four flags as the doctor prints them, e.g. ``"avx512_bf16 yes, amx_bf16 no, ..."``; Arm adds ``bf16``.

    >>> cpu_flags_detail({"avx512_bf16": True})
    'avx512_bf16 yes, amx_bf16 no, avx512_fp16 no, amx_fp16 no'
    """
    flags = list(CPU_FLAGS) + (["bf16"] if "bf16" in capabilities else [])
    return tr(", ").join(f"{f} {tr('yes') if capabilities.get(f) else tr('no')}" for f in flags)


def check_device(probe: bool = True, report=None, capabilities=None) -> list[Check]:
    """Device and dtype lines: which low dtypes autocast supports here, which are native (decided from the CPU
    flags / CUDA compute capability), and the measured matmul speed beside each as its explanation.

    ``report`` (a :class:`ampkit.device.DeviceReport`) and ``capabilities`` (CPU flags) default to this machine's;
    tests pass fakes, e.g. a CUDA report on a machine without a GPU.
    """
    try:  # imported here, not at the top: the doctor must still run (and say so) when torch is missing or broken
        from ampkit.device import device_report, pick_device
        from ampkit.formats import format_name
        from ampkit.hardware import cpu_capabilities
    except Exception as exc:
        return [Check(mark("device"), "FAIL", tr("cannot import ampkit.device ({exc})", exc=exc), True, _fix())]
    if report is None:
        dev = pick_device()
        if not probe:
            return [Check("device", "OK", dev.type)]
        report = device_report(dev)
    rep, dev = report, report.device
    checks = [Check("device", "OK", tr("{what} ({detail})", what=dev.type, detail=rep.name)
                    + (tr("; no GPU needed") if dev.type == "cpu" else ""))]
    names = ", ".join(format_name(d) for d in rep.autocast_dtypes) or tr("none")
    checks.append(Check(mark("autocast dtypes"), "OK" if rep.autocast_dtypes else "WARN", names, False,
                        tr("upgrade torch: this build cannot autocast on this device")))
    if dev.type == "cpu":
        caps = cpu_capabilities() if capabilities is None else capabilities
        checks.append(Check(mark("CPU flags"), "INFO",
                            tr("{what} ({detail})", what=cpu_flags_detail(caps), detail="torch.cpu.get_capabilities()"),
                            False))
    if dev.type == "cuda":
        checks.append(Check(mark("tensor cores"), "INFO", rep.tensor_cores or tr("unknown"), False))
    size = f"{rep.probe_size}x{rep.probe_size} " if rep.probe_size else ""
    for dt in rep.autocast_dtypes:
        checks.append(Check(format_name(dt), "INFO", rep.verdict(dt) + "\n       " +
                            tr("measured {size}matmul: {speed}", size=size, speed=rep.measured(dt)), False))
    if rep.default_dtype is not None:
        checks.append(Check(mark("default low dtype"), "INFO",
                            tr("{what} ({detail})", what=format_name(rep.default_dtype),
                               detail=rep.default_reason()), False))
    return checks


def run_checks(probe_device: bool = True) -> list[Check]:
    """All checks, in the order the doctor prints them."""
    checks = [
        check_python(),
        check_package("torch", "torch", _TORCH_FLOOR),
        check_package("numpy", "numpy", "1.24"),
        check_package("matplotlib", "matplotlib", "3.7"),
        check_package("ipywidgets", "ipywidgets", "8.0"),
        check_package("anywidget", "anywidget", "0.9"),
        check_package("jupyterlab", "jupyterlab", "4.0"),
        check_widgets_extension(),
        check_package("tqdm", "tqdm", "4.60"),
        check_package("nbval", "nbval", "0.11", required=False, why=mark("needed by `make test`")),
        check_package("playwright", "playwright", "1.40", required=False, why=mark("needed by the browser tests")),
    ]
    if checks[1].status == "OK":
        checks += check_torch_features()
        checks += check_device(probe_device)
    return checks


def main(argv: list[str] | None = None) -> int:
    """Print the report; return 0 when every required check passed, else 1."""
    checks = run_checks()
    print(tr("ampkit doctor"))
    for c in checks:
        print(c.line())
    failed = [c for c in checks if c.required and c.status == "FAIL"]
    if failed:
        print("\n" + tr("{n} required check(s) failed: {names}.", n=len(failed),
                        names=", ".join(tr(c.name) for c in failed)) + "\n" + _fix())
        return 1
    print("\n" + tr("All required checks passed: you are ready for the workshop."))
    return 0
