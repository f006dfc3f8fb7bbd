"""An offline room: the wheelhouse (every wheel the kit needs, for one Python and platform) and installing from it
with no network. Serves every notebook in ``notebooks/`` (it installs what they run on); the instructor's side is
the "Offline room" section of ``docs/instructor-guide.md``.

- ``make wheelhouse`` writes ``wheelhouse/requirements.txt`` (:func:`requirements`: pyproject's runtime and test
  dependencies, not the browser or lint extras; torch pinned to ``TORCH_TESTED``; the build backend for the
  editable install), has ``pip wheel`` fill the folder at constraints.txt's versions, then writes
  ``wheelhouse/manifest.json`` (:func:`manifest`: which Python and platform, every wheel and its size, whether
  torch is a CPU build, the oldest glibc its Linux wheels run on: :func:`glibc_floor`).
- ``make lab WHEELS=wheelhouse`` runs pip with :func:`index_args` (``--no-index --find-links wheelhouse``) through
  :func:`run_pip`, which shows pip's own output and, when pip fails, adds one line (:func:`hint`): which wheel is
  missing and which command makes it (:func:`missing_requirements` reads pip's error).
- The learner image (repo2docker: environment.yml, then ``postBuild``): :func:`conda_to_pip` and :func:`image_steps`
  give its install steps for a plain venv (benchmarks/learner_image_check.py runs them).

The Makefile runs it from the checkout (``python -m ampkit.classroom.offline ...``) so that it works before the kit
and torch are installed: standard library only, and ``import ampkit`` is lazy (it loads no engine module).

>>> index_args("wheelhouse")
['--no-index', '--find-links', 'wheelhouse']
>>> missing_requirements("ERROR: No matching distribution found for nbval>=0.11")
['nbval>=0.11']
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from ampkit._kit import ROOT

__all__ = ["ROOT", "read_pyproject", "requirements", "requirements_text", "platform_info", "index_args",
           "missing_requirements", "hint", "manifest", "glibc_floor", "torch_build", "conda_to_pip", "image_steps",
           "run_pip", "main"]

#: The checkout this file lives in (``<root>/ampkit/classroom/offline.py``).
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(req: str) -> str:
    """The normalised project name of a requirement line (``"Py_YAML>=6; x"`` -> ``"py-yaml"``)."""
    match = _NAME.match(req)
    if not match:
        raise ValueError(f"not a requirement: {req!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _toml_array(text: str, table: str, key: str) -> list[str]:
    """``key = ["...", ...]`` under ``[table]`` of a TOML text: the Python 3.10 fallback when neither tomllib nor
    tomli is there (before the kit's test extra is installed). Reads the double-quoted strings-only arrays that
    pyproject.toml uses; comments are skipped."""
    section = re.search(rf"^\[{re.escape(table)}\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    start = section and re.search(rf"^{re.escape(key)}\s*=\s*\[", section.group(1), re.M)
    if not section or not start:
        return []
    body, i, items = section.group(1), start.end(), []
    while i < len(body) and body[i] != "]":
        if body[i] == '"':
            end = body.index('"', i + 1)
            items.append(body[i + 1:end])
            i = end + 1
        elif body[i] == "#":
            newline = body.find("\n", i)
            i = newline if newline >= 0 else len(body)
        else:
            i += 1
    return items


def read_pyproject(text: str, extras: tuple[str, ...] = ("test",)) -> dict:
    """The lists the wheelhouse needs from pyproject.toml's text: ``dependencies``, ``build`` (``[build-system]
    requires``) and one list per named extra (``test`` by default). An unknown extra is a ValueError naming the
    extras pyproject has."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            tomllib = None
    if tomllib is None:  # pragma: no cover - Python 3.10 before the test extra is installed
        out = {"dependencies": _toml_array(text, "project", "dependencies"),
               "build": _toml_array(text, "build-system", "requires")}
        optional = {e: _toml_array(text, "project.optional-dependencies", e) for e in extras}
        optional = {e: reqs for e, reqs in optional.items() if reqs}
    else:
        data = tomllib.loads(text)
        out = {"dependencies": list(data["project"]["dependencies"]),
               "build": list(data.get("build-system", {}).get("requires", []))}
        optional = {e: list(reqs) for e, reqs in data["project"].get("optional-dependencies", {}).items()}
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise ValueError(f"pyproject.toml has no extra {', '.join(map(repr, unknown))}; "
                         f"its extras: {', '.join(sorted(optional)) or 'none'}")
    return {**out, **{e: optional[e] for e in extras}}


