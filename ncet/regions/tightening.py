"""`tighten`: a property's unsafe set grown by a float margin, so that a verdict reached in
real arithmetic holds for the network as deployed in float32 (docs/margins.md).

Every unsafe row a . y <= b (or a . y < b) becomes a . y <= b' (strictness kept) with
b' >= b + sum_j |a_j| eps_j. If the float32 output y_f satisfies the row and
|y_f - y_e| <= eps elementwise, the exact output y_e satisfies the grown row:
a . y_e <= a . y_f + sum_j |a_j| |y_e,j - y_f,j| <= b + sum_j |a_j| eps_j <= b'
(strictly, for a strict row). So "no exact output in the tightened unsafe set" (a verifier's
"unsat" in real arithmetic) implies "no float32 output in the original one".

The sum is exact (Fractions of the float64 eps); b' is then rounded up to a short numeral:
repr of the least float64 >= the sum, or of the float64 above it when that repr (the
shortest decimal that reads back as the float) lies below the sum. Both readers see a b' at
least the sum: `read_vnnlib` and any exact reader take the numeral's own value, and a reader
that parses it to the nearest float64 (the VNN-COMP scripts, most verifiers) gets that
float64, which is >= the sum too. Keeping the exact sum instead would be a decimal of 50 and
more digits (a float64's exact expansion) that float64 readers round to nearest, possibly
below the sum; the cost of the choice is at most two float64 ulps of b'.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import torch

from ..properties.property import Case, Polytope, Property, Row
from ..properties.rational import NUMERAL, ZERO, Value, decimal_text, fraction

__all__ = ["grown_by", "tighten", "upward_numeral"]


def _eps_of(margin, num_outputs: int) -> list[Fraction]:
    """The eps of a Margin (or a 1-D sequence of them), exact, checked."""
    eps = getattr(margin, "eps", margin)
    if isinstance(eps, torch.Tensor):
        eps = eps.detach().to(torch.float64).cpu().numpy()
    try:
        eps = np.asarray(eps, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise TypeError(f"tighten takes a Margin (from ncet.float_margin) or a 1-D sequence of "
                        f"eps, not {type(margin).__name__}") from error
    if eps.size != num_outputs:
        raise ValueError(f"the margin has {eps.size} outputs and the property "
                         f"{num_outputs}: compute the margin of the network the property is "
                         "about (its outputs flattened, as VNN-LIB numbers them)")
    bad = np.flatnonzero(~np.isfinite(eps) | (eps < 0))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"the margin's eps of Y_{j} is {float(eps[j])!r}: a margin is "
                         "finite and non-negative")
    return [Fraction(float(e)) for e in eps]


def grown_by(row: Row, eps: list[Fraction]) -> Fraction:
    """sum_j |a_j| eps_j for one row ((j, c), ...), b, strict, exactly."""
    return sum((abs(fraction(c)) * eps[j] for j, c in row[0]), ZERO)


def upward_numeral(value: Fraction) -> str:
    """A short decimal numeral n with n >= value and float(n) >= value (module docstring).

    Raises:
        ValueError: the value is beyond the largest float64.
    """
    try:
        f = float(value)  # correctly rounded (nearest)
    except OverflowError:
        f = math.inf
    if math.isfinite(f) and Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    if not math.isfinite(f):
        raise ValueError("a tightened right-hand side is beyond the largest float64 "
                         f"({float.fromhex('0x1.fffffffffffffp+1023'):.6g}): no verifier "
                         "reads it")
    text = repr(f)
    if Fraction(Decimal(text)) < value:  # repr is within half an ulp of f, maybe below
        text = repr(math.nextafter(f, math.inf))
    assert NUMERAL.fullmatch(text), text
    return text


def _scaled(row: Row) -> Row:
    """The same half-space with integer coefficients when a coefficient has no terminating
    decimal (write_vnnlib would scale it on writing, rounding b; here b is grown after)."""
    terms, b, strict = row
    coefficients = [fraction(c) for _, c in terms]
    if all(decimal_text(c) is not None for c in coefficients):
        return row
    scale = math.lcm(*(c.denominator for c in coefficients))
    return tuple((j, c * scale) for (j, _), c in zip(terms, coefficients)), \
        fraction(b) * scale, strict


def _writes_exactly(row: Row) -> bool:
    """Does write_vnnlib write every constant of the row exactly (terminating decimals)?"""
    terms, b, _ = row
    return all(decimal_text(fraction(c)) is not None for _, c in terms) and \
        (isinstance(b, str) or decimal_text(b) is not None)


def _tightened_row(row: Row, eps: list[Fraction]) -> Row:
    if _writes_exactly(row) and grown_by(row, eps) == 0:
        return row
    row = _scaled(row)
    terms, b, strict = row
    growth = grown_by(row, eps)
    value: Value = upward_numeral(fraction(b) + growth)
    return terms, value, strict


def tighten(prop: Property, margin) -> Property:
    """The property with every unsafe row grown by the margin (module docstring): a . y <= b
    becomes a . y <= b' with b' >= b + sum_j |a_j| eps_j, a strict row staying strict. The
    input region is unchanged; per-box unsafe sets (`separable` False) are grown box by box.

    A row whose growth is zero keeps its b as written (when its constants have terminating
    decimals, as every constant read from a file has). A row with a coefficient that has no
    terminating decimal (1/3) is first scaled to integer coefficients (the same half-space),
    and a b without one is rounded up as a grown b is, so that `write_vnnlib` writes every
    row exactly and `read_vnnlib` reads the written file back equal to the result.

    Args:
        prop: The property, e.g. from `read_vnnlib`.
        margin: A `Margin` (from `float_margin` over the property's region), or its eps: a
            1-D sequence of finite non-negative numbers, one per output (Y_0 .. Y_(m-1)).

    Returns:
        A new Property (source: the original's).

    Raises:
        ValueError: The margin's number of outputs is not the property's; an eps is negative,
            NaN or infinite; a grown b is beyond the largest float64.
        TypeError: `prop` is not a Property, or `margin` neither a Margin nor a sequence.

    Example:
        >>> tight = ncet.tighten(prop, ncet.float_margin(ir, prop))
        >>> ncet.write_vnnlib(tight, "prop.tightened.vnnlib")
    """
    if not isinstance(prop, Property):
        raise TypeError(f"tighten takes a Property, not {type(prop).__name__}")
    eps = _eps_of(margin, prop.num_outputs)
    done: dict[Row, Row] = {}  # each distinct row grown once (boxes share their rows)

    def grown(row: Row) -> Row:
        out = done.get(row)
        if out is None:
            out = done[row] = _tightened_row(row, eps)
        return out

    cases = tuple(Case(case.box, tuple(Polytope(tuple(grown(r) for r in p.rows))
                                       for p in case.unsafe)) for case in prop.cases)
    return Property(prop.num_inputs, prop.num_outputs, cases, prop.source)
