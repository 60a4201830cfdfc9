"""The HTML report's exactness section: the finding (with the root causes and vacuous
bounds), the per-node error figure, the outputs, tightness and per-node tables, each node
and output marked by its status (root cause, not certified downstream of a violation,
vacuous end-to-end bound)."""

from __future__ import annotations

from ..exactness.report import ExactnessEntry, ExactnessReport, OutputEntry
from ..exactness.report_view import consequences, names_text, ratio_text
from . import plots
from .facts import quote_source
from .tables import (
    Column,
    cell,
    escape,
    long_code_cell,
    number,
    number_cells,
    records_html,
    text_cell,
)


def _mono(value) -> str:
    return text_cell(value, "mono")


def _table(records, columns, cls: str = "", row_class=None) -> str:
    return records_html(records, columns, cls, row_class=row_class) + "\n"


def _ratio(value: float) -> str:
    return cell(ratio_text(value), "num")


def output_verdict(report: ExactnessReport, output: OutputEntry) -> str:
    """What an outputs table says of an output's violations: the count, and never a bare
    "0" where nothing is certified (downstream of a violation, not checked, a vacuous
    bound)."""
    status = report.output_status(output)
    count = f"{output.violations} violation(s)"
    if status == "not certified":
        causes = names_text(report.caused_by(output.name, output=True))
        return (f"{count}; " if output.violations else "") + \
            f"NOT CERTIFIED: downstream of the violation at {causes}"
    if status == "vacuous":
        return (f"0 violations, but the bound is vacuous (largest bound "
                f"{number(output.max_bound)} >= largest |value| {number(output.max_value)})")
    if status == "not checked":
        return "NOT CHECKED"
    return count if output.violations else "0 violations"


def output_columns(report: ExactnessReport) -> tuple[Column, ...]:
    """The outputs table of `report`: one OutputEntry per model output."""
    return (
        Column("output", lambda o: _mono(o.name)),
        Column("max |model(x) - reference|", lambda o: number_cells(o.max_error),
               numeric=True),
        Column("bound there", lambda o: number_cells(o.bound), numeric=True),
        Column("ratio", lambda o: _ratio(o.ratio), numeric=True),
        Column("largest bound / |value|", lambda o: number_cells(o.relative_bound),
               numeric=True),
        Column("verdict", lambda o: text_cell(output_verdict(report, o))),
    )

TIGHTNESS_COLUMNS = (
    Column("op_type", lambda t: text_cell(t[0])),
    Column("median observed / bound", lambda t: number_cells(t[1][0]), numeric=True),
    Column("worst observed / bound", lambda t: number_cells(t[1][1]), numeric=True),
)
"""The tightness table: one (op_type, (median ratio, worst ratio)) per op_type."""


def _note(e: ExactnessEntry) -> str:
    return text_cell(e.note if e.checked else "NOT CHECKED: " + e.note)


def node_verdict(report: ExactnessReport, e: ExactnessEntry) -> str:
    """What a per-node table says of a node besides its violations: "root cause", "not
    certified: downstream of 'x'" (the root causes upstream), "not checked", "vacuous e2e
    bound", or "" (certified)."""
    status = report.status(e.name)
    if status == "root cause":
        return "root cause"
    if status == "not certified":
        return f"not certified: downstream of {names_text(report.caused_by(e.name))}"
    return {"not checked": "not checked", "vacuous": "vacuous e2e bound"}.get(status, "")


def _numbers(*pairs) -> tuple[Column, ...]:
    def column(title: str, field: str) -> Column:
        shown = _ratio if "ratio" in field else number_cells
        return Column(title, lambda e: shown(getattr(e, field)), numeric=True)

    return tuple(column(title, field) for title, field in pairs)


def node_columns(report: ExactnessReport) -> tuple[Column, ...]:
    """The per-node exactness table of `report`: one ExactnessEntry per IR node."""
    return (
        Column("node", lambda e: _mono(e.name)),
        Column("op_type", lambda e: text_cell(e.op_type)),
        Column("source", lambda e: long_code_cell(quote_source(e.location, e.source_text))),
        *_numbers(("local max err", "local_max_error"), ("local bound", "local_bound"),
                  ("local ratio", "local_ratio"), ("ulps", "local_ulps"),
                  ("sensitivity", "sensitivity"), ("suspicion", "suspicion"),
                  ("e2e max err", "e2e_max_error"), ("e2e bound", "e2e_bound"),
                  ("e2e ratio", "e2e_ratio"), ("e2e bound / |value|", "e2e_relative_bound")),
        Column("violations", lambda e: cell(str(e.local_violations + e.e2e_violations), "num"),
               numeric=True),
        Column("verdict", lambda e: text_cell(node_verdict(report, e))),
        Column("note", _note),
    )

