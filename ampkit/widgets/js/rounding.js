// @ts-check
// Notebook 00's RoundingSlider drawn in the browser (ampkit/widgets/start.py): a log-scale slider and a table of
// how each format stores the value. A PORT (docs/architecture.md, "Ports"): the value is free (typed in the
// readout, or the slider's 10 ** x), so the page computes ampkit.formats.compare_formats itself (rows: kit.js's
// roundTo and verdictOf, with the limits the engine sent, model "formats"); every word comes from the model's
// "text" (the kit's language).

// port of ampkit/formats/rounding.py compare_formats (tests/browser/test_front_arithmetic_browser.py)
export function rows(value, formats) {
  return formats.map((f) => {
    const stored = roundTo(value, f);
    const [verdict, , rel] = verdictOf(value, stored, f);
    return { fmt: f.name, value, stored, rel, verdict };
  });
}

function relText(rel) {
  return Number.isNaN(rel) ? "—" : rel === Infinity ? "inf" : pySci(rel, 2);
}

function render({ model, el }) {
  const look = model.get("look");
  const text = model.get("text");
  applyLook(el, look);
  const lo = model.get("min_exp"), hi = model.get("max_exp"), step = model.get("step");
  const slider = h("input", { type: "range", min: lo, max: hi, step, class: "ampkit-range",
                              "aria-label": text.value });
  const readout = h("input", { type: "text", class: "ampkit-readout", size: 14, "aria-label": text.value });
  const typed = h("p", { class: "ampkit-typed" });
  const table = h("table", { class: "ampkit-rounding-table" });
  el.append(h("div", { class: "ampkit-rounding" },
              h("label", { class: "ampkit-control" }, h("span", {}, text.value), slider, readout), typed, table));

  function draw() {
    const value = model.get("value");
    slider.value = String(Math.log10(value));
    if (document.activeElement !== readout) readout.value = value.toExponential(3);
    typed.replaceChildren(text.typed, " ", h("code", {}, pyRepr(value)));
    const colours = look.colours.verdict;
    table.replaceChildren(
      h("tr", {}, ...["format", "stored", "error", "what"].map((k) => h("th", {}, text[k]))),
      ...rows(value, model.get("formats")).map((r) => h("tr", {},
        h("td", {}, h("code", {}, r.fmt)),
        h("td", { class: "ampkit-stored" }, h("code", {}, pyRepr(r.stored))),
        h("td", {}, relText(r.rel)),
        h("td", { style: { color: colours[r.verdict] || colours.rounded } }, h("b", {}, text.verdicts[r.verdict])))));
  }

  function set(value) {
    if (!(value > 0) || !Number.isFinite(value)) return;
    model.set("value", value);
    saveChanges(model);
    draw();
  }

  slider.addEventListener("input", () => set(10 ** Number(slider.value)));
  readout.addEventListener("change", () => set(Number(readout.value)));
  model.on("change:value", draw);
  draw();
  return () => model.off("change:value", draw);
}

export default { render };
