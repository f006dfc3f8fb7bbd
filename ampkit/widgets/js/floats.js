// @ts-check
// Notebook 01's FloatExplorer drawn in the browser (ampkit/widgets/formats.py): one number in every format, bit by
// bit. A PORT of engine rules (docs/architecture.md, "Ports"): the input is free (any typed number, any bit
// flipped), so the engine cannot send every state; the page computes, on the limits the engine sent per format
// (model "formats", read from ampkit.formats.info), copies of ampkit.formats' decompose (rounding: kit.js roundTo; a
// stored value's bit pattern), _decode (a pattern's value, subnormals, the inf/NaN encodings the engine names),
// toggle_bit, Decomposition.formula, explain and parse_value, each marked "// port of" here and "# port:" on its
// Python original (change both together); tests/browser/test_front_floats_arith_browser.py checks each against the
// engine on random inputs. The notes are the engine's
// explain() templates (model "note_templates"), filled here with the numbers; the page never writes a note itself.
// The range map beside it is its own view (js/rangemap.js), rendered here through anywidget's host and moved by
// setting its marker, so the saved notebook moves both with no kernel.
// Python's printing (pyRepr, pySci, pyG, pyStrRepr) is kit.js's.

/** [the double nearest num / den (BigInts, den > 0; ties to even, subnormals and overflow as IEEE does), whether it
 * is exactly num / den].
 * @param {bigint} num
 * @param {bigint} den
 * @returns {[number, boolean]} */
function ratioToDouble(num, den) {
  if (num === 0n) return [0, true];
  const neg = num < 0n;
  if (neg) num = -num;
  let k = num.toString(2).length - den.toString(2).length;   // num / den in [2^(k-1), 2^(k+1))
  if ((k >= 0 ? num >= den << BigInt(k) : num << BigInt(-k) >= den) === false) k -= 1;
  const lsb = Math.max(k - 52, -1074);                        // the spacing's exponent at that size
  if (k > 1023) return [neg ? -Infinity : Infinity, false];
  const n = lsb >= 0 ? num : num << BigInt(-lsb), d = lsb >= 0 ? den << BigInt(lsb) : den;
  let q = n / d;
  const r2 = (n - q * d) * 2n;
  if (r2 > d || (r2 === d && q % 2n === 1n)) q += 1n;
  const out = Number(q) * 2 ** lsb;                            // exact: q <= 2^53
  return [neg ? -out : out, r2 === 0n && Number.isFinite(out)];
}

/** A double as an exact ratio [num, den] of BigInts. */
function exactRatio(x) {
  let e = 0;
  let m = x;
  while (!Number.isInteger(m)) { m *= 2; e -= 1; }             // exact: doubling a double
  return e === 0 ? [BigInt(m), 1n] : [BigInt(m), 1n << BigInt(-e)];
}

/** Python's float(base) ** int(exp) where the page can be sure of it: {value} when the power is exact in a double
 * (2^-24, 3^5, 0.5^3), clearly overflows (inf) or underflows (0); {inexact: true} where Python's ** (C's pow)
 * rounds it (10^23: the engine computes those); null: ZeroDivisionError.
 * @param {number} base
 * @param {number} exp
 * @returns {{value: number, inexact?: undefined} | {inexact: true, value?: undefined} | null} */
export function powerOf(base, exp) {
  if (base === 0) return exp < 0 ? null : { value: exp === 0 ? 1 : 0 };
  if (exp === 0 || base === 1) return { value: 1 };
  const size = exp * Math.log2(base);
  if (size > 1100) return { value: Infinity };
  if (size < -1100) return { value: 0 };
  if (Math.abs(exp) > 4000) return { inexact: true };
  const [n, d] = exactRatio(base);
  const k = BigInt(Math.abs(exp));
  const [value, exact] = exp > 0 ? ratioToDouble(n ** k, d ** k) : ratioToDouble(d ** k, n ** k);
  return exact ? { value } : { inexact: true };
}

/** Python's float.fromhex for "0x1.8p3" (null where it raises). */
function fromHex(s) {
  const m = /^([+-]?)0x([0-9a-f]*)(?:\.([0-9a-f]*))?(?:p([+-]?\d+))?$/i.exec(s);
  if (!m || (m[2] + (m[3] || "")) === "") return null;
  const digits = m[2] + (m[3] || "");
  const num = BigInt(`0x${digits}`);
  let exp = BigInt(m[4] || "0") - 4n * BigInt((m[3] || "").length);
  if (exp > 5000n) exp = 5000n;
  if (exp < -5000n) exp = -5000n;
  const [v] = exp >= 0n ? ratioToDouble(num << exp, 1n) : ratioToDouble(num, 1n << -exp);
  if (!Number.isFinite(v)) return null;                         // OverflowError
  return m[1] === "-" ? -v : v;
}

