// @ts-check
// Notebook 03's ScalerReplay drawn in the browser (ampkit/widgets/replay.py): a dynamic scaler replayed over a run's
// largest gradient per step — log2(scale) per step, the steps that overflowed marked, the band where the format
// overflows — with every framework's preset overlaid. Nothing is computed here: the engine replayed the initial
// setting and every setting one control away from it, and every preset from each start (model "lines": the scale
// per step as run-length log2 values, the skipped steps, the readout's numbers as the engine prints them); the page
// SELECTS. Another setting is replayed by the kernel on a move (model "current"); with no kernel, the nearest
// computed setting is shown greyed with one line saying so (nearest, and the setting's name keyOf: PORTS of
// replay.py's nearest_computed and _key, marked on both sides; the grid holds 3.3 million settings). Every word comes
// from the model's "text".
// This view's own helpers: fillNodes (a template whose fields are nodes), marker shapes.

const W = 780, H = 410, M = { left: 58, right: 212, top: 36, bottom: 46 };
const NAMES = ["init", "interval", "backoff", "hysteresis"];
const DASH = { "-": "", "--": "6 4", "-.": "7 3 1.5 3", ":": "1.5 3" };
const GREY = 0.3;                       // the opacity of a setting shown in place of one not computed

/** "16*5 17 ..." -> [[16, 5], [17, 1], ...] (the drawn log2 of each step's scale, run-length coded). */
export function parseRuns(text) {
  return text === "" ? [] : text.split(" ").map((t) => {
    const [y, n] = t.split("*");
    return [Number(y), n === undefined ? 1 : Number(n)];
  });
}

/** "0 3 7-9" -> [0, 3, 7, 8, 9]. */
export function parseSteps(text) {
  if (text === "") return [];
  return text.split(" ").flatMap((t) => {
    const [a, b] = t.split("-").map(Number);
    return b === undefined ? [a] : Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
}

/** One replay line of the engine (replay_line / preset_line) as fields. */
export function parseLine(line, preset = false) {
  const f = line.split(";");
  if (!preset) return { runs: parseRuns(f[0]), skips: parseSteps(f[1]), applied: [], skipped: f[2], final: f[3] };
  return { runs: parseRuns(f[0]), skips: parseSteps(f[1]), applied: parseSteps(f[2]),
           stopped: f[3] === "-" ? null : f[3], final: f[4], skipped: f[5], appliedCount: f[6] };
}

// port of ampkit/widgets/replay.py _key (tests/browser/test_replay_browser.py)
/** The setting as the engine names it ("16 5 0.5 1"). */
export const keyOf = (s) => s.map(String).join(" ");

// port of ampkit/widgets/replay.py nearest_computed (tests/browser/test_replay_browser.py)
/** The computed setting shown for `setting` (replay.py's nearest_computed: one control away from `origin`, or the
 * control moved farthest, as a share of its slider, with the others back at `origin`). */
export function nearest(setting, origin, grid) {
  const moved = [0, 1, 2, 3].filter((i) => setting[i] !== origin[i]);
  if (moved.length <= 1) return setting.slice();
  let best = 0, far = -1;
  NAMES.forEach((n, i) => {
    const g = grid[n];
    const d = Math.abs(g.indexOf(setting[i]) - g.indexOf(origin[i])) / (g.length - 1);
    if (d > far) { far = d; best = i; }
  });
  return origin.map((v, i) => (i === best ? setting[i] : v));
}

/** A dict of lines of numbers ("0 1 2") as a dict of arrays of numbers. */
export const numbers = (d) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v.split(" ").map(Number)]));

/** The engine's line for `setting`: {line, exact, shown} — exact false: the line of the nearest computed setting,
 * `shown`, instead. */
