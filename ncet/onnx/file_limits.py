"""How much of an ONNX file NCET reads, and how deep: the limits of `read_model`, each checked
before what it bounds is allocated.

- `MAX_FILE_BYTES`: the file, and the file with the external data it names, together.
- `MAX_PARSE_OVERHEAD`: what protobuf's parser (upb) would hold beyond the file's bytes (and
  its copy of the bytes fields, no larger than the file). A two-byte empty message costs it
  ~150-200 bytes (measured: NodeProto 151, AttributeProto 199), so a 40 MB file of empty
  nodes would take 4 GB to parse. A file small enough that even
  all-empty-messages stays under the limit is parsed at once; a larger one is first walked on
  the wire (`parse_cost`: each field's tag read, each message counted, every bytes field
  skipped by its length) and refused (`onnx-parse-memory`) before it is parsed.
- `MAX_NODES`, `MAX_GRAPH_DEPTH`: nodes in all graphs together, and subgraphs within
  subgraphs (If, Loop, Scan attributes), counted without recursion (`walk_model`), so no
  walk after it can exhaust Python's stack. Deeper than protobuf's own limit (100 nested
  messages, about 30 nested If), a file does not parse: `diagnose_unparsable` says so.
- `MAX_TENSOR_BYTES`: a tensor's declared dims times its element size, and all tensors'
  together (`check_tensor_sizes`): what an importer would allocate from them. The same cap
  as `ncet.load`'s meaning check (`ncet.format.budget.MEMORY_CAP`). Dims declared in
  graph inputs, outputs and value_info are metadata: nothing here allocates from them.
"""

from __future__ import annotations

import onnx
from google.protobuf.descriptor import FieldDescriptor
from onnx import TensorProto

from ..format.budget import MEMORY_CAP
from .reading_errors import ONNXFileError

MAX_FILE_BYTES = 4 * 2**30
"""The largest file (with its external data) read: VGG-16 in float32 is ~0.55 GB."""
MAX_PARSE_OVERHEAD = 2**30
"""The most protobuf's parser may hold beyond the file's bytes and its copy of them, as
`parse_cost` bounds it."""
PARSE_BYTES_PER_MESSAGE = 256
PARSE_BYTES_PER_FIELD = 32
"""Upper bounds of upb's memory for one message and for one scalar field or packed element
(measured at most 199 and 16 bytes, protobuf 7 with upb)."""
WORST_EXPANSION = (PARSE_BYTES_PER_MESSAGE + PARSE_BYTES_PER_FIELD) // 2
"""Parse memory per byte of file at worst, by those bounds: a file of two-byte empty
messages. A file of at most `MAX_PARSE_OVERHEAD / WORST_EXPANSION` bytes needs no wire walk."""
MAX_NODES = 1_000_000
"""Nodes in the graph, its subgraphs and its functions together."""
MAX_GRAPH_DEPTH = 16
"""Subgraphs within subgraphs: an If in the body of an If in the graph is 2 deep."""
PROTOBUF_DEPTH = 100
"""upb's default recursion limit (nested messages), past which a file does not parse."""
MAX_TENSOR_BYTES = MEMORY_CAP
"""Declared bytes of one tensor, and of all tensors together (4 GiB)."""