def requirements(pyproject_text: str, torch: str = "", extras: tuple[str, ...] = ("test",)) -> list[str]:
    r"""Every requirement the wheelhouse holds: runtime, the extras (the test extra by default; ``make wheelhouse
    WHEELHOUSE_EXTRAS=hub`` adds the hub's), build backend; ``torch`` (e.g. the Makefile's ``torch==2.13.0``)
    replaces pyproject's torch range, so the wheelhouse has the tested release.

    A Python-version marker is dropped (``tomli>=2.0; python_version < '3.11'`` -> ``tomli>=2.0``): a wheelhouse
    made on one Python then also serves an install on another (the wheel is pure Python). ``pip install -e
    .[test]`` still follows pyproject's markers.

    >>> reqs = requirements('[project]\ndependencies = ["torch>=2.13", "tomli>=2; python_version < \'3.11\'"]\n'
    ...                     '[build-system]\nrequires = ["setuptools>=68"]\n', torch="torch==2.13.0", extras=())
    >>> reqs
    ['torch==2.13.0', 'tomli>=2', 'setuptools>=68']
    """
    if torch and _name(torch) != "torch":
        raise ValueError(f"torch= must name torch (e.g. 'torch==2.13.0' or empty), got {torch!r}")
    lists = read_pyproject(pyproject_text, extras)
    out: list[str] = []
    for req in lists["dependencies"] + [r for e in extras for r in lists[e]] + lists["build"]:
        req = torch if (torch and _name(req) == "torch") else req
        spec, _, marker = req.partition(";")
        if re.fullmatch(r"\s*python_version\s*[<>=!~]=?\s*['\"][\d.]+['\"]\s*", marker):
            req = spec.strip()
        if req not in out:
            out.append(req)
    return out


def platform_info() -> dict:
    """The Python and platform a wheelhouse is made for (wheels are per Python version, OS and CPU)."""
    return {"python": ".".join(platform.python_version_tuple()[:2]), "python_full": platform.python_version(),
            "implementation": sys.implementation.name, "platform": sysconfig.get_platform(),
            "glibc": platform.libc_ver()[1] if sys.platform.startswith("linux") else ""}


def _where(info: dict) -> str:
    return f"python {info.get('python', '?')}, {info.get('platform', '?')}"


def requirements_text(reqs: list[str], info: dict | None = None) -> str:
    """requirements.txt for the wheelhouse: a header naming the Python and platform, then one requirement a line."""
    info = info or platform_info()
    return (f"# ampkit's wheelhouse, written by `make wheelhouse` for {_where(info)}: install with\n"
            "#   make lab WHEELS=wheelhouse   (or: pip install --no-index --find-links wheelhouse -r "
            "wheelhouse/requirements.txt -e .)\n" + "".join(f"{r}\n" for r in reqs))


def index_args(wheels: str) -> list[str]:
    """pip's options for installing from ``wheels`` only: no package index, the folder as the one place to look."""
    if not str(wheels).strip():
        raise ValueError("wheels must name the wheelhouse folder, e.g. 'wheelhouse'")
    return ["--no-index", "--find-links", str(wheels)]


_MISSING = (re.compile(r"No matching distribution found for (\S+)"),
            re.compile(r"Could not find a version that satisfies the requirement (\S+)"))


def missing_requirements(pip_output: str) -> list[str]:
    """The requirements pip could not find (from its error text), in order, each once.

    >>> missing_requirements("ERROR: Could not find a version that satisfies the requirement setuptools>=68 "
    ...                      "(from versions: none)\\nERROR: No matching distribution found for setuptools>=68")
    ['setuptools>=68']
    """
    found: list[str] = []
    for line in pip_output.splitlines():
        for pattern in _MISSING:
            match = pattern.search(line)
            if match and match.group(1) not in found:
                found.append(match.group(1))
    return found