export function selected(model, setting) {
  const origin = model.get("origin"), grid = numbers(model.get("grid")), lines = model.get("lines");
  const axes = numbers(model.get("axes"));
  const fromAxes = (s) => {
    const moved = [0, 1, 2, 3].find((i) => s[i] !== origin[i]) ?? 0;
    return lines[axes[NAMES[moved]][grid[NAMES[moved]].indexOf(s[moved])]];
  };
  const near = nearest(setting, origin, grid);
  if (keyOf(near) === keyOf(setting)) return { line: fromAxes(setting), exact: true, shown: setting };
  const current = model.get("current"), key = keyOf(setting);
  if (current.startsWith(`${key}|`)) return { line: current.slice(key.length + 1), exact: true, shown: setting };
  return { line: fromAxes(near), exact: false, shown: near };
}

/** A preset's line: from its own default start, or from log2(init) = k. */
export function presetLine(model, name, k) {
  return model.get("lines")[Number(model.get("preset_index")[name].split(" ")[k === null ? 0 : 1 + k])];
}

/** A catalog template as nodes (kit.js's fillMarkup), with fields given as nodes put in place. */
function fillNodes(template, fields) {
  const marks = Object.fromEntries(Object.keys(fields).map((k, i) => [k, `\u{E000}${i}\u{E001}`]));
  const back = Object.fromEntries(Object.entries(marks).map(([k, m]) => [m, fields[k]]));
  const swap = (nodes) => nodes.flatMap((n) => {
    if (n.nodeType === Node.TEXT_NODE && n.textContent in back) {
      const v = back[n.textContent];
      return (Array.isArray(v) ? v : [v]).map((x) => (x instanceof Node ? x : document.createTextNode(String(x))));
    }
    if (n.childNodes && n.childNodes.length) n.replaceChildren(...swap([...n.childNodes]));
    return [n];
  });
  return swap(fillMarkup(template, marks));
}

const power = (t) => (t === "0" || t === "inf" ? [t] : ["2", h("sup", {}, t)]);

/** A marker of matplotlib's name at (x, y), radius r, as an SVG path. */
function marker(kind, x, y, r) {
  const poly = (n, turn = 0, sx = 1, inner = 0) => {
    const pts = [];
    const k = inner ? 2 * n : n;
    for (let i = 0; i < k; i++) {
      const a = turn + (i * 2 * Math.PI) / k - Math.PI / 2, rr = inner && i % 2 ? r * inner : r;
      pts.push(`${(x + sx * rr * Math.cos(a)).toFixed(2)},${(y + rr * Math.sin(a)).toFixed(2)}`);
    }
    return `M${pts.join("L")}Z`;
  };
  const q = r * 0.35;
  const shapes = { o: () => `M${x - r},${y}a${r},${r} 0 1,0 ${2 * r},0a${r},${r} 0 1,0 ${-2 * r},0`,
    s: () => poly(4, Math.PI / 4), "^": () => poly(3), v: () => poly(3, Math.PI), "<": () => poly(3, -Math.PI / 2),
    ">": () => poly(3, Math.PI / 2), D: () => poly(4), d: () => poly(4, 0, 0.6), p: () => poly(5), h: () => poly(6),
    H: () => poly(6, Math.PI / 6), 8: () => poly(8, Math.PI / 8), "*": () => poly(5, 0, 1, 0.45),
    P: () => `M${x - q},${y - r}H${x + q}V${y - q}H${x + r}V${y + q}H${x + q}V${y + r}H${x - q}V${y + q}H${x - r}`
             + `V${y - q}H${x - q}Z` };
  return (shapes[kind] ?? shapes.o)();
}

