"""The JSON header of a GraphIR file: parsing, the canonical form `save` writes, and the
schema every field must follow before anything it declares is trusted."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from typing import Any

import torch

from ..errors import GraphIRFormatError
from ..ir import OP_SCHEMAS, OPTIONAL_ATTRS, Source

FORMAT_NAME = "ncet-graphir"
FORMAT_VERSION = 1
MAX_RANK = 64
ALIGN = 8

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}
"""The constant dtypes a file may hold, by the name written in the header."""

PREFIX = struct.Struct("<8sIQ")  # magic, format version, header length in bytes
INT64_MAX = 2**63 - 1
_HEADER_KEYS = frozenset({"format", "version", "nodes", "constants"})
_NODE_KEYS = frozenset({"name", "op_type", "inputs", "attrs", "shape", "dtype", "source"})
SOURCE_KEYS = frozenset(Source.__slots__)
_CONSTANT_KEYS = frozenset({"name", "dtype", "shape", "offset", "nbytes"})



def fail(where: str, problem: str):
    raise GraphIRFormatError(f"{where}: {problem}")


def aligned(n: int) -> int:
    return n + (-n % ALIGN)


def parse_json(data: bytearray) -> tuple[Any, str]:
    """The parsed header and its text."""
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            fail("header", f"duplicate JSON keys among {keys!r:.80}")
        return dict(pairs)

    def no_constant(word):
        fail("header", f"{word} is not allowed (JSON has no such number)")

    try:
        text = data.decode("utf-8")
        del data[:]  # the text replaces the bytes
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant), text
    except UnicodeDecodeError as exc:
        fail("header", f"invalid UTF-8 at byte {exc.start}")
    except RecursionError:
        fail("header", "JSON nested too deeply")
    except ValueError as exc:  # JSONDecodeError, and ints over the digit limit
        fail("header", f"invalid JSON ({exc})")


CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                              allow_nan=False)
"""The header encoding `save` writes."""


def _pieces(header: dict):
    """The canonical header text, one piece per node and per constant (each encoded by the C
    encoder), so that it is never held whole beside the file's text."""
    yield "{"
    for i, key in enumerate(sorted(header)):
        yield ("," if i else "") + CANONICAL.encode(key) + ":"
        if type(header[key]) is list:
            yield "["
            for j, item in enumerate(header[key]):
                yield ("," if j else "") + CANONICAL.encode(item)
            yield "]"
        else:
            yield CANONICAL.encode(header[key])
    yield "}"


def check_canonical(header: dict, text: str) -> None:
    """The header must be exactly what `save` writes: then an accepted file saves back to its
    own bytes, and no two files hold one GraphIR."""
    at, piece = 0, ""
    for piece in _pieces(header):
        if not text.startswith(piece, at):
            break
        at += len(piece)
    else:
        if at == len(text):
            return
        piece = ""  # the text goes on past the canonical header's end
    start = at  # the first difference lies inside this piece (or just past the end)
    at = next((start + i for i, (a, b) in enumerate(zip(text[start:start + len(piece)], piece))
               if a != b), min(len(text), start + len(piece)))
    canonical_rest = piece[at - start:]
    got = ascii(text[at:at + 12]) if at < len(text) else "the end of the header"
    want = ascii(canonical_rest[:12]) if canonical_rest else "the end of the header"
    fail("header", f"not in canonical form at byte {PREFIX.size + len(text[:at].encode())} "
                    f"of the file: {got} where save writes {want} (save writes sorted keys, "
                    "no spaces, ASCII with \\u escapes, numbers in their shortest form); "
                    "re-save the GraphIR with ncet.save")


# --- The header schema: every check runs on parsed JSON, before anything is built. --------


def _is_int(v) -> bool:  # bool is a subclass of int: reject it
    return type(v) is int and -INT64_MAX - 1 <= v <= INT64_MAX


def _is_float(v) -> bool:
    return _is_int(v) or (type(v) is float and math.isfinite(v))


def _is_str(v) -> bool:
    return type(v) is str


def _check_keys(where: str, value, keys: frozenset) -> None:
    if type(value) is not dict:
        fail(where, f"expected a JSON object, got {type(value).__name__}")
    if set(value) != keys:
        missing, extra = sorted(keys - set(value)), sorted(set(value) - keys)
        fail(where, f"missing keys {missing}, unexpected keys {extra!r:.80}")


