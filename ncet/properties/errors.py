"""VNNLIBError: a VNN-LIB file NCET will not read, with a stable reason code, the line and
column of the offending token, and the token itself."""

from __future__ import annotations

from ..errors import NCETError

VNNLIB_REASONS = {
    "vnnlib-unbalanced": "a parenthesis is never closed, or closes nothing",
    "vnnlib-too-deep": "expressions nested deeper than MAX_DEPTH",
    "vnnlib-unexpected-token": "a token where the grammar has no place for it (a bare word at "
                               "the top level, a command that is not a list, ...)",
    "vnnlib-unknown-command": "a top-level command other than declare-const and assert "
                              "(check-sat, exit, set-logic, set-info and set-option are "
                              "read and ignored)",
    "vnnlib-bad-declaration": "a declare-const that is not (declare-const X_i Real) or "
                              "(declare-const Y_i Real), or declares a name twice",
    "vnnlib-index-gap": "the declared inputs (or outputs) are not X_0 .. X_(n-1) (Y_0 .. "
                        "Y_(m-1)) without a gap",
    "vnnlib-no-inputs": "the file declares no input variable (an empty or truncated file)",
    "vnnlib-undeclared": "a variable that no declare-const declares",
    "vnnlib-bad-number": "a constant that is not a decimal numeral (digits, an optional sign, "
                         "point and exponent), or too long or too large to hold",
    "vnnlib-unknown-operator": "an operator other than and, or, <=, >=, <, >, =, +, -, *",
    "vnnlib-arity": "an operator with the wrong number of arguments",
    "vnnlib-nonlinear": "a product of two terms that both contain variables",
    "vnnlib-mixed-constraint": "one constraint over both inputs (X) and outputs (Y)",
    "vnnlib-input-not-box": "a constraint over two or more inputs: the input region must be "
                            "a box (or a disjunction of boxes)",
    "vnnlib-unbounded-input": "an input without a lower or an upper bound in some disjunct",
    "vnnlib-too-many-disjuncts": "the disjunctive normal form has more than MAX_DISJUNCTS "
                                 "disjuncts or MAX_ATOMS constraints",
    "vnnlib-unsafe-per-box": "Property.unsafe asked of a property whose boxes have different "
                             "unsafe sets: read Property.cases",
    "vnnlib-2-unavailable": "a VNN-LIB 2.0 file, and the vnnlib package (its reader) is not "
                            "installed",
    "vnnlib-2-invalid": "the vnnlib package rejects the VNN-LIB 2.0 file",
    "vnnlib-2-unsupported": "a VNN-LIB 2.0 file outside what a Property holds (several "
                            "networks, inputs or outputs, hidden variables, !=)",
    "vnnlib-unreadable": "the path cannot be read, or its bytes are not UTF-8 text",
}
"""Every reason code a VNNLIBError can carry, with what it means."""


class PlacedError(NCETError, ValueError):
    """An error in a text NCET reads, placed at its line, column and token (the shared
    shape of `VNNLIBError` and `ncet.properties.witness.WitnessError`).

    Attributes:
        code: A stable reason code, one of the subclass's `reasons`.
        line: The 1-based line of the offending token (None when there is no token).
        column: Its 1-based column (characters, not bytes).
        token: The offending token as written ("" when none).
        source: The file's path, or "<text>".
    """

    reasons: dict[str, str] = {}

    def __init__(self, code: str, message: str, *, line: int | None = None,
                 column: int | None = None, token: str = "", source: str = "<text>"):
        assert code in self.reasons, f"unregistered reason code {code!r}"
        self.code, self.line, self.column = code, line, column
        self.token, self.source, self.reason = token, source, message
        where = source if line is None else f"{source}:{line}" if column is None else \
            f"{source}:{line}:{column}"
        shown = token if len(token) <= 60 else token[:57] + "..."
        at = f" at {shown!r}" if token else ""
        super().__init__(f"{where}: {message}{at} [{code}]")


class VNNLIBError(PlacedError):
    """A VNN-LIB property NCET will not read (or a Property question it cannot answer);
    `.code` is one of `VNNLIB_REASONS`, `.line`, `.column`, `.token`, `.source` as in
    `PlacedError`."""

    reasons = VNNLIB_REASONS
