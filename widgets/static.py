"""Static HTML of the exactness and graph views (inline SVG, deterministic, no ipywidgets)."""

from __future__ import annotations

import math

import ncet

from .figures import (
    exactness_figure,
    figure_png,
    figure_svg,
    output_error_figure,
    scatter_figure,
)
from .frames import escape, source_cell
from .graph import graph_figure

MAX_SVG_POINTS = 400
"""Beyond this many nodes a figure is embedded as PNG: an SVG would grow by megabytes."""


def figure_html(figure, salt: str, points: int = 0) -> str:
    """A figure as inline HTML: SVG (deterministic text) unless it has many points."""
    return figure_png(figure) if points > MAX_SVG_POINTS else figure_svg(figure, salt)


def default_node(report: ncet.ExactnessReport) -> str | None:
    """The node worth looking at first: the first violation, else the tightest node."""
    if report.first_violation is not None:
        return report.first_violation.name
    if not report.entries:
        return None
    return max(report.entries, key=lambda e: (_finite(e.local_ratio), _finite(e.e2e_ratio))).name


def _finite(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def verdict_html(report: ncet.ExactnessReport) -> str:
    """The verdict line (green when exact, red otherwise) and the rest of the summary."""
    first, *rest = report.summary().splitlines()
    color = "#166534" if report.ok else "#b91c1c"
    lines = "".join(f"<li>{escape(line)}</li>" for line in rest)
    return (f'<div class="ncet-verdict"><p style="color:{color};font-weight:bold">'
            f"{escape(first)}</p><ul>{lines}</ul></div>")


def arithmetic_html(report: ncet.ExactnessReport) -> str:
    """The declared arithmetic model the bounds hold under, with the backend flags read."""
    model = report.arithmetic
    notes = "".join(f"<li>{escape(n)}</li>" for n in model.notes)
    flags = ", ".join(f"{k}={v}" for k, v in model.flags.items())
    state = "within the declared model" if model.certified else \
        "OUTSIDE the declared model: the bounds are not certified"
    return (f'<div class="ncet-arithmetic"><h4>Arithmetic model</h4>'
            f"<p>The bounds hold under this arithmetic; the flags in force are {state}.</p>"
            f"<ul>{notes}</ul><p><small>Flags read: <code>{escape(flags)}</code></small></p>"
            "</div>")


def outputs_html(report: ncet.ExactnessReport) -> str:
    """One row per model output: the eager model against the reference and its bound."""
    body = "".join(
        f"<tr><td><code>{escape(o.name)}</code></td><td>{o.max_error:.3g}</td>"
        f"<td>{o.bound:.3g}</td><td>{o.ratio:.3g}</td><td>{o.violations}</td></tr>"
        for o in report.outputs)
    return ('<table class="ncet-outputs"><thead><tr><th>output</th><th>max |eager - '
            "reference|</th><th>bound there</th><th>ratio</th><th>violations</th></tr>"
            f"</thead><tbody>{body}</tbody></table>")


MAX_STATIC_ROWS = 500
"""The static form's per-node table holds at most this many rows (the worst ones): beyond,
the HTML would grow by hundreds of characters per node."""

NODE_HEADERS = ("node", "op_type", "source", "local error", "local bound", "ratio",
                "sensitivity", "suspicion", "e2e error", "e2e bound", "ratio", "")


def worst_ratio(entry) -> float:
    """The larger of a node's node-local and end-to-end observed/bound ratios (NaN, as when
    error and bound are both zero, counts as the smallest)."""
    ratios = [r for r in (entry.local_ratio, entry.e2e_ratio) if not math.isnan(r)]
    return max(ratios, default=-math.inf)


def worst_first(entries) -> list[int]:
    """Positions of `entries` ordered violations first, then by worst ratio, largest first;
    ties keep graph order."""
    return sorted(range(len(entries)),
                  key=lambda i: (not entries[i].violated, -worst_ratio(entries[i]), i))


def node_row_html(entry) -> str:
    """One `<tr data-node=...>` of the per-node table (class "problem" when violated)."""
    e = entry
    return (f'<tr data-node="{escape(e.name)}"'
            f'{" class=problem" if e.violated else ""}><td><code>{escape(e.name)}</code></td>'
            f"<td>{escape(e.op_type)}</td>"
            f"{source_cell(e.location, e.source_text)}"
            f"<td>{e.local_max_error:.3g}</td>"
            f"<td>{e.local_bound:.3g}</td><td>{e.local_ratio:.3g}</td>"
            f"<td>{e.sensitivity:.2g}</td>"
            f"<td>{e.suspicion:.3g}{' suspicious' if e.suspicious else ''}</td>"
            f"<td>{e.e2e_max_error:.3g}</td><td>{e.e2e_bound:.3g}</td><td>{e.e2e_ratio:.3g}</td>"
            f"<td>{'VIOLATED' if e.violated else '' if e.checked else 'NOT CHECKED'}</td></tr>")


def nodes_html(report: ncet.ExactnessReport, entries=None) -> str:
    """The per-node table: errors, bounds, ratios, violations marked; one row per entry of
    `entries` in the order given (default: every IR node of the report, in graph order)."""
    rows = report.entries if entries is None else entries
    body = "".join(node_row_html(e) for e in rows)
    head = "".join(f"<th>{h}</th>" for h in NODE_HEADERS)
    return (f'<table class="ncet-exactness-nodes"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def static_nodes_html(report: ncet.ExactnessReport, limit: int = MAX_STATIC_ROWS) -> str:
    """The per-node table of the static form: every node up to `limit` nodes; beyond, the
    `limit` worst (violations first, then largest ratio) in graph order, and a note saying
    how many rows were left out."""
    entries = report.entries
    if len(entries) <= limit:
        return nodes_html(report)
    kept = sorted(worst_first(entries)[:limit])
    note = (f'<p class="ncet-nodes-note">The table shows the {limit} nodes with the largest '
            f"observed/bound ratio (violations first) of {len(entries)}, in graph order; "
            f"{len(entries) - limit} rows are left out (the ExactnessPanel pages through "
            "all of them).</p>")
    return note + nodes_html(report, [entries[i] for i in kept])


def exactness_html(report: ncet.ExactnessReport, node: str | None = None) -> str:
    """The exactness panel as static HTML: verdict, per-node plot, output error histogram,
    torch-vs-reference scatter for `node` (default: the first violation or the tightest
    node), the arithmetic model, the per-output table and the per-node table (capped at
    `MAX_STATIC_ROWS` rows, the worst ones, with a note of how many were left out)."""
    node = node or default_node(report)
    parts = ['<div class="ncet-static ncet-exactness">', verdict_html(report),
             figure_html(exactness_figure(report), "ncet-errors", len(report.entries)),
             figure_html(output_error_figure(report), "ncet-outputs"), outputs_html(report)]
    if node is not None:
        parts.append(figure_html(scatter_figure(report, node), "ncet-scatter"))
    parts += [arithmetic_html(report), static_nodes_html(report), "</div>"]
    return "".join(parts)


def graph_html(ir: ncet.GraphIR, max_nodes: int = 100, start: int = 0) -> str:
    """One page of the graph drawing as static HTML (inline SVG)."""
    figure = graph_figure(ir, max_nodes=max_nodes, start=start)
    return f'<div class="ncet-static ncet-graph">{figure_svg(figure, "ncet-graph")}</div>'
