"""`SuiteView`: a suite's result table (`ncet.run_suite`, docs/suites.md) as a view: one row
per instance, sortable (a click on a header, or `sort_by`), filterable (by outcome, by
benchmark, by text in the file names), each row tinted by its outcome; selecting a row (a
click, or `select`) opens that instance's views in tabs below the table: its import (the
mapping table of `ncet.diagnose_onnx`), its float margin (`MarginView`) and, when the row
judged counterexamples, its adjudication (`AdjudicationView`, one counterexample at a time).

`suite_html(table)` is the table's static form; `SuiteView.to_html()` adds the selected
instance's views.
"""

from __future__ import annotations

from pathlib import Path

import ipywidgets as W
import pandas as pd

import ncet
from ncet.render import VIEW_STYLE, escape

from .display import VIEW_CLASS, StaticFallback, style_widget
from .grid import RowGrid
from .sorting import natural_key

SHOWN = ("benchmark", "onnx", "vnnlib", "outcome", "reason", "worst_ratio", "eps",
         "witnesses", "verdicts", "seconds")
"""The table's columns, in order (the rest of the run's columns stay in `table`)."""

NUMERIC = ("worst_ratio", "eps", "witnesses", "seconds")
"""The columns shown as numbers (`td.num`: right-aligned, tabular digits)."""

ROW_CLASS = {"ok": "", "not-exact": "not-certified", "refused": "problem", "error": "problem",
             "timeout": "not-certified"}
"""The tint of a row per outcome (`ncet.render`'s row classes): problems red, a certificate
that does not hold or a row out of time amber, ok plain."""

ALL = "(all)"
"""The filters' choice that keeps every row."""

IMPORT_TITLE, MARGIN_TITLE, ADJUDICATION_TITLE = "Import", "Float margin", "Adjudication"
"""The titles of a selected instance's tabs."""


