// @ts-check
// ampkit's front-end kit: what every view drawn in the browser shares (ampkit/widgets/front.py prepends this file
// to each view's module; no build step, nothing fetched). Two PORTS of engine rules live here, marked on both sides
// (docs/architecture.md, "Ports"): a rounding to a format whose limits the engine sent (roundTo, of
// ampkit.formats.rounding._round_scalar) and its verdict (verdictOf); the rest is a number printed the way Python
// prints it, and tests/browser check each formula against Python on random inputs
// (tests/browser/test_front_arithmetic_browser.py). Each small
// rule has its one home here: Python's printing (pyRepr, pySci, pyFixed, pyG, pyStrRepr), a format's rounding,
// whether a kernel is behind the page (kernelPresence), listening to traits, axis ticks, loss plots' scales and
// lines, a pressed toggle.

/** Python's repr of a float64 (shortest round-trip digits; "1e-08", "100000.0", "inf", "nan"). */
export function pyRepr(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expStr] = x.toExponential().split("e");   // shortest digits that round-trip
  const exp = parseInt(expStr, 10);
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  let out;
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    out = `${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  } else if (exp < 0) {
    out = `0.${"0".repeat(-exp - 1)}${digits}`;
  } else if (digits.length > exp + 1) {
    out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  } else {
    out = `${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  }
  return neg ? `-${out}` : out;
}

/** The digit string `digits` kept to `keep` digits, rounded half to even (one more digit when it carries). */
function roundDigits(digits, keep) {
  const kept = digits.slice(0, keep).split("");
  const rest = digits.slice(keep);
  const first = rest[0] || "0";
  const tail = /[1-9]/.test(rest.slice(1));
  const odd = Number(kept[kept.length - 1] || "0") % 2 === 1;
  if (first > "5" || (first === "5" && (tail || odd))) {
    let i = kept.length - 1;
    while (i >= 0 && kept[i] === "9") { kept[i] = "0"; i -= 1; }
    if (i < 0) kept.unshift("1"); else kept[i] = String(Number(kept[i]) + 1);
  }
  return kept.join("");
}

/** The exponent as Python prints it ("e-08", "e+15"). */
const pyExp = (exp) => `e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;

/** Python's f"{x:.{n}e}" ("1.23e-08"), ties to even on the exact binary value (2**-7 as .3e: "7.812e-03"). */
export function pySci(x, n) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const [m, e] = Math.abs(x).toExponential(100).split("e");   // every digit of a double (at most 767 are needed,
  let exp = parseInt(e, 10);                                    // but 101 decide any rounding to <= 100 digits)
  let d = x === 0 ? "0".repeat(n + 1) : roundDigits(m.replace(".", ""), n + 1);
  if (d.length > n + 1) { d = d.slice(0, n + 1); exp += 1; }
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  return `${sign}${d[0]}${n > 0 ? `.${d.slice(1)}` : ""}${pyExp(exp)}`;
}

/** Python's f"{x:.{n}f}" (round half to even on the exact binary value); comma: f"{x:,.{n}f}". */
export function pyFixed(x, n, comma = false) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const a = Math.abs(x);   // every digit of a double: an integer from 2**53 on, else toFixed's 100 decimals
  const [ip, fp] = a >= 2 ** 53 ? [BigInt(a).toString(), ""] : a.toFixed(100).split(".");
  const d = roundDigits(ip + fp.padEnd(n, "0"), ip.length + n);
  let whole = d.slice(0, d.length - n).replace(/^0+(?=\d)/, "");
  if (comma) whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}${whole}${n > 0 ? `.${d.slice(d.length - n)}` : ""}`;
}

