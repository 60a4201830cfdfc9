"""write_vnnlib: a Property written as VNN-LIB 1.0 text that the competition's parsers read.

Constants the reader kept as numerals are written exactly as they were read. A Fraction is
written as its exact decimal when that terminates; otherwise it is rounded outward to
`DIGITS` significant digits, so that neither the region nor the unsafe set shrinks: a lower
bound down, an upper bound up, a row's right-hand side b up. A row with a coefficient whose
decimal does not terminate (1/3) is first multiplied by the least common denominator of its
coefficients (the same half-space, integer coefficients). The text then says, in a comment,
how many constants were rounded.

Layout: one box is written as top-level bounds `(assert (<= X_i u))` `(assert (>= X_i l))`;
several as `(assert (or (and ...) ...))`. A shared unsafe set of one polytope is written as
top-level rows, of several as `(assert (or (and ...) ...))`; unsafe sets that differ per box
as one `or` of `(and box rows)` per (box, polytope), as VNN-COMP's nn4sys files do.
"""

from __future__ import annotations

import math
import os

from ..escapes import name_text
from .property import Property, Row
from .rational import Value, decimal_text, directed_text, fraction, negate

DIGITS = 20
"""Significant digits of a constant whose decimal does not terminate."""


class _Numerals:
    """Constants as numerals, counting the ones rounded."""

    def __init__(self):
        self.rounded = 0

    def text(self, value: Value, up: bool) -> str:
        if isinstance(value, str):
            return value
        exact = decimal_text(value)
        if exact is not None:
            return exact
        self.rounded += 1
        return directed_text(value, up, DIGITS)


def _box_atoms(box, numerals: _Numerals) -> list[str]:
    out = []
    for i, (low, high) in enumerate(zip(box.lower, box.upper)):
        le = "<" if i in box.strict_upper else "<="
        ge = ">" if i in box.strict_lower else ">="
        out.append(f"({le} X_{i} {numerals.text(high, True)})")
        out.append(f"({ge} X_{i} {numerals.text(low, False)})")
    return out


def _row_atom(row: Row, numerals: _Numerals) -> str:
    terms, b, strict = row
    le = "<" if strict else "<="
    coefficients = [fraction(c) for _, c in terms]
    if any(decimal_text(c) is None for c in coefficients):
        scale = math.lcm(*(c.denominator for c in coefficients))
        terms = tuple((j, fraction(c) * scale) for j, c in terms)
        b = fraction(b) * scale
        coefficients = [c * scale for c in coefficients]
    if coefficients == [1]:
        return f"({le} Y_{terms[0][0]} {numerals.text(b, True)})"
    if coefficients == [-1]:
        ge = ">" if strict else ">="
        return f"({ge} Y_{terms[0][0]} {numerals.text(negate(b), False)})"
    if sorted(coefficients) == [-1, 1] and fraction(b) == 0:
        (i, ci), (j, _) = terms
        first, second = (i, j) if ci == 1 else (j, i)
        return f"({le} Y_{first} Y_{second})"
    if not terms:
        return f"({le} 0 {numerals.text(b, True)})"
    products = " ".join(f"(* {decimal_text(c)} Y_{j})" for (j, _), c in
                        zip(terms, coefficients))
    return f"({le} (+ {products}) {numerals.text(b, True)})"


def _conjunction(atoms: list[str]) -> str:
    return "(and " + " ".join(atoms) + ")"


def vnnlib_text(prop: Property) -> str:
    """The VNN-LIB 1.0 text of `prop` (module docstring)."""
    numerals = _Numerals()
    source = name_text(os.path.basename(prop.source))  # a newline in it must not end the comment
    lines = [f"; written by ncet.write_vnnlib from {source}", ""]
    lines += [f"(declare-const X_{i} Real)" for i in range(prop.num_inputs)]
    lines += [f"(declare-const Y_{j} Real)" for j in range(prop.num_outputs)]
    lines.append("")
    cases = prop.cases
    if not cases:
        lines.append("(assert (or))")
    elif prop.separable:
        if len(cases) == 1:
            lines += [f"(assert {atom})" for atom in _box_atoms(cases[0].box, numerals)]
        else:
            lines.append("(assert (or")
            lines += ["  " + _conjunction(_box_atoms(c.box, numerals)) for c in cases]
            lines.append("))")
        lines.append("")
        polytopes = cases[0].unsafe
        if len(polytopes) == 1:
            lines += [f"(assert {_row_atom(row, numerals)})" for row in polytopes[0].rows]
        else:
            lines.append("(assert (or")
            lines += ["  " + _conjunction([_row_atom(row, numerals) for row in p.rows])
                      for p in polytopes]
            lines.append("))")
    else:
        lines.append("(assert (or")
        for case in cases:
            box = _box_atoms(case.box, numerals)
            lines += ["  " + _conjunction(box + [_row_atom(row, numerals) for row in p.rows])
                      for p in case.unsafe]
        lines.append("))")
    if numerals.rounded:
        lines.insert(1, f"; {numerals.rounded} constants have no terminating decimal and are "
                        f"rounded outward to {DIGITS} significant digits (lower bounds down, "
                        "upper bounds and right-hand sides up)")
    return "\n".join(lines) + "\n"


def write_vnnlib(prop: Property, path: str | os.PathLike | None = None) -> str:
    """Write `prop` as VNN-LIB 1.0 (docs/properties.md).

    Args:
        prop: The property, e.g. from `read_vnnlib`.
        path: If given, the text is also written there (atomically).

    Returns:
        The text. Reading it back gives a Property equal to `prop` (the same exact
        constants) whenever every constant has a terminating decimal, which every constant
        read from a file has; other constants are rounded outward, and a comment says so.

    Raises:
        TypeError: `prop` is not a Property.
    """
    if not isinstance(prop, Property):
        raise TypeError(f"write_vnnlib takes a Property, not {type(prop).__name__}")
    text = vnnlib_text(prop)
    if path is not None:
        from ..format.atomic import atomic_writer

        with atomic_writer(path) as f:
            f.write(text.encode("utf-8"))
    return text

