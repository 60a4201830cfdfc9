"""Save GraphIR to one self-contained deterministic file, and load it back without running code."""

from __future__ import annotations

import json
import math
import os
import stat
import struct
import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ncet.atomic import atomic_writer
from ncet.budget import budget_for
from ncet.consistency import check_consistency
from ncet.errors import GraphIRFormatError
from ncet.ir import OP_SCHEMAS, GraphIR, IRNode, Source

MAGIC = b"NCETIR\n\x00"
FORMAT_NAME = "ncet-graphir"
FORMAT_VERSION = 1
MAX_FILE_BYTES = 16 * 2**30
"""Files larger than this are refused before anything is read."""
MAX_RANK = 64
ALIGN = 8

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}
"""The constant dtypes a file may hold, by the name written in the header."""

_PREFIX = struct.Struct("<8sIQ")  # magic, format version, header length in bytes
_INT64_MAX = 2**63 - 1
_HEADER_KEYS = frozenset({"format", "version", "nodes", "constants"})
_NODE_KEYS = frozenset({"name", "op_type", "inputs", "attrs", "shape", "dtype", "source"})
_SOURCE_KEYS = frozenset(Source.__slots__)
_CONSTANT_KEYS = frozenset({"name", "dtype", "shape", "offset", "nbytes"})


def save(ir: GraphIR, path: str | os.PathLike) -> None:
    """Write `ir` to `path` as one GraphIR file (see docs/file-format.md).

    The same GraphIR always gives the same bytes: sorted JSON keys, floats written by repr,
    constants in the GraphIR's order, no timestamps. Whatever `save` writes, `load` accepts.

    Example:
        >>> ncet.save(ir, "net.ncet"); ir2 = ncet.load("net.ncet")

    Args:
        ir: The graph to write.
        path: Destination file; replaced atomically if it exists (a write that fails leaves
            it as it was).

    Raises:
        TypeError: `ir` is not a GraphIR.
        ValueError: The graph cannot be stored: a non-finite or non-JSON attribute, a
            constant that is not a dense tensor of an allowed dtype, or anything else that
            `load` would reject.
    """
    if not isinstance(ir, GraphIR):
        raise TypeError(f"save() expects a GraphIR, got {type(ir).__name__}")
    header, blobs, data_len = _encode(ir)
    try:
        _check_header(header, data_len)
    except GraphIRFormatError as exc:
        raise ValueError(f"cannot save this GraphIR: {exc}") from None
    text = _CANONICAL.encode(header).encode("ascii")
    with atomic_writer(path) as f:  # a failed or concurrent write never leaves a mixed file
        f.write(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(text)) + text)
        f.write(bytes(_aligned(_PREFIX.size + len(text)) - _PREFIX.size - len(text)))
        position = 0
        for entry, blob in zip(header["constants"], blobs, strict=True):
            f.write(bytes(entry["offset"] - position))
            f.write(blob)
            position = entry["offset"] + entry["nbytes"]


def load(path: str | os.PathLike, *, verify: bool = True, max_check_bytes: int | None = None,
         max_check_work: int | None = None) -> GraphIR:
    """Read a GraphIR file written by `save`, validating every field before use.

    Nothing in the file is executed (there is no pickle), no declared size is trusted before
    it has been checked against the real size of the file, and the header must be exactly the
    bytes `save` would write for it, so an accepted file saves back to its own bytes.

    Example:
        >>> ir = ncet.load("net.ncet")
        >>> big = ncet.load("vision.ncet", max_check_bytes=8 * 2**30)  # a trusted large model

    Args:
        path: The file to read.
        verify: Also check that the graph means what it declares (`check_consistency`):
            every attribute value and dtype is checked, then the graph runs at batch sizes 1
            and 2 in float64 on zero inputs and every node's shape is compared with the
            declared one. Turn off only to inspect a file whose attributes do not compute.
        max_check_bytes: The memory the check may use, in bytes. By default 64 MiB plus 16
            bytes per byte of the file, at most 4 GiB (`ncet.budget`); a graph whose run could
            need more is refused before anything is allocated. Raise it for a trusted file
            whose activations are large next to its weights.
        max_check_work: The same for the check's work, in multiply-adds and element visits
            (10^9 to 10^10 a second): by default 10^9 plus 1024 per byte of the file, at most
            10^11.

    Returns:
        The GraphIR, with constants as fresh CPU tensors bit-identical to those saved.

    Raises:
        GraphIRFormatError: The file is not a well-formed GraphIR file of this version, its
            header is not in canonical form, the path is a directory or not a regular file,
            or (with `verify`) an attribute value, a dtype or a declared shape contradicts the
            graph, or the check would exceed its memory or work limit. The message says what
            and where, and for a limit how to raise it.
        TypeError, ValueError: `max_check_bytes` or `max_check_work` is not a positive int.
        OSError: The path does not exist or cannot be read.
    """
    name = os.fspath(path)
    budget_for(0, max_check_bytes, max_check_work)  # a bad argument fails before any reading
    try:
        ir, size = _load(name)
        if verify:
            check_consistency(ir, budget_for(size, max_check_bytes, max_check_work))
        return ir
    except GraphIRFormatError as exc:
        raise GraphIRFormatError(f"{name!r} is not a valid GraphIR file: {exc}") from None


