"""Command line: ``python -m ampkit doctor``."""
from __future__ import annotations

import sys

USAGE = "usage: python -m ampkit doctor\n  doctor  check Python, torch, widgets, the device and its fast dtypes"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["doctor"]:
        from ampkit.doctor import main as doctor_main

        return doctor_main(args[1:])
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