ELEMENT_BITS = {getattr(TensorProto, name): bits for name, bits in (
    ("FLOAT", 32), ("UINT8", 8), ("INT8", 8), ("UINT16", 16), ("INT16", 16), ("INT32", 32),
    ("INT64", 64), ("BOOL", 8), ("FLOAT16", 16), ("DOUBLE", 64), ("UINT32", 32),
    ("UINT64", 64), ("COMPLEX64", 64), ("COMPLEX128", 128), ("BFLOAT16", 16),
    ("FLOAT8E4M3FN", 8), ("FLOAT8E4M3FNUZ", 8), ("FLOAT8E5M2", 8), ("FLOAT8E5M2FNUZ", 8),
    ("FLOAT8E8M0", 8), ("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4), ("UINT2", 2),
    ("INT2", 2)) if hasattr(TensorProto, name)}
"""Bits per element in raw_data of each fixed-size element type (4- and 2-bit types packed)."""


def _repeated(field: FieldDescriptor) -> bool:
    if hasattr(field, "is_repeated"):  # protobuf >= 6
        return field.is_repeated
    return field.label == FieldDescriptor.LABEL_REPEATED


def _wire_tables() -> dict[str, dict[int, str | None]]:
    """Per ONNX message type, its fields to follow on the wire: field number -> the type of
    a message field, or None for a repeated number field (packed: one entry per byte)."""
    tables: dict[str, dict[int, str | None]] = {}
    todo = [onnx.ModelProto.DESCRIPTOR]
    while todo:
        desc = todo.pop()
        if desc.full_name in tables:
            continue
        table = tables[desc.full_name] = {}
        for field in desc.fields:
            if field.message_type is not None:
                table[field.number] = field.message_type.full_name
                todo.append(field.message_type)
            elif (_repeated(field)
                  and field.type not in (FieldDescriptor.TYPE_STRING,
                                         FieldDescriptor.TYPE_BYTES)):
                table[field.number] = None
    return tables


WIRE_TABLES = _wire_tables()
_GRAPH, _NODE = onnx.GraphProto.DESCRIPTOR.full_name, onnx.NodeProto.DESCRIPTOR.full_name


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]  # IndexError past the end: malformed
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed


def parse_cost(data: bytes) -> tuple[int, int, int, int]:
    """(bytes protobuf would hold beyond `data` and its copy of it, at most; nodes; deepest
    subgraph nesting; deepest message nesting), walking the wire format without recursion and
    without parsing, and stopping as soon as the verdict is known: past `PROTOBUF_DEPTH`
    nested messages, `MAX_NODES` nodes, or so many messages or fields that the bound is over
    the limit. Raises `_Malformed` (or IndexError) on bytes that are not protobuf."""
    messages = fields = nodes = deepest_graph = 0
    field_cap = MAX_PARSE_OVERHEAD // PARSE_BYTES_PER_FIELD  # past either cap, the verdict is
    message_cap = MAX_PARSE_OVERHEAD // PARSE_BYTES_PER_MESSAGE  # known: stop walking
    # graphs: subgraph nesting, as `walk_model` counts it (the model's graph is 0 deep)
    end, table, graphs = len(data), WIRE_TABLES[onnx.ModelProto.DESCRIPTOR.full_name], -1
    stack: list[tuple[int, dict, int]] = []
    pos = 0
    while True:
        if pos >= end:
            if pos > end:
                raise _Malformed
            if not stack:
                break
            end, table, graphs = stack.pop()
            continue
        key = data[pos]  # a one-byte varint, mostly
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos)
        fields += 1
        if fields > field_cap:
            break
        wire = key & 7
        if wire == 2:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(data, pos)
            if pos + length > end:
                raise _Malformed
            kind = table.get(key >> 3, False)
            if kind:  # a message: walk into it
                messages += 1
                if messages > message_cap or nodes > MAX_NODES:
                    break
                if kind == _NODE:
                    nodes += 1
                elif kind == _GRAPH:
                    deepest_graph = max(deepest_graph, graphs + 1)
                stack.append((end, table, graphs))
                end, table, graphs = pos + length, WIRE_TABLES[kind], graphs + (kind == _GRAPH)
                if len(stack) >= PROTOBUF_DEPTH:
                    stack.append((end, table, graphs))
                    break
                continue
            if kind is None:  # packed numbers: each at least one byte
                fields += length
                if fields > field_cap:
                    break
            pos += length
        elif wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:  # groups: not in ONNX
            raise _Malformed
    overhead = messages * PARSE_BYTES_PER_MESSAGE + fields * PARSE_BYTES_PER_FIELD
    return overhead, nodes, deepest_graph, len(stack)


