"""`SummaryPanel`: a torchinfo-style summary of a converted model: parameters, buffers,
constant bytes, nodes per op_type, and totals per module down to a chosen depth.

The GraphIR keeps a node's constants by the attribute that reads them, so they are told
apart by that role: the `mean` and `var` a BatchNorm reads are buffers (running statistics),
`weight` and `bias` are parameters, any other constant (the tensor an ElementwiseAffine
adds or multiplies) is counted as "other". A constant read by several nodes is counted once,
at the first of them in graph order. A module's totals include its children's; nodes
without a module (functions called in `forward`) are listed as "(top level)".
"""

from __future__ import annotations

import ipywidgets as W
import pandas as pd

import ncet
from ncet.render import (
    VIEW_STYLE,
    Column,
    cell,
    code_cell,
    escape,
    facts_html,
    node_constants,
    records_html,
    text_cell,
)

from .display import VIEW_CLASS, StaticFallback, style_widget
from .downloads import frame_csv, frame_download, link_html

BUFFER_ATTRS = frozenset({"mean", "var"})
"""Constant attributes that read buffers (BatchNorm's running statistics)."""

PARAMETER_ATTRS = frozenset({"weight", "bias"})
"""Constant attributes that read parameters."""

TOP_LEVEL = "(top level)"
"""The module-table row of the nodes no module produced."""

DEFAULT_DEPTH = 2
"""The module depth shown at first: the top-level modules and their children."""

MODULE_COLUMNS = ("module", "depth", "module_type", "nodes", "parameters", "buffers", "other",
                  "bytes")
"""Columns of `module_frame`."""

OP_TYPE_COLUMNS = ("op_type", "nodes", "parameters", "buffers", "other", "bytes")
"""Columns of `op_type_frame`."""


def _kind(attr: str) -> str:
    return "buffers" if attr in BUFFER_ATTRS else "parameters" if attr in PARAMETER_ATTRS \
        else "other"


def constant_rows(ir: ncet.GraphIR) -> list[dict]:
    """One dict per node: name, op_type, module path and type, and the numel per kind
    ("parameters", "buffers", "other") and bytes of the constants it is the first to read."""
    seen: set[str] = set()
    rows = []
    for node in ir.nodes:
        row = {"name": node.name, "op_type": node.op_type,
               "module": node.source.module_path, "module_type": node.source.module_type,
               "parameters": 0, "buffers": 0, "other": 0, "bytes": 0}
        names = set(node_constants(node))
        for attr, value in node.attrs.items():
            if isinstance(value, str) and value in names and value not in seen:
                seen.add(value)
                tensor = ir.constants[value]
                row[_kind(attr)] += tensor.numel()
                row["bytes"] += tensor.numel() * tensor.element_size()
        rows.append(row)
    return rows


def totals(ir: ncet.GraphIR) -> dict:
    """Whole-model totals: nodes, operator nodes, constants, numel per kind, bytes."""
    rows = constant_rows(ir)
    sums = {k: sum(r[k] for r in rows) for k in ("parameters", "buffers", "other", "bytes")}
    operators = sum(1 for n in ir.nodes if n.op_type not in ("Input", "Output"))
    return {"nodes": len(ir.nodes), "operator nodes": operators,
            "constants": len(ir.constants), **sums}


def op_type_frame(ir: ncet.GraphIR) -> pd.DataFrame:
    """Nodes and constants per op_type, most nodes first (ties by name)."""
    groups: dict[str, dict] = {}
    for row in constant_rows(ir):
        group = groups.setdefault(row["op_type"], dict.fromkeys(OP_TYPE_COLUMNS[1:], 0))
        group["nodes"] += 1
        for key in OP_TYPE_COLUMNS[2:]:
            group[key] += row[key]
    records = [{"op_type": op, **g} for op, g in groups.items()]
    records.sort(key=lambda r: (-r["nodes"], r["op_type"]))
    return pd.DataFrame(records, columns=list(OP_TYPE_COLUMNS))


def module_frame(ir: ncet.GraphIR, depth: int | None = None) -> pd.DataFrame:
    """Totals per module path, each including its children's, in first-use order with every
    module after its parent; "(top level)" first for nodes no module produced.

    Args:
        ir: The GraphIR.
        depth: The deepest module paths listed (1: top-level modules); None for all.
    """
    groups: dict[str, dict] = {}
    types: dict[str, str] = {}
    for row in constant_rows(ir):
        path = row["module"]
        if path and row["module_type"]:
            types.setdefault(path, row["module_type"])
        parts = path.split(".") if path else []
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)] or [TOP_LEVEL]
        for prefix in prefixes:
            group = groups.setdefault(prefix, dict.fromkeys(MODULE_COLUMNS[3:], 0))
            group["nodes"] += 1
            for key in MODULE_COLUMNS[4:]:
                group[key] += row[key]
    order = {p: i for i, p in enumerate(groups)}
    keys = sorted(groups, key=lambda p: (p != TOP_LEVEL, _lineage(p, order)))
    records = [{"module": p, "depth": 0 if p == TOP_LEVEL else p.count(".") + 1,
                "module_type": types.get(p, ""), **groups[p]} for p in keys]
    if depth is not None:
        records = [r for r in records if r["depth"] <= depth]
    return pd.DataFrame(records, columns=list(MODULE_COLUMNS))


def _lineage(path: str, order: dict[str, int]) -> tuple[int, ...]:
    """Sort key that puts each module right after its parent, siblings in first-use order."""
    parts = path.split(".")
    return tuple(order[".".join(parts[:i])] for i in range(1, len(parts) + 1))


