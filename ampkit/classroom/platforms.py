"""A wheelhouse for another OS, CPU or Python, built on this machine: one folder per kind of learner machine in a
mixed room (``make wheelhouse PLATFORM=win_amd64 PYVER=3.11``; docs/instructor-guide.md, "Offline room").

``pip download --platform P --python-version V --only-binary=:all:`` fetches wheels for another machine, but pip
evaluates the dependencies' environment markers (``sys_platform == "win32"``, ``platform_system == "Linux"``) for
the machine it runs on, not for P (pip issues #4304, #6117, #10050). torch's Windows wheel, for one, lists its Linux
CUDA wheels behind ``platform_system == "Linux"``: a plain resolve on Linux would fetch them, and would leave out
Windows' own ``colorama`` and ``pywinpty``. So every download here is ``--no-deps`` and this module resolves:

1. torch alone (:func:`torch_command`: from the CPU index for Linux x86_64, from PyPI elsewhere, where its wheel is
   the CPU build), then the wheelhouse's requirements.txt (:func:`download_command`, with constraints.txt's versions);
2. every wheel's ``Requires-Dist`` read and its markers evaluated for the target (:func:`target_env`,
   :func:`needed`); what is missing is downloaded the same way, until nothing is (:func:`build`).

>>> cmd = download_command("win_amd64", "3.12", "wh", ["numpy>=1.24"], python_exe="python")
>>> " ".join(cmd[3:12]), cmd[12:]
('download --no-deps --only-binary=:all: --implementation cp --python-version 3.12 --abi cp312', \
['--platform', 'win_amd64', '-d', 'wh', 'numpy>=1.24'])
>>> target_env("macosx_arm64", "3.11")["sys_platform"], target_env("win_amd64", "3.11")["platform_machine"]
('darwin', 'AMD64')
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["PLATFORMS", "pip_platforms", "check_python", "target_env", "default_folder", "download_command",
           "torch_command", "read_requires", "needed", "build", "main"]

#: The kit's names for learner machines -> pip's platform tags (the newest first; pip takes any of them). Any other
#: pip platform tag (``manylinux_2_28_x86_64``, ``macosx_13_0_arm64``, ...) is taken as it is.
PLATFORMS = {
    "win_amd64": ["win_amd64"],
    "win_arm64": ["win_arm64"],
    "macosx_arm64": ["macosx_14_0_arm64", "macosx_13_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64",
                     "macosx_10_13_universal2"],
    "manylinux_x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                         "manylinux_2_5_x86_64"],
    "manylinux_aarch64": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}
_TAG = re.compile(r"^(win_(amd64|arm64|32)|macosx_\d+_\d+_[a-z0-9_]+"
                  r"|(many|musl)linux(_\d+_\d+|1|2010|2014)_[a-z0-9_]+)$")
#: PyTorch's index of CPU-only wheels: PyPI's Linux x86_64 torch is the CUDA build (about 2.5 GB with its wheels).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pip_platforms(platform: str) -> list[str]:
    """pip's ``--platform`` tags for a kit name or a pip tag; anything else is a ValueError naming the choices."""
    if platform in PLATFORMS:
        return list(PLATFORMS[platform])
    if _TAG.match(platform or ""):
        return [platform]
    raise ValueError(f"PLATFORM={platform!r}: expected one of {', '.join(PLATFORMS)} (or a pip platform tag such as "
                     "manylinux_2_28_x86_64 or macosx_13_0_arm64)")


def check_python(version: str) -> str:
    """``"3.11"`` or ``"3.11.9"`` for a supported Python (3.10 or newer, as the kit needs); else a ValueError. Give the
    learners' patch release when known: pip checks each wheel's Requires-Python against it (``3.11`` is 3.11.0, and
    some tested versions need more: soupsieve 4.1.2 needs 3.11.5)."""
    m = re.fullmatch(r"3\.(\d{1,2})(\.\d{1,2})?", str(version).strip())
    if not m or int(m.group(1)) < 10:
        raise ValueError(f"PYVER={version!r}: expected a Python version 3.10 or newer, written like 3.11 or 3.11.9")
    return m.group(0)


def _minor(version: str) -> str:
    return ".".join(check_python(version).split(".")[:2])


