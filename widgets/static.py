"""Static HTML of the exactness and graph views (inline SVG, deterministic, no ipywidgets)."""

from __future__ import annotations

import math

import ncet
from ncet.render import (
    Column,
    code_cell,
    escape,
    exactness_figure,
    figure_png,
    figure_svg,
    number_cells,
    output_error_figure,
    records_html,
    scatter_figure,
    text_cell,
)

from .frames import source_cell
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


OUTPUT_TABLE = (
    Column("output", lambda o: code_cell(o.name)),
    Column("max |eager - reference|", lambda o: number_cells(o.max_error, cls="")),
    Column("bound there", lambda o: number_cells(o.bound, cls="")),
    Column("ratio", lambda o: number_cells(o.ratio, cls="")),
    Column("violations", lambda o: text_cell(o.violations)),
)
"""The per-output table: one OutputEntry each."""


def outputs_html(report: ncet.ExactnessReport) -> str:
    """One row per model output: the eager model against the reference and its bound."""
    return records_html(report.outputs, OUTPUT_TABLE, "ncet-outputs")


MAX_STATIC_ROWS = 500
"""The static form's per-node table holds at most this many rows (the worst ones): beyond,
the HTML would grow by hundreds of characters per node."""

def _verdict(entry) -> str:
    return "VIOLATED" if entry.violated else "" if entry.checked else "NOT CHECKED"


NODE_TABLE = (
    Column("node", lambda e: code_cell(e.name)),
    Column("op_type", lambda e: text_cell(e.op_type)),
    Column("source", lambda e: source_cell(e.location, e.source_text)),
    Column("local error", lambda e: number_cells(e.local_max_error, cls="")),
    Column("local bound", lambda e: number_cells(e.local_bound, cls="")),
    Column("ratio", lambda e: number_cells(e.local_ratio, cls="")),
    Column("sensitivity", lambda e: number_cells(e.sensitivity, cls="", digits=2)),
    Column("suspicion", lambda e: text_cell(
        f"{e.suspicion:.3g}{' suspicious' if e.suspicious else ''}")),
    Column("e2e error", lambda e: number_cells(e.e2e_max_error, cls="")),
    Column("e2e bound", lambda e: number_cells(e.e2e_bound, cls="")),
    Column("ratio", lambda e: number_cells(e.e2e_ratio, cls="")),
    Column("", lambda e: text_cell(_verdict(e))),
)
"""The per-node table: one ExactnessEntry each; a violated row has class "problem"."""


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


def _name(entry) -> str:
    return entry.name


def _problem(entry) -> str:
    return "problem" if entry.violated else ""


def nodes_html(report: ncet.ExactnessReport, entries=None) -> str:
    """The per-node table: errors, bounds, ratios, violations marked; one row per entry of
    `entries` in the order given (default: every IR node of the report, in graph order)."""
    rows = report.entries if entries is None else entries
    return records_html(rows, NODE_TABLE, "ncet-exactness-nodes", _name, _problem)


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
