"""Static forms of the conversion views: DataFrames and deterministic HTML (no ipywidgets).

These are what a notebook shows where widgets do not render (GitHub, nbviewer) and what
nbval compares, so the HTML holds no ids, timestamps or memory addresses.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

import ncet
from ncet.render import (
    VIEW_STYLE,
    Column,
    cell,
    code_cell,
    escape,
    facts_html,
    long_code_cell,
    node_constants,
    pill,
    quote_source,
    reason_summary,
    records_html,
    sentence,
    text_cell,
)

MAPPING_COLUMNS = ("fx_name", "fx_op", "spelling", "module_path", "module_type", "op_type",
                   "status", "code", "shape", "constants", "location")
"""Columns of `mapping_frame`, in order."""

BOUNDARY_COLUMNS = ("code", "fx_name", "spelling", "location", "source_text", "message",
                    "hint")
"""Columns of `boundary_frame`, in order."""

SEARCHED_COLUMNS = ("fx_name", "spelling", "module_path", "op_type", "location")
"""The columns the mapping table's text search looks in."""

_PROBLEMS = ("unsupported", "boundary")

_STYLE = VIEW_STYLE


def shape_text(shape) -> str:
    """A per-sample shape as `[3, 32, 32]`, or empty when there is none."""
    return "" if shape is None else str(list(shape))


def row_constants(row: ncet.Row, graph: ncet.GraphIR | None) -> tuple[str, ...]:
    """Names of the constants behind one FX row: those its IR node uses, or the one a
    `get_attr` row lifted. Empty when the report has no graph."""
    if graph is None:
        return ()
    if row.status == "lifted":
        return (row.spelling,) if row.spelling in graph.constants else ()
    try:
        return node_constants(graph.node(row.fx_name))
    except KeyError:
        return ()


def mapping_frame(report: ncet.ConversionReport) -> pd.DataFrame:
    """One row per FX node: what NCET made of it.

    Args:
        report: The result of `ncet.diagnose`.

    Returns:
        A DataFrame with the columns `MAPPING_COLUMNS`, in graph order; `constants` holds
        the names of the constants the IR node uses, joined by ", " (empty when the model
        does not convert); missing op_types and codes are empty strings.

    Example:
        >>> mapping_frame(ncet.diagnose(model, (16,))).query("status == 'mapped'")
    """
    graph = report.graph
    records = [(r.fx_name, r.fx_op, r.spelling, r.module_path, r.module_type, r.op_type or "",
                r.status, r.code or "", shape_text(r.shape),
                ", ".join(row_constants(r, graph)), r.location) for r in report.rows]
    return pd.DataFrame.from_records(records, columns=list(MAPPING_COLUMNS))


def boundary_frame(report: ncet.ConversionReport) -> pd.DataFrame:
    """The rejected FX nodes: code, fx_name, spelling, location, source_text (the line's
    code, "" when Python cannot read it), message, hint.

    Sorted by reason code, then graph order; empty (with the same columns) when the model
    converts.
    """
    problems = [(r.code or "unknown", i, r) for i, r in enumerate(report.rows)
                if r.status in _PROBLEMS]
    problems.sort(key=lambda p: (p[0], p[1]))
    records = [(code, r.fx_name, r.spelling, r.location, r.source_text, r.message, r.hint)
               for code, _, r in problems]
    return pd.DataFrame.from_records(records, columns=list(BOUNDARY_COLUMNS))


def source_cell(location: str, source_text: str) -> str:
    """A `<td>` quoting a source line as messages do: file:line `code`, or "-" without one."""
    return code_cell(quote_source(location, source_text) or "-")


def mono(value) -> str:
    """A `<td class="mono">`: code that never wraps (names, spellings, shapes)."""
    return cell(escape(value), "mono")


BOUNDARY_TABLE = (
    Column("node", lambda r: mono(r.fx_name)),
    Column("spelling", lambda r: mono(r.spelling)),
    Column("source", lambda r: source_cell(r.location, r.source_text)),
    Column("message", lambda r: text_cell(r.message)),
    Column("what to do", lambda r: text_cell(sentence(r.hint), "hint")),
)
"""The table of one reason code's rejected nodes: one boundary-frame row each."""


