// @ts-check
// Notebook 01's RangeMap drawn in the browser (ampkit/widgets/range_map.py): every format on one log2 axis in the
// kit's band colours, a marker for a value, optionally a histogram of values with a loss-scale slider. The bands,
// the histogram at scale 1 and the summary line of every slider position come from the engine. Two PORTS
// (docs/architecture.md, "Ports"), each marked on both sides: the marker of a free value (the explorer's typed
// number; RangeMap.marker_label: x = log2|value|, its label) and the bars moved by log2(scale) (RangeMap.hist_edges:
// one exact addition a slider position; sending the edges of all 33 positions instead would add ~6 KB to each saved
// map for that addition); tests/browser/test_front_rangemap_arith_browser.py checks each against the engine.

const BAND_KEYS = ["flushed", "subnormal", "normal", "overflow"];

/** A Python float's repr as the engine sent it ("1e-06", "inf", "nan"; "" for none) -> a number (null for none). */
export function parseRepr(text) {
  return text === "" ? null : fromRepr(text);
}

// port of ampkit/widgets/range_map.py RangeMap.marker_label (tests/browser/test_front_rangemap_arith_browser.py)
/** Where the marker of `value` goes: {x: log2|value| (Infinity for inf), pos: x clamped to [lo, hi], label}; x and
 * pos are null where a value has no place on a log axis (0, NaN) or there is none. */
export function marker(value, lo, hi, text) {
  if (value === null) return { x: null, pos: null, label: "" };
  if (Number.isNaN(value) || value === 0) {
    return { x: null, pos: null, label: text.no_place.replace("{v}", pyRepr(value)) };
  }
  const x = Number.isFinite(value) ? Math.log2(Math.abs(value)) : Infinity;
  const pos = Math.min(Math.max(x, lo), hi);
  const where = lo <= x && x <= hi ? "" : text.off;
  const label = Number.isFinite(x) ? `|x| = ${pyG(Math.abs(value), 4)} = 2^${pyFixed(x, 2)}${where}` : "|x| = inf";
  return { x, pos, label };
}

// port of ampkit/widgets/range_map.py RangeMap.hist_edges (tests/browser/test_front_rangemap_arith_browser.py)
/** The histogram's bin edges at log2(scale) = k: the engine's edges at scale 1, moved k octaves. */
export function shiftedEdges(edges, k) {
  return edges.map((e) => e + k);
}

/** The range map's axis steps: 1, 2, 2.5 or 5 times a power of ten (kit.js ticks). */
const STEPS = [1, 2, 2.5, 5];

let clipCount = 0;
const WIDTH = 820, LEFT = 92, RIGHT = 24, ROW = 30, HIST = 150;

