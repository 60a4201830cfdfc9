"""How an ExactnessReport reads: its ratios as text (never rounded across 1), its notebook
display (the verdict and the worst nodes) and its pandas Styler."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report import ExactnessReport

RATIO_DIGITS = 4
"""Significant digits of an observed/bound ratio as text: enough that an attained bound
(ratio 1) reads "1.000" and a ratio just below it "0.9999"."""

WORST_SHOWN = 10
"""Rows of the notebook display's table of the worst nodes."""

LEVEL_COLORS = {"ok": "var(--jp-success-color1, #15803d)",
                "warn": "var(--jp-warn-color1, #b45309)",
                "bad": "var(--jp-error-color1, #b91c1c)"}
"""The verdict's colour per level: JupyterLab's theme colours (readable on its light and
dark themes), with a light-page fallback elsewhere."""

TINTS = {"root cause": "rgba(220, 38, 38, 0.18)", "violated": "rgba(220, 38, 38, 0.18)",
         "not certified": "rgba(217, 119, 6, 0.16)", "not checked": "rgba(217, 119, 6, 0.16)",
         "vacuous": "rgba(217, 119, 6, 0.10)"}
"""Row tints per status: translucent, so they read on light and dark backgrounds."""


def ratio_text(value: float, digits: int = RATIO_DIGITS) -> str:
    """An observed/bound ratio as text, rounded away from 1 so the text is on the same side
    of 1 as the value: 0.99996 reads "0.9999", 1 reads "1.000", 1.00002 reads "1.001".

    Args:
        value: The ratio (0, positive, inf or NaN).
        digits: Significant digits.

    Example:
        >>> ratio_text(1.0), ratio_text(0.123456), ratio_text(3e-9)
        ('1.000', '0.1234', '3.000e-09')
    """
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    step = 10.0 ** (exponent - digits + 1)
    if value < 1:
        shown = math.floor(value / step * (1 + 1e-12)) * step  # 3e-9 is not 2.999e-09
        shown = min(shown, 1 - 10.0 ** -digits)
    elif value > 1:  # never "1.000" for a ratio above 1: that reads as an attained bound
        shown = max(math.ceil(value / step * (1 - 1e-12)) * step, 1 + 10.0 ** (1 - digits))
    else:
        shown = 1.0
    exponent = math.floor(math.log10(shown)) if shown > 0 else exponent
    if -3 <= exponent < 5:
        return f"{shown:.{max(digits - 1 - exponent, 0)}f}"
    return f"{shown:.{digits - 1}e}"


