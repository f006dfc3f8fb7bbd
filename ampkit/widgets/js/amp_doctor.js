// @ts-check
// Notebook 05's AmpDoctor drawn in the browser (ampkit/widgets/amp_doctor.py): a scenario picker, the broken run or
// the run with the fix, the diagnosis and its evidence. Nothing is computed here: the engine ran the scenarios
// (ampkit.lessons.amp_in_practice.run_scenario, diagnosed by ampkit.diagnose) and sent each report as data (model
// "reports": the diagnosis and the fix as the engine printed them, the headroom per layer in bits with its printed
// value and status, log2 of the loss scale and the loss per step); the page SELECTS a report and draws it. "Run it
// again" asks the kernel for a new run; without a kernel the page says so. Every word comes from the model's "text".

const W = 760;
const INK = "#24292f";

/** The report of the controls' selection, or undefined when the engine has not run it. */
export function reportOf(model, scenario, fixed) {
  const entry = model.get("scenarios").find((s) => s.name === scenario);
  const key = `${scenario}|${fixed && entry && entry.fixable ? 1 : 0}`;
  return { key, report: model.get("reports")[key] };
}

function tickText(v) {
  return String(Number(v.toPrecision(4)));
}

/** A losses entry as numbers (the engine sends NaN and ±inf as Python's repr). */
function asNumber(v) {
  return typeof v === "number" ? v : v === "inf" ? Infinity : v === "-inf" ? -Infinity : NaN;
}

/** Axes frame: the two lines, the labels with units, the title and a legend row ([colour, kind, label]). */
function frame(H, M, title, xlabel, ylabel, legend) {
  const yAxis = H - M.bottom;
  const g = svg("g", { "font-size": 13, fill: INK });
  g.append(svg("line", { x1: M.left, x2: W - M.right, y1: yAxis, y2: yAxis, stroke: INK }),
           svg("line", { x1: M.left, x2: M.left, y1: M.top, y2: yAxis, stroke: INK }),
           svg("text", { x: W / 2, y: 20, "text-anchor": "middle", "font-size": 15, "font-weight": "bold",
                         class: "ampkit-doctor-title" }, title),
           svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle" }, xlabel),
           svg("text", { x: 15, y: (M.top + yAxis) / 2, "text-anchor": "middle",
                         transform: `rotate(-90 15 ${(M.top + yAxis) / 2})` }, ylabel));
  let lx = M.left;
  for (const [colour, kind, label] of legend) {
    if (kind === "x") g.append(cross(lx + 7, 36, colour));
    else if (kind === "line") g.append(svg("line", { x1: lx, x2: lx + 14, y1: 36, y2: 36, stroke: colour, "stroke-width": 2 }));
    else g.append(svg("rect", { x: lx, y: 30, width: 14, height: 12, fill: colour,
                                "fill-opacity": kind === "hatch" ? 0.35 : 1, stroke: colour }));
    g.append(svg("text", { x: lx + 19, y: 41, "font-size": 12 }, label));
    lx += 36 + labelWidth(label, 6.4);
  }
  return g;
}

function cross(x, y, colour, attrs = {}) {
  return svg("path", { d: `M${x - 5},${y - 5}L${x + 5},${y + 5}M${x - 5},${y + 5}L${x + 5},${y - 5}`,
                       stroke: colour, "stroke-width": 2.5, ...attrs });
}

function chart(cls, H, ...kids) {
  return svg("svg", { class: `ampkit-doctor-chart ${cls}`, viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                      "font-family": "sans-serif" }, ...kids);
}

/** Headroom per module in bits: a bar per module in the format's colour; an overflow (or NaN) drawn to the top,
 * hatched in the overflow colour with its value written on it; an all-zero output outlined. */