def _check_list(where: str, value, ok: Callable[[Any], bool], what: str) -> None:
    if type(value) is not list:
        fail(where, f"expected a list of {what}, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not ok(item):
            fail(f"{where}[{i}]", f"expected {what}, got {item!r:.80}")


def check_shape(where: str, value) -> int:
    """Check a shape and return its number of elements."""
    _check_list(where, value, lambda v: _is_int(v) and v >= 0, "non-negative int64 sizes")
    if len(value) > MAX_RANK:
        fail(where, f"rank {len(value)} is over the {MAX_RANK} limit")
    if (numel := math.prod(value)) > INT64_MAX:
        fail(where, f"{numel} elements overflows int64")
    if math.prod(v for v in value if v) > INT64_MAX:  # the strides: zeros aside
        fail(where, f"PyTorch cannot lay out a tensor of shape {value!r:.80}: the product of "
                     "its non-zero sizes overflows int64")
    return numel


# Attribute kind (see OP_SCHEMAS) -> (what the value must be, test on the parsed JSON value).
ATTRIBUTE_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an int", _is_int),
    "int?": ("an int or null", lambda v: v is None or _is_int(v)),
    "float": ("a finite number", _is_float),
    "float?": ("a finite number or null", lambda v: v is None or _is_float(v)),
    "bool": ("a bool", lambda v: type(v) is bool),
    "str": ("a string", _is_str),
    "ints": ("a list of ints", lambda v: type(v) is list and all(map(_is_int, v))),
    "ints?": ("a list of ints or nulls",
              lambda v: type(v) is list and all(x is None or _is_int(x) for x in v)),
    "index": ("a list whose items are ints, [start, stop, step] lists of 3 ints, or nulls",
              lambda v: type(v) is list and all(x is None or _is_int(x) or (
                  type(x) is list and len(x) == 3 and all(map(_is_int, x))) for x in v)),
    "const": ("a constant name", _is_str),
    "const?": ("a constant name or null", lambda v: v is None or _is_str(v)),
    "cut": ("a list (empty when the cut leaves nothing out) of [node name, why] lists of two "
            "non-empty strings, each name once", lambda v: type(v) is list and all(
                type(x) is list and len(x) == 2 and all(_is_str(s) and s for s in x)
                for x in v) and len({x[0] for x in v}) == len(v)),
}
assert {k for _, s in OP_SCHEMAS.values() for k in s.values()} | {
    k for s in OPTIONAL_ATTRS.values() for k in s.values()} <= set(ATTRIBUTE_KINDS), \
    "new attr kind"


def _check_attrs(where: str, op_type: str, attrs, constants: set[str]) -> None:
    optional = OPTIONAL_ATTRS.get(op_type, {})
    schema = {**OP_SCHEMAS[op_type][1], **{k: v for k, v in optional.items()
                                           if type(attrs) is dict and k in attrs}}
    _check_keys(where, attrs, frozenset(schema))
    for key, kind in schema.items():
        (what, ok), value = ATTRIBUTE_KINDS[kind], attrs[key]
        if not ok(value):
            fail(f"{where}[{key!r}]", f"expected {what} (kind {kind!r}), got {value!r:.80}")
        if kind.startswith("const") and value is not None and value not in constants:
            fail(f"{where}[{key!r}]", f"names no constant: {value!r:.80}")