def _read_manifest(wheels: Path) -> dict | None:
    try:
        return json.loads((wheels / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def hint(pip_output: str, wheels: str, info: dict | None = None, made_for: dict | None = None) -> str | None:
    """The kit's one line after a failed install from ``wheels`` (None when pip's error is not about a missing
    wheel). ``made_for``: the wheelhouse manifest's ``made_for``, with its ``glibc_floor``: said when the folder was
    made for another Python or platform, or needs a newer glibc than this machine has.

    >>> hint("ERROR: No matching distribution found for nbval>=0.11", "wheelhouse",
    ...      {"python": "3.11", "platform": "linux-x86_64"})  # doctest: +NORMALIZE_WHITESPACE
    'ampkit: wheelhouse/ lacks a wheel for nbval>=0.11 for this Python and platform (python 3.11, linux-x86_64):
     on a machine with network and the same Python and platform run `make wheelhouse`, then copy wheelhouse/ here
     (or leave out WHEELS= to install from the network)'
    """
    info = info or platform_info()
    folder = str(wheels).rstrip("/") + "/"
    if f"Location '{wheels}' is ignored" in pip_output or f"Location '{folder}' is ignored" in pip_output:
        return (f"ampkit: WHEELS={wheels}: no such folder; make it with `make wheelhouse` on a machine with network "
                f"({_where(info)}), or leave out WHEELS= to install from the network")
    missing = missing_requirements(pip_output)
    if not missing:
        return None
    other = ""
    if made_for and (made_for.get("python"), made_for.get("platform")) != (info.get("python"), info.get("platform")):
        other = f"; {folder} was made for {_where(made_for)}"
    floor, here = (made_for or {}).get("glibc_floor"), info.get("glibc")
    if floor and here and _version(here) < _version(floor["glibc"]):
        other += f"; its wheels need glibc >= {floor['glibc']}, this machine has {here}"
    return (f"ampkit: {folder} lacks a wheel for {', '.join(missing)} for this Python and platform ({_where(info)}"
            f"{other}): on a machine with network and the same Python and platform run `make wheelhouse`, then copy "
            f"{folder} here (or leave out WHEELS= to install from the network)")


def torch_build(wheel: Path) -> str:
    """``"cpu"`` or ``"cuda"`` for a torch wheel: its local version (``+cpu``, ``+cu126``) or, on PyPI's wheels that
    have none, whether it requires NVIDIA's CUDA wheels (``nvidia-*``)."""
    local = re.match(r"torch-[^-]+\+([a-z]+)", wheel.name)
    if local:
        return "cuda" if local.group(1).startswith("cu") else local.group(1)
    if re.search(r"-(win|macosx)_[^-]*\.whl$", wheel.name):  # PyPI's Windows and macOS wheels are CPU builds (their
        return "cpu"  # nvidia-* requirements are for Linux only; a Windows CUDA build carries +cuXXX)
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8", "replace")
    needs = re.findall(r"^Requires-Dist:\s*(nvidia-[A-Za-z0-9_-]+)", text, re.M)
    return "cuda" if needs else "cpu"


_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_floor(wheel_names: list[str]) -> tuple[str, str] | None:
    """The oldest glibc every Linux wheel here runs on, and the wheel that sets it (a wheel runs where any one of its
    manylinux tags does); None without manylinux wheels. Learners' machines need at least that glibc.

    >>> glibc_floor(["a-1-py3-none-any.whl", "b-1-cp311-cp311-manylinux_2_34_x86_64.whl",
    ...              "c-1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"])
    ('2.34', 'b-1-cp311-cp311-manylinux_2_34_x86_64.whl')
    """
    worst = None
    for name in wheel_names:
        found = []
        for tag in name[:-4].split("-")[-1].split(".") if name.endswith(".whl") else []:
            modern = re.match(r"manylinux_(\d+)_(\d+)_", tag)
            legacy = _LEGACY_MANYLINUX.get(tag.split("_", 1)[0])
            found += [(int(modern.group(1)), int(modern.group(2)))] if modern else [legacy] if legacy else []
        if found and (worst is None or min(found) > worst[0]):
            worst = (min(found), name)
    return (f"{worst[0][0]}.{worst[0][1]}", worst[1]) if worst else None


def manifest(wheels: Path, info: dict | None = None) -> dict:
    """What is in the wheelhouse: the Python and platform, every wheel with its size, source archives (which
    would need building offline), torch's build."""
    files = sorted(p for p in Path(wheels).iterdir() if p.is_file())
    whl = [p for p in files if p.suffix == ".whl"]
    sdists = [p.name for p in files if p.name.endswith((".tar.gz", ".zip", ".tar.bz2"))]
    torch = [p for p in whl if p.name.startswith("torch-")]
    floor = glibc_floor([p.name for p in whl])
    return {"made_for": info or platform_info(), "glibc_floor": floor and {"glibc": floor[0], "set_by": floor[1]},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "n_wheels": len(whl), "mib": round(sum(p.stat().st_size for p in whl) / 2**20, 1),
            "wheels": [{"file": p.name, "bytes": p.stat().st_size} for p in whl], "source_archives": sdists,
            "torch": [{"file": p.name, "build": torch_build(p)} for p in torch]}


def conda_to_pip(dependencies: list, conda_names: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """environment.yml's ``dependencies`` as pip requirements: (the conda packages under their PyPI names, the pip
    section's lines). ``python`` and ``pip`` are the environment itself and are left out.

    >>> conda_to_pip(["python>=3.10", "pytorch>=2.13", "numpy>=1.24", "pip", {"pip": ["-e ."]}])
    (['torch>=2.13', 'numpy>=1.24'], ['-e .'])
    """
    names = {"pytorch": "torch"} if conda_names is None else conda_names
    conda, pip = [], []
    for dep in dependencies:
        if isinstance(dep, dict):
            pip += list(dep.get("pip", []))
            continue
        spec = str(dep).split("#", 1)[0].strip()
        name = _name(spec)
        if name in ("python", "pip"):
            continue
        head = re.match(r"[A-Za-z0-9._-]+", spec)
        assert head is not None, spec  # _name(spec) above read the same project name
        conda.append(names.get(name, name) + spec[len(head.group(0)):])
    return conda, pip


def image_steps(dependencies: list, python: str, wheels: str = "") -> list[tuple[str, list[str]]]:
    """The learner image's install steps as commands for a plain venv whose interpreter is ``python``: what
    repo2docker does with environment.yml (its conda packages, here under their PyPI names; then its pip part, in
    the repository folder), then ``./postBuild``. ``wheels``: install from that wheelhouse only.

    >>> [name for name, _ in image_steps(["numpy>=1.24", "pip", {"pip": ["-e ."]}], "python")]
    ['environment.yml: conda packages (as PyPI wheels)', 'environment.yml: pip part', 'postBuild']
    >>> image_steps([{"pip": ["-e ."]}], "python", "wheelhouse")[1][1]
    ['python', '-m', 'pip', 'install', '--no-index', '--find-links', 'wheelhouse', '-e', '.']
    """
    conda, pip = conda_to_pip(dependencies)
    source = index_args(wheels) if wheels else []
    return [("environment.yml: conda packages (as PyPI wheels)", [python, "-m", "pip", "install", *source, *conda]),
            ("environment.yml: pip part", [python, "-m", "pip", "install", *source,
                                           *[word for line in pip for word in shlex.split(line)]]),
            ("postBuild", ["./postBuild"])]


def run_pip(wheels: str, pip_args: list[str], python: str | None = None) -> int:
    """Run ``python -m pip PIP_ARGS`` showing pip's output as it comes; when it fails, print :func:`hint` after it.
    Returns pip's exit status."""
    cmd = [python or sys.executable, "-m", "pip", *pip_args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace")
    seen = []
    assert proc.stderr is not None  # stderr=PIPE
    for line in proc.stderr:
        sys.stderr.write(line)
        seen.append(line)
    status = proc.wait()
    if status:
        made = _read_manifest(Path(wheels)) or {}
        made_for = {**made.get("made_for", {}), "glibc_floor": made.get("glibc_floor")} if made else None
        message = hint("".join(seen), wheels, made_for=made_for)
        print(message or f"ampkit: pip could not install from {wheels}/ (its error is above); `make wheelhouse` on a "
              "machine with network remakes the folder", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ampkit.classroom.offline", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    req = sub.add_parser("requirements", help="write the wheelhouse's requirements.txt")
    req.add_argument("--torch", default="", help="torch pin replacing pyproject's range, e.g. torch==2.13.0")
    req.add_argument("--extra", action="append", default=[], help="an extra besides test (e.g. hub); repeatable")
    req.add_argument("-o", "--output", type=Path, required=True)
    man = sub.add_parser("manifest", help="write WHEELHOUSE/manifest.json and say what is in it")
    man.add_argument("wheelhouse", type=Path)
    pip = sub.add_parser("pip", help="run pip (the rest of the line); on failure add the kit's hint")
    pip.add_argument("wheels")
    pip.add_argument("pip_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.cmd == "requirements":
        extras = tuple(dict.fromkeys(["test", *args.extra]))
        try:
            reqs = requirements((ROOT / "pyproject.toml").read_text(), args.torch, extras)
        except ValueError as err:
            print(f"make wheelhouse: {err}", file=sys.stderr)
            return 2
        text = requirements_text(reqs)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"{args.output}: {sum(1 for line in text.splitlines() if not line.startswith('#'))} requirements "
              f"for {_where(platform_info())}")
        return 0
    if args.cmd == "manifest":
        if not args.wheelhouse.is_dir():
            print(f"{args.wheelhouse}: no such folder (make wheelhouse makes it)", file=sys.stderr)
            return 2
        m = manifest(args.wheelhouse)
        (args.wheelhouse / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
        torch = ", ".join(f"{t['file']} ({t['build'].upper()} build)" for t in m["torch"]) or "no torch"
        needs = f" (Linux: glibc >= {m['glibc_floor']['glibc']})" if m["glibc_floor"] else ""
        print(f"{args.wheelhouse}/: {m['n_wheels']} wheels, {m['mib']:.0f} MiB, for {_where(m['made_for'])}{needs}; "
              f"{torch}")
        if m["source_archives"]:
            print(f"warning: source archives need building offline: {', '.join(m['source_archives'])}",
                  file=sys.stderr)
        return 0
    return run_pip(args.wheels, args.pip_args[1:] if args.pip_args[:1] == ["--"] else args.pip_args)


if __name__ == "__main__":
    sys.exit(main())
