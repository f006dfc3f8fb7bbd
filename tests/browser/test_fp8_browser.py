"""Notebook 06's amax-history explorer (AmaxHistoryExplorer) in a real JupyterLab, drawn in the browser
(ampkit/widgets/js/amax.js) from every setting the engine computed when the view started.

- Run All: the view renders at activation, history 16, "max", margin 0; random key presses on every control (the
  history and margin sliders: arrows, Page Up/Down, Home/End; the tensor and algorithm buttons: Enter, Space);
  at each setting the readout, the marked saturating steps, the line of the largest value the delayed scale keeps
  and just-in-time's equal :func:`ampkit.widgets.fp8.explorer_state` computed here on the same recording.
- The saved notebook, opened and not run (no kernel): the same with other random keys.
"""
from __future__ import annotations

import functools
import html
import math
import random
import re

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "06_fp8_scaling.ipynb"
VIEW = ".jp-OutputArea .ampkit-amax"
PLOT = f"{VIEW} svg.ampkit-amax-plot"
READOUT = f"{VIEW} .ampkit-amax-readout"


@functools.cache
def _recording():
    import torch

    from ampkit.lessons.fp8_scaling import record_amax_run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the notebook does
    try:
        return record_amax_run()
    finally:
        torch.set_num_threads(threads)


def odd_recording():
    """12 steps of 64 values; the amax of step 3 is 0 (the layer did not run), of step 5 inf, of step 7 NaN."""
    import torch

    from ampkit.lessons.fp8_scaling import AmaxRecording

    vals = torch.rand(12, 64, generator=torch.Generator().manual_seed(0))
    vals[3], vals[5, -1], vals[7, -1] = 0.0, float("inf"), float("nan")
    vals = vals.sort(dim=1).values                    # NaN sorts last
    amax = vals[:, -1].clone()
    return AmaxRecording(amax={"activation": amax}, values={"activation": vals}, formats={"activation": "e4m3"},
                         spikes={}, grad_spikes={})


def expected(tensor: str, history: int, algo: str, margin: int, rec=None) -> dict:
    """What the page must show for the setting, from the engine."""
    import torch

    from ampkit.fp8 import fp8_max
    from ampkit.widgets.fp8 import explorer_state, readout_html

    s = explorer_state(rec or _recording(), tensor, history, algo, margin)
    top = fp8_max(s.fmt)
    return {"state": f"{tensor},{history},{algo},{margin}",
            "readout": html.unescape(re.sub(r"<[a-z/][^>]*>", "", readout_html(s))),
            "sat": torch.nonzero(s.delayed_saturated > 0).flatten().tolist(),
            "worst": s.worst_step if s.saturating_steps else None,
            "kept": torch.log2(top / s.delayed_scale.double()).tolist(),
            "jit": torch.log2(top / s.current_scale.double()).tolist(),
            "amax": torch.log2(s.amax.double()).tolist()}


def shown(page) -> dict:
    """What the view draws: per step the y of the kept line (one horizontal segment a step) and of the dashed line,
    the marked steps (rings and bands) with their ring's y, the axis, the worst step's label, the readout."""
    return page.evaluate("""(sel) => {
        const v = document.querySelector(sel), svg = v.querySelector('svg.ampkit-amax-plot');
        const d = (cls) => svg.querySelector(cls).getAttribute('d');
        const kept = d('.ampkit-amax-kept'), jit = d('.ampkit-amax-jit');
        const keptY = [Number(kept.match(/^M[-\\d.]+,([-\\d.]+)/)[1]),
                       ...[...kept.matchAll(/V([-\\d.]+)/g)].map(m => Number(m[1]))];
        const jitY = [...jit.matchAll(/[ML][-\\d.]+,([-\\d.]+)/g)].map(m => Number(m[1]));
        const rings = [...svg.querySelectorAll('.ampkit-amax-sat')].map(c => [Number(c.dataset.step),
                                                                             Number(c.getAttribute('cy'))]);
        const bands = [...svg.querySelectorAll('.ampkit-amax-band')].map(r => Number(r.dataset.step));
        const dots = [...svg.querySelectorAll('.ampkit-amax-dots circle')].map(c => [Number(c.dataset.step),
                                                                                    Number(c.getAttribute('cy'))]);
        const odd = [...svg.querySelectorAll('.ampkit-amax-odd')].map(t => [Number(t.dataset.step), t.textContent,
                                                                            Number(t.getAttribute('y'))]);
        const box = ['lo', 'hi', 'y0', 'y1'].map(k => Number(svg.dataset[k]));
        return {state: svg.dataset.state, keptY, jitY, rings, bands, dots, odd, box,
                worst: svg.querySelector('.ampkit-amax-worst').textContent,
                readout: v.querySelector('.ampkit-amax-readout').textContent,
                ranges: [...v.querySelectorAll('input[type=range]')].map(r => r.value),
                pressed: [...v.querySelectorAll('button[aria-pressed=true]')].map(b => b.dataset.value)};
    }""", VIEW)


