"""Command line: ``python -m ampkit doctor`` (is this machine ready?, notebook ``00_start_here``) and
``python -m ampkit warmup`` (warm notebook ``04_data_sinking``'s compile cache)."""
from __future__ import annotations

import sys

USAGE = """usage: python -m ampkit COMMAND
  doctor  check Python, torch, widgets, the device and its fast dtypes (notebook 00)
  warmup  compile notebook 04's graph-sink step once into the kit's compile cache (.cache/torchinductor, or
          $TORCHINDUCTOR_CACHE_DIR if set), so the workshop does not wait for torch.compile"""


def warmup() -> int:
    """Warm the kit's torch.compile cache (the folder notebook 04's compiles use, see ``ampkit.sinking.cache``);
    reports whether it was a cold compile and how long it took; never fails (eager fallback is fine)."""
    from ampkit.sinking import warm_compile_cache  # torch: loaded by the command that needs it

    compiled, seconds, note = warm_compile_cache()
    print(f"{'[ OK ]' if compiled else '[WARN]'} warmup: {note} ({seconds:.1f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["doctor"]:
        from ampkit.doctor import main as doctor_main

        return doctor_main(args[1:])
    if args[:1] == ["warmup"]:
        return warmup()
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
