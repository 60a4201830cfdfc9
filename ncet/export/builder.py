"""The ONNX graph under construction: value names, initializers, nodes and their provenance."""

from __future__ import annotations

import sys

import onnx
import torch
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from ..errors import NCETError
from ..ir import GraphIR, IRNode

ELEMENT_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}
"""The IR dtypes this export writes, with their ONNX element types."""

_RAW_TYPES = {torch.float32: TensorProto.FLOAT, torch.float64: TensorProto.DOUBLE}
"""Constant dtypes written directly as raw little-endian bytes (others go through
`numpy_helper.from_array`, which gives the same fields)."""


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
    """Writes the ONNX nodes, initializers and value infos of one export into `graph`.

    Every value name is unique across graph inputs, initializers and node outputs; a GraphIR
    whose names collide is refused rather than renamed, so names stay the IR's. With `ops`
    (a profile's op set), a node of any other ONNX op type is refused: a pattern that would
    step outside its profile is caught here, whichever pattern it is.

    The protos are built in place (`graph.node.add(...)`), not by `onnx.helper`'s functions
    and `make_graph`'s copies, with the fields those functions set and nothing else, so the
    bytes are theirs (tests/test_export_bytes.py rebuilds each proto with the helpers).
    """

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
        self.names: set[str] = set()
        self.current: IRNode | None = None
        self._counter = 0
        self._doc: tuple[IRNode | None, str] = (None, "")
        self._types: dict[tuple[str, tuple[int, ...]], onnx.TypeProto] = {}

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

    def constant(self, name: str, tensor: torch.Tensor) -> None:
        """One of the IR's constants, as an initializer with the same bytes."""
        self.claim(name)
        t = (tensor.detach() if tensor.requires_grad else tensor).cpu().contiguous()
        element = _RAW_TYPES.get(t.dtype)
        if element is None or not name or sys.byteorder != "little":
            self.graph.initializer.append(numpy_helper.from_array(t.numpy(), name))
            return
        self.graph.initializer.add(dims=t.shape, name=name, raw_data=t.numpy().tobytes(),
                                   data_type=element)

    def _raw(self, name: str, array: torch.Tensor) -> None:
        """A float initializer of the graph's dtype holding `array`'s bytes."""
        self.graph.initializer.add(dims=array.shape, name=name,
                                   raw_data=array.numpy().tobytes(),
                                   data_type=_RAW_TYPES[array.dtype])

    def ints(self, suffix: str, values: list[int]) -> str:
        """A static int64 initializer (shapes, axes, pads) for the current node."""
        name = self.helper_name(suffix)
        self.graph.initializer.add(data_type=TensorProto.INT64, name=name,
                                   dims=[len(values)], int64_data=[int(v) for v in values])
        return name

    def scalar(self, suffix: str, value: float, dtype: str) -> str:
        """A 0-d float initializer of the graph's dtype (a scalar operand or alpha)."""
        name = self.helper_name(suffix)
        self._raw(name, torch.tensor(value, dtype=getattr(torch, dtype)))
        return name

    def scalar_vector(self, suffix: str, value: float, length: int, dtype: str) -> str:
        """A 1-d float initializer filled with `value` (BatchNormalization's scale of ones or
        bias of zeros where the IR has none: x * 1 and x + 0 are exact)."""
        name = self.helper_name(suffix)
        self._raw(name, torch.full((length,), value, dtype=getattr(torch, dtype)))
        return name

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
            self._doc = (ir_node, provenance(ir_node))
        nodes = self.graph.node
        proto = nodes.add(op_type=op, input=inputs, output=[output],
                          name=f"{ir_node.name}/{op}/{len(nodes)}", doc_string=self._doc[1])
        for key in sorted(attrs):  # make_node's order, None meaning absent
            if attrs[key] is not None:
                add_attribute(proto, key, attrs[key])
        return output

    def value_info(self, name: str, dtype: str, shape: tuple[int, ...],
                   into=None) -> onnx.ValueInfoProto:
        """The ValueInfoProto `helper.make_tensor_value_info` writes for the value `name` of
        per-sample `shape`, appended to `into` (a repeated field of the graph)."""
        key = (dtype, shape)
        kind = self._types.get(key)
        if kind is None:  # one TypeProto per dtype and shape, copied into each value
            kind = self._types[key] = helper.make_tensor_type_proto(
                ELEMENT_TYPES[dtype], [self.batch_dim, *shape])
        return (into.add(name=name, type=kind) if into is not None
                else onnx.ValueInfoProto(name=name, type=kind))