def check_parse_cost(data: bytes, what: str) -> None:
    """Refuse, before parsing, a file whose parse could hold more than `MAX_PARSE_OVERHEAD`
    (`onnx-parse-memory`), has more than `MAX_NODES` nodes or nests too deep."""
    if len(data) * WORST_EXPANSION <= MAX_PARSE_OVERHEAD:
        return  # even two-byte empty messages throughout stay under the limit
    try:
        overhead, nodes, graphs, messages = parse_cost(data)
    except (_Malformed, IndexError):  # not parsed either: no bomb can hide past this point
        raise ONNXFileError("onnx-unparsable", f"{what} is not an ONNX model: its bytes are "
                            "not protobuf as ONNX writes it (a truncated field, a group, a "
                            "varint over 64 bits)") from None
    _refuse_counts(what, nodes, graphs, messages)
    if overhead > MAX_PARSE_OVERHEAD:
        raise ONNXFileError(
            "onnx-parse-memory", f"{what} is not parsed: its {len(data)} bytes hold so many "
            f"protobuf messages and fields that parsing them would take up to {overhead} "
            f"bytes of memory, over the limit of {MAX_PARSE_OVERHEAD} "
            "(ncet.onnx.file_limits.MAX_PARSE_OVERHEAD); a network's file holds its weights "
            "in a few large tensors, not millions of tiny messages")


def diagnose_unparsable(data: bytes, what: str) -> None:
    """For bytes protobuf refused: raise the clear error if they nest too deep (protobuf's
    own DecodeError only says it exceeded a depth) or hold too many nodes. A file
    `check_parse_cost` walked already is not walked again."""
    if len(data) * WORST_EXPANSION > MAX_PARSE_OVERHEAD:
        return
    try:
        _, nodes, graphs, messages = parse_cost(data)
    except (_Malformed, IndexError):
        return
    _refuse_counts(what, nodes, graphs, messages)


def _refuse_counts(what: str, nodes: int, graphs: int, messages: int) -> None:
    if messages > PROTOBUF_DEPTH or graphs > MAX_GRAPH_DEPTH:
        depth = (f"messages nested more than {PROTOBUF_DEPTH} deep, protobuf's limit"
                 if messages > PROTOBUF_DEPTH else f"subgraphs nested {graphs} deep")
        raise ONNXFileError(
            "onnx-nesting", f"{what} is refused: it has {depth} (If, Loop or Scan bodies "
            f"within bodies; NCET reads at most {MAX_GRAPH_DEPTH} levels, "
            "ncet.onnx.file_limits.MAX_GRAPH_DEPTH)")
    if nodes > MAX_NODES:
        _too_many_nodes(what)


def _too_many_nodes(what: str) -> None:
    raise ONNXFileError(
        "onnx-too-many-nodes", f"{what} is refused: it has more than {MAX_NODES} nodes in "
        "all its graphs (ncet.onnx.file_limits.MAX_NODES)")


def where_text(where: tuple) -> str:
    """Where a tensor is, in words ("initializer 3", "attribute 'value' of node 2 (Constant
    'c')", ... "in the body 'then_branch' of node 0 (If 'if') of the graph")."""
    scope, kind, i, node, attribute = where
    if kind == "attribute":
        text = f"attribute {attribute!r} of node {i} ({node.op_type} {node.name!r})"
    else:  # an initializer, or a sparse initializer's "(values)" or "(indices)"
        text = f"{kind} {i}{attribute}"
    return text if scope == "the graph" else f"{text} of {scope}"


