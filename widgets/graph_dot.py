"""The grouped GraphIR as Graphviz DOT (a cluster per expanded module group, a box per
collapsed one; key attributes and constant shapes on each node) and as SVG laid out by
Graphviz's `dot`."""

from __future__ import annotations

import re
import shutil
import subprocess

import ncet
from ncet.render import op_colors

from .graph_groups import ROOT, Groups

DOT_TIMEOUT_S = 300
"""Longest a layout may run (dot lays out 400 boxes in about a second here)."""

LABEL_ATTRS = 2
"""Attribute lines on a node's box (all of them are in its tooltip)."""

LINE_CHARS = 36
"""Longest attribute line on a box; longer ones are cut with an ellipsis."""

GROUP_OPS = 4
"""op_types listed (most frequent first) on a collapsed group's box."""

INSTALL_HINT = ("the graph view needs Graphviz's `dot` program: apt-get install graphviz "
                "(Debian/Ubuntu), brew install graphviz (macOS) or conda install graphviz")


class GraphvizMissing(RuntimeError):
    """Graphviz's `dot` is not on PATH."""


def dot_available() -> bool:
    """True when Graphviz's `dot` program is on PATH."""
    return shutil.which("dot") is not None


def shape_text(shape) -> str:
    """A shape as `8×32×32` ("scalar" for `()`, "" for None)."""
    if shape is None:
        return ""
    return "×".join(map(str, shape)) if len(shape) else "scalar"


def node_facts(ir: ncet.GraphIR, node) -> dict:
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


def quote(text: str) -> str:
    """A DOT string literal (backslashes and quotes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lines(parts: list[str]) -> str:
    """Lines as one DOT escString, each centred."""
    return quote("\n".join(parts)).replace("\n", "\\n")


def _hex(color) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in color[:3])


def _fill(color) -> str:  # the op colour at 35 % over white, as the figure draws it
    return "#" + "".join(f"{round(255 - 0.35 * (255 - c * 255)):02x}" for c in color[:3])


def to_dot(groups: Groups, expanded: set[str]) -> str:
    """The DOT text for the groups in `expanded` open (the root always is)."""
    colors = op_colors()
    ir = groups.ir
    out = ['digraph GraphIR {',
           '  graph [rankdir=TB, nodesep=0.25, ranksep=0.35, bgcolor="transparent", '
           'fontname="DejaVu Sans", fontsize=11, id="ncet-graph"];',
           '  node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=10, '
           'margin="0.08,0.04", penwidth=1.2];',
           '  edge [color="#64748b", arrowsize=0.6, penwidth=0.9];']

    def emit(group: str, indent: str) -> None:
        for item in groups.groups[group].items:
            if item not in groups.groups:
                node = ir.node(item)
                facts = node_facts(ir, node)
                color = colors.get(node.op_type, (0.8, 0.8, 0.8))
                out.append(f'{indent}{quote(item)} [id={quote("n:" + item)}, '
                           f'class="ncet-node", label={lines(node_label(facts))}, '
                           f'tooltip={lines(node_tooltip(facts))}, color="{_hex(color)}", '
                           f'fillcolor="{_fill(color)}"];')
            elif item in expanded:
                target = groups.groups[item]
                out.append(f'{indent}subgraph {quote("cluster_" + item)} {{')
                out.append(f'{indent}  id={quote("g:" + item)}; class="ncet-cluster"; '
                           f'label={quote(_cut(target.label))}; '
                           f'tooltip={quote(f"{target.label}: {target.size} nodes")}; '
                           'style="rounded,dashed"; color="#94a3b8"; fontcolor="#475569"; '
                           'labeljust="l";')
                emit(item, indent + "  ")
                out.append(f"{indent}}}")
            else:
                out.append(f'{indent}{quote("g:" + item)} [id={quote("g:" + item)}, '
                           f'class="ncet-group", shape=box3d, style=filled, '
                           f'fillcolor="#e2e8f0", color="#475569", '
                           f'label={lines(group_label(groups, item))}, '
                           f'tooltip={quote(groups.groups[item].label)}];')

    emit(ROOT, "  ")
    visible = groups.visible(expanded)
    ids = {g: "g:" + g for g in visible.boxes}
    for source, target, count in visible.edges:
        attrs = f' [penwidth={min(0.9 + 0.3 * (count - 1), 3.0):.1f}, ' \
            f'tooltip="{count} edges"]' if count > 1 else ""
        out.append(f"  {quote(ids.get(source, source))} -> "
                   f"{quote(ids.get(target, target))}{attrs};")
    out.append("}")
    return "\n".join(out) + "\n"


_PROLOG = re.compile(r"\A.*?(?=<svg)", re.S)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)


def dot_svg(dot: str) -> str:
    """Lay `dot` out with Graphviz and return the `<svg>` element alone (no XML prolog,
    doctype or comments): the same text for the same input.

    Raises:
        GraphvizMissing: `dot` is not installed.
        RuntimeError: `dot` failed or ran past `DOT_TIMEOUT_S`.
    """
    program = shutil.which("dot")
    if program is None:
        raise GraphvizMissing(INSTALL_HINT)
    try:
        result = subprocess.run([program, "-Tsvg"], input=dot.encode(), capture_output=True,
                                timeout=DOT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"Graphviz's dot ran for more than {DOT_TIMEOUT_S} s; collapse "
                           "some module groups") from error
    if result.returncode != 0:
        raise RuntimeError(f"Graphviz's dot failed: {result.stderr.decode(errors='replace')}")
    return _COMMENT.sub("", _PROLOG.sub("", result.stdout.decode()))
