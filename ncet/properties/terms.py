"""Constraints: one VNN-LIB comparison read into the atoms the normal form is made of.

An atom is a tuple:
  * ("X", i, is_upper, value, strict): a bound on input X_i (value an exact constant);
  * ("Y", terms, rhs, strict): the output constraint sum(c * Y_j) <= rhs (< when strict),
    terms a tuple of (j, c) by increasing j, no c zero;
  * TRUE or FALSE: a comparison of constants, decided when read.
`(<= X_0 0.5)` and `(>= Y_1 Y_0)` take a fast path that keeps the numeral as written; any
other comparison of linear terms (+, -, * by a constant) is summed exactly in Fractions.
"""

from __future__ import annotations

from fractions import Fraction

from .rational import ONE, ZERO, fraction, negate, numeral_problem
from .sexpr import SExpressions

TRUE = ("T",)
FALSE = ("F",)

COMPARISONS = {"<=": (False, False), ">=": (True, False), "<": (False, True),
               ">": (True, True), "=": None}
"""Comparison operator -> (flipped: it says lhs >= rhs, strict)."""

ARITHMETIC = ("+", "-", "*")

Linear = tuple[dict, Fraction]
"""A linear term: {("X" or "Y", index): coefficient}, constant."""


class Constraints:
    """Reads comparisons of one text into atoms, given its declared variables."""

    def __init__(self, sx: SExpressions, variables: dict[str, tuple[str, int]]):
        self.sx, self.tokens, self.variables = sx, sx.tokens, variables

    def atoms(self, form: list) -> list[tuple]:
        """The atoms of comparison `form` (one; two for "=")."""
        op = self.tokens[form[1]]
        if len(form) != 4:
            raise self.sx.error("vnnlib-arity", f"{op} compares exactly two terms, here "
                                f"{len(form) - 2}: {self.sx.text_of(form)}", form)
        if op == "=":
            return [self._atom(form, False, False), self._atom(form, True, False)]
        flipped, strict = COMPARISONS[op]
        return [self._atom(form, flipped, strict)]

    def _atom(self, form: list, flipped: bool, strict: bool) -> tuple:
        left, right = (form[3], form[2]) if flipped else (form[2], form[3])
        # left <= right (< when strict)
        if isinstance(left, int) and isinstance(right, int):
            fast = self._words(self.tokens[left], self.tokens[right], strict)
            if fast is not None:
                return fast
        lcoeffs, lconst = self.linear(left)
        rcoeffs, rconst = self.linear(right)
        coeffs = dict(lcoeffs)
        for key, c in rcoeffs.items():
            coeffs[key] = coeffs.get(key, ZERO) - c
        coeffs = {k: c for k, c in coeffs.items() if c != 0}
        return self._classify(form, coeffs, rconst - lconst, strict)

    def simple(self, op: str, a: str, b: str) -> tuple | None:
        """The atom of `(op a b)` for op one of <=, >=, <, > and a, b words, numerals kept as
        written; None when that takes the general path (which then also finds any error)."""
        flipped, strict = COMPARISONS[op]
        return self._words(b, a, strict) if flipped else self._words(a, b, strict)

    def _words(self, a: str, b: str, strict: bool) -> tuple | None:
        """`a <= b` for `(<= var number)`, `(<= number var)` or `(<= Y_i Y_j)` (None
        otherwise)."""
        va, vb = self.variables.get(a), self.variables.get(b)
        if va is not None and vb is None:
            if numeral_problem(b):
                return None
            if va[0] == "X":
                return ("X", va[1], True, b, strict)
            return ("Y", ((va[1], ONE),), b, strict)
        if vb is not None and va is None:
            if numeral_problem(a):
                return None
            if vb[0] == "X":
                return ("X", vb[1], False, a, strict)
            return ("Y", ((vb[1], -ONE),), negate(a), strict)
        if va is not None and vb is not None and va[0] == vb[0] == "Y" and va != vb:
            terms = ((va[1], ONE), (vb[1], -ONE))
            return ("Y", terms if va[1] < vb[1] else terms[::-1], ZERO, strict)
        return None

    def _classify(self, form, coeffs: dict, rhs: Fraction, strict: bool) -> tuple:
        """The atom sum(coeffs) <= rhs (< when strict)."""
        if not coeffs:
            return TRUE if (ZERO < rhs if strict else ZERO <= rhs) else FALSE
        sides = {key[0] for key in coeffs}
        if len(sides) == 2:
            raise self.sx.error("vnnlib-mixed-constraint", "a constraint over both inputs "
                                f"and outputs: {self.sx.text_of(form)}", form)
        if "X" in sides:
            if len(coeffs) > 1:
                raise self.sx.error("vnnlib-input-not-box", "a constraint over several "
                                    f"inputs: {self.sx.text_of(form)}", form)
            ((_, i), c), = coeffs.items()
            return ("X", i, c > 0, rhs / c, strict)
        terms = tuple(sorted((key[1], c) for key, c in coeffs.items()))
        return ("Y", terms, rhs, strict)

    def linear(self, node) -> Linear:
        """The linear term `node` denotes."""
        if type(node) is not list and type(node) is not int:  # a comparison where a term
            node = self.sx.reparse(node)                       # belongs: its operator is wrong
        if isinstance(node, int):
            token = self.tokens[node]
            variable = self.variables.get(token)
            if variable is not None:
                return {variable: ONE}, ZERO
            return {}, fraction(self.constant(node))
        if len(node) < 2 or not isinstance(node[1], int):
            raise self.sx.error("vnnlib-unexpected-token", "a term must start with an "
                                "operator", node)
        op = self.tokens[node[1]]
        if op not in ARITHMETIC:
            raise self.sx.error("vnnlib-unknown-operator", f"{op!r} is not a term operator "
                                "(+, -, * by a constant)", node)
        args = [self.linear(child) for child in node[2:]]
        if not args:
            raise self.sx.error("vnnlib-arity", f"{op} without arguments", node)
        if op == "-" and len(args) == 1:
            return {k: -c for k, c in args[0][0].items()}, -args[0][1]
        if op in "+-":
            coeffs, const = dict(args[0][0]), args[0][1]
            sign = 1 if op == "+" else -1
            for more, c0 in args[1:]:
                const += sign * c0
                for k, c in more.items():
                    coeffs[k] = coeffs.get(k, ZERO) + sign * c
            return coeffs, const
        coeffs, const = {}, ONE  # "*": at most one factor with variables
        for more, c0 in args:
            if more and coeffs:
                raise self.sx.error("vnnlib-nonlinear", "a product of two terms with "
                                    f"variables: {self.sx.text_of(node)}", node)
            if more:
                coeffs = {k: c * const for k, c in more.items()}
                const *= c0
            else:
                coeffs = {k: c * c0 for k, c in coeffs.items()}
                const *= c0
        return coeffs, const

    def constant(self, index: int) -> str:
        """The numeral at token `index`, validated."""
        token = self.tokens[index]
        problem = numeral_problem(token)
        if not problem:
            return token
        if token[0] in "+-.0123456789" or token.lower() in ("inf", "-inf", "nan", "infinity"):
            raise self.sx.error("vnnlib-bad-number", f"{token!r} is {problem}", index)
        raise self.sx.error("vnnlib-undeclared", f"{token!r} is neither a declared "
                            "variable nor a number", index)
