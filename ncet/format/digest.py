"""`hash_graphir`: one sha256 of everything a GraphIR holds, cheap enough for every export.

`file_sha256` hashes the bytes `save` writes, whose sorted-key JSON header costs some 25 µs per
node to build, check and encode; `to_onnx` stamps each file with this hash instead, of a
compact encoding of the same content (docs/file-format.md, "The GraphIR hash"):

    b"ncet-graphir-sha256 1\\n"
    JSON [nodes, constants], with no spaces and ASCII escapes, then b"\\n"
    each constant's little-endian bytes, in the GraphIR's order

where a node is `[name, op_type, inputs, [its attribute values in OP_SCHEMAS order, then
[key, value] per optional attribute present (OPTIONAL_ATTRS)], shape, dtype, [fx_name, fx_op,
target, module_path, module_type, location]]` and a constant
`[name, dtype, shape]`. The JSON text holds no newline and fixes every constant's size, so
the stream is read back one way only: two GraphIRs have the same hash exactly when their
nodes, provenance and constants' dtypes, shapes and bytes are the same. Tuples and lists are
the same JSON, so a GraphIR and the one `load` reads back from its file hash alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator

from ..errors import GraphIRFormatError
from ..ir import OP_SCHEMAS, OPTIONAL_ATTRS, GraphIR, IRNode, Source
from .file import constant_bytes, plain
from .header import ATTRIBUTE_KINDS, check_shape

VERSION_LINE = b"ncet-graphir-sha256 1\n"

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False,
                            check_circular=False)
_SOURCE = operator.attrgetter(*(f.name for f in dataclasses.fields(Source)))


def _values_getter(keys: tuple[str, ...]):
    if len(keys) >= 2:
        return operator.itemgetter(*keys)
    if keys:
        return lambda attrs, key=keys[0]: (attrs[key],)
    return lambda attrs: ()


def _schema(arity, schema) -> tuple:
    tests = tuple((key, kind, *ATTRIBUTE_KINDS[kind]) for key, kind in schema.items()
                  if not kind.startswith("const"))
    required = tuple(key for key, kind in schema.items() if kind == "const")
    optional = tuple(key for key, kind in schema.items() if kind == "const?")
    return _values_getter(tuple(schema)), frozenset(schema), arity, tests, required, optional


_SCHEMAS = {op_type: _schema(arity, schema) for op_type, (arity, schema) in OP_SCHEMAS.items()}
"""Per op_type: its attribute values in schema order, its attribute names and arity; (key,
kind, what, test) per attribute that names no constant, the test `save`'s header schema
applies to the value; and its attributes naming a constant, required and optional."""

_OPTIONAL = {op_type: {key: (key, kind, *ATTRIBUTE_KINDS[kind]) for key, kind in schema.items()}
             for op_type, schema in OPTIONAL_ATTRS.items()}
"""Per op_type, its optional attributes' (key, kind, what, test), by key."""


def _refuse(node: IRNode, problem: str):
    raise ValueError(f"node {node.name!r:.80} ({node.op_type!r:.40}): {problem}")


def _names_constant(value, constants) -> bool:
    return type(value) is str and value in constants


def _check_attrs(node: IRNode, tests, required, optional, constants) -> None:
    attrs = node.attrs
    for key, kind, what, ok in tests:
        value = attrs[key]
        if not ok(value) and not ok(plain(value)):
            _refuse(node, f"attribute {key!r} is {value!r:.80}, not {what} (kind {kind!r})")
    for key in required:
        if not _names_constant(attrs[key], constants):
            _refuse(node, f"attribute {key!r} names no constant: {attrs[key]!r:.80}")
    for key in optional:
        if attrs[key] is not None and not _names_constant(attrs[key], constants):
            _refuse(node, f"attribute {key!r} names no constant: {attrs[key]!r:.80}")


def _check_shape(node: IRNode, shapes: set) -> None:
    shape = node.shape
    if node.op_type == "Output":
        if shape is not None:
            _refuse(node, f"the shape must be None for Output, not {shape!r:.80}")
        return
    exact = type(shape) is tuple and all(type(d) is int for d in shape)  # 3.0 == 3: not keys
    if exact and shape in shapes:
        return
    try:
        check_shape("shape", plain(shape))
    except (GraphIRFormatError, TypeError) as exc:
        _refuse(node, f"{exc}")
    if exact:
        shapes.add(shape)


