"""MappingTable: every FX node and what NCET made of it, filtered, searched and paged."""

from __future__ import annotations

import ipywidgets as W
import numpy as np
import pandas as pd

import ncet

from .display import STATIC_ROWS, StaticFallback
from .frames import (
    SEARCHED_COLUMNS,
    escape,
    mapping_frame,
    mapping_html,
    mapping_table_html,
    node_detail_html,
)
from .paging import Paged

ALL = "all"
"""The filter option that keeps every row."""

NO_OP_TYPE = "-"
"""The op_type filter option for rows without an op_type (rejected or lifted nodes)."""

_STATUS_ORDER = ("mapped", "lifted", "unsupported", "boundary", "skipped")


class MappingTable(StaticFallback, Paged, W.VBox):
    """Every FX node -> op_type with spelling, module, shape, constants and status.

    The rows are computed once into a DataFrame; filters and search are vectorised over
    precomputed columns and only the current page is rendered, so a 20,000-node model stays
    responsive.

    Attributes:
        report: The ConversionReport shown.
        op_type: Dropdown: "all", the op_types present, and "-" for rows without one.
        status: Dropdown: "all" and the statuses present.
        search: Text: case-insensitive substring of fx_name, spelling, module_path,
            op_type or location.
        page: BoundedIntText: the page shown, from 1; `prev` and `next` step it.
        count: HTML: "showing a–b of n matching (N nodes)".
        table: HTML: `<table class="ncet-mapping">`, one `<tr data-node=...>` per row.
        node: Dropdown of the page's fx_names; choosing one shows it in `detail`.
        detail: HTML: the selected node's attributes, constants, source line and hint.

    Example:
        >>> table = MappingTable(ncet.diagnose(model, (3, 32, 32)))
        >>> table.status.value = "boundary"
        >>> table.rows()  # the filtered DataFrame
    """

    def __init__(self, report: ncet.ConversionReport, page_size: int = 25):
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        self.report = report
        self.page_size = page_size
        self._frame = mapping_frame(report)
        self._names = self._frame["fx_name"].to_numpy()
        self._position = {name: i for i, name in enumerate(self._names)}
        self._op_types = self._frame["op_type"].to_numpy()
        self._statuses = self._frame["status"].to_numpy()
        hay = self._frame[SEARCHED_COLUMNS[0]].str.lower()
        for column in SEARCHED_COLUMNS[1:]:
            hay = hay + "\x1f" + self._frame[column].str.lower()
        self._haystack = hay.tolist()
        self._matches = np.arange(len(self._frame))
        self._selected: str | None = None
        self._holding = False

        present = set(self._op_types)
        ops = sorted(o for o in present if o)
        self.op_type = W.Dropdown(options=[ALL, *ops, *([NO_OP_TYPE] if "" in present else [])],
                                  value=ALL, description="op_type")
        statuses = [s for s in _STATUS_ORDER if s in set(self._statuses)]
        statuses += sorted(set(self._statuses) - set(_STATUS_ORDER))
        self.status = W.Dropdown(options=[ALL, *statuses], value=ALL, description="status")
        self.search = W.Text(value="", placeholder="search name, spelling, module, source",
                             description="search")
        self._add_pager("ncet-")
        self.table = W.HTML()
        self.node = W.Dropdown(options=[], value=None, description="node")
        self.detail = W.HTML(value="<p>Choose a node to see its attributes and constants.</p>")

        for widget, cls in ((self.op_type, "ncet-filter-op-type"),
                            (self.status, "ncet-filter-status"), (self.search, "ncet-search"),
                            (self.table, "ncet-table"), (self.node, "ncet-node"),
                            (self.detail, "ncet-detail")):
            widget.add_class(cls)

        self.op_type.observe(self._on_filter, names="value")
        self.status.observe(self._on_filter, names="value")
        self.search.observe(self._on_filter, names="value")
        self.node.observe(self._on_node, names="value")

        summary = W.HTML(f"<p>{escape(report.summary())}</p>")
        filters = W.HBox([self.op_type, self.status, self.search])
        pager = W.HBox([self.prev, self.page, self.next, self.count])
        super().__init__([summary, filters, pager, self.table,
                          W.HBox([self.node]), self.detail])
        self.add_class("ncet-mapping-table")
        self._filter()
        with self._hold():
            self.page.max = self.pages
        self._render()

    # -- public -------------------------------------------------------------------------

    def rows(self) -> pd.DataFrame:
        """The rows that pass the current filters and search, in graph order."""
        return self._frame.iloc[self._matches]

    def page_rows(self) -> pd.DataFrame:
        """The rows of the current page."""
        return self._frame.iloc[self._matches[self._page_slice()]]

    def select(self, fx_name: str) -> None:
        """Show one FX node: turn to its page (clearing the filters if they hide it) and
        show its details.

        Raises:
            KeyError: No FX node has that name.
        """
        if fx_name not in self._position:
            raise KeyError(f"no FX node {fx_name!r}")
        position = self._position[fx_name]
        where = np.searchsorted(self._matches, position)
        if where >= len(self._matches) or self._matches[where] != position:
            with self._hold():
                self.op_type.value, self.status.value, self.search.value = ALL, ALL, ""
            self._filter()
            where = position
        self._selected = fx_name
        self._turn_to(int(where) // self.page_size + 1)

    def to_html(self, max_rows: int | None = None) -> str:
        """The static form: the summary and every row (the first `max_rows`, when given),
        deterministic (for nbval)."""
        return mapping_html(self.report, max_rows)

    def _static_html(self) -> str:
        return self.to_html(STATIC_ROWS)

    # -- internals ----------------------------------------------------------------------

    def _filter(self) -> None:
        mask = np.ones(len(self._frame), dtype=bool)
        op = self.op_type.value
        if op != ALL:
            mask &= self._op_types == ("" if op == NO_OP_TYPE else op)
        if self.status.value != ALL:
            mask &= self._statuses == self.status.value
        query = self.search.value.strip().lower()
        if query:
            mask &= np.fromiter((query in h for h in self._haystack), dtype=bool,
                                count=len(self._haystack))
        self._matches = np.flatnonzero(mask)

    def _on_filter(self, _change) -> None:
        if not self._holding:
            self._filter()
            self._turn_to(1)

    def _on_node(self, change) -> None:
        if self._holding or change["new"] is None:
            return
        self._selected = change["new"]
        self._show_detail()

    def _render(self) -> None:
        n, total = len(self._matches), len(self._frame)
        start = self._page_slice().start
        shown = self.page_rows()
        first, last = (start + 1, start + len(shown)) if len(shown) else (0, 0)
        self.count.value = (f"showing {first}–{last} of {n} matching ({total} nodes)"
                            f" &middot; page {self.page.value} of {self.pages}")
        self.table.value = mapping_table_html(shown)
        names = shown["fx_name"].tolist()
        self.prev.disabled = self.page.value <= 1
        self.next.disabled = self.page.value >= self.pages
        with self._hold():
            self.node.options = names
            self.node.value = self._selected if self._selected in names else None
        self._show_detail()

    def _show_detail(self) -> None:
        if self._selected is None:
            return
        self.detail.value = node_detail_html(self.report, self._selected)