def _load(path) -> tuple[GraphIR, int]:
    """The GraphIR a file holds, and the file's size."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        _fail("path", "is a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file")
    size = info.st_size
    if size > MAX_FILE_BYTES:
        _fail("file", f"{size} bytes is over the {MAX_FILE_BYTES}-byte cap")
    with open(path, "rb") as f:
        prefix = f.read(_PREFIX.size)
        _check_magic(prefix[:len(MAGIC)], size)
        if len(prefix) < _PREFIX.size:
            _fail("prefix", f"truncated in the {_PREFIX.size}-byte prefix")
        _, version, header_len = _PREFIX.unpack(prefix)
        if version != FORMAT_VERSION:
            _fail("prefix", f"format version {version} is not supported "
                            f"(this NCET reads version {FORMAT_VERSION})")
        if header_len > size - _PREFIX.size:
            _fail("prefix", f"header length {header_len} runs past the end of the file "
                            f"({size} bytes)")
        header, text = _parse_json(_read(f, header_len, "the header"))
        data_start = _aligned(_PREFIX.size + header_len)
        if data_start > size:
            _fail("file", "truncated in the padding after the header")
        _read_padding(f, data_start - _PREFIX.size - header_len, "the padding after the header")
        _check_header(header, size - data_start)
        _check_canonical(header, text)
        del text
        tensors, position = {}, 0
        for entry in header["constants"]:
            where = f"constant {entry['name']!r:.80}"
            _read_padding(f, entry["offset"] - position, f"the padding before {where}")
            tensors[entry["name"]] = _tensor(_read(f, entry["nbytes"], where), entry, where)
            position = entry["offset"] + entry["nbytes"]
        if f.read(1):  # the file grew after os.stat
            _fail("file", "trailing bytes after the last constant")
    return _build(header["nodes"], tensors), size


def _fail(where: str, problem: str):
    raise GraphIRFormatError(f"{where}: {problem}")


def _aligned(n: int) -> int:
    return n + (-n % ALIGN)


def _check_magic(head: bytes, size: int) -> None:
    if size == 0:
        _fail("file", "the file is empty")
    if len(head) < len(MAGIC) and MAGIC.startswith(head):
        _fail("file", f"truncated in the magic bytes ({size} bytes)")
    if head.startswith((b"\x80", b"PK\x03\x04")):
        _fail("magic", "wrong magic bytes: this looks like a pickle or torch.save file, "
                       "which NCET never unpickles")
    if head != MAGIC:
        _fail("magic", f"wrong magic bytes {head!r} (expected {MAGIC!r})")


def _read(f, n: int, what: str) -> bytearray:
    """Read exactly n bytes (n already checked against the file size)."""
    data = bytearray(n)
    if (got := f.readinto(data)) != n:
        _fail("file", f"truncated in {what} ({got} of {n} bytes)")
    return data


def _read_padding(f, n: int, what: str) -> None:
    if _read(f, n, what).count(0) != n:
        _fail("file", f"non-zero bytes in {what}")


def _parse_json(data: bytearray) -> tuple[Any, str]:
    """The parsed header and its text."""
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            _fail("header", f"duplicate JSON keys among {keys!r:.80}")
        return dict(pairs)

    def no_constant(word):
        _fail("header", f"{word} is not allowed (JSON has no such number)")

    try:
        text = data.decode("utf-8")
        del data[:]  # the text replaces the bytes
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant), text
    except UnicodeDecodeError as exc:
        _fail("header", f"invalid UTF-8 at byte {exc.start}")
    except RecursionError:
        _fail("header", "JSON nested too deeply")
    except ValueError as exc:  # JSONDecodeError, and ints over the digit limit
        _fail("header", f"invalid JSON ({exc})")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                              allow_nan=False)
"""The header encoding `save` writes."""


def _pieces(header: dict):
    """The canonical header text, one piece per node and per constant (each encoded by the C
    encoder), so that it is never held whole beside the file's text."""
    yield "{"
    for i, key in enumerate(sorted(header)):
        yield ("," if i else "") + _CANONICAL.encode(key) + ":"
        if type(header[key]) is list:
            yield "["
            for j, item in enumerate(header[key]):
                yield ("," if j else "") + _CANONICAL.encode(item)
            yield "]"
        else:
            yield _CANONICAL.encode(header[key])
    yield "}"


