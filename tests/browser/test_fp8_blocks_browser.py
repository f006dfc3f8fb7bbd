"""Notebook 06's per-tensor vs per-block explorer (BlockScalingExplorer) in a real JupyterLab, drawn in the browser
(ampkit/widgets/js/blocks.js) from every setting the engine computed when the view started.

Run, and from the saved notebook with no kernel: the controls are pressed with the keyboard, and for each setting
what is drawn — which cells are painted flushed, which are crossed saturated, where the block edges are — and the
readout's numbers equal :mod:`ampkit.fp8.compare` computed here for that setting (the default 128 × 256 tensor)."""
import random
import re

import pytest

pytestmark = pytest.mark.browser

VIEW = ".jp-OutputArea .ampkit-fp8-blocks"
BLOCKS = ".ampkit-fp8-blocks-readout"
BLOCK_FLUSHED = ".ampkit-fp8-row-block .ampkit-fp8-n-flushed"
TENSOR_FLUSHED = ".ampkit-fp8-row-tensor .ampkit-fp8-n-flushed"
LEFT, CW, RH, PH, GAP, TOP = 48, 2.5, 180 / 128, 180, 44, 72   # blocks.js's layout for 128 × 256
COLS = 256


def _engine(scheme: str, block, fmt: str, rounding: str, p2: bool):
    from ampkit.fp8.compare import compare_blocks, compare_tiles, outlier_tensor
    from ampkit.widgets.fp8_blocks import SCHEMES

    x = outlier_tensor(128, 256)
    return compare_blocks(x, fmt, block, rounding) if scheme == "mx" else compare_tiles(x, fmt, SCHEMES[scheme][1], p2)


def _shown(page) -> dict:
    return page.evaluate("""(sel) => {
        const v = document.querySelector(sel);
        const panels = [...v.querySelectorAll('g.ampkit-fp8-panel')].map(g => ({
            flushed: g.querySelector('.ampkit-fp8-flushed').getAttribute('d'),
            saturated: g.querySelector('.ampkit-fp8-saturated').getAttribute('d'),
            edges: g.querySelector('.ampkit-fp8-edges').getAttribute('d'),
            title: g.querySelector('.ampkit-fp8-panel-title').textContent,
            shades: [...g.querySelectorAll('.ampkit-fp8-scales path')].map(p => [Number(p.dataset.k),
                                                                                 p.getAttribute('d')])}));
        const row = (cls) => [...v.querySelectorAll(`tr.${cls} td`)].map(td => td.textContent.trim());
        return {key: v.querySelector('svg.ampkit-fp8-blocks-plot').dataset.key, panels,
                tensor: row('ampkit-fp8-row-tensor'), block: row('ampkit-fp8-row-block'),
                head: v.querySelector('.ampkit-fp8-blocks-readout b').textContent,
                verdict: v.querySelector('.ampkit-fp8-verdict').textContent};
    }""", VIEW)


def _num(s: str) -> float:
    return float(s)


def _flushed_cells(d: str) -> set[int]:
    """The cells a flushed path paints: one rectangle per run (M x,y h w v rh h -w z), y from the panel's top."""
    cells = set()
    for x, y, w in re.findall(r"M([-\d.e]+),([-\d.e]+)h([-\d.e]+)v", d or ""):
        c0, r, n = round((_num(x) - LEFT) / CW), round(_num(y) / RH), round(_num(w) / CW)
        assert abs(_num(x) - LEFT - c0 * CW) < 1e-6 and abs(_num(y) - r * RH) < 1e-6
        cells.update(r * COLS + c for c in range(c0, c0 + n))
    return cells


def _saturated_cells(d: str, panel: int) -> set[int]:
    """The cells crossed as saturated: each X is M(x-4),(y-4)l8,8M(x-4),(y+4)l8,-8 around the cell's centre."""
    y0 = TOP + panel * (PH + GAP)
    out = set()
    for x, y in re.findall(r"M([-\d.e]+),([-\d.e]+)l8,8", d or ""):
        c, r = round((_num(x) + 4 - LEFT) / CW - 0.5), round((_num(y) + 4 - y0) / RH - 0.5)
        out.add(r * COLS + c)
    return out


