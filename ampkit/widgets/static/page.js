// ampkit's static-page runtime: draws the kit's views (ampkit.widgets.front.FrontView, anywidgets) in a page with no
// kernel and no widget manager — an HTML export of a saved notebook (ampkit/_nbexport.py) or a page of the book.
// No build step, nothing fetched: each view's whole ES module (_esm = kit.js + the view's js), its _css and its
// data travel in the page's saved widget state (<script type="application/vnd.jupyter.widget-state+json">).
//
// Generic: it knows no view. For each placeholder <div class="ampkit-static-view" data-model-id="..."> it makes a
// minimal anywidget-compatible model from the saved state (get, set, on/off("change:x"), save_changes that throws
// "no kernel", so kit.js's saveChanges returns false; send a no-op; no widget_manager), imports the view's _esm
// from a Blob URL, adds its _css once, calls initialize({model}) if the module exports it, then
// render({model, el}) — as anywidget 0.11 does (its nbextension/index.js: loadEsm, loadWidget, modelProxy); the
// placeholder's still picture is replaced once the view has rendered (kept, with a console error, if it fails).

export const STATE_MIME = "application/vnd.jupyter.widget-state+json";

/** Whether a and b are the same value (as Backbone's set decides to fire "change": deep for objects). */
function same(a, b) {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A model with anywidget's interface over `state` (one saved model's state), with no kernel behind it. */
export function makeModel(state) {
  const values = { ...state };
  const listeners = new Map();   // event name -> [callback, ...]
  const fire = (name, ...args) => { for (const cb of [...(listeners.get(name) ?? [])]) cb(...args); };
  const model = {
    get: (name) => values[name],
    set(name, value) {
      const changes = typeof name === "object" && name !== null ? name : { [name]: value };
      const changed = Object.keys(changes).filter((k) => !same(values[k], changes[k]));
      for (const k of changed) values[k] = changes[k];
      for (const k of changed) fire(`change:${k}`, model, values[k], {});
      if (changed.length) fire("change", model, {});
    },
    on(name, callback) {
      for (const n of String(name).split(/\s+/).filter(Boolean)) {
        if (!listeners.has(n)) listeners.set(n, []);
        listeners.get(n).push(callback);
      }
    },
    off(name, callback) {
      const names = name ? String(name).split(/\s+/).filter(Boolean) : [...listeners.keys()];
      for (const n of names) {
        if (!callback) listeners.delete(n);
        else listeners.set(n, (listeners.get(n) ?? []).filter((cb) => cb !== callback));
      }
    },
    save_changes() { throw new Error("no kernel: this page keeps its changes to itself"); },
    send() {},
  };
  return model;
}

/** The saved widget models of the page: {model_id: {model_name, state, ...}}. */
export function savedModels(root = document) {
  const tag = root.querySelector(`script[type="${STATE_MIME}"]`);
  return tag ? JSON.parse(tag.textContent).state ?? {} : {};
}

// what JupyterLab's output area gives a view and a static page does not: its user-interface font and colour
const BASE_CSS = `.ampkit-static-view { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  color: var(--jp-ui-font-color1, #24292f); }`;
const modules = new Map();   // _esm text -> the imported module (a page with two views of one kind imports once)
const styles = new Set();

function importEsm(esm) {
  if (!modules.has(esm)) {
    const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
    modules.set(esm, import(url).finally(() => URL.revokeObjectURL(url)));
  }
  return modules.get(esm);
}

function addCss(css, doc) {
  if (!css || styles.has(css)) return;
  styles.add(css);
  const style = doc.createElement("style");
  style.textContent = css;
  doc.head.append(style);
}

/** Draw the view saved as `state` into `el` (its placeholder); resolves to the view's element. */
export async function renderView(state, el) {
  const doc = el.ownerDocument;
  // as anywidget 0.11 loads a module: a default export (an object, or a function returning one) or, deprecated,
  // a named render
  const mod = await importEsm(state._esm);
  let widget = mod.render ? { render: mod.render } : mod.default;
  if (typeof widget === "function") widget = await widget();
  addCss(state._css, doc);
  const model = makeModel(state);
  const signal = new AbortController().signal;   // a static page never takes a view down
  if (widget.initialize) await widget.initialize({ model, signal });
  const view = doc.createElement("div");
  for (const c of state._dom_classes ?? []) view.classList.add(c);
  view.classList.add("ampkit-static-rendered");
  // the still picture stays until the view has drawn: a view that fails leaves the picture (and a console error)
  const still = [...el.childNodes];
  el.append(view);
  await widget.render({ model, el: view, signal });
  for (const node of still) node.remove();
  return view;
}

/** Draw every placeholder under `root`; resolves to the number drawn. A view that fails is logged, others go on. */
export async function renderViews(root = document) {
  const models = savedModels(root);
  addCss(BASE_CSS, root.ownerDocument ?? root);
  const places = [...root.querySelectorAll(".ampkit-static-view[data-model-id]")];
  const done = await Promise.all(places.map(async (el) => {
    const saved = models[el.dataset.modelId];
    try {
      if (!saved || typeof saved.state?._esm !== "string") throw new Error("no saved state with a module");
      await renderView(saved.state, el);
      el.dataset.rendered = "true";
      return 1;
    } catch (err) {
      el.dataset.rendered = "failed";
      console.error(`ampkit: view ${el.dataset.modelId} not drawn (its still picture stays):`, err);
      return 0;
    }
  }));
  const drawn = done.reduce((a, b) => a + b, 0);
  (root.body ?? root).dataset.ampkitViews = `${drawn}/${places.length}`;
  return drawn;
}