def _check_canonical(header: dict, text: str) -> None:
    """The header must be exactly what `save` writes: then an accepted file saves back to its
    own bytes, and no two files hold one GraphIR."""
    at = 0
    for piece in _pieces(header):
        if not text.startswith(piece, at):
            break
        at += len(piece)
    else:
        if at == len(text):
            return
    canonical = "".join(_pieces(header))
    at = next((i for i, (a, b) in enumerate(zip(text, canonical)) if a != b),
              min(len(text), len(canonical)))
    got = ascii(text[at:at + 12]) if at < len(text) else "the end of the header"
    want = ascii(canonical[at:at + 12]) if at < len(canonical) else "the end of the header"
    _fail("header", f"not in canonical form at byte {_PREFIX.size + len(text[:at].encode())} "
                    f"of the file: {got} where save writes {want} (save writes sorted keys, "
                    "no spaces, ASCII with \\u escapes, numbers in their shortest form); "
                    "re-save the GraphIR with ncet.save")


# --- The header schema: every check runs on parsed JSON, before anything is built. --------


def _is_int(v) -> bool:  # bool is a subclass of int: reject it
    return type(v) is int and -_INT64_MAX - 1 <= v <= _INT64_MAX


def _is_float(v) -> bool:
    return _is_int(v) or (type(v) is float and math.isfinite(v))


def _is_str(v) -> bool:
    return type(v) is str


def _check_keys(where: str, value, keys: frozenset) -> None:
    if type(value) is not dict:
        _fail(where, f"expected a JSON object, got {type(value).__name__}")
    if set(value) != keys:
        missing, extra = sorted(keys - set(value)), sorted(set(value) - keys)
        _fail(where, f"missing keys {missing}, unexpected keys {extra!r:.80}")


def _check_list(where: str, value, ok: Callable[[Any], bool], what: str) -> None:
    if type(value) is not list:
        _fail(where, f"expected a list of {what}, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not ok(item):
            _fail(f"{where}[{i}]", f"expected {what}, got {item!r:.80}")


def _check_shape(where: str, value) -> int:
    """Check a shape and return its number of elements."""
    _check_list(where, value, lambda v: _is_int(v) and v >= 0, "non-negative int64 sizes")
    if len(value) > MAX_RANK:
        _fail(where, f"rank {len(value)} is over the {MAX_RANK} limit")
    if (numel := math.prod(value)) > _INT64_MAX:
        _fail(where, f"{numel} elements overflows int64")
    if math.prod(v for v in value if v) > _INT64_MAX:  # the strides: zeros aside
        _fail(where, f"PyTorch cannot lay out a tensor of shape {value!r:.80}: the product of "
                     "its non-zero sizes overflows int64")
    return numel


# Attribute kind (see OP_SCHEMAS) -> (what the value must be, test on the parsed JSON value).
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
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
}
assert {k for _, s in OP_SCHEMAS.values() for k in s.values()} <= set(_KINDS), "new attr kind"


def _check_attrs(where: str, op_type: str, attrs, constants: set[str]) -> None:
    schema = OP_SCHEMAS[op_type][1]
    _check_keys(where, attrs, frozenset(schema))
    for key, kind in schema.items():
        (what, ok), value = _KINDS[kind], attrs[key]
        if not ok(value):
            _fail(f"{where}[{key!r}]", f"expected {what} (kind {kind!r}), got {value!r:.80}")
        if kind.startswith("const") and value is not None and value not in constants:
            _fail(f"{where}[{key!r}]", f"names no constant: {value!r:.80}")