def target_env(platform: str, python: str) -> dict[str, str]:
    """The environment-marker values of a learner machine (PEP 508), for reading its wheels' dependencies."""
    tags, python = pip_platforms(platform), check_python(python)
    tag = tags[0]
    if tag.startswith("win"):
        system, sys_platform, os_name = "Windows", "win32", "nt"
        machine = {"win_amd64": "AMD64", "win_arm64": "ARM64", "win32": "x86"}[tag]
    elif tag.startswith("macosx"):
        system, sys_platform, os_name = "Darwin", "darwin", "posix"
        machine = "arm64" if tag.endswith("arm64") else "x86_64"
    else:
        system, sys_platform, os_name = "Linux", "linux", "posix"
        machine = tag.split("_", 3)[-1] if tag.count("_") >= 3 else tag.rsplit("_", 1)[-1]
        machine = "x86_64" if machine.endswith("x86_64") else machine
    return {"os_name": os_name, "sys_platform": sys_platform, "platform_system": system, "platform_machine": machine,
            "platform_release": "", "platform_version": "", "python_version": _minor(python),
            "python_full_version": python if python.count(".") == 2 else f"{python}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": python if python.count(".") == 2 else f"{python}.0"}


def default_folder(platform: str, python: str) -> str:
    """``wheelhouse-win_amd64-py3.11.9``: one folder per kind of learner machine (the name `make wheelhouse
    PLATFORM=... PYVER=...` gives it)."""
    pip_platforms(platform)
    return f"wheelhouse-{platform}-py{check_python(python)}"


def download_command(platform: str, pyver: str, dest: str, requirements: list[str], *, constraints: str = "",
                     index_url: str = "", python_exe: str = "") -> list[str]:
    """``pip download`` of ``requirements`` as wheels for the target, without their dependencies (see the module's
    note), with ``constraints`` (constraints.txt: the tested versions) and ``index_url`` (another index) if given."""
    pyver = check_python(pyver)
    cmd = [python_exe or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--implementation", "cp", "--python-version", pyver, "--abi", "cp" + _minor(pyver).replace(".", "")]
    for tag in pip_platforms(platform):
        cmd += ["--platform", tag]
    cmd += ["-d", str(dest)]
    if constraints:
        cmd += ["-c", str(constraints)]
    if index_url:
        cmd += ["--index-url", index_url]
    return cmd + list(requirements)


def torch_command(platform: str, pyver: str, dest: str, torch: str, *, torch_index: str | None = None,
                  python_exe: str = "") -> list[str]:
    """torch alone, first: for Linux x86_64 from PyTorch's CPU index (PyPI's is the CUDA build), elsewhere from PyPI
    (its Windows and macOS wheels are the CPU build). ``torch_index`` overrides the choice ("" = PyPI)."""
    if torch_index is None:
        torch_index = TORCH_CPU_INDEX if target_env(platform, pyver)["platform_machine"] == "x86_64" and \
            target_env(platform, pyver)["platform_system"] == "Linux" else ""
    return download_command(platform, pyver, dest, [torch], index_url=torch_index, python_exe=python_exe)


def read_requires(wheel: Path) -> tuple[str, list[str]]:
    """A wheel's project name (normalised) and its ``Requires-Dist`` lines."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8", "replace")
    found = re.search(r"^Name:\s*(\S+)", text, re.M)
    assert found is not None, wheel  # every wheel's METADATA names its project
    name = found.group(1)
    return _norm(name), re.findall(r"^Requires-Dist:\s*(.+?)\s*$", text, re.M)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _packaging():
    """``packaging``'s Requirement (in the kit's venv; pip's own copy in a bare venv)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - a bare venv
        # pip's vendored copy of the same class (mypy sees two distinct types)
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]
    return Requirement


def needed(wheels: dict[str, list[str]], wanted: dict[str, set[str]], env: dict[str, str]) -> dict[str, str]:
    """What the target still needs: ``{name: requirement}`` for every dependency of the wheels present (``wheels``:
    name -> Requires-Dist lines) whose marker holds on the target (``env``; ``wanted``: name -> the extras asked of
    it) and that is not in ``wheels``. Extras asked of a package present are added to ``wanted`` in place.

    >>> env = target_env("win_amd64", "3.11")
    >>> needed({"torch": ['triton==3.7.1; platform_system == "Linux"', "filelock"],
    ...         "ipython": ['colorama; sys_platform == "win32"', 'pexpect>4.3; sys_platform != "win32"']},
    ...        {"torch": set(), "ipython": set()}, env)
    {'filelock': 'filelock', 'colorama': 'colorama'}
    """
    Requirement = _packaging()
    out: dict[str, str] = {}
    for name, lines in wheels.items():
        for extra in sorted(wanted.get(name, set())) or [""]:
            for line in lines:
                req = Requirement(line)
                if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
                    continue
                dep = _norm(req.name)
                wanted.setdefault(dep, set()).update(req.extras)
                if dep not in wheels and dep not in out:
                    out[dep] = f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}" \
                               f"{req.specifier}"
    return out