const PY_FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|infinity|nan)$/i;
const POW = /^\s*([+-]?)\s*(\d+(?:\.\d*)?)\s*(?:\*\*|\^)\s*\(?\s*([+-]?\d+)\s*\)?\s*$/;

// port of ampkit/formats/parse.py parse_value (tests/browser/test_front_floats_arith_browser.py)
/** Read what a learner typed as ampkit.formats.parse_value does: {value}, {error: [template key, text]}, or
 * {inexact: true} for a power that Python's ** rounds (the engine reads it; without a kernel the page says so). */
export function parseTyped(text) {
  const s = text.trim().replace(/_/g, "").replace(/\u2212/g, "-");
  if (!s) return { error: ["empty", text] };
  if (PY_FLOAT.test(s)) {
    const low = s.toLowerCase().replace(/^\+/, "");
    if (/^-?(inf|infinity)$/.test(low)) return { value: low.startsWith("-") ? -Infinity : Infinity };
    if (/^-?nan$/.test(low)) return { value: NaN };
    return { value: Number(s) };
  }
  if (/^[+-]?0x/i.test(s)) {
    const v = fromHex(s);
    if (v !== null) return { value: v };
  }
  const m = POW.exec(s);
  if (m) {
    const p = powerOf(Number(m[2]), Number(m[3]));
    if (p === null) return { error: ["zero", text] };
    if (p.inexact) return { inexact: true };
    return { value: m[1] === "-" ? -p.value : p.value };
  }
  return { error: ["bad", text] };
}

// -- one format's arithmetic, on the limits the engine sent: {bits, exponent_bits, mantissa_bits, bias, emin,
//    has_inf, has_nan, nan_pattern, ... roundTo's limits}

/** The bit pattern (an integer) of a value of format f. */
export function encode(x, f) {
  const M = f.mantissa_bits;
  if (Number.isNaN(x)) return f.nan_pattern;
  const s = x < 0 || Object.is(x, -0) ? 1 : 0;
  const a = Math.abs(x);
  let e = 0, m = 0;
  if (a === Infinity) e = 2 ** f.exponent_bits - 1;
  else if (a !== 0 && a < 2 ** f.emin) m = a / 2 ** (f.emin - M);       // a multiple of the smallest subnormal
  else if (a !== 0) {
    let k = Math.floor(Math.log2(a));
    if (2 ** k > a) k -= 1;
    if (2 ** (k + 1) <= a) k += 1;
    e = k + f.bias;
    m = a / 2 ** (k - M) - 2 ** M;
  }
  return s * 2 ** (f.bits - 1) + e * 2 ** M + m;
}

/** [sign, exponent field, mantissa field] of a pattern. */
function fields(p, f) {
  const top = 2 ** (f.bits - 1), M = 2 ** f.mantissa_bits;
  const s = p >= top ? 1 : 0;
  const rest = p - s * top;
  const e = Math.floor(rest / M);
  return [s, e, rest - e * M];
}

// port of ampkit/formats/bits.py _decode (tests/browser/test_front_floats_arith_browser.py)
/** {kind, value, unbiased} of a bit pattern: the IEEE field rules, inf/NaN as the format has them. */
export function decode(p, f) {
  const [s, e, m] = fields(p, f);
  const eAll = 2 ** f.exponent_bits - 1, mAll = 2 ** f.mantissa_bits - 1;
  const sign = s ? -1 : 1;
  if (f.has_inf && e === eAll) return m === 0 ? { kind: "inf", value: sign * Infinity, unbiased: null }
    : { kind: "nan", value: NaN, unbiased: null };
  // E2M1 (has_nan false) has no NaN: its all-ones pattern is 6
  if (!f.has_inf && f.has_nan !== false && e === eAll && m === mAll) return { kind: "nan", value: NaN, unbiased: null };
  if (e === 0) {
    if (m === 0) return { kind: "zero", value: s ? -0 : 0, unbiased: null };
    return { kind: "subnormal", value: sign * m * 2 ** (f.emin - f.mantissa_bits), unbiased: f.emin };
  }
  return { kind: "normal", value: sign * (2 ** f.mantissa_bits + m) * 2 ** (e - f.bias - f.mantissa_bits),
           unbiased: e - f.bias };
}

