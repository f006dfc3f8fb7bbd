"""The kit's views alive in a static page: notebooks 00–07 of both editions exported by
``ampkit._nbexport`` (nbconvert's page; the views drawn by ``ampkit/widgets/static/page.js`` from the saved state),
opened as ``file://`` pages in Chromium with every request that is not the file itself (or a blob:/data: URL the
page makes) refused and counted: none may be made.

Per page: every kit view is drawn (``.ampkit-front``, its still picture gone); the keyboard moves its controls, and
each state reached shows what the engine computes for it — the expected values come from the kernel-less
JupyterLab tests of each view (imported, not copied); a request that needs a kernel says the "run the notebook"
line (no kernel answered the page's hello); no console error. A screenshot per page.

A notebook whose saved views were not drawn by today's modules (``ampkit.widgets.front.esm``) is stale: an English
one fails (re-execute it); a Chinese one is skipped, saying so, until the Chinese notebooks are re-executed
(``tests/test_front_views.py`` holds both editions to today's modules).
"""
from __future__ import annotations

import json
import random
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ARTIFACTS, ROOT, find_chromium

pytestmark = pytest.mark.browser

STEMS = ["00_start_here", "01_fp16_range", "02_autocast_and_levels", "03_loss_scaling", "04_data_sinking",
         "05_amp_in_practice", "06_fp8_scaling", "07_transformers_in_16_bits", "10_fp4"]
EDITIONS = ["", "zh_CN"]
CASES = [(ed, s) for ed in EDITIONS for s in STEMS]
STATE = "application/vnd.jupyter.widget-state+json"
# each notebook's view under test (other views of the notebook may come before it: its own controls are used)
ROUNDING = ".ampkit-front:has(.ampkit-rounding)"
GRAD_MAP = ".ampkit-front:has(.ampkit-rangemap)"
SCALER = ".ampkit-front:has(.ampkit-scale-plot)"
ATTENTION = ".ampkit-front:has(.ampkit-attn)"
OLEVEL = ".ampkit-front:has(.ampkit-olevel)"
NO_KERNEL = "run the notebook to compute this on your machine"


def _notebook(edition: str, stem: str) -> Path:
    return ROOT / "notebooks" / edition / f"{stem}.ipynb"


