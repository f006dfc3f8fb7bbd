"""The constraints file, ``constraints.txt``: the exact version of every package in the venv where ``make test`` last
passed, so that a workshop months later installs what was tested, not whatever the index serves that day. No
notebook of its own: it serves the install of every notebook (README, "For developers": the upgrade procedure).

``make lock`` runs ``python -m ampkit.classroom.lock -o constraints.txt`` with the venv's Python: it reads ``pip
freeze --exclude-editable`` (the kit itself, installed editable, is left out; so are pip and setuptools, which pip
freeze never lists) and writes one ``name==version`` line per package under a header that says how, when and on
which Python and platform the file was made. Every ``pip install`` of the Makefile passes it with ``-c``.

Two rules keep one file usable on every platform:

- a local version label is dropped: this venv's torch is ``2.13.0+cpu`` (PyTorch's CPU wheel), and ``torch==2.13.0``
  matches that wheel here and the plain PyPI wheel on macOS and Windows (a pin without a label ignores labels);
- a package only some platforms install (``appnope`` on macOS, ``pywin32`` on Windows, ``tomli`` before Python 3.11)
  is missing from a file made on Linux with Python 3.11 and floats there; a pin for a package that is not installed
  is harmless, so a file made elsewhere works here too.

Standard library only (run before the kit's extras are installed).
"""
from __future__ import annotations

import argparse
import datetime
import platform
import re
import subprocess
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;+]+)(\+[^\s;]+)?\s*$")


def constraint_lines(freeze: str) -> list[str]:
    """``pip freeze`` output -> sorted ``name==version`` lines, local version labels dropped. A line that is not a
    plain ``name==version`` pin (a direct URL ``name @ file:...``, an editable ``-e``) is a ValueError naming it:
    such a package cannot be pinned by version, so the file would not reproduce it.

    >>> constraint_lines("torch==2.13.0+cpu\\nnumpy==2.4.6\\n# comment\\n\\nJinja2==3.1.6\\n")
    ['Jinja2==3.1.6', 'numpy==2.4.6', 'torch==2.13.0']
    >>> constraint_lines("foo @ file:///tmp/foo.whl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: pip freeze lists a package that is not pinned by version: 'foo @ file:///tmp/foo.whl' (...)
    """
    out = []
    for line in freeze.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if not match:
            raise ValueError(f"pip freeze lists a package that is not pinned by version: {line!r} (install it from "
                             "an index, or leave it out of the venv, before make lock)")
        out.append(f"{match.group(1)}=={match.group(2)}")
    return sorted(out, key=lambda pin: pin.split("==")[0].lower())


def header(python: str, where: str, made: str) -> str:
    """The comment block at the top of the file: how it was made and how to remake it."""
    return (f"# constraints.txt: the exact version of every package in the venv where `make test` last passed.\n"
            f"# Written by `make lock` (python -m ampkit.classroom.lock: pip freeze --exclude-editable, local\n"
            f"# version labels such as +cpu dropped) on {made}, Python {python}, {where}.\n"
            f"# Used with -c by every pip install of the Makefile (make lab, make test, make wheelhouse, CI).\n"
            f"# Upgrade: make test LATEST=1 && make lock LATEST=1, then commit this file (README, For developers).\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ampkit.classroom.lock", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="the file to write (constraints.txt)")
    args = parser.parse_args(argv)
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True).stdout
    try:
        lines = constraint_lines(freeze)
    except ValueError as err:
        print(f"make lock: {err}", file=sys.stderr)
        return 2
    made = datetime.date.today().isoformat()
    where = f"{platform.system()} {platform.machine()}"
    args.output.write_text(header(platform.python_version(), where, made) + "\n".join(lines) + "\n")
    print(f"{args.output}: {len(lines)} packages pinned from {sys.prefix} (Python {platform.python_version()}, "
          f"{where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