/** Python's f"{x:.{p}g}" (p significant digits, trailing zeros dropped, exponent form below 1e-4 or from 10**p). */
export function pyG(x, p) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const [m, e] = Math.abs(x).toExponential(100).split("e");
  let exp = parseInt(e, 10);
  let d = roundDigits(m.replace(".", ""), p);
  if (d.length > p) { d = d.slice(0, p); exp += 1; }
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  let out;
  if (exp >= -4 && exp < p) {
    out = strip(exp >= 0 ? `${d.slice(0, exp + 1)}.${d.slice(exp + 1)}` : `0.${"0".repeat(-exp - 1)}${d}`);
  } else {
    out = `${strip(`${d[0]}.${d.slice(1)}`)}${pyExp(exp)}`;
  }
  return (x < 0 ? "-" : "") + out;
}

/** Python's repr of a str (quotes, backslashes and control characters escaped). */
export function pyStrRepr(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  const body = [...s].map((c) => {
    if (c === "\\" || c === q) return `\\${c}`;
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    const n = c.codePointAt(0);
    if (n < 0x20 || n === 0x7f) return `\\x${n.toString(16).padStart(2, "0")}`;
    return c;
  }).join("");
  return q + body + q;
}

// port of ampkit/formats/rounding.py _round_scalar (tests/browser/test_front_arithmetic_browser.py)
/** x rounded to the nearest value of a binary format (round half to even, subnormals kept), given the format's
 * limits as the engine sent them: {mantissa_bits, emin, max, overflow_threshold, overflow_tie_up, overflows_to,
 * via_float32}. via_float32: torch casts a float64 to a narrower format through float32 (two roundings). */
export function roundTo(x, f) {
  if (f.via_float32) x = Math.fround(x);                  // past float32's max: ±inf, cast as the format casts inf
  if (Number.isNaN(x) || x === 0) return x;
  const a = Math.abs(x);
  if (a > f.overflow_threshold || (a === f.overflow_threshold && f.overflow_tie_up)) {
    const big = f.overflows_to === "inf" ? Infinity : f.overflows_to === "nan" ? NaN : f.max;
    return x < 0 ? -big : big;
  }
  const e = Math.max(Math.floor(Math.log2(a)), f.emin);
  let step = 2 ** (e - f.mantissa_bits);                  // the spacing of the format's values near a
  let q = a / step;                                       // exact: a power-of-two scale
  if (q >= 2 ** (f.mantissa_bits + 1)) { step *= 2; q = a / step; }   // log2 rounded up at a binade's top
  if (q < 2 ** f.mantissa_bits && e > f.emin) { step /= 2; q = a / step; }  // ... or down
  let r = Math.floor(q);
  const rest = q - r;
  if (rest > 0.5 || (rest === 0.5 && r % 2 === 1)) r += 1;
  const y = r * step;
  return x < 0 ? -y : y;
}

// port of ampkit/formats/rounding.py verdict (tests/browser/test_front_arithmetic_browser.py)
/** What storing `value` as `stored` did: [verdict, abs error, rel error] (the engine's ampkit.formats.verdict).
 * Given the format's limits f, a finite value past the overflow line stored finite is "saturated to max".
 * @param {number} value
 * @param {number} stored
 * @param {{overflow_threshold: number, overflow_tie_up: boolean} | null} [f]
 * @returns {[string, number, number]} */
export function verdictOf(value, stored, f = null) {
  if (Number.isNaN(value)) return ["nan", NaN, NaN];
  if (!Number.isFinite(value)) return [Number.isFinite(stored) ? "saturated to max" : "inf", NaN, NaN];
  if (Number.isNaN(stored)) return ["overflow to nan", Infinity, Infinity];
  if (!Number.isFinite(stored)) return ["overflow to inf", Infinity, Infinity];
  const abs = Math.abs(stored - value);
  const rel = value !== 0 ? abs / Math.abs(value) : 0;
  const a = Math.abs(value);
  if (f && (a > f.overflow_threshold || (a === f.overflow_threshold && f.overflow_tie_up))) {
    return ["saturated to max", abs, rel];
  }
  if (stored === 0 && value !== 0) return ["flushed to zero", abs, rel];
  return [abs === 0 ? "exact" : "rounded", abs, rel];
}

