"""``formation explain --format dot|svg|html``: the certificate's DAG, laid out top-down.

Rules (the contract):

1. What is drawn is exactly a :class:`~mechanism.formation._explain_view.View`: its shown nodes
   (at most ``--max-nodes``), one dashed *collapsed* box per node whose references are not all
   drawn (naming them and how many nodes below are not drawn), and a caption saying what was
   left out. Edges run from a node down to its premises, in the table's reference order.
2. Styling is by class, identically for every engine: ``node`` plus ``root``, ``failing`` (the
   node the checker stopped at: the only node filled red), ``on-path`` (root → failing node),
   ``blamed`` (the premises the broken rule looked at), ``typed``/``untyped``; edges ``on-path``
   along the failing path. Every node group has ``id="node-<i>"``, ``data-index``,
   ``data-state`` and a ``<title>`` tooltip holding the node's full record as JSON (node,
   certificate step, type, depth, quote rank, state).
3. Layout (docs/adr/0004): Graphviz's ``dot`` when the binary is on ``PATH`` (``-Tplain``
   positions and splines), else ``grandalf``'s Sugiyama layout (a Python dependency, always
   installed); ``engine`` forces one. A ``dot`` that fails or times out falls back to grandalf.
   The SVG is drawn here from the positions either way, so both engines give the same
   structure; ``data-engine`` on the ``<svg>`` says which one laid it out.
4. ``render_dot`` emits Graphviz source with the same ids, classes, colours and tooltips.
5. ``render_html`` is one self-contained page (inline CSS, no script, no network fetch): the
   verdict and rule at the top, the SVG, a legend, the certificate steps of the drawn nodes
   (the failing one highlighted) and the checker's report as JSON.
6. Nothing is clipped and the graph fills the picture: boxes and captions are sized by their
   text as DejaVu Sans draws it (:func:`mechanism._svg.text_width`, bold where the style makes
   it bold); a caption wider than the graph (and :data:`_CAPTION_WIDTH`) is wrapped at spaces;
   the graph is centred under the captions; the HTML page's figure hugs the SVG.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from typing import Any, Final

import attrs

from mechanism._svg import FONT_FAMILY, escape, text_width, wrap
from mechanism.formation._explain import Explanation
from mechanism.formation._explain_view import View
from mechanism.formation._wire import NODE_REFERENCE_FIELDS

__all__ = ["ENGINES", "render_dot", "render_html", "render_svg"]

ENGINES: Final = ("auto", "dot", "grandalf")
_DOT_TIMEOUT: Final = 60.0
_FONT: Final = 12.0  # px, every text of the picture
_LINE: Final = 16.0
_PAD: Final = 10.0
_MARGIN: Final = 16.0
_CAPTION: Final = 22.0  # the band of one caption line (its line and the gap to the graph)
#: A caption wider than the graph is wrapped to the graph's width, or to this at least (rule 6).
_CAPTION_WIDTH: Final = 400.0

_COLOURS: Final = {
    "typed": ("#e8f3ea", "#4a7c59"),
    "untyped": ("#f0f0f0", "#9e9e9e"),
    "failing": ("#ffcdd2", "#c62828"),
    "collapsed": ("#ffffff", "#9e9e9e"),
}


@attrs.frozen
class _Box:
    key: str
    index: int | None  # None: a collapsed box
    lines: tuple[str, ...]
    classes: tuple[str, ...]
    tooltip: str

    @property
    def width(self) -> float:
        bold = "failing" in self.classes  # .node.failing text is bold (_SVG_STYLE)
        return max(text_width(line, _FONT, bold=bold) for line in self.lines) + 2 * _PAD

    @property
    def height(self) -> float:
        return len(self.lines) * _LINE + _PAD


@attrs.frozen
class _Arrow:
    tail: str
    head: str
    label: str
    classes: tuple[str, ...]


@attrs.frozen
class _Layout:
    engine: str
    width: float
    height: float
    centres: dict[str, tuple[float, float]]
    routes: list[list[tuple[float, float]]]  # per arrow; bezier (dot) or polyline (grandalf)
    curved: bool


# --------------------------------------------------------------------------- the elements


def _elements(view: View) -> tuple[list[_Box], list[_Arrow]]:
    explanation = view.explanation
    path = explanation.failing_path
    path_edges = set(itertools.pairwise(path))
    boxes: list[_Box] = []
    arrows: list[_Arrow] = []
    shown = set(view.shown)
    for index in view.shown:
        node = explanation.nodes[index]
        classes = ["node", "typed" if node.type is not None else "untyped"]
        if index == explanation.root:
            classes.append("root")
        if index == explanation.index:
            classes.append("failing")
        elif index in path:
            classes.append("on-path")
        if index in explanation.blamed:
            classes.append("blamed")
        title = f"{index} {node.tag}" + ("  (root)" if index == explanation.root else "")
        if index == explanation.index and explanation.rule is not None:
            kind = "✗ " + explanation.rule.replace("_", " ").lower()
        else:
            kind = node.type or "not typed"
        lines = [title, kind]
        if node.tag == "ATOM":
            lines.append(node.record["payload_digest"][:19] + "…")
        tooltip = json.dumps(
            {
                "node": index,
                "record": node.record,
                "certificate_step": node.step,
                "type": node.type,
                "state": node.state,
                "required_depth": node.depth,
                "quote_rank": node.rank,
                "reached_from_root": node.reached,
            },
            indent=1,
            sort_keys=True,
        )
        boxes.append(_Box(f"n{index}", index, tuple(lines), tuple(classes), tooltip))
        fields = NODE_REFERENCE_FIELDS[node.tag]
        for field, reference in zip(fields, node.references, strict=True):
            if reference in shown:
                arrow_classes = ["edge"]
                if (index, reference) in path_edges:
                    arrow_classes.append("on-path")
                if index == explanation.index and reference in explanation.blamed:
                    arrow_classes.append("blamed")
                arrows.append(_Arrow(f"n{index}", f"n{reference}", field, tuple(arrow_classes)))
    for entry in view.collapsed:
        hidden = ", ".join(str(r) for r in entry.hidden)
        collapsed_lines = (f"⋯ node {hidden}", f"{entry.below} not drawn")
        tooltip = (
            f"node {entry.parent} references node(s) {hidden}; {entry.below} node(s) of its "
            f"closure are not drawn (--max-nodes {view.max_nodes})"
        )
        key = f"c{entry.parent}"
        boxes.append(_Box(key, None, collapsed_lines, ("node", "collapsed"), tooltip))
        arrows.append(_Arrow(f"n{entry.parent}", key, "collapsed", ("edge", "collapsed")))
    return boxes, arrows


def _fill(box: _Box) -> tuple[str, str]:
    if "collapsed" in box.classes:
        return _COLOURS["collapsed"]
    if "failing" in box.classes:
        return _COLOURS["failing"]
    return _COLOURS["typed" if "typed" in box.classes else "untyped"]


# --------------------------------------------------------------------------- dot source


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_source(boxes: list[_Box], arrows: list[_Arrow], *, geometry: bool) -> str:
    lines = [
        "digraph formation {",
        '  graph [rankdir=TB, nodesep=0.25, ranksep=0.45, id="formation-dag"];',
        '  node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=10];',
        "  edge [arrowsize=0.7];",
    ]
    for box in boxes:
        fill, stroke = _fill(box)
        attributes = {
            "id": "node-" + box.key[1:] if box.index is not None else "collapsed-" + box.key[1:],
            "class": " ".join(box.classes),
            "label": "\n".join(box.lines),
            "tooltip": box.tooltip,
            "fillcolor": fill,
            "color": "#e65100" if "on-path" in box.classes else stroke,
        }
        if "collapsed" in box.classes:
            attributes["style"] = "rounded,dashed"
        if "failing" in box.classes:
            attributes["penwidth"] = "3"
        if geometry:
            attributes.update(
                fixedsize="true", width=f"{box.width / 72:.4f}", height=f"{box.height / 72:.4f}"
            )
        rendered = ", ".join(f"{key}={_dot_string(value)}" for key, value in attributes.items())
        lines.append(f"  {box.key} [{rendered}];")
    for arrow in arrows:
        colour = "#c62828" if "on-path" in arrow.classes else "#616161"
        style = ', style="dashed"' if "collapsed" in arrow.classes else ""
        lines.append(
            f"  {arrow.tail} -> {arrow.head} [class={_dot_string(' '.join(arrow.classes))}, "
            f"tooltip={_dot_string(arrow.label)}, color={_dot_string(colour)}{style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_dot(view: View) -> str:
    """Graphviz source for the view (rules 2 and 4)."""
    boxes, arrows = _elements(view)
    return _dot_source(boxes, arrows, geometry=False)


# --------------------------------------------------------------------------- layouts


def _layout_dot(boxes: list[_Box], arrows: list[_Arrow]) -> _Layout | None:
    binary = shutil.which("dot")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "-Tplain"],
            input=_dot_source(boxes, arrows, geometry=True).encode("utf-8"),
            capture_output=True,
            timeout=_DOT_TIMEOUT,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    centres: dict[str, tuple[float, float]] = {}
    routes: dict[tuple[str, str], list[tuple[float, float]]] = {}
    height = width = 0.0
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if parts[:1] == ["graph"]:
            width, height = float(parts[2]) * 72, float(parts[3]) * 72
        elif parts[:1] == ["node"]:
            centres[parts[1]] = (float(parts[2]) * 72, height - float(parts[3]) * 72)
        elif parts[:1] == ["edge"]:
            count = int(parts[3])
            values = [float(value) * 72 for value in parts[4 : 4 + 2 * count]]
            routes[(parts[1], parts[2])] = [
                (values[i], height - values[i + 1]) for i in range(0, len(values), 2)
            ]
    if any(box.key not in centres for box in boxes):
        return None
    return _Layout(
        "dot",
        width,
        height,
        centres,
        [routes.get((a.tail, a.head), []) for a in arrows],
        curved=True,
    )


class _Size:
    def __init__(self, width: float, height: float) -> None:
        self.w = width
        self.h = height
        self.xy = (0.0, 0.0)


def _layout_grandalf(boxes: list[_Box], arrows: list[_Arrow]) -> _Layout:
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout
    from grandalf.routing import EdgeViewer, route_with_lines

    vertices = {box.key: Vertex(box.key) for box in boxes}
    for box in boxes:
        vertices[box.key].view = _Size(box.width, box.height)
    edges = [Edge(vertices[a.tail], vertices[a.head]) for a in arrows]
    graph = Graph(list(vertices.values()), edges)
    centres: dict[str, tuple[float, float]] = {}
    offset = 0.0
    for component in graph.C:
        layout = SugiyamaLayout(component)
        layout.xspace, layout.yspace = 18, 34
        layout.init_all()
        layout.draw()
        for edge in component.sE:
            edge.view = EdgeViewer()
        layout.route_edge = route_with_lines
        layout.draw_edges()
        members = list(component.sV)
        left = min(v.view.xy[0] - v.view.w / 2 for v in members)
        top = min(v.view.xy[1] - v.view.h / 2 for v in members)
        right = max(v.view.xy[0] + v.view.w / 2 for v in members)
        for vertex in members:
            x, y = vertex.view.xy
            centres[vertex.data] = (x - left + offset, y - top)
        for edge in component.sE:
            edge.view._pts = [(x - left + offset, y - top) for x, y in edge.view._pts]
        offset += right - left + 40
    width = max((centres[b.key][0] + b.width / 2 for b in boxes), default=0.0)
    height = max((centres[b.key][1] + b.height / 2 for b in boxes), default=0.0)
    routes = [list(getattr(edge.view, "_pts", [])) for edge in edges]
    return _Layout("grandalf", width, height, centres, routes, curved=False)


def _layout(boxes: list[_Box], arrows: list[_Arrow], engine: str) -> _Layout:
    if engine not in ENGINES:
        raise ValueError(f"unknown layout engine {engine!r}")
    if engine in ("auto", "dot"):
        laid = _layout_dot(boxes, arrows)
        if laid is not None:
            return laid
    return _layout_grandalf(boxes, arrows)


# --------------------------------------------------------------------------- SVG

_SVG_STYLE: Final = """
.node rect { fill: #e8f3ea; stroke: #4a7c59; stroke-width: 1.2; }
.node.untyped rect { fill: #f0f0f0; stroke: #9e9e9e; }
.node.root rect { stroke-width: 2.4; }
.node.on-path rect { stroke: #e65100; stroke-width: 2.4; }
.node.blamed rect { stroke: #ef6c00; stroke-dasharray: 5 2; stroke-width: 2; }
.node.failing rect { fill: #ffcdd2; stroke: #c62828; stroke-width: 3.2; }
.node.collapsed rect { fill: #ffffff; stroke: #9e9e9e; stroke-dasharray: 4 3; }
.node text { fill: #212121; }
.node.untyped text, .node.collapsed text { fill: #616161; }
.node.failing text { fill: #b71c1c; font-weight: bold; }
.edge path { fill: none; stroke: #757575; stroke-width: 1.2; }
.edge.on-path path { stroke: #c62828; stroke-width: 2.6; }
.edge.blamed path { stroke: #ef6c00; stroke-width: 2; }
.edge.collapsed path { stroke-dasharray: 4 3; }
.caption { fill: #424242; }
.caption.verdict { font-weight: bold; }
"""


def _route(points: list[tuple[float, float]], curved: bool) -> str:
    if not points:
        return ""
    head = f"M{points[0][0]:.1f},{points[0][1]:.1f}"
    rest = " ".join(f"{x:.1f},{y:.1f}" for x, y in points[1:])
    if curved and (len(points) - 1) % 3 == 0:
        return f"{head} C{rest}"
    return f"{head} L{rest}"


def _verdict_line(explanation: Explanation) -> str:
    text = explanation.status + (f" {explanation.reason}" if explanation.reason else "")
    if explanation.index is not None:
        text += f" at node {explanation.index} ({explanation.rule})"
    elif explanation.rule is not None:
        text += f" ({explanation.rule})"
    return text


def _captions(view: View, graph_width: float) -> tuple[list[str], list[str], float]:
    """The verdict's and the summary's lines, wrapped to the graph (rule 6), and the widest."""
    width = max(graph_width, _CAPTION_WIDTH)
    verdict = wrap(_verdict_line(view.explanation), width, _FONT, bold=True)
    summary = wrap(view.summary(), width, _FONT)
    widest = max(
        [text_width(line, _FONT, bold=True) for line in verdict]
        + [text_width(line, _FONT) for line in summary]
    )
    return verdict, summary, widest


def _caption(kind: str, baseline: float, lines: list[str]) -> str:
    """A caption's ``<text>``, one ``<tspan>`` a line, the first on ``baseline``."""
    spans = "".join(
        f'<tspan x="{_MARGIN}" dy="{0 if n == 0 else _LINE:.0f}">{escape(line)}</tspan>'
        for n, line in enumerate(lines)
    )
    return f'<text class="caption {kind}" x="{_MARGIN}" y="{baseline:.0f}">{spans}</text>'


def render_svg(view: View, engine: str = "auto") -> str:
    """The view as a standalone SVG document (rules 1–3, 6)."""
    boxes, arrows = _elements(view)
    laid = _layout(boxes, arrows, engine) if boxes else _Layout("none", 0, 0, {}, [], False)
    verdict, summary, widest = _captions(view, laid.width)
    content = max(laid.width, widest)
    width = content + 2 * _MARGIN
    top = _MARGIN + _CAPTION + _LINE * (len(verdict) - 1)
    height = top + laid.height + _CAPTION + _LINE * (len(summary) - 1) + _MARGIN
    left = _MARGIN + (content - laid.width) / 2  # the graph centred under the captions
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" id="formation-dag" '
        f'data-engine="{laid.engine}" data-nodes="{len(view.shown)}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'font-family="{FONT_FAMILY}" font-size="{_FONT:.0f}">',
        f"<style>{_SVG_STYLE}</style>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#757575"/></marker>',
        '<marker id="arrow-path" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#c62828"/></marker>',
        "</defs>",
        _caption("verdict", _MARGIN + 12, verdict),
        f'<g class="graph" transform="translate({left:.1f},{top:.1f})">',
        '<g class="edges">',
    ]
    for arrow, points in zip(arrows, laid.routes, strict=True):
        marker = "arrow-path" if "on-path" in arrow.classes else "arrow"
        tail, head = arrow.tail[1:], arrow.head[1:]
        out.append(
            f'<g class="{" ".join(arrow.classes)}" data-tail="{tail}" data-head="{head}">'
            f"<title>{escape(f'node {tail} → {arrow.label} → node {head}')}</title>"
            f'<path d="{_route(points, laid.curved)}" marker-end="url(#{marker})"/></g>'
        )
    out.append("</g>")
    out.append('<g class="nodes">')
    for box in boxes:
        x, y = laid.centres[box.key]
        left, upper = x - box.width / 2, y - box.height / 2
        if box.index is not None:
            state = view.explanation.nodes[box.index].state
            ident = f'id="node-{box.index}" data-index="{box.index}" data-state="{state}"'
        else:
            ident = f'id="collapsed-{box.key[1:]}" data-parent="{box.key[1:]}"'
        out.append(f'<g {ident} class="{" ".join(box.classes)}">')
        out.append(f"<title>{escape(box.tooltip)}</title>")
        out.append(
            f'<rect x="{left:.1f}" y="{upper:.1f}" width="{box.width:.1f}" '
            f'height="{box.height:.1f}" rx="6" ry="6"/>'
        )
        for number, line in enumerate(box.lines):
            baseline = upper + _PAD / 2 + _LINE * (number + 1) - 4
            out.append(
                f'<text x="{x:.1f}" y="{baseline:.1f}" text-anchor="middle">{escape(line)}</text>'
            )
        out.append("</g>")
    out.append("</g></g>")
    out.append(_caption("summary", height - _MARGIN - _LINE * (len(summary) - 1), summary))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML

_PAGE_STYLE: Final = """
body { font-family: "DejaVu Sans", Verdana, sans-serif; margin: 24px; color: #212121; }
header { border-left: 8px solid #4a7c59; padding: 8px 16px; background: #f5f9f5; }
header.INVALID { border-color: #c62828; background: #fff5f5; }
header.UNKNOWN { border-color: #f9a825; background: #fffbef; }
h1 { font-size: 22px; margin: 4px 0; }
h2 { font-size: 16px; margin-top: 28px; }
.why { font-size: 15px; }
.spec, .summary { color: #555; }
code { font-family: "DejaVu Sans Mono", monospace; }
figure { margin: 16px 0; overflow: auto; border: 1px solid #ddd; padding: 8px;
  width: fit-content; max-width: calc(100% - 18px); }  /* the box hugs the drawing */
figure svg { display: block; max-width: 100%; height: auto; }  /* a large DAG shrinks to fit */
.legend span { display: inline-block; margin-right: 16px; }
.swatch { display: inline-block; width: 14px; height: 10px; border: 2px solid; margin-right: 4px;
  vertical-align: middle; border-radius: 3px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #e0e0e0; padding: 3px 10px; text-align: left; }
tr.failed td { background: #ffcdd2; font-weight: bold; }
tr.gap td { color: #777; font-style: italic; }
pre { background: #f7f7f7; padding: 8px; overflow: auto; font-size: 12px; }
"""

_LEGEND: Final = (
    '<p class="legend">'
    '<span><i class="swatch" style="background:#ffcdd2;border-color:#c62828"></i>'
    "failing node</span>"
    '<span><i class="swatch" style="background:#e8f3ea;border-color:#e65100"></i>'
    "root → failing node</span>"
    '<span><i class="swatch" style="background:#e8f3ea;border-color:#ef6c00;'
    'border-style:dashed"></i>premises the rule looked at</span>'
    '<span><i class="swatch" style="background:#e8f3ea;border-color:#4a7c59"></i>typed</span>'
    '<span><i class="swatch" style="background:#f0f0f0;border-color:#9e9e9e"></i>'
    "not typed</span>"
    '<span><i class="swatch" style="background:#fff;border-color:#9e9e9e;'
    'border-style:dashed"></i>collapsed (not drawn)</span>'
    "</p>"
)


def _steps_table(view: View) -> str:
    explanation = view.explanation
    if explanation.steps is None:
        return "<p>The certificate was not admitted: no steps to show.</p>"
    wanted = set(view.shown)
    rows = ["<tr><th>step</th><th>node</th><th>rule</th><th>premises</th><th>state</th></tr>"]
    skipped = 0
    steps = zip(explanation.steps, explanation.step_states, strict=True)
    for index, (step, state) in enumerate(steps):
        if index not in wanted and state != "failed":
            skipped += 1
            continue
        if skipped:
            rows.append(f'<tr class="gap"><td colspan="5">⋯ {skipped} step(s) not shown</td></tr>')
            skipped = 0
        css = "failed" if state == "failed" else ""
        rows.append(
            f'<tr class="{css}" id="step-{index}"><td>{index}</td><td>{step["node"]}</td>'
            f"<td>{escape(step['rule'])}</td><td>{escape(json.dumps(step['premises']))}</td>"
            f"<td>{state}</td></tr>"
        )
    if skipped:
        rows.append(f'<tr class="gap"><td colspan="5">⋯ {skipped} step(s) not shown</td></tr>')
    return "<table>" + "\n".join(rows) + "</table>"


def render_html(view: View, engine: str = "auto") -> str:
    """One self-contained page (rule 5)."""
    explanation = view.explanation
    report = explanation.report
    rule = f'<p class="why">{escape(explanation.why)}</p>' + (
        f'<p class="spec">Rule: <code>{escape(explanation.spec)}</code> '
        f"(check step {explanation.stage}; rule <code>{explanation.rule}</code>)</p>"
        if explanation.spec
        else ""
    )
    subject = (
        f'<p class="summary">Subject <code>{report["subject_digest"]}</code>, root node '
        f"{explanation.root}. {escape(view.summary()).capitalize()}.</p>"
        if report["subject_digest"] is not None
        else ""
    )
    figure = f"<figure>{render_svg(view, engine)}</figure>{_LEGEND}" if explanation.nodes else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>formation explain: {escape(_verdict_line(explanation))}</title>",
        f"<style>{_PAGE_STYLE}</style></head><body>",
        f'<header class="{explanation.status}"><h1 id="verdict">{escape(explanation.status)}'
        + (f" <code>{escape(explanation.reason)}</code>" if explanation.reason else "")
        + (f" at node {explanation.index}" if explanation.index is not None else "")
        + f"</h1>{rule}</header>",
        subject,
        figure,
        "<h2>Certificate steps</h2>",
        _steps_table(view),
        "<h2>Checker report</h2>",
        f'<pre id="report">{escape(json.dumps(report, indent=2, sort_keys=True))}</pre>',
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def describe(view: View) -> dict[str, Any]:
    """The view's JSON form (for ``--format json``): the explanation plus what was drawn."""
    document = view.explanation.to_dict()
    document["view"] = {
        "max_nodes": view.max_nodes,
        "shown": list(view.shown),
        "collapsed": [
            {"parent": c.parent, "hidden": list(c.hidden), "not_drawn_below": c.below}
            for c in view.collapsed
        ],
        "left_out": view.left_out,
        "outside_closure_not_drawn": view.outside,
        "summary": view.summary(),
    }
    return document
