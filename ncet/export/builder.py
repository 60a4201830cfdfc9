"""The ONNX graph under construction: value names, initializers, nodes and their provenance."""

from __future__ import annotations

import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from ..errors import NCETError
from ..ir import GraphIR, IRNode

ELEMENT_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}
"""The IR dtypes this export writes, with their ONNX element types."""


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


class GraphBuilder:
    """Collects the ONNX nodes, initializers and value names of one export.

    Every value name is unique across graph inputs, initializers and node outputs; a GraphIR
    whose names collide is refused rather than renamed, so names stay the IR's. With `ops`
    (a profile's op set), a node of any other ONNX op type is refused: a pattern that would
    step outside its profile is caught here, whichever pattern it is.
    """

    def __init__(self, ir: GraphIR, batch: int | None, opset: int,
                 ops: frozenset[str] | None = None, profile: str = "canonical"):
        self.ir = ir
        self.opset = opset
        self.ops = ops
        self.profile = profile
        self.batch_dim: int | str = "N" if batch is None else batch
        self.batch = batch
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.names: set[str] = set()
        self.current: IRNode | None = None
        self._counter = 0

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
        array = tensor.detach().cpu().contiguous().numpy()
        self.initializers.append(numpy_helper.from_array(array, name))

    def ints(self, suffix: str, values: list[int]) -> str:
        """A static int64 initializer (shapes, axes, pads) for the current node."""
        name = self.helper_name(suffix)
        self.initializers.append(helper.make_tensor(name, TensorProto.INT64, [len(values)],
                                                    [int(v) for v in values]))
        return name

    def scalar(self, suffix: str, value: float, dtype: str) -> str:
        """A 0-d float initializer of the graph's dtype (a scalar operand or alpha)."""
        name = self.helper_name(suffix)
        array = torch.tensor(value, dtype=getattr(torch, dtype)).numpy()
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def scalar_vector(self, suffix: str, value: float, length: int, dtype: str) -> str:
        """A 1-d float initializer filled with `value` (BatchNormalization's scale of ones or
        bias of zeros where the IR has none: x * 1 and x + 0 are exact)."""
        name = self.helper_name(suffix)
        array = torch.full((length,), value, dtype=getattr(torch, dtype)).numpy()
        self.initializers.append(numpy_helper.from_array(array, name))
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
        self.nodes.append(helper.make_node(
            op, inputs, [output], name=f"{ir_node.name}/{op}/{len(self.nodes)}",
            doc_string=provenance(ir_node), **attrs))
        return output

    def value_info(self, name: str, dtype: str, shape: tuple[int, ...]):
        return helper.make_tensor_value_info(name, ELEMENT_TYPES[dtype],
                                             [self.batch_dim, *shape])
