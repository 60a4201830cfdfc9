"""Property: a VNN-LIB property in normal form, its constants exact, its float views on demand.

A property is violated by an input x when, for some case, x lies in the case's box and the
network's output y lies in the case's unsafe set: some polytope of it, all of whose rows
a . y <= b hold (a . y < b for a strict row). Boxes hold each input's bounds, closed unless
the input's index is in `strict_lower` / `strict_upper`.

Constants are exact: the numeral as the file wrote it (str) or a Fraction (`rational.py`).
The fixed views: `input_boxes` and `unsafe` as numpy object arrays of Fraction, converted once
when first asked for; `input_boxes_as` and `unsafe_as` as float64 / float32 arrays rounded
outward by default (a lower bound down, an upper bound and a right-hand side b up: the region
and the unsafe set never shrink), inward, or to nearest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

import numpy as np

from .errors import VNNLIBError
from .rational import ZERO, Value, exact, fraction, fractions_of, rounded

Row = tuple[tuple[tuple[int, Value], ...], Value, bool]
"""One output constraint: ((j, c), ...) by increasing j, b, strict: sum(c * Y_j) <= b."""


def _fractions(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = fractions_of(values)
    return out


@dataclass(frozen=True, eq=False)
class Box:
    """One box of the input region: lower[i] <= X_i <= upper[i] (strict where listed)."""

    lower: tuple[Value, ...]
    upper: tuple[Value, ...]
    strict_lower: frozenset[int] = frozenset()
    strict_upper: frozenset[int] = frozenset()

    def key(self) -> tuple:
        """What makes two boxes the same one when read (the constants as written)."""
        return self.lower, self.upper, self.strict_lower, self.strict_upper

    @cached_property
    def exact(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) as object arrays of Fraction."""
        return _fractions(self.lower), _fractions(self.upper)

    def as_floats(self, dtype=np.float64, rounding: str = "outward"):
        """(lower, upper) as float arrays; see `Property.input_boxes_as`."""
        return (rounded(self.lower, dtype, rounding, up=False),
                rounded(self.upper, dtype, rounding, up=True))

    def contains(self, x) -> bool:
        """Is the point x (one number per input: floats by their exact binary value,
        Fractions, ints, numerals) inside this box, exactly (strict bounds strict)?"""
        x = _exact_point(x, len(self.lower))
        lower, upper = self.exact
        for i, (lo, v, hi) in enumerate(zip(lower, x, upper)):
            if v < lo or v > hi or (v == lo and i in self.strict_lower) or \
                    (v == hi and i in self.strict_upper):
                return False
        return True


@dataclass(frozen=True, eq=False)
class Polytope:
    """One disjunct of an unsafe set: every row sum(c * Y_j) <= b holds (< when strict)."""

    rows: tuple[Row, ...]

    @property
    def strict(self) -> tuple[bool, ...]:
        """Per row: is it strict (<)?"""
        return tuple(row[2] for row in self.rows)

    def exact(self, num_outputs: int) -> tuple[np.ndarray, np.ndarray]:
        """(A, b) as object arrays of Fraction, A of shape (rows, num_outputs)."""
        a = np.full((len(self.rows), num_outputs), ZERO, dtype=object)
        for r, (terms, _, _) in enumerate(self.rows):
            for j, c in terms:
                a[r, j] = fraction(c)
        return a, _fractions([row[1] for row in self.rows])

    def as_floats(self, num_outputs: int, dtype=np.float64, rounding: str = "outward"):
        """(A, b) as float arrays; see `Property.unsafe_as`."""
        a = np.zeros((len(self.rows), num_outputs), dtype=dtype)
        for r, (terms, _, _) in enumerate(self.rows):
            for j, c in terms:
                value = dtype(fraction(c))
                if Fraction(float(value)) != fraction(c):
                    raise ValueError(f"the coefficient {c} of Y_{j} has no exact "
                                     f"{np.dtype(dtype).name} form, so no float view of this "
                                     "row is outward; use the exact view")
                a[r, j] = value
        b = rounded([row[1] for row in self.rows], dtype, rounding, up=True)
        return a, b

    def contains(self, y) -> bool:
        """Does the point y (one number per output, as `Box.contains` takes them) satisfy
        every row exactly (a strict row strictly)?"""
        for terms, b, strict in self.rows:
            total = sum((fraction(c) * _exact_number(y[j]) for j, c in terms), ZERO)
            if total > fraction(b) or (strict and total == fraction(b)):
                return False
        return True

    def same(self, other: Polytope) -> bool:
        """The same rows, exactly, in the same order."""
        return len(self.rows) == len(other.rows) and all(
            _row_key(x) == _row_key(y) for x, y in zip(self.rows, other.rows))


