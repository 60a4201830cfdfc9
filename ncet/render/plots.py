"""Exactness plots as inline SVG: observed error against the certified bound, node by node.

matplotlib is optional (the `report` extra) and imported only when a plot is drawn; the
figures are drawn on an Agg canvas of their own, so pyplot and the global backend are never
touched.
"""

from __future__ import annotations

import io
import math
import re

from ..exactness.report import ExactnessEntry, ExactnessReport

MAX_NAMED_TICKS = 80
"""Up to this many nodes, the x axis is labelled with node names; beyond, with positions."""

COLORS = {"bound": "#9db4d8", "bound_edge": "#3b5b92", "error": "#1f2937",
          "violation": "#c62828", "local": "#2563eb", "e2e": "#d97706", "zero": "#f1f5f9"}


RC = {"svg.fonttype": "none", "font.family": ["DejaVu Sans", "sans-serif"],
      "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}
"""matplotlib settings for every figure: text stays text in the SVG, in the page's font."""


def matplotlib_available() -> bool:
    """True when matplotlib can be imported (the plots need it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def error_plot_svg(report: ExactnessReport) -> str:
    """Per node in topological order, on a log axis: the certified bound and the observed
    error where they are closest (node-local, then end to end), and the ratio of the two.

    Returns:
        One `<svg>` element, without an XML prolog, ready to inline in HTML.

    Raises:
        ImportError: matplotlib is not installed.
    """
    from matplotlib import rc_context

    entries = report.entries
    with rc_context(RC):
        figure, axes = _figure(3, width=12.0, height=9.5)
        local, e2e, ratio = axes
        _error_panel(local, entries, "local", "node-local: each node re-evaluated on "
                     "PyTorch's own inputs (one rounding step)")
        _error_panel(e2e, entries, "e2e", "end to end: the reference graph from the inputs "
                     "(bounds carried through the graph)")
        _ratio_panel(ratio, entries)
        _node_axis(ratio, entries)
        figure.align_ylabels(axes)
        return _svg(figure, "ncet-errors")


def _figure(rows: int, width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, 1, sharex=True)
    return figure, axes


def _worst(entry: ExactnessEntry, check: str) -> tuple[float, float, float, bool]:
    """(observed error, bound, ratio, violated) at the element with the largest ratio."""
    if check == "local":
        error, bound, ratio, bad = (entry.local_max_error, entry.local_bound,
                                    entry.local_ratio, entry.local_violations > 0)
    else:
        error, bound, ratio, bad = (entry.e2e_max_error, entry.e2e_bound, entry.e2e_ratio,
                                    entry.e2e_violations > 0)
    at_worst = ratio * bound if math.isfinite(ratio) and bound > 0 else error
    return at_worst, bound, ratio, bad


def _floor(values: list[float]) -> float:
    """Where zeros are drawn on a log axis: a decade below the smallest positive value."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return 1e-20
    return 10.0 ** (math.floor(math.log10(min(positive))) - 1)


def _error_panel(axis, entries, check: str, title: str) -> None:
    worst = [_worst(e, check) for e in entries]
    floor = _floor([v for w in worst for v in w[:2]])
    xs = range(len(entries))
    bounds = [max(b, floor) for _, b, _, _ in worst]
    errors = [max(e, floor) for e, _, _, _ in worst]
    axis.axhspan(floor / 3, floor * 3, color=COLORS["zero"], zorder=0)
    bars = [(x, b) for x, b, w in zip(xs, bounds, worst) if w[1] > 0]
    if bars:
        axis.bar(*zip(*bars), width=0.6, bottom=floor / 3, color=COLORS["bound"],
                 edgecolor=COLORS["bound_edge"], linewidth=0.6, label="certified bound",
                 zorder=1)
    ok = [(x, e) for x, e, w in zip(xs, errors, worst) if not w[3] and w[0] > 0]
    exact = [(x, e) for x, e, w in zip(xs, errors, worst) if not w[3] and w[0] == 0]
    bad = [(x, e) for x, e, w in zip(xs, errors, worst) if w[3]]
    if ok:
        axis.scatter(*zip(*ok), s=18, color=COLORS["error"], zorder=3,
                     label="observed |torch - reference|")
    if exact:
        axis.scatter(*zip(*exact), s=18, facecolors="none", edgecolors=COLORS["error"],
                     linewidths=0.8, zorder=3, label="no error observed")
    if bad:
        axis.scatter(*zip(*bad), s=70, marker="X", color=COLORS["violation"], zorder=4,
                     label="violation (error above its bound)")
    axis.set_yscale("log")
    axis.set_ylim(floor / 3, max([*bounds, *errors, floor]) * 10)
    axis.set_ylabel("absolute error")
    axis.set_title(title, loc="left", fontsize=10)
    axis.text(1.0, floor, " 0 (exact)", transform=axis.get_yaxis_transform(),
              va="center", ha="left", fontsize=8, color="#64748b")
    _legend(axis)
    axis.grid(axis="y", which="major", color="#e2e8f0", linewidth=0.6)


def _ratio_panel(axis, entries) -> None:
    ratios = {c: [_worst(e, c)[2] for e in entries] for c in ("local", "e2e")}
    finite = [r for rs in ratios.values() for r in rs if math.isfinite(r)]
    floor = _floor(finite)
    top = max([r for r in finite if r > 0] + [1.0]) * 10
    axis.axhspan(floor / 3, floor * 3, color=COLORS["zero"], zorder=0)
    axis.axhspan(1.0, top, color="#fee2e2", zorder=0)
    axis.axhline(1.0, color=COLORS["violation"], linewidth=1.0, zorder=1)
    labels = {"local": "node-local", "e2e": "end to end"}
    markers = {"local": "o", "e2e": "^"}
    for check, values in ratios.items():
        xs = range(len(values))
        shown = [top / 2 if not math.isfinite(r) else max(r, floor) for r in values]
        axis.scatter(xs, shown, s=20, marker=markers[check], color=COLORS[check],
                     label=labels[check], zorder=3, alpha=0.85)
        bad = [(x, s) for x, s, r in zip(xs, shown, values) if r > 1]
        if bad:
            axis.scatter(*zip(*bad), s=80, marker="X", color=COLORS["violation"], zorder=4)
    axis.set_yscale("log")
    axis.set_ylim(floor / 3, top)
    axis.set_ylabel("observed / bound")
    axis.set_title("ratio at the tightest element: above 1 (red band) is a violation",
                   loc="left", fontsize=10)
    axis.text(1.0, floor, " 0 (exact)", transform=axis.get_yaxis_transform(), va="center",
              ha="left", fontsize=8, color="#64748b")
    _legend(axis)
    axis.grid(axis="y", which="major", color="#e2e8f0", linewidth=0.6)


def _legend(axis) -> None:
    """Above the panel, right-aligned, level with the left-aligned title: never on the data."""
    axis.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, fontsize=8,
                ncols=4, frameon=False, handletextpad=0.3, columnspacing=1.2)


def _node_axis(axis, entries) -> None:
    axis.set_xlim(-0.7, len(entries) - 0.3)
    if len(entries) <= MAX_NAMED_TICKS:
        axis.set_xticks(range(len(entries)),
                        [f"{e.name} ({e.op_type})" for e in entries], rotation=90, fontsize=7)
        for label, entry in zip(axis.get_xticklabels(), entries):
            if entry.violated:
                label.set_color(COLORS["violation"])
                label.set_fontweight("bold")
    axis.set_xlabel("IR nodes in topological order")


def _svg(figure, salt: str) -> str:
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({"svg.hashsalt": salt}):  # ids unique per figure, the same every run
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.index("<svg")
    svg = text[start:]
    # Scale with the page: drop the fixed size, keep the viewBox.
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', svg, count=1)