def boundary_html(report: ncet.ConversionReport, code: str | None = None) -> str:
    """The support boundary as static HTML: rejected nodes grouped by reason code, each
    with its spelling, source line, message and hint; "no problems" when the model
    converts.

    Args:
        report: The result of `ncet.diagnose`.
        code: Show only this reason code's group (all groups when None).
    """
    frame = boundary_frame(report)
    if code is not None:
        frame = frame[frame["code"] == code]
    if frame.empty:
        return (f'<div class="ncet-static ncet-boundary">{_STYLE}<p>No problems: every FX '
                f"node is inside the support boundary ({escape(report.summary())}).</p></div>")
    parts = [f'<div class="ncet-static ncet-boundary">{_STYLE}',
             f"<p>{len(frame)} node(s) rejected for {frame['code'].nunique()} reason(s).</p>"]
    for code, group in frame.groupby("code", sort=True):
        summary = reason_summary(code)
        parts.append(f'<h4 data-code="{escape(code)}"><code>{escape(code)}</code> &middot; '
                     f"{len(group)} node(s){' &middot; ' + escape(summary) if summary else ''}"
                     "</h4>")
        parts.append(records_html(group.itertuples(index=False), BOUNDARY_TABLE,
                                  node=_fx_name))
    parts.append("</div>")
    return "".join(parts)


def _fx_name(row) -> str:
    return row.fx_name


def _problem(row) -> str:
    return "problem" if row.status in _PROBLEMS else ""


def _module(row) -> str:
    return row.module_path + (f" ({row.module_type})" if row.module_type else "")


def _status(row) -> str:
    return pill(row.status) + (f" <code>{escape(row.code)}</code>" if row.code else "")


MAPPING_TABLE = (
    Column("#", lambda r: cell(str(r.Index), "num"), numeric=True, key="#"),
    Column("node", lambda r: mono(r.fx_name), key="fx_name"),
    Column("fx op", lambda r: text_cell(r.fx_op, "nowrap"), key="fx_op"),
    Column("spelling", lambda r: mono(r.spelling), key="spelling"),
    Column("module", lambda r: long_code_cell(_module(r)), key="module_path"),
    Column("op_type", lambda r: text_cell(r.op_type or "-", "nowrap"), key="op_type"),
    Column("status", lambda r: cell(_status(r)), key="status"),
    Column("shape", lambda r: cell(escape(r.shape or "-"), "mono shape"), key="shape"),
    Column("constants", lambda r: long_code_cell(r.constants), key="constants"),
    Column("source", lambda r: long_code_cell(r.location), key="location"),
)
"""The mapping table's columns: one mapping-frame row each (its frame index is "#", the
node's position in graph order); `key` is what a click on the header sorts by."""

SORT_KEYS = tuple(c.key for c in MAPPING_TABLE)
"""The mapping table's sortable columns: "#" (graph order) and the frame's columns."""


def mapping_table_html(frame: pd.DataFrame, sort: tuple[str, bool] | None = None,
                       selected: str | None = None, empty: str = "") -> str:
    """A `<table class="ncet-mapping">` with one body row per frame row.

    Args:
        frame: Rows of `mapping_frame` (its index is the node's position, "#").
        sort: (key, ascending) of the sorted column, for a sortable header (see
            `ncet.render.header_html`); None for a plain header.
        selected: The fx_name whose row gets class "ncet-selected".
        empty: What to say below the header when `frame` is empty (`p.ncet-empty`).
    """
    def row_class(row) -> str:
        classes = (_problem(row), "ncet-selected" if row.fx_name == selected else "")
        return " ".join(c for c in classes if c)

    table = records_html(frame.itertuples(index=True), MAPPING_TABLE, "ncet-mapping",
                         _fx_name, row_class, sort)
    if frame.empty and empty:
        table += f'<p class="ncet-empty">{escape(empty)}</p>'
    return table


