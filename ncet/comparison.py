"""The printed and tabular forms of a `Comparison` (ncet/changes.py): its summary lines, its
rows for pandas and the views, and its JSON data."""

from __future__ import annotations

import math
from typing import Any

SUMMARY_LINES = 40
"""The most per-node lines `Comparison.summary()` lists; it says how many it left out."""

GRAPH_COLUMNS = ("node", "node_b", "op_type", "change", "matched_by", "fields", "constants",
                 "max_abs_diff", "bit_identical", "detail")
"""Columns of a graph Comparison's rows: one per removed, added or changed node (`fields` and
`constants` name what differs, `max_abs_diff` is the largest over its changed constants,
`bit_identical` None when no constant changed)."""

RATIO_COLUMNS = ("node", "node_b", "op_type", "local_ratio_a", "local_ratio_b", "e2e_ratio_a",
                 "e2e_ratio_b", "status_a", "status_b", "change")
"""Columns of an exactness Comparison's rows: one per node, then one per output."""


def columns(c) -> tuple[str, ...]:
    """The columns of `records(c)`."""
    return GRAPH_COLUMNS if c.kind == "graph" else RATIO_COLUMNS


def records(c) -> list[dict[str, Any]]:
    """One dict per row of `c.to_pandas()`: graphs removed, added, then changed nodes."""
    if c.kind == "graph":
        blank = {"matched_by": "", "fields": "", "constants": "", "max_abs_diff": None,
                 "bit_identical": None, "detail": ""}
        return [*({"node": n, "node_b": "", "op_type": op, "change": "removed", **blank}
                  for n, op in zip(c.removed, c.removed_op_types)),
                *({"node": "", "node_b": n, "op_type": op, "change": "added", **blank}
                  for n, op in zip(c.added, c.added_op_types)),
                *(_change_record(x) for x in c.changed)]
    return [{"node": r.name, "node_b": r.name_b, "op_type": r.op_type,
             "local_ratio_a": r.local_a, "local_ratio_b": r.local_b,
             "e2e_ratio_a": r.e2e_a, "e2e_ratio_b": r.e2e_b, "status_a": r.status_a,
             "status_b": r.status_b, "change": r.change}
            for r in (*c.ratios, *c.output_ratios)]


def to_dict(c) -> dict[str, Any]:
    """Plain JSON-able data (non-finite numbers as the strings "inf", "-inf", "nan")."""
    data = {"kind": c.kind, "same": c.same, "nodes": list(c.nodes), "added": list(c.added),
            "removed": list(c.removed), "matched_by_position": c.matched_by_position}
    if c.kind == "graph":
        data.update(changed=[_change_record(x, full=True) for x in c.changed],
                    inputs=[list(s) for s in c.inputs], outputs=[list(s) for s in c.outputs])
    else:
        data.update(verdicts=list(c.verdicts), ok=list(c.ok),
                    new_violations=list(c.new_violations),
                    resolved_violations=list(c.resolved_violations), ratios=records(c))
    return json_safe(data)


def summary(c) -> str:
    """The verdict and counts, then one line per difference (at most `SUMMARY_LINES`)."""
    return "\n".join(_graph_lines(c) if c.kind == "graph" else _report_lines(c))


def _graph_lines(c) -> list[str]:
    a, b = c.nodes
    if c.same:
        return [f"the GraphIRs are the same: {a} nodes, every constant bit-identical"]
    position = f"; {c.matched_by_position} matched by position" if c.matched_by_position \
        else ""
    lines = [f"the GraphIRs differ: {len(c.changed)} changed, {len(c.added)} added, "
             f"{len(c.removed)} removed ({a} -> {b} nodes{position})"]
    if any(c.inputs):
        lines.append(f"inputs: {', '.join(c.inputs[0])} -> {', '.join(c.inputs[1])}")
    if any(c.outputs):
        lines.append(f"outputs: {', '.join(c.outputs[0])} -> {', '.join(c.outputs[1])}")
    items = [f"- changed {x.describe()}" for x in c.changed]
    items += [f"- removed {n} ({op})" for n, op in zip(c.removed, c.removed_op_types)]
    items += [f"- added {n} ({op})" for n, op in zip(c.added, c.added_op_types)]
    return lines + _capped(items)


def _report_lines(c) -> list[str]:
    a, b = c.nodes
    rows = [r for r in (*c.ratios, *c.output_ratios) if r.change]
    lines = [f"the exactness reports are {'the same' if c.same else 'different'}: {a} -> {b} "
             f"nodes, {len(c.new_violations)} new node violation(s), "
             f"{len(c.resolved_violations)} resolved, {len(c.verdict_changes)} verdict "
             "change(s)", f"A: {c.verdicts[0]}", f"B: {c.verdicts[1]}"]
    items = [_verdict_line(r) for r in rows if r.status_a != r.status_b]
    moved = sum(1 for r in rows if r.status_a == r.status_b)
    if moved:
        items.append(f"- {moved} node(s) or output(s) with other ratios and the same verdict")
    return lines + _capped(items)


def _verdict_line(r) -> str:
    name = r.name_b or r.name
    if r.op_type == "Output":
        return (f"- {r.change} at output {name}: {r.status_a} -> {r.status_b}; ratio "
                f"{_g(r.e2e_a)} -> {_g(r.e2e_b)}")
    return (f"- {r.change} at {name} ({r.op_type}): {r.status_a} -> {r.status_b}; local "
            f"ratio {_g(r.local_a)} -> {_g(r.local_b)}, end to end {_g(r.e2e_a)} -> "
            f"{_g(r.e2e_b)}")


def _capped(items: list[str]) -> list[str]:
    if len(items) <= SUMMARY_LINES:
        return items
    return items[:SUMMARY_LINES] + [f"... and {len(items) - SUMMARY_LINES} more (to_pandas() "
                                    "lists them all)"]


def _change_record(x, full: bool = False) -> dict[str, Any]:
    deltas = [k.max_abs_diff for k in x.constants]
    record = {"node": x.name, "node_b": x.name_b, "op_type": x.op_type, "change": "changed",
              "matched_by": x.matched_by, "fields": ", ".join(k for k, _, _ in x.fields),
              "constants": ", ".join(k.attr for k in x.constants),
              "max_abs_diff": max(deltas, key=lambda d: (not math.isnan(d), d)) if deltas
              else None,
              "bit_identical": all(k.bit_identical for k in x.constants) if deltas else None,
              "detail": x.describe().partition(": ")[2]}
    if full:
        record["fields"] = [{"field": k, "a": va, "b": vb} for k, va, vb in x.fields]
        record["constants"] = [
            {"attr": k.attr, "name_a": k.name_a, "name_b": k.name_b,
             "shape_a": _list(k.shape_a), "shape_b": _list(k.shape_b), "dtype_a": k.dtype_a,
             "dtype_b": k.dtype_b, "max_abs_diff": k.max_abs_diff,
             "bit_identical": k.bit_identical} for k in x.constants]
    return record


def _list(shape):
    return None if shape is None else list(shape)


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats as the strings "inf", "-inf" and "nan" (strict JSON),
    tuples as lists; the CLI's --json documents use it too."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _g(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3g}"
