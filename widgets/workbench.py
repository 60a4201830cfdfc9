"""Workbench: the mapping table, support boundary, exactness and graph views of one model in
one tabbed widget, computing lazily."""

from __future__ import annotations

import contextlib

import ipywidgets as W
import torch
from torch import nn

import ncet

from .display import STATIC_ROWS, StaticFallback
from .frames import escape, mapping_html
from .mapping import MappingTable
from .panels import BoundaryPanel, ExactnessPanel, GraphView
from .static import exactness_html, graph_html

TITLES = ("Mapping", "Support boundary", "Exactness", "Graph")
"""The tabs, in order."""

EXACTNESS_TAB, GRAPH_TAB = 2, 3


class Workbench(StaticFallback, W.Tab):
    """Everything NCET says about one model, in four tabs.

    `diagnose` runs on construction (cheap; with `rewrite=True`, after the opt-in rewrite
    rules, as `ncet.diagnose(..., rewrite=True)`). The exactness check runs only when asked
    (the "Run exactness check" button or `run_exactness()`), with a progress bar; the graph
    is drawn when its tab is first shown (or `graph` is first read).

    Attributes:
        model: The model, never modified.
        report: The ConversionReport of `diagnose`.
        mapping: The MappingTable.
        boundary: The BoundaryPanel.
        exactness: The ExactnessPanel, or None until the check has run.
        exactness_report: The ExactnessReport, or None until the check has run.
        graph: The GraphView (drawn on first access), or None when the model does not
            convert.
        run_button: Button that runs the exactness check.
        progress: IntProgress driven by check_exactness's progress callback.

    Example:
        >>> bench = Workbench(model, (3, 32, 32))
        >>> bench  # in a notebook cell
        >>> bench.run_exactness()
    """

    def __init__(self, model: nn.Module, *input_shapes, dtype: torch.dtype = torch.float32,
                 rewrite: bool = False, page_size: int = 25, max_nodes: int = 100):
        self.model = model
        self.report = ncet.diagnose(model, *input_shapes, dtype=dtype, rewrite=rewrite)
        self.max_nodes = max_nodes
        self.mapping = MappingTable(self.report, page_size=page_size)
        self.boundary = BoundaryPanel(self.report)
        self.exactness: ExactnessPanel | None = None
        self.exactness_report: ncet.ExactnessReport | None = None
        self._graph: GraphView | None = None

        self.run_button = W.Button(description="Run exactness check", button_style="primary",
                                   disabled=not self.report.ok, layout=W.Layout(width="220px"))
        self.run_button.add_class("ncet-run-exactness")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="checking")
        self.progress.add_class("ncet-progress")
        self.status = W.HTML(self._idle_text())
        self.status.add_class("ncet-exactness-status")
        self.run_button.on_click(lambda _: self.run_exactness())
        self._exactness_box = W.VBox([W.HBox([self.run_button, self.progress]), self.status])
        self._graph_box = W.VBox([W.HTML(
            "<p>The graph is drawn when this tab is shown.</p>" if self.report.ok else
            "<p>No graph to draw: the model does not convert (see Support boundary).</p>")])

        super().__init__(children=[self.mapping, self.boundary, self._exactness_box,
                                   self._graph_box], titles=TITLES)
        self.add_class("ncet-workbench")
        self.observe(self._on_tab, names="selected_index")
        self.mapping.node.observe(self._on_mapping_node, names="value")

    def _idle_text(self) -> str:
        if not self.report.ok:
            return ("<p>Exactness cannot be checked: the model does not convert "
                    f"({escape(self.report.summary())}).</p>")
        return ("<p>Not run yet: the check runs PyTorch and a float64 reference graph on "
                "generated inputs and holds every node to its certified bound.</p>")

    def run_exactness(self, *inputs: torch.Tensor, **options) -> ncet.ExactnessReport:
        """Run `ncet.check_exactness` on the model and fill the Exactness tab.

        Args:
            *inputs: Batched inputs; generated when omitted.
            **options: Passed on to `ncet.check_exactness` (samples_per_scale, seed, ...).

        Returns:
            The ExactnessReport (also kept as `exactness_report`).

        Raises:
            ncet.ConversionError: The model does not convert.
        """
        if not self.report.ok:
            self.report.raise_first()
        self.run_button.disabled = True
        self.progress.value = 0
        self.status.value = "<p>Running the exactness check…</p>"

        def progress(done: int, total: int) -> None:
            self.progress.max = max(total, 1)
            self.progress.value = done

        try:
            report = ncet.check_exactness(self.model, self.report.graph, *inputs,
                                          progress=progress, **options)
        except Exception as error:
            self.status.value = f"<p>The check failed: {escape(error)}</p>"
            raise
        finally:
            self.run_button.disabled = False
        self.progress.value = self.progress.max
        self.exactness_report = report
        self.exactness = ExactnessPanel(report)
        self.status.value = f"<p>Checked {report.samples} samples.</p>"
        self._exactness_box.children = (W.HBox([self.run_button, self.progress]),
                                         self.status, self.exactness)
        return report

    @property
    def graph(self) -> GraphView | None:
        """The GraphView, drawn on first access; None when the model does not convert."""
        if self._graph is None and self.report.ok:
            self._graph = GraphView(self.report.graph, max_nodes=self.max_nodes)
            self._graph_box.children = (self._graph,)
        return self._graph

    def _on_mapping_node(self, change) -> None:
        """A node chosen in the mapping table is also shown in the exactness scatter (any
        checked node, not only those the chooser offers)."""
        if self.exactness is not None and change["new"] is not None:
            with contextlib.suppress(KeyError):  # a node the check has no entry for
                self.exactness.select(change["new"])

    def _on_tab(self, change) -> None:
        if change["new"] == GRAPH_TAB:
            _ = self.graph

    def to_html(self, max_rows: int | None = None) -> str:
        """The static form: every view that has been computed, under the tab titles (the
        mapping table's first `max_rows` rows, when given)."""
        parts = ['<div class="ncet-static ncet-workbench-static">',
                 f"<h3>{TITLES[0]}</h3>", mapping_html(self.report, max_rows),
                 f"<h3>{TITLES[1]}</h3>", self.boundary.to_html(), f"<h3>{TITLES[2]}</h3>"]
        if self.exactness is not None:
            parts.append(exactness_html(self.exactness_report, self.exactness.node.value))
        else:
            parts.append(self._idle_text())
        parts.append(f"<h3>{TITLES[3]}</h3>")
        if self.report.ok:
            parts.append(graph_html(self.report.graph, self.max_nodes,
                                    0 if self._graph is None else self._graph.start))
        else:
            parts.append("<p>No graph: the model does not convert.</p>")
        parts.append("</div>")
        return "".join(parts)

    def _static_html(self) -> str:
        return self.to_html(STATIC_ROWS)
