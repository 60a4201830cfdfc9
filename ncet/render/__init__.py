"""The renderers: the self-contained HTML report, the figures of an exactness check and the
HTML tables, shared by the report, the command line and the notebook views
(docs/architecture.md).

The notebook views (`ncet.widgets`) use only `ncet`'s public names and these. matplotlib is
imported only when a figure is drawn, so importing this package is cheap.

Modules: `html` (the report page), `plots` (the figures' style, the per-node error and scatter
figures), `ratios` (the output error/bound histogram, the sensitivity figure), `tables`
(escaping, cells, status pills, tables of records), `css` (the stylesheets), `facts` (what a table
shows about a record beyond its fields), `export_section` (the report's ONNX export section),
`graph_groups` (the IR's nodes in a tree of module calls), `graph_layout` (a layered layout in
pure Python), `graph_svg` (the grouped graph as SVG: the report's graph section and the
notebook graph view's drawing), `unsafe_slice` (an adjudication's unsafe set on 2-D slices of
the output space), `adjudication_figure` (those slices drawn), `margin_facts` (what the float
margin report shows of a `Margin`: eps per output, each node's share, each unsafe row against
eps), `margin_figure` (the shares and eps per output drawn), `margin_section` (the float
margin report: page, section, notebook display, text summary).
"""

from ..exactness.report_view import ratio_text
from .adjudication_figure import adjudication_figure, drawn_points
from .css import REPORT_CSS, VIEW_STYLE
from .exactness_section import node_verdict, output_verdict
from .facts import node_constants, quote_source, reason_summary
from .graph_groups import BUDGET, ROOT, Groups
from .graph_layout import layered_layout
from .graph_svg import STATIC_BUDGET, graph_html, layout_of, node_facts, to_svg
from .html import render_report, verdict
from .margin_facts import (
    NodeShare,
    OutputMargin,
    RowMargin,
    node_shares,
    output_margins,
    property_verdict,
    row_margins,
)
from .margin_figure import drawn_shares, margin_figure
from .margin_section import (
    margin_page,
    margin_repr_html,
    margin_section,
    margin_summary,
    margin_tables,
)
from .plots import (
    COLORS,
    exactness_figure,
    figure_png,
    figure_svg,
    matplotlib_available,
    new_figure,
    op_colors,
    op_hex,
    scatter_figure,
    styled,
)
from .ratios import output_error_figure, sensitivity_figure
from .tables import (
    Column,
    cell,
    code_cell,
    escape,
    facts_html,
    header_html,
    long_code_cell,
    number,
    number_cells,
    pill,
    records_html,
    row_html,
    rows_html,
    sentence,
    table_html,
    text_cell,
)
from .unsafe_slice import Slice, slices_of, unsafe_slices

__all__ = [
    "BUDGET", "COLORS", "Slice", "adjudication_figure", "drawn_points", "slices_of",
    "unsafe_slices", "Column", "Groups", "REPORT_CSS", "ROOT", "STATIC_BUDGET", "VIEW_STYLE",
    "cell", "code_cell", "escape", "exactness_figure", "facts_html", "figure_png", "figure_svg",
    "graph_html", "header_html", "layered_layout", "layout_of", "long_code_cell",
    "matplotlib_available", "new_figure", "node_constants", "node_facts", "node_verdict",
    "number", "number_cells", "op_colors", "op_hex", "output_error_figure", "output_verdict",
    "pill", "quote_source", "ratio_text", "reason_summary", "records_html", "render_report",
    "row_html", "rows_html", "scatter_figure", "sensitivity_figure", "sentence", "styled",
    "table_html", "text_cell", "to_svg", "verdict", "NodeShare", "OutputMargin", "RowMargin",
    "drawn_shares", "margin_figure", "margin_page", "margin_repr_html", "margin_section",
    "margin_summary", "margin_tables", "node_shares", "output_margins", "property_verdict",
    "row_margins",
]