def _check_node(where: str, node, seen: set[str], constants: set[str]) -> None:
    _check_keys(where, node, _NODE_KEYS)
    name, op_type, inputs, shape = node["name"], node["op_type"], node["inputs"], node["shape"]
    if not _is_str(name) or not name:
        _fail(f"{where}.name", f"expected a non-empty string, got {name!r:.80}")
    if name in seen:
        _fail(f"{where}.name", f"duplicate node name {name!r:.80}")
    where = f"{where} {name!r:.80}"
    if not _is_str(op_type) or op_type not in OP_SCHEMAS:
        _fail(f"{where}.op_type", f"unknown op_type {op_type!r:.80}")
    _check_list(f"{where}.inputs", inputs, _is_str, "node names")
    for i, producer in enumerate(inputs):
        if producer not in seen:
            _fail(f"{where}.inputs[{i}]", f"{producer!r:.80} names no earlier node")
    arity = OP_SCHEMAS[op_type][0]
    if len(inputs) != arity if arity is not None else not inputs:
        _fail(f"{where}.inputs", f"{op_type} takes {arity or 'one or more'} inputs, "
                                 f"got {len(inputs)}")
    _check_attrs(f"{where}.attrs", op_type, node["attrs"], constants)
    if op_type != "Output":
        _check_shape(f"{where}.shape", shape)
    elif shape is not None:
        _fail(f"{where}.shape", f"must be null for Output, got {shape!r:.80}")
    if not _is_str(node["dtype"]):
        _fail(f"{where}.dtype", f"expected a string, got {node['dtype']!r:.80}")
    _check_keys(f"{where}.source", node["source"], _SOURCE_KEYS)
    for key, value in node["source"].items():
        if not _is_str(value):
            _fail(f"{where}.source.{key}", f"expected a string, got {value!r:.80}")


def _check_nodes(nodes, constants: set[str]) -> None:
    if type(nodes) is not list or not nodes:
        _fail("nodes", f"expected a non-empty list, got {nodes!r:.40}")
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        _check_node(f"nodes[{i}]", node, seen, constants)
        if node["op_type"] == "Output" and i != len(nodes) - 1:
            _fail(f"nodes[{i}] {node['name']!r:.80}", "Output must be the last node")
        if node["op_type"] == "Input" and i and nodes[i - 1]["op_type"] != "Input":
            _fail(f"nodes[{i}] {node['name']!r:.80}", "Input nodes must come first")
        seen.add(node["name"])
    if nodes[-1]["op_type"] != "Output":
        _fail(f"nodes[{len(nodes) - 1}]", "the last node must be Output")


def _check_constants(entries, data_len: int) -> set[str]:
    """Check the constants table against the data section's length; return the names."""
    if type(entries) is not list:
        _fail("constants", f"expected a list, got {type(entries).__name__}")
    names: set[str] = set()
    end, previous = 0, None
    for i, entry in enumerate(entries):
        where = f"constants[{i}]"
        _check_keys(where, entry, _CONSTANT_KEYS)
        name, dtype, offset, nbytes = (entry[k] for k in ("name", "dtype", "offset", "nbytes"))
        if not _is_str(name) or not name or name in names:
            _fail(f"{where}.name", f"expected a new non-empty name, got {name!r:.80}")
        where = f"{where} {name!r:.80}"
        if not _is_str(dtype) or dtype not in DTYPES:
            _fail(f"{where}.dtype", f"{dtype!r:.80} is not one of {sorted(DTYPES)}")
        expected = _check_shape(f"{where}.shape", entry["shape"]) * DTYPES[dtype].itemsize
        if not _is_int(nbytes) or nbytes != expected:
            _fail(f"{where}.nbytes", f"expected {expected} (numel x itemsize), "
                                     f"got {nbytes!r:.80}")
        if not _is_int(offset) or offset < 0 or offset % ALIGN:
            _fail(f"{where}.offset", f"expected a non-negative multiple of {ALIGN}, "
                                     f"got {offset!r:.80}")
        if offset < end:
            _fail(f"{where}.offset", f"{offset} overlaps {previous!r:.80} (ends at {end})")
        if offset + nbytes > data_len:
            _fail(f"{where}.offset", f"bytes {offset}..{offset + nbytes} run past the end "
                                     f"of the {data_len}-byte data section (truncated?)")
        if offset != _aligned(end):
            _fail(f"{where}.offset", f"{offset} leaves a gap after byte {end}")
        names.add(name)
        end, previous = offset + nbytes, name
    if end != data_len:
        _fail("constants", f"the data section has {data_len - end} trailing bytes")
    return names