def check(page, tensor: str, history: int, algo: str, margin: int, rec=None) -> None:
    """Wait for the view to reach the setting, then compare what it draws and reads out with the engine's."""
    want = expected(tensor, history, algo, margin, rec)
    page.wait_for_function("([sel, s]) => document.querySelector(sel)?.dataset.state === s",
                           arg=[PLOT, want["state"]], timeout=30_000)
    got = shown(page)
    lo, hi, y0, y1 = got["box"]
    log2 = lambda y: lo + (y1 - y) / (y1 - y0) * (hi - lo)           # noqa: E731 — the axis, inverted
    tol = 0.006 * (hi - lo) / (y1 - y0) + 1e-3                       # a path's 2 decimals + the sent 3 decimals
    key = want["state"]
    assert got["readout"] == want["readout"], key
    assert [r[0] for r in got["rings"]] == want["sat"] and got["bands"] == want["sat"], key
    edge = {-math.inf: y1}                                              # an amax of 0 at the bottom, inf/NaN on top
    for step, cy in got["rings"]:
        a = want["amax"][step]
        assert (log2(cy) == pytest.approx(a, abs=tol)) if math.isfinite(a) else cy == edge.get(a, y0), key
    assert [log2(y) for y in got["keptY"]] == pytest.approx(want["kept"], abs=tol), key
    assert [log2(y) for y in got["jitY"]] == pytest.approx(want["jit"], abs=tol), key
    finite = [i for i, a in enumerate(want["amax"]) if math.isfinite(a)]
    assert [d[0] for d in got["dots"]] == finite, key
    assert [log2(d[1]) for d in got["dots"]] == pytest.approx([want["amax"][i] for i in finite], abs=tol), key
    odd = {-math.inf: "0", math.inf: "inf"}
    assert [o[:2] for o in got["odd"]] == [[i, odd.get(a, "nan")] for i, a in enumerate(want["amax"])
                                           if not math.isfinite(a)], key
    assert lo <= min(want["kept"] + want["jit"] + [want["amax"][i] for i in finite])
    assert max(want["kept"] + want["jit"] + [want["amax"][i] for i in finite]) <= hi
    worst = re.search(r"worst step (\d+): (.+?) of its values saturated", want["readout"])
    assert got["worst"] == (f"step {worst[1]}: {worst[2]} saturated" if worst else ""), key
    assert (int(worst[1]) if worst else None) == want["worst"], key
    assert got["ranges"] == [str(history), str(margin)] and got["pressed"] == [tensor, algo], key


def _press(page, selector: str, key: str) -> None:
    """Focus a control of the view and press a key on it (the keyboard, no click)."""
    loc = page.locator(f"{VIEW} {selector}").first
    loc.scroll_into_view_if_needed()
    loc.focus()
    loc.press(key)


