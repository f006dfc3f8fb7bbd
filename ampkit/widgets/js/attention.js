// @ts-check
// Notebook 07's AttentionOverflowView drawn in the browser (ampkit/widgets/attention.py): the activation scale of q
// and k, the head size and where the 1/√d scale is applied; for fp32, bf16 and fp16 the largest output of the
// attention matmul against the format's max (log scale, an overflow hatched to the top and marked "inf") and the
// share of softmax rows that became NaN. Nothing is computed here: the engine ran every position of the controls when
// the view started (model "states": the readout's numbers as the engine prints them, each format's largest matmul
// output and NaN share) and the page SELECTS the position's state. Every word comes from the model's "text".

const W = 750, H = 404, M = { top: 72, bottom: 48 };   // room above the plots: the far maxima
const LEFT = { x0: 86, x1: 448 }, RIGHT = { x0: 548, x1: 740 };

/** The engine's state for the controls' position (one line of words, ampkit.widgets.attention.sent_state): {limits:
 * [spread, largest, ratio, corr] as printed, formats: [[largest text, NaN %, matmul_max or null (inf), nan_rows],
 * ...one per format]}. Only read back: the numbers are Python's repr, which Number() reads exactly. */
export function selected(model, where, headIndex, scaleIndex) {
  const words = model.get("states")[where][headIndex][scaleIndex].split(" ");
  const formats = [];
  for (let i = 4; i < words.length; i += 4) {
    formats.push([words[i], words[i + 1], words[i + 2] === "inf" ? null : Number(words[i + 2]), Number(words[i + 3])]);
  }
  return { limits: words.slice(0, 4), formats };
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const { dtype, status, band } = look.colours;
  applyLook(el, look);
  const scales = model.get("scales"), labels = model.get("scale_labels"), heads = model.get("head_sizes");
  const formats = model.get("formats"), top = model.get("top"), products = model.get("products");
  const decades = Math.log10(top);
  const yBottom = H - M.bottom, plotH = H - M.top - M.bottom;
  const Ylog = (v) => yBottom - (Math.log10(Math.max(v, 1)) / decades) * plotH;   // 1 … top on a log axis
  const Ypct = (p) => yBottom - (p / 110) * plotH;                                  // 0 … 110 %
  const slot = (box, i) => box.x0 + ((i + 0.5) / formats.length) * (box.x1 - box.x0);
  const barW = 0.6 * (LEFT.x1 - LEFT.x0) / formats.length, nanW = 0.6 * (RIGHT.x1 - RIGHT.x0) / formats.length;

  const scaleIn = h("input", { type: "range", min: 0, max: scales.length - 1, step: 1,
                               class: "ampkit-range ampkit-attn-scale", "aria-label": text.scale });
  const scaleOut = h("output", { class: "ampkit-attn-scale-value" });
  const headIn = h("input", { type: "range", min: 0, max: heads.length - 1, step: 1,
                              class: "ampkit-range ampkit-attn-head", "aria-label": text.head });
  const headOut = h("output", { class: "ampkit-attn-head-value" });
  const buttons = text.where.map(([value, label]) => h("button", { type: "button", class: "ampkit-attn-at",
                                                                   "data-at": value }, label));
  const readout = h("div", { class: "ampkit-attn-readout", "aria-live": "polite" });

  // the drawing: axes with their units, then one bar, one label (and the format's max) per format, in each panel
  const hatch = svg("pattern", { id: `ampkit-attn-hatch-${Math.random().toString(36).slice(2)}`, width: 8, height: 8,
                                patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
                   svg("rect", { width: 8, height: 8, fill: "#ffffff" }),
                   svg("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: status.bad, "stroke-width": 3 }));
  const axes = svg("g", { "font-size": 13, fill: "#24292f" });
  for (const box of [LEFT, RIGHT]) {
    axes.append(svg("line", { x1: box.x0, x2: box.x1, y1: yBottom, y2: yBottom, stroke: "#24292f" }),
                svg("line", { x1: box.x0, x2: box.x0, y1: M.top, y2: yBottom, stroke: "#24292f" }));
    formats.forEach((f, i) => axes.append(svg("text", { x: slot(box, i), y: yBottom + 18, "text-anchor": "middle",
                                                       fill: dtype[f.name] }, f.name)));
  }
  for (let e = 0; e <= decades; e++) {
    axes.append(svg("line", { x1: LEFT.x0 - 4, x2: LEFT.x0, y1: Ylog(10 ** e), y2: Ylog(10 ** e), stroke: "#24292f" }),
                svg("text", { x: LEFT.x0 - 7, y: Ylog(10 ** e) + 5, "text-anchor": "end" },
                   "10", svg("tspan", { dy: -6, "font-size": 10 }, String(e))));
  }
  for (let p = 0; p <= 100; p += 20) {
    axes.append(svg("line", { x1: RIGHT.x0 - 4, x2: RIGHT.x0, y1: Ypct(p), y2: Ypct(p), stroke: "#24292f" }),
                svg("text", { x: RIGHT.x0 - 7, y: Ypct(p) + 5, "text-anchor": "end" }, String(p)));
  }
  const yMid = (M.top + yBottom) / 2;
  axes.append(svg("text", { x: 16, y: yMid, "text-anchor": "middle", transform: `rotate(-90 16 ${yMid})` }, text.ylabel),
              svg("text", { x: RIGHT.x0 - 40, y: yMid, "text-anchor": "middle",
                           transform: `rotate(-90 ${RIGHT.x0 - 40} ${yMid})` }, text.nan_ylabel),
              svg("text", { x: (LEFT.x0 + LEFT.x1) / 2, y: 18, "text-anchor": "middle", "font-size": 14 }, text.title),
              svg("text", { x: (RIGHT.x0 + RIGHT.x1) / 2, y: 18, "text-anchor": "middle", "font-size": 14 },
                 text.nan_title));
  const bars = formats.map((f, i) => svg("rect", { class: "ampkit-attn-bar", "data-fmt": f.name, x: slot(LEFT, i) - barW / 2,
                                                  width: barW, "stroke-width": 2 }));
  const barLabels = formats.map((f, i) => svg("text", { class: "ampkit-attn-label", "data-fmt": f.name, x: slot(LEFT, i),
                                                       "text-anchor": "middle", "font-size": 13, "font-weight": "bold",
                                                       stroke: "#ffffff", "stroke-width": 4, "paint-order": "stroke" }));
  const limits = svg("g", { class: "ampkit-attn-limits", "font-size": 12 });
  formats.forEach((f, i) => {
    const x = slot(LEFT, i);
    if (f.max < top) {                   // drawn above the bars, so an overflowed bar never hides it
      limits.append(svg("line", { class: "ampkit-attn-max", "data-fmt": f.name, x1: x - 0.75 * barW, x2: x + 0.75 * barW,
                                 y1: Ylog(f.max), y2: Ylog(f.max), stroke: status.bad, "stroke-width": 2.5,
                                 "stroke-dasharray": "6 4" }),
                    svg("text", { x, y: Ylog(f.max) - 5, "text-anchor": "middle", fill: status.bad, stroke: "#ffffff",
                                 "stroke-width": 4, "paint-order": "stroke" }, f.label.join(" ")));
    } else {                             // far above the axis' top: said above the plot, one line under the other
      f.label.forEach((line, k) => limits.append(svg("text", { x, y: M.top - 34 + 14 * k, "text-anchor": "middle",
                                                              fill: dtype[f.name] }, line)));
    }
  });
  const nanBars = formats.map((f, i) => svg("rect", { class: "ampkit-attn-nan", "data-fmt": f.name,
                                                     x: slot(RIGHT, i) - nanW / 2, width: nanW, fill: band.overflow }));
  const nanLabels = formats.map((f, i) => svg("text", { class: "ampkit-attn-nan-label", "data-fmt": f.name,
                                                       x: slot(RIGHT, i), "text-anchor": "middle", "font-size": 13 }));
  const plot = svg("svg", { class: "ampkit-attn-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                          "font-family": "sans-serif" },
                 svg("defs", {}, hatch), axes, ...bars, ...nanBars, limits, ...barLabels, ...nanLabels);

  el.append(h("div", { class: "ampkit-attn" },
              h("label", { class: "ampkit-control" }, h("span", {}, text.scale), scaleIn, scaleOut),
              h("label", { class: "ampkit-control" }, h("span", {}, text.head), headIn, headOut),
              h("div", { class: "ampkit-control ampkit-attn-where", role: "group", "aria-label": text.at },
                h("span", {}, text.at), ...buttons),
              readout, plot));

  const nearest = (list, v) => list.reduce((best, x, i) => (Math.abs(x - v) < Math.abs(list[best] - v) ? i : best), 0);

  function draw() {
    const where = model.get("scale_at");
    const si = nearest(scales, model.get("act_scale")), hi = heads.indexOf(model.get("head_dim"));
    const { limits: [spread, largest, ratio, corr], formats: shown } = selected(model, where, hi, si);
    scaleIn.value = String(si);
    scaleOut.value = labels[si];
    headIn.value = String(hi);
    headOut.value = String(heads[hi]);
    for (const b of buttons) {
      const on = b.dataset.at === where;
      markPressed(b, on);
    }
    const cells = formats.flatMap((f, i) => {
      const [big, pct, , nanRows] = shown[i];
      const cell = h("span", { class: `ampkit-attn-${f.name}`, style: { color: nanRows ? status.bad : status.good } },
                     h("b", {}, f.name), ": ", fillText(text.facts, { largest: big, pct }));
      return i ? [" · ", cell] : [cell];
    });
    readout.replaceChildren(
      fillText(text.line, { s: labels[si], d: heads[hi], where: text.where_long[where] }), h("br"),
      fillText(text.limits, { spread, n: products, largest, ratio, corr }), h("br"), ...cells);
    formats.forEach((f, i) => {
      const [big, pct, matmulMax, nanRows] = shown[i];
      const over = matmulMax === null;
      const y = over ? M.top : Ylog(matmulMax);
      Object.entries({ y, height: yBottom - y, fill: over ? `url(#${hatch.id})` : dtype[f.name],
                       stroke: over ? status.bad : dtype[f.name], "data-overflow": String(over) })
        .forEach(([k, v]) => bars[i].setAttribute(k, v));
      barLabels[i].setAttribute("y", over ? Ylog(5e5) : y - 5);
      barLabels[i].setAttribute("fill", over ? status.bad : "#24292f");
      barLabels[i].textContent = over ? text.inf : big;
      const yn = Ypct(100 * nanRows);
      nanBars[i].setAttribute("y", yn);
      nanBars[i].setAttribute("height", yBottom - yn);
      nanLabels[i].setAttribute("y", yn - 5);
      nanLabels[i].textContent = fillText(text.percent, { value: pct });   // 67 % / 67%
    });
    plot.setAttribute("data-state", `${labels[si]},${heads[hi]},${where}`);
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  scaleIn.addEventListener("input", () => set("act_scale", scales[Number(scaleIn.value)]));
  headIn.addEventListener("input", () => set("head_dim", heads[Number(headIn.value)]));
  for (const b of buttons) b.addEventListener("click", () => set("scale_at", b.dataset.at));
  const unlisten = onChanges(model, ["act_scale", "head_dim", "scale_at"], draw);
  draw();
  return unlisten;
}

export default { render };
