"""A static HTML page of an executed notebook whose views still move, with no kernel and no network (developer
tool, like :mod:`ampkit._nbtools`; the book of the series builds its pages from it).

    python -m ampkit._nbexport notebooks/03_loss_scaling.ipynb -o 03_loss_scaling.html

nbconvert's HTML export (``HTMLExporter``, template ``lab``) draws saved widgets with
``@jupyter-widgets/html-manager`` loaded from a CDN (``jupyter_widgets_base_url``), and loads require.js, MathJax and
mermaid from cdnjs: offline, none of them loads. This export keeps nbconvert's page (prose, code, outputs, figures)
and changes what would be fetched:

- each kit view's output (``application/vnd.jupyter.widget-view+json`` of an :class:`ampkit.widgets.front.FrontView`)
  becomes a placeholder ``<div class="ampkit-static-view" data-model-id=…>`` holding the still picture saved beside
  it; ``ampkit/widgets/static/page.js`` (inlined, an ES module of the package, no build step) draws the view there from
  the saved state (its ES module ``_esm``, ``_css``, ``look``, ``text`` and data) and then removes the picture;
- the saved state of the kit's views is inlined as nbconvert inlines it (a ``<script type=
  "application/vnd.jupyter.widget-state+json">``): the views and their layout models, nothing else;
- no require.js, no MathJax, no mermaid, no widget manager from a CDN: nothing in the page points outside it. The
  committed notebooks hold no TeX (``ampkit._nbstatic`` refuses it; an offline page shows it literally), so no math
  renderer is needed; :func:`tex_warnings` names what a notebook from elsewhere would show literally.

Other widgets' state: none should be saved (``ampkit._nbtools.view_state_problems`` refuses it in the committed
notebooks); a notebook from elsewhere that has some exports with those widgets' still pictures (their state left
out), since nothing in the page could draw them.

>>> html = export_html(Path(__file__).parents[1] / "notebooks" / "00_start_here.ipynb")
>>> html.count('class="ampkit-static-view'), html.count("<script src="), html.count("<link ")   # nothing fetched
(1, 0, 0)
"""
from __future__ import annotations

import argparse
import copy
import html
import re
import sys
import time
from pathlib import Path
from typing import Any

from ampkit._nbstatic import static_view_problems
from ampkit._nbtools import keep_view_state

__all__ = ["export_html", "write_html", "kit_views_only", "static_view_html", "notebook_title", "tex_warnings",
           "RUNTIME"]