def walk_model(model: onnx.ModelProto, what: str) -> tuple[list, bool]:
    """Every tensor of the model's graph, subgraphs and functions, as (tensor, the sparse
    tensor whose values it is or None, where: see `where_text`): initializers, sparse
    initializers' values and indices, tensor attributes (a Constant's value included)
    whatever the attribute's declared type; and whether there is any subgraph. Without
    recursion, refusing subgraphs nested deeper than `MAX_GRAPH_DEPTH` (`onnx-nesting`) and
    more than `MAX_NODES` nodes in all graphs and functions together
    (`onnx-too-many-nodes`) as it goes."""
    stack = [(model.graph, 0, "the graph")]
    stack += [(f, 0, f"function {f.name!r}") for f in model.functions]
    nodes, tensors, subgraphs = 0, [], False
    while stack:
        graph, depth, scope = stack.pop()
        nodes += len(graph.node)
        if nodes > MAX_NODES:
            _too_many_nodes(what)
        for i, tensor in enumerate(getattr(graph, "initializer", ())):
            tensors.append((tensor, None, (scope, "initializer", i, None, "")))
        for i, sparse in enumerate(getattr(graph, "sparse_initializer", ())):
            tensors.append((sparse.values, sparse, (scope, "sparse initializer", i, None,
                                                    " (values)")))
            tensors.append((sparse.indices, None, (scope, "sparse initializer", i, None,
                                                   " (indices)")))
        for i, node in enumerate(graph.node):
            for a in node.attribute:
                where = (scope, "attribute", i, node, a.name)
                if a.HasField("t"):
                    tensors.append((a.t, None, where))
                tensors += [(t, None, where) for t in a.tensors]
                sparse = [a.sparse_tensor] if a.HasField("sparse_tensor") else []
                for s in sparse + list(a.sparse_tensors):
                    tensors += [(s.values, s, where), (s.indices, None, where)]
                bodies = [a.g] if a.HasField("g") else []
                bodies += a.graphs
                if not bodies:
                    continue
                subgraphs = True
                label = f"node {i} ({node.op_type} {node.name!r}) of {scope}"
                if depth + 1 > MAX_GRAPH_DEPTH:
                    raise ONNXFileError(
                        "onnx-nesting", f"{what} is refused: {label} holds subgraphs nested "
                        f"more than {MAX_GRAPH_DEPTH} deep (If, Loop or Scan bodies within "
                        "bodies; ncet.onnx.file_limits.MAX_GRAPH_DEPTH)",
                        name=node.name, entries=(label,))
                stack += [(g, depth + 1, f"the body {a.name!r} of {label}") for g in bodies]
    return tensors, subgraphs


def declared_bytes(data_type: int, dims, cap: int | None = None) -> int:
    """Bytes of a tensor's values as its element type and dims (non-negative) declare them
    (raw_data's size; a string or unknown type counts one byte per element); with `cap`,
    any number over it once the product passes it (a million dims cost no bignum)."""
    if 0 in dims:
        return 0
    elements = 1
    for d in dims:
        elements *= d
        if cap is not None and elements > cap:
            return elements
    return (elements * ELEMENT_BITS.get(data_type, 8) + 7) // 8


def check_tensor_sizes(tensors: list, what: str) -> list[tuple[TensorProto, str]]:
    """Refuse a negative dim (`onnx-tensor-dims`) and declared sizes over
    `MAX_TENSOR_BYTES`, one tensor's or all together (`onnx-tensor-too-large`): sparse
    tensors by their dense shape too. Reads dims only; allocates nothing from them.

    Returns:
        The tensors whose values are in external files, with where each is (one walk)."""
    total, external = 0, []
    for tensor, sparse, at in tensors:
        if tensor.data_location == TensorProto.EXTERNAL:
            external.append((tensor, where_text(at)))
        shapes = [(tensor.dims, tensor.data_type, "")]
        if sparse is not None:
            shapes.append((sparse.dims, sparse.values.data_type, " as a dense tensor"))
        for dims, data_type, dense in shapes:
            if not dims:
                continue  # a scalar: one element
            negative = any(d < 0 for d in dims)
            size = 0 if negative else declared_bytes(data_type, dims, MAX_TENSOR_BYTES)
            total += size
            if not negative and total <= MAX_TENSOR_BYTES:
                continue
            where = where_text(at)
            label = f"tensor {tensor.name!r} ({where}) declares the dims {_dims(dims)}{dense}"
            if negative:
                raise ONNXFileError("onnx-tensor-dims", f"{what}: {label}; a dimension is "
                                    "never negative", name=tensor.name, entries=(where,))
            alone = "" if size > MAX_TENSOR_BYTES else \
                ", more than that with the tensors before it"
            raise ONNXFileError(
                "onnx-tensor-too-large", f"{what}: {label}, {_count(size)} bytes{alone}, over "
                f"the limit of {MAX_TENSOR_BYTES} bytes (ncet.onnx.file_limits."
                "MAX_TENSOR_BYTES)", name=tensor.name, entries=(where,))
    return external


def _dims(dims) -> str:
    shown = ", ".join(str(d) for d in dims[:8])
    return f"[{shown}{', ...' if len(dims) > 8 else ''}]"


def _count(n: int) -> str:
    return f"more than {MAX_TENSOR_BYTES}" if n > MAX_TENSOR_BYTES else str(n)
