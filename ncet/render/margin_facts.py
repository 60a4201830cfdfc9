"""What the margin report shows about a `Margin` beyond its fields, as plain records (no HTML,
no matplotlib): eps per output against the exact output's range over the region, each node's
share of eps, and each unsafe row of a property against the exact output's interval and eps.

The row check is exact arithmetic on the record's float64 bounds: over the region the exact
output y lies in the box [lower, upper], so b - a.y lies in [low, high] (the extremes of a
linear function over a box), and a float32 output y' with |y' - y| <= eps satisfies
b - a.y' <= high + sum_j |a_j| eps_j. A row whose upper end stays below 0 (at or below for a
strict row) is violated by every output: no output of the region meets that row. It is a
sufficient check from loose interval bounds, not a verifier: when it fails, the property may
still hold (docs/margins.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..properties.rational import decimal_text, fraction

ZERO = Fraction(0)

VERDICTS = {
    "float32": "excluded in float32: below -sum|a|eps over the whole region",
    "exact": "excluded in exact arithmetic only: below 0, but not by eps",
    "open": "not decided by the interval bounds",
}
"""A row's verdict (`RowMargin.verdict`), with what it means."""

INPUT_ROUNDING = "<input rounding>"
"""The contributions key of the input's own rounding to its dtype."""


@dataclass(frozen=True, slots=True)
class OutputMargin:
    """One output element: eps against the exact output's range over the region.

    Attributes:
        index: j, as VNN-LIB numbers the outputs (Y_j).
        eps: The bound |float32 - exact| over the region.
        lower: A certified lower bound of the exact output over the region.
        upper: Likewise an upper bound.
        range: upper - lower (0 for a constant output).
        relative: eps / range (inf when the range is 0 and eps is not).
    """

    index: int
    eps: float
    lower: float
    upper: float
    range: float
    relative: float


@dataclass(frozen=True, slots=True)
class NodeShare:
    """One node's share of eps (its own rounding's contribution, summed over the outputs).

    Attributes:
        node: The IR node's name (`INPUT_ROUNDING` for the input's rounding).
        op_type: Its op_type ("" when the network was not given, "Input" for the input's
            rounding).
        total: The sum over outputs of its contribution.
        fraction: total / the sum over outputs of eps (the shares add up to about 1).
        largest: Its largest contribution to one output.
        peak: Its largest share of one output's eps (contribution / eps there; what
            `ncet margin` ranks nodes by).
        at: The output element of that largest share.
    """

    node: str
    op_type: str
    total: float
    fraction: float
    largest: float
    peak: float
    at: int


@dataclass(frozen=True, slots=True)
class RowMargin:
    """One row a.y <= b of a property's unsafe set, over the region.

    Attributes:
        case: The index of the case (box with its unsafe set) in `Property.cases`.
        polytope: The index of the polytope in that case's unsafe set.
        row: The index of the row in the polytope.
        text: The row as written, e.g. "Y_0 - Y_1 <= 0".
        low: An exact lower bound of b - a.y over the exact outputs of the region (a
            Fraction; an infinite float where a bound of the record is infinite).
        high: Likewise an upper bound (below 0: the row fails for every exact output).
        error: sum_j |a_j| eps_j, exactly: how far float32 can move a.y (likewise).
        strict: The row is strict (a.y < b).
        verdict: A key of `VERDICTS`.
    """

    case: int
    polytope: int
    row: int
    text: str
    low: Fraction | float
    high: Fraction | float
    error: Fraction | float
    strict: bool
    verdict: str

    @property
    def room(self) -> Fraction | float:
        """-high: how far below the row's boundary every exact output stays (<= 0: none)."""
        return -self.high


def output_margins(margin) -> list[OutputMargin]:
    """One `OutputMargin` per output element, in VNN-LIB order."""
    out = []
    for j, (e, lo, hi) in enumerate(zip(margin.eps.tolist(), margin.lower.tolist(),
                                        margin.upper.tolist())):
        width = hi - lo
        relative = e / width if width > 0 else (0.0 if e == 0 else float("inf"))
        out.append(OutputMargin(j, e, lo, hi, width, relative))
    return out


def node_shares(margin, network=None) -> list[NodeShare]:
    """Each contributing node's share of eps, the largest first (ties by name).

    Args:
        margin: The Margin.
        network: The GraphIR it was computed for, to name each node's op_type (optional).
    """
    ops = {} if network is None else {n.name: n.op_type for n in network.nodes}
    whole = float(margin.eps.sum()) if margin.eps.numel() else 0.0
    shares = []
    eps = margin.eps.tolist()
    for node, part in margin.contributions.items():
        values = part.tolist()
        total = float(sum(values))
        ratios = [v / e if e > 0 else 0.0 for v, e in zip(values, eps)]
        at = max(range(len(ratios)), key=ratios.__getitem__) if ratios else 0
        op = "Input" if node == INPUT_ROUNDING else ops.get(node, "")
        shares.append(NodeShare(node, op, total, total / whole if whole > 0 else 0.0,
                                max(values, default=0.0), ratios[at] if ratios else 0.0, at))
    return sorted(shares, key=lambda s: (-s.total, s.node))


