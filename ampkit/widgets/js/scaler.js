// @ts-check
// Notebook 03's VisualLossScaler drawn in the browser (ampkit/widgets/scaling.py): gradient magnitudes (a log2
// histogram) over a format's bands, a log2(scale) slider that shifts them. Nothing is computed here: the engine swept
// every slider position of every format when the view started (model "sweep": the readout's percentages as the
// engine prints them, the safe window, the bands) and the page SELECTS the position's entry; the histogram is the
// engine's, moved by k octaves. Every word comes from the model's "text" (the kit's language).

const W = 700, H = 320, M = { left: 62, right: 12, top: 54, bottom: 46 };

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
  const rects = Object.fromEntries(["flushed", "subnormal", "normal", "overflow"].map((n) => [n, svg("rect", {
    class: `ampkit-band ampkit-band-${n}`, y: M.top, height: H - M.top - M.bottom, fill: band[n], "fill-opacity": 0.18 })]));
  const bars = svg("path", { class: "ampkit-scale-bars", fill: "#0969da", "fill-opacity": 0.8 });
  const title = svg("text", { x: W / 2, y: 18, "text-anchor": "middle", "font-size": 15, class: "ampkit-scale-title" });
  const axes = svg("g", { "font-size": 12, fill: "#24292f" });
  const yAxis = H - M.bottom;
  axes.append(svg("line", { x1: M.left, x2: W - M.right, y1: yAxis, y2: yAxis, stroke: "#24292f" }),
              svg("line", { x1: M.left, x2: M.left, y1: M.top, y2: yAxis, stroke: "#24292f" }));
  for (let v = Math.ceil(x0 / 8) * 8; v <= x1; v += 8) {
    axes.append(svg("line", { x1: X(v), x2: X(v), y1: yAxis, y2: yAxis + 4, stroke: "#24292f" }),
                svg("text", { x: X(v), y: yAxis + 17, "text-anchor": "middle" }, String(v)));
  }
  const step = niceStep(top);
  for (let i = 0; i * step <= top + 1e-12; i++) {
    const f = i * step;
    axes.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(f), y2: Y(f), stroke: "#24292f" }),
                svg("text", { x: M.left - 7, y: Y(f) + 4, "text-anchor": "end" }, f.toFixed(2)));
  }
  axes.append(svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle" }, text.xlabel),
              svg("text", { x: 14, y: (M.top + yAxis) / 2, "text-anchor": "middle",
                          transform: `rotate(-90 14 ${(M.top + yAxis) / 2})` }, text.ylabel));
  const legend = svg("g", { "font-size": 11, class: "ampkit-scale-legend" });   // one row between title and plot
  let lx = M.left;
  [...text.bands.map(([n, label]) => [band[n], 0.35, label]), ["#0969da", 0.8, text.bars]].forEach(([colour, op, label]) => {
    legend.append(svg("rect", { x: lx, y: 31, width: 14, height: 11, fill: colour, "fill-opacity": op }),
                  svg("text", { x: lx + 18, y: 41 }, label));
    lx += 32 + labelWidth(label, 6.2);
  });
  const plot = svg("svg", { class: "ampkit-scale-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                            "font-family": "sans-serif" },
                   ...Object.values(rects), bars, axes, legend, title);

  el.append(h("div", { class: "ampkit-scaler" },
              h("div", { class: "ampkit-control", role: "group", "aria-label": text.format },
                h("span", {}, text.format), ...buttons),
              h("label", { class: "ampkit-control" }, h("span", {}, text.scale), slider, number),
              readout, plot));

  function draw() {
    const fmt = model.get("fmt"), k = model.get("log2_scale");
    const { pct: [flushed, subnormal, overflow], window, bands } = selected(model, fmt, k);
    slider.value = String(k);
    if (document.activeElement !== number) number.value = String(k);
    for (const b of buttons) {
      const on = b.dataset.fmt === fmt;
      markPressed(b, on);
    }
    readout.replaceChildren(
      ...fillMarkup(text.head, { k, fmt }),
      h("span", { class: "ampkit-flushed", style: { color: band.flushed } }, ...fillMarkup(text.flushed, { pct: flushed })),
      " · ", h("span", { class: "ampkit-subnormal" }, ...fillMarkup(text.subnormal, { pct: subnormal })),
      " · ", h("span", { class: "ampkit-overflow", style: { color: band.overflow } },
               ...fillMarkup(text.overflow, { pct: overflow })),
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
    plot.setAttribute("data-k", String(k));
    plot.setAttribute("data-fmt", fmt);
    title.replaceChildren(`${fmt} × 2`, svg("tspan", { dy: -7, "font-size": 11 }, String(k)),
                          svg("tspan", { dy: 7 }, ` — ${text.flushed.replace("{pct}", flushed)} · `
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
