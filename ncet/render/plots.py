"""The figures of an exactness check, drawn one way for the HTML report, the command line and
the notebook views: observed error against the certified bound node by node (three panels)
and PyTorch against the float64 reference at one node (the output error/bound histogram and
the per-node sensitivity figure are in `ratios`).

One style (`RC`, `COLORS`), one tick limit, one overflow ceiling, one canvas and one SVG/PNG
export. Figures follow the page's theme: transparent backgrounds, and text, axes and the
observed errors in `INK`, which the SVG form writes as `currentColor` (the colour of the
surrounding text, light or dark) and the PNG form keeps (a grey readable on both).
matplotlib is optional (the `report` and `widgets` extras) and imported only when a figure
is drawn; each figure has an Agg canvas of its own, so pyplot and the global backend are
never touched.
"""

from __future__ import annotations

import base64
import functools
import io
import math
import re

from ..exactness.report import ExactnessEntry, ExactnessReport
from ..ir import OP_SCHEMAS

MAX_NAMED_TICKS = 80
"""Up to this many nodes, the x axis is labelled with node names; beyond, with positions."""

CEILING = 1e100
"""The highest an error or bound is drawn: deep models have finite bounds near float
overflow (and infinite ones), which a log axis cannot tick; larger values sit at the
ceiling."""

MAX_BARS = 400
"""Up to this many bound bars are drawn with edges; beyond, without."""

INK = "#5f6b7a"
"""The colour of text, axes and observed errors; `figure_svg` writes it as `currentColor`
(so no data colour may be this one)."""

COLORS = {"bound": "#9db4d8", "bound_edge": "#3b5b92", "error": INK,
          "violation": "#dc2626", "local": "#2563eb", "e2e": "#d97706", "zero": "#94a3b833",
          "diagonal": "#94a3b8", "alarm": "#ef44441f", "grid": "#94a3b859", "muted": "#64748b",
          "vacuous": "#f59e0b26"}
"""The one colour scheme of every figure: mid-tone colours and translucent bands, which
read on light and dark backgrounds."""

RC = {"svg.fonttype": "none", "font.family": ["DejaVu Sans", "sans-serif"],
      "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
      "figure.facecolor": "none", "axes.facecolor": "none", "savefig.facecolor": "none",
      "savefig.transparent": True, "legend.frameon": False,
      **{key: INK for key in ("text.color", "axes.edgecolor", "axes.labelcolor",
                              "xtick.color", "ytick.color")}}
"""matplotlib settings for every figure: text stays text in the SVG, in the page's font;
transparent backgrounds; text and axes in `INK`."""

CHECKS = {"local": ("node-local", "node-local: each node re-evaluated on PyTorch's own inputs "
                                  "(one rounding step)"),
          "e2e": ("end to end", "end to end: the reference graph from the inputs (bounds "
                                "carried through the graph)")}
"""The two checks of the error figure: the ratio panel's label and the error panel's title."""


