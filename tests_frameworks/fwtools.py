"""What ``make frameworks`` (make/frameworks.mk) runs besides pip: can this Python and platform install the real
MindSpore and PaddlePaddle, and the environment's constraints file.

    python tests_frameworks/fwtools.py check MINDSPORE PADDLE    # prints one line and nothing else where an
                                                                # install is impossible; prints nothing where it is
    python tests_frameworks/fwtools.py lock -o constraints-frameworks.txt   # (the frameworks env's python)
    python tests_frameworks/fwtools.py reachable URL    # exit 0 if the package index URL answers for torch in 10 s

Where the wheels are (PyPI's file lists for mindspore 2.10.0 and paddlepaddle 3.3.1, read 2026-11-27; cited in
docs/reference.md): mindspore has CPython 3.10–3.12 wheels for Linux x86-64 (manylinux1), macOS x86-64 and
arm64 and Windows x86-64 (and ``none-any`` ones); paddlepaddle has CPython 3.9–3.13 wheels for Linux x86-64,
macOS arm64 and Windows x86-64 — none for macOS on Intel or for Linux on ARM. Both together: Python 3.10–3.12
on Linux x86-64, macOS arm64, Windows x86-64. Standard library only for ``check`` (it runs before any venv exists).

>>> print(reason("3.13", "Linux", "x86_64", "2.10.0", "3.3.1"))
make frameworks: skipped, mindspore 2.10.0 has no wheel for Python 3.13 (PyPI: Python 3.10-3.12); try ...
>>> reason("3.11", "Linux", "x86_64", "2.10.0", "3.3.1")
''
"""
from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

#: (pinned version) -> the Python versions and (system, machine) pairs PyPI has wheels for; None: every platform
#: (mindspore 2.10.0 also has ``cp3XX-none-any`` wheels, which pip accepts anywhere; whether they run off the four
#: platforms above is not known here)
WHEELS: dict[str, dict[str, tuple[tuple[str, ...], set[tuple[str, str]] | None]]] = {
    "mindspore": {"2.10.0": (("3.10", "3.11", "3.12"), None)},
    "paddlepaddle": {"3.3.1": (("3.9", "3.10", "3.11", "3.12", "3.13"),
                               {("Linux", "x86_64"), ("Darwin", "arm64"), ("Windows", "AMD64")})},
}
_WHERE = {("Linux", "x86_64"): "Linux x86-64", ("Darwin", "x86_64"): "macOS on Intel",
          ("Darwin", "arm64"): "macOS arm64", ("Windows", "AMD64"): "Windows x86-64"}


def _where(system: str, machine: str) -> str:
    return _WHERE.get((system, machine), f"{system} {machine}")


def reason(python: str, system: str, machine: str, mindspore: str, paddle: str) -> str:
    """Why the pinned frameworks cannot be installed here, in one line; ``""`` where they can."""
    for name, version in (("paddlepaddle", paddle), ("mindspore", mindspore)):
        known = WHEELS[name].get(version)
        if known is None:
            continue                    # a version this table does not know: let pip decide
        pythons, platforms = known
        if platforms is not None and (system, machine) not in platforms:
            have = ", ".join(sorted(_where(*p) for p in platforms))
            return (f"make frameworks: skipped, {name} {version} has no wheel for {_where(system, machine)} "
                    f"(PyPI: {have})")
        if python not in pythons:
            return (f"make frameworks: skipped, {name} {version} has no wheel for Python {python} (PyPI: Python "
                    f"{pythons[0]}-{pythons[-1]}); try FW_PYTHON=python{pythons[-1]}")
    return ""


def lock(output: Path) -> int:
    """Write the frameworks env's constraints: ``pip freeze --exclude-editable`` of this Python, local labels dropped
    (the rules of :mod:`ampkit.classroom.lock`), under a header of its own."""
    from ampkit.classroom.lock import constraint_lines
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True).stdout
    lines = constraint_lines(freeze)
    where = f"{platform.system()} {platform.machine()}"
    output.write_text(
        "# constraints-frameworks.txt: every package in .venv-frameworks (make frameworks: torch, MindSpore,\n"
        "# PaddlePaddle, numpy<2, the kit and its test extra) where `make test-frameworks` last passed.\n"
        f"# Written by `make frameworks-lock` on {datetime.date.today().isoformat()}, Python "
        f"{platform.python_version()}, {where}.\n" + "\n".join(lines) + "\n")
    print(f"{output}: {len(lines)} packages pinned from {sys.prefix}")
    return 0


def reachable(index: str, project: str = "torch", timeout: float = 10.0) -> bool:
    """Whether the package index ``index`` answers for ``project`` (the page pip reads, ``<index>/<project>/``)
    within ``timeout`` seconds, once, without retries; proxies from the environment, as pip uses them.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     os.mkdir(os.path.join(d, "torch"))
    ...     reachable("file://" + d), reachable("file://" + d, "numpy")
    (True, False)
    """
    url = index.rstrip("/") + f"/{project}/"
    if url.startswith("file://"):
        return Path(url[len("file://"):]).is_dir()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return 200 <= answer.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests_frameworks/fwtools.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="one line where mindspore/paddlepaddle cannot be installed here")
    c.add_argument("mindspore")
    c.add_argument("paddle")
    lk = sub.add_parser("lock", help="write constraints-frameworks.txt from this Python's packages")
    lk.add_argument("-o", "--output", type=Path, required=True)
    r = sub.add_parser("reachable", help="exit 0 if the package index answers for torch within 10 s")
    r.add_argument("index")
    args = parser.parse_args(argv)
    if args.cmd == "reachable":
        return 0 if reachable(args.index) else 1
    if args.cmd == "check":
        line = reason(f"{sys.version_info[0]}.{sys.version_info[1]}", platform.system(), platform.machine(),
                      args.mindspore, args.paddle)
        if line:
            print(line)
        return 0
    return lock(args.output)


if __name__ == "__main__":
    sys.exit(main())
