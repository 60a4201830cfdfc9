"""The figures of how an exactness check's errors and bounds scale: the output error/bound
histogram (per element, so at most 1 everywhere is within the bounds) and the per-node
sensitivity figure (bound / |value|: above 1 the end-to-end bound is vacuous), drawn in
`plots`' style."""

from __future__ import annotations

import math

from ..exactness.report import ExactnessReport
from ..exactness.report_view import ratio_text
from .plots import (
    COLORS,
    _decade,
    _node_axis,
    _ratio_axis,
    _shown,
    new_figure,
    styled,
)


def output_ratios(report: ExactnessReport):
    """The sampled output error/bound ratios as a float64 numpy array (empty when the
    report kept none)."""
    return report.output_ratio_sample().numpy()


@styled
def output_error_figure(report: ExactnessReport, width: float = 6.5, height: float = 3.4):
    """Histogram of |eager output - float64 reference| / bound over a sample of output
    elements (each element against its own bound), on log-spaced bins, with a line at 1:
    everything at or left of it is within the bound. Exact elements are counted in the
    title; an output downstream of a violation or with a vacuous bound is said so.

    Returns:
        A matplotlib Figure (it says so when the report kept no ratios).
    """
    import numpy as np

    figure, axes = new_figure(width, height)
    axis = axes[0][0]
    ratios = output_ratios(report)
    if ratios.size == 0:
        why = "the end-to-end check was not run" if not report.end_to_end else \
            "no element of any output differed from the reference"
        axis.text(0.5, 0.5, f"no output error/bound samples: {why}", ha="center",
                  va="center", transform=axis.transAxes, color=COLORS["muted"])
        axis.set_axis_off()
        return figure
    finite = ratios[np.isfinite(ratios)]
    positive = finite[finite > 0]
    exact, unbounded = int((finite == 0).sum()), int((~np.isfinite(ratios)).sum())
    above = int((ratios > 1).sum())
    top = max([*positive.tolist(), 1.0])
    lo = math.floor(math.log10(positive.min())) if positive.size else -1
    hi = max(math.ceil(math.log10(top * 1.0001)), lo + 1)
    axis.axvspan(1.0, 10.0 ** hi, color=COLORS["alarm"], zorder=0)
    if positive.size:
        bins = np.logspace(lo, hi, 4 * (hi - lo) + 1)
        axis.hist(np.minimum(positive, 10.0 ** hi), bins=bins, color=COLORS["bound_edge"],
                  alpha=0.85, zorder=2, label="sampled output elements")
    axis.axvline(1.0, color=COLORS["violation"], linewidth=1.2, zorder=3,
                 label="error = its bound (right of it: a violation)")
    axis.set_xscale("log")
    axis.set_xlim(10.0 ** lo, 10.0 ** hi)
    axis.xaxis.set_major_formatter(_decade)
    axis.set_xlabel("|eager output - float64 reference| / its bound, per element")
    axis.set_ylabel("elements")
    title = (f"Output error / bound: {ratios.size} sampled elements, {exact} exact, "
             f"largest {ratio_text(float(ratios.max()))}")
    if above or unbounded:
        title += f"; {above} above 1" + (f", {unbounded} not finite" if unbounded else "")
    axis.set_title(title, loc="left", fontsize=10)
    warning = _warning(report)
    if warning:
        axis.text(0.01, 0.97, warning, transform=axis.transAxes, ha="left", va="top",
                  fontsize=8, color=COLORS["violation"] if "not certified" in warning
                  else COLORS["e2e"])
    axis.legend(fontsize=7, loc="upper right")
    return figure


def _warning(report: ExactnessReport) -> str:
    statuses = {o.name: report.output_status(o) for o in report.outputs}
    bad = [n for n, s in statuses.items() if s == "not certified"]
    if bad:
        return (f"not certified: {', '.join(map(repr, bad[:3]))} downstream of a violation\n"
                "(ratios <= 1 here certify nothing)")
    vacuous = [n for n, s in statuses.items() if s == "vacuous"]
    if vacuous:
        return (f"vacuous bound at {', '.join(map(repr, vacuous[:3]))}: bound >= max |value|"
                "\n(ratios <= 1 here say little)")
    return ""


@styled
def sensitivity_figure(report: ExactnessReport, width: float = 12.0, height: float = 3.6):
    """Per IR node in topological order, on a log axis, how large the bounds are against the
    values they bound: the node-local sensitivity (bound / |value| at the tightest element,
    the smallest relative change there the check would flag) and the end-to-end largest
    bound / largest |value|; above 1 (shaded) the end-to-end bound is vacuous.

    Returns:
        A matplotlib Figure with one axis.
    """
    entries = report.entries
    figure, axes = new_figure(width, height)
    axis = axes[0][0]
    series = {"local": [e.sensitivity for e in entries],
              "e2e": [e.e2e_relative_bound for e in entries]}
    floor, top = _ratio_axis(axis, series.values(), "vacuous", "e2e")
    labels = {"local": ("o", "node-local: bound / |value| at the tightest element"),
              "e2e": ("^", "end to end: largest bound / largest |value|")}
    for check, values in series.items():
        points = [(x, top / 2 if math.isinf(v) else _shown(v, floor))
                  for x, v in enumerate(values) if not math.isnan(v)]
        if points:
            marker, label = labels[check]
            axis.scatter(*zip(*points), s=18, marker=marker, color=COLORS[check], zorder=3,
                         alpha=0.85, label=label)
    vacuous = [(x, _shown(e.e2e_relative_bound, floor)) for x, e in enumerate(entries)
               if report.status(e.name) == "vacuous"]
    if vacuous:
        axis.scatter(*zip(*vacuous), s=60, marker="^", facecolors="none",
                     edgecolors=COLORS["violation"], linewidths=0.8, zorder=4,
                     label="vacuous end-to-end bound")
    axis.set_yscale("log")
    axis.set_ylim(floor / 3, top)
    axis.yaxis.set_major_formatter(_decade)
    axis.set_ylabel("bound / |value|")
    axis.set_title(f"bound / |value| per node: above 1 (shaded) a bound is vacuous "
                   f"({len(report.vacuous)} node(s) end to end)", loc="left", fontsize=10)
    axis.text(1.0, floor, " 0", transform=axis.get_yaxis_transform(), va="center",
              ha="left", fontsize=8, color=COLORS["muted"])
    axis.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3,
                borderaxespad=0.2)
    axis.grid(axis="y", which="major", color=COLORS["grid"], linewidth=0.6)
    _node_axis(axis, entries)
    return figure
