"""HTML tables of records: escaping, cells, status pills, and one renderer that builds a
table from its columns, shared by the HTML report and the notebook views.

A table is declared as a tuple of `Column`s (its header and how a record fills its cell), so
the report's tables and the views' tables differ only in their declarations. Both use the
same cell classes, styled once by `ncet.render.css.TABLE_RULES`: `num` (right-aligned,
tabular, never wrapped), `mono` (code, never wrapped: names, spellings, shapes), `mono wrap`
(long code that wraps: source lines, lists of constants, modules), `pill`
(a status), and the row classes `problem` / `violated` (tinted) and `ncet-selected`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


def escape(value: Any) -> str:
    """HTML text of a value: empty for None, otherwise escaped (quotes included)."""
    return "" if value is None else html.escape(str(value), quote=True)


def sentence(text: str) -> str:
    """The text with its first letter capitalised; "-" for an empty text."""
    return text[:1].upper() + text[1:] if text else "-"


def number(value: float, digits: int = 3) -> str:
    """A number as the tables print it: `digits` significant digits, "inf" when infinite."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.{digits}g}"


def pill(status: str) -> str:
    """A conversion status as a coloured pill (`<span class="pill mapped">mapped</span>`)."""
    return f'<span class="pill {escape(status)}">{escape(status)}</span>'


def cell(content: str = "", cls: str = "") -> str:
    """One `<td>` holding `content`, which is HTML (escape text first)."""
    return f'<td class="{cls}">{content}</td>' if cls else f"<td>{content}</td>"


def text_cell(value: Any, cls: str = "") -> str:
    """A `<td>` of escaped text."""
    return cell(escape(value), cls)


def mono_cell(value: Any) -> str:
    """A `<td class="mono">` of escaped text: code that never wraps (names, spellings)."""
    return cell(escape(value), "mono")


def long_code_cell(value: Any) -> str:
    """A `<td class="mono wrap">` of escaped text: long code (a source line, a list of
    constants, a module with its type) that wraps at spaces, and inside a name only when the
    table would not fit its box otherwise."""
    return cell(escape(value), "mono wrap")


def shape_cell(shape: Sequence[int] | str | None) -> str:
    """A `<td class="mono shape">` of a shape, `[16, 16, 16]` on one line ("-" for none)."""
    text = shape if isinstance(shape, str) else "" if shape is None else str(list(shape))
    return cell(escape(text or "-"), "mono shape")


def code_cell(value: Any) -> str:
    """A `<td>` of escaped text set as code (`<td><code>...</code></td>`)."""
    return f"<td><code>{escape(value)}</code></td>"


def number_cells(*values: float, cls: str = "num", digits: int = 3) -> str:
    """One `<td>` per number, right-aligned by `cls` (the report's "num"; "" for none)."""
    return "".join(cell(number(v, digits), cls) for v in values)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table of records.

    Attributes:
        title: The header text (escaped when rendered).
        cell: Renders one record's `<td>` (use `cell`, `text_cell`, `code_cell`, ...).
        numeric: Right-align the header as the report does its numbers (class "num").
        key: The name a sortable table sorts this column by ("" for a column that does
            not sort); its header then carries `data-sort` and class "ncet-sort".
    """

    title: str
    cell: Callable[[Any], str]
    numeric: bool = False
    key: str = ""


def header_html(columns: Sequence[Column | str], numeric: Iterable[int] = (),
                sort: tuple[str, bool] | None = None) -> str:
    """The `<th>` cells of a header: a Column's own `numeric`, or the positions in
    `numeric` for plain titles, get class "num".

    Args:
        columns: The columns, or plain titles.
        numeric: Positions of the plain titles to right-align.
        sort: (key, ascending) of the column the rows are sorted by, or None for a table
            that does not sort. When given, each Column with a `key` gets
            `data-sort="key"`, class "ncet-sort", and `aria-sort` when it is the sorted one.
    """
    right = set(numeric)
    cells = []
    for i, column in enumerate(columns):
        title, is_numeric = (column.title, column.numeric) if isinstance(column, Column) \
            else (column, i in right)
        key = column.key if isinstance(column, Column) and sort is not None else ""
        classes = " ".join(c for c in ("num" if is_numeric else "", "ncet-sort" if key else "")
                           if c)
        attributes = f' class="{classes}"' if classes else ""
        if key:
            attributes += f' data-sort="{escape(key)}"'
            if key == sort[0]:
                attributes += f' aria-sort="{"ascending" if sort[1] else "descending"}"'
        cells.append(f"<th{attributes}>{escape(title)}</th>")
    return "".join(cells)


def row_html(cells: str, node: str | None = None, cls: str = "") -> str:
    """One `<tr>`: `data-node` names the node it shows (the views' DOM contract), `cls` its
    class ("problem", "violated")."""
    attributes = (f' data-node="{escape(node)}"' if node is not None else "") + \
        (f' class="{cls}"' if cls else "")
    return f"<tr{attributes}>{cells}</tr>"


def rows_html(records: Iterable[Any], columns: Sequence[Column],
              node: Callable[[Any], str | None] | None = None,
              cls: Callable[[Any], str] | None = None) -> str:
    """The body rows of a table: one `<tr>` per record, its cells from `columns`.

    Args:
        records: The records, in the order shown.
        columns: The table's columns.
        node: A record's node name, written as the row's `data-node` (none when None).
        cls: A record's row class, e.g. "problem" ("" for none).
    """
    return "".join(
        row_html("".join(c.cell(r) for c in columns), None if node is None else node(r),
                 "" if cls is None else cls(r))
        for r in records)


def table_html(head: str, body: str, cls: str = "") -> str:
    """A `<table>` with one header row of `head` (`<th>` cells) and the rows of `body`."""
    attribute = f' class="{cls}"' if cls else ""
    return (f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table>")


def records_html(records: Iterable[Any], columns: Sequence[Column], cls: str = "",
                 node: Callable[[Any], str | None] | None = None,
                 row_class: Callable[[Any], str] | None = None,
                 sort: tuple[str, bool] | None = None) -> str:
    """A whole table of records: the header of `columns` and one row per record (a
    sortable header when `sort` is given: see `header_html`).

    Example:
        >>> COLUMNS = (Column("output", lambda o: code_cell(o.name)),
        ...            Column("bound", lambda o: number_cells(o.bound), numeric=True))
        >>> records_html(report.outputs, COLUMNS, cls="compact")
    """
    return table_html(header_html(columns, sort=sort),
                      rows_html(records, columns, node, row_class), cls)


def facts_html(facts: Iterable[tuple[str, Any]]) -> str:
    """A two-column table without header: one `<tr><th>name</th><td><code>value</code>`
    row per fact (a value of None reads "None")."""
    body = "".join(f"<tr><th>{escape(k)}</th>{code_cell(str(v))}</tr>" for k, v in facts)
    return f"<table><tbody>{body}</tbody></table>"