#: The static-page runtime that draws the kit's views from their saved state (an ES module in the package).
RUNTIME = Path(__file__).parent / "widgets" / "static" / "page.js"
_TEMPLATE_NAME = "ampkit_static.html.j2"
# nbconvert's lab page with nothing fetched from outside: the blocks that load require.js, the widget manager,
# MathJax and mermaid from a CDN are empty, and a kit view's output is a placeholder with its still picture
_TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block data_widget_view scoped %}
{{ resources.ampkit_view_html(output.data, extra_class) }}
{%- endblock data_widget_view -%}
{%- block footer_js -%}
{%- if resources.ampkit_runtime %}
<script type="module">
{{ resources.ampkit_runtime }}
</script>
{%- endif %}
{%- endblock footer_js -%}
"""


def static_view_html(data: dict, extra_class: str = "") -> str:
    """The placeholder of one kit view's output (its ``data``: the ``application/vnd.jupyter.widget-view+json``
    model id, and the still picture ``image/png`` with ``text/plain`` as its alt text), where ``page.js`` draws the
    view; this page and the book's (:mod:`ampkit._book`) both use it.

    >>> print(static_view_html({"application/vnd.jupyter.widget-view+json": {"model_id": "00_x-1"},
    ...                         "image/png": "iVBO", "text/plain": "View(a<b)"}))
    <div class="jp-OutputArea-output ampkit-static-view" data-model-id="00_x-1">
    <img class="ampkit-static-still" src="data:image/png;base64,iVBO"
         alt="View(a&lt;b)"></div>
    """
    model_id = data["application/vnd.jupyter.widget-view+json"]["model_id"]
    classes = " ".join(["jp-OutputArea-output", "ampkit-static-view", *str(extra_class or "").split()])
    still = ""
    if "image/png" in data:
        png = data["image/png"]
        png = png if isinstance(png, str) else "".join(png)
        alt = data.get("text/plain", "")
        alt = alt if isinstance(alt, str) else "".join(alt)
        still = (f'<img class="ampkit-static-still" src="data:image/png;base64,{png.strip()}"\n'
                 f'     alt="{html.escape(alt, quote=True)}">')
    return f'<div class="{classes}" data-model-id="{html.escape(model_id, quote=True)}">\n{still}</div>'


def kit_views_only(nb: Any, name: str) -> Any:
    """A copy of ``nb`` whose saved widget state holds only the kit's views and their parts, as
    :func:`ampkit._nbtools.keep_view_state` keeps it (model ids ``<name>-<n>``); any other widget's output keeps its
    still picture (nbconvert shows a widget view only when its model is saved)."""
    nb = copy.deepcopy(nb)
    keep_view_state(nb, name)
    return nb


def tex_warnings(nb: Any) -> list[str]:
    """The TeX in ``nb``'s markdown that the page shows literally (it loads no math renderer): ``ampkit._nbstatic``'s
    findings."""
    return [p for p in static_view_problems(nb.get("cells", []), secrets=()) if "TeX" in p]


def _runtime(runtime_url: str | None) -> str:
    if runtime_url:
        return f'import {{ renderViews }} from "{runtime_url}";\nrenderViews(document);'
    code = RUNTIME.read_text(encoding="utf-8")
    if "</script" in code.lower():
        raise ValueError(f"{RUNTIME} contains '</script', which would end the inline script")
    return code + "\nrenderViews(document);"


def notebook_title(nb: Any, fallback: str) -> str:
    """The text of the notebook's first ``# `` heading, markup removed (the page's title; the book's too)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            m = re.match(r"\s*#\s+(.+)", "".join(cell.get("source", "")))
            if m:
                return re.sub(r"<[^>]+>|[*_`]", "", m.group(1)).strip()
    return fallback


def export_html(path: str | Path, runtime_url: str | None = None) -> str:
    """The static page of the executed notebook at ``path``: nbconvert's lab page, nothing fetched, kit views drawn
    by ``page.js`` (inlined; with ``runtime_url``, imported from there instead, e.g. a book's shared copy)."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    path = Path(path)
    nb = kit_views_only(nbformat.read(path, as_version=4), path.stem)
    nb.metadata.setdefault("title", notebook_title(nb, path.stem))
    language = nb.metadata.get("ampkit", {}).get("language", "en").split("_")[0]
    exporter = HTMLExporter(template_name="lab", template_file=_TEMPLATE_NAME, language_code=language,
                            extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})])
    has_views = bool(nb.metadata.get("widgets"))
    resources = {"metadata": {"name": path.stem, "path": str(path.parent)},
                 "ampkit_runtime": _runtime(runtime_url) if has_views else "", "ampkit_view_html": static_view_html}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def write_html(path: str | Path, out: str | Path, runtime_url: str | None = None) -> float:
    """Write :func:`export_html` of ``path`` to ``out``; returns the seconds it took."""
    t0 = time.perf_counter()
    Path(out).write_text(export_html(path, runtime_url), encoding="utf-8")
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m ampkit._nbexport", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="executed notebooks (.ipynb)")
    parser.add_argument("-o", "--out", help="the page (one notebook) or a folder (several); default: NAME.html here")
    parser.add_argument("--runtime-url", help="import page.js from this URL instead of inlining it")
    args = parser.parse_args(argv)
    if args.out and len(args.notebooks) > 1:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    for name in args.notebooks:
        nb_path = Path(name)
        out = Path(args.out) if args.out else Path(nb_path.stem + ".html")
        if out.is_dir():
            out = out / (nb_path.stem + ".html")
        seconds = write_html(nb_path, out, args.runtime_url)
        import nbformat

        warnings = tex_warnings(nbformat.read(nb_path, as_version=4))
        print(f"{name} -> {out}: {out.stat().st_size / 1024:.0f} KB in {seconds:.2f} s"
              + (f"; shown literally (no math renderer offline): {warnings}" if warnings else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
