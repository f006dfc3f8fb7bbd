// @ts-check
// Notebook 02's OLevelPicker drawn in the browser (ampkit/widgets/precision.py): an O-level slider (O0 → O3) and a
// low-dtype toggle; for the selected run its loss curve against O0, its memory against O0, the summary and the
// per-layer dtype table. Nothing is computed here: the engine trained the runs and sent each as model "runs" (its
// losses as Python's repr, the first non-finite step, the table's rows, the memory per category, the lines as the
// engine prints them; "labels" names each (level, dtype) as the engine does) and the page SELECTS one. A run not
// trained yet is asked of the kernel (setting level/low trains it there; progress arrives as messages); without a
// kernel (kit.js kernelPresence: none answered the page's "hello") the page says so in one line. Step times arrive
// as messages only (never in the saved state).

const LW = 600, LH = 310, LM = { left: 64, right: 16, top: 34, bottom: 48 };
const MW = 430, MH = 310, MM = { left: 64, right: 10, top: 34, bottom: 76 };

/** A message to the kernel, if there is one (a saved page's model has no channel: nothing is sent). */
export function trySend(model, content) {
  try {
    model.send(content);
    return true;
  } catch (err) {
    return false;
  }
}

function axes(g, box, W, H, xTicks, yTicks, X, Y, xlabel, ylabel) {
  const yb = H - box.bottom;
  g.append(svg("line", { x1: box.left, x2: W - box.right, y1: yb, y2: yb, stroke: "#24292f" }),
           svg("line", { x1: box.left, x2: box.left, y1: box.top, y2: yb, stroke: "#24292f" }));
  for (const [v, label] of xTicks) {
    g.append(svg("line", { x1: X(v), x2: X(v), y1: yb, y2: yb + 4, stroke: "#24292f" }),
             svg("text", { x: X(v), y: yb + 17, "text-anchor": "middle" }, label));
  }
  for (const v of yTicks) {
    g.append(svg("line", { x1: box.left - 4, x2: box.left, y1: Y(v), y2: Y(v), stroke: "#24292f" }),
             svg("text", { x: box.left - 7, y: Y(v) + 4, "text-anchor": "end" }, String(v)));
  }
  const yMid = (box.top + yb) / 2;
  if (xlabel) g.append(svg("text", { x: (box.left + W - box.right) / 2, y: H - 8, "text-anchor": "middle" }, xlabel));
  g.append(svg("text", { x: 14, y: yMid, "text-anchor": "middle", transform: `rotate(-90 14 ${yMid})` }, ylabel));
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const { dtype: dcol, status } = look.colours;
  applyLook(el, look);
  const levels = model.get("levels"), dtypes = model.get("dtypes");
  let timings = {}, note = null, waiting = false;   // step times (kernel messages), the status line

  const range = h("input", { type: "range", min: 0, max: levels.length - 1, step: 1,
                             class: "ampkit-range ampkit-olevel-range", style: { width: "220px" },
                             "aria-label": text.level });
  const levelOut = h("output", { class: "ampkit-olevel-level", style: { fontWeight: "bold" } });
  const buttons = dtypes.map(([value, label]) => h("button", { type: "button", class: "ampkit-olevel-dtype",
                                                               "data-dtype": value }, label));
  const runAll = h("button", { type: "button", class: "ampkit-olevel-run-all", title: text.run_all_tip },
                   `▶ ${text.run_all}`);
  const bar = h("progress", { class: "ampkit-olevel-progress", max: 1, value: 0, style: { display: "none" } });
  const statusLine = h("span", { class: "ampkit-olevel-status", "aria-live": "polite" });
  const lossSvg = svg("svg", { class: "ampkit-olevel-loss", viewBox: `0 0 ${LW} ${LH}`, width: LW, height: LH,
                               role: "img", "font-family": "sans-serif", "font-size": 12 });
  const memSvg = svg("svg", { class: "ampkit-olevel-memory", viewBox: `0 0 ${MW} ${MH}`, width: MW, height: MH,
                              role: "img", "font-family": "sans-serif", "font-size": 12 });
  const summary = h("div", { class: "ampkit-precision-summary" });
  const table = h("div", { class: "ampkit-precision-table" });
  el.append(h("div", { class: "ampkit-olevel" },
              h("div", { class: "ampkit-control" }, h("span", {}, text.level), range, levelOut,
                h("span", { role: "group", "aria-label": text.low, class: "ampkit-control" },
                  h("span", {}, text.low), ...buttons)),
              h("div", { class: "ampkit-control" }, runAll, bar, statusLine),
              h("div", { style: { display: "flex", flexWrap: "wrap", gap: "8px" } }, lossSvg, memSvg),
              summary, table));

  function label() { return model.get("labels")[`${model.get("level")} ${model.get("low")}`]; }

  function drawLoss(run, ref) {
    const ys = parseLosses(run.losses), y0 = run.level === "O0" ? [] : parseLosses(ref.losses);
    const { xmax, top, X, Y } = lossScales([ys, y0], LW, LH, LM);
    const g = svg("g", { fill: "#24292f" });
    const xt = ticks(0, xmax, 6).filter((v) => Number.isInteger(v)).map((v) => [v, String(v)]);
    axes(g, LM, LW, LH, xt, ticks(0, top, 5).filter((v) => v <= top), X, Y, text.xlabel, text.ylabel);
    const colour = dcol[run.colour];
    g.append(svg("path", { class: "ampkit-olevel-run", d: linePath(ys, X, Y), fill: "none", stroke: colour,
                           "stroke-width": 2.6, "stroke-opacity": 0.85, "data-label": run.label }));
    if (run.level !== "O0") {   // O0 drawn dashed on top, so it stays visible where the curves coincide
      g.append(svg("path", { class: "ampkit-olevel-ref", d: linePath(y0, X, Y), fill: "none", stroke: "#24292f",
                             "stroke-width": 1.3, "stroke-dasharray": "4 3" }));
    }
    if (run.bad !== null) {     // the engine's first non-finite step: a dotted line there, ✕ at the last finite point
      const last = ys.slice(0, run.bad).filter(Number.isFinite).pop();
      const at = Math.max(run.bad - 1, 0), yAt = last === undefined ? top / 2 : last;
      g.append(svg("line", { class: "ampkit-olevel-bad", x1: X(run.bad), x2: X(run.bad), y1: LM.top,
                             y2: LH - LM.bottom, stroke: status.bad, "stroke-dasharray": "2 3", "stroke-width": 1.2,
                             "data-step": run.bad }),
               svg("text", { class: "ampkit-olevel-nan", x: X(at), y: Y(yAt) + 6, "text-anchor": "middle",
                             "font-size": 18, "font-weight": "bold", fill: status.bad }, "✕"),
               svg("text", { x: X(at) + (X(at) > LW * 0.6 ? -10 : 10), y: Y(yAt) + 22, fill: status.bad,
                             "text-anchor": X(at) > LW * 0.6 ? "end" : "start", "font-size": 13,
                             stroke: "#ffffff", "stroke-width": 4, "paint-order": "stroke" },
                   fillText(text.nonfinite, { label: run.label, step: run.bad })));
    }
    const legend = [[colour, run.label, ""], ...(run.level === "O0" ? [] : [["#24292f", text.ref, "4 3"]])];
    legend.forEach(([c, name, dash], i) => {
      const ly = LM.top + 12 + 18 * i;
      g.append(svg("line", { x1: LW - LM.right - 190, x2: LW - LM.right - 164, y1: ly, y2: ly, stroke: c,
                             "stroke-width": dash ? 1.5 : 2.6, "stroke-dasharray": dash }),
               svg("text", { x: LW - LM.right - 158, y: ly + 4 }, name));
    });
    g.append(svg("text", { class: "ampkit-olevel-title", x: LW / 2, y: 18, "text-anchor": "middle",
                           "font-size": 14 }, run.title));
    lossSvg.setAttribute("data-xmax", xmax);
    lossSvg.setAttribute("data-ytop", top);
    lossSvg.replaceChildren(g);
  }

  function drawMemory(run) {
    const kib = (b) => b / 1024;
    const top = Math.max(...run.memory.map(kib), ...run.memory0.map(kib), 1) * 1.15;
    const slotW = (MW - MM.left - MM.right) / run.memory.length;
    const X = (i) => MM.left + (i + 0.5) * slotW;
    const Y = (v) => MH - MM.bottom - (v / top) * (MH - MM.top - MM.bottom);
    const g = svg("g", { fill: "#24292f" });
    axes(g, MM, MW, MH, [], ticks(0, top, 5).filter((v) => v <= top), X, Y, "", text.mem_ylabel);
    const colour = dcol[run.colour], w = slotW * 0.36;
    run.memory.forEach((b, i) => {
      const b0 = run.memory0[i];
      g.append(svg("rect", { class: "ampkit-olevel-mem0", x: X(i) - w, width: w, y: Y(kib(b0)),
                             height: Y(0) - Y(kib(b0)), fill: dcol.fp32, "fill-opacity": 0.45, "data-bytes": b0 }),
               svg("rect", { class: "ampkit-olevel-mem", x: X(i), width: w, y: Y(kib(b)), height: Y(0) - Y(kib(b)),
                             fill: colour, "data-bytes": b }));
      const words = text.memory_labels[i].split(" ");
      words.forEach((word, j) => g.append(svg("text", { x: X(i), y: MH - MM.bottom + 16 + 14 * j,
                                                        "text-anchor": "middle" }, word)));
    });
    [[dcol.fp32, 0.45, "O0 (fp32)"], [colour, 1, run.label]].forEach(([c, op, name], i) => {
      g.append(svg("rect", { x: MW - MM.right - 120, y: MM.top + 4 + 18 * i, width: 14, height: 11, fill: c,
                             "fill-opacity": op }),
               svg("text", { x: MW - MM.right - 102, y: MM.top + 14 + 18 * i }, name));
    });
    g.append(svg("text", { class: "ampkit-olevel-mem-title", x: MW / 2, y: 18, "text-anchor": "middle",
                           "font-size": 14 }, run.memory_title));
    memSvg.setAttribute("data-ktop", top);
    memSvg.replaceChildren(g);
  }

  function drawTable(run) {
    const cell = (s) => (dcol[s] ? h("td", { style: { color: dcol[s], fontWeight: "bold" } }, s) : h("td", {}, s));
    table.replaceChildren(
      h("p", {}, ...fillMarkup(run.caption, {})),
      h("table", {}, h("tr", {}, ...text.columns.map((c) => h("th", {}, c))),
        ...run.rows.map(([layer, type, params, input, output, noteText]) =>
          h("tr", {}, h("td", {}, h("code", {}, layer)), h("td", {}, type), cell(params), cell(input), cell(output),
            h("td", {}, noteText)))));
  }

  function drawSummary(run) {
    const speed = timings[run.label];
    const items = [speed ? fillMarkup(speed, {}) : [h("i", {}, text.speed_saved)],
                   ...run.lines.map((l) => fillMarkup(l, {}))];
    const list = h("ul", {}, ...items.map((nodes, i) => h("li", { class: `ampkit-olevel-line-${i}` }, ...nodes)));
    if (run.diverged) for (const b of list.lastChild.querySelectorAll("b")) b.style.color = status.bad;
    summary.replaceChildren(h("b", {}, run.label), " ", list);
  }

  function draw() {
    const level = model.get("level"), low = model.get("low"), runs = model.get("runs");
    const i = levels.indexOf(level);
    range.value = String(i);
    levelOut.textContent = level;
    for (const b of buttons) {
      const on = b.dataset.dtype === low;
      b.setAttribute("aria-pressed", String(on));
      Object.assign(b.style, on ? { background: dcol[low] ?? "#0969da", color: "#ffffff", fontWeight: "bold" }
                                : { background: "", color: "", fontWeight: "" });
    }
    const name = label(), run = runs[name], ref = runs[model.get("labels")[`O0 ${low}`]];
    el.querySelector(".ampkit-olevel").setAttribute("data-label", name);
    statusLine.replaceChildren(...(note === null ? [] : [note]));
    for (const part of [lossSvg, memSvg, summary, table]) part.style.opacity = run && ref ? "1" : "0.25";
    if (!run || !ref) return;
    drawLoss(run, ref);
    drawMemory(run);
    drawSummary(run);
    drawTable(run);
  }

  function choose(level, low) {
    model.set("level", level);
    model.set("low", low);
    saveChanges(model);
    const missing = !model.get("runs")[label()];
    bar.style.display = "none";
    waiting = missing;
    note = !missing ? null : kernel.here ? fillText(text.training, { label: label(), step: 0, steps: model.get("steps") })
                                  : text.no_kernel;
    draw();
  }

  range.addEventListener("input", () => choose(levels[Number(range.value)], model.get("low")));
  for (const b of buttons) b.addEventListener("click", () => choose(model.get("level"), b.dataset.dtype));
  runAll.addEventListener("click", () => {
    trySend(model, { type: "run_all" });
    if (!kernel.here) { note = text.no_kernel; draw(); }
  });
  const onMsg = (msg) => {
    if (!msg || !msg.type) return;
    if (msg.type === "progress") {
      bar.style.display = "";
      bar.max = msg.steps;
      bar.value = msg.step;
      note = fillText(text.training, msg);
      if (msg.step === msg.steps) bar.style.display = "none";
    } else if (msg.type === "timings") {
      timings = msg.lines;
    } else if (msg.type === "status") {
      note = fillText(text[msg.key], { n: msg.n, label: label() });
    }
    draw();
  };
  const onRuns = () => {
    if (waiting && model.get("runs")[label()]) { waiting = false; note = null; bar.style.display = "none"; }
    draw();
  };
  model.on("msg:custom", onMsg);
  model.on("change:runs", onRuns);
  model.on("change:level", draw);
  model.on("change:low", draw);
  // a kernel answers the page's hello ("here", then the step times it measured); a saved page's does not
  const kernel = kernelPresence(model, () => {
    if (waiting && note === text.no_kernel) note = fillText(text.training, { label: label(), step: 0, steps: model.get("steps") });
    draw();
  });
  draw();
  return () => {
    kernel.stop();
    model.off("msg:custom", onMsg);
    model.off("change:runs", onRuns);
    model.off("change:level", draw);
    model.off("change:low", draw);
  };
}

export default { render };