def _row_class(report: ExactnessReport):
    """A row's class: "violated" for a violated node or output, "not-certified" for one
    downstream of a violation that is not itself violated."""

    def row_class(record: ExactnessEntry | OutputEntry) -> str:
        if isinstance(record, ExactnessEntry):
            violated, status = record.violated, report.status(record.name)
        else:
            violated, status = record.violations > 0, report.output_status(record)
        return "violated" if violated else "not-certified" if status == "not certified" \
            else ""

    return row_class


def exactness_section(exactness: ExactnessReport | None) -> str:
    """The report's exactness section: the finding, the figures, the outputs, tightness
    and per-node tables (a note when the model was not checked)."""
    head = '<section id="exactness">\n<h2>Exactness</h2>\n'
    if exactness is None:
        return head + ("<p class=\"note\">Not checked: the model does not convert, so there "
                       "is no GraphIR to hold to the certified bounds. Fix the problems "
                       "above, then run the report again.</p>\n</section>")
    finding = exactness.summary().splitlines()[0]  # the verdict, with the first violation
    parts = [head, f'<p class="finding">{escape(finding)}</p>\n',
             *(f'<p class="note">{escape(line)}.</p>\n' for line in consequences(exactness)),
             f'<p class="note">Inputs: {escape(exactness.inputs)}.'
             + (" The traced graph's outputs are not bit-identical to the eager model's."
                if exactness.traced_differs else "") + "</p>\n",
             _plot(exactness), _outputs(exactness), _tightness(exactness), _nodes(exactness)]
    return "".join(parts) + "</section>"


def _plot(exactness: ExactnessReport) -> str:
    if not plots.matplotlib_available():
        return ('<p class="note">No plots: matplotlib is not installed '
                "(<code>pip install 'ncet[report]'</code>). The tables below hold the same "
                "numbers.</p>\n")
    if not exactness.entries:
        return ""
    svg = plots.figure_svg(plots.exactness_figure(exactness), "ncet-errors", fit=True)
    return ("<figure>" + svg + "<figcaption>Per IR node, in "
            "topological order. At each node the element whose observed error is closest to "
            "its bound is shown: the bar is its certified bound, the dot the observed error "
            "there, so a dot above its bar is a violation (a red cross). Zeros sit on the "
            "shaded band at the bottom. The largest error over all elements is in the table "
            "below.</figcaption></figure>\n")


def _outputs(exactness: ExactnessReport) -> str:
    return ("<h3>Outputs: the eager model against the reference graph</h3>\n"
            + _table(exactness.outputs, output_columns(exactness), "compact",
                     _row_class(exactness)))


def _tightness(exactness: ExactnessReport) -> str:
    tight = exactness.tightness()
    if not tight:
        return ""
    return ("<h3>How tight the node-local bounds are, per op_type</h3>\n"
            + _table(sorted(tight.items()), TIGHTNESS_COLUMNS, "compact"))


def _nodes(exactness: ExactnessReport) -> str:
    return ("<h3>Per node</h3>\n<p class=\"note\">max err: the largest |torch - reference| "
            "over all elements; bound and ratio: at the element where observed / bound is "
            "largest; ulps: that error in units in the last place of PyTorch's value; "
            "sensitivity: bound / |value| there, the smallest relative change of the value "
            "the check would have flagged (a fault below it can pass); suspicion: the "
            "node-local ratio against Higham &amp; Mary's probabilistic bound, a second tier "
            "that never changes the verdict (above 1: suspicious); "
            "e2e bound / |value|: the largest end-to-end bound over the largest |value| "
            "(1 or more: vacuous).</p>\n"
            '<div class="wide bleed">' + _table(exactness.entries, node_columns(exactness), "",
                                          _row_class(exactness)) + "</div>\n")
