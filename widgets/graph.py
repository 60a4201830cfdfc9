"""The GraphIR drawn as a DAG: layered in topological order, boxes coloured by op_type, long
chains folded into columns, and pages of `max_nodes` nodes beyond that."""

from __future__ import annotations

from dataclasses import dataclass

import ncet
from ncet.render import new_figure, op_colors, styled

ROWS_PER_COLUMN = 20
"""Layers stacked top to bottom before the drawing folds into a new column."""


@dataclass(frozen=True)
class Layout:
    """Where each node of a page sits: (column, row) in drawing units, and its layer."""

    positions: dict[str, tuple[float, float]]
    layers: dict[str, int]
    columns: int
    rows: int


def page_bounds(ir: ncet.GraphIR, max_nodes: int, start: int) -> tuple[int, int]:
    """The page `[start, stop)` of node positions drawn, clamped to the graph."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be positive, got {max_nodes}")
    start = min(max(0, start), max(0, len(ir.nodes) - 1))
    return start, min(len(ir.nodes), start + max_nodes)


def layout(nodes, rows_per_column: int = ROWS_PER_COLUMN) -> Layout:
    """Layer the nodes (longest path from the page's sources), keep topological order
    within a layer, and fold every `rows_per_column` layers into a new column block."""
    layers: dict[str, int] = {}
    for node in nodes:
        layers[node.name] = 1 + max((layers[i] for i in node.inputs if i in layers),
                                    default=-1)
    by_layer: dict[int, list[str]] = {}
    for node in nodes:
        by_layer.setdefault(layers[node.name], []).append(node.name)
    depth = max(by_layer, default=-1) + 1
    blocks = -(-depth // rows_per_column) if depth else 0
    widths = [max((len(by_layer[layer]) for layer in range(b * rows_per_column,
                                                            min(depth, (b + 1) *
                                                                rows_per_column))),
                  default=1) for b in range(blocks)]
    offsets = [sum(widths[:b]) + b for b in range(blocks)]  # one gap column between blocks
    positions = {}
    for layer, names in by_layer.items():
        block, row = divmod(layer, rows_per_column)
        shift = (widths[block] - len(names)) / 2
        for slot, name in enumerate(names):
            positions[name] = (offsets[block] + shift + slot, float(row))
    columns = (offsets[-1] + widths[-1]) if blocks else 0
    return Layout(positions, layers, columns, min(depth, rows_per_column))


@styled
def graph_figure(ir: ncet.GraphIR, max_nodes: int = 100, start: int = 0):
    """The IR as a DAG coloured by op_type, in topological order from the top.

    Args:
        ir: The GraphIR to draw.
        max_nodes: Most nodes drawn at once; a larger graph is drawn one page at a time.
        start: Position of the page's first node in `ir.nodes`.

    Returns:
        A matplotlib Figure; its title says which nodes it shows when the graph is paged,
        and edges from nodes off the page are labelled with their producer's name.

    Example:
        >>> graph_figure(ncet.convert(model, (3, 32, 32)))
    """
    start, stop = page_bounds(ir, max_nodes, start)
    nodes = ir.nodes[start:stop]
    plan = layout(nodes)
    colors = op_colors()
    present = list(dict.fromkeys(n.op_type for n in nodes))
    width = min(max(5.0, 1.9 * plan.columns + 1.0), 30.0)
    legend_columns = max(1, min(len(present), int(width / 1.5)))
    legend_rows = -(-len(present) // legend_columns)
    height = min(max(2.5, 0.62 * plan.rows + 1.0 + 0.17 * legend_rows), 30.0)
    # Fixed margins rather than a layout engine: it would draw every label twice.
    figure, axes = new_figure(width, height, layout=None)
    figure.subplots_adjust(left=0.15 / width, right=1 - 0.15 / width, top=1 - 0.4 / height,
                           bottom=(0.25 + 0.17 * legend_rows) / height)
    axis = axes[0][0]
    on_page = {n.name for n in nodes}
    for node in nodes:
        x, y = plan.positions[node.name]
        block = plan.layers[node.name] // ROWS_PER_COLUMN
        far = []  # producers off the page or in another column block: named, not drawn
        for name in node.inputs:
            if name in on_page and plan.layers[name] // ROWS_PER_COLUMN == block:
                px, py = plan.positions[name]
                # Edges that skip layers bow out to the side, around the boxes between.
                bend = 0.0 if y - py < 1.5 else (-0.3 if px >= x else 0.3)
                axis.annotate("", xy=(x, y - 0.22), xytext=(px, py + 0.22),
                              arrowprops={"arrowstyle": "-|>", "color": "#64748b",
                                          "linewidth": 0.7, "shrinkA": 0, "shrinkB": 0,
                                          "connectionstyle": f"arc3,rad={bend}"},
                              zorder=1)
            else:
                far.append(name)
        if far:
            axis.text(x, y - 0.3, "from " + ", ".join(far), ha="center", va="bottom",
                      fontsize=6, color="#64748b", zorder=2)
        shape = "" if node.shape is None else "×".join(map(str, node.shape))
        face = colors.get(node.op_type, (0.8, 0.8, 0.8, 1.0))
        axis.text(x, y, f"{node.name}\n{node.op_type}" + (f" {shape}" if shape else ""),
                  ha="center", va="center", fontsize=6.5, zorder=3,
                  bbox={"boxstyle": "round,pad=0.3", "facecolor": (*face[:3], 0.35),
                        "edgecolor": face, "linewidth": 1.0})
    axis.set_xlim(-0.8, max(plan.columns, 1) - 0.2)
    axis.set_ylim(plan.rows - 0.4, -0.8)
    axis.set_axis_off()
    total = len(ir.nodes)
    title = f"GraphIR: {total} nodes, {len(ir.constants)} constants"
    if stop - start < total:
        pages = -(-total // max_nodes)
        title += (f"; showing nodes {start + 1}–{stop} of {total} "
                  f"(page {start // max_nodes + 1} of {pages})")
    axis.set_title(title, loc="left", fontsize=10, pad=12)
    handles = [_patch(colors[op], op) for op in present if op in colors]
    figure.legend(handles=handles, loc="lower center", ncols=legend_columns, fontsize=7,
                  frameon=False)
    return figure


def _patch(color, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=(*color[:3], 0.35), edgecolor=color, label=label)
