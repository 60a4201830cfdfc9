"""The unsafe set of an adjudication (`ncet.adjudicate`, docs/adjudication.md) on 2-D slices
of the output space, for drawing: the pairs of outputs the unsafe set's rows involve, each
polytope's rows restricted to a pair (the other outputs fixed at the exact output's values),
and the points to mark (the exact output, each float32 run's, the claimed Y).

No matplotlib here (`adjudication_figure` draws a `Slice`); membership is decided in exact
rationals, as `ncet.adjudicate` decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

MAX_SLICES = 4
"""At most this many pairs are drawn: those of the rows closest to deciding (the least
|slack| at the exact output) first."""


@dataclass(frozen=True)
class Slice:
    """The unsafe set on the plane of outputs (Y_j, Y_k) through the exact output.

    Attributes:
        pair: (j, k), the outputs on the horizontal and vertical axes (k is None when the
            network has one output: the slice is a line, drawn at height 0).
        polytopes: per polytope of the unsafe set that counts, its rows restricted to the
            pair: (a_j, a_k, rhs, strict) for a_j Y_j + a_k Y_k <= rhs (< when strict), rhs
            folding in the other outputs at the exact output's values (Fractions).
        exact: (Y_j, Y_k) of the exact output (floats; None for a missing k is 0.0).
        float32: per float32 run, (runtime, (Y_j, Y_k)).
        claimed: (Y_j, Y_k) of the witness's claimed Y, or None without one.
        wide: some row of this pair involves more than two outputs (the pair drawn is that
            row's two largest coefficients).
        margin: the adjudication's exact margin (for the title).
    """

    pair: tuple[int, int | None]
    polytopes: tuple[tuple[tuple[Fraction, Fraction, Fraction, bool], ...], ...]
    exact: tuple[float, float]
    float32: tuple[tuple[str, tuple[float, float]], ...]
    claimed: tuple[float, float] | None
    wide: bool
    margin: float

    def contains(self, point) -> bool:
        """Is (Y_j, Y_k) inside the shaded region (exactly, strict rows strict)?"""
        u, v = (Fraction(float(c)) for c in point)
        return any(all((a * u + b * v < rhs) if strict else (a * u + b * v <= rhs)
                       for a, b, rhs, strict in rows) for rows in self.polytopes)

    def label(self, axis: int) -> str:
        """"Y_j" (axis 0) or "Y_k" (axis 1)."""
        index = self.pair[axis]
        return "(one output)" if index is None else f"Y_{index}"


@dataclass(frozen=True)
class Outputs:
    """What an adjudication's drawing marks: the exact output (float64, the centre of its
    certified enclosure, `radius` its half-width), each float32 run's output, the claimed Y,
    and the unsafe polytopes that count (of the boxes holding X; of every box when none)."""

    exact: np.ndarray
    radius: np.ndarray
    float32: tuple[tuple[str, np.ndarray], ...]
    claimed: np.ndarray | None
    polytopes: tuple


def _terms(row) -> dict[int, Fraction]:
    from ..properties.rational import fraction

    out: dict[int, Fraction] = {}
    for j, c in row[0]:
        out[j] = out.get(j, Fraction(0)) + fraction(c)
    return {j: c for j, c in out.items() if c != 0}


def _pair_of(terms: dict[int, Fraction], num_outputs: int) -> tuple[tuple, bool]:
    """The pair a row is drawn on, and whether it involves more than two outputs."""
    if num_outputs == 1:
        return (0, None), False
    ranked = sorted(terms, key=lambda j: (-abs(terms[j]), j))
    if len(ranked) >= 2:
        return tuple(sorted(ranked[:2])), len(ranked) > 2
    j = ranked[0] if ranked else 0
    other = 1 if j == 0 else 0  # a row on one output: beside the lowest other one
    return tuple(sorted((j, other))), False


def pairs_of(polytopes, exact, num_outputs: int, limit: int = MAX_SLICES):
    """[(pair, wide)]: the distinct pairs the rows involve, the rows with the least |slack|
    at the exact output first, at most `limit`; and how many pairs were left out."""
    from ..properties.rational import fraction

    y = [Fraction(float(v)) for v in exact]
    found: dict[tuple, tuple[Fraction, bool]] = {}
    for p in polytopes:
        for row in p.rows:
            terms = _terms(row)
            pair, wide = _pair_of(terms, num_outputs)
            slack = abs(fraction(row[1]) - sum((c * y[j] for j, c in terms.items()),
                                               Fraction(0)))
            best, was_wide = found.get(pair, (slack, False))
            found[pair] = (min(best, slack), was_wide or wide)
    if not found:  # no rows: all of the output space is unsafe
        found[(0, None) if num_outputs == 1 else (0, 1)] = (Fraction(0), False)
    ranked = sorted(found, key=lambda pair: (found[pair][0], pair[0], pair[1] or 0))
    return [(pair, found[pair][1]) for pair in ranked[:limit]], max(len(ranked) - limit, 0)


def _restricted(polytope, pair, exact) -> tuple:
    from ..properties.rational import fraction

    j, k = pair
    y = [Fraction(float(v)) for v in exact]
    rows = []
    for row in polytope.rows:
        terms = _terms(row)
        rest = sum((c * y[i] for i, c in terms.items() if i not in (j, k)), Fraction(0))
        rows.append((terms.get(j, Fraction(0)), terms.get(k, Fraction(0)) if k is not None
                     else Fraction(0), fraction(row[1]) - rest, bool(row[2])))
    return tuple(rows)


def _at(values, pair) -> tuple[float, float]:
    j, k = pair
    return float(values[j]), 0.0 if k is None else float(values[k])


def slices_of(outputs: Outputs, margin: float, limit: int = MAX_SLICES) -> tuple[list[Slice],
                                                                                int]:
    """The slices to draw (`pairs_of`) and how many pairs were left out."""
    n = outputs.exact.size
    pairs, left = pairs_of(outputs.polytopes, outputs.exact, n, limit)
    slices = [Slice(pair, tuple(_restricted(p, pair, outputs.exact)
                                for p in outputs.polytopes),
                    _at(outputs.exact, pair),
                    tuple((runtime, _at(y, pair)) for runtime, y in outputs.float32),
                    None if outputs.claimed is None else _at(outputs.claimed, pair),
                    wide, margin)
              for pair, wide in pairs]
    return slices, left


def outputs_at(network, property, witness, *, input_shape=None) -> Outputs:
    """The outputs `ncet.adjudicate(network, property, witness, input_shape=...)` judges,
    computed the same way (the certified enclosure of the exact output; onnxruntime on an
    ONNX file, eager PyTorch on an nn.Module, NCET's float32 evaluator on a GraphIR).

    Raises:
        As `ncet.adjudicate`.
    """
    from ..properties.adjudication import _network, _witness
    from ..properties.exact_eval import enclose_at
    from ..properties.float32_runs import deployed_runs
    from ..properties.margins import cases_at
    from ..properties.property import Property
    from ..properties.reader import read_vnnlib

    prop = property if isinstance(property, Property) else read_vnnlib(property)
    w = _witness(witness)
    ir, data, module = _network(network, input_shape)
    x = w.x_exact
    boxes = [i for i, case in enumerate(prop.cases) if case.box.contains(x)]
    value, radius = enclose_at(ir, x)
    x64 = w.x_as(np.float64)
    runs = deployed_runs(data, module, ir, x64, input_shape)
    claimed = w.y_as(np.float64)
    if claimed is not None and claimed.size != value.size:
        claimed = None
    return Outputs(np.asarray(value, dtype=np.float64).reshape(-1),
                   np.asarray(radius, dtype=np.float64).reshape(-1),
                   tuple((r.runtime, r.output) for r in runs), claimed,
                   tuple(cases_at(prop.cases, boxes)))


def unsafe_slices(network, property, witness, answer, *, input_shape=None,
                  limit: int = MAX_SLICES) -> tuple[list[Slice], int]:
    """The slices of `answer` (`ncet.adjudicate(network, property, witness)`) to draw, and
    how many pairs were left out (`MAX_SLICES`)."""
    return slices_of(outputs_at(network, property, witness, input_shape=input_shape),
                     answer.exact.margin, limit)
