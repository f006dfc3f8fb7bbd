// @ts-check
// Notebook 06's BlockScalingExplorer drawn in the browser (ampkit/widgets/fp8_blocks.py): per-tensor vs per-block
// scaling, element by element. Nothing is computed here: the engine computed every setting the controls reach when
// the view started (model "states", keyed as fp8_blocks.setting_key builds the key, which settingKey ports, marked
// on both sides; "masks": which elements were
// flushed / saturated, as flat indices or a base64 bit mask) and the page SELECTS the setting's entry. Every word
// comes from the model's "text" (the kit's language); the readout's numbers are the engine's.

const W = 700, M = { left: 48, right: 12, top: 72 }, PH = 180, GAP = 44;   // two panels of PH px, one per row set

// port of ampkit/widgets/fp8_blocks.py setting_key (tests/browser/test_fp8_blocks_browser.py)
/** The key of a setting (fp8_blocks.setting_key): the controls that do not apply to the scheme are left out. */
export function settingKey(scheme, block, fmt, rounding, pow2) {
  return scheme === "mx" ? `mx|${block}|${fmt}|${rounding}` : `${scheme}|${fmt}|${pow2 ? 1 : 0}`;
}

/** The flat indices a mask code holds ({i: "3,17"} as sent, or {b: base64 bits, most significant first}). */
export function maskIndices(code) {
  if (code.i !== undefined) return code.i === "" ? [] : code.i.split(",").map(Number);
  const bytes = atob(code.b), out = [];
  for (let j = 0; j < bytes.length; j++) {
    const byte = bytes.charCodeAt(j);
    if (byte) for (let bit = 0; bit < 8; bit++) if (byte & (0x80 >> bit)) out.push(8 * j + bit);
  }
  return out;
}

/** The k of every block (values stored as x / 2**k), row-major over the grid of blocks, as the engine sent it. */
export function blockScales(code) {
  return code.c !== undefined ? [...code.c].map((ch) => ch.charCodeAt(0) - 80) : code.v.split(",").map(Number);
}

