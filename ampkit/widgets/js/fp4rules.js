// @ts-check
// Notebook 10's ScaleRuleExplorer drawn in the browser (ampkit/widgets/fp4_rules.py): one MXFP4 block under each
// MX scale rule as its amax moves. Nothing is computed here but positions on the axis: the engine computed every
// amax the slider reaches under every rule (model "states": per amax, per rule, the scale's exponent k and the
// limits as the engine prints them) and the page SELECTS the slider's entry. Every word comes from the model's
// "text" and "labels" (the kit's language).

const W = 700, M = { right: 14, top: 52 }, RH = 34, LO = -7, HI = 6;   // the axis: 2^-7 … 2^6

/** x of a magnitude on the log2 axis (clamped to the axis) that starts at `left`. */
export function xOf(v, left) {
  const t = (Math.min(Math.max(Math.log2(v), LO), HI) - LO) / (HI - LO);
  return left + t * (W - left - M.right);
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text"), band = look.colours.band, labels = model.get("labels");
  applyLook(el, look);
  const amaxes = model.get("amaxes"), grid = model.get("grid");
  // the rules' names end where the axis starts: room for the longest (a CJK character counts 1.8)
  const left = Math.round(Math.max(130, 16 + Math.max(...Object.values(labels).map((l) => labelWidth(l, 6.8)))));
  const X = (v) => xOf(v, left);
  const n = model.get("states")[0].length, H = M.top + n * RH + 44;
  const slider = h("input", { type: "range", min: 0, max: amaxes.length - 1, step: 1, class: "ampkit-range",
                              "aria-label": text.amax });
  const value = h("b", { class: "ampkit-fp4-amax" });
  const readout = h("div", { class: "ampkit-fp4-rules-readout", "aria-live": "polite" });
  const rows = svg("g", { class: "ampkit-fp4-rows" });
  const axis = svg("g", { "font-size": 11 });
  const yAxis = M.top + n * RH;
  for (let e = LO; e <= HI; e++) {
    const x = X(2 ** e);
    axis.append(svg("line", { x1: x, x2: x, y1: yAxis, y2: yAxis + 4, stroke: "#24292f" }),
                svg("text", { x, y: yAxis + 16, "text-anchor": "middle" }, `2^${e}`));
  }
  axis.append(svg("text", { x: (left + W - M.right) / 2, y: yAxis + 34, "text-anchor": "middle",
                            "font-size": 12 }, text.xlabel));
  const legend = svg("g", { "font-size": 12 });
  let lx = left;
  for (const [name, label] of text.legend) {
    legend.append(svg("rect", { x: lx, y: 26, width: 14, height: 11, fill: band[name] }),
                  svg("text", { x: lx + 18, y: 36 }, label));
    lx += 34 + labelWidth(label, 6.6);
  }
  const amaxLine = svg("line", { class: "ampkit-fp4-amax-line", y1: M.top - 4, y2: yAxis, stroke: "#24292f",
                                 "stroke-dasharray": "4 3" });
  const plot = svg("svg", { class: "ampkit-fp4-rules-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H,
                            role: "img", "font-family": "sans-serif", "data-left": left },
                   svg("text", { x: W / 2, y: 16, "text-anchor": "middle", "font-size": 15 }, text.title),
                   legend, rows, axis, amaxLine);
  el.append(h("div", { class: "ampkit-fp4-rules" },
              h("label", { class: "ampkit-control" }, h("span", {}, text.amax), slider, value), plot, readout));

  function draw() {
    const i = model.get("index"), st = model.get("states")[i], amax = Number(amaxes[i]);
    slider.value = String(i);
    value.textContent = amaxes[i];
    plot.setAttribute("data-amax", amaxes[i]);
    const xa = X(amax);
    amaxLine.setAttribute("x1", String(xa));
    amaxLine.setAttribute("x2", String(xa));
    rows.replaceChildren(...st.map((r, j) => {
      const y = M.top + j * RH, scale = 2 ** r.k, xs = X(Number(r.sat)), xf = X(Number(r.flush));
      const gridPath = grid.map((v) => `M${X(v * scale)},${y + 6}v${RH - 14}`).join("");
      return svg("g", { class: `ampkit-fp4-row ampkit-fp4-row-${r.rule}`, "data-k": r.k,
                        "data-saturates": String(r.saturates) },
        svg("text", { x: left - 8, y: y + RH / 2 + 4, "text-anchor": "end", "font-size": 12 }, labels[r.rule]),
        svg("rect", { class: "ampkit-fp4-flushed", x: left, y: y + 4, width: xf - left, height: RH - 10,
                      fill: band.flushed, "fill-opacity": 0.5 }),
        svg("rect", { class: "ampkit-fp4-saturated", x: xs, y: y + 4, width: W - M.right - xs, height: RH - 10,
                      fill: band.overflow, "fill-opacity": 0.35 }),
        svg("path", { class: "ampkit-fp4-grid", d: gridPath, stroke: band.normal, "stroke-width": 2 }),
        svg("circle", { class: "ampkit-fp4-amax-dot", cx: xa, cy: y + RH / 2 - 1, r: 5,
                        fill: r.saturates ? band.overflow : look.colours.status.good }));
    }));
    readout.replaceChildren(h("b", {}, fillText(text.head, { amax: amaxes[i] })),
      h("table", {}, h("tr", {}, ...text.columns.map((c) => h("th", {}, c))),
        ...st.map((r) => h("tr", { class: `ampkit-fp4-rule-${r.rule}` }, h("td", {}, labels[r.rule]),
          h("td", {}, `2^${r.k}`), h("td", {}, r.largest), h("td", {}, r.sat), h("td", {}, r.flush),
          h("td", { style: { color: r.saturates ? band.overflow : look.colours.status.good } },
            r.saturates ? text.saturates : text.kept)))));
  }

  slider.addEventListener("input", () => {
    model.set("index", Number(slider.value));
    saveChanges(model);
    draw();
  });
  const unlisten = onChanges(model, ["index"], draw);
  draw();
  return unlisten;
}

export default { render };
