"""MappingTable: every FX node and what NCET made of it, as a data grid: filtered,
searched, sorted and paged, a row selected by a click, its detail beside the table."""

from __future__ import annotations

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets

import ncet

from .display import STATIC_ROWS, VIEW_CLASS, StaticFallback, style_widget
from .downloads import download_link
from .frames import (
    SEARCHED_COLUMNS,
    SORT_KEYS,
    escape,
    mapping_frame,
    mapping_html,
    mapping_table_html,
    node_detail_html,
)
from .grid import CLICKABLE, RowGrid
from .paging import PAGE_SIZES, Paged, count_text
from .sorting import STATUS_ORDER, column_ranks, ordered

ALL = "all"
"""The filter option that keeps every row."""

NO_OP_TYPE = "-"
"""The op_type filter option for rows without an op_type (rejected or lifted nodes)."""

GRAPH_ORDER = ("#", True)
"""The default sort: graph order."""

CHOICES = 500
"""The most node names the chooser offers (any name may still be typed)."""

TABLE_BASIS = 900
"""The width in px the table's box asks for beside the node detail: the mapping table of a
typical model fits it with every column shown (long sources and constants wrap); where the
view is narrower than this plus the detail, the detail moves below the table (and takes the
view's width) instead of squeezing it."""