function headroomChart(ev, title, text, look) {
  const H = 390, M = { left: 66, right: 16, top: 58, bottom: 82 }, yAxis = H - M.bottom;
  const colour = look.colours.dtype[ev.dtype] || look.colours.status.neutral;
  const over = look.colours.band.overflow;
  const finite = ev.bars.filter((b) => b[4] === "ok").map((b) => b[2]);
  const top = Math.max(1, ...finite) * 1.3;
  const Y = (v) => yAxis - (v / top) * (yAxis - M.top);
  const slot = (W - M.left - M.right) / ev.bars.length, width = Math.min(70, slot * 0.55);
  const hatch = `ampkit-doctor-hatch-${Math.random().toString(36).slice(2)}`;
  const g = svg("g", {});
  g.append(svg("defs", {}, svg("pattern", { id: hatch, width: 8, height: 8, patternUnits: "userSpaceOnUse",
                                             patternTransform: "rotate(45)" },
                               svg("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: over, "stroke-width": 3 }))));
  const step = tickStep(top, 7, [1, 2, 2.5, 5]);
  for (let v = 0; v <= top + 1e-9; v += step) {
    g.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(v), y2: Y(v), stroke: INK }),
             svg("text", { x: M.left - 7, y: Y(v) + 4, "text-anchor": "end", "font-size": 12 }, tickText(v)));
  }
  ev.bars.forEach(([name, kind, bits, printed, status], i) => {
    const x = M.left + slot * (i + 0.5);
    const attrs = { class: "ampkit-doctor-bar", "data-module": name, "data-status": status, x: x - width / 2, width };
    const label = { class: "ampkit-doctor-bar-label", "data-module": name, "text-anchor": "middle",
                    "font-size": 13, x };
    if (status === "ok") {
      g.append(svg("rect", { ...attrs, y: Y(bits), height: yAxis - Y(bits), fill: colour, stroke: INK,
                             "stroke-width": 0.5 }),
               svg("text", { ...label, y: Y(bits) - 5 }, fillText(text.bits, { value: printed })));
    } else if (status === "zero") {
      g.append(svg("rect", { ...attrs, y: M.top, height: yAxis - M.top, fill: "none", stroke: colour,
                             "stroke-dasharray": "3 3", "stroke-width": 1.5 }),
               svg("text", { ...label, y: (M.top + yAxis) / 2, fill: look.colours.status.neutral }, text.zero));
    } else {
      const words = status === "nan" ? [text.nan] : [text.overflow, fillText(text.bits, { value: printed })];
      g.append(svg("rect", { ...attrs, y: M.top, height: yAxis - M.top, fill: `url(#${hatch})`, stroke: colour,
                             "stroke-width": 1.5 }),
               svg("rect", { x: x - width / 2, width, y: M.top, height: yAxis - M.top, fill: over,
                             "fill-opacity": 0.25, "pointer-events": "none" }),
               svg("text", { ...label, y: (M.top + yAxis) / 2, fill: over, "font-weight": "bold" },
                   ...words.map((w, k) => svg("tspan", { x, dy: k ? 17 : 0, fill: over, stroke: "#ffffff",
                                                         "stroke-width": 3, "paint-order": "stroke" }, w))));
    }
    g.append(svg("text", { x, y: yAxis + 18, "text-anchor": "middle", class: "ampkit-doctor-tick" }, name),
             svg("text", { x, y: yAxis + 34, "text-anchor": "middle", "font-size": 11,
                           fill: look.colours.status.neutral }, kind));
  });
  const legend = [[colour, "rect", fillText(text.headroom_legend, { dtype: ev.dtype })],
                  [over, "hatch", text.overflow_legend]];
  return chart("ampkit-doctor-headroom", H, frame(H, M, title, text.headroom_x, text.headroom_y, legend), g);
}

/** Points per training step on a frame: x at the step's centre; ticks every step up to 20. */
function stepAxis(g, n, M, yAxis) {
  const X = (i) => M.left + ((i + 0.5) / n) * (W - M.left - M.right);
  const every = Math.max(1, Math.ceil(n / 20));
  for (let i = 0; i < n; i += every) {
    g.append(svg("line", { x1: X(i), x2: X(i), y1: yAxis, y2: yAxis + 4, stroke: INK }),
             svg("text", { x: X(i), y: yAxis + 18, "text-anchor": "middle", "font-size": 12 }, String(i)));
  }
  return X;
}

/** log2 of the loss scale per step; a skipped step marked ✕ in the "bad" status colour. */
function scaleChart(ev, title, text, look) {
  const H = 300, M = { left: 80, right: 16, top: 58, bottom: 50 }, yAxis = H - M.bottom;   // steps under the loss's
  const ks = ev.log2.filter((k) => k !== null);
  const lo = Math.floor(Math.min(...ks)) - 1, hi = Math.ceil(Math.max(...ks)) + 1;
  const Y = (k) => yAxis - ((k - lo) / (hi - lo)) * (yAxis - M.top);
  const g = svg("g", {});
  const X = stepAxis(g, ev.log2.length, M, yAxis);
  const step = Math.max(1, Math.ceil((hi - lo) / 8));
  for (let k = Math.ceil(lo / step) * step; k <= hi; k += step) {
    g.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(k), y2: Y(k), stroke: INK }),
             svg("text", { x: M.left - 7, y: Y(k) + 4, "text-anchor": "end", "font-size": 12 }, String(k)));
  }
  const line = look.colours.status.neutral, bad = look.colours.status.bad;
  let d = "";
  ev.log2.forEach((k, i) => { if (k !== null) d += `${d ? "L" : "M"}${X(i)},${Y(k)}`; });
  g.append(svg("path", { d, fill: "none", stroke: line, "stroke-width": 2 }));
  ev.log2.forEach((k, i) => {
    if (k === null) return;
    g.append(svg("circle", { class: "ampkit-doctor-scale", "data-step": i, "data-log2": k, cx: X(i), cy: Y(k), r: 4,
                             fill: line }));
    if (ev.skipped[i] === "1") g.append(cross(X(i), Y(k) - 14, bad, { class: "ampkit-doctor-skip", "data-step": i }));
  });
  const legend = [[line, "line", text.scale_legend], [bad, "x", text.skipped]];
  return chart("ampkit-doctor-scales", H, frame(H, M, title, text.step, text.scale_y, legend), g);
}

