"""Workbench: the mapping table, support boundary, exactness, graph (and summary) views of
one model in one tabbed widget, computing lazily, with one node selection shared by all;
and, when given them, an adjudication of a counterexample (`AdjudicationView`) and a float
margin (`MarginView`) in tabs of their own after those."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import secrets

import ipywidgets as W
import torch
from torch import nn

import ncet

from .display import STATIC_ROWS, StaticFallback
from .frames import escape, mapping_html
from .graph_view import GraphView, graph_view_html
from .mapping import MappingTable
from .panels import BoundaryPanel, ExactnessPanel
from .static import exactness_html

HAS_SUMMARY = importlib.util.find_spec(f"{__package__}.summary") is not None
"""Whether the summary view (widgets/summary.py, `SummaryPanel`) is installed."""

TITLES = ("Mapping", "Support boundary", "Exactness", "Graph") + \
    (("Summary",) if HAS_SUMMARY else ())
"""The tabs, in order."""

EXACTNESS_TAB, GRAPH_TAB = 2, 3
SUMMARY_TAB = 4 if HAS_SUMMARY else None

ADJUDICATION_TITLE = "Adjudication"
"""The title of the adjudication tab (only when the Workbench has an adjudication)."""

MARGIN_TITLE = "Float margin"
"""The title of the float margin tab (only when the Workbench has a margin)."""


class Workbench(StaticFallback, W.Tab):
    """Everything NCET says about one model, in tabbed views sharing one selected node.

    `diagnose` runs on construction (cheap; with `rewrite=True`, after the opt-in rewrite
    rules, as `ncet.diagnose(..., rewrite=True)`). The exactness check runs only when asked
    (the "Run exactness check" button or `run_exactness()`), with a progress bar; the graph
    (and the summary) are built when their tab is first shown (or first read).

    Selecting a node in the mapping table, the exactness panel or the graph selects it in
    the others (FX node names are IR node names); a view without that node (a get_attr row
    in the graph, an Input node in the exactness panel) keeps its own selection.

    Attributes:
        model: The model, never modified.
        report: The ConversionReport of `diagnose`.
        mapping: The MappingTable.
        boundary: The BoundaryPanel.
        exactness: The ExactnessPanel, or None until the check has run.
        exactness_report: The ExactnessReport, or None until the check has run.
        graph: The GraphView (built on first access), or None when the model does not
            convert.
        summary: The SummaryPanel (built on first access), when widgets/summary.py exists.
        adjudication: The AdjudicationView in its tab, or None without one.
        margin: The MarginView in its tab, or None without one.
        selected: The node last selected in any view (None for none).
        run_button: Button that runs the exactness check.
        progress: IntProgress driven by check_exactness's progress callback.

    Example:
        >>> bench = Workbench(model, (3, 32, 32))
        >>> bench  # in a notebook cell
        >>> bench.run_exactness()
        >>> bench.graph.select("conv1"); bench.mapping.selected
        'conv1'
        >>> bench.save_html("report.html")
        >>> bench.add_adjudication(AdjudicationView.of(model, prop, witness,
        ...                                            input_shape=(3, 32, 32)))
        >>> bench.add_margin(ncet.float_margin(bench.report.graph, prop), prop)
    """

    def __init__(self, model: nn.Module, *input_shapes, dtype: torch.dtype = torch.float32,
                 rewrite: bool = False, page_size: int = 25, max_nodes: int = 400,
                 adjudication=None, margin=None):
        self.model = model
        self.input_shapes = tuple(tuple(s) for s in input_shapes)
        self.rewrite = rewrite
        self.report = ncet.diagnose(model, *input_shapes, dtype=dtype, rewrite=rewrite)
        self.max_nodes = max_nodes
        self.selected: str | None = None
        self._linking = False
        self.mapping = MappingTable(self.report, page_size=page_size)
        self.boundary = BoundaryPanel(self.report)
        self.exactness: ExactnessPanel | None = None
        self.exactness_report: ncet.ExactnessReport | None = None
        self._graph: GraphView | None = None
        self._summary = None
        self.adjudication = None
        self.margin = None

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
        children = [self.mapping, self.boundary, self._exactness_box, self._graph_box]
        if HAS_SUMMARY:
            self._summary_box = W.VBox([W.HTML("<p>The summary is built when this tab is "
                                               "shown.</p>")])
            children.append(self._summary_box)
        super().__init__(children=children, titles=TITLES)
        self.add_class("ncet-workbench")
        self.observe(self._on_tab, names="selected_index")
        self._follow(self.mapping)
        if adjudication is not None:
            self.add_adjudication(adjudication)
        if margin is not None:
            self.add_margin(margin)

    def add_adjudication(self, adjudication):
        """Show an adjudication of a counterexample to this model in a tab of its own after
        the others (replacing the one shown).

        Args:
            adjudication: An AdjudicationView, or an ncet.Adjudication (shown without the
                slices: `AdjudicationView.of(...)` draws them).

        Returns:
            The AdjudicationView shown (also `adjudication`).

        Raises:
            TypeError: Neither.
        """
        from .adjudication import AdjudicationView

        view = adjudication if isinstance(adjudication, AdjudicationView) else \
            AdjudicationView(adjudication)
        self._show(ADJUDICATION_TITLE, self.adjudication, view)
        self.adjudication = view
        return view

    def add_margin(self, margin, property=None):
        """Show a float margin over a region of this model's inputs in a tab of its own
        after the others (replacing the one shown): eps per output, where it comes from,
        the unstable neurons, and (given `property`) the property's unsafe rows against it.

        Args:
            margin: A MarginView, or a Margin (`ncet.float_margin`; shown with this model's
                GraphIR naming its nodes' op_types).
            property: The Property the margin was computed for (only with a Margin).

        Returns:
            The MarginView shown (also `margin`).

        Raises:
            TypeError: Neither.
        """
        from .margin import MarginView

        view = margin if isinstance(margin, MarginView) else \
            MarginView(margin, property, self.report.graph)
        self._show(MARGIN_TITLE, self.margin, view)
        self.margin = view
        return view

    def _show(self, title: str, old, view) -> None:
        """Put `view` in the tab of `old` (a view shown before) or in a new last tab."""
        children, titles = list(self.children), list(self.titles)
        if old is None:
            children.append(view)
            titles.append(title)
        else:
            children[children.index(old)] = view
        self.children = children
        self.titles = tuple(titles)

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
        self._follow(self.exactness)
        return report

    @property
    def graph(self) -> GraphView | None:
        """The GraphView, built on first access; None when the model does not convert."""
        if self._graph is None and self.report.ok:
            self._graph = GraphView(self.report.graph, budget=self.max_nodes)
            self._graph_box.children = (self._graph,)
            self._follow(self._graph)
        return self._graph

    @property
    def summary(self):
        """The SummaryPanel (widgets/summary.py), built on first access; None without it."""
        if self._summary is None and HAS_SUMMARY:
            panel = importlib.import_module(f"{__package__}.summary").SummaryPanel
            self._summary = panel(self.report)
            self._summary_box.children = (self._summary,)
        return self._summary

    # -- one selection across the tabs ------------------------------------------------------

    def select(self, name: str) -> None:
        """Select node `name` in every view that has it.

        Raises:
            KeyError: No view has a node of that name.
        """
        if not self._propagate(name, None):
            raise KeyError(f"no view has a node {name!r}")

    def _follow(self, view) -> None:
        """Propagate `view`'s selection to the others, and show it the current one. Views
        without a `selected` trait yet are followed through their node chooser."""
        owner, trait = (view, "selected") if view.has_trait("selected") else \
            (getattr(view, "node", None), "value")
        if owner is not None:
            owner.observe(lambda change: self._propagate(change["new"], view), names=trait)
        if self.selected is not None and view is not self.mapping:
            self._linking = True
            try:
                _select_in(view, self.selected)
            finally:
                self._linking = False

    def _views(self) -> list:
        return [v for v in (self.mapping, self.exactness, self._graph) if v is not None]

    def _propagate(self, name, source) -> bool:
        """Select `name` in every view but `source`; True when some view has it. Re-entrant
        calls (the views' own change events) are ignored, so nothing loops."""
        if self._linking or not name or not isinstance(name, str):
            return False
        self._linking = True
        try:
            found = source is not None
            for view in self._views():
                if view is not source:
                    found = _select_in(view, name) or found
            if found:
                self.selected = name
            return found
        finally:
            self._linking = False

    def _on_tab(self, change) -> None:
        if change["new"] == GRAPH_TAB:
            _ = self.graph
        elif SUMMARY_TAB is not None and change["new"] == SUMMARY_TAB:
            _ = self.summary

    # -- static forms -----------------------------------------------------------------------

    def to_html(self, max_rows: int | None = None) -> str:
        """The static form: every view, under the tab titles (the mapping table's first
        `max_rows` rows, when given; the exactness panel once the check has run)."""
        parts = ['<div class="ncet-static ncet-workbench-static">',
                 f"<h3>{TITLES[0]}</h3>", mapping_html(self.report, max_rows),
                 f"<h3>{TITLES[1]}</h3>", self.boundary.to_html(), f"<h3>{TITLES[2]}</h3>"]
        if self.exactness is not None:
            parts.append(exactness_html(self.exactness_report, self.exactness.shown))
        else:
            parts.append(self._idle_text())
        parts.append(f"<h3>{TITLES[GRAPH_TAB]}</h3>")
        if not self.report.ok:
            parts.append("<p>No graph: the model does not convert.</p>")
        elif self._graph is None:
            parts.append(graph_view_html(self.report.graph))
        else:
            parts.append(self._graph._static_html())
        if SUMMARY_TAB is not None:
            parts += [f"<h3>{TITLES[SUMMARY_TAB]}</h3>", self.summary.to_html()]
        for title, view in zip(self.titles[len(TITLES):], self.children[len(TITLES):]):
            parts += [f"<h3>{escape(title)}</h3>", view.to_html()]  # adjudication, margin
        parts.append("</div>")
        return "".join(parts)

    def _static_html(self) -> str:
        return self.to_html(STATIC_ROWS)

    def save_html(self, path: str | os.PathLike, title: str | None = None) -> str:
        """Write the page `ncet report` writes for this model: the conversion report, and
        the exactness report if the check has run (it is not run here: press "Run
        exactness check" or call `run_exactness()` first to include it; the page then says
        "exactness not checked"). The file is replaced atomically.

        Args:
            path: Where to write the HTML file.
            title: How the page names the model (default: the model's class name).

        Returns:
            The path written.

        Raises:
            OSError: The folder cannot be written.
        """
        from ncet.render import render_report

        page = render_report(self.report, self.exactness_report,
                             title=title or type(self.model).__name__,
                             input_shapes=self.input_shapes,
                             command=f"Workbench(..., rewrite={self.rewrite}).save_html()")
        _write_atomically(path, page.encode("utf-8"))
        return os.fspath(path)


def _select_in(view, name: str) -> bool:
    """Select `name` in `view`; False (and no change) when the view has no such node."""
    if getattr(view, "selected", None) == name:
        return True
    try:
        view.select(name)
    except KeyError:
        return False
    return True


def _write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file beside `path`, sync it and rename it over `path` (as
    `ncet.save` does), so a reader sees the old file or the new one, whole."""
    path = os.fspath(path)
    temporary = os.path.join(os.path.dirname(os.path.abspath(path)),
                             f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    try:
        with open(temporary, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
