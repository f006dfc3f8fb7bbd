// Notebook 03's VisualLossScaler drawn in the browser (ampkit/widgets/scaling.py): gradient magnitudes (a log2
// histogram) over a format's bands, a log2(scale) slider that shifts them. Nothing is computed here: the engine swept
// every slider position of every format when the view started (model "sweep": the readout's percentages as the
// engine prints them, the safe window, the bands) and the page SELECTS the position's entry; the histogram is the
// engine's, moved by k octaves. Every word comes from the model's "text" (the kit's language).

const SVG = "http://www.w3.org/2000/svg";
const W = 700, H = 320, M = { left: 62, right: 12, top: 54, bottom: 46 };
const KEEP = new Set(["B", "SUP", "SUB", "SMALL", "CODE", "I"]);   // the markup a readout template may carry

/** An SVG element with attributes and children (strings become text). */
function s(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** A template from the kit's catalog ("<b>scale 2<sup>{k}</sup> in {fmt}</b>: ") as nodes, its {fields} filled in
 * as text; only simple inline markup (b, sup, small, code) is kept, never attributes. */
export function fill(template, fields) {
  const body = new DOMParser().parseFromString(`<body>${template}</body>`, "text/html").body;
  const walk = (node) => [...node.childNodes].flatMap((c) => {
    if (c.nodeType === Node.TEXT_NODE) {
      return c.textContent.split(/\{(\w+)\}/).map((part, i) => (i % 2 ? String(fields[part]) : part))
        .filter((t) => t !== "").map((t) => document.createTextNode(t));
    }
    if (c.nodeType !== Node.ELEMENT_NODE) return [];
    if (!KEEP.has(c.tagName)) return walk(c);
    const el = document.createElement(c.tagName.toLowerCase());
    el.append(...walk(c));
    return [el];
  });
  return walk(body);
}

/** The engine's numbers for slider position k of format fmt: [flushed, subnormal, overflow] as printed, window. */
export function selected(model, fmt, k) {
  const entry = model.get("sweep")[fmt];
  return { pct: entry.pct[k - model.get("min_log2")], window: entry.window, bands: entry.bands };
}

function niceStep(top) {
  for (const step of [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5]) if (top / step <= 6) return step;
  return 1;
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const band = look.colours.band;
  applyLook(el, look);
  const lo = model.get("min_log2"), hi = model.get("max_log2");
  const [x0, x1] = model.get("xlim");
  const { edges, frac } = model.get("hist");
  const top = Math.max(0.05, Math.max(...frac) * 1.15);
  const X = (v) => M.left + ((Math.min(Math.max(v, x0), x1) - x0) / (x1 - x0)) * (W - M.left - M.right);
  const Y = (f) => H - M.bottom - (f / top) * (H - M.top - M.bottom);

  const buttons = model.get("formats").map((f) => h("button", { type: "button", class: "ampkit-scale-format",
                                                                  "data-fmt": f.name }, f.label));
  const slider = h("input", { type: "range", min: lo, max: hi, step: 1, class: "ampkit-range ampkit-scale-range",
                              "aria-label": text.scale });
  const number = h("input", { type: "number", min: lo, max: hi, step: 1, class: "ampkit-scale-k", style: { width: "4em" },
                              "aria-label": text.scale });
  const readout = h("div", { class: "ampkit-scale-readout", "aria-live": "polite" });

  // the drawing: bands (one rect each), the histogram (one path), axes with units, a legend
  const rects = Object.fromEntries(["flushed", "subnormal", "normal", "overflow"].map((n) => [n, s("rect", {
    class: `ampkit-band ampkit-band-${n}`, y: M.top, height: H - M.top - M.bottom, fill: band[n], "fill-opacity": 0.18 })]));
  const bars = s("path", { class: "ampkit-scale-bars", fill: "#0969da", "fill-opacity": 0.8 });
  const title = s("text", { x: W / 2, y: 18, "text-anchor": "middle", "font-size": 15, class: "ampkit-scale-title" });
  const axes = s("g", { "font-size": 12, fill: "#24292f" });
  const yAxis = H - M.bottom;
  axes.append(s("line", { x1: M.left, x2: W - M.right, y1: yAxis, y2: yAxis, stroke: "#24292f" }),
              s("line", { x1: M.left, x2: M.left, y1: M.top, y2: yAxis, stroke: "#24292f" }));
  for (let v = Math.ceil(x0 / 8) * 8; v <= x1; v += 8) {
    axes.append(s("line", { x1: X(v), x2: X(v), y1: yAxis, y2: yAxis + 4, stroke: "#24292f" }),
                s("text", { x: X(v), y: yAxis + 17, "text-anchor": "middle" }, String(v)));
  }
  const step = niceStep(top);
  for (let i = 0; i * step <= top + 1e-12; i++) {
    const f = i * step;
    axes.append(s("line", { x1: M.left - 4, x2: M.left, y1: Y(f), y2: Y(f), stroke: "#24292f" }),
                s("text", { x: M.left - 7, y: Y(f) + 4, "text-anchor": "end" }, f.toFixed(2)));
  }
  axes.append(s("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle" }, text.xlabel),
              s("text", { x: 14, y: (M.top + yAxis) / 2, "text-anchor": "middle",
                          transform: `rotate(-90 14 ${(M.top + yAxis) / 2})` }, text.ylabel));
  const legend = s("g", { "font-size": 11, class: "ampkit-scale-legend" });   // one row between title and plot
  let lx = M.left;
  [...text.bands.map(([n, label]) => [band[n], 0.35, label]), ["#0969da", 0.8, text.bars]].forEach(([colour, op, label]) => {
    legend.append(s("rect", { x: lx, y: 31, width: 14, height: 11, fill: colour, "fill-opacity": op }),
                  s("text", { x: lx + 18, y: 41 }, label));
    lx += 32 + 6.2 * [...label].length * (/[\u3000-\u9fff]/.test(label) ? 1.8 : 1);
  });
  const svg = s("svg", { class: "ampkit-scale-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                         "font-family": "sans-serif" },
                ...Object.values(rects), bars, axes, legend, title);

  el.append(h("div", { class: "ampkit-scaler" },
              h("div", { class: "ampkit-control", role: "group", "aria-label": text.format },
                h("span", {}, text.format), ...buttons),
              h("label", { class: "ampkit-control" }, h("span", {}, text.scale), slider, number),
              readout, svg));

  function draw() {
    const fmt = model.get("fmt"), k = model.get("log2_scale");
    const { pct: [flushed, subnormal, overflow], window, bands } = selected(model, fmt, k);
    slider.value = String(k);
    if (document.activeElement !== number) number.value = String(k);
    for (const b of buttons) {
      const on = b.dataset.fmt === fmt;
      b.setAttribute("aria-pressed", String(on));
      Object.assign(b.style, on ? { background: "#0969da", color: "#ffffff", fontWeight: "bold" }
                                : { background: "", color: "", fontWeight: "" });
    }
    readout.replaceChildren(
      ...fill(text.head, { k, fmt }),
      h("span", { class: "ampkit-flushed", style: { color: band.flushed } }, ...fill(text.flushed, { pct: flushed })),
      " · ", h("span", { class: "ampkit-subnormal" }, ...fill(text.subnormal, { pct: subnormal })),
      " · ", h("span", { class: "ampkit-overflow", style: { color: band.overflow } },
               ...fill(text.overflow, { pct: overflow })),
      " ", h("small", {}, text.of_what), h("br"), text.safe, " ",
      h("span", { class: "ampkit-window" }, ...(window === null ? [text.none]
        : ["2", h("sup", {}, String(window[0])), " … 2", h("sup", {}, String(window[1]))])));
    for (const [n, [a, b]] of Object.entries(bands)) {
      rects[n].setAttribute("x", X(a));
      rects[n].setAttribute("width", Math.max(0, X(b) - X(a)));
    }
    let d = "";
    frac.forEach((f, i) => {
      const a = edges[i] + k, b = edges[i + 1] + k;
      if (f > 0 && b > x0 && a < x1) d += `M${X(a)},${yAxis}V${Y(f)}H${X(b)}V${yAxis}Z`;
    });
    bars.setAttribute("d", d);
    svg.setAttribute("data-k", String(k));
    svg.setAttribute("data-fmt", fmt);
    title.replaceChildren(`${fmt} × 2`, s("tspan", { dy: -7, "font-size": 11 }, String(k)),
                          s("tspan", { dy: 7 }, ` — ${text.flushed.replace("{pct}", flushed)} · `
                                                + text.overflow.replace("{pct}", overflow)));
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  slider.addEventListener("input", () => set("log2_scale", Number(slider.value)));
  number.addEventListener("change", () => {
    const k = Math.round(Number(number.value));
    if (Number.isFinite(k) && k >= lo && k <= hi) set("log2_scale", k);
    else number.value = String(model.get("log2_scale"));
  });
  for (const b of buttons) b.addEventListener("click", () => set("fmt", b.dataset.fmt));
  model.on("change:log2_scale", draw);
  model.on("change:fmt", draw);
  draw();
  return () => { model.off("change:log2_scale", draw); model.off("change:fmt", draw); };
}

export default { render };
