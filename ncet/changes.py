"""The records of `compare(a, b)` (differences.py): a `Comparison` and its rows, a changed
node (`NodeChange`) with its changed constants (`ConstantChange`), and a node's certified
ratios on both sides (`RatioRow`). Their printed, tabular and JSON forms are comparison.py."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import comparison


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
        a, b = tensor_text(self.dtype_a, self.shape_a), tensor_text(self.dtype_b, self.shape_b)
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


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


def tensor_text(dtype: str, shape: Iterable[int] | None) -> str:
    return "absent" if shape is None and not dtype else \
        f"{dtype}{'' if shape is None else list(shape)}"


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
