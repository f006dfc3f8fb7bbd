// @ts-check
// Notebook 06's AmaxHistoryExplorer drawn in the browser (ampkit/widgets/fp8.py): delayed scaling over a recorded
// run's amax series. Nothing is computed here: the engine ran every setting the controls reach when the view started
// (model "states", fp8.explorer_sweep: per tensor and margin the distinct values of log2(fp8_max / scale), per
// setting which of them each step casts with, its saturating steps and the readout's numbers as the engine prints
// them) and the page SELECTS the setting's entry. Every word comes from the model's "text" (the kit's language).

const W = 750, H = 452, BOX = { x0: 70, x1: 736, y0: 40, y1: 330 };

/** The list fp8.run_code encoded: "v" one value, "v*n" n copies of v, "v+n" the n values v, v+1, ... */
export function runDecode(code) {
  const out = [];
  for (const word of code.split(" ")) {
    if (word === "") continue;
    const star = word.indexOf("*"), plus = word.indexOf("+");
    if (star > 0) {
      const v = Number(word.slice(0, star));
      for (let i = Number(word.slice(star + 1)); i > 0; i--) out.push(v);
    } else if (plus > 0) {
      const v = Number(word.slice(0, plus)), n = Number(word.slice(plus + 1));
      for (let i = 0; i < n; i++) out.push(v + i);
    } else out.push(Number(word));
  }
  return out;
}

/** The engine's entry for a setting: per step log2 of the largest value the delayed scale keeps (fp8_max / scale)
 * and just-in-time's, the saturating steps and the readout's numbers as printed (strings). */
