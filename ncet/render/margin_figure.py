"""The figure of a float margin: where eps comes from (each node's share of eps, the largest
first, coloured by op_type) and eps per output against the exact output's range over the
region, on a log axis. Styled as the other figures (`plots.RC`, `figure_svg`).

The bars and points carry fixed gids (`GIDS`), so a test reads the drawn values back.
"""

from __future__ import annotations

import math

from .margin_facts import node_shares, output_margins
from .plots import COLORS, _floor, _shown, new_figure, op_colors, styled

GIDS = {"share": "ncet-share", "eps": "ncet-eps", "range": "ncet-range"}
"""The gid of each kind of artist (a share bar: "ncet-share-<rank>", largest first)."""

TOP = 12
"""The most nodes drawn one bar each; the others are one bar, "<k> other nodes"."""


@styled
def margin_figure(margin, network=None, top: int = TOP, width: float = 11.0,
                  height: float | None = None):
    """Two panels: each node's share of eps (the fraction of the sum of eps over the outputs
    its own rounding contributes), largest first; and per output element, eps and the exact
    output's range (upper - lower) over the region, on a log axis.

    Args:
        margin: The Margin (`ncet.float_margin`).
        network: The GraphIR it was computed for, to colour the bars by op_type (optional).
        top: The most nodes drawn one bar each.
        width: Figure width in inches.
        height: Figure height in inches (None: from the number of bars).

    Returns:
        A matplotlib Figure.

    Raises:
        ImportError: matplotlib is not installed.
    """
    shares = node_shares(margin, network)
    shown, rest = shares[:top], shares[top:]
    bars = [(s.node, s.op_type, s.fraction) for s in shown]
    if rest:
        bars.append((f"{len(rest)} other nodes", "", sum(s.fraction for s in rest)))
    height = height or max(2.8, 0.28 * len(bars) + 1.2)
    figure, axes = new_figure(width, height, 1, 2)
    _shares_panel(axes[0][0], bars)
    _outputs_panel(axes[0][1], margin)
    return figure


def _shares_panel(axis, bars) -> None:
    if not bars:
        axis.text(0.5, 0.5, "no contributions recorded", ha="center", va="center",
                  transform=axis.transAxes, color=COLORS["muted"])
        axis.set_axis_off()
        return
    colors = op_colors()
    for rank, (_, op, fraction) in enumerate(bars):
        axis.barh(rank, fraction, height=0.7, color=colors.get(op, COLORS["bound"]),
                  edgecolor=COLORS["bound_edge"], linewidth=0.5, gid=f"{GIDS['share']}-{rank}")
        axis.text(fraction, rank, f" {fraction:.0%}", va="center", fontsize=8)
    axis.set_yticks(range(len(bars)))
    axis.set_yticklabels([f"{node} ({op})" if op and op != "Input" else node
                          for node, op, _ in bars], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, 1.1)
    axis.set_xlabel("share of eps (summed over the outputs)")
    axis.set_title("where eps comes from: each node's own rounding", loc="left", fontsize=10)
    axis.grid(axis="x", color=COLORS["grid"], linewidth=0.5)


def _outputs_panel(axis, margin) -> None:
    outputs = output_margins(margin)
    if not outputs:
        axis.set_axis_off()
        return
    floor = _floor([v for o in outputs for v in (o.eps, o.range)])
    xs = [o.index for o in outputs]
    axis.scatter(xs, [_shown(o.range, floor) for o in outputs], s=30, marker="_",
                 linewidths=2, color=COLORS["local"], label="exact output's range over the "
                 "region (upper - lower)", gid=GIDS["range"], zorder=3)
    axis.scatter(xs, [_shown(o.eps, floor) for o in outputs], s=18,
                 color=COLORS["e2e"], label="eps: |float32 - exact| <= eps", gid=GIDS["eps"],
                 zorder=4)
    axis.set_yscale("log")
    top = max(max(_shown(o.range, floor), _shown(o.eps, floor)) for o in outputs)
    axis.set_ylim(floor / 3, top * 10 if math.isfinite(top) else None)
    axis.axhspan(floor / 3, floor, color=COLORS["zero"], zorder=0)
    axis.set_xlabel("output element (Y_j)")
    if len(xs) <= 20:
        axis.set_xticks(xs)
    axis.set_title("eps per output against the output's range", loc="left", fontsize=10)
    axis.legend(loc="best", fontsize=7)
    axis.grid(color=COLORS["grid"], linewidth=0.5)


def drawn_shares(figure) -> list[tuple[str, float]]:
    """(label, share) of each bar of the shares panel, top to bottom (what a test reads)."""
    axis = figure.axes[0]
    labels = [t.get_text() for t in axis.get_yticklabels()]
    widths = [p.get_width() for p in sorted(
        (p for p in axis.patches if (p.get_gid() or "").startswith(GIDS["share"])),
        key=lambda p: int(p.get_gid().rsplit("-", 1)[1]))]
    return list(zip(labels, widths))
