"""How far an output lies inside a property's unsafe set, exactly or over an enclosure.

For an unsafe set that is a disjunction of polytopes {y : A y <= b}, the margin of y is
max over polytopes of min over rows of (b - a . y): >= 0 when y is inside (a strict row needs
its own b - a . y > 0, so a point on a strict row's boundary has margin 0 and is not inside).
`exact_margin` takes y as Fractions; `margin_bounds` takes a float64 enclosure (value, radius)
and returns the interval holding the margin of every y in it, computed in exact rationals.
"""

from __future__ import annotations

from fractions import Fraction

from .property import Case, Polytope
from .rational import fraction

ZERO = Fraction(0)


def cases_at(cases: tuple[Case, ...], boxes: list[int]) -> list[Polytope]:
    """The polytopes that count: those of every box holding X (a property is violated when
    the output is unsafe for some box that holds X), or of every box when X is in none (the
    output's margin against the whole unsafe condition)."""
    chosen = [cases[i] for i in boxes] if boxes else cases
    return [p for case in chosen for p in case.unsafe]


def _row_terms(terms) -> list[tuple[int, Fraction]]:
    return [(j, fraction(c)) for j, c in terms]


def exact_margin(polytopes: list[Polytope], y: list[Fraction]) -> tuple[Fraction, bool]:
    """(margin, inside) for the output y: inside is exact membership, strict rows strict."""
    best, inside = None, False
    for p in polytopes:
        worst, ok = None, True
        for terms, b, strict in p.rows:
            slack = fraction(b) - sum((c * y[j] for j, c in _row_terms(terms)), ZERO)
            worst = slack if worst is None else min(worst, slack)
            ok = ok and (slack > 0 if strict else slack >= 0)
        worst = ZERO if worst is None else worst  # a polytope of no rows: all of R^m
        best = worst if best is None else max(best, worst)
        inside = inside or ok
    return (best if best is not None else Fraction(-1)), inside


def margin_bounds(polytopes: list[Polytope], value, radius) -> tuple[Fraction, Fraction]:
    """[lo, hi] holding the margin of every y with |y - value| <= radius (elementwise)."""
    best_lo = best_hi = None
    for p in polytopes:
        lo = hi = None
        for terms, b, _ in p.rows:
            centre = fraction(b) - sum((c * Fraction(float(value[j]))
                                        for j, c in _row_terms(terms)), ZERO)
            width = sum((abs(c) * Fraction(float(radius[j])) for j, c in _row_terms(terms)),
                        ZERO)
            lo = centre - width if lo is None else min(lo, centre - width)
            hi = centre + width if hi is None else min(hi, centre + width)
        lo, hi = (ZERO, ZERO) if lo is None else (lo, hi)
        best_lo = lo if best_lo is None else max(best_lo, lo)
        best_hi = hi if best_hi is None else max(best_hi, hi)
    if best_lo is None:
        return Fraction(-1), Fraction(-1)
    return best_lo, best_hi
