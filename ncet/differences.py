"""Compare two GraphIRs, or two ExactnessReports, node by node: what was added, removed or
changed, and how the certified error ratios moved.

Nodes are matched by name first. The nodes left over on both sides (a model whose FX names
changed, e.g. `fc1` renamed `layers_0`) are then matched by position and op_type: the k-th
unmatched node of an op_type in A, in topological order, is paired with the k-th unmatched
node of the same op_type in B; what is still unpaired is removed (A) or added (B). Both
passes are dictionary look-ups, linear in the number of nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import comparison
from .exactness.report import ExactnessEntry, ExactnessReport, OutputEntry
from .ir import CONSTANT_ATTRS, GraphIR, IRNode, same_value


@dataclass(frozen=True, slots=True)
class ConstantChange:
    """One constant a matched node reads that differs between A and B.

    Attributes:
        attr: The node's attribute naming the constant ("weight", "bias", ...).
        name_a, name_b: The constants' names; None where that side has none.
        shape_a, shape_b: Their shapes (None where absent).
        dtype_a, dtype_b: Their dtype names ("" where absent).
        max_abs_diff: max |B - A| in float64 (NaN when shapes differ or a side is absent, or a
            NaN stands opposite a number).
        bit_identical: Same dtype, shape and bytes (True only when just the name changed).
    """

    attr: str
    name_a: str | None
    name_b: str | None
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    dtype_a: str
    dtype_b: str
    max_abs_diff: float
    bit_identical: bool = False

    def describe(self) -> str:
        """One phrase: `weight: float32[4, 3], max |Δ| 0.5, not bit-identical`."""
        a, b = _tensor_text(self.dtype_a, self.shape_a), _tensor_text(self.dtype_b, self.shape_b)
        kind = a if a == b else f"{a} -> {b}"
        names = "" if self.name_a == self.name_b else f" ({self.name_a} -> {self.name_b})"
        delta = "" if math.isnan(self.max_abs_diff) else f", max |Δ| {self.max_abs_diff:.3g}"
        same = "bit-identical" if self.bit_identical else "not bit-identical"
        return f"{self.attr}{names}: {kind}{delta}, {same}"


@dataclass(frozen=True, slots=True)
class NodeChange:
    """One node present in both graphs that differs (name, op_type, operands, attributes,
    shape, dtype or constants).

    Attributes:
        name: Its name in A.
        name_b: Its name in B (differs when matched by position).
        op_type: Its op_type in A.
        matched_by: "name" or "position".
        fields: (field, value in A, value in B) for each differing field other than constants:
            "name", "op_type", "inputs" (A's operands mapped to B's names), "shape",
            "dtype", and each non-constant attribute by its name.
        constants: The differing constants.
    """

    name: str
    name_b: str
    op_type: str
    matched_by: str
    fields: tuple[tuple[str, Any, Any], ...] = ()
    constants: tuple[ConstantChange, ...] = ()

    def describe(self) -> str:
        """One line: the node and each difference."""
        parts = [f"{k} {_value(a)} -> {_value(b)}" for k, a, b in self.fields]
        parts += [c.describe() for c in self.constants]
        return f"{self.name} ({self.op_type}): " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class RatioRow:
    """One node (or output) of two ExactnessReports: observed/bound ratios side by side.

    `status_a`/`status_b` are "ok", "violated", "not checked", or "absent" (the node is only
    on the other side, its ratios NaN). Outputs have op_type "Output" and no local ratio.
    """

    name: str
    name_b: str
    op_type: str
    local_a: float
    local_b: float
    e2e_a: float
    e2e_b: float
    status_a: str
    status_b: str

    @property
    def change(self) -> str:
        """"new violation", "resolved", "verdict changed", "ratio changed" or ""."""
        if self.status_a != self.status_b:
            if self.status_b == "violated":
                return "new violation"
            return "resolved" if self.status_a == "violated" else "verdict changed"
        same = _same(self.local_a, self.local_b) and _same(self.e2e_a, self.e2e_b)
        return "" if same else "ratio changed"


@dataclass(frozen=True)
class Comparison:
    """The result of `compare(a, b)`: what changed from A to B.

    Attributes:
        kind: "graph" (two GraphIRs) or "exactness" (two ExactnessReports).
        nodes: (nodes in A, nodes in B).
        added, removed: Names of nodes only in B, only in A, in topological order
            (their op_types in `added_op_types`, `removed_op_types`).
        changed: Graphs: the matched nodes that differ, in A's order.
        matched_by_position: How many node pairs the fallback matched.
        inputs, outputs: Graphs: (A's, B's) inputs as "name: dtype[shape]" and outputs
            (A's mapped to B's names), when they differ; ((), ()) otherwise.
        ratios: Reports: one row per node (matched and unmatched), in A's order then B's.
        output_ratios: Reports: one row per output.
        verdicts: Reports: the first lines of A's and B's summaries; ok: their `ok`.
    """

    kind: str
    nodes: tuple[int, int]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[NodeChange, ...] = ()
    matched_by_position: int = 0
    inputs: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    outputs: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    ratios: tuple[RatioRow, ...] = ()
    output_ratios: tuple[RatioRow, ...] = ()
    verdicts: tuple[str, str] = ("", "")
    ok: tuple[bool, bool] | None = None
    removed_op_types: tuple[str, ...] = ()
    added_op_types: tuple[str, ...] = ()
    _changes: tuple[RatioRow, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_changes", tuple(
            r for r in (*self.ratios, *self.output_ratios) if r.change))

    @property
    def same(self) -> bool:
        """Graphs: no node added, removed or changed (constants bit for bit), same inputs and
        outputs. Reports: the same nodes, verdicts and every ratio equal."""
        return not (self.added or self.removed or self.changed or any(self.inputs)
                    or any(self.outputs) or self._changes
                    or (self.ok is not None and self.ok[0] != self.ok[1])
                    or self.verdicts[0] != self.verdicts[1])

    @property
    def new_violations(self) -> tuple[str, ...]:
        """Reports: nodes violated in B but not in A (B's names; outputs are in
        `output_ratios`)."""
        return tuple(r.name_b for r in self._changes
                     if r.change == "new violation" and r.op_type != "Output")

    @property
    def resolved_violations(self) -> tuple[str, ...]:
        """Reports: nodes violated in A but not in B (A's names)."""
        return tuple(r.name for r in self._changes
                     if r.change == "resolved" and r.op_type != "Output")

    @property
    def verdict_changes(self) -> tuple[RatioRow, ...]:
        """Reports: the rows whose status differs."""
        return tuple(r for r in self._changes if r.status_a != r.status_b)

    def summary(self) -> str:
        """A few lines: the verdict and counts, then one line per difference (at most
        `comparison.SUMMARY_LINES`, saying how many were left out)."""
        return comparison.summary(self)

    def records(self) -> list[dict[str, Any]]:
        """The rows of `to_pandas()` as dicts (columns `comparison.GRAPH_COLUMNS` or
        `comparison.RATIO_COLUMNS`)."""
        return comparison.records(self)

    def to_pandas(self):
        """Graphs: one row per removed, added or changed node; reports: one row per node and
        output, the ratios side by side with their `change`."""
        import pandas as pd

        return pd.DataFrame(self.records(), columns=list(comparison.columns(self)))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (non-finite numbers as the strings "inf", "-inf", "nan")."""
        return comparison.to_dict(self)

    def __repr__(self) -> str:
        return self.summary()


def compare(a: GraphIR | ExactnessReport, b: GraphIR | ExactnessReport) -> Comparison:
    """Compare two GraphIRs, or two ExactnessReports, node by node.

    Args:
        a: The reference side (a GraphIR or an ExactnessReport).
        b: The other side, of the same type.

    Returns:
        A Comparison: `.same`, `.summary()`, `.to_pandas()`, `.to_dict()`.

    Raises:
        TypeError: `a` and `b` are not both GraphIRs or both ExactnessReports.

    Example:
        >>> c = ncet.compare(ncet.load("before.ncet"), ncet.load("after.ncet"))
        >>> c.same, print(c.summary())
    """
    if isinstance(a, GraphIR) and isinstance(b, GraphIR):
        return _compare_graphs(a, b)
    if isinstance(a, ExactnessReport) and isinstance(b, ExactnessReport):
        return _compare_reports(a, b)
    raise TypeError(f"compare() takes two GraphIRs or two ExactnessReports, not "
                    f"{type(a).__name__} and {type(b).__name__}: convert both models "
                    "(ncet.convert) or check both (ncet.check_exactness) first")


def match(a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]]
          ) -> tuple[dict[str, tuple[str, str]], list[str], list[str]]:
    """Pair (name, op_type) sequences: by name, then by position within each op_type.

    Returns:
        ({name in A: (name in B, "name" | "position")}, removed names, added names).
    """
    b_names = {name for name, _ in b}
    pairs = {name: (name, "name") for name, _ in a if name in b_names}
    left: dict[str, list[str]] = {}
    for name, op_type in b:
        if name not in pairs:
            left.setdefault(op_type, []).append(name)
    taken = {op: 0 for op in left}
    removed = []
    for name, op_type in a:
        if name in pairs:
            continue
        k = taken.get(op_type, 0)
        if k < len(left.get(op_type, ())):
            pairs[name] = (left[op_type][k], "position")
            taken[op_type] = k + 1
        else:
            removed.append(name)
    added = [n for op, names in left.items() for n in names[taken[op]:]]
    order = {name: i for i, (name, _) in enumerate(b)}
    return pairs, removed, sorted(added, key=order.__getitem__)


def _compare_graphs(a: GraphIR, b: GraphIR) -> Comparison:
    pairs, removed, added = match([(n.name, n.op_type) for n in a.nodes],
                                  [(n.name, n.op_type) for n in b.nodes])
    rename = {name: other for name, (other, _) in pairs.items()}
    changed = []
    for node in a.nodes:
        if node.name in pairs:
            other, how = pairs[node.name]
            change = _node_change(node, b.node(other), how, rename, a, b)
            if change is not None:
                changed.append(change)
    inputs = tuple(tuple(f"{n.name}: {_tensor_text(n.dtype, n.shape)}" for n in g.inputs)
                   for g in (a, b))
    outputs = (tuple(rename.get(o, o) for o in a.outputs), tuple(b.outputs))
    return Comparison(
        "graph", (len(a.nodes), len(b.nodes)), tuple(added), tuple(removed), tuple(changed),
        sum(1 for _, how in pairs.values() if how == "position"),
        inputs if inputs[0] != inputs[1] else ((), ()),
        outputs if outputs[0] != outputs[1] else ((), ()),
        removed_op_types=tuple(a.node(n).op_type for n in removed),
        added_op_types=tuple(b.node(n).op_type for n in added))


def _node_change(x: IRNode, y: IRNode, how: str, rename: dict[str, str], a: GraphIR,
                 b: GraphIR) -> NodeChange | None:
    fields_ = []
    if x.name != y.name:
        fields_.append(("name", x.name, y.name))
    if x.op_type != y.op_type:
        fields_.append(("op_type", x.op_type, y.op_type))
    mapped = tuple(rename.get(i, i) for i in x.inputs)
    if mapped != y.inputs:
        fields_.append(("inputs", list(mapped), list(y.inputs)))
    if x.shape != y.shape:
        fields_.append(("shape", _plain(x.shape), _plain(y.shape)))
    if x.dtype != y.dtype:
        fields_.append(("dtype", x.dtype, y.dtype))
    const_x, const_y = CONSTANT_ATTRS[x.op_type], CONSTANT_ATTRS[y.op_type]
    for key in sorted(set(x.attrs) | set(y.attrs)):
        if key in const_x or key in const_y:
            continue
        va, vb = x.attrs.get(key), y.attrs.get(key)
        if not same_value(va, vb):
            fields_.append((key, _plain(va), _plain(vb)))
    constants = []
    for key in dict.fromkeys((*const_x, *const_y)):
        change = _constant_change(key, x.attrs.get(key), y.attrs.get(key), a, b)
        if change is not None:
            constants.append(change)
    if not fields_ and not constants:
        return None
    return NodeChange(x.name, y.name, x.op_type, how, tuple(fields_), tuple(constants))


def _constant_change(attr: str, name_a: str | None, name_b: str | None, a: GraphIR,
                     b: GraphIR) -> ConstantChange | None:
    ta = None if name_a is None else a.constants[name_a]
    tb = None if name_b is None else b.constants[name_b]
    if ta is None and tb is None:
        return None
    if ta is not None and tb is not None and identical(ta, tb):
        return None if name_a == name_b else ConstantChange(
            attr, name_a, name_b, _shape(ta), _shape(tb), _dtype(ta), _dtype(tb), 0.0, True)
    return ConstantChange(attr, name_a, name_b, _shape(ta), _shape(tb), _dtype(ta), _dtype(tb),
                          max_abs_diff(ta, tb))


def identical(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (NaN payloads and the sign of zero included)."""
    if x is y:
        return True
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    return torch.equal(x.detach().contiguous().reshape(-1).view(torch.uint8),
                       y.detach().contiguous().reshape(-1).view(torch.uint8))


def max_abs_diff(x: torch.Tensor | None, y: torch.Tensor | None) -> float:
    """max |y - x| in float64 over equal elements counted as 0 (so inf == inf); NaN when a
    side is absent, the shapes differ, or a NaN stands opposite a number."""
    if x is None or y is None or x.shape != y.shape:
        return math.nan
    if x.numel() == 0:
        return 0.0
    xd, yd = x.detach().double(), y.detach().double()
    delta = (yd - xd).abs()
    delta = torch.where((xd == yd) | (xd.isnan() & yd.isnan()), 0.0, delta)
    return float(delta.max())


def _compare_reports(a: ExactnessReport, b: ExactnessReport) -> Comparison:
    pairs, removed, added = match([(e.name, e.op_type) for e in a.entries],
                                  [(e.name, e.op_type) for e in b.entries])
    b_entries = {e.name: e for e in b.entries}
    a_ops = {e.name: e.op_type for e in a.entries}
    rows = [_row(e, b_entries.get(pairs[e.name][0]) if e.name in pairs else None)
            for e in a.entries]
    rows += [_row(None, b_entries[name]) for name in added]
    b_outputs = {o.name: o for o in b.outputs}
    a_names = {o.name for o in a.outputs}
    outputs = [_row(o, b_outputs.get(o.name), "Output") for o in a.outputs]
    outputs += [_row(None, o, "Output") for o in b.outputs if o.name not in a_names]
    return Comparison(
        "exactness", (len(a.entries), len(b.entries)), tuple(added), tuple(removed),
        matched_by_position=sum(1 for _, how in pairs.values() if how == "position"),
        ratios=tuple(rows), output_ratios=tuple(outputs),
        verdicts=(a.summary().splitlines()[0], b.summary().splitlines()[0]), ok=(a.ok, b.ok),
        removed_op_types=tuple(a_ops[n] for n in removed),
        added_op_types=tuple(b_entries[n].op_type for n in added))


def status(record: ExactnessEntry | OutputEntry | None) -> str:
    """"ok", "violated", "not checked", or "absent" for None."""
    if record is None:
        return "absent"
    violated = record.violated if isinstance(record, ExactnessEntry) else bool(record.violations)
    return "violated" if violated else "ok" if record.checked else "not checked"


def _row(x, y, op_type: str = "") -> RatioRow:
    """A row of two entries (or two outputs: no local ratio, e2e is their ratio)."""
    def ratios(e):
        if e is None:
            return math.nan, math.nan
        return (e.local_ratio, e.e2e_ratio) if isinstance(e, ExactnessEntry) else \
            (math.nan, e.ratio)

    first = x if x is not None else y
    return RatioRow("" if x is None else x.name, "" if y is None else y.name,
                    op_type or first.op_type, *(v for pair in zip(ratios(x), ratios(y))
                                                for v in pair), status(x), status(y))


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


def _plain(value: Any) -> Any:
    """Attribute values as JSON data: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _shape(tensor: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if tensor is None else tuple(tensor.shape)


def _dtype(tensor: torch.Tensor | None) -> str:
    return "" if tensor is None else str(tensor.dtype).removeprefix("torch.")


def _tensor_text(dtype: str, shape: Iterable[int] | None) -> str:
    return "absent" if shape is None and not dtype else \
        f"{dtype}{'' if shape is None else list(shape)}"


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
