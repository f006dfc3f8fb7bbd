// @ts-check
// Notebook 04's SinkTimeline drawn in the browser (ampkit/widgets/sink_timeline.py): a sink mode and the costs of a
// training step -> the simulated timeline (Gantt lanes loader, host, device) with its step time, steps/s, device
// utilisation, syncs per step and speed-up, and a "measure" button that calibrates the costs on the kernel's machine.
//
// A PORT of engine rules (docs/architecture.md, "Ports"): the sliders reach ~5e12 settings (4 modes × 32 sink sizes
// × 401 × 301 × 400 × 401 positions × 2) and "measure" sends costs no one can list beforehand, so the engine cannot
// send every timeline. This module therefore copies ampkit.timeline's simulate, gantt_bars and summarise (and
// SinkTimeline.params, sinking.summary_html's numbers) line by line, from the costs the engine sent (model
// "base_costs": the costs no slider moves; the sliders' traits). Each copy is marked "// port of" here and "# port:"
// on its Python original: change both together. tests/browser/test_front_sink_arith_browser.py holds every bar and
// every printed number equal to the engine's on random settings. Python's number formats (pyFixed, pyG) are kit.js's.
// Every word comes from the model's "text" (the kit's language).

export const LANE_NAMES = ["loader", "host", "device"];
export const SINK_MODE_NAMES = ["none", "data", "data+graph", "data+graph+loop"];

// port of ampkit/widgets/sink_timeline.py SinkTimeline.params (tests/browser/test_front_sink_arith_browser.py)
/** The SimParams of a setting (ampkit.widgets.sink_timeline.SinkTimeline.params): slider values in µs, base in s. */
export function paramsOf(c, base) {
  const nOps = c.op_count, op = c.op_us * 1e-6;
  return { prep: c.prep_us * 1e-6, copy: base.copy, n_ops: nOps, launch: c.launch_us * 1e-6, op,
           sync: base.sync, callback: base.callback, handoff: base.handoff, graph_launch: base.graph_launch,
           graph_compute: base.fusion === null ? null : base.fusion * nOps * op, depth: base.depth,
           sink_size: c.sink_steps, async_device: c.device_async };
}

/** A lane's bars as they are recorded: kinds, starts and ends in three flat arrays (no object per event). Each
 * lane's events come in the order of their start (the simulator only moves each lane's clock forward: an event starts
 * where the lane's last one ended, or later), so gantt_bars' stable sort by start keeps that order, and its merge of
 * touching bars of one kind is done here, as they come. */
function newLane() {
  return { kind: [], start: [], end: [] };
}

function record(lane, kind, s, e) {
  const n = lane.kind.length;
  if (n && lane.kind[n - 1] === kind && s - lane.end[n - 1] <= 1e-12 * Math.max(1.0, e)) {
    lane.end[n - 1] = e;
  } else {
    lane.kind.push(kind); lane.start.push(s); lane.end.push(e);
  }
}

// port of ampkit/timeline.py simulate (tests/browser/test_front_sink_arith_browser.py)
/** ampkit.timeline.simulate(mode, p, steps): {lanes: {loader, host, device} (each merged as gantt_bars merges),
 * total, syncs, computeBusy (the device's compute time, summed in the engine's order)}; keep=false records no bars. */
export function simulate(mode, p, steps, keep = true) {
  const lanes = { loader: newLane(), host: newLane(), device: newLane() };
  let host = 0, dev = 0, syncs = 0, busy = 0;
  const add = (lane, kind, start, end) => {
    if (!(end > start)) return;
    if (lane === "device" && kind === "compute") busy += end - start;
    if (keep) record(lanes[lane], kind, start, end);
  };
  const hostWork = (kind, cost) => { add("host", kind, host, host + cost); host += cost; };
  const waitHostUntil = (t) => { if (t > host) { add("host", "wait", host, t); host = t; } };
  const H = lanes.host, D = lanes.device, wait = !p.async_device;
  const launch = (cost, compute) => {    // hostWork("launch"), then the device's compute (and a wait), inlined:
    const launched = host + cost;        // the inner loop of an eager step, run n_ops times a step
    if (keep && launched > host) record(H, "launch", host, launched);
    host = launched;
    const start = host > dev ? host : dev;
    const end = start + compute;
    if (end > start) { busy += end - start; if (keep) record(D, "compute", start, end); }
    dev = end;
    if (wait && dev > host) { if (keep) record(H, "wait", host, dev); host = dev; }
  };
  const dataSink = mode !== "none";
  const graph = mode === "data+graph" || mode === "data+graph+loop";
  const sink = mode === "data+graph+loop" ? p.sink_size : 1;
  const graphLaunch = p.graph_launch === null ? p.launch : p.graph_launch;
  const graphCompute = p.graph_compute === null ? p.n_ops * p.op : p.graph_compute;
  const take = [];
  let loader = 0;
  for (let k = 0; k < steps; k++) {
    if (dataSink) {
      add("loader", "prep", loader, loader + p.prep);
      add("loader", "copy", loader + p.prep, loader + p.prep + p.copy);
      const done = loader + p.prep + p.copy;
      const put = k < p.depth ? done : Math.max(done, take[k - p.depth]);
      if (put > done) add("loader", "wait", done, put);
      loader = put;
      waitHostUntil(done);
      take.push(host);
      hostWork("handoff", p.handoff);
    } else {
      hostWork("prep", p.prep);
      const start = Math.max(host, dev);
      waitHostUntil(start);
      add("host", "copy", start, start + p.copy);
      add("device", "copy", start, start + p.copy);
      host = dev = start + p.copy;
    }
    if (graph) launch(graphLaunch, graphCompute);
    else for (let i = 0; i < p.n_ops; i++) launch(p.launch, p.op);
    if ((k + 1) % sink === 0 || k === steps - 1) {
      waitHostUntil(dev);
      hostWork("sync", p.sync);
      syncs += 1;
      hostWork("callback", p.callback);
    }
  }
  return { mode, steps, lanes, total: host, syncs, computeBusy: busy };
}