def _cell(column: str, value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if column in ("onnx", "vnnlib"):
        return Path(str(value)).name
    if column == "verdicts":
        if not isinstance(value, dict) or not value:
            return ""
        counts: dict[str, int] = {}
        for verdict in value.values():
            counts[verdict] = counts.get(verdict, 0) + 1
        return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _key(column: str, value) -> tuple:
    """A sort key: numbers by value, text naturally, empty cells last."""
    if value is None or (isinstance(value, float) and value != value):
        return (2,)
    if isinstance(value, bool | int | float):
        return (0, float(value))
    return (1, natural_key(_cell(column, value)))


def suite_html(table: pd.DataFrame, selected: int | None = None,
               sort: tuple[str, bool] | None = None) -> str:
    """The table: one row per instance (`tr[data-node]` its index in `table`, class
    `outcome-<outcome>` and the tint of `ROW_CLASS`), the `SHOWN` columns present, sortable
    headers (`th[data-sort]`, the sorted one marked by an arrow)."""
    columns = [c for c in SHOWN if c in table.columns]
    head = "".join(
        f'<th data-sort="{c}">{escape(c)}'
        f'{(" &#9650;" if sort[1] else " &#9660;") if sort and sort[0] == c else ""}</th>'
        for c in columns)
    body = []
    for index, row in table.iterrows():
        outcome = str(row.get("outcome", ""))
        classes = " ".join(c for c in (f"outcome-{outcome}", ROW_CLASS.get(outcome, "problem"),
                                       "ncet-selected" if index == selected else "") if c)
        cells = "".join(('<td class="num">' if c in NUMERIC else "<td>") +
                        f"{escape(_cell(c, row[c]))}</td>" for c in columns)
        body.append(f'<tr data-node="{index}" class="{classes}">{cells}</tr>')
    return (f'<table class="ncet-suite"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


class InstanceViews(StaticFallback, W.Tab):
    """One instance's views in tabs: its import (mapping table), its float margin and, when
    the row judged counterexamples, an adjudication of one of them (chosen in a dropdown).
    A view that cannot be built (the network does not import, the property does not read)
    says why in its tab.

    Attributes:
        row: The table's row (a pandas Series).
        report: The ConversionReport of `ncet.diagnose_onnx`.
        mapping: The MappingTable of `report`.
        margin: The MarginView, or None when it could not be computed (`errors` says why).
        adjudication: The AdjudicationView of the chosen counterexample, or None.
        witnesses: The counterexample files found for the row's verdicts.
        errors: Tab title -> the error that kept its view from being built.
    """

    def __init__(self, row: pd.Series, results=None, splits: int | None = 1):
        from .adjudication import AdjudicationView
        from .mapping import MappingTable
        from .margin import MarginView

        self.row, self.errors = row, {}
        self.report = ncet.diagnose_onnx(row["onnx"])
        self.mapping = MappingTable(self.report)
        self.margin = self.adjudication = self.property = None
        children, titles = [self.mapping], [IMPORT_TITLE]
        if self.report.ok:
            try:
                self.property = ncet.read_vnnlib(row["vnnlib"])
                options = {} if splits is None else {"splits": splits}
                self.margin = MarginView.of(self.report.graph, self.property, **options)
            except Exception as error:  # noqa: BLE001 (the tab says why)
                self.errors[MARGIN_TITLE] = f"{type(error).__name__}: {error}"
        else:
            self.errors[MARGIN_TITLE] = f"the network does not import: {self.report.summary()}"
        children.append(self.margin if self.margin is not None else
                        W.HTML(f"<p>{escape(self.errors[MARGIN_TITLE])}</p>"))
        titles.append(MARGIN_TITLE)
        self.witnesses = _witness_files(row.get("verdicts"), results)
        self._view_of = lambda w: AdjudicationView.of(self.report.graph, self.property, w)
        if self.witnesses and self.property is not None:
            self.choice = W.Dropdown(options=[(Path(w).name, w) for w in self.witnesses],
                                     description="witness", layout=W.Layout(width="90%"))
            self._adjudication_box = W.VBox([self.choice])
            self.choice.observe(lambda change: self.adjudicate(change["new"]), names="value")
            self.adjudicate(self.witnesses[0])
            children.append(self._adjudication_box)
            titles.append(ADJUDICATION_TITLE)
        super().__init__(children=children, titles=titles)
        self.add_class("ncet-instance-views")

    def adjudicate(self, witness: str):
        """Show the adjudication of `witness` (one of `witnesses`); returns its view."""
        try:
            self.adjudication = self._view_of(witness)
            shown = self.adjudication
            self.errors.pop(ADJUDICATION_TITLE, None)
        except Exception as error:  # noqa: BLE001 (the tab says why)
            self.adjudication = None
            self.errors[ADJUDICATION_TITLE] = f"{type(error).__name__}: {error}"
            shown = W.HTML(f"<p>{escape(self.errors[ADJUDICATION_TITLE])}</p>")
        self._adjudication_box.children = (self.choice, shown)
        return self.adjudication

    def to_html(self) -> str:
        """The static form: each tab's view under its title."""
        from .frames import mapping_html

        parts = [f"<h4>{escape(Path(self.row['onnx']).name)} &middot; "
                 f"{escape(Path(self.row['vnnlib']).name)}</h4>",
                 f"<h5>{IMPORT_TITLE}</h5>", mapping_html(self.report, 50),
                 f"<h5>{MARGIN_TITLE}</h5>",
                 self.margin.to_html() if self.margin is not None else
                 f"<p>{escape(self.errors[MARGIN_TITLE])}</p>"]
        if self.witnesses and self.property is not None:
            parts.append(f"<h5>{ADJUDICATION_TITLE}</h5>")
            parts.append(self.adjudication.to_html() if self.adjudication is not None else
                         f"<p>{escape(self.errors.get(ADJUDICATION_TITLE, ''))}</p>")
        return "".join(parts)


def _witness_files(verdicts, results) -> list[str]:
    """The files of a row's judged counterexamples (its `verdicts` keys) in `results`."""
    if not isinstance(verdicts, dict) or not verdicts or results is None:
        return []
    found = {p.name: str(p) for p in Path(results).rglob("*.counterexample")
             if p.name in verdicts}
    return [found[name] for name in sorted(verdicts) if name in found]


class SuiteView(StaticFallback, W.VBox):
    """A suite's table (module docstring), and the selected instance's views below it.

    Attributes:
        table: The run's DataFrame (`ncet.run_suite`), never modified.
        results: The counterexamples' folder given to the run (to adjudicate), or None.
        splits: `float_margin(splits=)` for the margin views (small: they compute on select).
        rows: The rows shown: filtered and sorted.
        sort: (column, ascending), or None for the run's order.
        selected: The selected row's index in `table`, or None.
        instance: The selected instance's InstanceViews, or None.
        outcome, benchmark, text: The filters' widgets.
        grid: The RowGrid showing the table.

    Example:
        >>> table = ncet.run_suite("acasxu/instances.csv", results="witnesses")
        >>> view = SuiteView(table, results="witnesses")
        >>> view.outcome.value = "ok"; view.sort_by("eps", ascending=False)
        >>> view.select(view.rows.index[0]); view.instance.margin
    """

    def __init__(self, table: pd.DataFrame, results=None, splits: int | None = 1):
        if not isinstance(table, pd.DataFrame) or not {"onnx", "vnnlib", "outcome"} <= \
                set(table.columns):
            raise TypeError("SuiteView shows the DataFrame of ncet.run_suite (columns onnx, "
                            f"vnnlib, outcome, ...), not {type(table).__name__}")
        self.table, self.results, self.splits = table, results, splits
        self.sort: tuple[str, bool] | None = None
        self.selected: int | None = None
        self.instance: InstanceViews | None = None
        self.outcome = W.Dropdown(options=[ALL, *sorted(set(table["outcome"]))],
                                  description="outcome")
        benchmarks = sorted({str(b) for b in table.get("benchmark", pd.Series(dtype=str))
                             if b})
        self.benchmark = W.Dropdown(options=[ALL, *benchmarks], description="benchmark")
        self.text = W.Text(placeholder="network or property name", description="file")
        self.count = W.HTML()
        self.grid = RowGrid()
        self.grid.add_class("ncet-suite-grid")
        self.grid.on_row(lambda node: self.select(int(node)))
        self.grid.on_sort(self._on_header)
        for widget in (self.outcome, self.benchmark, self.text):
            widget.observe(lambda _: self._render(), names="value")
        self.detail = W.VBox([W.HTML("<p>Select a row to open its import, margin and "
                                     "adjudication.</p>")])
        self.rows = table
        self._render()
        super().__init__([style_widget(), W.HBox([self.outcome, self.benchmark, self.text]),
                          self.count, self.grid, self.detail])
        self.add_class("ncet-suite-view")
        self.add_class(VIEW_CLASS)

    def sort_by(self, column: str, ascending: bool = True) -> None:
        """Sort the rows by `column` (ties in the run's order).

        Raises:
            KeyError: The table has no such column.
        """
        if column not in self.table.columns:
            raise KeyError(f"the suite's table has no column {column!r}")
        self.sort = (column, ascending)
        self._render()

    def select(self, index: int | None) -> InstanceViews | None:
        """Select the row of index `index` in `table` (None: none) and open its views (a
        network file that cannot be read, say a table from another machine, is said below
        the table, and `instance` is None).

        Raises:
            KeyError: No row of that index.
        """
        if index is not None and index not in self.table.index:
            raise KeyError(f"the suite's table has no row {index!r}")
        self.selected, self.instance, shown = index, None, ()
        if index is not None:
            try:
                self.instance = InstanceViews(self.table.loc[index], self.results, self.splits)
                shown = (self.instance,)
            except OSError as error:  # the network's file is not here (a table from elsewhere)
                shown = (W.HTML(f"<p>Cannot open this instance's views: {escape(error)}</p>"),)
        self.detail.children = shown
        self._render()
        return self.instance

    def _on_header(self, column: str) -> None:
        ascending = not (self.sort is not None and self.sort == (column, True))
        self.sort_by(column, ascending)

    def _filtered(self) -> pd.DataFrame:
        rows = self.table
        if self.outcome.value != ALL:
            rows = rows[rows["outcome"] == self.outcome.value]
        if self.benchmark.value != ALL:
            rows = rows[rows["benchmark"] == self.benchmark.value]
        text = self.text.value.strip().lower()
        if text:
            names = rows["onnx"].map(lambda p: Path(p).name.lower()) + " " + \
                rows["vnnlib"].map(lambda p: Path(p).name.lower())
            rows = rows[names.str.contains(text, regex=False)]
        if self.sort is not None:
            column, ascending = self.sort
            keys = [_key(column, v) for v in rows[column]]
            order = sorted(range(len(rows)), key=keys.__getitem__, reverse=not ascending)
            rows = rows.iloc[order]
        return rows

    def _render(self) -> None:
        self.rows = self._filtered()
        self.count.value = f"<p>{len(self.rows)} of {len(self.table)} instances</p>"
        self.grid.value = suite_html(self.rows, self.selected, self.sort)

    def to_html(self) -> str:
        """The static form: the rows shown, and the selected instance's views."""
        parts = ['<div class="ncet-static ncet-suite-static">', VIEW_STYLE, self.count.value,
                 suite_html(self.rows, self.selected, self.sort)]
        if self.instance is not None:
            parts.append(self.instance.to_html())
        parts.append("</div>")
        return "".join(parts)
