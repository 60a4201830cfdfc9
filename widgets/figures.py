"""Exactness figures: per-node error against the certified bound, output errors, and PyTorch
against the float64 reference at one node (matplotlib Figures, no pyplot state)."""

from __future__ import annotations

import base64
import functools
import io
import math

import ncet

COLORS = {"bound": "#9db4d8", "bound_edge": "#3b5b92", "local": "#1f2937", "e2e": "#d97706",
          "violation": "#c62828", "zero": "#f1f5f9", "diagonal": "#94a3b8"}

RC = {"svg.fonttype": "none", "font.family": ["DejaVu Sans", "sans-serif"], "font.size": 9,
      "axes.spines.top": False, "axes.spines.right": False}
"""matplotlib settings of every figure: text stays text in SVG, in the page's font."""

CEILING = 1e100
"""The highest the error axis reaches: deep models have finite bounds near float overflow,
which matplotlib's log axis cannot tick; larger values are drawn at the ceiling."""

MAX_BARS = 400
"""Up to this many bound bars are drawn as patches; beyond, as one collection."""

MAX_NAMED_TICKS = 60
"""Up to this many nodes the x axis names them; beyond, it counts positions."""


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
               layout: str | None = "constrained"):
    """A Figure on its own Agg canvas (pyplot's global state untouched) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, cols, squeeze=False)


def figure_svg(figure, salt: str = "ncet") -> str:
    """The figure as an inline `<svg>` element, byte-identical from run to run (fixed ids,
    no date), at its own size but never wider than the page."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({**RC, "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    svg = text[text.index("<svg"):]
    return svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)


def figure_png(figure, dpi: int = 90) -> str:
    """The figure as an `<img>` with an inline PNG (smaller than SVG for large plots)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img style="max-width:100%" src="data:image/png;base64,{data}"/>'


def _plain_log_formatter():
    """Log-axis tick labels as plain text ("1e-08"): the default's mathtext is parsed on
    every draw, a large part of the time to draw a small figure."""
    from matplotlib.ticker import LogFormatter

    return LogFormatter(labelOnlyBase=True)


def _floor(values) -> float:
    """Where zeros are drawn on a log axis: a decade below the smallest positive value."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return 10.0 ** (math.floor(math.log10(min(positive))) - 1) if positive else 1e-20


def _at_worst(error: float, bound: float, ratio: float) -> float:
    """The observed error at the element where error/bound is largest."""
    return ratio * bound if math.isfinite(ratio) and bound > 0 else error


@styled
def exactness_figure(report: ncet.ExactnessReport, width: float = 11.0, height: float = 4.2):
    """Per IR node in topological order, on a log axis: the certified bound and the observed
    |torch - reference| where they are closest, node-local and end to end; violations marked.

    Args:
        report: The result of `ncet.check_exactness`.
        width: Figure width in inches.
        height: Figure height in inches.

    Returns:
        A matplotlib Figure.
    """
    entries = report.entries
    figure, axes = new_figure(width, height)
    axis = axes[0][0]
    local = [(_at_worst(e.local_max_error, e.local_bound, e.local_ratio), e.local_bound,
              e.local_violations > 0) for e in entries]
    e2e = [(_at_worst(e.e2e_max_error, e.e2e_bound, e.e2e_ratio), e.e2e_bound,
            e.e2e_violations > 0) for e in entries]
    floor = _floor([v for rows in (local, e2e) for row in rows for v in row[:2]])
    xs = list(range(len(entries)))

    def shown(value: float) -> float:
        return min(max(value, floor), CEILING) if math.isfinite(value) else \
            min(floor * 1e30, CEILING)

    axis.axhspan(floor / 3, floor * 3, color=COLORS["zero"], zorder=0)
    if report.local:
        bars = [(x, shown(b)) for x, (_, b, _) in zip(xs, local) if b > 0]
        if bars:
            _bound_bars(axis, bars, floor / 3)
        axis.scatter(xs, [shown(e) for e, _, _ in local], s=14, color=COLORS["local"],
                     label="node-local observed error", zorder=3)
    if report.end_to_end:
        axis.scatter(xs, [shown(b) for _, b, _ in e2e], marker="_", s=150, linewidths=1.6,
                     color=COLORS["e2e"], label="end-to-end certified bound", zorder=2)
        axis.scatter(xs, [shown(e) for e, _, _ in e2e], s=16, marker="^",
                     color=COLORS["e2e"], label="end-to-end observed error", zorder=3)
    bad = [(x, shown(e)) for x, lo, ee in zip(xs, local, e2e)
           for e, _, violated in (lo, ee) if violated]
    if bad:
        axis.scatter(*zip(*bad), s=80, marker="X", color=COLORS["violation"], zorder=4,
                     label="violation (error above its bound)")
    top = max([shown(v) for rows in (local, e2e) for row in rows for v in row[:2]] + [floor])
    axis.set_yscale("log")
    axis.set_ylim(floor / 3, min(top * 10, CEILING * 10))
    axis.set_ylabel("absolute error")
    axis.text(1.0, floor, " 0 (exact)", transform=axis.get_yaxis_transform(), va="center",
              ha="left", fontsize=8, color="#64748b")
    axis.set_xlim(-0.7, max(len(entries), 1) - 0.3)
    if len(entries) <= MAX_NAMED_TICKS:
        axis.set_xticks(xs, [f"{e.name} ({e.op_type})" for e in entries], rotation=90,
                        fontsize=7)
        for label, entry in zip(axis.get_xticklabels(), entries):
            if entry.violated:
                label.set_color(COLORS["violation"])
    axis.set_xlabel("IR nodes in topological order")
    verdict = "no violation" if report.first_violation is None else \
        f"first violation at {report.first_violation.name!r}"
    axis.set_title(f"Observed error against the certified bound ({len(entries)} nodes, "
                   f"{report.samples} samples; {verdict})", loc="left", fontsize=10)
    axis.legend(loc="upper left", fontsize=7, ncols=3, frameon=False)
    axis.grid(axis="y", color="#e2e8f0", linewidth=0.5)
    return figure


