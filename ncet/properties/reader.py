"""read_vnnlib: a VNN-LIB file (1.0, as VNN-COMP writes it; 2.0 through `v2.py`) read into a
Property.

VNN-LIB 1.0 here is: `(declare-const X_i Real)` / `(declare-const Y_j Real)` for the inputs
and outputs (each index once, none missing), `(assert F)` with F built of `and`, `or`, and
the comparisons `<=`, `>=`, `<`, `>`, `=` of linear terms (variables, decimal numerals, `+`,
`-`, `*` by a constant), `;` comments; `check-sat`, `exit`, `set-logic`, `set-info` and
`set-option` are read and ignored. Inputs must be bounded by boxes; a comparison mixing
inputs and outputs is refused.
"""

from __future__ import annotations

import gc
import gzip
import os
import re
from pathlib import Path

from .errors import VNNLIBError
from .normal_form import NormalForm
from .property import Property
from .sexpr import SExpressions
from .terms import Constraints

NAME = re.compile(r"([XY])_(0|[1-9][0-9]*)")
IGNORED = ("check-sat", "exit", "set-logic", "set-info", "set-option")
VERSION_2 = ("vnnlib-version", "declare-network")


def text_and_source(path_or_text) -> tuple[str, str]:
    """The text to read and what to call it in messages: a path (str or os.PathLike, a
    .gz file decompressed), the text itself (a str holding a parenthesis), or bytes."""
    if isinstance(path_or_text, (bytes, bytearray)):
        return _decoded(bytes(path_or_text), "<bytes>"), "<bytes>"
    if isinstance(path_or_text, str) and "(" in path_or_text and not (
            len(path_or_text) < 4096 and "\n" not in path_or_text
            and os.path.isfile(path_or_text)):  # "run (1)/prop.vnnlib" is a path
        return path_or_text, "<text>"
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise TypeError("read_vnnlib takes a path, the text of a property or its bytes, not "
                        f"{type(path_or_text).__name__}")
    path = Path(path_or_text)
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError) as error:
        raise VNNLIBError("vnnlib-unreadable", f"cannot read the file: {error}",
                          source=str(path)) from None
    return _decoded(data, str(path)), str(path)


def _decoded(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise VNNLIBError("vnnlib-unreadable", f"not UTF-8 text ({error.reason} at byte "
                          f"{error.start})", source=source) from None


def read_vnnlib(path_or_text) -> Property:
    """The property in a VNN-LIB file (docs/properties.md).

    Args:
        path_or_text: A path (str or os.PathLike; `.gz` is decompressed), the text itself
            (a str with a parenthesis in it), or the file's bytes.

    Returns:
        A Property: `.input_boxes`, `.unsafe`, `.num_inputs`, `.num_outputs`, `.cases`,
        with every constant exactly as written.

    Raises:
        VNNLIBError: (a ValueError) the file is malformed or outside VNN-LIB as read here:
            `.code` (one of `VNNLIB_REASONS`), `.line`, `.column`, `.token`.
        TypeError: `path_or_text` is none of these.
    """
    text, source = text_and_source(path_or_text)
    enabled = gc.isenabled()
    gc.disable()  # the parse makes many small lists and no cycles: no collector passes
    try:
        return _read(text, source)
    finally:
        if enabled:
            gc.enable()


def _read(text: str, source: str) -> Property:
    sx = SExpressions(text, source)
    variables: dict[str, tuple[str, int]] = {}
    declared: dict[str, dict[int, int]] = {"X": {}, "Y": {}}  # index -> offset of the name
    assertions: list = []  # in file order: a SIMPLE match, or an assert's formula (a form)
    for form in sx.scan():
        if type(form) is not list:
            if form.group(1) is None:
                assertions.append(form)  # (assert (OP A B)): read once all are declared
                continue
            if _declared_simply(form, variables, declared):
                continue
            form = sx.form_at(form.start())[0]  # the general path says what is wrong
        head = sx.tokens[form[1]] if len(form) > 1 and isinstance(form[1], int) else ""
        if head in VERSION_2:
            from .v2 import read_version_2

            return read_version_2(text, source)
        if head == "declare-const":
            _declare(sx, form, variables, declared)
        elif head == "assert":
            if len(form) != 3:
                raise sx.error("vnnlib-arity", "assert takes one formula, here "
                               f"{len(form) - 2}", form)
            assertions.append(form[2])
        elif head not in IGNORED:
            raise sx.error("vnnlib-unknown-command" if head else "vnnlib-unexpected-token",
                           f"{head!r} is not a VNN-LIB 1.0 command (declare-const, assert)"
                           if head else "a command must start with its name", form)
    counts = {side: _count(sx, declared[side], side) for side in "XY"}
    if not counts["X"]:  # an empty or truncated file: no region to speak of
        raise sx.error_at("vnnlib-no-inputs", "the file declares no input: a property "
                          "declares X_0 .. X_(n-1) and bounds each", 0)

    def unbounded(i: int, disjunct: int, lower: bool) -> VNNLIBError:
        where = f" in disjunct {disjunct + 1} of the input region" if disjunct else ""
        return sx.error_at("vnnlib-unbounded-input", f"input X_{i} has no "
                           f"{'lower' if lower else 'upper'} bound{where}", declared["X"][i])

    cases = NormalForm(Constraints(sx, variables), counts["X"], unbounded).cases(assertions)
    return Property(counts["X"], counts["Y"], cases, source)


def _declared_simply(match, variables: dict, declared: dict) -> bool:
    """Record `(declare-const NAME Real)` from its SIMPLE match; False when it is not one
    (a bad name or sort, or a name declared twice: `_declare` then says which)."""
    name = match.group(1)
    found = NAME.fullmatch(name)
    if found is None or match.group(2) != "Real" or name in variables:
        return False
    side, index = found.group(1), int(found.group(2))
    variables[name] = (side, index)
    declared[side][index] = match.start(1)
    return True


def _declare(sx: SExpressions, form: list, variables: dict, declared: dict) -> None:
    """Record a declaration read as a form, or say what is wrong with it."""
    if len(form) != 4 or type(form[2]) is not int or type(form[3]) is not int:
        raise sx.error("vnnlib-bad-declaration", "a declaration is (declare-const X_i "
                       "Real) or (declare-const Y_i Real)", form)
    name, sort = sx.tokens[form[2]], sx.tokens[form[3]]
    match = NAME.fullmatch(name)
    if match is None:
        raise sx.error("vnnlib-bad-declaration", "VNN-LIB 1.0 names the inputs X_0, X_1, "
                       "... and the outputs Y_0, Y_1, ...", form[2])
    if sort != "Real":
        raise sx.error("vnnlib-bad-declaration", f"{name} is declared {sort}, not Real",
                       form[3])
    if name in variables:
        raise sx.error("vnnlib-bad-declaration", f"{name} is declared twice", form[2])
    side, index = match.group(1), int(match.group(2))
    variables[name] = (side, index)
    declared[side][index] = sx.offsets[form[2]]


def _count(sx: SExpressions, indices: dict[int, int], side: str) -> int:
    """The number of `side` variables, checking they are 0 .. n-1."""
    n = len(indices)
    if n and max(indices) != n - 1:
        missing = next(i for i in range(n) if i not in indices)
        beyond = min(i for i in indices if i > missing)
        raise sx.error_at("vnnlib-index-gap", f"{side}_{missing} is not declared but "
                          f"{side}_{beyond} is: {side} must be {side}_0 .. {side}_(n-1)",
                          indices[beyond])
    return n