function render({ model, el }) {
  const look = model.get("look");
  const text = model.get("text");
  applyLook(el, look);
  const band = look.colours.band;
  const hist = model.get("hist");
  const hasHist = Boolean(hist && hist.counts);
  const clip = `ampkit-hist-clip-${++clipCount}`;
  const root = h("div", { class: "ampkit-rangemap" });
  let slider = null, readout = null, summary = null;
  if (hasHist) {
    slider = h("input", { type: "range", min: hist.min_exp, max: hist.max_exp, step: 1,
                          class: "ampkit-range ampkit-scale-range", "aria-label": text.scale });
    readout = h("output", { class: "ampkit-scale-readout" });
    summary = h("code", { class: "ampkit-scale-summary" });
    root.append(h("label", { class: "ampkit-control" }, h("span", {}, text.scale), slider, readout),
                h("div", { style: { margin: "0.3em 0" } }, summary));
    slider.addEventListener("input", () => {
      model.set("scale_exp", Number(slider.value));
      saveChanges(model);
      draw();
    });
  }
  const picture = svg("svg", { class: "ampkit-range-svg", role: "img", width: WIDTH });
  const legend = h("div", { class: "ampkit-range-legend", style: { display: "flex", gap: "1.2em",
                                                                   flexWrap: "wrap", marginLeft: `${LEFT}px` } },
    ...BAND_KEYS.map((k) => h("span", { class: `ampkit-legend-${k}` },
      h("span", { style: { display: "inline-block", width: "0.9em", height: "0.9em", marginRight: "0.35em",
                           verticalAlign: "-0.1em", background: band[k] } }), text.bands[k])));
  root.append(picture, legend);
  el.append(root);

  function draw() {
    const lo = model.get("lo"), hi = model.get("hi");
    const formats = model.get("formats");
    const k = model.get("scale_exp");
    const plotW = WIDTH - LEFT - RIGHT;
    const px = (x) => LEFT + ((x - lo) / (hi - lo)) * plotW;
    const parts = [];
    let y = 20;
    parts.push(svg("text", { x: LEFT + plotW / 2, y: 16, "text-anchor": "middle", "font-weight": "bold",
                             class: "ampkit-range-title" }, hasHist ? text.hist_title : text.title));
    // top axis: powers of ten
    y += 16;
    parts.push(svg("text", { x: LEFT + plotW / 2, y, "text-anchor": "middle", "font-size": "0.85em" }, text.axis10));
    y += 24;
    const axisTop = y;
    for (const t of ticks(lo * Math.LOG10E * Math.LN2, hi * Math.LOG10E * Math.LN2, 12, STEPS)) {
      const x = px(t / (Math.LOG10E * Math.LN2));
      parts.push(svg("line", { x1: x, x2: x, y1: axisTop - 4, y2: axisTop, stroke: "#57606a" }),
                 svg("text", { x, y: axisTop - 7, "text-anchor": "middle", "font-size": "0.8em",
                               class: "ampkit-tick10" }, t));
    }
    parts.push(svg("line", { x1: LEFT, x2: LEFT + plotW, y1: axisTop, y2: axisTop, stroke: "#57606a" }));
    y = axisTop;
    if (hasHist) {
      const top = y, bottom = y + HIST;
      const first = formats[0].bands;
      for (const key of ["flushed", "subnormal", "overflow"]) {
        const [a, b] = first[key];
        if (b > a) parts.push(svg("rect", { x: px(a), y: top, width: px(b) - px(a), height: HIST, fill: band[key],
                                            "fill-opacity": 0.25 }));
      }
      const edges = shiftedEdges(hist.edges, k);
      const most = Math.max(...hist.counts) * 1.25;
      const bars = svg("g", { class: "ampkit-hist", "data-shift": k, "clip-path": `url(#${clip})` });
      hist.counts.forEach((c, i) => {
        if (c <= 0) return;
        const x0 = px(edges[i]), x1 = px(edges[i + 1]), hgt = (c / most) * HIST;
        bars.append(svg("rect", { class: "ampkit-bar", x: x0, y: bottom - hgt, width: Math.max(x1 - x0 - 1, 1),
                                  height: hgt, fill: "#0969da", "fill-opacity": 0.85, "data-lo": edges[i],
                                  "data-hi": edges[i + 1], "data-count": c }));
      });
      parts.push(svg("clipPath", { id: clip },
                     svg("rect", { x: LEFT, y: top, width: plotW, height: HIST })), bars,
                 svg("rect", { x: LEFT, y: top, width: plotW, height: HIST, fill: "none", stroke: "#57606a" }),
                 svg("text", { x: LEFT + 6, y: top + 18, class: "ampkit-hist-label", stroke: "white",
                               "stroke-width": 4, "paint-order": "stroke" },
                     text.times, svg("tspan", { "baseline-shift": "super", "font-size": "0.8em" },
                                     Number.isInteger(k) ? String(k) : pyFixed(k, 2))),
                 svg("text", { x: 14, y: top + HIST / 2, "text-anchor": "middle", "font-size": "0.75em",
                               transform: `rotate(-90 14 ${top + HIST / 2})` }, text.count));
      for (const t of ticks(0, most, 4, STEPS)) {
        const ty = bottom - (t / most) * HIST;
        parts.push(svg("line", { x1: LEFT - 4, x2: LEFT, y1: ty, y2: ty, stroke: "#57606a" }),
                   svg("text", { x: LEFT - 6, y: ty, "text-anchor": "end", "dominant-baseline": "middle",
                                 "font-size": "0.75em", class: "ampkit-tick-count" }, t));
      }
      y = bottom + 8;
    }
    const rowsTop = y;
    formats.forEach((f, row) => {
      const yy = rowsTop + row * ROW + 3;
      parts.push(svg("text", { x: LEFT - 8, y: yy + ROW / 2 + 1, "text-anchor": "end", "dominant-baseline": "middle",
                               class: "ampkit-format-label" }, f.label));
      for (const key of BAND_KEYS) {
        const [a, b] = f.bands[key];
        if (b > a) parts.push(svg("rect", { class: `ampkit-band ampkit-band-${key}`, x: px(a), y: yy,
                                            width: px(b) - px(a), height: ROW - 6, fill: band[key],
                                            stroke: "white", "data-format": f.name, "data-band": key,
                                            "data-lo": a, "data-hi": b }));
      }
    });
    const rowsBottom = rowsTop + formats.length * ROW;
    parts.push(svg("line", { x1: LEFT, x2: LEFT + plotW, y1: rowsBottom, y2: rowsBottom, stroke: "#57606a" }));
    for (const t of ticks(lo, hi, 14, STEPS)) {
      const x = px(t);
      parts.push(svg("line", { x1: x, x2: x, y1: rowsBottom, y2: rowsBottom + 4, stroke: "#57606a" }),
                 svg("text", { x, y: rowsBottom + 18, "text-anchor": "middle", "font-size": "0.8em",
                               class: "ampkit-tick2" }, t));
    }
    parts.push(svg("text", { x: LEFT + plotW / 2, y: rowsBottom + 38, "text-anchor": "middle", "font-size": "0.9em" },
                   text.axis));
    const m = marker(parseRepr(model.get("marker")), lo, hi, text);
    if (m.label) {
      const right = m.pos !== null && m.pos > (lo + hi) / 2;
      const lx = m.pos === null ? LEFT + 4 : px(m.pos) + (right ? -6 : 6);
      if (m.pos !== null) {
        parts.push(svg("line", { class: "ampkit-marker", x1: px(m.pos), x2: px(m.pos), y1: rowsTop,
                                 y2: rowsBottom, stroke: "#24292f", "stroke-width": 2, "data-x": m.pos }));
      }
      parts.push(svg("text", { class: "ampkit-marker-label", x: lx, y: rowsTop + 16,
                               "text-anchor": right ? "end" : "start", stroke: "white", "stroke-width": 4,
                               "paint-order": "stroke", "font-size": "0.9em" }, m.label));
    }
    const height = rowsBottom + 48;
    picture.setAttribute("height", height);
    picture.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
    picture.setAttribute("aria-label", hasHist ? text.hist_title : text.title);
    picture.replaceChildren(...parts);
    if (hasHist) {
      if (document.activeElement !== slider) slider.value = String(k);
      readout.value = Number.isInteger(k) ? String(2 ** k) : `2^${pyFixed(k, 2)}`;
      writeSummary();
    }
  }

  /** The summary line: the engine's line for a slider position the page carries, else the kernel's. Only this
   * line follows the kernel's `summary`, so the kernel answering a slider move redraws nothing else. */
  function writeSummary() {
    const k = model.get("scale_exp");
    const shown = Number.isInteger(k) && k >= hist.min_exp && k <= hist.max_exp;
    const line = shown ? hist.summaries[k - hist.min_exp] : model.get("summary");
    if (summary.textContent !== line) summary.textContent = line;   // the kernel's same line: nothing redrawn
  }

  const events = ["change:marker", "change:scale_exp", "change:lo", "change:hi"];
  for (const e of events) model.on(e, draw);
  if (hasHist) model.on("change:summary", writeSummary);
  draw();
  return () => {
    for (const e of events) model.off(e, draw);
    if (hasHist) model.off("change:summary", writeSummary);
  };
}

export default { render };