def mapping_html(report: ncet.ConversionReport, max_rows: int | None = None) -> str:
    """The mapping table as static HTML: the summary, then every FX node (the first
    `max_rows` of them, and a line saying how many more, when `max_rows` is given), in a
    scrolling box (`div.ncet-scroll`, sticky header)."""
    frame = mapping_frame(report)
    more = 0 if max_rows is None else max(len(frame) - max_rows, 0)
    note = (f"<p>… and {more} more nodes: the live table (or <code>to_html()</code>) has "
            "them all.</p>") if more else ""
    table = mapping_table_html(frame if not more else frame.iloc[:max_rows],
                               empty="The model has no FX nodes.")
    return (f'<div class="ncet-static ncet-mapping-static">{_STYLE}'
            f"<p>{escape(report.summary())}</p>"
            f'<div class="ncet-scroll">{table}</div>{note}</div>')


def tensor_stats(tensor: torch.Tensor) -> dict[str, str]:
    """Shape, dtype and summary statistics (min, max, mean, std) of a constant, as text."""
    stats = {"shape": str(list(tensor.shape)),
             "dtype": str(tensor.dtype).removeprefix("torch.")}
    values = tensor.detach().to(torch.float64).reshape(-1)
    if values.numel() == 0:
        return {**stats, "min": "", "max": "", "mean": "", "std": ""}
    std = float(values.std()) if values.numel() > 1 else 0.0
    numbers = (float(values.min()), float(values.max()), float(values.mean()), std)
    return {**stats, **{k: _num(v) for k, v in zip(("min", "max", "mean", "std"), numbers)}}


CONSTANT_TABLE = (
    Column("constant", lambda c: mono(c[0])),
    Column("shape", lambda c: cell(escape(c[1]["shape"]), "mono shape")),
    Column("dtype", lambda c: text_cell(c[1]["dtype"], "nowrap")),
    *(Column(k, lambda c, k=k: text_cell(c[1][k], "num"), numeric=True)
      for k in ("min", "max", "mean", "std")),
)
"""The node detail's constants: one (name, `tensor_stats`) each."""


def _num(value: float) -> str:
    return repr(value) if not math.isfinite(value) else f"{value:.6g}"


def node_detail_html(report: ncet.ConversionReport, fx_name: str) -> str:
    """What NCET knows about one FX node: its row, IR attributes, constants (shape, dtype,
    summary statistics), source line, message and hint.

    Raises:
        KeyError: No FX node has that name.
    """
    row = next((r for r in report.rows if r.fx_name == fx_name), None)
    if row is None:
        raise KeyError(f"no FX node {fx_name!r}")
    facts = [("node", row.fx_name), ("fx op", row.fx_op), ("spelling", row.spelling),
             ("module", row.module_path + (f" ({row.module_type})" if row.module_type else "")),
             ("op_type", row.op_type or "-"),
             ("status", row.status + (f" [{row.code}]" if row.code else "")),
             ("shape", shape_text(row.shape) or "-"), ("source", row.location or "-")]
    if row.source_text:
        facts.append(("code", row.source_text))
    graph = report.graph
    node = None
    if graph is not None and row.status != "lifted":
        try:
            node = graph.node(fx_name)
        except KeyError:
            node = None
    if node is not None:
        facts.append(("inputs", ", ".join(node.inputs) or "-"))
        facts.append(("dtype", node.dtype or "-"))
    parts = [f'<div class="ncet-static ncet-detail">{_STYLE}', facts_html(facts)]
    if row.message:
        parts.append(f"<p><b>Message:</b> {escape(row.message)}</p>")
    if row.hint:
        parts.append(f'<p class="hint"><b>What to do:</b> {escape(sentence(row.hint))}</p>')
    if node is not None and node.attrs:
        parts.append(f"<h5>Attributes</h5>{facts_html(node.attrs.items())}")
    names = row_constants(row, graph)
    if names:
        stats = [(n, tensor_stats(graph.constants[n])) for n in names]
        parts.append(f"<h5>Constants</h5>{records_html(stats, CONSTANT_TABLE)}")
    elif graph is None and row.status not in _PROBLEMS:
        parts.append("<p>Attributes and constants are shown once the whole model converts.</p>")
    parts.append("</div>")
    return "".join(parts)