function render({ model, el }) {
  const look = model.get("look"), text = model.get("text"), band = look.colours.band;
  applyLook(el, look);
  const [rows, cols] = model.get("shape"), choices = model.get("choices");
  const cw = (W - M.left - M.right) / cols, rh = PH / rows;
  const top = (p) => M.top + p * (PH + GAP);
  const H = top(2) - GAP + 40;
  const masks = model.get("masks").map(() => null);   // decoded on first use
  const indices = (i) => (masks[i] ??= maskIndices(model.get("masks")[i]));

  const group = (name, cls) => {
    const buttons = choices[name].map(([value, label]) => h("button", { type: "button", class: `ampkit-fp8-${name}`,
                                                                         "data-value": String(value) }, label));
    buttons.forEach((b, i) => b.addEventListener("click", () => set(name, choices[name][i][0])));
    return [buttons, h("div", { class: `ampkit-control ${cls}`, role: "group", "aria-label": text[name] },
                       h("span", {}, text[name]), ...buttons)];
  };
  const [schemeB, schemeRow] = group("scheme", "ampkit-fp8-scheme");
  const [blockB, blockRow] = group("block", "ampkit-fp8-block-size");
  const [fmtB, fmtRow] = group("fmt", "ampkit-fp8-format");
  const [ruleB, ruleRow] = group("rounding", "ampkit-fp8-rounding");
  const pow2 = h("input", { type: "checkbox" });
  pow2.addEventListener("change", () => set("power_of_two", pow2.checked));
  const readout = h("div", { class: "ampkit-fp8-blocks-readout", "aria-live": "polite" });

  const panels = [0, 1].map((p) => {
    const y0 = top(p);
    const g = svg("g", { class: `ampkit-fp8-panel ampkit-fp8-panel-${p ? "block" : "tensor"}` });
    const title = svg("text", { x: M.left, y: y0 - 6, "font-size": 13, class: "ampkit-fp8-panel-title" });
    const flushed = svg("path", { class: "ampkit-fp8-flushed", fill: band.flushed });
    const saturated = svg("path", { class: "ampkit-fp8-saturated", stroke: band.overflow, "stroke-width": 1.6,
                                  fill: "none" });
    const edges = svg("path", { class: "ampkit-fp8-edges", stroke: "#24292f", "stroke-width": 1, fill: "none" });
    const shades = svg("g", { class: "ampkit-fp8-scales" });   // the blocks, darker where k is larger
    g.append(shades, svg("rect", { x: M.left, y: y0, width: cols * cw, height: PH, fill: "none", stroke: "#24292f",
                                 class: "ampkit-fp8-kept" }), flushed, edges, saturated, title,
             svg("text", { x: M.left - 8, y: y0 + 4, "text-anchor": "end", "font-size": 11 }, "0"),
             svg("text", { x: M.left - 8, y: y0 + PH, "text-anchor": "end", "font-size": 11 }, String(rows - 1)),
             svg("text", { x: 12, y: y0 + PH / 2, "text-anchor": "middle", "font-size": 12,
                         transform: `rotate(-90 12 ${y0 + PH / 2})` }, text.ylabel));
    return { g, title, flushed, saturated, edges, shades };
  });
  const axis = svg("g", { "font-size": 11 });
  const yAxis = top(1) + PH;
  for (let c = 0; c <= cols; c += Math.max(1, cols / 8)) {
    axis.append(svg("line", { x1: M.left + c * cw, x2: M.left + c * cw, y1: yAxis, y2: yAxis + 4, stroke: "#24292f" }),
                svg("text", { x: M.left + c * cw, y: yAxis + 16, "text-anchor": "middle" }, String(c)));
  }
  axis.append(svg("text", { x: (M.left + W - M.right) / 2, y: yAxis + 33, "text-anchor": "middle", "font-size": 12 },
                text.xlabel));
  const legend = svg("g", { "font-size": 12, class: "ampkit-fp8-legend" });
  let lx = M.left;
  for (const [name, label] of text.legend) {
    legend.append(name === "edge" ? svg("line", { x1: lx, x2: lx + 14, y1: 36, y2: 36, stroke: "#24292f" })
      : svg("rect", { x: lx, y: 30, width: 14, height: 11, fill: band[name], "fill-opacity": name === "normal" ? 0.3 : 1 }),
                  svg("text", { x: lx + 18, y: 40 }, label));
    lx += 34 + labelWidth(label, 6.6);
  }
  const plot = svg("svg", { class: "ampkit-fp8-blocks-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                         "font-family": "sans-serif" },
                svg("text", { x: W / 2, y: 16, "text-anchor": "middle", "font-size": 15 }, text.title),
                legend, ...panels.map((p) => p.g), axis);
  el.append(h("div", { class: "ampkit-fp8-blocks" }, schemeRow, blockRow, h("div", { class: "ampkit-control" },
              fmtRow, ruleRow), h("label", { class: "ampkit-control ampkit-fp8-pow2" }, pow2, text.pow2), readout, plot));

  /** The flushed elements as one path: a rectangle per run of neighbours in a row. */
  function cells(idx) {
    let d = "";
    for (let j = 0; j < idx.length;) {
      let k = j + 1;
      while (k < idx.length && idx[k] === idx[k - 1] + 1 && idx[k] % cols !== 0) k++;
      const r = Math.floor(idx[j] / cols), c = idx[j] % cols;
      d += `M${M.left + c * cw},${r * rh}h${(k - j) * cw}v${rh}h${-(k - j) * cw}z`;
      j = k;
    }
    return d;
  }

  function draw() {
    const scheme = model.get("scheme"), block = model.get("block"), fmt = model.get("fmt");
    const rounding = model.get("rounding"), p2 = model.get("power_of_two");
    const key = settingKey(scheme, block, fmt, rounding, p2);
    const st = model.get("states")[key];
    const mx = scheme === "mx";
    const mark = (buttons, value) => buttons.forEach((b) => {
      const on = b.dataset.value === String(value);
      markPressed(b, on);
    });
    mark(schemeB, scheme); mark(blockB, block); mark(fmtB, fmt); mark(ruleB, rounding);
    for (const b of [...blockB, ...ruleB]) b.disabled = !mx;
    pow2.disabled = mx;
    pow2.checked = p2;
    plot.setAttribute("data-key", key);
    const ks = st.rows.map((row) => blockScales(row.k));
    const kmin = Math.min(...ks.flat()), kmax = Math.max(...ks.flat());
    st.rows.forEach((row, p) => {
      const panel = panels[p], y0 = top(p);
      const f = indices(row.f), sat = indices(row.s);
      panel.flushed.setAttribute("d", cells(f));
      panel.flushed.setAttribute("transform", `translate(0 ${y0})`);
      panel.g.dataset.flushed = String(f.length);
      panel.g.dataset.saturated = String(sat.length);
      panel.saturated.setAttribute("d", sat.map((i) => {
        const x = M.left + (i % cols + 0.5) * cw, y = y0 + (Math.floor(i / cols) + 0.5) * rh;
        return `M${x - 4},${y - 4}l8,8M${x - 4},${y + 4}l8,-8`;
      }).join(""));
      panel.title.replaceChildren(svg("tspan", { "font-weight": "bold" }, row.label), ` ${row.scales} · `,
                                  text.k.replace("{range}", row.k.range));
      const [gr, gc] = row.k.n, bw = (cols / gc) * cw, bh = PH / gr, paths = new Map();
      ks[p].forEach((k, i) => {
        const r = Math.floor(i / gc), c = i % gc;
        paths.set(k, (paths.get(k) ?? "") + `M${M.left + c * bw},${y0 + r * bh}h${bw}v${bh}h${-bw}z`);
      });
      panel.shades.replaceChildren(...[...paths].map(([k, d]) => svg("path", { d, fill: band.normal, "data-k": k,
        "fill-opacity": kmax > kmin ? 0.1 + 0.35 * (k - kmin) / (kmax - kmin) : 0.3 })));
      let d = "";
      if (p === 1 && st.edges) {
        const [tr, tc] = st.edges;
        for (let c = tc; c < cols; c += tc) d += `M${M.left + c * cw},${y0}v${PH}`;
        if (tr > 1) for (let r = tr; r < rows; r += tr) d += `M${M.left},${y0 + r * rh}h${cols * cw}`;
      }
      panel.edges.setAttribute("d", d);
    });
    const cell = (cls, value, colour) => h("td", { class: cls, style: colour ? { color: colour } : {} }, String(value));
    readout.replaceChildren(...fillMarkup(text.head, { fmt: st.fmt, rule: st.rule, n: st.n }),
      h("table", { style: { borderSpacing: "14px 2px" } },
        h("tr", {}, h("th", {}), ...text.columns.map((c) => h("th", {}, c))),
        ...st.rows.map((row, p) => h("tr", { class: p ? "ampkit-fp8-row-block" : "ampkit-fp8-row-tensor" },
          h("td", {}, h("b", {}, row.label), ` ${row.scales}`),
          cell("ampkit-fp8-n-flushed", row.flushed, band.flushed),
          cell("ampkit-fp8-n-saturated", row.saturated, band.overflow),
          cell("ampkit-fp8-n-kept", row.kept), cell("ampkit-fp8-mean-err", row.err)))),
      h("span", { class: "ampkit-fp8-verdict",
                  style: { color: st.better ? look.colours.status.good : look.colours.status.neutral } }, st.verdict));
  }

  function set(name, value) {
    model.set(name, value);
    saveChanges(model);
    draw();
  }

  const unlisten = onChanges(model, ["scheme", "block", "fmt", "rounding", "power_of_two"], draw);
  draw();
  return unlisten;
}

export default { render };