def matplotlib_available() -> bool:
    """True when matplotlib can be imported (the figures need it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def styled(draw):
    """Run a drawing function under `RC` (matplotlib reads most settings as artists are
    made), leaving the global settings as they were."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        from matplotlib import rc_context

        with rc_context(RC):
            return draw(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float, rows: int = 1, cols: int = 1,
               layout: str | None = "constrained", sharex: bool = False):
    """A Figure on its own Agg canvas (pyplot's global state untouched) and its axes, as a
    `rows` x `cols` array."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, cols, squeeze=False, sharex=sharex)


def figure_svg(figure, salt: str = "ncet", fit: bool = False) -> str:
    """The figure as an inline `<svg>` element (no XML prolog), byte-identical from run to
    run (ids fixed by `salt`, no date).

    Args:
        figure: A matplotlib Figure.
        salt: Makes the element ids unique per figure of a page.
        fit: Drop the fixed size and keep the viewBox, so the page's CSS sizes it (the
            report); otherwise keep its own size, never wider than the page (the views).
    """
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({**RC, "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue().replace(INK, "currentColor")  # the page's text colour
    svg = text[text.index("<svg"):]
    if fit:
        return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', svg, count=1)
    return svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)


def figure_png(figure, dpi: int = 90) -> str:
    """The figure as an `<img>` with an inline PNG (smaller than SVG for large plots)."""
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with rc_context(RC):  # transparent, as the SVG form
        figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img style="max-width:100%" src="data:image/png;base64,{data}"/>'


OP_PALETTE = (
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
    "#bcbd22", "#dbdb8d", "#17becf", "#9edae5", "#393b79", "#6b6ecf", "#637939", "#b5cf6b",
    "#8c6d31", "#e7ba52", "#843c39", "#d6616b", "#7b4173", "#ce6dbd")
"""The op_type colours, fixed (no matplotlib needed to draw the graph): matplotlib's tab20,
then every other colour of tab20b."""


def op_hex() -> dict[str, str]:
    """A fixed colour per op_type as `#rrggbb` (the same in every drawing of a graph), in the
    IR's op_type order."""
    return {op: OP_PALETTE[i % len(OP_PALETTE)] for i, op in enumerate(OP_SCHEMAS)}


def op_colors() -> dict[str, tuple[float, ...]]:
    """`op_hex` as RGBA tuples in [0, 1], as matplotlib takes them."""
    return {op: (*(int(h[k:k + 2], 16) / 255 for k in (1, 3, 5)), 1.0)
            for op, h in op_hex().items()}


@styled
def exactness_figure(report: ExactnessReport, width: float = 12.0, height: float = 9.5):
    """Per IR node in topological order, on log axes: the certified bound and the observed
    error where they are closest, node-local (top) and end to end (middle), and the ratio of
    the two (bottom); violations marked.

    Args:
        report: The result of `ncet.check_exactness`.
        width: Figure width in inches.
        height: Figure height in inches.

    Returns:
        A matplotlib Figure with three axes sharing the node axis.

    Raises:
        ImportError: matplotlib is not installed.
    """
    entries = report.entries
    figure, axes = new_figure(width, height, 3, 1, sharex=True)
    local, e2e, ratio = axes[:, 0]
    runs = {"local": report.local, "e2e": report.end_to_end}
    for axis, check in ((local, "local"), (e2e, "e2e")):
        if runs[check]:
            _error_panel(axis, entries, check)
        else:
            _not_run(axis, check)
    _ratio_panel(ratio, entries, [c for c, run in runs.items() if run])
    _node_axis(ratio, entries)
    figure.align_ylabels(axes[:, 0])
    return figure


def _worst(entry: ExactnessEntry, check: str) -> tuple[float, float, float, bool]:
    """(observed error, bound, ratio, violated) at the element with the largest ratio."""
    if check == "local":
        error, bound, ratio, bad = (entry.local_max_error, entry.local_bound,
                                    entry.local_ratio, entry.local_violations > 0)
    else:
        error, bound, ratio, bad = (entry.e2e_max_error, entry.e2e_bound, entry.e2e_ratio,
                                    entry.e2e_violations > 0)
    at_worst = ratio * bound if math.isfinite(ratio) and 0 < bound < math.inf else error
    return at_worst, bound, ratio, bad


