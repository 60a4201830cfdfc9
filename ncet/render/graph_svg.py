"""The grouped GraphIR drawn as SVG: a box per node (name, op_type, shape, constant shapes and
key attributes; every fact in its tooltip), a framed cluster per open module call, a box per
closed one, laid out in pure Python (`graph_layout.layered_layout`) with fixed text metrics,
so the same graph gives the same text on every machine."""

from __future__ import annotations

from html import escape

from ..ir import GraphIR
from .graph_groups import ROOT, Groups, Visible
from .graph_layout import TITLE_HEIGHT, Layout, layered_layout
from .plots import op_hex

LABEL_ATTRS = 2
"""Attribute lines on a node's box (all of them are in its tooltip)."""

LINE_CHARS = 36
"""Longest line on a box; longer ones are cut with an ellipsis."""

GROUP_OPS = 4
"""op_types listed (most frequent first) on a collapsed group's box."""

FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
"""The labels' font: monospaced, so a line's width is known without measuring it."""

FONT_SIZE = 10.0
CHAR_WIDTH = 6.2
"""The advance of one character at `FONT_SIZE` (DejaVu Sans Mono: 0.602 em; a little more
for the fallbacks)."""

LINE_HEIGHT = 12.0
PAD_X, PAD_Y = 6.0, 4.0
"""Space between a box's border and its text."""

EDGE_COLOR = "#64748b"
TEXT_COLOR = "#1f2937"


def shape_text(shape) -> str:
    """A shape as `8×32×32` ("scalar" for `()`, "" for None)."""
    if shape is None:
        return ""
    return "×".join(map(str, shape)) if len(shape) else "scalar"


def node_facts(ir: GraphIR, node) -> dict:
    """What a node's box and tooltip say: its name, op_type, output shape, the shape and
    dtype of each constant it reads (by attribute) and its other attributes, as text."""
    constants, attrs = {}, {}
    for key, value in node.attrs.items():
        if isinstance(value, str) and value in ir.constants:
            tensor = ir.constants[value]
            constants[key] = (value, shape_text(tuple(tensor.shape)),
                              str(tensor.dtype).removeprefix("torch."))
        elif value is not None:
            attrs[key] = _compact(value)
    return {"name": node.name, "op_type": node.op_type, "shape": shape_text(node.shape),
            "dtype": node.dtype, "constants": constants, "attrs": attrs,
            "module_path": node.source.module_path, "location": node.source.location}


