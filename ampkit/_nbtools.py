"""Developer tools for the notebook series (not part of the teaching API).

``python -m ampkit._nbtools execute notebooks/NN_name.ipynb ...`` re-executes notebooks top to bottom in a
fresh kernel (this environment's Python) and saves them with only the kit's browser-drawn views' state
(:func:`keep_view_state`: a saved notebook moves those views without a kernel); ``hygiene_problems`` is what
``tests/test_notebook_hygiene.py`` checks.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from ampkit._nbstatic import static_view_problems

__all__ = ["execute", "executed_on", "keep_view_state", "view_state_problems", "hygiene_problems", "exercise_problems",
           "NOTEBOOK_NAME", "MAX_BYTES", "MAX_VIEW_BYTES"]

NOTEBOOK_NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
MAX_BYTES = 1_000_000
#: The most one saved view may carry (its module, look, words and every state its controls reach).
MAX_VIEW_BYTES = 200_000
_STATE_MIME = "application/vnd.jupyter.widget-state+json"
_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
_REF = re.compile(r"IPY_MODEL_([0-9a-zA-Z_-]+)")
# Things that must not leak into committed outputs: home folders, temp folders, this checkout's path.
_PRIVATE = re.compile(r"(/home/[^/\s]+|/root/|/Users/[^/\s]+|[A-Za-z]:\\\\Users\\\\|/tmp/|/private/var/)")


def execute(path: str | Path, timeout: int = 600) -> float:
    """Run a notebook top to bottom in a fresh kernel, in its own folder; save it with only the kit's views' state.

    Returns the wall time in seconds (kernel start included).
    """
    # deferred: nbformat and nbclient are test extras (``pip install ampkit[test]``), ~1.3 s to import; only this
    # developer command needs them, not the hygiene checks the test suite runs
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    keep_view_state(nb, path.stem)
    nb.metadata.setdefault("ampkit", {})["executed"] = executed_on()
    nbformat.write(nb, path)
    return elapsed


def executed_on() -> dict[str, str]:
    """Where a notebook's numbers were computed (saved in its ``metadata.ampkit.executed``; the book's pages say
    it under each view): this machine's CPU (or GPU) name, torch's and Python's versions."""
    import platform

    import torch

    from ampkit.hardware import device_name

    return {"cpu": device_name(torch.device("cpu")), "torch": torch.__version__,
            "python": platform.python_version()}


def _is_kit_view(model: dict) -> bool:
    return model.get("model_module") == "anywidget" and \
        str(model.get("state", {}).get("_anywidget_id", "")).startswith("ampkit.")


def keep_view_state(nb: dict, name: str) -> None:
    """Keep, in ``nb``'s metadata, only the state of the kit's browser-drawn views (anywidget models whose class is
    in ``ampkit``) and of the models they refer to (their layout), and give every widget model id a stable name
    (``<name>-<n>``, in order of appearance), so that re-executing a notebook does not churn its diff. The views'
    outputs keep pointing at their models; other widgets (ipywidgets views) keep their still picture only.

    >>> nb = {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data",
    ...       "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "f00"}}}]}]}
    >>> nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2,
    ...     "version_minor": 0, "state": {"f00": {"model_module": "anywidget", "model_name": "AnyModel",
    ...     "state": {"_anywidget_id": "ampkit.widgets.start.RoundingSlider", "layout": "IPY_MODEL_l1"}},
    ...     "l1": {"model_module": "@jupyter-widgets/base", "model_name": "LayoutModel", "state": {}},
    ...     "x9": {"model_module": "@jupyter-widgets/controls", "model_name": "IntSliderModel", "state": {}}}}}
    >>> keep_view_state(nb, "00_demo")
    >>> sorted(nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"])
    ['00_demo-1', '00_demo-2']
    >>> nb["cells"][0]["outputs"][0]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
    '00_demo-1'
    """
    saved = nb.get("metadata", {}).pop("widgets", None) or {}
    models: dict = saved.get(_STATE_MIME, {}).get("state", {})
    keep: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in models and model_id not in keep:
            keep.append(model_id)
            for ref in _REF.findall(json.dumps(models[model_id].get("state", {}))):
                visit(ref)

    shown = [out["data"][_VIEW_MIME]["model_id"] for cell in nb.get("cells", []) for out in cell.get("outputs", [])
             if _VIEW_MIME in out.get("data", {})]
    for model_id in shown:
        if _is_kit_view(models.get(model_id, {})):
            visit(model_id)
    order = list(dict.fromkeys(shown + keep))
    rename = {old: f"{name}-{i}" for i, old in enumerate(order, 1)}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(_VIEW_MIME)
            if view:
                view["model_id"] = rename[view["model_id"]]
    if keep:
        text = json.dumps({rename[m]: models[m] for m in keep})
        state = json.loads(_REF.sub(lambda m: "IPY_MODEL_" + rename.get(m.group(1), m.group(1)), text))
        nb["metadata"]["widgets"] = {_STATE_MIME: {"version_major": 2, "version_minor": 0, "state": state}}