def _check_header(header, data_len: int) -> None:
    _check_keys("header", header, _HEADER_KEYS)
    if header["format"] != FORMAT_NAME:
        _fail("header.format", f"expected {FORMAT_NAME!r}, got {header['format']!r:.80}")
    if not _is_int(header["version"]) or header["version"] != FORMAT_VERSION:
        _fail("header.version", f"expected {FORMAT_VERSION}, got {header['version']!r:.80}")
    _check_nodes(header["nodes"], _check_constants(header["constants"], data_len))


# --- Encoding and decoding ----------------------------------------------------------------


def _plain(value):
    """Tuples and mappings as JSON lists and objects; everything else as it is."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def _encode(ir: GraphIR) -> tuple[dict, list[bytearray], int]:
    """The header, each constant's little-endian bytes, and the data section's length."""
    nodes = [{
        "name": n.name, "op_type": n.op_type, "inputs": list(n.inputs),
        "attrs": _plain(n.attrs), "shape": _plain(n.shape), "dtype": n.dtype,
        "source": {k: getattr(n.source, k) for k in sorted(_SOURCE_KEYS)},
    } for n in ir.nodes]
    names = {dtype: name for name, dtype in DTYPES.items()}
    entries, blobs, end = [], [], 0
    for name, tensor in ir.constants.items():
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided \
                or tensor.dtype not in names or tensor.is_meta:
            got = (f"{tensor.dtype} {tensor.layout} tensor on {tensor.device}"
                   if isinstance(tensor, torch.Tensor) else type(tensor).__name__)
            raise ValueError(f"cannot save constant {name!r}: expected a dense tensor of "
                             f"dtype {sorted(DTYPES)}, got {got}")
        t = tensor.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8)
        if sys.byteorder == "big":  # the file is little-endian
            raw = raw.reshape(-1, t.element_size()).flip(1).reshape(-1)
        blob = bytearray(raw.numel())
        if blob:  # frombuffer refuses empty buffers
            torch.frombuffer(blob, dtype=torch.uint8).copy_(raw)
        entries.append({"name": name, "dtype": names[t.dtype], "shape": list(t.shape),
                        "offset": _aligned(end), "nbytes": len(blob)})
        blobs.append(blob)
        end = _aligned(end) + len(blob)
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "nodes": nodes,
              "constants": entries}
    return header, blobs, end


def _tensor(data: bytearray, entry: dict, where: str) -> torch.Tensor:
    dtype, shape = DTYPES[entry["dtype"]], entry["shape"]
    if not data:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(data, dtype=torch.uint8)  # shares the buffer: no second copy
    if dtype == torch.bool and bool((raw > 1).any()):
        _fail(where, "a bool constant holds bytes other than 0 and 1")
    if sys.byteorder == "big":
        raw = raw.reshape(-1, dtype.itemsize).flip(1).reshape(-1).contiguous()
    return raw.view(dtype).reshape(shape)


def _build(nodes: list[dict], constants: dict[str, torch.Tensor]) -> GraphIR:
    """Construct the records, consuming the parsed nodes (so the header and the IR are not
    both held whole); their own invariant checks are a second net.

    List-valued attributes stay lists, as `ncet.convert` builds them; inputs and shapes are
    tuples, as in `IRNode`.
    """
    nodes.reverse()
    built = []
    try:
        while nodes:
            n = nodes.pop()
            built.append(IRNode(
                name=n["name"], op_type=n["op_type"], inputs=tuple(n["inputs"]),
                attrs={k: n["attrs"][k] for k in OP_SCHEMAS[n["op_type"]][1]},
                shape=None if n["shape"] is None else tuple(n["shape"]), dtype=n["dtype"],
                source=Source(**n["source"])))
        return GraphIR(tuple(built), constants)
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise GraphIRFormatError(f"the IR's own checks rejected it: {exc!r}") from None
