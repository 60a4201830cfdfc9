"""Tiny ONNX models built with onnx.helper, one ONNX spelling each, for the import tests
(tests/test_onnx_import.py): a graph of named nodes, float inputs of given shapes ("N" a
symbolic batch axis), and initializers of seeded random values."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper, shape_inference

ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float64"): TensorProto.DOUBLE}


def rand(*shape, seed: int = 0, dtype="float32", positive: bool = False) -> np.ndarray:
    """Seeded values of `shape` in [-1, 1] (or [0.5, 1.5] when `positive`)."""
    values = np.random.default_rng(seed).uniform(-1.0, 1.0, shape)
    return (np.abs(values) + 0.5 if positive else values).astype(dtype)


def ints(*values) -> np.ndarray:
    return np.asarray(values, np.int64)


def node(op_type: str, inputs, outputs, name: str | None = None, **attrs):
    """A node named after its first output unless `name` is given ("" for none)."""
    return helper.make_node(op_type, list(inputs), list(outputs),
                            name=outputs[0] if name is None else name, **attrs)


def model(nodes, inputs: dict, outputs, initializers: dict | None = None, *, opset: int = 13,
          dtype="float32", domains=()):
    """A ModelProto: `inputs` name -> dims ("N" symbolic), `outputs` names (shape left to
    onnxruntime), `initializers` name -> array."""
    elem = ELEM[np.dtype(dtype)]
    graph = helper.make_graph(
        list(nodes), "t",
        [helper.make_tensor_value_info(k, elem, list(dims)) for k, dims in inputs.items()],
        [helper.make_tensor_value_info(k, elem, None) for k in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    made = helper.make_model(graph, opset_imports=opsets,
                             ir_version=helper.find_min_ir_version_for(opsets[:1]))
    try:  # the outputs' declared types as ONNX infers them, so the checker accepts the file
        inferred = {v.name: v for v in shape_inference.infer_shapes(made).graph.output}
    except Exception:  # noqa: BLE001 - a model built to be refused may not infer
        return made
    for value in made.graph.output:
        if inferred[value.name].type.tensor_type.HasField("shape"):
            value.type.CopyFrom(inferred[value.name].type)
    return made


def dense(x_shape, nodes, out, inits, **kw):
    """A model of one input x of `x_shape`."""
    return model(nodes, {"x": x_shape}, [out], inits, **kw)


def shape_chain(opset: int):
    """x.view(x.size(0), -1) as exporters write it: Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape (Unsqueeze's axes an attribute before opset 13, an input from 13)."""
    unsqueeze = node("Unsqueeze", ["n", "axes"] if opset >= 13 else ["n"], ["n1"],
                     **({} if opset >= 13 else {"axes": [0]}))
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             unsqueeze,
             node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    inits = {"zero": np.asarray(0, np.int64), "minus_one": ints(-1)}
    if opset >= 13:
        inits["axes"] = ints(0)
    return model(nodes, {"x": ["N", 2, 3, 4]}, ["y"], inits, opset=opset)