def _edges(d: str) -> tuple[list[int], list[int]]:
    cols = [round((_num(x) - LEFT) / CW) for x in re.findall(r"M([-\d.e]+),[-\d.e]+v", d or "")]
    rows = [round((_num(y) - TOP - PH - GAP) / RH) for y in re.findall(r"M[-\d.e]+,([-\d.e]+)h", d or "")]
    return cols, rows


def _engine_scales(s):
    """k per block (values stored as x / 2**k), from the engine: MX exponents, or -log2 of the fp32 tile scale."""
    import torch

    from ampkit.fp8 import mx_exponents
    from ampkit.fp8.compare import outlier_tensor
    from ampkit.fp8.tiles import tile_scales

    x = outlier_tensor(128, 256)
    if s.scheme == "mx":
        flat = x.reshape(1, -1) if s.block == "per-tensor" else x
        return mx_exponents(flat, s.fmt, flat.shape[-1] if s.block == "per-tensor" else s.block, s.rounding).float()
    tile = tuple(x.shape) if s.block == "per-tensor" else s.block
    return -torch.log2(tile_scales(x, tile, s.fmt, s.rounding == "power-of-two"))


def _shaded(shades: list, grid: tuple[int, int], panel: int) -> dict[int, float]:
    """Block index -> k, read from the shade paths (one rectangle per block, grouped by k)."""
    y0 = TOP + panel * (PH + GAP)
    bw, bh = COLS / grid[1] * CW, PH / grid[0]
    out = {}
    for k, d in shades:
        for x, y in re.findall(r"M([-\d.e]+),([-\d.e]+)h", d):
            r, c = round((_num(y) - y0) / bh), round((_num(x) - LEFT) / bw)
            assert (r * grid[1] + c) not in out
            out[r * grid[1] + c] = k
    return out


def _check(page, scheme: str, block, fmt: str, rounding: str, p2: bool) -> None:
    """What the page draws and reads out for the setting equals the engine's."""
    from ampkit.widgets.fp8_blocks import setting_key

    shown = _shown(page)
    key = setting_key(scheme, block, fmt, rounding, p2)
    assert shown["key"] == key
    pair = _engine(scheme, block, fmt, rounding, p2)
    for p, (stats, cells) in enumerate(zip(pair, (shown["tensor"], shown["block"]))):
        assert cells[1:] == [str(stats.n_flushed), str(stats.n_saturated), str(stats.n_kept),
                             f"{stats.mean_rel_error:.4f}"], (key, p)
        want_f = set(stats.flushed.reshape(-1).nonzero().flatten().tolist())
        want_s = set(stats.saturated.reshape(-1).nonzero().flatten().tolist())
        assert _flushed_cells(shown["panels"][p]["flushed"]) == want_f, (key, p)
        assert _saturated_cells(shown["panels"][p]["saturated"], p) == want_s, (key, p)
        k = _engine_scales(stats)
        shaded = _shaded(shown["panels"][p]["shades"], tuple(k.shape), p)
        assert sorted(shaded) == list(range(k.numel())), (key, p)
        assert [shaded[i] for i in range(k.numel())] == pytest.approx(k.reshape(-1).tolist(), abs=0.005001), key
        ends = [f"{v:.0f}" if stats.rounding != "fp32" else f"{v:.2f}" for v in (float(k.min()), float(k.max()))]
        assert shown["panels"][p]["title"].endswith(ends[0] if ends[0] == ends[1] else f"{ends[0]} … {ends[1]}"), \
            shown["panels"][p]["title"]
    b = pair[1].block
    tr_, tc = (None, None) if b == "per-tensor" else (b if isinstance(b, tuple) else (1, b))
    want_cols = [] if tc is None else list(range(tc, COLS, tc))
    want_rows = [] if tr_ is None or tr_ == 1 else list(range(tr_, 128, tr_))
    assert _edges(shown["panels"][1]["edges"]) == (want_cols, want_rows), key
    assert shown["panels"][0]["edges"] in ("", None)
    assert shown["head"].startswith(f"{fmt}, "), shown["head"]


def _press(page, selector: str, key: str = "Enter") -> None:
    """Focus a control of the view and press a key (a real keyboard press, no click)."""
    loc = page.locator(f"{VIEW} {selector}").first
    loc.scroll_into_view_if_needed()
    loc.focus()
    loc.press(key)