def unstable_rows(margin, network=None) -> list[tuple[str, str, int, int]]:
    """(node, op_type, possibly unstable elements, elements) per nonlinear node, in the
    record's order (op_type "" without the network)."""
    ops = {} if network is None else {n.name: n.op_type for n in network.nodes}
    return [(node, ops.get(node, ""), int(k), int(n))
            for node, (k, n) in margin.unstable.items()]


def row_text(terms, b, strict: bool) -> str:
    """A row as VNN-LIB's reader wrote it: "Y_0 - 2*Y_3 <= 0.5" (< when strict)."""
    parts = []
    for j, c in terms:
        c = fraction(c)
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        size = abs(c)
        term = f"Y_{j}" if size == 1 else f"{_number_text(size)}*Y_{j}"
        parts.append((sign, term))
    if not parts:
        left = "0"
    else:
        (sign, first), *rest = parts
        left = ("-" if sign == "-" else "") + first + "".join(f" {s} {t}" for s, t in rest)
    right = b if isinstance(b, str) else _number_text(fraction(b))
    return f"{left} {'<' if strict else '<='} {right}"


def _number_text(value: Fraction) -> str:
    """A constant computed by the reader (a sum of terms): its decimal numeral when it has
    one, else p/q."""
    return decimal_text(value) or f"{value.numerator}/{value.denominator}"


def row_margins(margin, prop) -> list[RowMargin]:
    """Every row of every unsafe polytope of `prop`, against the margin's bounds (module
    docstring).

    Raises:
        ValueError: The property and the margin have different numbers of outputs.
    """
    if prop.num_outputs != margin.num_outputs:
        raise ValueError(f"the property has {prop.num_outputs} outputs and the margin "
                         f"{margin.num_outputs}: it was computed for another network")
    lower, upper, eps = (list(map(_exact, t.tolist()))
                         for t in (margin.lower, margin.upper, margin.eps))
    out = []
    for k, case in enumerate(prop.cases):
        for p, polytope in enumerate(case.unsafe):
            for r, (terms, b, strict) in enumerate(polytope.rows):
                coefficients = [(j, fraction(c)) for j, c in terms if fraction(c) != 0]
                top = sum((c * (upper[j] if c > 0 else lower[j]) for j, c in coefficients),
                          ZERO)
                bottom = sum((c * (lower[j] if c > 0 else upper[j]) for j, c in coefficients),
                             ZERO)
                error = sum((abs(c) * eps[j] for j, c in coefficients), ZERO)
                rhs = fraction(b)
                low, high = rhs - top, rhs - bottom
                verdict = "float32" if _below(high + error, strict) else \
                    "exact" if _below(high, strict) else "open"
                out.append(RowMargin(k, p, r, row_text(terms, b, strict), low, high, error,
                                     strict, verdict))
    return out


def _exact(value: float) -> Fraction | float:
    """A float64 bound as the Fraction it is exactly; an infinite one (a bound that
    overflowed) stays a float, so the sums it enters are infinite and decide nothing."""
    return Fraction(value) if math.isfinite(value) else value


def _below(value: Fraction, strict: bool) -> bool:
    """Does b - a.y <= value fail the row for every output: value < 0 (<= 0 when strict)?"""
    return value <= 0 if strict else value < 0


def excluded(rows: list[RowMargin], prop, level: str = "float32") -> bool:
    """Is every polytope of every case excluded at `level` ("float32": by a row with verdict
    "float32"; "exact": by a row with verdict "float32" or "exact")? Then no output of the
    region, float32 (or exact) as `level` says, lies in the unsafe set: the property holds
    ("unsat") there. A polytope without rows is all of R^m and is never excluded."""
    accepted = {"float32"} if level == "float32" else {"float32", "exact"}
    for k, case in enumerate(prop.cases):
        for p, _ in enumerate(case.unsafe):
            if not any(r.verdict in accepted for r in rows if (r.case, r.polytope) == (k, p)):
                return False
    return True


def property_verdict(rows: list[RowMargin], prop) -> tuple[str, str]:
    """("ok" | "warn" | "open", one sentence) on what the rows show of the property."""
    if excluded(rows, prop, "float32"):
        return "ok", ("unsat certainly holds in float32: every unsafe polytope has a row that "
                      "every float32 output of the region violates (a sufficient check from "
                      "the interval bounds, not a verifier)")
    if excluded(rows, prop, "exact"):
        return "warn", ("unsat holds in exact arithmetic by the interval bounds, but eps is "
                        "too large for them to show it in float32 (the property may still "
                        "hold: tighten it and verify)")
    return "open", ("the interval bounds decide nothing about the property: a verifier is "
                    "needed (tighten it by eps first, so that its unsat holds in float32)")