def random_walk(page, lab, rng: random.Random, moves: int, shots: str) -> None:
    """Random keys on every control; each setting reached is checked against the engine."""
    steps, margins = len(_recording().amax["activation"]), 8
    setting = dict(zip(("tensor", "history", "algo", "margin"), shown(page)["state"].split(",")))
    setting["history"], setting["margin"] = int(setting["history"]), int(setting["margin"])
    for move in range(moves):
        control = ["history", "margin", "tensor", "algo"][move % 4] if move < 4 else \
            rng.choice(["history", "history", "margin", "tensor", "algo"])
        if control in ("history", "margin"):
            top = steps if control == "history" else margins
            low = 1 if control == "history" else 0
            key = rng.choice(["ArrowRight", "ArrowLeft", "ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End"])
            presses = rng.randint(1, 6) if key.startswith("Arrow") else 1
            for _ in range(presses):
                _press(page, f"input.ampkit-amax-{control}", key)
            if key.startswith("Arrow"):       # Page Up/Down move by the browser's page step: read it back
                step = presses if key in ("ArrowRight", "ArrowUp") else -presses
                setting[control] = max(low, min(top, setting[control] + step))
            elif key in ("Home", "End"):
                setting[control] = low if key == "Home" else top
            else:
                page.wait_for_timeout(50)
                setting[control] = int(shown(page)["ranges"][0 if control == "history" else 1])
        else:
            values = ["activation", "gradient"] if control == "tensor" else ["max", "most_recent"]
            value = rng.choice(values)
            _press(page, f"button.ampkit-amax-{control}[data-value='{value}']", rng.choice(["Enter", "Space"]))
            setting[control] = value
        check(page, setting["tensor"], setting["history"], setting["algo"], setting["margin"])
        if move in (3, moves - 1):
            lab.screenshot(page, f"{shots}-{move}", near=PLOT)


def test_explorer_follows_every_control(lab):
    page = lab.open_and_run(NOTEBOOK)
    plot = page.locator(PLOT).first
    plot.scroll_into_view_if_needed()
    check(page, "activation", 16, "max", 0)
    assert "history 16" in lab.text(page, READOUT) and "activation in e4m3" in lab.text(page, READOUT)
    assert page.evaluate("(e) => e.getBoundingClientRect().width", plot.element_handle()) == 750
    lab.screenshot(page, "06_fp8_scaling-explorer-start", near=PLOT)
    _press(page, "input.ampkit-amax-history", "Home")                # history 1: the spikes saturate
    check(page, "activation", 1, "max", 0)
    lab.screenshot(page, "06_fp8_scaling-explorer-history-1", near=PLOT)
    random_walk(page, lab, random.Random(30), 14, "06_fp8_scaling-explorer-live")
    lab.check_figures(page, "06_fp8_scaling", at_least=3)
    lab.assert_clean(page)


def test_explorer_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: every control moves, and every setting shows the engine's numbers."""
    page = lab.open_saved(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    check(page, "activation", 16, "max", 0)
    random_walk(page, lab, random.Random(6), 16, "06_fp8_scaling-explorer-no-kernel")
    _press(page, "button.ampkit-amax-tensor[data-value='gradient']", "Enter")
    _press(page, "input.ampkit-amax-history", "End")
    _press(page, "input.ampkit-amax-margin", "End")
    check(page, "gradient", len(_recording().amax["gradient"]), shown(page)["state"].split(",")[2], 8)
    assert not math.isnan(shown(page)["box"][0])
    lab.assert_clean(page)


def test_an_amax_of_zero_inf_or_nan_is_marked(lab):
    """A recording whose amax is 0 at one step, inf at another and NaN at a third (run in a notebook of its own):
    the view marks them on the plot's edges ("0" below, "inf" and "nan" above), breaks the amax line there, and the
    readout and every line still equal the engine's."""
    import inspect

    import nbformat

    source = (f"from ampkit.widgets import AmaxHistoryExplorer\n\n{inspect.getsource(odd_recording)}\n\n"
              "AmaxHistoryExplorer(odd_recording(), history_len=2)")
    # the kernel named: with a second kernel installed (make frameworks' "ampkit + MindSpore + PaddlePaddle"),
    # JupyterLab asks which kernel a notebook without one should start, and the test would wait on that dialog
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.server.root / "odd_amax.ipynb")
    page = lab.open_and_run("odd_amax.ipynb")
    rec = odd_recording()
    page.locator(PLOT).first.scroll_into_view_if_needed()
    check(page, "activation", 2, "max", 0, rec)
    assert [o[1] for o in shown(page)["odd"]] == ["0", "inf", "nan"]
    lab.screenshot(page, "06_fp8_scaling-explorer-odd-amax", near=PLOT)
    recent = "button.ampkit-amax-algo[data-value='most_recent']"
    for selector, key, setting in (("input.ampkit-amax-history", "End", (12, "max", 0)),
                                   (recent, "Enter", (12, "most_recent", 0)),
                                   ("input.ampkit-amax-margin", "ArrowRight", (12, "most_recent", 1)),
                                   ("input.ampkit-amax-history", "Home", (1, "most_recent", 1))):
        _press(page, selector, key)
        check(page, "activation", *setting, rec)
    lab.assert_clean(page)