def _check_node(where: str, node, seen: set[str], constants: set[str]) -> None:
    _check_keys(where, node, _NODE_KEYS)
    name, op_type, inputs, shape = node["name"], node["op_type"], node["inputs"], node["shape"]
    if not _is_str(name) or not name:
        fail(f"{where}.name", f"expected a non-empty string, got {name!r:.80}")
    if name in seen:
        fail(f"{where}.name", f"duplicate node name {name!r:.80}")
    where = f"{where} {name!r:.80}"
    if not _is_str(op_type) or op_type not in OP_SCHEMAS:
        fail(f"{where}.op_type", f"unknown op_type {op_type!r:.80}")
    _check_list(f"{where}.inputs", inputs, _is_str, "node names")
    for i, producer in enumerate(inputs):
        if producer not in seen:
            fail(f"{where}.inputs[{i}]", f"{producer!r:.80} names no earlier node")
    arity = OP_SCHEMAS[op_type][0]
    if len(inputs) != arity if arity is not None else not inputs:
        fail(f"{where}.inputs", f"{op_type} takes {arity or 'one or more'} inputs, "
                                 f"got {len(inputs)}")
    _check_attrs(f"{where}.attrs", op_type, node["attrs"], constants)
    if op_type != "Output":
        check_shape(f"{where}.shape", shape)
    elif shape is not None:
        fail(f"{where}.shape", f"must be null for Output, got {shape!r:.80}")
    if not _is_str(node["dtype"]):
        fail(f"{where}.dtype", f"expected a string, got {node['dtype']!r:.80}")
    _check_keys(f"{where}.source", node["source"], SOURCE_KEYS)
    for key, value in node["source"].items():
        if not _is_str(value):
            fail(f"{where}.source.{key}", f"expected a string, got {value!r:.80}")


def _check_nodes(nodes, constants: set[str]) -> None:
    if type(nodes) is not list or not nodes:
        fail("nodes", f"expected a non-empty list, got {nodes!r:.40}")
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        _check_node(f"nodes[{i}]", node, seen, constants)
        if node["op_type"] == "Output" and i != len(nodes) - 1:
            fail(f"nodes[{i}] {node['name']!r:.80}", "Output must be the last node")
        if node["op_type"] == "Input" and i and nodes[i - 1]["op_type"] != "Input":
            fail(f"nodes[{i}] {node['name']!r:.80}", "Input nodes must come first")
        seen.add(node["name"])
    if nodes[-1]["op_type"] != "Output":
        fail(f"nodes[{len(nodes) - 1}]", "the last node must be Output")


def _check_constants(entries, data_len: int) -> set[str]:
    """Check the constants table against the data section's length; return the names."""
    if type(entries) is not list:
        fail("constants", f"expected a list, got {type(entries).__name__}")
    names: set[str] = set()
    end, previous = 0, None
    for i, entry in enumerate(entries):
        where = f"constants[{i}]"
        _check_keys(where, entry, _CONSTANT_KEYS)
        name, dtype, offset, nbytes = (entry[k] for k in ("name", "dtype", "offset", "nbytes"))
        if not _is_str(name) or not name or name in names:
            fail(f"{where}.name", f"expected a new non-empty name, got {name!r:.80}")
        where = f"{where} {name!r:.80}"
        if not _is_str(dtype) or dtype not in DTYPES:
            fail(f"{where}.dtype", f"{dtype!r:.80} is not one of {sorted(DTYPES)}")
        expected = check_shape(f"{where}.shape", entry["shape"]) * DTYPES[dtype].itemsize
        if not _is_int(nbytes) or nbytes != expected:
            fail(f"{where}.nbytes", f"expected {expected} (numel x itemsize), "
                                     f"got {nbytes!r:.80}")
        if not _is_int(offset) or offset < 0 or offset % ALIGN:
            fail(f"{where}.offset", f"expected a non-negative multiple of {ALIGN}, "
                                     f"got {offset!r:.80}")
        if offset < end:
            fail(f"{where}.offset", f"{offset} overlaps {previous!r:.80} (ends at {end})")
        if offset + nbytes > data_len:
            fail(f"{where}.offset", f"bytes {offset}..{offset + nbytes} run past the end "
                                     f"of the {data_len}-byte data section (truncated?)")
        if offset != aligned(end):
            fail(f"{where}.offset", f"{offset} leaves a gap after byte {end}")
        names.add(name)
        end, previous = offset + nbytes, name
    if end != data_len:
        fail("constants", f"the data section has {data_len - end} trailing bytes")
    return names


def check_header(header, data_len: int) -> None:
    _check_keys("header", header, _HEADER_KEYS)
    if header["format"] != FORMAT_NAME:
        fail("header.format", f"expected {FORMAT_NAME!r}, got {header['format']!r:.80}")
    if not _is_int(header["version"]) or header["version"] != FORMAT_VERSION:
        fail("header.version", f"expected {FORMAT_VERSION}, got {header['version']!r:.80}")
    _check_nodes(header["nodes"], _check_constants(header["constants"], data_len))


# --- Encoding and decoding ----------------------------------------------------------------
