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
from collections.abc import Sequence
from typing import Any

import torch

from .changes import Comparison, ConstantChange, NodeChange, RatioRow, tensor_text
from .exactness.report import ExactnessEntry, ExactnessReport, OutputEntry
from .ir import CONSTANT_ATTRS, GraphIR, IRNode, same_value


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
    inputs = tuple(tuple(f"{n.name}: {tensor_text(n.dtype, n.shape)}" for n in g.inputs)
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


def _plain(value: Any) -> Any:
    """Attribute values as JSON data: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _shape(tensor: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if tensor is None else tuple(tensor.shape)


def _dtype(tensor: torch.Tensor | None) -> str:
    return "" if tensor is None else str(tensor.dtype).removeprefix("torch.")