def view_state_problems(nb: dict) -> list[str]:
    """What is wrong with a notebook's saved widget state: a model that is not a kit view or one of its parts, a
    view that carries more than :data:`MAX_VIEW_BYTES`, a model no output shows or refers to."""
    models = nb.get("metadata", {}).get("widgets", {}).get(_STATE_MIME, {}).get("state", {})
    problems = []
    views = [m for m, model in models.items() if _is_kit_view(model)]
    parts = {ref for m in views for ref in _REF.findall(json.dumps(models[m].get("state", {})))}
    for m, model in models.items():
        if m not in views and m not in parts:
            problems.append(f"stored widget state of {model.get('model_name')} {m}: only the kit's views are saved")
        size = len(json.dumps(model))
        if m in views and size > MAX_VIEW_BYTES:
            problems.append(f"view {m} carries {size} bytes > {MAX_VIEW_BYTES}")
    return problems


def _output_text(output: dict) -> str:
    parts = []
    if "text" in output:
        parts.append(output["text"] if isinstance(output["text"], str) else "".join(output["text"]))
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/") or mime.endswith("json"):
            parts.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(parts)


MIN_EXERCISES = 3
_SOLUTION_CALL = re.compile(r"\.solution\(\d+\)|with solution\(")
_EXERCISE = re.compile(r"\*\*(?:Exercise|练习) ?(\d+)[.。]\*\*")   # the Chinese edition: **练习 1.**


def exercise_problems(cells: list[dict]) -> list[str]:
    """At least three exercises; each solution cell tagged ``solution``, its source collapsed, calling
    ``ex.solution(N)`` (whose output is a closed <details>, so a first read does not show the answer). What a static
    view shows (no hint, no answer, no solution code) is ``ampkit._nbstatic``'s."""
    problems = []
    numbers = {int(m) for c in cells if c.get("cell_type") == "markdown"
               for m in _EXERCISE.findall("".join(c.get("source", "")))}
    if len(numbers) < MIN_EXERCISES:
        problems.append(f"{len(numbers)} exercises (**Exercise N.** in markdown); at least {MIN_EXERCISES} needed")
    solutions = 0
    for i, c in enumerate(cells):
        if c.get("cell_type") != "code":
            continue
        src = "".join(c.get("source", ""))
        tagged = "solution" in c.get("metadata", {}).get("tags", [])
        calls = bool(_SOLUTION_CALL.search(src))
        if calls or tagged:
            solutions += 1
            if not tagged:
                problems.append(f"cell {i}: a solution cell without the 'solution' tag")
            if not c.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
                problems.append(f"cell {i}: solution source is not collapsed (metadata.jupyter.source_hidden)")
            if not calls:
                problems.append(f"cell {i}: solution cell does not show its solution through ex.solution(N)")
    if solutions < len(numbers):
        problems.append(f"{solutions} solution cells for {len(numbers)} exercises")
    return problems


def hygiene_problems(path: str | Path, repo_root: str | Path | None = None) -> list[str]:
    """Everything wrong with a committed notebook; an empty list means it is clean."""
    path = Path(path)
    problems = []
    if not NOTEBOOK_NAME.match(path.name):
        problems.append(f"name {path.name!r} is not NN_lowercase_name.ipynb")
    size = path.stat().st_size
    if size > MAX_BYTES:
        problems.append(f"{size} bytes > {MAX_BYTES}")
    nb = json.loads(path.read_text())
    cells = all_cells = nb.get("cells", [])
    if cells and "ampkit-language" in cells[0].get("metadata", {}).get("tags", []):
        cells = cells[1:]   # a translated notebook's language cell comes before its title
    first = "".join(cells[0].get("source", "")) if cells else ""
    if not cells or cells[0].get("cell_type") != "markdown" or not first.lstrip().startswith("# "):
        problems.append("first cell is not a markdown title ('# ...')")
    counts = [c.get("execution_count") for c in all_cells if c.get("cell_type") == "code"]
    if counts != list(range(1, len(counts) + 1)):
        problems.append(f"not executed top to bottom in one fresh kernel (execution counts {counts})")
    executed = (nb.get("metadata", {}).get("ampkit") or {}).get("executed") or {}
    if set(executed) != {"cpu", "torch", "python"}:
        problems.append("metadata.ampkit.executed (where its numbers were computed: cpu, torch, python) is missing; "
                        "execute it with python -m ampkit._nbtools execute")
    problems += view_state_problems(nb)
    problems += exercise_problems(cells)
    problems += static_view_problems(cells)
    root = str(Path(repo_root).resolve()) if repo_root else None
    for i, cell in enumerate(cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i}: error output {out.get('ename')}: {out.get('evalue')}")
            text = _output_text(out)
            m = _PRIVATE.search(text)
            if m or (root and root in text):
                problems.append(f"cell {i}: output shows a private path ({m.group(0) if m else root})")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "execute":
        print("usage: python -m ampkit._nbtools execute NOTEBOOK...", file=sys.stderr)
        return 2
    for name in argv[1:]:
        seconds = execute(name)
        problems = hygiene_problems(name, os.getcwd())
        print(f"{name}: executed in {seconds:.1f} s" + (f"; PROBLEMS: {problems}" if problems else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