def number_text(value: float) -> str:
    """Any other number of the report as text: three significant digits, "inf", "nan"."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.3g}"


def level(report: ExactnessReport) -> str:
    """The verdict's level: "ok" (certified, no vacuous output bound), "warn" (not
    certified or a vacuous end-to-end bound at an output, no violation) or "bad"."""
    if report.first_violation is not None or report.traced_differs \
            or any(o.violations for o in report.outputs):
        return "bad"
    if not report.ok or report.vacuous_outputs:
        return "warn"
    return "ok"


_WORST_COLUMNS = ("node", "op_type", "status", "local ratio", "e2e ratio", "e2e bound / |value|",
                  "note")


def repr_html(report: ExactnessReport) -> str:
    """The notebook display: the verdict in its colour, the summary's other lines, and the
    `WORST_SHOWN` worst nodes (root causes first, then violations, then the largest ratio)."""
    first, *rest = report.summary().splitlines()
    color = LEVEL_COLORS[level(report)]
    head = (f'<div class="ncet-exactness-report"><p style="color:{color};font-weight:600;'
            f'margin:0 0 4px">{html.escape(first)}</p>')
    worst = report.worst_entries(WORST_SHOWN)
    if worst:
        cells = "".join(f'<th style="text-align:{"right" if "ratio" in c or "/" in c else "left"}'
                        f'">{html.escape(c)}</th>' for c in _WORST_COLUMNS)
        rows = []
        for e in worst:
            status = report.status(e.name)
            tint = TINTS.get(status)
            style = f' style="background:{tint}"' if tint else ""
            nums = [ratio_text(e.local_ratio), ratio_text(e.e2e_ratio),
                    number_text(e.e2e_relative_bound)]
            rows.append(
                f"<tr{style}><td><code>{html.escape(e.name)}</code></td>"
                f"<td>{html.escape(e.op_type)}</td><td>{html.escape(status)}</td>"
                + "".join(f'<td style="text-align:right;font-variant-numeric:tabular-nums;'
                          f'white-space:nowrap">{n}</td>' for n in nums)
                + f"<td>{html.escape(e.note)}</td></tr>")
        title = f"the {len(worst)} worst of {len(report.entries)} nodes"
        head += (f'<p style="margin:6px 0 2px">{html.escape(title)} (root causes first, '
                 "then violations, then the largest observed/bound):</p>"
                 f'<table><thead><tr>{cells}</tr></thead><tbody>{"".join(rows)}</tbody>'
                 "</table>")
    more = html.escape("\n".join(rest))
    return (head + f"<details><summary>inputs, arithmetic, notes</summary><pre>{more}</pre>"
            "</details></div>")


RATIO_COLUMNS = ("local_ratio", "local_median_ratio", "e2e_ratio", "e2e_median_ratio")
"""The to_pandas columns formatted by `ratio_text`."""


def styled_frame(report: ExactnessReport, frame):
    """`frame` (the report's `to_pandas()`) as a pandas Styler: a status column, violated
    rows tinted red and the rows downstream of a violation amber, numbers right-aligned in
    one format (ratios by `ratio_text`, other numbers to three significant digits)."""
    frame = frame.copy()
    frame.insert(2, "status", [report.status(e.name) for e in report.entries])
    numbers = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    formats = {c: (ratio_text if c in RATIO_COLUMNS else number_text) for c in numbers}

    def tint(row):
        color = TINTS.get(row["status"])
        return [f"background-color: {color}" if color else ""] * len(row)

    styler = frame.style.format(formats).apply(tint, axis=1)
    styler = styler.set_properties(subset=numbers, **{
        "text-align": "right", "font-variant-numeric": "tabular-nums", "white-space": "nowrap"})
    return styler.hide(axis="index")


def consequences(report: ExactnessReport) -> list[str]:
    """The summary's lines on the root causes and what they leave uncertified, and on
    vacuous end-to-end bounds (none when there is nothing to say)."""
    lines = []
    roots, downstream = report.root_causes, report.not_certified
    if roots and (downstream or len(roots) > 1):
        nodes = sum(report.status(e.name) == "not certified" for e in report.entries)
        outputs = sum(report.output_status(o) == "not certified" for o in report.outputs)
        lines.append(f"root cause(s): {names_text(e.name for e in roots)}; downstream of "
                     f"them, not certified: {nodes} node(s) and {outputs} of "
                     f"{len(report.outputs)} output(s)"
                     + (f" ({names_text(downstream)})" if downstream else ""))
    vacuous_outputs, nodes = report.vacuous_outputs, report.vacuous
    if vacuous_outputs:
        worst = max(vacuous_outputs, key=lambda o: o.relative_bound)
        lines.append(
            f"vacuous end-to-end bound at output(s) {names_text(o.name for o in vacuous_outputs)}"
            f": the largest bound {number_text(worst.max_bound)} is at least the largest "
            f"|value| {number_text(worst.max_value)} at {worst.name!r}, so the end-to-end "
            f"check certifies nothing there ({len(nodes)} node(s) have vacuous end-to-end "
            "bounds; the node-local checks still hold)")
    elif nodes:
        lines.append(f"vacuous end-to-end bound at {len(nodes)} node(s) ({names_text(nodes)}); "
                     "the outputs' bounds are not vacuous")
    return lines


def cut_text(cut: Mapping[str, str]) -> str:
    """What a GraphIR cut short was checked against (`ExactnessReport.cut`, FX node name ->
    why): "checked against the model's values at the cut, not its outputs: 'softmax' cut
    (trailing nn.Softmax, cut_trailing=True)"."""
    by_reason: dict[str, list[str]] = {}
    for name, why in cut.items():
        by_reason.setdefault(why, []).append(name)
    return "checked against the model's values at the cut, not its outputs: " + "; ".join(
        f"{names_text(names)} cut ({why})" for why, names in by_reason.items())


def names_text(names, limit: int = 6) -> str:
    """Quoted names, the first `limit` of them and how many more."""
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


TABLE_STATUS = {"root cause": "VIOLATED (root cause)", "violated": "VIOLATED",
                "not certified": "NOT CERTIFIED", "not checked": "NOT CHECKED",
                "vacuous": "vacuous e2e bound", "certified": ""}
"""The last column of the text table per status."""


def text_table(report: ExactnessReport) -> str:
    """`ExactnessReport.table`: one line per node, columns padded."""
    g = number_text
    header = ("node", "op_type", "local err at worst", "local bound", "ratio", "ulps",
              "e2e err at worst", "e2e bound", "ratio", "")
    rows = [header] + [(
        e.name, e.op_type, g(e.local_error_at_worst), g(e.local_bound), ratio_text(e.local_ratio),
        g(e.local_ulps), g(e.e2e_error_at_worst), g(e.e2e_bound), ratio_text(e.e2e_ratio),
        TABLE_STATUS[report.status(e.name)]) for e in report.entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