const cross = (x, y, r) => `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`;

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  applyLook(el, look);
  const grid = numbers(model.get("grid")), steps = model.get("steps"), info = model.get("preset_info");
  const [y0, y1] = model.get("y_range");
  const colour = look.colours.dtype[model.get("fmt_key")] ?? look.colours.status.neutral;
  const bad = look.colours.status.bad, over = look.colours.band.overflow;
  const X = (i) => M.left + (i / steps) * (W - M.left - M.right);
  const Y = (v) => H - M.bottom - ((Math.min(Math.max(v, y0), y1) - y0) / (y1 - y0)) * (H - M.top - M.bottom);

  // the controls: four native range inputs, a checkbox per preset, one for the presets' start
  const ranges = NAMES.map((n) => h("input", { type: "range", min: 0, max: grid[n].length - 1, step: 1,
                                              class: `ampkit-range ampkit-replay-${n}`, "aria-label": text[n] }));
  const outs = NAMES.map((n) => h("output", { class: `ampkit-replay-${n}-value` }));
  const boxes = info.map((p) => h("input", { type: "checkbox", class: "ampkit-replay-preset", "data-preset": p.name }));
  const atInit = h("input", { type: "checkbox", class: "ampkit-preset-at-init" });
  const swatch = (p) => svg("svg", { width: 30, height: 12, "aria-hidden": "true" },
    svg("line", { x1: 1, x2: 29, y1: 6, y2: 6, stroke: p.colour, "stroke-width": 2, "stroke-dasharray": DASH[p.dash] }),
    svg("path", { d: marker(p.marker, 15, 6, 4), fill: p.colour }));
  const presetList = h("div", { class: "ampkit-replay-presets", role: "group", "aria-label": text.presets,
                                style: { display: "grid", gridTemplateColumns: "repeat(3, max-content)", gap: "0 1.2em" } },
    ...info.map((p, i) => h("label", { title: p.framework }, boxes[i], " ", swatch(p), " ", p.name)));
  const readout = h("div", { class: "ampkit-replay-readout", "aria-live": "polite" });
  const note = h("div", { class: "ampkit-replay-uncomputed", style: { color: look.colours.status.warn } });
  const presetReadout = h("div", { class: "ampkit-preset-readout", "aria-live": "polite" });

  // the drawing: axes with units, the band where the format overflows, the replay, the presets, a legend
  const axes = svg("g", { "font-size": 12, fill: "#24292f" });
  const yb = H - M.bottom, xr = W - M.right;
  axes.append(svg("line", { x1: M.left, x2: xr, y1: yb, y2: yb, stroke: "#24292f" }),
              svg("line", { x1: M.left, x2: M.left, y1: M.top, y2: yb, stroke: "#24292f" }));
  const xStep = [10, 20, 25, 50, 100, 200, 250, 500, 1000].find((s) => steps / s <= 8) ?? Math.ceil(steps / 8);
  for (let s = 0; s <= steps; s += xStep) {
    axes.append(svg("line", { x1: X(s), x2: X(s), y1: yb, y2: yb + 4, stroke: "#24292f" }),
                svg("text", { x: X(s), y: yb + 17, "text-anchor": "middle" }, String(s)));
  }
  for (let v = 0; v <= y1; v += 8) {
    axes.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(v), y2: Y(v), stroke: "#24292f" }),
                svg("text", { x: M.left - 7, y: Y(v) + 4, "text-anchor": "end" }, String(v)));
  }
  const ym = (M.top + yb) / 2;
  axes.append(svg("text", { x: (M.left + xr) / 2, y: H - 8, "text-anchor": "middle" }, text.xlabel),
              svg("text", { x: 15, y: ym, "text-anchor": "middle", transform: `rotate(-90 15 ${ym})` }, text.ylabel),
              svg("text", { x: (M.left + xr) / 2, y: 20, "text-anchor": "middle", "font-size": 14 }, text.title));
  const ceil = model.get("ceiling").split(" ").map((c) => (c === "n" ? y1 : Number(c)));
  let edge = "";
  ceil.forEach((c, i) => { edge += `${i ? "V" : `M${X(0)},`}${Y(c)}H${X(i + 1)}`; });
  const band = svg("g", { class: "ampkit-replay-ceiling" },
    svg("path", { d: `${edge}V${Y(y1)}H${X(0)}Z`, fill: over, "fill-opacity": 0.12 }),
    svg("path", { d: edge, fill: "none", stroke: over, "stroke-dasharray": "5 3" }));
  const clip = svg("clipPath", { id: `ampkit-replay-clip-${Math.random().toString(36).slice(2)}` },
                   svg("rect", { x: M.left, y: M.top, width: xr - M.left, height: yb - M.top }));
  const mainLine = svg("path", { class: "ampkit-replay-line", fill: "none", stroke: colour, "stroke-width": 2.2 });
  const mainSkips = svg("g", { class: "ampkit-replay-skips", stroke: "#24292f", "stroke-width": 1.6 });
  const main = svg("g", { class: "ampkit-replay-main" }, mainLine, mainSkips);
  const presetLayer = svg("g", { class: "ampkit-replay-preset-layer" });
  const legend = svg("g", { class: "ampkit-replay-legend", "font-size": 11 });
  const plot = svg("svg", { class: "ampkit-replay-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                            "aria-label": text.title, "font-family": "sans-serif" }, svg("defs", {}, clip), axes,
                   svg("g", { "clip-path": `url(#${clip.id})` }, band, presetLayer, main), legend);

  el.append(h("div", { class: "ampkit-replay" },
              ...NAMES.map((n, i) => h("label", { class: "ampkit-control" }, h("span", { style: { minWidth: "8em" } },
                                                                                text[n]), ranges[i], outs[i])),
              h("div", { class: "ampkit-control", style: { alignItems: "flex-start" } }, h("span", {}, text.presets),
                presetList),
              h("label", { class: "ampkit-control" }, atInit, text.at_init),
              readout, note, presetReadout, plot));

  const stepPath = (runs) => {
    let d = "", s = 0;
    runs.forEach(([y, n], i) => { d += `${i ? "V" : `M${X(0)},`}${Y(y)}H${X(s + n)}`; s += n; });
    return d;
  };
  const ys = (runs) => runs.flatMap(([y, n]) => Array(n).fill(y));
  const legendRow = (row, draw, label) => {
    const y = M.top + 8 + 16 * row, x = xr + 14;
    legend.append(...draw(x, y), svg("text", { x: x + 34, y: y + 4 }, label));
  };
  // a setting not computed: a kernel behind the page (kit.js kernelPresence) replays it; without one, the line
  const kernel = kernelPresence(model, () => draw());

  function draw() {
    const setting = model.get("setting"), shown = model.get("shown"), at = model.get("at_init");
    const { line, exact, shown: drawn } = selected(model, setting);
    const r = parseLine(line);
    NAMES.forEach((n, i) => {
      ranges[i].value = String(grid[n].indexOf(setting[i]));
      outs[i].value = String(setting[i]);
    });
    boxes.forEach((b) => { b.checked = shown.includes(b.dataset.preset); });
    atInit.checked = at;
    // the replay of the sliders' setting (or, not computed, the nearest computed one greyed)
    mainLine.setAttribute("d", stepPath(r.runs));
    const y = ys(r.runs);
    mainSkips.replaceChildren(...r.skips.map((i) => svg("path", { "data-step": i, d: cross(X(i + 0.5), Y(y[i]), 4) })));
    main.setAttribute("opacity", exact ? 1 : GREY);
    const skipped = fillNodes(text.skipped, { n: r.skipped, total: steps });
    readout.replaceChildren(...skipped, " · ", ...fillNodes(text.final, { s: power(r.final) }));
    readout.querySelector("b")?.classList.add("ampkit-skipped");
    readout.style.opacity = exact ? 1 : 0.5;
    note.textContent = !exact && !kernel.here ? text.uncomputed : "";
    // the presets: each from its own start, or from log2(init)
    presetLayer.replaceChildren();
    const lines = [];
    const every = Math.max(1, Math.floor(steps / 10));
    info.filter((p) => shown.includes(p.name)).forEach((p, j) => {
      const pr = parseLine(presetLine(model, p.name, at ? setting[0] : null), true), py = ys(pr.runs);
      const g = svg("g", { class: "ampkit-replay-preset", "data-preset": p.name });
      g.append(svg("path", { class: "ampkit-preset-line", d: stepPath(pr.runs), fill: "none", stroke: p.colour,
                             "stroke-width": 1.5, "stroke-dasharray": DASH[p.dash] }));
      for (let i = Math.floor((j * every) / info.length); i < py.length; i += every) {
        g.append(svg("path", { class: "ampkit-preset-marker", d: marker(p.marker, X(i + 0.5), Y(py[i]), 4),
                               fill: p.colour }));
      }
      for (const i of pr.skips) {
        g.append(svg("path", { class: "ampkit-preset-skip", "data-step": i, d: cross(X(i + 0.5), Y(py[i]), 3.5),
                               stroke: p.colour, "stroke-width": 1.6 }));
      }
      for (const i of pr.applied) {
        g.append(svg("path", { class: "ampkit-preset-applied", "data-step": i, fill: bad, stroke: "#24292f",
                               "stroke-width": 0.6, d: marker("P", X(i + 0.5), Y(py[i]), 6),
                               transform: `rotate(45 ${X(i + 0.5)} ${Y(py[i])})` }));
      }
      presetLayer.append(g);
      const facts = fillNodes(text.facts, { s: power(pr.final), skipped: pr.skipped, applied: pr.appliedCount });
      const stop = pr.stopped === null ? [] : [" · ", h("b", {}, fillText(text.stopped, { step: pr.stopped }))];
      lines.push(h("span", { class: "ampkit-preset-line", "data-preset": p.name },
                   h("span", { style: { color: p.colour } }, "■"), " ", h("b", {}, p.name), ` (${p.framework}): `,
                   ...facts, ...stop));
    });
    presetReadout.replaceChildren(...(lines.length ? lines.flatMap((l, i) => (i ? [h("br"), l] : [l])) : [text.none]));
    // the legend: what is drawn now
    legend.replaceChildren();
    let row = 0;
    legendRow(row++, (x, yy) => [svg("rect", { x, y: yy - 5, width: 28, height: 10, fill: over, "fill-opacity": 0.25 })],
              text.ceiling);
    legendRow(row++, (x, yy) => [svg("line", { x1: x, x2: x + 28, y1: yy, y2: yy, stroke: colour, "stroke-width": 2.2 })],
              text.line);
    legendRow(row++, (x, yy) => [svg("path", { d: cross(x + 14, yy, 4), stroke: "#24292f", "stroke-width": 1.6 })],
              text.marks);
    for (const p of info.filter((q) => shown.includes(q.name))) {
      legendRow(row++, (x, yy) => [svg("line", { x1: x, x2: x + 28, y1: yy, y2: yy, stroke: p.colour, "stroke-width": 1.5,
                                                 "stroke-dasharray": DASH[p.dash] }),
                                   svg("path", { d: marker(p.marker, x + 14, yy, 4), fill: p.colour })], p.name);
    }
    if (shown.length) {
      legendRow(row++, (x, yy) => [svg("path", { d: cross(x + 14, yy, 3.5), stroke: "#57606a", "stroke-width": 1.6 })],
                text.preset_skip);
      legendRow(row++, (x, yy) => [svg("path", { d: marker("P", x + 14, yy, 6), fill: bad, stroke: "#24292f",
                                                 "stroke-width": 0.6, transform: `rotate(45 ${x + 14} ${yy})` })],
                text.preset_applied);
    }
    plot.setAttribute("data-setting", keyOf(setting));
    plot.setAttribute("data-drawn", keyOf(drawn));
    plot.setAttribute("data-exact", String(exact));
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  ranges.forEach((r, i) => r.addEventListener("input", () => {
    const s = model.get("setting").slice();
    s[i] = grid[NAMES[i]][Number(r.value)];
    set("setting", s);
  }));
  boxes.forEach((b) => b.addEventListener("change", () => {
    set("shown", info.map((p) => p.name).filter((n) => boxes.find((x) => x.dataset.preset === n).checked));
  }));
  atInit.addEventListener("change", () => set("at_init", atInit.checked));
  const unlisten = onChanges(model, ["setting", "shown", "at_init", "current"], draw);
  draw();
  return () => { kernel.stop(); unlisten(); };
}

export default { render };