def _exact_number(v) -> Fraction:
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            raise ValueError(f"{v!r} is not a finite number")
        return Fraction(float(v))
    return fraction(exact(v))


def _exact_point(x, n: int) -> list[Fraction]:
    x = np.asarray(x, dtype=object).reshape(-1) if not isinstance(x, (list, tuple)) else x
    if len(x) != n:
        raise ValueError(f"a point of {len(x)} elements, where the property has {n}")
    return [_exact_number(v) for v in x]


def _row_key(row: Row) -> tuple:
    terms, b, strict = row
    return tuple((j, fraction(c)) for j, c in terms if fraction(c) != 0), fraction(b), strict


@dataclass(frozen=True, eq=False)
class Case:
    """One input box and the unsafe set over it (a disjunction of polytopes)."""

    box: Box
    unsafe: tuple[Polytope, ...]


@dataclass(frozen=True, eq=False)
class Property:
    """A verification property: inputs X_0 .. X_(n-1), outputs Y_0 .. Y_(m-1), and the cases
    whose disjunction is the unsafe condition (module docstring).

    Attributes:
        num_inputs: n, the number of input elements (the network's input, flattened
            row-major, as VNN-COMP numbers them).
        num_outputs: m, likewise for the output.
        cases: The normal form: every (box, unsafe set) pair, boxes distinct.
        source: The file read, or "<text>".
    """

    num_inputs: int
    num_outputs: int
    cases: tuple[Case, ...]
    source: str = field(default="<text>", compare=False)

    @cached_property
    def separable(self) -> bool:
        """Do all boxes share one unsafe set (region and unsafe set independent)? True for
        129 of the 130 corpus files; nn4sys's lindex_200 gives each box its own."""
        first = self.cases[0].unsafe if self.cases else ()
        return all(len(c.unsafe) == len(first) and all(p.same(q) for p, q in
                                                       zip(c.unsafe, first))
                   for c in self.cases[1:])

    @cached_property
    def input_boxes(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The input region: one (lower, upper) pair per box, each an object array of
        Fraction with one entry per input element."""
        return [case.box.exact for case in self.cases]

    @cached_property
    def unsafe(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The unsafe output set: one (A, b) pair per disjunct, meaning A y <= b (object
        arrays of Fraction, A of shape (rows, num_outputs)); a strict row is flagged in
        `cases[k].unsafe[d].strict`.

        Raises:
            VNNLIBError: `vnnlib-unsafe-per-box`, when the boxes have different unsafe sets
                (read `cases` then).
        """
        if not self.separable:
            raise VNNLIBError("vnnlib-unsafe-per-box", "the boxes of this property have "
                              "different unsafe sets; read .cases, one (box, unsafe) pair per "
                              "box", source=self.source)
        if not self.cases:
            return []
        return [p.exact(self.num_outputs) for p in self.cases[0].unsafe]

    @property
    def strict(self) -> bool:
        """Is any inequality strict (< or >)? Float views treat it as <= (its closure: the
        region and the unsafe set only grow)."""
        return any(c.box.strict_lower or c.box.strict_upper or
                   any(any(p.strict) for p in c.unsafe) for c in self.cases)

    def violated_by(self, x, y) -> bool:
        """Is (x, y) a violation, in exact arithmetic: x inside some case's box and y inside
        a polytope of that case's unsafe set (strict rows and bounds strict)? x and y hold
        one number per input / output (flattened row-major; floats count by their exact
        binary value), no tolerance.

        Raises:
            ValueError: x or y of the wrong length, or a NaN or infinity in them.
        """
        y = _exact_point(y, self.num_outputs)
        return any(case.box.contains(x) and any(p.contains(y) for p in case.unsafe)
                   for case in self.cases)

    def input_boxes_as(self, dtype=np.float64, rounding: str = "outward"):
        """The input region as float arrays: one (lower, upper) pair per box.

        rounding: "outward" (default: lower bounds rounded down, upper bounds up, to the
        nearest float of `dtype` that way, so the float box contains the exact one),
        "inward" (lower up, upper down: the floats of `dtype` inside the exact box), or
        "nearest" (each bound to its nearest float, ties to even; float64 "nearest" is
        Python's float() of the numeral, what the competition's parser reads).
        """
        return [case.box.as_floats(dtype, rounding) for case in self.cases]

    def unsafe_as(self, dtype=np.float64, rounding: str = "outward"):
        """The unsafe set as float arrays: one (A, b) pair per disjunct. b is rounded up
        ("outward": the unsafe set grows), down ("inward") or to nearest; every coefficient
        of A must be exact in `dtype` (they are +-1 in the whole corpus), else ValueError.
        Raises VNNLIBError as `unsafe` does."""
        self.unsafe  # noqa: B018 - the separability check
        if not self.cases:
            return []
        return [p.as_floats(self.num_outputs, np.dtype(dtype).type, rounding)
                for p in self.cases[0].unsafe]

    def reachability(self, dtype=np.float64, rounding: str = "nearest"):
        """The competition scripts' form: a list of (box, [(A, b), ...]) with box a list of
        [lower, upper] pairs, as floats (float64 nearest by default, what their parser
        reads)."""
        out = []
        for case in self.cases:
            lower, upper = case.box.as_floats(dtype, rounding)
            box = [[float(a), float(b)] for a, b in zip(lower, upper)]
            out.append((box, [p.as_floats(self.num_outputs, np.dtype(dtype).type, rounding)
                              for p in case.unsafe]))
        return out

    def __eq__(self, other) -> bool:
        """The same normal form with the same exact constants (written alike or not)."""
        if not isinstance(other, Property):
            return NotImplemented
        if (self.num_inputs, self.num_outputs, len(self.cases)) != \
                (other.num_inputs, other.num_outputs, len(other.cases)):
            return False
        for mine, theirs in zip(self.cases, other.cases):
            a, b = mine.box, theirs.box
            if (a.strict_lower, a.strict_upper) != (b.strict_lower, b.strict_upper):
                return False
            if a.key() != b.key() and not all(
                    (x == y).all() for x, y in zip(a.exact, b.exact)):
                return False
            if len(mine.unsafe) != len(theirs.unsafe) or not all(
                    p.same(q) for p, q in zip(mine.unsafe, theirs.unsafe)):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        boxes = len(self.cases)
        disjuncts = sum(len(c.unsafe) for c in self.cases)
        rows = sum(len(p.rows) for c in self.cases for p in c.unsafe)
        flags = ", strict" if self.strict else ""
        shape = "" if self.separable else ", per-box unsafe sets"
        return (f"Property({self.num_inputs} inputs, {self.num_outputs} outputs, {boxes} "
                f"box{'es' * (boxes != 1)}, {disjuncts} unsafe disjunct"
                f"{'s' * (disjuncts != 1)} of {rows} row{'s' * (rows != 1)}{shape}{flags}, "
                f"source={self.source!r})")

    @classmethod
    def from_cases(cls, cases, num_outputs: int, source: str = "<built>") -> Property:
        """A property from the competition's form: `cases` a list of ((lower, upper),
        [(A, b), ...]), one per box, each constant a numeral string, Fraction, int or float
        (a float's exact binary value), A of shape (rows, num_outputs). Rows are taken as
        non-strict."""
        built, num_inputs = [], None
        for (lower, upper), polytopes in cases:
            lower, upper = tuple(map(exact, lower)), tuple(map(exact, upper))
            if len(lower) != len(upper) or (num_inputs is not None and len(lower) !=
                                            num_inputs):
                raise ValueError("every box needs one lower and one upper bound per input")
            num_inputs = len(lower)
            unsafe = []
            for a, b in polytopes:
                a = np.asarray(a, dtype=object).reshape(len(b), num_outputs)
                rows = []
                for r in range(len(b)):
                    terms = tuple((j, exact(a[r, j])) for j in range(num_outputs)
                                  if fraction(exact(a[r, j])) != 0)
                    rows.append((terms, exact(b[r]), False))
                unsafe.append(Polytope(tuple(rows)))
            built.append(Case(Box(lower, upper), tuple(unsafe)))
        return cls(num_inputs or 0, num_outputs, tuple(built), source)

    @classmethod
    def from_region(cls, input_boxes, unsafe, num_outputs: int,
                    source: str = "<built>") -> Property:
        """A property whose boxes (a list of (lower, upper)) share one unsafe set (a list of
        (A, b)); constants as in `from_cases`."""
        return cls.from_cases([(box, unsafe) for box in input_boxes], num_outputs, source)
