"""The ONNX graph under construction: value names, initializers, nodes and their provenance."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import torch
from onnx import AttributeProto, TensorProto, helper

from ..errors import NCETError
from ..ir import GraphIR, IRNode
from . import wire

RAW_ELEMENT_TYPES = {
    "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8,
    "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}
"""The ONNX element type of each constant dtype of a GraphIR file (ncet.format.header.DTYPES),
all written as raw little-endian bytes, as numpy_helper.from_array writes them."""

ELEMENT_TYPES = {dtype: RAW_ELEMENT_TYPES[dtype] for dtype in ("float32", "float64")}
"""The IR dtypes this export writes, with their ONNX element types."""

_NUMPY_TYPES = {"float32": np.float32, "float64": np.float64}


class ExportError(NCETError):
    """The GraphIR cannot be written exactly in the chosen ONNX profile; the message names the
    node and the reason."""


def refuse(node: IRNode, reason: str) -> ExportError:
    """An ExportError naming `node`, its op_type and provenance, and `reason`."""
    where = f" at {node.source.location}" if node.source.location else ""
    return ExportError(f"cannot export node {node.name!r} ({node.op_type}, "
                       f"{node.source.fx_op} {node.source.target}{where}): {reason}")


def provenance(node: IRNode) -> str:
    """The doc_string of every ONNX node written for `node`."""
    s = node.source
    parts = [f"ncet: {node.op_type} {node.name}", f"fx: {s.fx_name} ({s.fx_op} {s.target})"]
    if s.module_path or s.module_type:
        parts.append(f"module: {s.module_path} ({s.module_type})")
    if s.location:
        parts.append(f"at: {s.location}")
    return "; ".join(parts)


def add_attribute(node: onnx.NodeProto, key: str, value) -> None:
    """Append `key=value` to `node`, as `helper.make_attribute` writes it (the same fields
    set, so the same bytes) for the values patterns use: ints, floats, non-empty lists of
    ints; anything else goes through `make_attribute` itself."""
    kind = type(value)
    if kind is int:
        node.attribute.add(name=key, i=value, type=AttributeProto.INT)
    elif kind is float:
        node.attribute.add(name=key, f=value, type=AttributeProto.FLOAT)
    elif kind is list and value and all(type(v) is int for v in value):
        node.attribute.add(name=key, ints=value, type=AttributeProto.INTS)
    else:
        node.attribute.append(helper.make_attribute(key, value))


class GraphBuilder:
    """Writes the ONNX nodes, initializers and value infos of one export into `graph`, as
    encoded fields (`ncet.onnx.wire`) parsed into it a batch at a time.

    Every value name is unique across graph inputs, initializers and node outputs; a GraphIR
    whose names collide is refused rather than renamed, so names stay the IR's. With `ops`
    (a profile's op set), a node of any other ONNX op type is refused: a pattern that would
    step outside its profile is caught here, whichever pattern it is.

    Each message has the fields `onnx.helper`'s functions set and nothing else (in proto2 a
    field set to its default is still written), so the bytes are theirs
    (tests/test_export_bytes.py rebuilds each proto with the helpers). A constant's bytes are
    referenced, not copied, until its batch is joined; batches of about `BATCH_BYTES` of
    constants or `BATCH_FIELDS` fields come from memory the allocator reuses (one join of
    the whole graph would page-fault through fresh memory as large as the model). The
    graph is complete once `flush()` has parsed the last batch.
    """

    BATCH_BYTES = 1 << 16
    BATCH_FIELDS = 1024

    def __init__(self, ir: GraphIR, batch: int | None, opset: int,
                 ops: frozenset[str] | None = None, profile: str = "canonical",
                 graph: onnx.GraphProto | None = None):
        self.ir = ir
        self.opset = opset
        self.ops = ops
        self.profile = profile
        self.batch_dim: int | str = "N" if batch is None else batch
        self.batch = batch
        self.graph = onnx.GraphProto() if graph is None else graph
        self._pending: list = []
        self._pending_bytes = 0
        self.names: set[str] = set()
        self.current: IRNode | None = None
        self._counter = 0
        self._nodes = 0
        self._doc: tuple[IRNode | None, bytes] = (None, b"")
        self._strings: dict[str, bytes] = {}
        self._types: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._attributes: dict[tuple, bytes] = {}
        self._op_types: dict[str, bytes] = {}
        self._tensor_heads: dict[tuple[int, ...], bytes] = {}

    def claim(self, name: str) -> str:
        if name in self.names:
            node = self.current
            reason = f"the value name {name!r} is used twice (a constant and a node share it)"
            raise refuse(node, reason) if node else ExportError(reason)
        self.names.add(name)
        return name

    def helper_name(self, suffix: str) -> str:
        """A fresh name for a value the current node's pattern needs (`node/suffix`)."""
        return self.claim(f"{self.current.name}/{suffix}")

    def _string(self, value: str) -> bytes:
        """A value name's length and UTF-8 bytes (the payload of a string field), cached:
        each name is written where it is produced and again where it is read."""
        encoded = self._strings.get(value)
        if encoded is None:
            try:
                data = value.encode()
            except UnicodeEncodeError:  # a lone surrogate, which JSON and so a file can hold
                reason = (f"the name {value!r} is not Unicode text (a lone surrogate), and "
                          "ONNX strings are UTF-8")
                error = refuse(self.current, reason) if self.current else ExportError(reason)
                raise error from None
            encoded = self._strings[value] = wire.varint(len(data)) + data
        return encoded

    def _emit(self, chunk: bytes) -> None:
        """Append one encoded graph field; parse the batch into the graph once it is large."""
        pending = self._pending
        pending.append(chunk)
        if len(pending) >= self.BATCH_FIELDS:
            self.flush()

    def flush(self) -> None:
        """Parse every field appended since the last flush into the graph."""
        if self._pending:
            self.graph.MergeFromString(b"".join(self._pending))
            self._pending.clear()
            self._pending_bytes = 0

    def _message(self, field_key: bytes, body: bytes) -> None:
        self._emit(field_key + wire.varint(len(body)) + body)

    def constant(self, name: str, tensor: torch.Tensor, dtype: str, data: memoryview) -> None:
        """One of the IR's constants, as an initializer with the same bytes: `dtype` and
        `data` are its `ncet.format.file.constant_bytes` (little-endian, as ONNX's raw_data;
        its name is not empty, which `save` refuses)."""
        self.claim(name)
        self._raw(name, tensor.shape, RAW_ELEMENT_TYPES[dtype], data)

    def _raw(self, name: str, shape, element: int, data) -> None:
        """An initializer holding the little-endian bytes `data`, with the fields
        `numpy_helper.from_array` sets for a non-empty name: dims, data_type, name, raw_data."""
        key = (element, *shape)
        start = self._tensor_heads.get(key)
        if start is None:  # dims and data_type, the same for every tensor of the shape
            start = self._tensor_heads[key] = b"".join((
                wire.varints(wire.TENSOR_DIMS, shape), wire.TENSOR_DATA_TYPE,
                wire.varint(element), wire.TENSOR_NAME))
        nbytes = data.nbytes
        head = b"".join((start, self._string(name), wire.TENSOR_RAW_DATA, wire.varint(nbytes)))
        self._pending += (wire.GRAPH_INITIALIZER + wire.varint(len(head) + nbytes) + head,
                          data)  # the bytes themselves are copied once, by the join
        self._pending_bytes += nbytes
        if self._pending_bytes >= self.BATCH_BYTES:
            self.flush()

    def ints(self, suffix: str, values: list[int]) -> str:
        """A static int64 initializer (shapes, axes, pads) for the current node."""
        name = self.helper_name(suffix)
        values = [int(v) for v in values]
        if any(not -2**63 <= v < 2**63 for v in values):
            raise refuse(self.current, f"{suffix} {values!r:.80} do not fit ONNX's int64")
        self._message(wire.GRAPH_INITIALIZER, b"".join((
            wire.TENSOR_DIMS, wire.varint(len(values)), wire.TENSOR_DATA_TYPE,
            wire.varint(TensorProto.INT64), wire.TENSOR_NAME, self._string(name),
            wire.varints(wire.TENSOR_INT64_DATA, values))))
        return name

    def scalar(self, suffix: str, value: float, dtype: str) -> str:
        """A 0-d float initializer of the graph's dtype (a scalar operand or alpha)."""
        return self._filled(suffix, (), value, dtype)

    def scalar_vector(self, suffix: str, value: float, length: int, dtype: str) -> str:
        """A 1-d float initializer filled with `value` (BatchNormalization's scale of ones or
        bias of zeros where the IR has none: x * 1 and x + 0 are exact)."""
        return self._filled(suffix, (length,), value, dtype)

    def _filled(self, suffix: str, shape: tuple[int, ...], value: float, dtype: str) -> str:
        if type(value) not in (int, float):  # numpy would make None a NaN
            raise refuse(self.current, f"its {suffix} {value!r:.80} is not a number")
        name = self.helper_name(suffix)
        array = np.full(shape, value, dtype=_NUMPY_TYPES[dtype])
        if sys.byteorder != "little":
            array = array.byteswap()
        self._raw(name, shape, ELEMENT_TYPES[dtype], memoryview(array))
        return name

    def _attribute(self, name: str, value) -> bytes:
        """The encoded attribute field `name=value`, as `add_attribute` writes it; each
        distinct one is encoded once by protobuf (floats keyed by their bits: 0.0 and -0.0
        are equal keys)."""
        kind = type(value)
        if kind is list:  # only lists of ints are keys: [0.0] == [-0.0] and [1] == [1.0]
            key = (name, kind, tuple(value)) if all(type(v) is int for v in value) else None
        elif kind is tuple:
            key = None
        else:
            key = (name, kind, value.hex() if kind is float else value)
        try:
            field = None if key is None else self._attributes.get(key)
        except TypeError:  # an unhashable value: encoded each time
            key, field = None, None
        if field is None:
            proto = onnx.NodeProto()
            try:
                add_attribute(proto, name, value)
            except ValueError:  # protobuf's "Value out of range"
                raise refuse(self.current, f"attribute {name}={value!r:.80} does not fit "
                                           "ONNX's int64") from None
            field = wire.delimited(wire.NODE_ATTRIBUTE, proto.attribute[0].SerializeToString())
            if key is not None:
                self._attributes[key] = field
        return field

    def node(self, op: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        """Append one ONNX node of the current IR node's pattern; returns its output name."""
        ir_node = self.current
        if self.ops is not None and op not in self.ops:
            raise refuse(ir_node, f"its pattern needs ONNX {op}, which is outside the "
                                  f"{self.profile} profile's op set; export with another "
                                  "profile")
        if output is None:
            self._counter += 1
            output = self.helper_name(f"{op}_{self._counter}")
        else:
            self.claim(output)
        if self._doc[0] is not ir_node:  # one doc_string per IR node, shared by its pattern
            doc = provenance(ir_node).encode("utf-8", "backslashreplace")  # a path's surrogates
            self._doc = (ir_node, wire.delimited(wire.NODE_DOC, doc))
        strings = self._strings
        parts = [wire.NODE_INPUT + (strings.get(name) or self._string(name)) for name in inputs]
        parts += (wire.NODE_OUTPUT, strings.get(output) or self._string(output))
        name = f"{ir_node.name}/{op}/{self._nodes}".encode()  # after the output, whose name
        parts += (wire.NODE_NAME, wire.varint(len(name)), name,  # a surrogate would refuse
                  self._op_types.get(op) or self._op_type(op))
        if attrs:
            for key in sorted(attrs):  # make_node's order, None meaning absent
                if attrs[key] is not None:
                    parts.append(self._attribute(key, attrs[key]))
        parts.append(self._doc[1])
        self._nodes += 1
        body = b"".join(parts)
        self._emit(wire.GRAPH_NODE + wire.varint(len(body)) + body)
        return output

    def _op_type(self, op: str) -> bytes:
        field = self._op_types[op] = wire.text(wire.NODE_OP_TYPE, op)
        return field

    def value_info(self, name: str, dtype: str, shape: tuple[int, ...],
                   field_key: bytes) -> None:
        """The ValueInfoProto `helper.make_tensor_value_info` writes for the value `name` of
        per-sample `shape`, as the graph's field `field_key` (`wire.GRAPH_INPUT`,
        `GRAPH_OUTPUT` or `GRAPH_VALUE_INFO`)."""
        if type(shape) is not tuple:  # a list, which save also accepts
            shape = tuple(shape)
        kind = self._types.get((dtype, shape))
        if kind is None:  # one TypeProto per dtype and shape, encoded once
            proto = helper.make_tensor_type_proto(ELEMENT_TYPES[dtype],
                                                  [self.batch_dim, *shape])
            kind = self._types[dtype, shape] = wire.delimited(wire.VALUE_TYPE,
                                                              proto.SerializeToString())
        self._message(field_key, wire.VALUE_NAME + self._string(name) + kind)