class MappingTable(StaticFallback, Paged, W.VBox):
    """Every FX node -> op_type with spelling, module, shape, constants and status.

    The rows are computed once into a DataFrame; filters, search and sorts are vectorised
    over precomputed columns and ranks, and only the current page is rendered, so a
    20,000-node model stays responsive. A click on a row selects it (with anywidget
    installed; see widgets/README.md), a click on a header sorts by that column (again to
    reverse, a third time back to graph order), and the selected node's detail shows beside
    the table. Filters that hide the selected node clear the selection.

    Attributes:
        selected: The fx_name selected (None for none): set by a row click, the node
            chooser, `select(name)`, or directly; linkable with traitlets. An unknown name
            raises traitlets.TraitError.
        report: The ConversionReport shown.
        op_type: Dropdown: "all", the op_types present, and "-" for rows without one.
        status: Dropdown: "all" and the statuses present.
        search: Text: case-insensitive substring of fx_name, spelling, module_path,
            op_type or location.
        page: BoundedIntText: the page shown, from 1; `prev` and `next` step it.
        page_size_control: Dropdown of rows per page.
        count: HTML: "showing a–b of N nodes", "showing a–b of n matching (N nodes)", or
            "no node matches 'text'".
        table: RowGrid: `<table class="ncet-mapping">`, one `<tr data-node=...>` per row.
        node: Combobox offering the first `CHOICES` matching names (any name may be typed);
            choosing one selects it; `message` says when a typed name is unknown.
        detail: HTML: the selected node's attributes, constants, source line and hint.
        csv: Button preparing `csv_link`, a download of the matching rows as CSV.

    Example:
        >>> table = MappingTable(ncet.diagnose(model, (3, 32, 32)))
        >>> table.status.value = "boundary"
        >>> table.sort_by("op_type", ascending=False)
        >>> table.select("conv1"); table.selected
        'conv1'
    """

    selected = traitlets.Unicode(None, allow_none=True)

    def __init__(self, report: ncet.ConversionReport, page_size: int = 25,
                 choices: int = CHOICES):
        if page_size < 1 or choices < 1:
            raise ValueError(f"page_size and choices must be positive, got {page_size}, "
                             f"{choices}")
        self.report = report
        self.page_size = page_size
        self.choices = choices
        self._frame = mapping_frame(report)
        self._names = self._frame["fx_name"].to_numpy()
        self._position = {name: i for i, name in enumerate(self._names)}
        self._op_types = self._frame["op_type"].to_numpy()
        self._statuses = self._frame["status"].to_numpy()
        hay = self._frame[SEARCHED_COLUMNS[0]].str.lower()
        for column in SEARCHED_COLUMNS[1:]:
            hay = hay + "\x1f" + self._frame[column].str.lower()
        self._haystack = hay.tolist()
        self._ranks: dict[str, np.ndarray] = {}
        self._sort = GRAPH_ORDER
        self._matches = np.arange(len(self._frame))
        self._holding = False
        self._offered: list[str] = []

        present = set(self._op_types)
        ops = sorted(o for o in present if o)
        self.op_type = W.Dropdown(options=[ALL, *ops, *([NO_OP_TYPE] if "" in present else [])],
                                  value=ALL, description="op_type", **_sized("210px", "56px"))
        statuses = [s for s in STATUS_ORDER if s in set(self._statuses)]
        statuses += sorted(set(self._statuses) - set(STATUS_ORDER))
        self.status = W.Dropdown(options=[ALL, *statuses], value=ALL, description="status",
                                 **_sized("190px", "46px"))
        self.search = W.Text(value="", placeholder="search name, spelling, module, source",
                             description="search", **_sized("300px", "46px"))
        self._add_pager("ncet-", PAGE_SIZES)
        self.table = RowGrid(layout=W.Layout(width="100%"))
        self.node = W.Combobox(options=[], value="", description="node",
                               placeholder="any node name", ensure_option=False,
                               continuous_update=False, **_sized("100%", "36px"))
        self.message = W.HTML()
        self.detail = W.HTML(self._placeholder())
        self.csv = W.Button(description="CSV of these rows", icon="download",
                            layout=W.Layout(width="180px"))
        self.csv_link = W.HTML()
        for widget, cls in ((self.op_type, "ncet-filter-op-type"),
                            (self.status, "ncet-filter-status"), (self.search, "ncet-search"),
                            (self.table, "ncet-table"), (self.table, "ncet-scroll"),
                            (self.node, "ncet-node"), (self.message, "ncet-node-message"),
                            (self.detail, "ncet-detail"), (self.csv, "ncet-csv")):
            widget.add_class(cls)

        self.op_type.observe(self._on_filter, names="value")
        self.status.observe(self._on_filter, names="value")
        self.search.observe(self._on_filter, names="value")
        self.node.observe(self._on_node, names="value")
        self.table.on_row(self._on_row)
        self.table.on_sort(self._on_header)
        self.csv.on_click(lambda _: self._prepare_csv())

        wrap = W.Layout(flex_flow="row wrap", align_items="center", width="100%")
        filters = W.HBox([self.op_type, self.status, self.search], layout=wrap)
        pager = W.HBox([self.prev, self.page, self.next, self.page_size_control, self.count,
                        self.csv, self.csv_link], layout=wrap)
        grid = W.VBox([self.table], layout=W.Layout(flex=f"1 1 {TABLE_BASIS}px", min_width="0"))
        side = W.VBox([self.node, self.message, self.detail],
                      layout=W.Layout(flex="1 1 380px", min_width="280px",
                                      margin="0 0 0 12px"))
        side.add_class("ncet-side")
        body = W.HBox([grid, side], layout=W.Layout(flex_flow="row wrap",
                                                    align_items="flex-start", width="100%"))
        summary = W.HTML(f"<p>{escape(report.summary())}</p>")
        super().__init__([style_widget(), summary, filters, pager, body])
        self.add_class("ncet-mapping-table")
        self.add_class(VIEW_CLASS)
        self._filter()
        self._offer()
        with self._hold():
            self.page.max = self.pages
        self._render()

    # -- public -------------------------------------------------------------------------

    @property
    def sort(self) -> tuple[str, bool]:
        """(column key, ascending) of the table's order; ("#", True) is graph order."""
        return self._sort

    def rows(self) -> pd.DataFrame:
        """The rows that pass the current filters and search, in the table's order."""
        return self._frame.iloc[self._matches]

    def page_rows(self) -> pd.DataFrame:
        """The rows of the current page."""
        return self._frame.iloc[self._matches[self._page_slice()]]

    def sort_by(self, column: str, ascending: bool = True) -> None:
        """Order the rows by one column (a key of `frames.SORT_KEYS`: "#" for graph order,
        or a `mapping_frame` column); ties keep graph order. Shows the first page, or the
        selected node's page.

        Raises:
            KeyError: The table has no such column.
        """
        if column not in SORT_KEYS:
            raise KeyError(f"no sortable column {column!r}; choose one of {SORT_KEYS}")
        self._sort = (column, ascending)
        self._filter()
        self._offer()
        self._turn_to(self._page_of(self.selected) or 1)

    def select(self, fx_name: str | None) -> None:
        """Select one FX node (None: no node): turn to its page (clearing the filters if
        they hide it) and show its detail.

        Raises:
            KeyError: No FX node has that name.
        """
        if fx_name is not None and fx_name not in self._position:
            raise KeyError(f"no FX node {fx_name!r}")
        self.selected = fx_name

    def to_html(self, max_rows: int | None = None) -> str:
        """The static form: the summary and every row (the first `max_rows`, when given),
        deterministic (for nbval)."""
        return mapping_html(self.report, max_rows)

    def _static_html(self) -> str:
        return self.to_html(STATIC_ROWS)

    # -- selection ----------------------------------------------------------------------

    @traitlets.validate("selected")
    def _valid_selection(self, proposal):
        name = proposal["value"]
        if name is not None and name not in self._position:
            raise traitlets.TraitError(f"no FX node {name!r}")
        return name

    @traitlets.observe("selected")
    def _on_selected(self, change) -> None:
        if self._holding:
            return
        name = change["new"]
        self.message.value = ""
        if name is not None and self._page_of(name) is None:  # hidden by the filters
            with self._hold():
                self.op_type.value, self.status.value, self.search.value = ALL, ALL, ""
            self._filter()
            self._offer()
        self._turn_to(self._page_of(name) or self.page.value)

    def _page_of(self, name: str | None) -> int | None:
        """The page showing `name` under the current filters and sort, or None."""
        if name is None:
            return None
        where = np.flatnonzero(self._matches == self._position[name])
        return int(where[0]) // self.page_size + 1 if len(where) else None

    def _on_row(self, name: str) -> None:
        if name in self._position:
            self.selected = name

    def _on_header(self, column: str) -> None:
        if column not in SORT_KEYS:
            return
        key, ascending = self._sort
        if column != key:
            self.sort_by(column)
        elif ascending:
            self.sort_by(column, ascending=False)
        else:
            self.sort_by(*GRAPH_ORDER)

    def _on_node(self, change) -> None:
        name = change["new"]
        if self._holding or not name or name == self.selected:
            return
        if name not in self._position:
            self.message.value = f"<p>No FX node <code>{escape(name)}</code>.</p>"
            return
        self.selected = name

    # -- filters, rendering -------------------------------------------------------------

    def _query(self) -> str:
        return self.search.value.strip().lower()

    def _filter(self) -> None:
        mask = np.ones(len(self._frame), dtype=bool)
        op = self.op_type.value
        if op != ALL:
            mask &= self._op_types == ("" if op == NO_OP_TYPE else op)
        if self.status.value != ALL:
            mask &= self._statuses == self.status.value
        query = self._query()
        if query:
            mask &= np.fromiter((query in h for h in self._haystack), dtype=bool,
                                count=len(self._haystack))
        key, ascending = self._sort
        if key != "#" and key not in self._ranks:
            self._ranks[key] = column_ranks(self._frame, key)
        self._matches = ordered(np.flatnonzero(mask), self._ranks.get(key), ascending)

    def _offer(self) -> None:
        """Offer the first `choices` matching names in the chooser."""
        names = self._names[self._matches[:self.choices]].tolist()
        if names != self._offered:
            self._offered = names
            with self._hold():
                self.node.options = names

    def _on_filter(self, _change) -> None:
        if self._holding:
            return
        self._filter()
        self._offer()
        self.csv_link.value = ""
        if self.selected is not None and self._page_of(self.selected) is None:
            with self._hold():  # the filters hide the selected node: nothing is selected
                self.selected = None
        self._turn_to(1)

    def _empty_text(self) -> str:
        query = self.search.value.strip()
        return f"no node matches '{query}'" if query else "no node matches these filters"

    def _placeholder(self) -> str:
        verb = "Click a row or choose" if CLICKABLE else "Choose"
        return f'<p class="ncet-empty">{verb} a node to see its attributes, constants and ' \
            "source line.</p>"

    def _render(self) -> None:
        n, total = len(self._matches), len(self._frame)
        start = self._page_slice().start
        shown = self.page_rows()
        first, last = start + 1, start + len(shown)
        text = escape(count_text(first, last, n, total, empty=self._empty_text()))
        self.count.value = text + (f" &middot; page {self.page.value} of {self.pages}"
                                   if n else "")
        self.table.value = mapping_table_html(shown, self._sort, self.selected,
                                              self._empty_text())
        self.prev.disabled = self.page.value <= 1
        self.next.disabled = self.page.value >= self.pages
        with self._hold():
            self.node.value = self.selected or ""
        if self.selected is not None:
            self.detail.value = node_detail_html(self.report, self.selected)
        elif n == 0:
            self.detail.value = f'<p class="ncet-empty">{escape(self._empty_text())}.</p>'
        else:
            self.detail.value = self._placeholder()

    def _prepare_csv(self) -> None:
        """Fill `csv_link` with a download of the matching rows, in the table's order."""
        rows = self.rows()
        csv = rows.to_csv(index=False, lineterminator="\n")
        link = download_link(csv, "mapping.csv", "text/csv",
                             f"\u2913 mapping.csv ({len(rows)} rows)")
        self.csv_link.value = link.value


def _sized(width: str, label: str) -> dict:
    """A control's layout and style: its width and its description's width."""
    return {"layout": W.Layout(width=width), "style": {"description_width": label}}