/** The loss per step; a NaN or inf loss marked at the top in the overflow colour. */
function lossChart(losses, title, text, look) {
  const H = 260, M = { left: 80, right: 16, top: 58, bottom: 50 }, yAxis = H - M.bottom;
  const values = losses.map(asNumber);
  const finite = values.filter(Number.isFinite);
  const lo = Math.min(0, ...finite), hi = finite.length ? Math.max(...finite) * 1.15 || 1 : 1;
  const Y = (v) => yAxis - ((v - lo) / (hi - lo)) * (yAxis - M.top - 14);
  const g = svg("g", {});
  const X = stepAxis(g, values.length, M, yAxis);
  const step = tickStep(hi - lo, 5, [1, 2, 2.5, 5]);
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) {
    g.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(v), y2: Y(v), stroke: INK }),
             svg("text", { x: M.left - 7, y: Y(v) + 4, "text-anchor": "end", "font-size": 12 }, tickText(v)));
  }
  const line = look.colours.status.neutral, over = look.colours.band.overflow;
  let d = "", pen = "M";                 // the line breaks at a NaN
  values.forEach((v, i) => {
    if (Number.isFinite(v)) { d += `${pen}${X(i)},${Y(v)}`; pen = "L"; } else pen = "M";
  });
  g.append(svg("path", { d, fill: "none", stroke: line, "stroke-width": 1.5 }));
  values.forEach((v, i) => {
    if (Number.isFinite(v)) {
      g.append(svg("circle", { class: "ampkit-doctor-loss", "data-step": i, cx: X(i), cy: Y(v), r: 4, fill: line }));
    } else {
      g.append(cross(X(i), M.top + 2, over, { class: "ampkit-doctor-loss-nan", "data-step": i,
                                              "data-value": losses[i] }),
               svg("text", { x: X(i), y: M.top + 20, "text-anchor": "middle", "font-size": 11, fill: over },
                   Number.isNaN(v) ? text.nan : String(losses[i])));
    }
  });
  const legend = [[line, "line", text.loss_legend], [over, "x", text.nan_legend]];
  return chart("ampkit-doctor-losses", H, frame(H, M, title, text.step, text.loss_y, legend), g);
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const status = look.colours.status;
  const shown = (name) => (text.names && text.names[name]) || name;   // a scenario's name as the page shows it
  applyLook(el, look);
  const picker = h("select", { class: "ampkit-doctor-picker", "aria-label": text.scenario },
                   ...model.get("scenarios").map((s) => h("option", { value: s.name }, shown(s.name))));
  const runs = [[false, text.broken_run], [true, text.fixed_run]].map(([fixed, label]) =>
    h("button", { type: "button", class: "ampkit-doctor-show", "data-fixed": fixed ? "1" : "0" }, label));
  const again = h("button", { type: "button", class: "ampkit-doctor-rerun", title: text.rerun_title }, text.rerun);
  const line = h("div", { class: "ampkit-doctor-status", "aria-live": "polite",
                          style: { color: status.neutral, minHeight: "1.3em" } });
  const report = h("div", { class: "ampkit-doctor-report", "aria-live": "polite" });
  const evidence = h("div", { class: "ampkit-doctor-evidence" });
  const root = h("div", { class: "ampkit-doctor" },
                 h("div", { class: "ampkit-control", style: { flexWrap: "wrap" } },
                   h("label", { class: "ampkit-control" }, h("span", {}, text.scenario), picker),
                   h("span", { role: "group", "aria-label": text.scenario, style: { display: "inline-flex", gap: "0.3em" } },
                     ...runs),
                   again),
                 line, report, evidence);
  el.append(root);
  // Whether this view's Python object is behind the page: kit.js kernelPresence (until its "here" comes, a new run
  // is not asked for but explained).
  const kernel = kernelPresence(model, () => {
    root.dataset.kernel = "yes";
    if (missing) draw();
  });
  let pending = null;      // the "Run it again" the kernel has not answered yet
  let asked = Math.max(model.get("rerun").n || 0, model.get("last_run").n || 0);
  let missing = false;     // the line says why the selected report is not drawn

  function say(answer, words, forMissing) {
    line.textContent = words;
    line.dataset.answer = answer;
    missing = forMissing;
  }

  function draw() {
    const scenario = model.get("scenario"), fixed = model.get("fixed");
    const fixable = model.get("scenarios").find((s) => s.name === scenario)?.fixable;
    picker.value = scenario;
    for (const b of runs) {
      const on = (b.dataset.fixed === "1") === (fixed && !!fixable);
      markPressed(b, on);
      if (b.dataset.fixed === "1") {
        b.disabled = !fixable;
        b.title = fixable ? "" : text.no_fix;
      }
    }
    const { key, report: r } = reportOf(model, scenario, fixed);
    root.dataset.state = key;
    if (!r) {
      root.dataset.drawn = "";
      say(kernel.here ? "computing" : "no-kernel", kernel.here ? text.computing : text.no_kernel, true);
      report.replaceChildren();
      evidence.replaceChildren();
      return;
    }
    if (missing) say("", "", false);
    const verdict = fillText(text.named || "{name}: {detail}",
                             { name: shown(r.scenario), detail: `${r.healthy ? text.healthy : text.broken}${r.fixed ? text.applied : ""}` });
    report.replaceChildren(
      h("b", { class: "ampkit-doctor-verdict", style: { color: r.healthy ? status.good : status.bad } }, verdict),
      h("br"),
      h("span", { class: "ampkit-doctor-diagnosis" }, h("b", {}, text.diagnosis), " ", r.diagnosis), h("br"),
      h("span", { class: "ampkit-doctor-fix" }, h("b", {}, text.fix), " ", r.fix));
    const state = r.fixed ? text.with_fix : text.as_reported;
    const ev = r.evidence, fields = { scenario: shown(r.scenario), state };
    if (ev.kind === "headroom") {
      evidence.replaceChildren(headroomChart(ev, fillText(text.headroom_title, { ...fields, dtype: ev.dtype }), text, look));
    } else if (ev.kind === "scales") {
      evidence.replaceChildren(scaleChart(ev, fillText(text.scale_title, fields), text, look),
                               lossChart(ev.losses, fillText(text.loss_title, fields), text, look));
    } else {
      evidence.replaceChildren(lossChart(ev.losses, fillText(text.loss_title, fields), text, look));
    }
    root.dataset.drawn = key;
  }

  function select(scenario, fixed) {
    const fixable = model.get("scenarios").find((s) => s.name === scenario)?.fixable;
    say("", "", false);
    pending = null;
    model.set("fixed", !!(fixed && fixable));
    model.set("scenario", scenario);
    saveChanges(model);
    draw();
  }

  picker.addEventListener("change", () => select(picker.value, model.get("fixed")));
  for (const b of runs) b.addEventListener("click", () => select(model.get("scenario"), b.dataset.fixed === "1"));
  again.addEventListener("click", () => {
    asked += 1;
    model.set("rerun", { n: asked, scenario: model.get("scenario"), fixed: model.get("fixed") });
    pending = saveChanges(model) ? asked : null;        // a late answer still shows
    say(kernel.here && pending ? "asked" : "no-kernel", kernel.here && pending ? text.computing : text.no_kernel, false);
  });
  const answered = () => {
    const last = model.get("last_run");
    if (pending !== null && last.n === pending) {
      pending = null;
      say(last.same ? "same" : "changed", last.same ? text.same : text.changed, false);
    }
    draw();
  };
  const names = ["change:scenario", "change:fixed", "change:reports"];
  for (const n of names) model.on(n, draw);
  model.on("change:last_run", answered);
  draw();
  return () => {
    kernel.stop();
    for (const n of names) model.off(n, draw);
    model.off("change:last_run", answered);
  };
}

export default { render };
