"""The support-boundary, exactness and graph views as ipywidgets."""

from __future__ import annotations

import ipywidgets as W
import traitlets

import ncet
from ncet.render import (
    escape,
    exactness_figure,
    output_error_figure,
    scatter_figure,
    sensitivity_figure,
)

from .display import VIEW_CLASS, StaticFallback, style_widget
from .downloads import figure_downloads, frame_download
from .frames import boundary_frame, boundary_html
from .paging import Paged
from .static import (
    MAX_SVG_POINTS,
    arithmetic_html,
    default_node,
    exactness_html,
    figure_html,
    nodes_html,
    outputs_html,
    verdict_html,
    worst_first,
)

ALL = "all"


class BoundaryPanel(StaticFallback, W.VBox):
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
        super().__init__([style_widget(), *([self.code, self.html] if codes else [self.html])])
        self.add_class("ncet-boundary-panel")
        self.add_class(VIEW_CLASS)

    def _on_code(self, change) -> None:
        self.html.value = boundary_html(self.report, None if change["new"] == ALL
                                        else change["new"])

    def to_html(self) -> str:
        """The static form: every rejected node grouped by reason code."""
        return boundary_html(self.report)


class ExactnessPanel(StaticFallback, Paged, W.VBox):
    """check_exactness's result: the verdict, per-node error against the certified bound on
    a log axis, the per-node sensitivity (bound / |value|, vacuous end-to-end bounds
    marked), the output error/bound histogram and outputs table, a node chooser driving the
    torch-vs-reference scatter, the arithmetic model, and the per-node table, paged, each
    node marked root cause / not certified (downstream of a violation) / vacuous.

    Only one page of the table is rendered, and the chooser offers at most `choices` node
    names (the worst), so a 20,000-node report stays responsive; any checked node's name
    may be typed into it.

    Attributes:
        report: The ExactnessReport shown.
        selected: traitlets.Unicode (None until a node is chosen): the node the user picked
            in `node` or `select` chose; observe it to follow the selection elsewhere.
        verdict, plot, sensitivity, histogram, scatter, arithmetic: HTML widgets.
        downloads: HBox of download buttons: the figures as SVG and PNG (the error plot
            only up to `MAX_SVG_POINTS` nodes), the per-node table as CSV.
        node: Combobox driving `scatter`: offers every node up to `choices` nodes, else the
            `choices` worst (violations first, then largest ratio); accepts any checked
            node's name. An unknown name is refused: `message` says so and the value goes
            back to the node shown.
        message: HTML: why a typed node name was refused (empty otherwise).
        violations: Checkbox: show only the violated nodes in the table.
        order: Dropdown: "graph" (topological) order or "worst" ratio first.
        page: BoundedIntText: the table's page, from 1; `prev` and `next` step it.
        count: HTML: "showing a–b of n (N nodes)".
        table: HTML: the current page of `<table class="ncet-exactness-nodes">`.

    Example:
        >>> panel = ExactnessPanel(ncet.check_exactness(model, ir))
        >>> panel.violations.value = True
        >>> panel.page_entries()  # the ExactnessEntry records shown
        >>> panel.observe(lambda change: print(change["new"]), names="selected")
    """

    selected = traitlets.Unicode(None, allow_none=True)

    def __init__(self, report: ncet.ExactnessReport, page_size: int = 50, choices: int = 50):
        if page_size < 1 or choices < 1:
            raise ValueError(f"page_size and choices must be positive, got {page_size}, "
                             f"{choices}")
        self.report = report
        self.page_size = page_size
        entries = report.entries
        self._index = {e.name: i for i, e in enumerate(entries)}
        self._worst = worst_first(entries)
        self._violated = [i for i, e in enumerate(entries) if e.violated]
        self._matches: list[int] = list(range(len(entries)))
        self._holding = False
        self._shown = default_node(report)

        self.verdict = W.HTML(verdict_html(report))
        figures = {"errors": exactness_figure(report), "sensitivity": sensitivity_figure(report),
                   "outputs": output_error_figure(report)}
        self.plot = W.HTML(figure_html(figures["errors"], "ncet-errors", len(entries)))
        self.sensitivity = W.HTML(figure_html(figures["sensitivity"], "ncet-sensitivity",
                                              len(entries)))
        self.histogram = W.HTML(figure_html(figures["outputs"], "ncet-outputs")
                                + outputs_html(report))
        if len(entries) > MAX_SVG_POINTS:  # a second and third rendering of a large plot
            del figures["errors"], figures["sensitivity"]
        self._figures = figures
        offer = W.Button(description="downloads: figures (SVG, PNG), per-node table (CSV)",
                         icon="download", layout=W.Layout(width="auto"))
        offer.add_class("ncet-offer-downloads")
        offer.on_click(lambda _: self._offer_downloads())
        self.downloads = W.HBox([offer])  # the links are made on a click: they can be large
        offered = [e.name for e in entries] if len(entries) <= choices else \
            [entries[i].name for i in self._worst[:choices]]
        if self._shown is not None and self._shown not in offered:  # offer the node drawn
            offered = [self._shown, *offered[:choices - 1]]
        self.node = W.Combobox(options=offered, value=self._shown or "", description="node",
                               placeholder="any node name", ensure_option=False,
                               continuous_update=False)
        self.message = W.HTML()
        self.scatter = W.HTML()
        self.arithmetic = W.HTML(arithmetic_html(report))
        self.violations = W.Checkbox(value=False, description="violations only",
                                     indent=False, layout=W.Layout(width="140px"))
        self.order = W.Dropdown(options=[("graph order", "graph"), ("worst ratio first",
                                                                    "worst")],
                                value="graph", description="order")
        self._add_pager("ncet-nodes-")
        self.table = W.HTML()
        for widget, cls in ((self.verdict, "ncet-verdict"), (self.plot, "ncet-error-plot"),
                            (self.sensitivity, "ncet-sensitivity"),
                            (self.downloads, "ncet-exactness-downloads"),
                            (self.histogram, "ncet-histogram"), (self.node, "ncet-node"),
                            (self.message, "ncet-node-message"),
                            (self.scatter, "ncet-scatter"), (self.table, "ncet-nodes"),
                            (self.violations, "ncet-filter-violations"),
                            (self.order, "ncet-nodes-order")):
            widget.add_class(cls)
        self.node.observe(self._on_node, names="value")
        self.violations.observe(self._on_filter, names="value")
        self.order.observe(self._on_filter, names="value")
        self._draw_scatter()
        self._filter()
        pager = W.HBox([self.violations, self.order, self.prev, self.page, self.next,
                        self.count])
        details = W.Accordion(children=[W.VBox([pager, self.table])],
                              titles=("Per-node table",))
        super().__init__([style_widget(), self.verdict, self.plot, self.sensitivity,
                          self.histogram, W.HBox([self.node, self.message]), self.scatter,
                          self.arithmetic, details, self.downloads])
        self.add_class("ncet-exactness-panel")
        self.add_class(VIEW_CLASS)

    # -- public -------------------------------------------------------------------------

    @property
    def shown(self) -> str | None:
        """The node whose scatter is drawn (None when the report has no nodes)."""
        return self._shown

    def entries(self) -> list:
        """The ExactnessEntry records the table lists, in its order, over every page."""
        return [self.report.entries[i] for i in self._matches]

    def page_entries(self) -> list:
        """The ExactnessEntry records of the current page."""
        return [self.report.entries[i] for i in self._matches[self._page_slice()]]

    def select(self, name: str) -> None:
        """Draw one node's scatter and make it `selected`.

        Raises:
            KeyError: The report checked no node of that name.
        """
        if name not in self._index:
            raise KeyError(f"the exactness report has no node {name!r}")
        self.message.value = ""
        self.node.value = name
        self.selected = name  # also when it was already shown

    def to_html(self) -> str:
        """The static form, with the scatter of the node shown now."""
        return exactness_html(self.report, self._shown)

    # -- internals ----------------------------------------------------------------------

    def _on_node(self, change) -> None:
        if self._holding:
            return
        name = change["new"].strip()
        if name not in self._index:
            self.message.value = (f'<span style="color:#b91c1c">No checked node is named '
                                  f"<code>{escape(name)}</code>; showing "
                                  f"<code>{escape(self._shown or '')}</code>.</span>")
            with self._hold():
                self.node.value = self._shown or ""
            return
        self.message.value = ""
        self._shown = name
        self._draw_scatter()
        self.selected = name

    def _offer_downloads(self) -> None:
        """Replace the button by the download links (figures as SVG and PNG, the per-node
        table as CSV), made now."""
        self.downloads.children = (
            [figure_downloads(figure, f"exactness-{stem}")
             for stem, figure in self._figures.items()]
            + [frame_download(self.report.to_pandas(), "exactness-nodes.csv",
                              "\u2913 per-node table (CSV)")])

    def _draw_scatter(self) -> None:
        if self._shown is None:
            self.scatter.value = "<p>No IR nodes were checked.</p>"
            return
        self.scatter.value = figure_html(scatter_figure(self.report, self._shown),
                                         "ncet-scatter")

    def _filter(self) -> None:
        order = self._worst if self.order.value == "worst" else range(len(self._index))
        if self.violations.value:
            bad = set(self._violated)
            order = [i for i in order if i in bad]
        self._matches = list(order)
        self._turn_to(1)

    def _on_filter(self, _change) -> None:
        if not self._holding:
            self._filter()

    def _render(self) -> None:
        n, total = len(self._matches), len(self._index)
        start = self._page_slice().start
        shown = self.page_entries()
        first, last = (start + 1, start + len(shown)) if shown else (0, 0)
        which = "violated" if self.violations.value else "nodes"
        roots = len(self.report.root_causes)
        blame = (f" &middot; {roots} root cause(s), {len(self.report.not_certified)} "
                 "node(s) and output(s) not certified downstream") if roots else ""
        self.count.value = (f"showing {first}–{last} of {n} {which} ({total} nodes){blame}"
                            f" &middot; page {self.page.value} of {self.pages}")
        self.table.value = nodes_html(self.report, shown)
        self.prev.disabled = self.page.value <= 1
        self.next.disabled = self.page.value >= self.pages