def _compact(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_compact(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _cut(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"


def node_label(facts: dict) -> list[str]:
    """The lines on a node's box: name; op_type and shape; then constant shapes and
    attributes packed into at most `LABEL_ATTRS` lines of `LINE_CHARS` (an ellipsis when
    some are left out; the tooltip has them all)."""
    head = f"{facts['op_type']} {facts['shape']}".strip()
    extra = [f"{k} {shape}" for k, (_, shape, _) in facts["constants"].items()]
    extra += [f"{k}={v}" for k, v in facts["attrs"].items()]
    packed: list[str] = []
    for item in extra:
        if packed and len(packed[-1]) + 2 + len(item) <= LINE_CHARS:
            packed[-1] += "  " + item
        elif len(packed) < LABEL_ATTRS:
            packed.append(_cut(item))
        else:
            packed[-1] = _cut(packed[-1] + "  …") if not packed[-1].endswith("…") else \
                packed[-1]
            break
    return [facts["name"], head, *packed]


def node_tooltip(facts: dict) -> list[str]:
    """Every fact about a node, one per line."""
    lines = [f"{facts['name']}: {facts['op_type']}",
             f"output {facts['dtype']} [{facts['shape']}]" if facts["shape"] else "output"]
    lines += [f"{k} = {name} {dtype} [{shape}]"
              for k, (name, shape, dtype) in facts["constants"].items()]
    lines += [f"{k} = {v}" for k, v in facts["attrs"].items()]
    if facts["module_path"]:
        lines.append(f"module {facts['module_path']}")
    if facts["location"]:
        lines.append(facts["location"])
    return lines


def group_label(groups: Groups, group: str) -> list[str]:
    """A collapsed group's box: its title, how many nodes, its commonest op_types."""
    target = groups.groups[group]
    ops = sorted(target.ops.items(), key=lambda kv: -kv[1])
    listed = " ".join(f"{op}×{n}" for op, n in ops[:GROUP_OPS])
    more = f" +{len(ops) - GROUP_OPS}" if len(ops) > GROUP_OPS else ""
    return [_cut(target.label), f"{target.size} nodes (click to open)", _cut(listed + more)]


def _fill(color: str) -> str:  # the op colour at 35 % over white, as the figure draws it
    return "#" + "".join(f"{round(255 - 0.35 * (255 - int(color[k:k + 2], 16))):02x}"
                         for k in (1, 3, 5))


def _box_size(lines: list[str]) -> tuple[float, float]:
    return (max(map(len, lines)) * CHAR_WIDTH + 2 * PAD_X,
            len(lines) * LINE_HEIGHT + 2 * PAD_Y)


def _n(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _texts(lines: list[str], x: float, y: float, width: float) -> list[str]:
    out = []
    for k, line in enumerate(lines):
        weight = ' font-weight="bold"' if k == 0 else ""
        out.append(f'<text x="{_n(x + width / 2)}" y="{_n(y + PAD_Y + (k + 0.8) * LINE_HEIGHT)}"'
                   f' text-anchor="middle"{weight}>{escape(line, quote=False)}</text>')
    return out


def _path(points) -> str:
    """Through `points`, leaving and entering each one vertically (a cubic between two)."""
    (x0, y0), *rest = points
    parts = [f"M{_n(x0)},{_n(y0)}"]
    for x1, y1 in rest:
        if abs(x1 - x0) < 0.05:
            parts.append(f"L{_n(x1)},{_n(y1)}")
        else:
            mid = (y1 - y0) / 2
            parts.append(f"C{_n(x0)},{_n(y0 + mid)} {_n(x1)},{_n(y1 - mid)} {_n(x1)},{_n(y1)}")
        x0, y0 = x1, y1
    return "".join(parts)


MARGIN = 8.0


def layout_of(groups: Groups, expanded: set[str]) -> Layout:
    """Where `to_svg` draws each box, cluster and edge for the groups in `expanded` open
    (coordinates inside the margin)."""
    shown = groups.visible(expanded | {ROOT})
    return _laid_out(groups, shown, _labels(groups, shown)[0])


def _labels(groups: Groups, shown: Visible) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The lines on each box shown, and its tooltip."""
    ir = groups.ir
    labels: dict[str, list[str]] = {}
    tooltips: dict[str, str] = {}
    for name in shown.nodes:
        facts = node_facts(ir, ir.node(name))
        labels[name] = [_cut(line) for line in node_label(facts)]
        tooltips[name] = "\n".join(node_tooltip(facts))
    for group in shown.boxes:
        labels[group] = group_label(groups, group)
        tooltips[group] = f"{groups.groups[group].label}: {groups.groups[group].size} nodes"
    return labels, tooltips


def _laid_out(groups: Groups, shown: Visible, labels: dict[str, list[str]]) -> Layout:
    sizes = {item: _box_size(lines) for item, lines in labels.items()}
    children = {c: list(groups.groups[c].items) for c in shown.clusters}
    titles = {c: len(_cut(groups.groups[c].label)) * CHAR_WIDTH for c in shown.clusters}
    return layered_layout(children, sizes, [(a, b) for a, b, _ in shown.edges], ROOT, titles)


def to_svg(groups: Groups, expanded: set[str]) -> str:
    """The drawing of the groups in `expanded` open (the root always is), as an `<svg>`
    element: nodes `<g id="n:NAME" class="node">`, closed groups `<g id="g:ID" class="node">`,
    open ones `<g id="g:ID" class="cluster">` (in the order of their calls), edges
    `<g class="edge">`."""
    colors = op_hex()
    ir = groups.ir
    shown = groups.visible(expanded | {ROOT})
    labels, tooltips = _labels(groups, shown)
    layout = _laid_out(groups, shown, labels)
    width, height = layout.width + 2 * MARGIN, layout.height + 2 * MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="ncet-graph" width="{_n(width)}" '
           f'height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" '
           f'font-family="{FONT}" font-size="{_n(FONT_SIZE)}">',
           '<defs><marker id="ncet-arrow" viewBox="0 0 8 8" refX="8" refY="4" '
           'markerUnits="userSpaceOnUse" markerWidth="7" markerHeight="7" orient="auto">'
           '<path d="M0,0L8,4L0,8z" '
           f'fill="{EDGE_COLOR}"/></marker></defs>',
           f'<g class="graph" transform="translate({_n(MARGIN)},{_n(MARGIN)})">']
    for cluster in groups.in_call_order(shown.clusters):
        if cluster == ROOT:
            continue
        x, y, w, h = layout.clusters[cluster]
        target = groups.groups[cluster]
        out += [f'<g id="g:{escape(cluster)}" class="cluster">',
                f"<title>{escape(target.label)}: {target.size} nodes (click the title to "
                "close)</title>",
                f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="4" '
                'fill="none" stroke="#94a3b8" stroke-dasharray="4 3"/>',
                f'<text x="{_n(x + 6)}" y="{_n(y + TITLE_HEIGHT - 4)}" fill="#475569">'
                f"{escape(_cut(target.label), quote=False)}</text>", "</g>"]
    for (source, target, points), (_, _, count) in zip(layout.edges, shown.edges):
        stroke = min(0.9 + 0.3 * (count - 1), 3.0)
        title = f"{count} edges" if count > 1 else f"{source} → {target}"
        out += [f'<g class="edge"><title>{escape(title, quote=False)}</title>'
                f'<path d="{_path(points)}" fill="none" stroke="{EDGE_COLOR}" '
                f'stroke-width="{_n(stroke)}" marker-end="url(#ncet-arrow)"/></g>']
    for item in (*shown.nodes, *shown.boxes):
        x, y, w, h = layout.boxes[item]
        if item in groups.groups:
            out += [f'<g id="g:{escape(item)}" class="node ncet-group">',
                    f"<title>{escape(tooltips[item], quote=False)}</title>",
                    f'<rect x="{_n(x + 3)}" y="{_n(y + 3)}" width="{_n(w)}" height="{_n(h)}" '
                    'fill="#cbd5e1" stroke="#475569"/>',
                    f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" '
                    'fill="#e2e8f0" stroke="#475569"/>']
        else:
            color = colors.get(ir.node(item).op_type, "#cccccc")
            out += [f'<g id="n:{escape(item)}" class="node">',
                    f"<title>{escape(tooltips[item], quote=False)}</title>",
                    f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="4" '
                    f'fill="{_fill(color)}" stroke="{color}" stroke-width="1.2"/>']
        out += [f'<g fill="{TEXT_COLOR}">', *_texts(labels[item], x, y, w), "</g>", "</g>"]
    out += ["</g>", "</svg>"]
    return "\n".join(out)


STATIC_BUDGET = 120
"""Most boxes a static drawing shows (the report's, a notebook's saved output; an SVG of 400
boxes is about 500 kB): groups open breadth first while they fit."""


def graph_html(ir: GraphIR, expanded: set[str] | None = None,
               groups: Groups | None = None) -> str:
    """The graph's static form, shown by the report, the graph view's `to_html()` and a
    notebook opened without a kernel: the drawing with the groups in `expanded` open
    (default: breadth first within `STATIC_BUDGET` boxes), as inline SVG in a scrolling box;
    the same text for the same graph on every machine, no script needed."""
    groups = groups or Groups(ir)
    expanded = groups.default_expanded(STATIC_BUDGET) if expanded is None else expanded
    shown = groups.visible(expanded | {ROOT})
    note = (f"<p>{len(ir.nodes)} nodes; {len(shown.boxes)} module calls shown closed.</p>"
            if shown.boxes else "")
    return (f'<div class="ncet-static ncet-graph" style="max-height:640px;overflow:auto">'
            f"{note}{to_svg(groups, expanded | {ROOT})}</div>")