def test_block_size_buttons_move_the_flush_readout(lab):
    """Run: press "8" then "per-tensor" in the explorer, then the "1×128 tiles" scheme: the per-block row's flushed
    count follows, equal to ampkit.fp8.compare computed here, and so does the drawing."""
    page = lab.open_and_run("06_fp8_scaling.ipynb")
    start = lab.text(page, BLOCKS)
    assert "e4m3, OCP floor scale rule" in start and "blocks of 32" in start
    _check(page, "mx", 32, "e4m3", "ocp", True)
    svg = page.locator(f"{VIEW} svg.ampkit-fp8-blocks-plot").first
    assert page.evaluate("(e) => e.getBoundingClientRect().width", svg.element_handle()) == 700
    lab.screenshot(page, "06_fp8_scaling-blocks-32", near=f"{VIEW} svg")

    _press(page, "button.ampkit-fp8-block[data-value='8']")
    lab.wait_for_text(page, BLOCKS, "blocks of 8")
    _check(page, "mx", 8, "e4m3", "ocp", True)
    lab.screenshot(page, "06_fp8_scaling-blocks-8", near=f"{VIEW} svg")
    _press(page, "button.ampkit-fp8-block[data-value='per-tensor']", "Space")
    lab.wait_for_text(page, BLOCKS, "same scaling on both rows")
    _check(page, "mx", "per-tensor", "e4m3", "ocp", True)
    page.locator(f"{VIEW} .ampkit-fp8-scheme button").filter(has_text="1×128 tiles").first.click()
    lab.wait_for_text(page, BLOCKS, "1×128 tiles")
    assert "rounded down to a power of two" in lab.text(page, BLOCKS)
    assert page.locator(f"{VIEW} button.ampkit-fp8-block").first.is_disabled()   # MX's block sizes do not apply
    _check(page, "1x128", "per-tensor", "e4m3", "ocp", True)
    lab.screenshot(page, "06_fp8_scaling-blocks-tiles-1x128", near=f"{VIEW} svg")
    lab.assert_clean(page)


def test_blocks_move_without_a_kernel(lab):
    """The saved notebook, nothing run: the keyboard moves every control, and every setting reached shows the
    engine's drawing and numbers for it."""
    from ampkit.fp8.compare import block_choices

    page = lab.open_saved("06_fp8_scaling.ipynb")
    page.locator(f"{VIEW} svg").first.scroll_into_view_if_needed()
    setting = {"scheme": "mx", "block": 32, "fmt": "e4m3", "rounding": "ocp", "p2": True}
    _check(page, *setting.values())
    # Tab from "32" to the next block size, Enter: a keyboard walk, not a click
    _press(page, "button.ampkit-fp8-block[data-value='32']", "Tab")
    page.keyboard.press("Enter")
    setting["block"] = 64
    lab.wait_for_text(page, BLOCKS, "blocks of 64")
    _check(page, *setting.values())
    rng = random.Random(6)
    controls = {"scheme": ["mx", "1x128", "128x128"], "block": list(block_choices(256)), "fmt": ["e4m3", "e5m2"],
                "rounding": ["ocp", "te"]}
    for step in range(16):
        name = rng.choice([*controls, "p2"])
        if name in ("block", "rounding", "p2") and (setting["scheme"] == "mx") == (name == "p2"):
            name = "scheme"                      # a disabled control: change the scheme instead
        if name == "p2":
            _press(page, ".ampkit-fp8-pow2 input", "Space")
            setting["p2"] = not setting["p2"]
        else:
            value = rng.choice([v for v in controls[name] if v != setting[name]])
            _press(page, f"button.ampkit-fp8-{name}[data-value='{value}']", rng.choice(["Enter", "Space"]))
            setting[name] = value
        from ampkit.widgets.fp8_blocks import setting_key
        page.wait_for_function("([sel, key]) => document.querySelector(sel).dataset.key === key",
                               arg=[f"{VIEW} svg.ampkit-fp8-blocks-plot", setting_key(*setting.values())])
        _check(page, *setting.values())
        if step in (3, 11):
            lab.screenshot(page, f"06_fp8_scaling-blocks-no-kernel-{step}", near=f"{VIEW} svg")
