"""VNN-LIB 2.0, read with the standard's own parser (the `vnnlib` package on PyPI) and carried
into the same Property as 1.0.

The package parses and type-checks the file; its syntax tree is then written as VNN-LIB 1.0
text (each element of the one input X and the one output Y numbered row-major, as VNN-COMP
flattens them, every numeral by its lexeme, so exactly as written) and read by `reader.py`.
What a Property cannot hold is refused: several networks, inputs or outputs, hidden
variables, `!=`. An error the 1.0 reading finds names the 2.0 file's line.
"""

from __future__ import annotations

import json
import math
import re

from .errors import VNNLIBError

_COMPARISONS = {"LessEqual": "<=", "GreaterEqual": ">=", "LessThan": "<",
                "GreaterThan": ">", "Equal": "="}
_ARITHMETIC = {"Plus": "+", "Minus": "-", "Multiply": "*", "Negate": "-"}


def read_version_2(text: str, source: str):
    """The Property of a VNN-LIB 2.0 text (module docstring)."""
    try:
        import vnnlib as standard
    except ImportError:
        raise VNNLIBError("vnnlib-2-unavailable", "this is a VNN-LIB 2.0 file; reading it "
                          "needs the vnnlib package (pip install vnnlib)",
                          source=source) from None
    try:
        query = standard.parse_query_string(text)
    except standard.VNNLibException as error:
        raise _invalid(str(error), source) from None
    if len(query.networks) != 1:
        raise VNNLIBError("vnnlib-2-unsupported", f"{len(query.networks)} networks; a "
                          "Property is of one", source=source)
    network = query.networks[0]
    if len(network.inputs) != 1 or len(network.outputs) != 1 or network.hidden:
        raise VNNLIBError("vnnlib-2-unsupported", "a Property is of one input and one output "
                          f"and no hidden variables; {network.name} declares "
                          f"{len(network.inputs)} inputs, {len(network.outputs)} outputs and "
                          f"{len(network.hidden)} hidden", source=source)
    shapes = {network.inputs[0].name: ("X", list(network.inputs[0].shape)),
              network.outputs[0].name: ("Y", list(network.outputs[0].shape))}
    sizes = {side: math.prod(shape) for side, shape in shapes.values()}
    lines = [f"(declare-const X_{i} Real)" for i in range(sizes["X"])]
    lines += [f"(declare-const Y_{j} Real)" for j in range(sizes["Y"])]
    first = len(lines) + 1
    origins = []
    for assertion in query.assertions:
        lines.append(f"(assert {_formula(assertion.expr, shapes, source)})")
        origins.append(_line(assertion.expr))
    from .reader import _read

    try:
        return _read("\n".join(lines) + "\n", source)
    except VNNLIBError as error:
        k = (error.line or 0) - first
        if not 0 <= k < len(origins):
            raise VNNLIBError(error.code, error.reason, token=error.token,
                              source=source) from None
        raise VNNLIBError(error.code, f"{error.reason} (in the assertion read as "
                          f"{lines[first - 1 + k]})", line=origins[k], token=error.token,
                          source=source) from None


def _formula(node, shapes, source: str) -> str:
    kind = type(node).__name__
    children = node.children()
    if kind in ("And", "Or"):
        return f"({kind.lower()} " + " ".join(_formula(c, shapes, source)
                                              for c in children) + ")"
    if kind in _COMPARISONS:
        return f"({_COMPARISONS[kind]} " + " ".join(_term(c, shapes) for c in children) + ")"
    raise VNNLIBError("vnnlib-2-unsupported", f"{kind} ({node}) is outside what a Property "
                      "holds (and, or, <=, >=, <, >, = of linear terms)", line=_line(node),
                      source=source)


def _term(node, shapes) -> str:
    kind = type(node).__name__
    if kind == "Var":
        side, shape = shapes[node.name]
        index, stride = 0, 1
        for i, size in zip(reversed(list(node.indices)), reversed(shape)):
            index += i * stride
            stride *= size
        return f"{side}_{index}"
    if kind in _ARITHMETIC:
        return f"({_ARITHMETIC[kind]} " + " ".join(_term(c, shapes)
                                                   for c in node.children()) + ")"
    return node.lexeme  # a literal, exactly as written


def _line(node) -> int | None:
    """The line of the first variable or literal under `node`."""
    line = getattr(node, "line", None)
    if isinstance(line, int):
        return line
    for child in node.children():
        found = _line(child)
        if found is not None:
            return found
    return None


def _invalid(message: str, source: str) -> VNNLIBError:
    """The package's error as a VNNLIBError: its first error's message, line and symbol
    (the package reports JSON for type errors, a sentence with a 0-based column for syntax
    errors)."""
    try:
        first = json.loads(message)["errors"][0]
        return VNNLIBError("vnnlib-2-invalid", f"{first.get('message', '')}: "
                           f"{first.get('hint', '')}", line=first.get("line"),
                           token=str(first.get("offendingSymbol", "")), source=source)
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    where = re.search(r"line (\d+), column (\d+): '([^']*)'", message)
    if where:
        return VNNLIBError("vnnlib-2-invalid", message.split(" at line")[0],
                           line=int(where.group(1)), column=int(where.group(2)) + 1,
                           token=where.group(3), source=source)
    return VNNLIBError("vnnlib-2-invalid", message, source=source)