// port of ampkit/formats/bits.py toggle_bit (tests/browser/test_front_floats_arith_browser.py)
/** The pattern with bit `pos` (0 = sign, from the left) flipped. */
export function flipBit(p, pos, f) {
  const w = 2 ** (f.bits - 1 - pos);
  return Math.floor(p / w) % 2 === 1 ? p - w : p + w;
}

/** Everything the explorer shows of pattern `p` of format f, asked for `value` (decompose / from_bits). */
export function describe(value, p, f) {
  const d = decode(p, f);
  const [s, e, m] = fields(p, f);
  const [verdict, absError, relError] = verdictOf(value, d.value, f);
  let prev = NaN, next = NaN;
  const val = (q) => decode(q, f).value;
  const signed = s === 1;
  const mag = p - (signed ? 2 ** (f.bits - 1) : 0);
  if (d.kind === "inf") [prev, next] = signed ? [-Infinity, val(p - 1)] : [val(p - 1), Infinity];
  else if (d.kind !== "nan" && mag === 0) [prev, next] = [-(2 ** (f.emin - f.mantissa_bits)), 2 ** (f.emin - f.mantissa_bits)];
  else if (d.kind !== "nan") [prev, next] = signed ? [val(p + 1), val(p - 1)] : [val(p - 1), val(p + 1)];
  const ulp = d.kind === "inf" || d.kind === "nan" ? NaN : 2 ** (Math.max(e, 1) - f.bias - f.mantissa_bits);
  const bits = [s, e, m].map((x, i) => x.toString(2).padStart([1, f.exponent_bits, f.mantissa_bits][i], "0"));
  return { fmt: f.name, value, pattern: p, sign: bits[0], exponent: bits[1], mantissa: bits[2], kind: d.kind,
           unbiased: d.unbiased, stored: d.value, abs_error: absError, rel_error: relError, ulp, prev, next, verdict };
}

// port of ampkit/formats/bits.py decompose (tests/browser/test_front_floats_arith_browser.py)
/** The state of every format for `value` (`flipped`: {fmt, pattern} shown as it is, as from_bits gives it). */
export function explore(value, formats, flipped) {
  return formats.map((f) => {
    if (flipped && flipped.fmt === f.name) return describe(decode(flipped.pattern, f).value, flipped.pattern, f);
    return describe(value, encode(roundTo(value, f), f), f);
  });
}

// port of ampkit/formats/bits.py Decomposition.formula (tests/browser/test_front_floats_arith_browser.py)
/** d.formula() of the engine: "+1.1001100110 (binary) × 2^-4". */
export function formula(d) {
  const s = d.sign === "1" ? "-" : "+";
  if (d.kind === "normal") return `${s}1.${d.mantissa} (binary) × 2^${d.unbiased}`;
  if (d.kind === "subnormal") return `${s}0.${d.mantissa} (binary) × 2^${d.unbiased}`;
  return { zero: `${s}0`, inf: `${s}inf`, nan: "NaN" }[d.kind];
}

/** A template from the engine with its value fields filled: {v:.3g}, {rel:.1e}, {text!r}. */
function fill(template, fields) {
  return template.replace(/\{(\w+)(![rsa])?(?::([^{}]*))?\}/g, (all, k, conv, spec) => {
    const x = fields[k];
    if (x === undefined) return all;
    if (conv === "!r") return pyStrRepr(x);
    if (spec === ".3g") return pyG(x, 3);
    if (spec === ".1e") return pySci(x, 1);
    return String(x);
  });
}

// port of ampkit/formats/rounding.py explain (tests/browser/test_front_floats_arith_browser.py)
/** explain(value, fmts): the engine's notes for the special values it sent, else its templates filled. */
export function notesFor(value, states, notes) {
  const key = pyRepr(value);
  if (Number.isNaN(value) || !Number.isFinite(value) || value === 0) return notes.fixed[key];
  const out = [];
  const w = notes.widest, a = Math.abs(value);
  if (a > w.overflow_threshold || (a === w.overflow_threshold && w.overflow_tie_up)) {
    out.push(fill(notes.beyond, { v: value }));
  }
  for (const d of states) {
    const t = notes.per[d.fmt];
    const by = d.verdict === "saturated to max" ? t[d.verdict][value < 0 ? 1 : 0] : t[d.verdict];
    if (by) out.push(fill(by, { v: value }));
    else if (d.verdict in t) continue;
    else if (d.kind === "subnormal") out.push(fill(t.subnormal, { v: value, rel: Math.abs(d.stored - value) / a }));
  }
  return out;
}

/** The message for text that is not a number (parse_value's words). */
export function typedError(err, words) {
  return fill(words.errors[err[0]], { text: err[1] });
}