export function selected(states, tensor, history, algo, margin) {
  const t = states.tensors[tensor];
  const kept = t.kept[margin].split(" ").map(Number);
  const series = (id) => runDecode(t.series[id]).map((i) => kept[i]);
  const sid = runDecode(t.pick[margin][algo])[history - 1];
  const [jitId, jitN, jitFlushed] = t.jit[margin].split("|");
  const [list, n, worst, worstPct, flushed] = t.readout[margin].split(";")[sid].split("|");
  const steps = states.sat_lists[Number(list)];
  return { kept: series(sid), jit: series(Number(jitId)), sat: steps === "" ? [] : steps.split(",").map(Number),
           n, worst, worstPct, flushed, jitN, jitFlushed };
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text"), states = model.get("states");
  const { dtype, status } = look.colours;
  applyLook(el, look);
  const steps = states.steps, margins = model.get("margins"), algos = model.get("algos");
  const tensors = Object.keys(states.tensors);
  const X = (t) => BOX.x0 + ((t + 0.5) / steps) * (BOX.x1 - BOX.x0);

  const group = (name, values, trait) => {
    const buttons = values.map((v) => h("button", { type: "button", class: `ampkit-amax-${name}`, "data-value": v }, v));
    buttons.forEach((b) => b.addEventListener("click", () => set(trait, b.dataset.value)));
    return [buttons, h("div", { class: "ampkit-control", role: "group", "aria-label": text[name] },
                       h("span", {}, text[name]), ...buttons)];
  };
  const [tensorB, tensorRow] = group("tensor", tensors, "amax_tensor");
  const [algoB, algoRow] = group("algo", algos, "amax_algo");
  const range = (name, lo, hi) => h("input", { type: "range", min: lo, max: hi, step: 1,
                                              class: `ampkit-range ampkit-amax-${name}`, "aria-label": text[name] });
  const historyIn = range("history", 1, steps), marginIn = range("margin", margins[0], margins[margins.length - 1]);
  const historyOut = h("output", { class: "ampkit-amax-history-value" });
  const marginOut = h("output", { class: "ampkit-amax-margin-value" });
  historyIn.addEventListener("input", () => set("history_len", Number(historyIn.value)));
  marginIn.addEventListener("input", () => set("scale_margin", Number(marginIn.value)));
  const readout = h("div", { class: "ampkit-amax-readout", "aria-live": "polite" });

  // the drawing: axes (drawn per tensor), the bands of the saturating steps, the lines, the marks, the legend
  const axes = svg("g", { class: "ampkit-amax-axes", "font-size": 13, fill: "#24292f" });
  const bands = svg("g", { class: "ampkit-amax-bands" });
  const amaxLine = svg("path", { class: "ampkit-amax-amax", fill: "none", stroke: "#24292f", "stroke-width": 1.5 });
  const amaxDots = svg("g", { class: "ampkit-amax-dots", fill: "#24292f" });
  const keptLine = svg("path", { class: "ampkit-amax-kept", fill: "none", "stroke-width": 2.5 });
  const jitLine = svg("path", { class: "ampkit-amax-jit", fill: "none", stroke: status.neutral, "stroke-width": 1.5,
                               "stroke-dasharray": "5 4" });
  const marks = svg("g", { class: "ampkit-amax-marks", fill: "none", stroke: status.bad, "stroke-width": 2.5 });
  const worstLabel = svg("text", { class: "ampkit-amax-worst", "font-size": 13, fill: status.bad, stroke: "#ffffff",
                                  "stroke-width": 4, "paint-order": "stroke" });
  const title = svg("text", { class: "ampkit-amax-title", x: (BOX.x0 + BOX.x1) / 2, y: 20, "text-anchor": "middle",
                             "font-size": 14 });
  const legend = svg("g", { class: "ampkit-amax-legend", "font-size": 12.5, fill: "#24292f" });
  const plot = svg("svg", { class: "ampkit-amax-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                           "font-family": "sans-serif", "data-x0": BOX.x0, "data-x1": BOX.x1, "data-y0": BOX.y0,
                           "data-y1": BOX.y1 },
                   title, bands, axes, jitLine, keptLine, amaxLine, amaxDots, marks, worstLabel, legend);

  el.append(h("div", { class: "ampkit-amax" }, h("div", { class: "ampkit-control" }, tensorRow, algoRow),
              h("label", { class: "ampkit-control" }, h("span", {}, text.history), historyIn, historyOut),
              h("label", { class: "ampkit-control" }, h("span", {}, text.margin), marginIn, marginOut),
              readout, plot));

  let shownTensor = null, Y = null, amax = [];
  const yOf = (l) => (Number.isFinite(l) ? Y(l) : l === -Infinity ? BOX.y1 : BOX.y0);   // 0 below, inf / NaN above

  function drawTensor(name) {         // the axes, the amax series, the title and the legend of a tensor
    const t = states.tensors[name];
    const [lo, hi] = t.ylim;
    Y = (l) => BOX.y1 - ((l - lo) / (hi - lo)) * (BOX.y1 - BOX.y0);
    plot.setAttribute("data-lo", lo);
    plot.setAttribute("data-hi", hi);
    axes.replaceChildren(
      svg("rect", { x: BOX.x0, y: BOX.y0, width: BOX.x1 - BOX.x0, height: BOX.y1 - BOX.y0, fill: "none",
                   stroke: "#24292f" }));
    const every = Math.ceil((hi - lo) / 14);
    for (let k = lo; k <= hi; k += every) {
      axes.append(svg("line", { x1: BOX.x0, x2: BOX.x1, y1: Y(k), y2: Y(k), stroke: "#d0d7de", "stroke-width": 0.8 }),
                  svg("line", { x1: BOX.x0 - 4, x2: BOX.x0, y1: Y(k), y2: Y(k), stroke: "#24292f" }),
                  svg("text", { x: BOX.x0 - 7, y: Y(k) + 5, "text-anchor": "end" },
                      "2", svg("tspan", { dy: -6, "font-size": 10 }, String(k))));
    }
    const tick = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000].find((k) => steps / k <= 8) ?? Math.ceil(steps / 8);
    for (let s = 0; s < steps; s += tick) {
      axes.append(svg("line", { x1: X(s), x2: X(s), y1: BOX.y1, y2: BOX.y1 + 4, stroke: "#24292f" }),
                  svg("text", { x: X(s), y: BOX.y1 + 18, "text-anchor": "middle" }, String(s)));
    }
    const yMid = (BOX.y0 + BOX.y1) / 2;
    axes.append(svg("text", { x: (BOX.x0 + BOX.x1) / 2, y: BOX.y1 + 36, "text-anchor": "middle" }, text.xlabel),
                svg("text", { x: 18, y: yMid, "text-anchor": "middle", transform: `rotate(-90 18 ${yMid})` },
                    text.ylabel));
    amax = t.amax.split(" ").map((w) => (w === "inf" ? Infinity : w === "-inf" ? -Infinity : Number(w)));
    // the line joins the steps with a finite amax; an amax of 0 is marked "0" on the bottom edge, inf and NaN on top
    amaxLine.setAttribute("d", amax.map((l, s) => (Number.isFinite(l)
      ? `${s && Number.isFinite(amax[s - 1]) ? "L" : "M"}${X(s).toFixed(2)},${Y(l).toFixed(2)}` : "")).join(""));
    amaxDots.replaceChildren(...amax.map((l, s) => (Number.isFinite(l)
      ? svg("circle", { cx: X(s), cy: Y(l), r: 2.2, "data-step": s })
      : svg("text", { class: "ampkit-amax-odd", x: X(s), y: l === -Infinity ? BOX.y1 - 4 : BOX.y0 + 24,
                      "text-anchor": "middle", "font-size": 11, "data-step": s,
                      fill: l === -Infinity ? status.neutral : status.bad }, l === -Infinity ? "0" : pyRepr(l)))));
    keptLine.setAttribute("stroke", dtype[t.fmt]);
    title.textContent = fillText(text.title, { tensor: name, fmt: t.fmt });
    const items = [           // two columns: the delayed scale's lines on the left, the amax and the marks right
      [svg("line", { x1: 0, x2: 26, y1: 0, y2: 0, stroke: dtype[t.fmt], "stroke-width": 2.5 }),
       fillText(text.legend.kept, { fmt: t.fmt, max: t.fmt_max })],
      [svg("line", { x1: 0, x2: 26, y1: 0, y2: 0, stroke: "#24292f", "stroke-width": 1.5 }),
       svg("circle", { cx: 13, cy: 0, r: 2.5, fill: "#24292f" }), text.legend.amax],
      [svg("line", { x1: 0, x2: 26, y1: 0, y2: 0, stroke: status.neutral, "stroke-width": 1.5,
                    "stroke-dasharray": "5 4" }), fillText(text.legend.jit, { fmt: t.fmt })],
      [svg("rect", { x: 7, y: -8, width: 12, height: 16, fill: status.bad, opacity: 0.15 }),
       svg("circle", { cx: 13, cy: 0, r: 6, fill: "none", stroke: status.bad, "stroke-width": 2.5 }), text.legend.sat]];
    legend.replaceChildren(...items.map((item, i) => {
      const words = item.pop();
      return svg("g", { transform: `translate(${BOX.x0 - 40 + (i % 2) * 450},${BOX.y1 + 64 + Math.floor(i / 2) * 24})` },
                 ...item, svg("text", { x: 34, y: 5 }, words));
    }));
    shownTensor = name;
  }

  /** The delayed scale's line: one horizontal segment per step (its whole width), joined by vertical ones. */
  const path = (ls) => {
    const half = (X(1) - X(0)) / 2, f = (v) => v.toFixed(2);
    return ls.map((l, s) => (s ? `V${f(Y(l))}H${f(X(s) + half)}` : `M${f(X(0) - half)},${f(Y(l))}H${f(X(0) + half)}`))
      .join("");
  };

  function draw() {
    const name = model.get("amax_tensor"), history = model.get("history_len"), algo = model.get("amax_algo");
    const margin = model.get("scale_margin");
    if (name !== shownTensor) drawTensor(name);
    const t = states.tensors[name];
    const s = selected(states, name, history, algo, margin);
    historyIn.value = String(history);
    historyOut.value = String(history);
    marginIn.value = String(margin);
    marginOut.value = String(margin);
    for (const [buttons, value] of [[tensorB, name], [algoB, algo]]) {
      for (const b of buttons) {
        const on = b.dataset.value === value;
        markPressed(b, on);
      }
    }
    keptLine.setAttribute("d", path(s.kept));
    jitLine.setAttribute("d", s.jit.map((l, i) => `${i ? "L" : "M"}${X(i).toFixed(2)},${Y(l).toFixed(2)}`).join(""));
    const w = X(1) - X(0);
    bands.replaceChildren(...s.sat.map((i) => svg("rect", { class: "ampkit-amax-band", "data-step": i, x: X(i) - w / 2,
                                                          y: BOX.y0, width: w, height: BOX.y1 - BOX.y0,
                                                          fill: status.bad, opacity: 0.15 })));
    marks.replaceChildren(...s.sat.map((i) => svg("circle", { class: "ampkit-amax-sat", "data-step": i, cx: X(i),
                                                            cy: yOf(amax[i]), r: 6 })));
    if (s.sat.length) {
      const i = Number(s.worst), x = Math.min(Math.max(X(i), BOX.x0 + 90), BOX.x1 - 90);
      worstLabel.setAttribute("x", x);
      const y = yOf(amax[i]);                                   // above the ring, or below it at the top
      worstLabel.setAttribute("y", y - 12 >= BOX.y0 + 28 ? y - 12 : y + 44);
      worstLabel.setAttribute("text-anchor", "middle");
      worstLabel.textContent = fillText(text.worst_mark, { step: s.worst, pct: s.worstPct });
    } else worstLabel.textContent = "";

    const [before, after] = text.flushed.split("{worst}");
    const worst = s.sat.length ? fillMarkup(text.worst, { step: s.worst, pct: s.worstPct }) : [text.none];
    readout.replaceChildren(
      ...fillMarkup(text.head, { tensor: name, fmt: t.fmt, history, algo, margin }), " ",
      h("span", { class: "ampkit-amax-saturated", style: { color: Number(s.n) ? status.bad : status.good } },
        fillText(text.saturated, { n: s.n, total: steps })), " ",
      ...fillMarkup(before, {}), ...worst, ...fillMarkup(after, {}), " ",
      h("span", { class: "ampkit-amax-flushed" }, s.flushed), ".", h("br"),
      ...fillMarkup(text.jit, { n: s.jitN, pct: s.jitFlushed }));
    plot.setAttribute("data-state", `${name},${history},${algo},${margin}`);
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  const unlisten = onChanges(model, ["history_len", "scale_margin", "amax_algo", "amax_tensor"], draw);
  draw();
  return unlisten;
}

export default { render };