/** The bar of bars i0 … i1 - 1 of a lane, labelled with the kind that fills most of it (the first such kind). */
function block(name, lane, i0, i1) {
  const byKind = new Map();
  for (let i = i0; i < i1; i++) byKind.set(lane.kind[i], (byKind.get(lane.kind[i]) ?? 0) + (lane.end[i] - lane.start[i]));
  let kind = null, most = -Infinity;
  for (const [k, t] of byKind) if (t > most) { kind = k; most = t; }
  return [name, kind, lane.start[i0], lane.end[i1 - 1]];
}

// port of ampkit/timeline.py gantt_bars (tests/browser/test_front_sink_arith_browser.py)
/** ampkit.timeline.gantt_bars(timeline, maxBars): [[lane, kind, start, end], ...], lane by lane (the touching bars
 * of one kind already merged by simulate; beyond maxBars, neighbours closer than total * 3 / maxBars merged into
 * blocks). */
export function ganttBars(tl, maxBars = 1500) {
  const count = LANE_NAMES.reduce((n, name) => n + tl.lanes[name].kind.length, 0);
  if (count <= maxBars) {
    return LANE_NAMES.flatMap((name) => {
      const l = tl.lanes[name];
      return l.kind.map((kind, i) => [name, kind, l.start[i], l.end[i]]);
    });
  }
  const res = ((tl.total || 1.0) * LANE_NAMES.length) / maxBars;
  const coarse = [];
  for (const name of LANE_NAMES) {
    const l = tl.lanes[name];
    let g0 = -1;                                   // the open block: bars g0 … i - 1
    for (let i = 0; i < l.kind.length; i++) {
      if (l.end[i] - l.start[i] >= res) {
        if (g0 >= 0) { coarse.push(block(name, l, g0, i)); g0 = -1; }
        coarse.push([name, l.kind[i], l.start[i], l.end[i]]);
        continue;
      }
      if (g0 >= 0 && (l.start[i] - l.end[i - 1] > res || l.end[i] - l.start[g0] > res)) {
        coarse.push(block(name, l, g0, i));
        g0 = -1;
      }
      if (g0 < 0) g0 = i;
    }
    if (g0 >= 0) coarse.push(block(name, l, g0, l.kind.length));
  }
  return coarse;
}

// port of ampkit/timeline.py summarise (tests/browser/test_front_sink_arith_browser.py)
/** ampkit.timeline.summarise(mode, p): the timeline, its bars and the summary's numbers. */
export function summarise(mode, p) {
  const steps = Math.max(8, 2 * p.sink_size);
  const tl = simulate(mode, p, steps);
  const base = mode === "none" ? tl : simulate("none", p, steps, false);
  return { tl, bars: ganttBars(tl), step_time: tl.total / steps,
           steps_per_s: tl.total === 0 ? Infinity : steps / tl.total,
           utilisation: tl.total === 0 ? 0 : tl.computeBusy / tl.total, syncs_per_step: tl.syncs / steps,
           speedup: tl.total > 0 ? base.total / tl.total : Infinity };
}

// port of ampkit/widgets/sinking.py summary_html (tests/browser/test_front_sink_arith_browser.py)
/** The readout's numbers as ampkit.widgets.sinking.summary_html prints them, and the chart's title fields. */
export function printed(mode, s) {
  return { step: `${pyFixed(s.step_time * 1e6, 1)} µs`, rate: pyFixed(s.steps_per_s, 0, true),
           util: `${pyFixed(s.utilisation * 100, 0)}%`, syncs: pyG(s.syncs_per_step, 3),
           speedup: `${pyFixed(s.speedup, 2)}x`,
           title: { mode, steps: s.tl.steps, step: pyFixed(s.step_time * 1e6, 1),
                    util: `${pyFixed(s.utilisation * 100, 0)}%` } };
}