def _stale(path: Path) -> str | None:
    """Why the notebook's saved views are not today's (no saved view, or a module that is not ``esm()`` of any view
    today), or None."""
    from ampkit.widgets.front import JS_DIR, esm

    today = {esm(p.stem) for p in JS_DIR.glob("*.js") if p.stem != "kit"}
    models = json.loads(path.read_text())["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    modules = [m["state"]["_esm"] for m in models.values() if "_esm" in m.get("state", {})]
    if not modules:
        return "no saved view"
    old = sum(m not in today for m in modules)
    return f"{old} of its {len(modules)} saved view modules are not today's" if old else None


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each page exported once, when a test first asks for it, with its number of view placeholders
    (tests/test_nbexport.py checks that there is one per kit view of the notebook); the seconds each export took
    are printed (run with -s to read them)."""
    from ampkit._nbexport import write_html

    out = tmp_path_factory.mktemp("static-views")
    pages: dict = {}

    def page_of(edition: str, stem: str) -> tuple[Path, int]:
        if (edition, stem) not in pages:
            page = out / f"{edition or 'en'}-{stem}.html"
            seconds = write_html(_notebook(edition, stem), page)
            print(f"\nexport {edition or 'en'}/{stem}: {seconds:.2f} s, {page.stat().st_size / 1024:.0f} KB")
            pages[(edition, stem)] = page, page.read_text().count('class="jp-OutputArea-output ampkit-static-view')
        return pages[(edition, stem)]

    return page_of


@contextmanager
def _language(edition: str):
    """The engine's words in the edition's language while the expected values are computed."""
    from ampkit import i18n

    before = i18n._chosen          # the explicit choice, or None (then $AMPKIT_LANG decides): put back as it was
    i18n.set_language(edition or "en")
    try:
        yield
    finally:
        i18n.set_language(before)


def _move(page, view: str, index: int, key: str, presses: int = 1) -> None:
    """Focus the ``index``-th range input of the (last) ``view`` and press ``key`` (a real keyboard move)."""
    handle = page.locator(view).last.locator("input[type=range]").nth(index)
    handle.scroll_into_view_if_needed()
    handle.focus()
    for _ in range(presses):
        handle.press(key)


def _wait_attr(page, selector: str, attr: str, value: str) -> None:
    page.wait_for_function("([sel, a, v]) => document.querySelector(sel)?.getAttribute(a) === v",
                           arg=[selector, attr, value], timeout=10_000)


# --- per notebook: move the controls, compare with the engine -------------------------------------------------------
def _rounding(page, edition: str) -> None:
    from test_start_browser import _expected, _shown_rows

    typed = ".jp-OutputArea .ampkit-typed code"
    for presses in (3, 40, 80):
        before = page.locator(typed).first.text_content()
        _move(page, ROUNDING, 0, "ArrowRight", presses)
        page.wait_for_function("([sel, old]) => document.querySelector(sel).textContent !== old",
                               arg=[typed, before], timeout=10_000)
        value = float(page.locator(typed).first.text_content())
        rows, want = _shown_rows(None, page), _expected(value)
        # the verdict column is in the page's language; the numbers are the engine's in both editions
        assert [r[:3] for r in rows] == [w[:3] for w in want], value
        if not edition:
            assert rows == want, value
    assert float(page.locator(typed).first.text_content()) > 65504      # walked past fp16's max


def _range_map(page, edition: str) -> None:
    from test_formats_browser import _check_scale, _engine_grad_map, drawn

    with _language(edition):
        m = _engine_grad_map()
        last = page.locator(".jp-OutputArea .ampkit-rangemap").count() - 1   # the gradient map: the last one
        _check_scale(drawn(page, last), m, 0)
        k = 0
        for key, presses, want in (("ArrowRight", 5, 5), ("ArrowRight", 9, 14), ("ArrowLeft", 3, 11),
                                   ("End", 1, 32), ("Home", 1, 0), ("ArrowRight", 2, 2)):
            _move(page, GRAD_MAP, 0, key, presses)
            page.wait_for_function("(k) => [...document.querySelectorAll('.ampkit-hist')].at(-1).dataset.shift === k",
                                   arg=str(want), timeout=10_000)
            k = want
            _check_scale(drawn(page, last), m, k)


def _scaler(page, edition: str) -> None:
    from test_scaling_browser import PLOT, _check_scaler, _expected_scaler, _shown_scaler, notebook_grads

    from ampkit.widgets.scaling import VisualLossScaler

    view = VisualLossScaler(notebook_grads())
    plot = f".jp-OutputArea svg{PLOT}"

    def check(fmt: str, k: int) -> None:
        _wait_attr(page, plot, "data-k", str(k))
        if not edition:
            _check_scaler(page, view, fmt, k)
            return
        # Chinese words around the same numbers: the geometry and the percentages are the engine's
        shown, want = _shown_scaler(page), _expected_scaler(view, fmt, k)
        for name, (x, width) in want["bands"].items():
            assert shown["bands"][name] == pytest.approx([x, width], abs=1e-6), (name, fmt, k)
        assert (shown["k"], shown["fmt"], shown["dk"]) == (want["k"], want["fmt"], want["dk"])
        for part in ("flushed", "subnormal", "overflow"):
            assert shown[part].endswith(want[part].rsplit(" ", 2)[-2] + "%"), (part, shown[part], want[part])   # 67%

    check("float16", 0)
    rng, k = random.Random(3), 0
    for _ in range(8):
        presses, key = rng.randint(1, 9), "ArrowRight" if rng.random() < 0.6 else "ArrowLeft"
        _move(page, SCALER, 0, key, presses)
        k = max(view.min_log2, min(view.max_log2, k + (presses if key == "ArrowRight" else -presses)))
        check("float16", k)
    _move(page, SCALER, 0, "End")
    check("float16", view.max_log2)


def _blocks(page, edition: str) -> None:
    import test_fp8_blocks_browser as blocks
    from test_fp8_blocks_browser import VIEW, _press

    from ampkit.widgets.fp8_blocks import setting_key

    def _check(*setting) -> None:
        with pytest.MonkeyPatch.context() as mp:
            if edition:   # the readout's head starts "e4m3，…" (a Chinese comma) in the Chinese edition
                read = blocks._shown

                def shown(pg) -> dict:
                    d = read(pg)
                    return {**d, "head": d["head"].replace("，", ", ")}

                mp.setattr(blocks, "_shown", shown)
            blocks._check(page, *setting)

    setting = {"scheme": "mx", "block": 32, "fmt": "e4m3", "rounding": "ocp", "p2": True}
    _check(*setting.values())
    # the view has buttons, no range input: Tab from "32" to the next block size, Enter
    _press(page, "button.ampkit-fp8-block[data-value='32']", "Tab")
    page.keyboard.press("Enter")
    setting["block"] = 64
    for name, value in ((None, None), ("fmt", "e5m2"), ("scheme", "1x128"), ("scheme", "mx"), ("block", 16)):
        if name:
            _press(page, f"button.ampkit-fp8-{name}[data-value='{value}']", "Enter")
            setting[name] = value
        _wait_attr(page, f"{VIEW} svg.ampkit-fp8-blocks-plot", "data-key", setting_key(*setting.values()))
        _check(*setting.values())


def _fp4_rules(page, edition: str) -> None:
    from test_fp4_rules_browser import VIEW, _check

    plot = f"{VIEW} svg.ampkit-fp4-rules-plot"
    with _language(edition):
        _check(page, 7.0)
    labels = page.locator(f"{VIEW} g.ampkit-fp4-row text")       # every rule's name lies inside the picture
    assert all(labels.nth(i).evaluate("(t) => t.getBBox().x") >= 0 for i in range(labels.count()))
    slider = page.locator(f"{VIEW} input[type=range]").first
    slider.scroll_into_view_if_needed()
    slider.focus()
    for key, amax in (("ArrowRight", "7.25"), ("End", "16"), ("Home", "0.25")):
        slider.press(key)
        _wait_attr(page, plot, "data-amax", amax)
        with _language(edition):
            _check(page, float(amax))


def _attention(page, edition: str) -> None:
    from test_attention_browser import PLOT, check, expected, random_walk, shown

    def check_any(si: int, head: int, where: str) -> None:
        if not edition:
            check(page, si, head, where)
            return
        with _language(edition):
            want = expected(si, head, where)
        _wait_attr(page, PLOT, "data-state", want["state"])
        got = shown(page)
        assert got["readout"] == want["readout"]
        for part in ("bars", "nans"):
            for fmt, (y, height, *_rest) in want[part].items():
                assert got[part][fmt][:2] == pytest.approx([y, height], abs=1e-6), (part, fmt, si, head, where)
        assert got["ranges"] == want["ranges"]

    random_walk(page, check_any, lambda page, i, key, presses: _move(page, ATTENTION, i, key, presses), steps=8,
                switch_every=4)


def _olevel(page, edition: str) -> None:
    import test_precision_browser as olevel
    from test_precision_browser import LEVELS, STATUS, VIEW, check, shown

    from ampkit.i18n import tr

    with pytest.MonkeyPatch.context() as mp:
        if edition:   # the engine's words in the page's language: a picker built in it (its runs are the same)
            from ampkit.widgets.precision import OLevelPicker

            with _language(edition):
                picker = OLevelPicker(model="mlp_ln", steps=40, dtype="bf16")
                picker.run_all()
            mp.setattr(olevel, "engine", lambda: picker)
        # live=False also asks for the English "measured when the notebook runs": only the English page says it
        live = bool(edition)
        page.locator(VIEW).first.scroll_into_view_if_needed()
        check(page, "O0", "bf16", live=live)
        rng, i = random.Random(2), 0
        for _ in range(6):                                     # the trained bf16 runs, by keyboard
            key = rng.choice(["ArrowRight", "ArrowLeft", "End", "Home"])
            _move(page, OLEVEL, 0, key)
            i = {"ArrowRight": min(i + 1, 3), "ArrowLeft": max(i - 1, 0), "End": 3, "Home": 0}[key]
            check(page, LEVELS[i], "bf16", live=live)
        _move(page, OLEVEL, 0, "Home")
        page.locator(VIEW + " button.ampkit-olevel-dtype[data-dtype=fp16]").first.click()
        check(page, "O0", "fp16", live=live)
        _move(page, OLEVEL, 0, "ArrowRight")                   # O1 fp16: not trained in the saved notebook
        with _language(edition):
            line = tr(NO_KERNEL)
        page.wait_for_function("([sel, line]) => document.querySelector(sel).textContent === line",
                               arg=[STATUS, line], timeout=10_000)
        got = shown(page)
        assert got["label"] == "O1 fp16" and got["opacity"] == "0.25" and got["level"] == "O1"


def _sink(page, edition: str) -> None:
    import test_sinking_browser as sink
    from test_sinking_browser import START, VIEW, random_moves, wait_for

    from ampkit.i18n import tr

    def check(got: dict) -> None:
        with _language(edition):
            sink_check(got)

    sink_check = sink.check_against_engine
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sink, "check_against_engine", check)     # random_moves checks each state in the page's language
        page.locator(VIEW).first.scroll_into_view_if_needed()
        got = wait_for(page, START)
        check(got)
        expect = {**START, **{k: float(got["state"][k]) for k in ("prep_us", "launch_us", "op_us")}}
        random_moves(page, random.Random(5), expect, moves=8)
    page.locator(VIEW + " button.ampkit-sink-measure").first.click()
    with _language(edition):
        line = tr(NO_KERNEL)
    page.wait_for_function("([sel, line]) => document.querySelector(sel).textContent === line",
                           arg=[VIEW + " .ampkit-sink-status", line], timeout=10_000)


def _doctor(page, edition: str) -> None:
    from test_amp_doctor_browser import VIEW, check, pick

    from ampkit.i18n import tr
    from ampkit.lessons.amp_in_practice import SCENARIOS

    page.locator(VIEW).first.scroll_into_view_if_needed()
    with _language(edition):
        check(page, "fp16 forward overflow", False)
    states = [(n, f) for n in SCENARIOS for f in (False, True)]
    random.Random(5).shuffle(states)
    for name, fixed in states[:6]:
        pick(page, name, fixed)
        with _language(edition):
            check(page, name, fixed)
    page.locator(VIEW).first.locator("button.ampkit-doctor-rerun").click()
    with _language(edition):
        line = tr(NO_KERNEL)
    page.wait_for_function("([sel, line]) => document.querySelector(sel).textContent === line",
                           arg=[VIEW.replace("ampkit-doctor", "ampkit-doctor-status"), line], timeout=10_000)


MOVES = {"00_start_here": _rounding, "01_fp16_range": _range_map, "02_autocast_and_levels": _olevel,
         "03_loss_scaling": _scaler, "04_data_sinking": _sink, "05_amp_in_practice": _doctor,
         "06_fp8_scaling": _blocks, "07_transformers_in_16_bits": _attention, "10_fp4": _fp4_rules}


def _chinese_only(page, edition: str, stem: str) -> None:
    """Every view of a Chinese page, as drawn from its saved state, shows Chinese: Latin text only for names
    (formats, levels, APIs, units; test_chinese_browser._english_left). A picture of each view, to look at."""
    from test_chinese_browser import CJK, _english_left

    views = page.locator(".ampkit-static-view .ampkit-front")
    for i in range(views.count()):
        view = views.nth(i)
        view.scroll_into_view_if_needed()
        text = view.evaluate("""(v) => { const c = v.cloneNode(true);
                                      c.querySelectorAll('code, select').forEach((e) => e.remove());
                                      document.body.append(c); const t = c.innerText; c.remove(); return t; }""")
        assert CJK.search(text), (stem, i, text[:300])
        assert not _english_left(text), (stem, i, _english_left(text), text[:300])
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        view.screenshot(path=str(ARTIFACTS / f"static-views-{edition}-{stem}-view{i}.png"))


@pytest.mark.parametrize("edition,stem", CASES, ids=[f"{e or 'en'}-{s[:2]}" for e, s in CASES])
def test_static_page_views_move_offline(edition, stem, exported, browser):
    if not find_chromium():
        pytest.fail("no chromium (.ci/run installs Debian's chromium)")
    nb = _notebook(edition, stem)
    stale = _stale(nb)
    if stale and edition:
        pytest.skip(f"{nb.relative_to(ROOT)}: {stale}; it passes once the Chinese notebooks are re-executed")
    assert not stale, f"{nb.relative_to(ROOT)}: {stale} (re-execute it: python -m ampkit._nbtools execute)"
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    outside, errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "blob:", "data:")):
            return r.continue_()
        outside.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    try:
        t0 = time.perf_counter()
        path, n = exported(edition, stem)
        page.goto(path.as_uri())
        page.wait_for_function("() => !!document.body.dataset.ampkitViews", timeout=30_000)
        drawn_ms = (time.perf_counter() - t0) * 1000
        assert page.evaluate("() => document.body.dataset.ampkitViews") == f"{n}/{n}", errors
        assert page.locator(".ampkit-static-view .ampkit-front").count() == n >= 1
        assert page.locator(".ampkit-static-view .ampkit-static-still").count() == 0
        print(f"\n{edition or 'en'}/{stem}: {n} view(s) drawn {drawn_ms:.0f} ms after the page was asked for")
        if edition:
            _chinese_only(page, edition, stem)
        view = page.locator(".ampkit-front").first
        view.scroll_into_view_if_needed()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"static-views-{edition or 'en'}-{stem}-start.png"))
        MOVES[stem](page, edition)
        view.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"static-views-{edition or 'en'}-{stem}-moved.png"))
        assert not outside, f"requests that left the page: {outside[:5]}"
        assert not errors, "\n".join(errors)
    finally:
        context.close()


_PROBE_ESM = """
export default () => ({                        // anywidget's factory form
  initialize({ model }) { model.set("initialized", true); },
  render({ model, el }) {
    const seen = [];
    const cb = (m, v) => seen.push(v);
    model.on("change:value", cb);
    model.set("value", 1);                       // unchanged: no event
    model.set("value", 2);
    model.set("data", { a: [1, 2] });            // equal objects: no event either
    model.off("change:value", cb);
    model.set("value", 3);                       // no listener left
    let saved;
    try { model.save_changes(); saved = "saved"; } catch (err) { saved = err.message; }
    model.send({ ignored: true });
    el.classList.add("probe", "ampkit-front");
    el.textContent = JSON.stringify({ seen, initialized: model.get("initialized"), value: model.get("value"),
                                      saved, manager: "widget_manager" in model });
  },
});
"""


def test_the_runtime_gives_any_view_the_anywidget_model(tmp_path, browser):
    """page.js alone, with a probe view, a module in anywidget's older form (a named ``render``) and one whose render
    throws: the probe sees anywidget's model (set fires change:x only on a change, off removes, save_changes throws
    "no kernel", no widget manager), its _css is added, its still picture replaced; the broken view keeps its still
    picture and says why in the console."""
    from ampkit._nbexport import RUNTIME

    state = {"state": {
        "probe": {"state": {"_esm": _PROBE_ESM, "_css": ".probe { color: rgb(1, 2, 3); }", "value": 1,
                            "data": {"a": [1, 2]}}},
        "named": {"state": {"_esm": "export function render({ el }) { el.textContent = 'named render'; }"}},
        "broken": {"state": {"_esm": "export default { render() { throw new Error('boom'); } };"}}}}
    still = '<img class="ampkit-static-still" alt="still">'
    page_html = (f"<!DOCTYPE html><html><body>"
                 f'<div class="ampkit-static-view" data-model-id="probe">{still}</div>'
                 f'<div class="ampkit-static-view" data-model-id="named">{still}</div>'
                 f'<div class="ampkit-static-view" data-model-id="broken">{still}</div>'
                 f'<script type="{STATE}">{json.dumps(state)}</script>'
                 f'<script type="module">{RUNTIME.read_text()}\nrenderViews(document);</script></body></html>')
    path = tmp_path / "probe.html"
    path.write_text(page_html)
    context = browser.new_context()
    errors = []
    page = context.new_page()
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        page.goto(path.as_uri())
        page.wait_for_function("() => !!document.body.dataset.ampkitViews", timeout=10_000)
        assert page.evaluate("() => document.body.dataset.ampkitViews") == "2/3"
        probe = json.loads(page.locator(".probe").text_content())
        assert probe == {"seen": [2], "initialized": True, "value": 3, "manager": False,
                         "saved": "no kernel: this page keeps its changes to itself"}
        assert page.evaluate("() => getComputedStyle(document.querySelector('.probe')).color") == "rgb(1, 2, 3)"
        assert page.locator("[data-model-id=probe] .ampkit-static-still").count() == 0
        assert page.locator("[data-model-id=named]").text_content() == "named render"    # anywidget's old form
        assert page.locator("[data-model-id=broken] .ampkit-static-still").count() == 1
        assert page.locator("[data-model-id=broken]").get_attribute("data-rendered") == "failed"
        assert len(errors) == 1 and "view broken not drawn" in errors[0] and "boom" in errors[0], errors
    finally:
        context.close()