def _row(node: IRNode, last: bool, operators: bool, seen: set[str], constants,
         shapes: set) -> tuple:
    """The node's row of the hashed JSON, once it holds what `save`'s header schema asks
    (`check_header`), including what the records' own asserts check (gone under -O)."""
    name, op_type, inputs = node.name, node.op_type, node.inputs
    if type(name) is not str or not name or name in seen:
        _refuse(node, "the name must be a non-empty string no earlier node has")
    schema = _SCHEMAS.get(op_type) if type(op_type) is str else None
    if schema is None:
        _refuse(node, "unknown op_type")
    values_of, keys, arity, tests, required, optional = schema
    if (op_type == "Output") != last:
        _refuse(node, "Output must be the last node, and the last node Output")
    if op_type == "Input" and operators:
        _refuse(node, "Input nodes must come first")
    if not isinstance(inputs, tuple | list) or (
            len(inputs) != arity if arity is not None else not inputs):
        _refuse(node, f"{op_type} takes {arity or 'one or more'} inputs, got {inputs!r:.80}")
    for producer in inputs:
        if type(producer) is not str or producer not in seen:
            _refuse(node, f"input {producer!r:.80} names no earlier node")
    values = values_of(node.attrs) if node.attrs.keys() == keys else None
    if values is None:
        present = node.attrs.keys() - keys
        extra = _OPTIONAL.get(op_type, {})
        if not keys <= node.attrs.keys() or not present <= extra.keys():
            _refuse(node, f"the attributes {sorted(map(str, node.attrs))!r:.80} are not "
                          f"{op_type}'s {sorted(keys)}"
                          + (f" (and optionally {sorted(extra)})" if extra else ""))
        # the optional ones present, after the schema's: [key, value] each, in schema order
        tests = (*tests, *(t for t in extra.values() if t[0] in present))
        values = (*values_of(node.attrs),
                  *([key, node.attrs[key]] for key in extra if key in present))
    _check_attrs(node, tests, required, optional, constants)
    _check_shape(node, shapes)
    try:
        source = _SOURCE(node.source)
    except AttributeError:
        _refuse(node, f"the provenance {node.source!r:.80} is not a Source")
    if type(node.dtype) is not str or any(type(v) is not str for v in source):
        _refuse(node, "the dtype and every provenance field must be strings")
    return name, op_type, inputs, values, node.shape, node.dtype, source


def constant_table(ir: GraphIR) -> dict[str, tuple[str, memoryview]]:
    """Each constant's dtype name and little-endian bytes (`constant_bytes`), by name.

    Raises:
        ValueError: A constant is not a tensor `save` writes.
    """
    for name in ir.constants:
        if type(name) is not str or not name:
            raise ValueError(f"cannot save constant {name!r:.80}: its name must be a non-empty "
                             "string")
    return {name: constant_bytes(name, tensor) for name, tensor in ir.constants.items()}


def hash_graphir(ir: GraphIR, table: dict[str, tuple[str, memoryview]] | None = None) -> str:
    """The sha256 (hex) of `ir`'s compact canonical encoding (the module docstring);
    `table` is `constant_table(ir)` when the caller has it (to_onnx writes those bytes).

    A GraphIR `save` would refuse is refused: the attributes are held to the kinds its
    header schema asks for, the inputs must name earlier nodes, the shapes must be sizes
    PyTorch can lay out, the values must be JSON (finite numbers) and the constants tensors
    `save` writes.

    Raises:
        TypeError: `ir` is not a GraphIR.
        ValueError: A node or constant is one `save` would refuse; the message names it.
    """
    if not isinstance(ir, GraphIR):
        raise TypeError(f"hash_graphir() expects a GraphIR, got {type(ir).__name__}")
    constants, nodes = ir.constants, ir.nodes
    if not nodes:  # GraphIR asserts it, but not under -O
        raise ValueError("a GraphIR has at least its Output node")
    rows, seen, shapes, last = [], set(), set(), len(nodes) - 1
    for position, node in enumerate(nodes):
        rows.append(_row(node, position == last, bool(rows) and rows[-1][1] != "Input", seen,
                         constants, shapes))
        seen.add(node.name)
    table = constant_table(ir) if table is None else table
    entries = [(name, table[name][0], tensor.shape) for name, tensor in constants.items()]
    try:
        text = _ENCODER.encode((rows, entries))
    except (TypeError, ValueError) as exc:  # a non-JSON or non-finite value
        raise ValueError(f"a value of the GraphIR is not one its file can hold: {exc}") from None
    digest = hashlib.sha256(VERSION_LINE)
    digest.update(text.encode("ascii"))
    digest.update(b"\n")
    for _, blob in table.values():
        digest.update(blob)
    return digest.hexdigest()
