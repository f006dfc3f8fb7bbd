// ampkit's front-end kit: what every view drawn in the browser shares (ampkit/widgets/front.py prepends this file
// to each view's module; no build step, nothing fetched). Only trivial arithmetic lives here — a rounding to a
// format whose limits the engine sent, a number printed the way Python prints it — and tests/browser check each
// formula against the Python engine on random inputs (tests/browser/test_front_arithmetic_browser.py).

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

/** Python's f"{x:.{n}e}" ("1.23e-08"). */
export function pySci(x, n) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const [m, e] = x.toExponential(n).split("e");
  const exp = parseInt(e, 10);
  return `${Object.is(x, -0) ? "-" : ""}${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
}

/** x rounded to the nearest value of a binary format (round half to even, subnormals kept), given the format's
 * limits as the engine sent them: {mantissa_bits, emin, max, overflow_threshold, overflow_tie_up, overflows_to,
 * via_float32}. via_float32: torch casts a float64 to a narrower format through float32 (two roundings). */
export function roundTo(x, f) {
  if (f.via_float32) x = Math.fround(x);
  if (Number.isNaN(x) || !Number.isFinite(x) || x === 0) return x;
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

/** What storing `value` as `stored` did (the engine's ampkit.formats.verdict, for finite inputs and IEEE casts). */
export function verdictOf(value, stored) {
  if (Number.isNaN(value)) return ["nan", NaN, NaN];
  if (!Number.isFinite(value)) return [Number.isFinite(stored) ? "saturated to max" : "inf", NaN, NaN];
  if (Number.isNaN(stored)) return ["overflow to nan", Infinity, Infinity];
  if (!Number.isFinite(stored)) return ["overflow to inf", Infinity, Infinity];
  const abs = Math.abs(stored - value);
  const rel = value !== 0 ? abs / Math.abs(value) : 0;
  if (stored === 0 && value !== 0) return ["flushed to zero", abs, rel];
  return [abs === 0 ? "exact" : "rounded", abs, rel];
}

/** An element with attributes and children (strings become text: never parsed as HTML). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "style" && typeof v === "object") Object.assign(node.style, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** Save a change to the kernel when there is one; without a kernel (a saved notebook, a web page) the view keeps
 * the change to itself and returns false. */
export function saveChanges(model) {
  try {
    model.save_changes();
    return true;
  } catch (err) {
    return false;
  }
}

/** The kit's look (ampkit.widgets.front.look) as CSS variables on the view's root element, which keeps its keys. */
export function applyLook(el, look) {
  el.classList.add("ampkit-front");
  // keys pressed in a view belong to its controls, not to the notebook's shortcuts: Lumino (JupyterLab, Notebook 7)
  // matches no key binding at or above an element marked data-lm-suppress-shortcuts, and the event stops here
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
