"""`CompareView`: the comparison of two GraphIRs or two ExactnessReports (`ncet.compare`) as a
view: its summary, a table of what changed, and the whole table as a CSV download."""

from __future__ import annotations

import math

import ipywidgets as W

import ncet
from ncet.render import VIEW_STYLE, Column, cell, code_cell, escape, number, records_html

from .display import VIEW_CLASS, StaticFallback, style_widget
from .downloads import download_link, link_html

PRE_STYLE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0"
"""The summary's `<pre>`: long lines (a verdict with its source line) wrap."""

MAX_ROWS = 500
"""The most table rows a view shows (the CSV download has them all)."""


def _num(key: str):
    def render(record) -> str:
        value = record[key]
        text = "" if value is None or (isinstance(value, float) and math.isnan(value)) \
            else number(value)
        return cell(text, "num")
    return render


def _text(key: str, cls: str = ""):
    return lambda record: cell(escape(record[key]), cls)


GRAPH_TABLE = (
    Column("node (A)", lambda r: code_cell(r["node"])),
    Column("node (B)", lambda r: code_cell(r["node_b"])),
    Column("op_type", _text("op_type", "mono")),
    Column("change", _text("change", "nowrap")),
    Column("matched by", _text("matched_by")),
    Column("max |Δ|", _num("max_abs_diff"), numeric=True),
    Column("bit-identical", lambda r: cell("" if r["bit_identical"] is None
                                           else "yes" if r["bit_identical"] else "no")),
    Column("differences", _text("detail")),
)
"""The columns of a graph comparison's table: one row per removed, added or changed node."""

RATIO_TABLE = (
    Column("node (A)", lambda r: code_cell(r["node"])),
    Column("node (B)", lambda r: code_cell(r["node_b"])),
    Column("op_type", _text("op_type", "mono")),
    Column("local ratio A", _num("local_ratio_a"), numeric=True),
    Column("local ratio B", _num("local_ratio_b"), numeric=True),
    Column("e2e ratio A", _num("e2e_ratio_a"), numeric=True),
    Column("e2e ratio B", _num("e2e_ratio_b"), numeric=True),
    Column("status A", _text("status_a", "nowrap")),
    Column("status B", _text("status_b", "nowrap")),
    Column("change", _text("change", "nowrap")),
)
"""The columns of an exactness comparison's table: the ratios (observed/bound) side by side."""


def _problem(record) -> str:
    return "problem" if record.get("change") in ("new violation", "removed") or \
        record.get("status_b") == "violated" else ""


def _node(record) -> str:
    return record["node_b"] or record["node"]


def shown_records(comparison, changed_only: bool = True) -> list[dict]:
    """The rows a view lists: graphs every difference; reports the rows that changed (all
    rows with `changed_only=False`)."""
    rows = comparison.records()
    if comparison.kind == "exactness" and changed_only:
        rows = [r for r in rows if r["change"]]
    return rows


def table_html(comparison, changed_only: bool = True, limit: int = MAX_ROWS) -> str:
    """The table of a comparison (at most `limit` rows, with a note of the rest), or a line
    saying nothing differs."""
    rows = shown_records(comparison, changed_only)
    if not rows:
        return '<p class="ncet-empty">No node differs.</p>'
    columns = GRAPH_TABLE if comparison.kind == "graph" else RATIO_TABLE
    note = "" if len(rows) <= limit else (
        f'<p class="ncet-compare-note">The table shows the first {limit} of {len(rows)} rows; '
        "the CSV has them all.</p>")
    table = records_html(rows[:limit], columns, "ncet-compare-nodes", _node, _problem)
    return f'{note}<div class="ncet-scroll">{table}</div>'


def verdict_html(comparison) -> str:
    """One line in bold: same or different, in the verdict's colour."""
    what = "GraphIRs" if comparison.kind == "graph" else "exactness reports"
    same = comparison.same
    color = "var(--ncet-ok)" if same else "var(--ncet-bad)"
    text = f"The {what} are the same" if same else f"The {what} differ"
    return (f'<p class="ncet-compare-verdict" style="color:{color};font-weight:bold">'
            f"{escape(text)}</p>")


def summary_html(comparison) -> str:
    """`comparison.summary()` as a wrapping `<pre>`."""
    return (f'<pre class="ncet-compare-summary" style="{PRE_STYLE}">'
            f"{escape(comparison.summary())}</pre>")


def csv_text(comparison) -> str:
    """Every row of the comparison (`to_pandas()`) as CSV."""
    return comparison.to_pandas().to_csv(index=False, lineterminator="\n")


def compare_html(comparison, filename: str = "comparison.csv") -> str:
    """The static form: verdict, summary, table and the CSV download link."""
    return ('<div class="ncet-static ncet-compare">' + VIEW_STYLE + verdict_html(comparison)
            + summary_html(comparison)
            + table_html(comparison)
            + link_html(csv_text(comparison), filename, "text/csv") + "</div>")


class CompareView(StaticFallback, W.VBox):
    """Two GraphIRs or two ExactnessReports compared: summary, the table of what changed
    (reports: a checkbox lists every node), and a CSV download of every row.

    Attributes:
        comparison: The `ncet.compare` result shown.
        summary: HTML: the verdict and `comparison.summary()`.
        table: HTML: the table (at most `MAX_ROWS` rows).
        download: The CSV download link.

    Example:
        >>> CompareView(ncet.load("before.ncet"), ncet.load("after.ncet"))
        >>> CompareView(report_float32, report_float64)
    """

    def __init__(self, a, b=None, filename: str = "comparison.csv"):
        """`a` and `b` are two GraphIRs or two ExactnessReports; or `a` is a Comparison
        already computed and `b` is None."""
        self.comparison = a if b is None else ncet.compare(a, b)
        self.filename = filename
        self.summary = W.HTML(verdict_html(self.comparison) + summary_html(self.comparison))
        self.table = W.HTML(table_html(self.comparison))
        self.table.add_class("ncet-compare-table")
        self.download = download_link(csv_text(self.comparison), filename, "text/csv")
        children = [style_widget(), self.summary]
        if self.comparison.kind == "exactness":
            self.all_nodes = W.Checkbox(value=False, description="every node",
                                        indent=False)
            self.all_nodes.add_class("ncet-compare-all")
            self.all_nodes.observe(self._on_all, names="value")
            children.append(self.all_nodes)
        super().__init__([*children, self.table, self.download])
        self.add_class(VIEW_CLASS)
        self.add_class("ncet-compare-view")

    def _on_all(self, change) -> None:
        self.table.value = table_html(self.comparison, changed_only=not change["new"])

    def to_html(self) -> str:
        """The static form (deterministic): verdict, summary, table, CSV link."""
        return compare_html(self.comparison, self.filename)