function short(x) {
  if (Number.isNaN(x)) return "—";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  return x === 0 ? "0" : pySci(x, 3);
}

const CSS = `
.ampkit-explorer .ampkit-bits-row { display: flex; flex-wrap: wrap; align-items: center; margin: 2px 0; }
.ampkit-explorer .ampkit-bitstring { white-space: nowrap; }
.ampkit-explorer .ampkit-bits-label { display: inline-block; width: 5.5em; flex: none; }
.ampkit-explorer .ampkit-cell { width: 1.45em; height: 1.8em; padding: 0; margin: 0; border: 1px solid white;
  border-radius: 3px; font-family: var(--jp-code-font-family, monospace); font-size: 0.95em; cursor: pointer;
  flex: none; }
.ampkit-explorer .ampkit-cell:focus-visible { outline: 2px solid #24292f; outline-offset: 1px; }
.ampkit-explorer .ampkit-formula { margin-left: 0.6em; color: #57606a; white-space: nowrap; }
.ampkit-explorer .ampkit-table-box { overflow-x: auto; max-width: 100%; }
.ampkit-explorer td { white-space: nowrap; }
.ampkit-explorer .ampkit-explorer-message { margin: 0.4em 0; }
`;

async function render({ model, el, host }) {
  const look = model.get("look");
  const text = model.get("text");
  applyLook(el, look);
  const formats = model.get("formats");
  const colours = model.get("field_colours");
  const root = h("div", { class: "ampkit-explorer" }, h("style", {}, CSS));
  const box = h("input", { type: "text", class: "ampkit-explorer-text", size: 24, "aria-label": text.value,
                           placeholder: "0.1, 1e-8, 2^-24, -0, inf, nan" });
  const slider = h("input", { type: "range", class: "ampkit-range ampkit-explorer-slider", min: model.get("log_min"),
                              max: model.get("log_max"), step: model.get("log_step"), "aria-label": text.slider });
  const readout = h("output", { class: "ampkit-explorer-readout" });
  const legend = h("span", { class: "ampkit-explorer-legend" }, text.bits, " ",
    ...["sign", "exponent", "mantissa"].flatMap((k, i) => [i ? " · " : "",
      h("b", { style: { color: colours[k][1] } }, text.fields[k])]), " ", text.click);
  const rows = h("div", { class: "ampkit-explorer-bits" });
  const table = h("table", { class: "ampkit-explorer-summary" });
  const message = h("div", { class: "ampkit-explorer-message", role: "status" });
  const mapEl = h("div", { class: "ampkit-explorer-map" });
  root.append(h("div", { class: "ampkit-control" }, h("label", { class: "ampkit-control" }, h("span", {}, text.value),
                                                      box), legend),
              h("label", { class: "ampkit-control" }, h("span", {}, text.slider), slider, readout),
              rows, h("div", { class: "ampkit-table-box" }, table), message, mapEl);
  el.append(root);
  let mapModel = null;
  let pending = null;     // typed text only the engine can read (a power Python's ** rounds), until it answers
  // without a kernel behind the page (kit.js kernelPresence) the pending text says that it needs one
  const kernel = kernelPresence(model, () => paint());

  function state() {
    return explore(fromRepr(model.get("value_repr")), formats, model.get("flipped"));
  }

  function paint() {
    const value = fromRepr(model.get("value_repr"));
    root.dataset.value = model.get("value_repr");
    root.dataset.flipped = JSON.stringify(model.get("flipped"));
    const states = state();
    if (document.activeElement !== box) box.value = model.get("typed");
    if (Number.isFinite(value) && value !== 0 && document.activeElement !== slider) {
      slider.value = String(Math.log2(Math.abs(value)));
    }
    readout.value = `|${text.value}| = ${pyG(Math.abs(value), 4)}`;
    rows.replaceChildren(...states.map((d, i) => {
      const f = formats[i];
      const bits = (d.sign + d.exponent + d.mantissa).split("");
      const cells = bits.map((b, pos) => {
        const field = pos === 0 ? "sign" : pos <= f.exponent_bits ? "exponent" : "mantissa";
        const one = b === "1";
        const label = fillText(text.flip, { fmt: f.name, pos, field: text.fields[field] });
        return h("button", { type: "button", class: `ampkit-cell ampkit-${field}${one ? " ampkit-one" : ""}`,
                             title: label, "aria-label": `${label}: ${b}`, "data-pos": pos,
                             style: { background: colours[field][one ? 1 : 0], color: one ? "white" : "#24292f",
                                      marginLeft: pos === 1 || pos === 1 + f.exponent_bits ? "6px" : "0" },
                             onclick: () => flip(i, pos) }, b);
      });
      const form = formula(d);
      const parts = form.split(" (binary) × 2^");
      const shown = parts.length === 2 ? [parts[0], "₂ × 2", h("sup", {}, parts[1])] : [form];
      return h("div", { class: `ampkit-bits-row ampkit-bits-${f.name}` },
        h("b", { class: "ampkit-bits-label" }, f.label),
        h("span", { class: "ampkit-bitstring", "data-bits": bits.join("") }, ...cells),
        h("span", { class: "ampkit-formula" }, "= ", ...shown));
    }));
    const vc = look.colours.verdict;
    table.replaceChildren(h("tr", {}, ...text.head.map((w) => h("th", {}, w))),
      ...states.map((d, i) => h("tr", { class: `ampkit-row-${d.fmt}` },
        h("td", {}, h("b", {}, formats[i].label)),
        h("td", { class: "ampkit-stored" }, h("code", {}, pyRepr(d.stored))),
        h("td", {}, text.kinds[d.kind]),
        h("td", { style: { color: vc[d.verdict] || vc.rounded } }, h("b", {}, text.verdicts[d.verdict])),
        h("td", {}, short(d.abs_error)), h("td", {}, short(d.rel_error)), h("td", {}, short(d.ulp)),
        h("td", {}, h("code", {}, pyRepr(d.prev))), h("td", {}, h("code", {}, pyRepr(d.next))))));
    const error = model.get("error_text");
    if (pending !== null) {
      message.replaceChildren(h("div", { class: "ampkit-pending" }, `${pending}: ${kernel.here ? "…" : text.kernel}`));
    } else if (error) {
      message.replaceChildren(h("div", { class: "ampkit-error", style: { color: look.colours.status.bad } },
                                    `⚠️ ${error}`));
    } else {
      const notes = notesFor(value, states, model.get("note_templates"));
      message.replaceChildren(notes.length ? h("ul", { class: "ampkit-note" }, ...notes.map((n) => h("li", {}, n)))
        : h("div", { class: "ampkit-note" }, model.get("note_templates").none));
    }
    if (mapModel) mapModel.set("marker", model.get("value_repr"));   // the page moves the map's marker itself
  }

  function set(fields) {
    for (const [k, v] of Object.entries(fields)) model.set(k, v);
    saveChanges(model);
    paint();
  }

  function setValue(value, flipped = {}) {
    set({ value_repr: pyRepr(value), typed: pyRepr(value), flipped, error_text: "" });
  }

  function flip(i, pos) {
    const f = formats[i];
    const p = flipBit(state()[i].pattern, pos, f);
    setValue(decode(p, f).value, { fmt: f.name, pattern: p });
    rows.querySelector(`.ampkit-bits-${f.name} [data-pos="${pos}"]`)?.focus();
  }

  box.addEventListener("change", () => {
    const got = parseTyped(box.value);
    if (got.inexact) {   // the engine computes it: sent to the kernel; until it answers, the page says it needs one
      model.set("typed", box.value);
      saveChanges(model);
      pending = box.value;
      paint();
      return;
    }
    if (got.error) set({ typed: box.value, error_text: typedError(got.error, text) });
    else setValue(got.value);     // sent as its repr: the engine decomposes the value the page read
    box.value = model.get("error_text") ? box.value : pyRepr(fromRepr(model.get("value_repr")));
  });
  slider.addEventListener("input", () => {
    const old = fromRepr(model.get("value_repr"));
    setValue((old < 0 || Object.is(old, -0) ? -1 : 1) * 2 ** Number(slider.value));
  });
  const events = ["change:value_repr", "change:flipped", "change:error_text", "change:typed"];
  const changed = () => { pending = null; paint(); };
  for (const e of events) model.on(e, changed);
  paint();
  const ref = model.get("range_map");
  if (ref && host) {          // the range map: its own view, rendered here; its marker follows the value
    const id = `anywidget:${ref.replace(/^IPY_MODEL_/, "")}`;
    const child = await host.getWidget(id);
    await child.render({ el: mapEl });
    mapModel = await host.getModel(id);
    // the map follows the explorer's value: a marker the kernel sent for an earlier value (its answer to a move the
    // page has already passed) is put back
    mapModel.on("change:marker", () => {
      if (mapModel.get("marker") !== model.get("value_repr")) mapModel.set("marker", model.get("value_repr"));
    });
    paint();
  }
  return () => { kernel.stop(); for (const e of events) model.off(e, changed); };
}

export default { render };