def _floor(values) -> float:
    """Where zeros are drawn on a log axis: a decade below the smallest positive value,
    and at least three decades below `CEILING`."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return 1e-20
    return min(10.0 ** (math.floor(math.log10(min(positive))) - 1), CEILING / 1e3)


def _shown(value: float, floor: float) -> float:
    """Where a value is drawn: zeros on the floor, the huge and the infinite at CEILING."""
    return min(max(value, floor), CEILING) if math.isfinite(value) else CEILING


def _error_panel(axis, entries, check: str) -> None:
    worst = [_worst(e, check) for e in entries]
    floor = _floor([v for w in worst for v in w[:2]])
    xs = range(len(entries))
    bounds = [_shown(b, floor) for _, b, _, _ in worst]
    errors = [_shown(e, floor) for e, _, _, _ in worst]
    _zero_band(axis, floor)
    bars = [(x, b) for x, b, w in zip(xs, bounds, worst) if w[1] > 0]
    if bars:
        _bound_bars(axis, bars, floor / 3)
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
    axis.set_ylim(floor / 3, min(max([*bounds, *errors, floor]) * 10, CEILING * 10))
    axis.set_ylabel("absolute error")
    axis.set_title(CHECKS[check][1], loc="left", fontsize=10)
    _finish(axis, floor)


def _not_run(axis, check: str) -> None:
    axis.text(0.5, 0.5, f"the {CHECKS[check][0]} check was not run", ha="center",
              va="center", transform=axis.transAxes, color=COLORS["muted"])
    axis.set_yticks([])
    axis.set_title(CHECKS[check][1], loc="left", fontsize=10)


def _bound_bars(axis, bars: list[tuple[int, float]], bottom: float) -> None:
    """The certified bounds as bars from `bottom`, drawn as one PolyCollection (a patch
    per bar costs milliseconds); beyond `MAX_BARS` bars without edges, which a fraction of
    a pixel apart would paint the bars over."""
    from matplotlib.collections import PolyCollection

    boxes = [((x - 0.3, bottom), (x + 0.3, bottom), (x + 0.3, top), (x - 0.3, top))
             for x, top in bars]
    axis.add_collection(PolyCollection(
        boxes, facecolor=COLORS["bound"], edgecolor=COLORS["bound_edge"],
        linewidth=0.6 if len(bars) <= MAX_BARS else 0, label="certified bound", zorder=1),
        autolim=False)


def _ratio_axis(axis, series, above: str, line: str) -> tuple[float, float]:
    """A log axis of ratios to 1: the zero band, a band of colour `above` over 1 and a line
    of colour `line` at 1; returns the floor (where zeros are drawn) and the top."""
    finite = [v for vs in series for v in vs if math.isfinite(v)]
    floor = _floor(finite)
    top = min(max([v for v in finite if v > 0] + [1.0]) * 10, CEILING * 10)
    _zero_band(axis, floor)
    axis.axhspan(1.0, top, color=COLORS[above], zorder=0)
    axis.axhline(1.0, color=COLORS[line], linewidth=1.0, zorder=1)
    return floor, top


def _ratio_panel(axis, entries, checks: list[str]) -> None:
    ratios = {c: [_worst(e, c)[2] for e in entries] for c in checks}
    floor, top = _ratio_axis(axis, ratios.values(), "alarm", "violation")
    markers = {"local": "o", "e2e": "^"}
    for check, values in ratios.items():
        xs = range(len(values))
        shown = [top / 2 if not math.isfinite(r) else _shown(r, floor) for r in values]
        axis.scatter(xs, shown, s=20, marker=markers[check], color=COLORS[check],
                     label=CHECKS[check][0], zorder=3, alpha=0.85)
        bad = [(x, s) for x, s, r in zip(xs, shown, values) if r > 1]
        if bad:
            axis.scatter(*zip(*bad), s=80, marker="X", color=COLORS["violation"], zorder=4)
    axis.set_yscale("log")
    axis.set_ylim(floor / 3, top)
    axis.set_ylabel("observed / bound")
    axis.set_title("ratio at the tightest element: above 1 (red band) is a violation",
                   loc="left", fontsize=10)
    _finish(axis, floor)


def _zero_band(axis, floor: float) -> None:
    axis.axhspan(floor / 3, floor * 3, color=COLORS["zero"], zorder=0)


def _finish(axis, floor: float) -> None:
    """The zero label at the floor, the legend above the panel, the grid."""
    axis.text(1.0, floor, " 0 (exact)", transform=axis.get_yaxis_transform(), va="center",
              ha="left", fontsize=8, color=COLORS["muted"])
    # Plain-text decades ("10⁻⁸"): mathtext labels are parsed on every draw, most of the
    # time to draw this figure.
    axis.yaxis.set_major_formatter(_decade)
    handles, labels = axis.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i] == "certified bound")
    # Above the panel, right-aligned, level with the left-aligned title: never on the data.
    axis.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower right",
                bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, fontsize=8, ncols=4,
                frameon=False, handletextpad=0.3, columnspacing=1.2)
    axis.grid(axis="y", which="major", color=COLORS["grid"], linewidth=0.6)


SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _decade(value: float, _position=None) -> str:
    """A major tick of a log axis as "10⁻⁸" (major ticks sit on whole decades)."""
    if not value > 0 or not math.isfinite(value):
        return ""
    return "10" + str(round(math.log10(value))).translate(SUPERSCRIPTS)


def _node_axis(axis, entries) -> None:
    axis.set_xlim(-0.7, max(len(entries), 1) - 0.3)
    if len(entries) <= MAX_NAMED_TICKS:
        axis.set_xticks(range(len(entries)),
                        [f"{e.name} ({e.op_type})" for e in entries], rotation=90, fontsize=7)
        for label, entry in zip(axis.get_xticklabels(), entries):
            if entry.violated:
                label.set_color(COLORS["violation"])
                label.set_fontweight("bold")
    axis.set_xlabel("IR nodes in topological order")


def value_sample(report: ExactnessReport, node_name: str):
    """(torch values, reference values) of a node as numpy arrays, or None when the report
    kept no samples of it."""
    try:
        torch_values, reference = report.value_sample(node_name)
    except KeyError:
        return None
    return torch_values.numpy(), reference.numpy()


@styled
def scatter_figure(report: ExactnessReport, node_name: str, width: float = 9.0,
                   height: float = 3.6):
    """PyTorch's values against the float64 reference at one IR node (left), and their
    difference against the node's bounds (right), over the sampled elements.

    Raises:
        KeyError: The report has no entry and no sample for that node.
    """
    import numpy as np
    from matplotlib.ticker import LogFormatter

    entry = next((e for e in report.entries if e.name == node_name), None)
    values = value_sample(report, node_name)
    if entry is None and values is None:
        raise KeyError(f"the exactness report has no node {node_name!r}")
    figure, axes = new_figure(width, height, 1, 2)
    left, right = axes[0]
    title = node_name if entry is None else f"{node_name} ({entry.op_type})"
    if values is None:
        for axis in (left, right):
            axis.text(0.5, 0.5, "no value samples in this report", ha="center",
                      va="center", transform=axis.transAxes)
            axis.set_axis_off()
        figure.suptitle(title, x=0.01, ha="left", fontsize=10)
        return figure
    torch_values, reference = values
    keep = np.isfinite(torch_values) & np.isfinite(reference)
    t, r = torch_values[keep], reference[keep]
    left.scatter(r, t, s=10, color=COLORS["bound_edge"], alpha=0.8)
    if r.size:
        lo, hi = float(min(r.min(), t.min())), float(max(r.max(), t.max()))
        left.plot([lo, hi], [lo, hi], color=COLORS["diagonal"], linewidth=0.8,
                  label="torch = reference")
        left.legend(fontsize=7, frameon=False)
    left.set_xlabel("float64 reference")
    left.set_ylabel("PyTorch")
    left.set_title(f"{title}: {t.size} sampled elements", loc="left", fontsize=10)
    error = np.abs(t - r)
    floor = _floor(list(error))
    _zero_band(right, floor)
    right.scatter(r, np.maximum(error, floor), s=10, color=COLORS["e2e"], zorder=2)
    right.set_yscale("log")
    # Plain tick labels ("1e-08"): mathtext ones are parsed on every draw (~0.3 s here).
    right.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=True))
    right.set_xlabel("float64 reference")
    right.set_ylabel("|PyTorch - reference|")
    ratios = "" if entry is None else (
        f"worst observed/bound: node-local {entry.local_ratio:.3g}, "
        f"end to end {entry.e2e_ratio:.3g}\n")
    right.set_title(f"{ratios}(bounds vary by element; 0 drawn at {floor:.0e})",
                    loc="left", fontsize=8)
    return figure
