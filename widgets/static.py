"""Static HTML of the exactness and graph views (inline SVG, deterministic, no ipywidgets)."""

from __future__ import annotations

import math

import ncet
from ncet.render import (
    VIEW_STYLE,
    Column,
    code_cell,
    escape,
    exactness_figure,
    figure_png,
    figure_svg,
    node_verdict,
    number_cells,
    output_error_figure,
    output_verdict,
    ratio_text,
    records_html,
    scatter_figure,
    sensitivity_figure,
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
    """The node worth looking at first: the first root cause, else the tightest node."""
    if report.root_causes:
        return report.root_causes[0].name
    if not report.entries:
        return None
    return max(report.entries, key=lambda e: (_finite(e.local_ratio), _finite(e.e2e_ratio))).name


def _finite(value: float) -> float:
    return value if math.isfinite(value) else math.inf


LEVEL_COLORS = {"ok": "var(--ncet-ok, #15803d)", "warn": "var(--ncet-warn, #b45309)",
                "bad": "var(--ncet-bad, #b91c1c)"}
"""The verdict's colour: the views' palette (render/css.py: JupyterLab's theme colours mixed
towards the theme's text colour, so they read at WCAG AA on light and dark themes), with
light-page fallbacks elsewhere."""


def verdict_level(report: ncet.ExactnessReport) -> str:
    """"ok" (exact, no vacuous output bound), "warn" (not certified, or an output's
    end-to-end bound vacuous) or "bad" (a violation)."""
    if report.first_violation is not None or report.traced_differs \
            or any(o.violations for o in report.outputs):
        return "bad"
    return "warn" if not report.ok or report.vacuous_outputs else "ok"


def verdict_html(report: ncet.ExactnessReport) -> str:
    """The verdict line in its level's colour (`verdict_level`, class `ncet-level-<level>`)
    and the rest of the summary (root causes and what they leave uncertified, vacuous
    bounds, inputs, arithmetic)."""
    first, *rest = report.summary().splitlines()
    level = verdict_level(report)
    lines = "".join(f"<li>{escape(line)}</li>" for line in rest)
    return (f'<div class="ncet-verdict ncet-level-{level}"><p style="color:'
            f'{LEVEL_COLORS[level]};font-weight:bold">{escape(first)}</p><ul>{lines}</ul>'
            "</div>")


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


def _num(value: float, digits: int = 3) -> str:
    return number_cells(value, cls="num", digits=digits)


def _ratio(value: float) -> str:
    return f'<td class="num">{ratio_text(value)}</td>'


def output_table(report: ncet.ExactnessReport) -> tuple[Column, ...]:
    """The per-output table of `report`: one OutputEntry each; its verdict never reads "0
    violations" where nothing is certified (`ncet.render.output_verdict`)."""
    return (
        Column("output", lambda o: code_cell(o.name)),
        Column("max |eager - reference|", lambda o: _num(o.max_error), numeric=True),
        Column("bound there", lambda o: _num(o.bound), numeric=True),
        Column("ratio", lambda o: _ratio(o.ratio), numeric=True),
        Column("largest bound / |value|", lambda o: _num(o.relative_bound), numeric=True),
        Column("verdict", lambda o: text_cell(output_verdict(report, o))),
    )


def _output_class(report: ncet.ExactnessReport):
    return lambda o: "problem" if o.violations else \
        "not-certified" if report.output_status(o) == "not certified" else ""


def outputs_html(report: ncet.ExactnessReport) -> str:
    """One row per model output: the eager model against the reference and its bound, and
    what is certified there (`data-output` rows: class `problem` when violated,
    `not-certified` downstream of a violation)."""
    return records_html(report.outputs, output_table(report), "ncet-outputs",
                        lambda o: o.name, _output_class(report))


MAX_STATIC_ROWS = 500
"""The static form's per-node table holds at most this many rows (the worst ones): beyond,
the HTML would grow by hundreds of characters per node."""

def node_table(report: ncet.ExactnessReport) -> tuple[Column, ...]:
    """The per-node table of `report`: one ExactnessEntry each; its status column says
    `ncet.render.node_verdict` (root cause, not certified downstream of which root cause,
    not checked, vacuous end-to-end bound), its last column VIOLATED, NOT CERTIFIED or NOT
    CHECKED."""
    return (
        Column("node", lambda e: code_cell(e.name)),
        Column("op_type", lambda e: text_cell(e.op_type)),
        Column("source", lambda e: source_cell(e.location, e.source_text)),
        Column("local error", lambda e: _num(e.local_max_error), numeric=True),
        Column("local bound", lambda e: _num(e.local_bound), numeric=True),
        Column("ratio", lambda e: _ratio(e.local_ratio), numeric=True),
        Column("sensitivity", lambda e: _num(e.sensitivity, 2), numeric=True),
        Column("suspicion", lambda e: text_cell(
            f"{e.suspicion:.3g}{' suspicious' if e.suspicious else ''}")),
        Column("e2e error", lambda e: _num(e.e2e_max_error), numeric=True),
        Column("e2e bound", lambda e: _num(e.e2e_bound), numeric=True),
        Column("ratio", lambda e: _ratio(e.e2e_ratio), numeric=True),
        Column("e2e bound / |value|", lambda e: _num(e.e2e_relative_bound), numeric=True),
        Column("status", lambda e: text_cell(node_verdict(report, e))),
        Column("", lambda e: text_cell(_flag(report, e))),
    )


def _flag(report: ncet.ExactnessReport, entry) -> str:
    if entry.violated:
        return "VIOLATED"
    status = report.status(entry.name)
    return {"not certified": "NOT CERTIFIED", "not checked": "NOT CHECKED"}.get(status, "")


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


def row_class(report: ncet.ExactnessReport):
    """A per-node row's class: "problem root-cause" for a root cause, "problem" for another
    violated node, "not-certified" downstream of a violation, "vacuous" for a vacuous
    end-to-end bound."""
    classes = {"root cause": "problem root-cause", "not certified": "not-certified",
               "vacuous": "vacuous"}

    def cls(entry) -> str:
        status = report.status(entry.name)
        return "problem" if entry.violated and status != "root cause" else \
            classes.get(status, "")

    return cls


def nodes_html(report: ncet.ExactnessReport, entries=None) -> str:
    """The per-node table: errors, bounds, ratios, each node's status; one row per entry of
    `entries` in the order given (default: every IR node of the report, in graph order)."""
    rows = report.entries if entries is None else entries
    return records_html(rows, node_table(report), "ncet-exactness-nodes", _name,
                        row_class(report))


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
    """The exactness panel as static HTML: verdict, per-node plot, per-node sensitivity
    (bound / |value|), output error/bound histogram, the per-output table,
    torch-vs-reference scatter for `node` (default: the first root cause or the tightest
    node), the arithmetic model and the per-node table (capped at `MAX_STATIC_ROWS` rows,
    the worst ones, with a note of how many were left out)."""
    node = node or default_node(report)
    points = len(report.entries)
    parts = ['<div class="ncet-static ncet-exactness">', VIEW_STYLE, verdict_html(report),
             figure_html(exactness_figure(report), "ncet-errors", points),
             figure_html(sensitivity_figure(report), "ncet-sensitivity", points),
             figure_html(output_error_figure(report), "ncet-outputs"), outputs_html(report)]
    if node is not None:
        parts.append(figure_html(scatter_figure(report, node), "ncet-scatter"))
    parts += [arithmetic_html(report), static_nodes_html(report), "</div>"]
    return "".join(parts)


def graph_html(ir: ncet.GraphIR, max_nodes: int = 100, start: int = 0) -> str:
    """One page of the graph drawing as static HTML (inline SVG)."""
    figure = graph_figure(ir, max_nodes=max_nodes, start=start)
    return f'<div class="ncet-static ncet-graph">{figure_svg(figure, "ncet-graph")}</div>'
