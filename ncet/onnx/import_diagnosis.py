"""Stand-in shapes for a diagnosis: when a node is refused, the nodes after it are still
judged on the shapes its outputs would have had, so `diagnose_onnx` names every node outside
the boundary at once. A stand-in comes from ONNX's shape inference, or where that does not
know it, from the op's own shape rule (an elementwise op's broadcast, a MatMul's product, a
ConstantOfShape of shape [N, ...]). Stand-ins never reach a GraphIR: a diagnosis with a
refused node has none."""

from __future__ import annotations

import math

import numpy as np
import onnx

from .import_static import BATCH
from .importer import DTYPES, Importer, Tensor

ELEMENTWISE = frozenset({
    "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Sign", "Cos", "Sin", "Exp", "Log", "Abs",
    "Sqrt", "Erf", "Clip", "Softplus", "HardSigmoid", "Elu", "Selu", "Gelu", "Floor",
    "Ceil", "Round", "Reciprocal", "Mul", "Div", "Add", "Sub", "Pow", "Max", "Min", "Where",
    "Relu", "LeakyRelu", "Identity", "Dropout", "Neg"})
"""Op types whose output has the broadcast shape of their inputs."""

LIGHT_ELEMENTS = 64
"""Shape inference reads each initializer of more elements as a declared input: its type
and shape, not its values (shape, axes and index tensors stay values)."""


def stand_in(imp: Importer, node, name: str) -> Tensor | None:
    """The shape value `name` of a refused `node` would have had, or None."""
    return inferred(imp).get(name) or _batch_filled(imp, node) or \
        _broadcast(imp, node, name)


def inferred(imp: Importer) -> dict[str, Tensor]:
    """ONNX's shape inference on the file, per value (per sample), run once when first
    needed; {} when it fails."""
    if imp.inferred is None:
        imp.inferred = {}
        try:
            graph = onnx.shape_inference.infer_shapes(shapes_only(imp.model)).graph
        except Exception:  # noqa: BLE001 - onnx's inference errors: no stand-ins
            return imp.inferred
        for value in (*graph.value_info, *graph.output):
            tensor = value.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in tensor.shape.dim]
            shape = dims[imp.offset:]
            if tensor.elem_type in DTYPES and dims and all(d for d in shape):
                imp.inferred[value.name] = Tensor(value.name, tuple(shape),
                                                  DTYPES[tensor.elem_type])
    return imp.inferred


def shapes_only(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` for ONNX's shape inference, which serializes the model it is given: each
    initializer of more than `LIGHT_ELEMENTS` elements becomes a graph input of its type and
    shape (the weights are most of a file's bytes, and inference needs their shapes only)."""
    light = onnx.ModelProto(ir_version=max(model.ir_version, 4))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph, out = model.graph, light.graph
    given = {init.name for init in graph.initializer}
    out.node.extend(graph.node)
    out.output.extend(graph.output)
    out.value_info.extend(graph.value_info)
    out.input.extend(v for v in graph.input if v.name not in given)
    for init in graph.initializer:
        if math.prod(init.dims) <= LIGHT_ELEMENTS:
            out.initializer.append(init)
        else:
            out.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type,
                                                                list(init.dims)))
    return light


def _broadcast(imp: Importer, node, name: str) -> Tensor | None:
    known = [imp.values.get(n) for n in node.input if n]
    if name != node.output[0] or not known or \
            not all(isinstance(v, (Tensor, np.ndarray)) for v in known):
        return None
    dtype = next((v.dtype for v in known if isinstance(v, Tensor)), None)
    full = [((1,) if imp.offset else ()) + tuple(v.shape) if isinstance(v, Tensor)
            else tuple(v.shape) for v in known]
    try:
        if node.op_type == "MatMul" and len(full) == 2 and min(map(len, full)) >= 2:
            a, b = full
            shape = (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])
        elif node.op_type in ELEMENTWISE:
            shape = np.broadcast_shapes(*full)
        else:
            return None
    except ValueError:
        return None
    if dtype is None or len(shape) < imp.offset:
        return None
    return Tensor(name, tuple(int(d) for d in shape[imp.offset:]), dtype)


def _batch_filled(imp: Importer, node) -> Tensor | None:
    """A ConstantOfShape of shape [N, ...]: a fixed value per sample, of that shape."""
    shape = imp.values.get(node.input[0]) \
        if node.op_type == "ConstantOfShape" and node.input else None
    if not isinstance(shape, np.ndarray) or shape.ndim != 1 or not len(shape) or \
            shape[0] != BATCH or not imp.offset or (shape[1:] < 1).any():
        return None
    return Tensor(node.output[0], tuple(int(d) for d in shape[1:]), "float32")
