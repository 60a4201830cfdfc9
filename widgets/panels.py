"""The support-boundary, exactness and graph views as ipywidgets."""

from __future__ import annotations

import ipywidgets as W

import ncet

from .figures import exactness_figure, output_error_figure, scatter_figure
from .frames import boundary_frame, boundary_html
from .graph import graph_figure, page_bounds
from .static import (
    arithmetic_html,
    default_node,
    exactness_html,
    figure_html,
    graph_html,
    nodes_html,
    outputs_html,
    verdict_html,
)

ALL = "all"


class BoundaryPanel(W.VBox):
    """Rejected nodes grouped by reason code, each with its message, source line and hint;
    "no problems" when the model converts.

    Attributes:
        report: The ConversionReport shown.
        code: Dropdown: "all" and each reason code present, to show one group.
        html: HTML: the groups shown.
    """

    def __init__(self, report: ncet.ConversionReport):
        self.report = report
        codes = sorted(boundary_frame(report)["code"].unique())
        self.code = W.Dropdown(options=[ALL, *codes], value=ALL, description="reason")
        self.code.add_class("ncet-filter-code")
        self.html = W.HTML(boundary_html(report))
        self.html.add_class("ncet-boundary-html")
        self.code.observe(self._on_code, names="value")
        super().__init__([self.code, self.html] if codes else [self.html])
        self.add_class("ncet-boundary-panel")

    def _on_code(self, change) -> None:
        self.html.value = boundary_html(self.report, None if change["new"] == ALL
                                        else change["new"])

    def to_html(self) -> str:
        """The static form: every rejected node grouped by reason code."""
        return boundary_html(self.report)


class ExactnessPanel(W.VBox):
    """check_exactness's result: the verdict, per-node error against the certified bound on
    a log axis, the output error histogram, a node chooser driving the torch-vs-reference
    scatter, the arithmetic model, and the per-node table.

    Attributes:
        report: The ExactnessReport shown.
        verdict, plot, histogram, scatter, arithmetic, table: HTML widgets.
        node: Dropdown of the IR nodes checked, driving `scatter`.
    """

    def __init__(self, report: ncet.ExactnessReport):
        self.report = report
        names = [e.name for e in report.entries]
        self.verdict = W.HTML(verdict_html(report))
        self.plot = W.HTML(figure_html(exactness_figure(report), "ncet-errors", len(names)))
        self.histogram = W.HTML(figure_html(output_error_figure(report), "ncet-outputs")
                                + outputs_html(report))
        self.node = W.Dropdown(options=names, value=default_node(report),
                               description="node")
        self.scatter = W.HTML()
        self.arithmetic = W.HTML(arithmetic_html(report))
        self.table = W.HTML(nodes_html(report))
        for widget, cls in ((self.verdict, "ncet-verdict"), (self.plot, "ncet-error-plot"),
                            (self.histogram, "ncet-histogram"), (self.node, "ncet-node"),
                            (self.scatter, "ncet-scatter"), (self.table, "ncet-nodes")):
            widget.add_class(cls)
        self.node.observe(self._on_node, names="value")
        self._draw_scatter()
        details = W.Accordion(children=[self.table], titles=("Per-node table",))
        super().__init__([self.verdict, self.plot, self.histogram, self.node, self.scatter,
                          self.arithmetic, details])
        self.add_class("ncet-exactness-panel")

    def _on_node(self, _change) -> None:
        self._draw_scatter()

    def _draw_scatter(self) -> None:
        if self.node.value is None:
            self.scatter.value = "<p>No IR nodes were checked.</p>"
            return
        self.scatter.value = figure_html(scatter_figure(self.report, self.node.value),
                                         "ncet-scatter")

    def to_html(self) -> str:
        """The static form, with the scatter of the node chosen now."""
        return exactness_html(self.report, self.node.value)


class GraphView(W.VBox):
    """The IR drawn as a DAG coloured by op_type; pages of `max_nodes` nodes beyond that.

    Attributes:
        ir: The GraphIR drawn.
        page: BoundedIntText: the page drawn, from 1; `prev` and `next` step it.
        figure: HTML: the drawing of the current page.
    """

    def __init__(self, ir: ncet.GraphIR, max_nodes: int = 100):
        page_bounds(ir, max_nodes, 0)  # validates max_nodes
        self.ir = ir
        self.max_nodes = max_nodes
        self.pages = max(1, -(-len(ir.nodes) // max_nodes))
        self.page = W.BoundedIntText(value=1, min=1, max=self.pages, description="page",
                                     layout=W.Layout(width="160px"))
        self.prev = W.Button(description="◀ prev", layout=W.Layout(width="80px"))
        self.next = W.Button(description="next ▶", layout=W.Layout(width="80px"))
        self.info = W.HTML()
        self.figure = W.HTML()
        self.figure.add_class("ncet-graph-figure")
        self.page.observe(lambda _: self._draw(), names="value")
        self.prev.on_click(lambda _: self._step(-1))
        self.next.on_click(lambda _: self._step(1))
        pager = W.HBox([self.prev, self.page, self.next, self.info])
        super().__init__([pager, self.figure] if self.pages > 1 else [self.figure])
        self.add_class("ncet-graph-view")
        self._draw()

    @property
    def start(self) -> int:
        """Position of the current page's first node."""
        return (self.page.value - 1) * self.max_nodes

    def _step(self, delta: int) -> None:
        self.page.value = min(max(1, self.page.value + delta), self.pages)

    def _draw(self) -> None:
        start, stop = page_bounds(self.ir, self.max_nodes, self.start)
        self.info.value = f"nodes {start + 1}–{stop} of {len(self.ir.nodes)}"
        self.prev.disabled = self.page.value <= 1
        self.next.disabled = self.page.value >= self.pages
        figure = graph_figure(self.ir, max_nodes=self.max_nodes, start=start)
        self.figure.value = figure_html(figure, "ncet-graph")

    def to_html(self) -> str:
        """The static form: the current page as inline SVG."""
        return graph_html(self.ir, self.max_nodes, self.start)