def build(platform: str, pyver: str, dest: str | Path, requirements: list[str], *, torch: str = "",
          constraints: str = "", torch_index: str | None = None, run=subprocess.run, rounds: int = 10) -> list[str]:
    """Fill ``dest`` with every wheel the target needs (see the module's note). Returns the pip commands run, as
    text. ``run`` runs one command (``subprocess.run``: tests pass a fake)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    done: list[str] = []

    def pip(cmd: list[str]) -> None:
        done.append(" ".join(cmd))
        if run(cmd).returncode:
            raise RuntimeError(f"pip could not download for {platform}, Python {pyver}: {' '.join(cmd)}")

    rest = [r for r in requirements if not (torch and _norm(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) == "torch")]
    if torch:
        pip(torch_command(platform, pyver, str(dest), torch, torch_index=torch_index))
    pip(download_command(platform, pyver, str(dest), rest, constraints=constraints))
    Requirement, env = _packaging(), target_env(platform, pyver)
    wanted: dict[str, set[str]] = {}
    for r in requirements:
        req = Requirement(r)
        wanted.setdefault(_norm(req.name), set()).update(req.extras)
    for _ in range(rounds):
        wheels = dict(read_requires(w) for w in sorted(dest.glob("*.whl")))
        missing = needed(wheels, wanted, env)
        if not missing:
            return done
        pip(download_command(platform, pyver, str(dest), sorted(missing.values()), constraints=constraints))
    raise RuntimeError(f"dependencies still missing after {rounds} rounds: {', '.join(missing)}")


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.platforms build --platform win_amd64 --python 3.11 -o FOLDER ...``; ``plan``
    prints the first two pip commands without running them."""
    from ampkit.classroom import offline

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.platforms", description=__doc__.split("\n")[0])
    p.add_argument("cmd", choices=("build", "plan"))
    p.add_argument("--platform", required=True, help=f"one of {', '.join(PLATFORMS)}, or a pip platform tag")
    p.add_argument("--python", required=True, help="the learners' Python, e.g. 3.11")
    p.add_argument("-o", "--output", default="", help="folder (default wheelhouse-PLATFORM-pyPYTHON)")
    p.add_argument("--torch", default="", help="torch pin, e.g. torch==2.13.0")
    p.add_argument("--torch-index", default=None, help="index for torch ('' = PyPI; default: chosen per platform)")
    p.add_argument("--constraints", default="", help="constraints.txt")
    p.add_argument("--extra", action="append", default=[], help="an extra besides test (e.g. hub); repeatable")
    a = p.parse_args(argv)
    try:
        dest = a.output or default_folder(a.platform, a.python)
        extras = tuple(dict.fromkeys(["test", *a.extra]))
        reqs = offline.requirements((offline.ROOT / "pyproject.toml").read_text(), a.torch, extras)
        if a.cmd == "plan":
            rest = [r for r in reqs if not r.startswith("torch")]
            for cmd in ([torch_command(a.platform, a.python, dest, a.torch, torch_index=a.torch_index)] if a.torch
                        else []) + [download_command(a.platform, a.python, dest, rest, constraints=a.constraints)]:
                print(" ".join(cmd))
            return 0
        Path(dest).mkdir(parents=True, exist_ok=True)
        info = {"python": _minor(a.python), "python_full": check_python(a.python), "implementation": "cpython",
                "platform": a.platform.replace("_", "-", 1) if a.platform.startswith("win") else a.platform,
                "pip_platforms": pip_platforms(a.platform), "glibc": ""}
        (Path(dest) / "requirements.txt").write_text(offline.requirements_text(reqs, info))
        build(a.platform, a.python, dest, reqs, torch=a.torch, constraints=a.constraints, torch_index=a.torch_index)
    except (ValueError, RuntimeError) as err:
        print(f"make wheelhouse: {err}", file=sys.stderr)
        return 2
    m = offline.manifest(Path(dest), info)
    (Path(dest) / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
    torch = ", ".join(t["file"] for t in m["torch"]) or "no torch"
    print(f"{dest}/: {m['n_wheels']} wheels, {m['mib']:.0f} MiB, for Python {a.python} on {a.platform}; {torch}. "
          f"On those machines: pip install --no-index --find-links {dest} -r {dest}/requirements.txt -e .")
    return 0


if __name__ == "__main__":
    sys.exit(main())
