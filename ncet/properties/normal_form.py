"""The normal form: the conjunction of a file's assertions as a disjunction of cases, each an
input box and the unsafe output set over it (a disjunction of polytopes A y <= b).

Every assertion is put in disjunctive normal form; the assertions' disjunctions are
multiplied out (top-level comparisons join every disjunct); each conjunction splits into its
input bounds (the box: the tightest bound of each input) and its output rows (a polytope);
conjunctions with the same box become one case whose unsafe set lists their polytopes in the
order of the file. This is the form the competition's scripts give (a list of (box,
[(mat, rhs), ...])), with the constants exact.
"""

from __future__ import annotations

import itertools

from .property import Box, Case, Polytope
from .rational import compare
from .terms import COMPARISONS, FALSE, TRUE, Constraints

MAX_DISJUNCTS = 100_000
"""The most conjunctions one assertion, or the product of all of them, may expand to."""
MAX_ATOMS = 20_000_000
"""The most constraints the expansion may hold in all, and the most bounds all its boxes may
hold together."""


class NormalForm:
    """Builds the cases of one text's assertions (`cases`)."""

    def __init__(self, constraints: Constraints, num_inputs: int,
                 unbounded):
        self.constraints, self.sx = constraints, constraints.sx
        self.tokens = self.sx.tokens
        self.num_inputs = num_inputs
        self.unbounded = unbounded  # (input index, disjunct number, lower?) -> VNNLIBError

    def dnf(self, form) -> list[list[tuple]]:
        """Formula `form` as a list of conjunctions of atoms (TRUE dropped, a conjunction
        holding FALSE dropped)."""
        if type(form) is not list and type(form) is not int:  # a comparison of two words
            atom = self.constraints.simple(*self.sx.words(form))
            if atom is not None:
                return [[atom]]
            form = self.sx.reparse(form)  # the general path
        if isinstance(form, int):
            word = self.tokens[form]
            if word in ("true", "false"):
                return [[]] if word == "true" else []
            raise self.sx.error("vnnlib-unexpected-token", "a formula must be a comparison, "
                                "and, or, true or false", form)
        if len(form) < 2 or not isinstance(form[1], int):
            raise self.sx.error("vnnlib-unexpected-token", "a formula must start with an "
                                "operator", form)
        op = self.tokens[form[1]]
        if op in COMPARISONS:
            atoms = self.constraints.atoms(form)
            if FALSE in atoms:
                return []
            return [[a for a in atoms if a is not TRUE]]
        if op == "or":
            result = []
            for child in form[2:]:
                result += self.dnf(child)
                self._check(len(result), form)
            return result
        if op != "and":
            raise self.sx.error("vnnlib-unknown-operator", f"{op!r} is not a formula operator "
                                "(and, or, <=, >=, <, >, =)", form)
        result = [[]]
        for child in form[2:]:
            part = self.dnf(child)
            if len(part) == 1:
                for conjunction in result:
                    conjunction += part[0]
            else:
                self._check(len(result) * len(part), form)
                result = [c + p for c in result for p in part]
            self._check(len(result), form, sum(map(len, result)))
        return result

    def _check(self, disjuncts: int, form, atoms: int = 0) -> None:
        if disjuncts > MAX_DISJUNCTS or atoms > MAX_ATOMS:
            raise self.sx.error("vnnlib-too-many-disjuncts", f"more than {MAX_DISJUNCTS:,} "
                                f"disjuncts or {MAX_ATOMS:,} constraints in normal form",
                                form)

    def cases(self, assertions: list) -> tuple[Case, ...]:
        """The cases of the conjunction of `assertions`: the asserts' formulas in file order,
        each a form, a `COMPARISON` leaf, or the `SIMPLE` match of an `(assert (OP A B))`."""
        common: list[tuple] = []
        groups: list[list[list[tuple]]] = []
        simple, comparison, words = self.constraints.simple, COMPARISONS, self.sx.words
        product, boxes, after = 1, 1, []
        for formula in assertions:
            if type(formula) is not list and type(formula) is not int:  # a match
                atom = simple(*words(formula))
                if atom is not None:
                    common.append(atom)
                    continue
                formula = self.sx.reparse(formula)  # the general path
            if isinstance(formula, list) and len(formula) > 1 and isinstance(formula[1], int) \
                    and self.tokens[formula[1]] in comparison:
                common += self.constraints.atoms(formula)
                continue
            part = self.dnf(formula)
            if len(part) == 1:
                common += part[0]
            else:
                product *= len(part)
                if any(a[0] == "X" for conjunction in part for a in conjunction):
                    boxes *= len(part)  # each of these disjuncts is a box of its own
                self._check(product, formula, boxes * self.num_inputs)
                groups.append(part)
                after.append(len(common))  # the group's rows follow these atoms'
        if FALSE in common:
            return ()
        base = _Bounds(self.num_inputs)
        base.apply(a for a in common if a[0] == "X")
        # each polytope lists its rows in the order of the file (as the competition's
        # scripts do): the common rows before group k, group k's, ...
        segments, start = [], 0
        for end in [*after, len(common)]:
            segments.append(tuple((a[1], a[2], a[3]) for a in common[start:end] if a[0] == "Y"))
            start = end
        by_box: dict[tuple, tuple[Box, list[Polytope]]] = {}
        base_box = None
        for number, choice in enumerate(itertools.product(*groups)):
            atoms = [a for conjunction in choice for a in conjunction]
            if FALSE in atoms:
                continue
            inputs = [a for a in atoms if a[0] == "X"]
            if inputs:
                bounds = base.copy()
                bounds.apply(inputs)
                box = bounds.box(number, self.unbounded)
            else:
                base_box = base_box or base.box(number, self.unbounded)
                box = base_box
            rows = segments[0]
            for conjunction, segment in zip(choice, segments[1:]):
                rows += tuple((a[1], a[2], a[3]) for a in conjunction if a[0] == "Y") + segment
            key = box.key()
            if key not in by_box:
                by_box[key] = (box, [])
            by_box[key][1].append(Polytope(rows))
        return tuple(Case(box, tuple(polytopes)) for box, polytopes in by_box.values())


class _Bounds:
    """The tightest bounds of each input under the atoms applied so far."""

    def __init__(self, n: int):
        self.lower: list = [None] * n
        self.upper: list = [None] * n
        self.strict_lower: set[int] = set()
        self.strict_upper: set[int] = set()

    def copy(self) -> _Bounds:
        other = _Bounds(0)
        other.lower, other.upper = list(self.lower), list(self.upper)
        other.strict_lower, other.strict_upper = set(self.strict_lower), set(self.strict_upper)
        return other

    def apply(self, atoms) -> None:
        lower, upper = self.lower, self.upper
        for _, i, is_upper, value, strict in atoms:
            values, stricts, tighter = (upper, self.strict_upper, -1) if is_upper else \
                (lower, self.strict_lower, 1)
            old = values[i]
            if old is None:
                values[i] = value
                if strict:
                    stricts.add(i)
                continue
            order = compare(value, old)
            if order == tighter:
                values[i] = value
                stricts.discard(i)
                if strict:
                    stricts.add(i)
            elif order == 0 and strict:
                stricts.add(i)

    def box(self, disjunct: int, unbounded) -> Box:
        for values, is_lower in ((self.lower, True), (self.upper, False)):
            if None in values:
                raise unbounded(values.index(None), disjunct, is_lower)
        return Box(tuple(self.lower), tuple(self.upper), frozenset(self.strict_lower),
                   frozenset(self.strict_upper))
