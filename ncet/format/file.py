"""Save GraphIR to one self-contained deterministic file, and load it back without running code."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Mapping
from types import MappingProxyType

import torch

from ..errors import GraphIRFormatError
from ..ir import OP_SCHEMAS, OPTIONAL_ATTRS, GraphIR, IRNode, Source
from .atomic import atomic_writer
from .budget import budget_for
from .consistency import check_consistency
from .header import (
    CANONICAL,
    DTYPES,
    FORMAT_NAME,
    FORMAT_VERSION,
    PREFIX,
    SOURCE_KEYS,
    aligned,
    check_canonical,
    check_header,
    fail,
    parse_json,
)

MAGIC = b"NCETIR\n\x00"
MAX_FILE_BYTES = 16 * 2**30
"""Files larger than this are refused before anything is read."""


def save(ir: GraphIR, path: str | os.PathLike, *, verify: bool = True) -> None:
    """Write `ir` to `path` as one GraphIR file (see docs/file-format.md).

    The same GraphIR always gives the same bytes: sorted JSON keys, floats written by repr,
    constants in the GraphIR's order, no timestamps. Whatever `save` writes, `load` parses,
    and with `verify=True` (the default) `save` first runs the meaning check `load` runs
    (`check_consistency`: every attribute, dtype and declared shape against what the graph
    computes), so it refuses a GraphIR that `load` would refuse. Only `load`'s limits on the
    check's memory and work are `load`'s alone (the GraphIR is already in memory here).

    Example:
        >>> ncet.save(ir, "net.ncet"); ir2 = ncet.load("net.ncet")

    Args:
        ir: The graph to write.
        path: Destination file; replaced atomically if it exists (a write that fails leaves
            it as it was).
        verify: Check that the graph means what it declares first, as `load(verify=True)`
            does; False writes a GraphIR that does not compute (read back only with
            `load(verify=False)`), e.g. to test a consumer.

    Raises:
        TypeError: `ir` is not a GraphIR.
        ValueError: The graph cannot be stored: a non-finite or non-JSON attribute, a
            constant that is not a dense tensor of an allowed dtype, or anything else that
            `load`'s header schema would reject; with `verify`, anything its meaning check
            would reject (a declared shape the node does not compute, say), naming the node.
    """
    chunks = _chunks(ir, "save")  # every check runs before the file is opened
    if verify:
        try:
            check_consistency(ir)
        except GraphIRFormatError as exc:
            raise ValueError(f"cannot save this GraphIR: {exc} (ncet.load would refuse the "
                             "file)") from None
    with atomic_writer(path) as f:  # a failed or concurrent write never leaves a mixed file
        for chunk in chunks:
            f.write(chunk)


def file_sha256(ir: GraphIR) -> str:
    """The sha256 of the bytes `save` writes for `ir`, computed without writing them.

    Example:
        >>> save(ir, "net.ncet")
        >>> file_sha256(ir) == hashlib.sha256(open("net.ncet", "rb").read()).hexdigest()
        True

    Raises:
        TypeError, ValueError: As `save(verify=False)`, for the same GraphIRs.
    """
    digest = hashlib.sha256()
    for chunk in _chunks(ir, "file_sha256"):
        digest.update(chunk)
    return digest.hexdigest()


def _chunks(ir: GraphIR, caller: str) -> list:
    """The bytes of `ir`'s file, in order: the prefix and header, then each constant's
    padding and bytes (views of the tensors, not copies). `save` writes them and
    `file_sha256` hashes them, so the two cannot disagree."""
    if not isinstance(ir, GraphIR):
        raise TypeError(f"{caller}() expects a GraphIR, got {type(ir).__name__}")
    header, blobs, data_len = _encode(ir)
    try:
        check_header(header, data_len)
    except GraphIRFormatError as exc:
        raise ValueError(f"cannot save this GraphIR: {exc}") from None
    text = CANONICAL.encode(header).encode("ascii")
    chunks = [PREFIX.pack(MAGIC, FORMAT_VERSION, len(text)) + text,
              bytes(aligned(PREFIX.size + len(text)) - PREFIX.size - len(text))]
    position = 0
    for entry, blob in zip(header["constants"], blobs, strict=True):
        chunks.append(bytes(entry["offset"] - position))
        chunks.append(blob)
        position = entry["offset"] + entry["nbytes"]
    return chunks


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
            and 2 on meta tensors (PyTorch's shape rules; no value is allocated) and every
            node's shape is compared with the declared one. Turn off only to inspect a file
            whose attributes do not compute.
        max_check_bytes: The most memory, in bytes, that evaluating the graph at those
            batch sizes may imply. By default 256 MiB plus 16 bytes per byte of the file, at
            most 4 GiB (`ncet.format.budget`); a graph that implies more is refused before the
            check. Raise it for a trusted file whose activations are large next to its
            weights.
        max_check_work: The same for work, in multiply-adds and element visits (10^9 to
            10^10 a second when evaluated): by default 10^9 plus 1024 per byte of the file, at
            most 10^11.

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
        fail("path", "is a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file")
    size = info.st_size
    if size > MAX_FILE_BYTES:
        fail("file", f"{size} bytes is over the {MAX_FILE_BYTES}-byte cap")
    with open(path, "rb") as f:
        prefix = f.read(PREFIX.size)
        _check_magic(prefix[:len(MAGIC)], size)
        if len(prefix) < PREFIX.size:
            fail("prefix", f"truncated in the {PREFIX.size}-byte prefix")
        _, version, header_len = PREFIX.unpack(prefix)
        if version != FORMAT_VERSION:
            fail("prefix", f"format version {version} is not supported "
                            f"(this NCET reads version {FORMAT_VERSION})")
        if header_len > size - PREFIX.size:
            fail("prefix", f"header length {header_len} runs past the end of the file "
                            f"({size} bytes)")
        header, text = parse_json(_read(f, header_len, "the header"))
        data_start = aligned(PREFIX.size + header_len)
        if data_start > size:
            fail("file", "truncated in the padding after the header")
        _read_padding(f, data_start - PREFIX.size - header_len, "the padding after the header")
        check_header(header, size - data_start)
        check_canonical(header, text)
        del text
        tensors, position = {}, 0
        for entry in header["constants"]:
            where = f"constant {entry['name']!r:.80}"
            _read_padding(f, entry["offset"] - position, f"the padding before {where}")
            tensors[entry["name"]] = _tensor(_read(f, entry["nbytes"], where), entry, where)
            position = entry["offset"] + entry["nbytes"]
        if f.read(1):  # the file grew after os.stat
            fail("file", "trailing bytes after the last constant")
    return _build(header["nodes"], tensors), size


def _check_magic(head: bytes, size: int) -> None:
    if size == 0:
        fail("file", "the file is empty")
    if len(head) < len(MAGIC) and MAGIC.startswith(head):
        fail("file", f"truncated in the magic bytes ({size} bytes)")
    if head.startswith((b"\x80", b"PK\x03\x04")):
        fail("magic", "wrong magic bytes: this looks like a pickle or torch.save file, "
                       "which NCET never unpickles")
    if head != MAGIC:
        fail("magic", f"wrong magic bytes {head!r} (expected {MAGIC!r})")


def _read(f, n: int, what: str) -> bytearray:
    """Read exactly n bytes (n already checked against the file size)."""
    data = bytearray(n)
    if (got := f.readinto(data)) != n:
        fail("file", f"truncated in {what} ({got} of {n} bytes)")
    return data


def _read_padding(f, n: int, what: str) -> None:
    if _read(f, n, what).count(0) != n:
        fail("file", f"non-zero bytes in {what}")


_SCALARS = frozenset({int, float, str, bool, type(None)})
_SOURCE_KEYS = tuple(sorted(SOURCE_KEYS))


def plain(value):
    """Tuples and mappings as JSON lists and objects; everything else as it is."""
    kind = type(value)  # exact types first: the ABC check below costs ~1 us a value
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if kind is MappingProxyType or kind is dict:  # IRNode.attrs is a mappingproxy
        return {k: v if type(v) in _SCALARS else plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return {k: plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_NUMPY_NAMES = {dtype: name for dtype, name in _DTYPE_NAMES.items()
                if dtype is not torch.bfloat16 and sys.byteorder == "little"}
"""The dtypes whose bytes `Tensor.numpy()` gives as they are written (none on a big-endian
machine; numpy has no bfloat16)."""


def constant_bytes(name: str, tensor) -> tuple[str, memoryview]:
    """A constant's dtype name in the header and its little-endian bytes, row-major: a view
    of the tensor's own memory where it is contiguous, not a copy (`save` writes them,
    `file_sha256` and `hash_graphir` hash them).

    Raises:
        ValueError: `tensor` is not a dense tensor of one of the file's dtypes.
    """
    if type(tensor) is torch.Tensor:  # the common case, in the fewest calls (every export)
        dtype = _NUMPY_NAMES.get(tensor.dtype)
        if dtype is not None and tensor.layout is torch.strided and tensor.is_cpu \
                and not tensor.requires_grad and tensor.is_contiguous() and not tensor.is_neg():
            return dtype, memoryview(tensor.numpy())
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided \
            or tensor.dtype not in _DTYPE_NAMES or tensor.is_meta:
        got = (f"{tensor.dtype} {tensor.layout} tensor on {tensor.device}"
               if isinstance(tensor, torch.Tensor) else type(tensor).__name__)
        raise ValueError(f"cannot save constant {name!r}: expected a dense tensor of "
                         f"dtype {sorted(DTYPES)}, got {got}")
    t = tensor.detach() if tensor.requires_grad else tensor
    t = (t if t.is_cpu else t.cpu()).contiguous()  # no call where none is needed
    t = t.resolve_neg().resolve_conj()  # numpy() refuses a tensor with either bit set
    if sys.byteorder == "big":  # the file is little-endian
        raw = t.reshape(-1).view(torch.uint8)
        blob = memoryview(raw.reshape(-1, t.element_size()).flip(1).reshape(-1).numpy())
    elif t.dtype is torch.bfloat16:  # numpy has no bfloat16: its bytes as uint8
        blob = memoryview(t.reshape(-1).view(torch.uint8).numpy())
    else:
        blob = memoryview(t.numpy())
    return _DTYPE_NAMES[t.dtype], blob


def _encode(ir: GraphIR) -> tuple[dict, list[memoryview], int]:
    """The header, each constant's little-endian bytes, and the data section's length."""
    nodes = [{
        "name": n.name, "op_type": n.op_type, "inputs": list(n.inputs),
        "attrs": plain(n.attrs), "shape": plain(n.shape), "dtype": n.dtype,
        "source": {k: getattr(n.source, k, None) for k in _SOURCE_KEYS},  # None: refused
    } for n in ir.nodes]
    entries, blobs, end = [], [], 0
    for name, tensor in ir.constants.items():
        dtype, blob = constant_bytes(name, tensor)
        entries.append({"name": name, "dtype": dtype, "shape": list(tensor.shape),
                        "offset": aligned(end), "nbytes": blob.nbytes})
        blobs.append(blob)
        end = aligned(end) + blob.nbytes
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "nodes": nodes,
              "constants": entries}
    return header, blobs, end


def _tensor(data: bytearray, entry: dict, where: str) -> torch.Tensor:
    dtype, shape = DTYPES[entry["dtype"]], entry["shape"]
    if not data:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(data, dtype=torch.uint8)  # shares the buffer: no second copy
    if dtype == torch.bool and bool((raw > 1).any()):
        fail(where, "a bool constant holds bytes other than 0 and 1")
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
                attrs={k: n["attrs"][k] for k in (*OP_SCHEMAS[n["op_type"]][1],
                                                  *OPTIONAL_ATTRS.get(n["op_type"], ()))
                       if k in n["attrs"]},
                shape=None if n["shape"] is None else tuple(n["shape"]), dtype=n["dtype"],
                source=Source(**n["source"])))
        return GraphIR(tuple(built), constants)
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise GraphIRFormatError(f"the IR's own checks rejected it: {exc!r}") from None
