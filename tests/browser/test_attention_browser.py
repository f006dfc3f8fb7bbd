"""Notebook 07 in a real JupyterLab: the attention view is drawn in the browser (ampkit/widgets/js/attention.js) from
every state of its controls, which the engine computed when the view started.

- Run All: the view renders at activation scale 8, head size 64, 1/√d on the logits; the keyboard moves the scale
  until fp16 overflows, a click puts the scale on q, End moves the head size to 256: at each step the readout, the
  bars (log axis), the overflow marks and the NaN bars are what ampkit.lessons.attention_overflow computes.
- The saved notebook, opened and not run (no kernel): random key moves on both sliders and clicks on both buttons;
  every state shows the engine's numbers for it.
"""
from __future__ import annotations

import html
import math
import random
import re

import pytest

pytestmark = pytest.mark.browser

READOUT = ".jp-OutputArea .ampkit-attn-readout"
PLOT = ".jp-OutputArea svg.ampkit-attn-plot"
NOTEBOOK = "07_transformers_in_16_bits.ipynb"
SCALES = [2.0 ** (i / 4) for i in range(37)]          # the scale slider's positions (2**0 … 2**9)
HEADS = [16, 32, 64, 128, 256]
# attention.js's geometry: 404 px high, plots from y = 72 to y = 356; log axis 1 … 1e7, NaN axis 0 … 110 %
Y_TOP, Y_BOTTOM, TOP = 72, 356, 1e7


def _ylog(v: float) -> float:
    return Y_BOTTOM - math.log10(max(v, 1.0)) / math.log10(TOP) * (Y_BOTTOM - Y_TOP)


def _ypct(p: float) -> float:
    return Y_BOTTOM - p / 110 * (Y_BOTTOM - Y_TOP)


def expected(si: int, head: int, where: str) -> dict:
    """What the page must show for the controls at (SCALES[si], head, where), from the engine."""
    from ampkit.lessons.transformers_in_16_bits.activations import attention_overflow
    from ampkit.widgets.attention import readout_html

    results = [attention_overflow(SCALES[si], head, name, where) for name in ("fp32", "bf16", "fp16")]
    readout = html.unescape(re.sub(r"<[^>]+>", "", readout_html(results)))
    bars, nans = {}, {}
    for r in results:
        y = Y_TOP if r.overflowed else _ylog(r.matmul_max)
        bars[r.dtype] = [y, Y_BOTTOM - y, str(r.overflowed).lower(),
                         "inf (overflow)" if r.overflowed else f"{r.matmul_max:.3g}"]
        nans[r.dtype] = [_ypct(100 * r.nan_rows), Y_BOTTOM - _ypct(100 * r.nan_rows), f"{100 * r.nan_rows:.0f} %"]
    return {"readout": readout, "bars": bars, "nans": nans, "state": f"{SCALES[si]:.3g},{head},{where}",
            "ranges": [str(si), str(HEADS.index(head))]}


def shown(page) -> dict:
    """What the view shows: readout text, each format's bar (y, height, overflowed, label) and NaN bar."""
    return page.evaluate("""() => {
        const v = document.querySelector('.jp-OutputArea .ampkit-attn');
        const svg = v.querySelector('svg.ampkit-attn-plot');
        const num = (e, a) => Number(e.getAttribute(a));
        const bars = {}, nans = {};
        for (const b of svg.querySelectorAll('.ampkit-attn-bar')) {
          const f = b.dataset.fmt;
          bars[f] = [num(b, 'y'), num(b, 'height'), b.dataset.overflow,
                     svg.querySelector(`.ampkit-attn-label[data-fmt='${f}']`).textContent];
        }
        for (const b of svg.querySelectorAll('.ampkit-attn-nan')) {
          const f = b.dataset.fmt;
          nans[f] = [num(b, 'y'), num(b, 'height'),
                     svg.querySelector(`.ampkit-attn-nan-label[data-fmt='${f}']`).textContent];
        }
        return {readout: v.querySelector('.ampkit-attn-readout').textContent, bars, nans, state: svg.dataset.state,
                ranges: [...v.querySelectorAll('input[type=range]')].map(r => r.value)};
    }""")