def _bound_bars(axis, bars: list[tuple[int, float]], bottom: float) -> None:
    """The node-local bounds as bars from `bottom`: one Rectangle each up to `MAX_BARS`
    bars, beyond that one PolyCollection without edges (a patch per bar costs
    milliseconds)."""
    style = dict(color=COLORS["bound"], edgecolor=COLORS["bound_edge"], linewidth=0.5,
                 label="node-local certified bound", zorder=1)
    if len(bars) <= MAX_BARS:
        axis.bar(*zip(*bars), width=0.7, bottom=bottom, **style)
        return
    from matplotlib.collections import PolyCollection

    boxes = [((x - 0.35, bottom), (x + 0.35, bottom), (x + 0.35, top), (x - 0.35, top))
             for x, top in bars]
    style["facecolor"] = style.pop("color")
    style["linewidth"] = 0  # edges a fraction of a pixel apart would paint the bars over
    axis.add_collection(PolyCollection(boxes, **style), autolim=False)


@styled
def output_error_figure(report: ncet.ExactnessReport, width: float = 6.5,
                        height: float = 3.4):
    """Histogram of |eager output - float64 reference| over sampled output elements, on
    log-spaced bins, with each output's certified bound marked; exact elements counted.

    Returns:
        A matplotlib Figure (it says so when the report kept no samples).
    """
    import numpy as np

    figure, axes = new_figure(width, height)
    axis = axes[0][0]
    errors = output_errors(report)
    if errors is None or errors.size == 0:
        axis.text(0.5, 0.5, "no output samples in this report", ha="center", va="center",
                  transform=axis.transAxes)
        axis.set_axis_off()
        return figure
    finite = errors[np.isfinite(errors)]
    positive = finite[finite > 0]
    exact = int((finite == 0).sum())
    bounds = [o.bound for o in report.outputs if o.bound > 0 and math.isfinite(o.bound)]
    if positive.size:
        lo = math.floor(math.log10(positive.min()))
        hi = math.ceil(math.log10(max([positive.max(), *bounds])))
        bins = np.logspace(lo, max(hi, lo + 1), 4 * max(hi - lo, 1) + 1)
        axis.hist(positive, bins=bins, color=COLORS["bound_edge"], alpha=0.85,
                  label="sampled output elements")
        axis.set_xscale("log")
    for output in report.outputs:
        if output.bound > 0 and math.isfinite(output.bound):
            axis.axvline(output.bound, color=COLORS["violation"], linestyle="--", linewidth=1,
                         label=f"bound at the tightest element of {output.name!r}")
    axis.set_xlabel("|eager output - float64 reference|")
    axis.set_ylabel("elements")
    axis.set_title(f"Output errors: {errors.size} sampled elements, {exact} exact, "
                   f"largest {finite.max():.3g}" if finite.size else "Output errors",
                   loc="left", fontsize=10)
    if positive.size or bounds:
        axis.legend(fontsize=7, frameon=False)
    return figure


def output_errors(report: ncet.ExactnessReport):
    """The sampled output errors as a float64 numpy array, or None without the sample API."""
    sample = getattr(report, "output_error_sample", None)
    if sample is None:
        return None
    try:
        return sample().numpy()
    except KeyError:
        return None


def value_sample(report: ncet.ExactnessReport, node_name: str):
    """(torch values, reference values) of a node as numpy arrays, or None when the report
    has no samples (or no sample API)."""
    sample = getattr(report, "value_sample", None)
    if sample is None:
        return None
    try:
        torch_values, reference = sample(node_name)
    except KeyError:
        return None
    return torch_values.numpy(), reference.numpy()


@styled
def scatter_figure(report: ncet.ExactnessReport, node_name: str, width: float = 9.0,
                   height: float = 3.6):
    """PyTorch's values against the float64 reference at one IR node (left), and their
    difference against the node's bounds (right), over the sampled elements.

    Raises:
        KeyError: The report has no entry and no sample for that node.
    """
    import numpy as np

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
    right.axhspan(floor / 3, floor * 3, color=COLORS["zero"], zorder=0)
    right.scatter(r, np.maximum(error, floor), s=10, color=COLORS["e2e"], zorder=2)
    right.set_yscale("log")
    right.yaxis.set_major_formatter(_plain_log_formatter())  # mathtext labels cost ~0.3 s
    right.set_xlabel("float64 reference")
    right.set_ylabel("|PyTorch - reference|")
    ratios = "" if entry is None else (
        f"worst observed/bound: node-local {entry.local_ratio:.3g}, "
        f"end to end {entry.e2e_ratio:.3g}\n")
    right.set_title(f"{ratios}(bounds vary by element; 0 drawn at {floor:.0e})",
                    loc="left", fontsize=8)
    return figure