def _count(key: str):
    return lambda r: cell(f"{int(r[key]):,}", "num")


def _module_cell(r) -> str:
    indent = max(0, int(r["depth"]) - 1) * 16
    return (f'<td class="mono" style="padding-left:{indent + 6}px">'
            f"{escape(r['module'])}</td>")


MODULE_TABLE = (
    Column("module", _module_cell), Column("type", lambda r: text_cell(r["module_type"])),
    Column("nodes", _count("nodes"), numeric=True),
    Column("parameters", _count("parameters"), numeric=True),
    Column("buffers", _count("buffers"), numeric=True),
    Column("other", _count("other"), numeric=True),
    Column("bytes", _count("bytes"), numeric=True),
)
"""The columns of the module table (module paths indented by depth)."""

OP_TYPE_TABLE = (
    Column("op_type", lambda r: code_cell(r["op_type"])),
    Column("nodes", _count("nodes"), numeric=True),
    Column("parameters", _count("parameters"), numeric=True),
    Column("buffers", _count("buffers"), numeric=True),
    Column("other", _count("other"), numeric=True),
    Column("bytes", _count("bytes"), numeric=True),
)
"""The columns of the per-op_type table."""


def _frame_html(frame: pd.DataFrame, columns, cls: str) -> str:
    return records_html(frame.to_dict("records"), columns, cls)


def totals_html(ir: ncet.GraphIR) -> str:
    """The totals as a two-column table (numbers with thousands separators)."""
    t = totals(ir)
    facts = [("nodes", f"{t['nodes']:,} ({t['operator nodes']:,} operators)"),
             ("constants", f"{t['constants']:,}"),
             ("parameters", f"{t['parameters']:,}"), ("buffers", f"{t['buffers']:,}"),
             ("other constants (elements)", f"{t['other']:,}"),
             ("constant bytes", f"{t['bytes']:,} ({t['bytes'] / 2**20:.2f} MiB)")]
    return f'<div class="ncet-summary-totals">{facts_html(facts)}</div>'


def summary_html(report: ncet.ConversionReport, depth: int = DEFAULT_DEPTH) -> str:
    """The static form: totals, the per-op_type table, the module table to `depth`, and CSV
    download links of both tables (the module table at every depth)."""
    parts = ['<div class="ncet-static ncet-summary">', VIEW_STYLE]
    if report.graph is None:
        parts.append('<p class="ncet-empty">The model does not convert: there is no GraphIR '
                     "to summarise (see the Support boundary tab).</p></div>")
        return "".join(parts)
    ir = report.graph
    modules = _frame_html(module_frame(ir, depth), MODULE_TABLE, "ncet-summary-modules")
    parts += [totals_html(ir), "<h4>Nodes per op_type</h4>",
              _frame_html(op_type_frame(ir), OP_TYPE_TABLE, "ncet-summary-op-types"),
              f"<h4>Modules (depth ≤ {depth})</h4>", f'<div class="ncet-scroll">{modules}</div>',
              link_html(frame_csv(module_frame(ir)), "modules.csv", "text/csv"),
              link_html(frame_csv(op_type_frame(ir)), "op_types.csv", "text/csv"), "</div>"]
    return "".join(parts)


class SummaryPanel(StaticFallback, W.VBox):
    """Parameters, buffers, constant bytes, nodes per op_type and per-module totals of a
    converted model, with a depth control and CSV downloads.

    Attributes:
        report: The ConversionReport summarised.
        depth: Dropdown: the deepest module paths the module table lists.
        modules: HTML: the module table.

    Example:
        >>> SummaryPanel(ncet.diagnose(model, (3, 32, 32)))
    """

    def __init__(self, report: ncet.ConversionReport, depth: int = DEFAULT_DEPTH):
        self.report = report
        self._depth = depth
        ir = report.graph
        if ir is None:
            super().__init__([W.HTML(summary_html(report))])
            self.add_class(VIEW_CLASS)
            self.add_class("ncet-summary-panel")
            return
        every = module_frame(ir)
        deepest = int(every["depth"].max()) if len(every) else 1
        self.depth = W.Dropdown(options=list(range(1, max(deepest, 1) + 1)),
                                value=min(max(depth, 1), max(deepest, 1)),
                                description="depth", layout=W.Layout(width="140px"))
        self.depth.add_class("ncet-summary-depth")
        self.modules = W.HTML()
        self.modules.add_class("ncet-summary-modules")
        self.depth.observe(lambda _: self._render(), names="value")
        self._render()
        downloads = W.HBox([frame_download(every, "modules.csv"),
                            frame_download(op_type_frame(ir), "op_types.csv")])
        super().__init__([
            style_widget(), W.HTML(totals_html(ir)), W.HTML("<h4>Nodes per op_type</h4>" +
            _frame_html(op_type_frame(ir), OP_TYPE_TABLE, "ncet-summary-op-types")),
            W.HTML("<h4>Modules</h4>"), self.depth, self.modules, downloads])
        self.add_class(VIEW_CLASS)
        self.add_class("ncet-summary-panel")

    def _render(self) -> None:
        frame = module_frame(self.report.graph, self.depth.value)
        self.modules.value = ('<div class="ncet-scroll">'
                              + _frame_html(frame, MODULE_TABLE, "ncet-summary-modules")
                              + "</div>")

    def to_html(self) -> str:
        """The static form (deterministic), the module table at the depth chosen."""
        depth = self.depth.value if self.report.graph is not None else self._depth
        return summary_html(self.report, depth)