def check(page, si: int, head: int, where: str) -> None:
    """Wait for the view to reach the state, then compare everything it shows with the engine's numbers."""
    want = expected(si, head, where)
    page.wait_for_function("([sel, s]) => document.querySelector(sel)?.dataset.state === s",
                           arg=[PLOT, want["state"]], timeout=30_000)
    got = shown(page)
    for key in ("bars", "nans"):
        for fmt, (y, height, *rest) in want[key].items():
            gy, gheight, *grest = got[key][fmt]
            assert (gy, gheight) == pytest.approx((y, height), abs=1e-6), (key, fmt, si, head, where)
            assert grest == rest, (key, fmt, si, head, where)
    assert got["readout"] == want["readout"]
    assert got["ranges"] == want["ranges"] and got["state"] == want["state"]


def click_where(page, where: str) -> None:
    page.locator(f".jp-OutputArea .ampkit-attn button[data-at='{where}']").first.click()


def random_walk(page, check_state, move, steps: int, switch_every: int, seed: int = 7) -> tuple[int, int, str]:
    """Seeded moves of the saved view: every ``switch_every``-th step a click on the other button, else 1-8 presses
    on the scale slider (65 %) or 1-3 on the head-size slider; ``check_state(si, head, where)`` after each step.
    ``move(page, index, key, presses)`` presses keys on the index-th range input. Returns the last state."""
    si, hi, where = 12, 2, "logits"
    check_state(si, HEADS[hi], where)
    rng = random.Random(seed)
    for step in range(steps):
        if step % switch_every == switch_every - 1:
            where = "q" if where == "logits" else "logits"
            click_where(page, where)
        elif rng.random() < 0.65:
            presses, key = rng.randint(1, 8), rng.choice(["ArrowRight", "ArrowLeft"])
            move(page, 0, key, presses)
            si = max(0, min(36, si + (presses if key == "ArrowRight" else -presses)))
        else:
            presses, key = rng.randint(1, 3), rng.choice(["ArrowRight", "ArrowLeft"])
            move(page, 1, key, presses)
            hi = max(0, min(4, hi + (presses if key == "ArrowRight" else -presses)))
        check_state(si, HEADS[hi], where)
    return si, HEADS[hi], where


def test_attention_view_follows_sliders_and_buttons(lab):
    page = lab.open_and_run(NOTEBOOK)
    plot = page.locator(PLOT).first
    plot.scroll_into_view_if_needed()
    check(page, 12, 64, "logits")                               # 2**3 = 8
    assert page.evaluate("(e) => e.getBoundingClientRect().width", plot.element_handle()) == 750
    lab.screenshot(page, "07_transformers-attention-start", near=PLOT)

    lab.move_range(page, 0, "ArrowRight", presses=12)           # 2**6 = 64: fp16 overflows on the logits
    check(page, 24, 64, "logits")
    assert "fp16: largest matmul output inf" in lab.text(page, READOUT)
    assert plot.locator(".ampkit-attn-bar[data-fmt='fp16']").get_attribute("data-overflow") == "true"
    lab.screenshot(page, "07_transformers-attention-overflow", near=PLOT)

    click_where(page, "q")
    check(page, 24, 64, "q")
    assert "NaN rows 0 %" in lab.text(page, READOUT).split("fp16:")[1]
    lab.move_range(page, 1, "End")                              # head size 256
    check(page, 24, 256, "q")
    lab.screenshot(page, "07_transformers-attention-q-256", near=PLOT)

    lab.check_figures(page, "07_transformers", at_least=2)
    lab.assert_clean(page)


def test_attention_view_moves_without_a_kernel(lab):
    """The saved notebook, nothing run: keys and clicks move the view, and every state shows the engine's numbers."""
    page = lab.open_saved(NOTEBOOK)
    page.locator(PLOT).first.scroll_into_view_if_needed()
    random_walk(page, lambda si, head, where: check(page, si, head, where),
                lambda page, i, key, presses: lab.move_range(page, i, key, presses=presses), steps=14, switch_every=5)
    lab.move_range(page, 0, "End")
    lab.move_range(page, 1, "Home")
    click_where(page, "logits")
    check(page, 36, 16, "logits")                               # 2**9 = 512: fp16 and the NaN rows
    lab.screenshot(page, "07_transformers-attention-no-kernel-end", near=PLOT)
    lab.move_range(page, 0, "Home")
    check(page, 0, 16, "logits")
    lab.assert_clean(page)