/** Everything the page shows of a setting (controls: the traits; base: the engine's fixed costs). */
export function shownOf(c, base) {
  const p = paramsOf(c, base);
  const s = summarise(c.sink_mode, p);
  return { p, s, text: printed(c.sink_mode, s) };
}

const W = 860, LEFT = 78, RIGHT = 16, TOP = 34, ROW = 52, AXIS = TOP + 3 * ROW;
const H = AXIS + 100;
const CONTROLS = ["sink_mode", "sink_steps", "prep_us", "launch_us", "op_count", "op_us", "device_async"];

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const neutral = look.colours.status.neutral;
  applyLook(el, look);
  const kinds = model.get("kinds");                   // [[kind, colour], ...] in the engine's order
  const colourOf = Object.fromEntries(kinds);

  const modeButtons = model.get("modes").map((m) => h("button", { type: "button", class: "ampkit-sink-mode",
                                                                  "data-mode": m }, m));
  const sliders = model.get("sliders").map((s) => {
    const input = h("input", { type: "range", min: s.min, max: s.max, step: s.step, "data-trait": s.trait,
                               class: `ampkit-range ampkit-sink-${s.trait}`, "aria-label": text.sliders[s.trait] });
    const out = h("output", { class: `ampkit-sink-${s.trait}-value` });
    const label = h("label", { class: "ampkit-control" },
                    h("span", { style: { minWidth: "12em" } }, text.sliders[s.trait]), input, out);
    return { ...s, input, out, label };
  });
  const asyncBox = h("input", { type: "checkbox", class: "ampkit-sink-async" });
  const measure = h("button", { type: "button", class: "ampkit-sink-measure" }, text.measure);
  const status = h("div", { class: "ampkit-sink-status", "aria-live": "polite",
                            style: { color: neutral, minHeight: "1.3em" } });
  const readout = h("div", { class: "ampkit-sink-readout", "aria-live": "polite" });

  // the drawing: lanes with their names, the bars (redrawn), empty-lane notes, a time axis in µs, a legend
  const title = svg("text", { x: LEFT, y: 20, "font-size": 15, class: "ampkit-sink-title" });
  const frame = svg("g", { "font-size": 13, fill: "#24292f" });
  LANE_NAMES.forEach((lane, i) => frame.append(
    svg("text", { x: LEFT - 8, y: TOP + (i + 0.5) * ROW + 5, "text-anchor": "end" }, text.lanes[lane])));
  frame.append(svg("line", { x1: LEFT, x2: W - RIGHT, y1: AXIS, y2: AXIS, stroke: "#24292f" }),
               svg("line", { x1: LEFT, x2: LEFT, y1: TOP, y2: AXIS, stroke: "#24292f" }),
               svg("text", { x: (LEFT + W - RIGHT) / 2, y: AXIS + 38, "text-anchor": "middle" }, text.xlabel));
  const tickLayer = svg("g", { "font-size": 12, fill: "#24292f", class: "ampkit-sink-ticks" });
  const barLayer = svg("g", { class: "ampkit-sink-bars" });
  const rects = [];
  const notes = svg("g", { "font-size": 13, "font-style": "italic", fill: neutral, class: "ampkit-sink-notes" });
  const legend = svg("g", { "font-size": 12, fill: "#24292f", class: "ampkit-sink-legend" });
  kinds.forEach(([kind, colour], i) => {
    const x = LEFT + (i % 4) * 190, y = AXIS + 58 + Math.floor(i / 4) * 20;
    legend.append(svg("rect", { x, y: y - 11, width: 14, height: 14, fill: colour }),
                  svg("text", { x: x + 20, y }, text.kinds[kind]));
  });
  const plot = svg("svg", { class: "ampkit-sink-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                            "font-family": "sans-serif" }, title, frame, tickLayer, barLayer, notes, legend);

  el.append(h("div", { class: "ampkit-sink" },
              h("div", { class: "ampkit-control", role: "group", "aria-label": text.mode },
                h("span", { style: { minWidth: "12em" } }, text.mode), ...modeButtons),
              ...sliders.map((s) => s.label),
              h("div", { class: "ampkit-control" }, h("label", {}, asyncBox, " ", text.async), measure),
              status, readout, plot));

  const controls = () => Object.fromEntries(CONTROLS.map((n) => [n, model.get(n)]));

  function draw() {
    const c = controls();
    const { s, text: t } = shownOf(c, model.get("base_costs"));
    for (const b of modeButtons) {
      const on = b.dataset.mode === c.sink_mode;
      markPressed(b, on);
    }
    for (const sl of sliders) {
      const v = c[sl.trait];
      if (sl.log) { sl.input.value = String(Math.log10(v)); sl.out.value = pyG(v, 3); }
      else { sl.input.value = String(v); sl.out.value = String(v); }
    }
    asyncBox.checked = c.device_async;
    const cells = [["step", t.step], ["rate", t.rate], ["util", t.util], ["syncs", t.syncs], ["speedup", t.speedup]];
    readout.replaceChildren(h("table", { class: "ampkit-sink-summary" },
      h("tr", {}, ...text.header.map((w) => h("th", {}, w))),
      h("tr", {}, h("td", {}, h("code", {}, c.sink_mode)),
        ...cells.map(([k, v]) => h("td", { class: `ampkit-sink-${k}` }, v)))));
    title.textContent = fillText(text.title, t.title);
    const run = Math.max(s.tl.total / 1e-6, 1e-9), end = run * 1.01;   // the axis: 0 … 1.01 × the run, in µs
    const X = (us) => LEFT + (us / end) * (W - LEFT - RIGHT);
    const step = tickStep(end, 8), tickValues = ticks(0, end, 8);
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    tickLayer.replaceChildren(...tickValues.flatMap((v) => [
      svg("line", { x1: X(v), x2: X(v), y1: TOP, y2: AXIS + 4, stroke: "#d0d7de" }),
      svg("text", { x: X(v), y: AXIS + 18, "text-anchor": "middle" }, v.toFixed(digits))]));
    const laneY = Object.fromEntries(LANE_NAMES.map((lane, i) => [lane, TOP + (i + 0.15) * ROW]));
    while (rects.length < s.bars.length) {         // the bars' rects are kept and reused: a move sets attributes
      rects.push(svg("rect", { class: "ampkit-sink-bar", height: 0.7 * ROW }));
    }
    s.bars.forEach(([lane, kind, start, stop], i) => {
      const r = rects[i], x0 = X(start / 1e-6);
      r.setAttribute("data-lane", lane);
      r.setAttribute("data-kind", kind);
      r.setAttribute("data-t0", pyRepr(start));
      r.setAttribute("data-t1", pyRepr(stop));
      r.setAttribute("x", x0);
      r.setAttribute("width", X(stop / 1e-6) - x0);
      r.setAttribute("y", laneY[lane]);
      r.setAttribute("fill", colourOf[kind] ?? "#999999");
    });
    if (barLayer.childElementCount !== s.bars.length) barLayer.replaceChildren(...rects.slice(0, s.bars.length));
    const used = new Set(s.bars.map((b) => b[0]));
    notes.replaceChildren(...LANE_NAMES.filter((lane) => !used.has(lane) && text.empty[lane]).map((lane) => svg("text", {
      class: "ampkit-sink-empty", "data-lane": lane, x: X(0.01 * run), y: TOP + (LANE_NAMES.indexOf(lane) + 0.5) * ROW + 5,
    }, text.empty[lane])));
    plot.dataset.state = JSON.stringify(Object.fromEntries(CONTROLS.map((n) => [n, typeof c[n] === "number"
      ? pyRepr(c[n]) : c[n]])));
    plot.dataset.end = pyRepr(end);
    plot.dataset.base = JSON.stringify(Object.fromEntries(Object.entries(model.get("base_costs")).map(([k, v]) => [
      k, v === null ? null : pyRepr(v)])));
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  for (const b of modeButtons) b.addEventListener("click", () => set("sink_mode", b.dataset.mode));
  for (const sl of sliders) {
    sl.input.addEventListener("input", () => {
      const v = Number(sl.input.value);
      set(sl.trait, sl.log ? 10 ** v : Math.round(v));
    });
  }
  asyncBox.addEventListener("change", () => set("device_async", asyncBox.checked));
  // "measure" runs real steps on the kernel's machine: with a kernel behind the page (kit.js kernelPresence) the
  // button asks it, and it sends the measured costs and its words (status); without one the page says so in one line.
  const kernel = kernelPresence(model);
  measure.addEventListener("click", () => {
    if (!kernel.here) { status.textContent = text.no_kernel; return; }
    status.textContent = text.measuring;
    model.send({ event: "measure" });
  });
  const showStatus = () => { if (model.get("status")) status.textContent = model.get("status"); };
  const unlisten = onChanges(model, [...CONTROLS, "base_costs"], draw);
  model.on("change:status", showStatus);
  showStatus();
  draw();
  return () => {
    kernel.stop();
    unlisten();
    model.off("change:status", showStatus);
  };
}

export default { render };