/** An element with attributes and children (strings become text: never parsed as HTML). */
/** The elements that take keys: Lumino (JupyterLab, Notebook 7) tries a key binding's selector on the focused element
 * before it looks above it for data-lm-suppress-shortcuts, so each of them carries the mark (applyLook). */
const TAKES_KEYS = new Set(["input", "select", "textarea", "button"]);

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  if (TAKES_KEYS.has(tag)) node.setAttribute("data-lm-suppress-shortcuts", "true");
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "style" && typeof v === "object") Object.assign(node.style, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** Hand a change over to the page's widget manager. True says only that the page took it: a kernel-less
 * JupyterLab page (a saved notebook restored from its widget state) takes it and sends it nowhere; only a page with
 * no comm at all (ampkit's static page) refuses (false). Whether a kernel listens: kernelPresence. */
export function saveChanges(model) {
  try {
    model.save_changes();
    return true;
  } catch (err) {
    return false;
  }
}

/** Whether this view's Python object (a FrontView in a live kernel) is behind the page. The page says "hello"; the
 * kernel's FrontView answers "here" (ampkit/widgets/front.py). Until the answer the kernel counts as absent — a
 * request that needs computation shows the view's "run the notebook" line — and onChange(true) runs once when it
 * comes (the view redraws). Never a timeout: what the page shows does not depend on timing. Returns
 * {here, stop()}: `here` read at any time, stop() when the view is removed.
 * @param {any} model
 * @param {(here: boolean) => void} [onChange] */
export function kernelPresence(model, onChange = () => {}) {
  const presence = { here: false, stop: () => model.off("msg:custom", listen) };
  function listen(msg) {
    if (msg && msg.event === "here" && !presence.here) {
      presence.here = true;
      onChange(true);
    }
  }
  model.on("msg:custom", listen);
  try {
    model.send({ event: "hello" });
  } catch (err) {
    // a page with no comm at all (ampkit's static page): no kernel
  }
  return presence;
}

/** Call fn on a change of any of the model's traits `names`; returns what stops it (for render's cleanup). */
export function onChanges(model, names, fn) {
  names.forEach((n) => model.on(`change:${n}`, fn));
  return () => names.forEach((n) => model.off(`change:${n}`, fn));
}

/** Mark a toggle button pressed or not (aria-pressed and the kit's pressed look). */
export function markPressed(button, on) {
  button.setAttribute("aria-pressed", String(on));
  Object.assign(button.style, on ? { background: "#0969da", color: "#ffffff", fontWeight: "bold" }
                                 : { background: "", color: "", fontWeight: "" });
}

/** About how wide a legend label is drawn at `perChar` px a Latin character (a CJK character counts 1.8). */
export function labelWidth(label, perChar) {
  return perChar * [...label].length * (/[\u3000-\u9fff]/.test(label) ? 1.8 : 1);
}

/** A round axis step for a span: the first of `mults` times a power of ten that gives at most `most` steps. */
export function tickStep(span, most, mults = [1, 2, 5]) {
  const p = 10 ** Math.floor(Math.log10(span / most || 1));
  return [...mults, 10].map((m) => m * p).find((s) => span / s <= most) ?? 10 * p;
}

/** Axis ticks: the multiples of tickStep(hi - lo, most, mults) from lo to hi (12 significant digits). */
export function ticks(lo, hi, most, mults) {
  const step = tickStep(hi - lo, most, mults), out = [];
  for (let i = Math.ceil(lo / step - 1e-9); i * step <= hi + step * 1e-9; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

/** A Python float's repr as the engine sent it ("0.1", "-0.0", "1e-08", "inf", "nan") -> the number (Number()
 * reads a repr exactly). */
export function fromRepr(text) {
  if (text === "nan") return NaN;
  if (text === "inf" || text === "-inf") return text === "inf" ? Infinity : -Infinity;
  return Number(text);
}

/** A run's losses as numbers (Python's repr words, space-separated). */
export function parseLosses(words) {
  return words ? words.split(" ").map(fromRepr) : [];
}

/** The scales of loss curves drawn together in a W x H plot with margins m: {xmax (the last step, at least 1), top
 * (5 % over the largest finite loss; 1 if none), X(step), Y(loss)}. */
export function lossScales(series, W, H, m) {
  const xmax = Math.max(Math.max(0, ...series.map((s) => s.length)) - 1, 1);
  const finite = series.flat().filter(Number.isFinite);
  const top = finite.length ? Math.max(...finite) * 1.05 : 1;
  return { xmax, top, X: (i) => m.left + (i / xmax) * (W - m.left - m.right),
           Y: (v) => H - m.bottom - (v / top) * (H - m.top - m.bottom) };
}

/** A polyline through the finite points (a gap where a loss is inf/NaN), coordinates to 2 decimals. */
export function linePath(ys, X, Y) {
  let d = "", pen = false;
  ys.forEach((y, i) => {
    if (!Number.isFinite(y)) { pen = false; return; }
    d += `${pen ? "L" : "M"}${X(i).toFixed(2)},${Y(y).toFixed(2)}`;
    pen = true;
  });
  return d;
}

/** The kit's look (ampkit.widgets.front.look) as CSS variables on the view's root element, which keeps its keys. */
export function applyLook(el, look) {
  el.classList.add("ampkit-front");
  // keys pressed in a view belong to its controls, not to the notebook's shortcuts: Lumino (JupyterLab, Notebook 7)
  // matches no key binding once it reaches an element marked data-lm-suppress-shortcuts on its way up from the
  // focused one (which h() marks too: a binding whose selector matches the control itself would win otherwise, as
  // Notebook 7's ArrowRight, notebook:move-cursor-heading-below-or-expand, did), and the event stops here
  el.setAttribute("data-lm-suppress-shortcuts", "true");
  el.addEventListener("keydown", (event) => event.stopPropagation());
  el.style.setProperty("--ampkit-font-px", `${look.font_px}px`);
  for (const [group, colours] of Object.entries(look.colours)) {
    for (const [name, colour] of Object.entries(colours)) el.style.setProperty(`--ampkit-${group}-${name}`, colour);
  }
}

export const SVG_NS = "http://www.w3.org/2000/svg";
/** The markup a catalog template may carry (fillMarkup keeps these elements, never attributes). */
const KEEP_MARKUP = new Set(["B", "SUP", "SUB", "SMALL", "CODE", "I"]);

/** An SVG element with attributes and children (strings become text: never parsed). */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** A template of the kit's catalog with its {fields} (and {fields:spec}) filled by the strings the engine printed. */
export function fillText(template, fields) {
  return template.replace(/\{(\w+)(?::[^{}]*)?\}/g, (m, k) => String(fields[k]));
}

/** A template from the kit's catalog ("<b>scale 2<sup>{k}</sup> in {fmt}</b>: ") as nodes, its {fields} filled in
 * as text; only simple inline markup (b, sup, sub, small, code, i) is kept, never attributes. */
export function fillMarkup(template, fields) {
  const body = new DOMParser().parseFromString(`<body>${template}</body>`, "text/html").body;
  const walk = (node) => [...node.childNodes].flatMap((c) => {
    if (c.nodeType === Node.TEXT_NODE) {
      return c.textContent.split(/\{(\w+)\}/).map((part, i) => (i % 2 ? String(fields[part]) : part))
        .filter((t) => t !== "").map((t) => document.createTextNode(t));
    }
    if (c.nodeType !== Node.ELEMENT_NODE) return [];
    if (!KEEP_MARKUP.has(c.tagName)) return walk(c);
    const el = document.createElement(c.tagName.toLowerCase());
    el.append(...walk(c));
    return [el];
  });
  return walk(body);
}
