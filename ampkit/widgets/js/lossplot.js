// @ts-check
// Notebook 02's LiveLossPlot drawn in the browser (ampkit/widgets/loss_plot.py): a training run's loss per step, with
// axes and units, the reference curve dashed and the first non-finite step marked. Points STREAM in: each update of
// the run is a message with only the new points ({start, losses: Python's repr words, bad: the engine's first
// non-finite step}); when the run ends the whole curve is the model's "losses" (the saved state), which replaces
// what the messages built (and fills the gap of points sent before the view was drawn). Nothing is decided here:
// which steps are non-finite is the engine's "bad".
// parseLosses, ticks and linePath: kit.js.

const W = 700, H = 300, M = { left: 64, right: 16, top: 34, bottom: 48 };

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text");
  const { dtype: dcol, status } = look.colours;
  applyLook(el, look);
  let points = parseLosses(model.get("losses")), bad = model.get("bad") < 0 ? null : model.get("bad");
  const plot = svg("svg", { class: "ampkit-loss-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                            "font-family": "sans-serif", "font-size": 12 });
  el.append(h("div", { class: "ampkit-lossplot" }, plot));

  function draw() {
    const ref = parseLosses(model.get("reference"));
    const colour = model.get("colour") || dcol[model.get("dtype_key")] || dcol.fp32;
    const { xmax, top, X, Y } = lossScales([points, ref], W, H, M);
    const yb = H - M.bottom, yMid = (M.top + yb) / 2;
    const g = svg("g", { fill: "#24292f" });
    g.append(svg("line", { x1: M.left, x2: W - M.right, y1: yb, y2: yb, stroke: "#24292f" }),
             svg("line", { x1: M.left, x2: M.left, y1: M.top, y2: yb, stroke: "#24292f" }));
    for (const v of ticks(0, xmax, 6).filter(Number.isInteger)) {
      g.append(svg("line", { x1: X(v), x2: X(v), y1: yb, y2: yb + 4, stroke: "#24292f" }),
               svg("text", { x: X(v), y: yb + 17, "text-anchor": "middle" }, String(v)));
    }
    for (const v of ticks(0, top, 5).filter((t) => t <= top)) {
      g.append(svg("line", { x1: M.left - 4, x2: M.left, y1: Y(v), y2: Y(v), stroke: "#24292f" }),
               svg("text", { x: M.left - 7, y: Y(v) + 4, "text-anchor": "end" }, String(v)));
    }
    g.append(svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle" }, text.xlabel),
             svg("text", { x: 14, y: yMid, "text-anchor": "middle", transform: `rotate(-90 14 ${yMid})` },
                 text.ylabel),
             svg("text", { class: "ampkit-loss-title", x: W / 2, y: 18, "text-anchor": "middle", "font-size": 14 },
                 model.get("title")));
    if (ref.length) {
      g.append(svg("path", { class: "ampkit-loss-ref", d: linePath(ref, X, Y), fill: "none", stroke: "#8c959f",
                             "stroke-width": 1.2, "stroke-dasharray": "5 4" }));
      [[colour, text.run, ""], ["#8c959f", text.reference, "5 4"]].forEach(([c, name, dash], i) => {
        const ly = M.top + 12 + 18 * i;
        g.append(svg("line", { x1: W - M.right - 150, x2: W - M.right - 124, y1: ly, y2: ly, stroke: c,
                               "stroke-width": dash ? 1.2 : 1.8, "stroke-dasharray": dash }),
                 svg("text", { x: W - M.right - 118, y: ly + 4 }, name));
      });
    }
    g.append(svg("path", { class: "ampkit-loss-run", d: linePath(points, X, Y), fill: "none", stroke: colour,
                           "stroke-width": 1.8 }));
    if (bad !== null && bad < points.length) {   // mark_nonfinite's mark: ✕ at the last finite point, the step named
      const last = points.slice(0, bad).filter(Number.isFinite).pop();
      const yAt = last === undefined ? top / 2 : last;
      g.append(svg("text", { class: "ampkit-loss-nan", x: X(bad), y: Y(yAt) + 6, "text-anchor": "middle",
                             "font-size": 18, "font-weight": "bold", fill: status.bad, "data-step": bad }, "✕"),
               svg("text", { x: X(bad) + (X(bad) > W * 0.6 ? -10 : 8), y: Y(yAt) - 10, fill: status.bad,
                             "text-anchor": X(bad) > W * 0.6 ? "end" : "start", "font-size": 13,
                             stroke: "#ffffff", "stroke-width": 4, "paint-order": "stroke" },
                   fillText(text.nonfinite, { step: bad })));
    }
    if (!points.length) {
      g.append(svg("text", { x: (M.left + W - M.right) / 2, y: yMid, "text-anchor": "middle", fill: "#57606a" },
                   text.waiting));
    }
    plot.setAttribute("data-n", points.length);
    plot.setAttribute("data-xmax", xmax);
    plot.setAttribute("data-ytop", top);
    plot.replaceChildren(g);
  }

  const onMsg = (msg) => {
    if (msg.type !== "points") return;
    // points sent before this view was drawn are not here: left out (a gap in the line) until the run ends and
    // the whole curve arrives as the model's state
    const kept = points.slice(0, msg.start);
    while (kept.length < msg.start) kept.push(undefined);
    points = kept.concat(parseLosses(msg.losses));
    bad = msg.bad;
    draw();
  };
  const onState = () => {
    points = parseLosses(model.get("losses"));
    bad = model.get("bad") < 0 ? null : model.get("bad");
    draw();
  };
  model.on("msg:custom", onMsg);
  model.on("change:losses", onState);
  model.on("change:bad", onState);
  const unlisten = onChanges(model, ["title", "dtype_key", "colour", "reference"], draw);
  draw();
  return () => {
    model.off("msg:custom", onMsg);
    model.off("change:losses", onState);
    model.off("change:bad", onState);
    unlisten();
  };
}

export default { render };
