"""from_onnx and diagnose_onnx (issue 32, docs/onnx-import.md) on tiny ONNX models, one row
per ONNX spelling and parameterisation: the canonical op_types it maps onto, onnxruntime
running the file as the oracle (check_onnx, the certified comparison, and a direct
comparison of the outputs), constants bit for bit the file's, provenance pointing into the
file, the batch axis modes; and every refusal with its class and stable reason code, the
first one raised by from_onnx and all of them listed at once by diagnose_onnx."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import numpy_helper

import ncet
from ncet.onnx.import_errors import IMPORT_REASONS, IMPORT_STATUS
from tests.onnx_models import dense, ints, model, node, rand, shape_chain

# -- the oracle --------------------------------------------------------------------------------


def run_onnxruntime(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The file's output on `x` in onnxruntime, graph optimizations off (nothing fused)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def initializer_values(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The file's own fixed values: initializers and Constant nodes' outputs."""
    values = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    forms = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}
    for n in m.graph.node:
        if n.op_type == "Constant":
            a = n.attribute[0]
            values[n.output[0]] = numpy_helper.to_array(a.t) if a.name == "value" else \
                np.asarray(onnx.helper.get_attribute_value(a), forms[a.name])
    return values


def assert_constants_are_the_files(ir, m: onnx.ModelProto, folded=None) -> None:
    """Every IR constant is a file value bit for bit, or one NCET arranges from it as its
    name says (`<value>:transposed`, `:reshaped`) or a summing weight of ones (`:ones`), or
    a value folded from the file's (`folded`, computed here in numpy)."""
    files = {**initializer_values(m), **(folded or {})}
    for name, tensor in ir.constants.items():
        base, _, how = name.partition(":")
        mine = tensor.numpy()
        if how == "ones":
            assert (mine == 1).all(), name
            continue
        theirs = files[base]
        expected = {"": theirs, "transposed": None if theirs.ndim != 2 else theirs.T,
                    "reshaped": theirs.reshape(-1)}[re.sub(r"\d+$", "", how)]
        assert mine.dtype == expected.dtype and mine.shape == expected.shape, name
        assert np.ascontiguousarray(mine).tobytes() == np.ascontiguousarray(expected).tobytes(), \
            f"constant {name!r} is not the file's value bit for bit"


def assert_provenance(ir, m: onnx.ModelProto, label: str = "<model>") -> None:
    """Each operator node's `source` names the ONNX node(s) it computes (name, op type,
    index in `location`), and the last of them writes the value the IR node is named after."""
    for n in ir.nodes:
        if n.op_type in ("Input", "Output"):
            continue
        src = n.source
        assert src.fx_op == "onnx"
        found = re.fullmatch(re.escape(label) + r" nodes? ([\d, ]+)", src.location)
        assert found, src.location
        indices = [int(i) for i in found.group(1).split(", ")]
        onnx_nodes = [m.graph.node[i] for i in indices]
        assert src.fx_name == " + ".join(o.name or f"#{i}" for o, i in zip(onnx_nodes, indices))
        assert src.target == " + ".join(o.op_type for o in onnx_nodes)
        assert n.name in onnx_nodes[-1].output


def assert_same_graph(a, b) -> None:
    """The same nodes, and constants of the same names, bit for bit."""
    assert a.nodes == b.nodes
    assert a.constants.keys() == b.constants.keys()
    for name in a.constants:
        assert a.constants[name].numpy().tobytes() == b.constants[name].numpy().tobytes()


def sample(ir, batch: int = 3, seed: int = 1) -> np.ndarray:
    """Inputs for the file's one input: `batch` samples in [-2, 2] of its per-sample shape."""
    (inp,) = ir.inputs
    shape = ir.node(inp.name).shape
    values = np.random.default_rng(seed).uniform(-2.0, 2.0, (batch, *shape))
    return values.astype(ir.node(inp.name).dtype)


def batch_mode(m: onnx.ModelProto) -> str:
    dims = m.graph.input[0].type.tensor_type.shape.dim
    if dims[0].dim_param:
        return "symbolic"
    return "fixed" if len(dims) >= 2 and dims[0].dim_value == 1 else "none"


def assert_outputs_agree(ir, m: onnx.ModelProto) -> None:
    """evaluate (float64) against onnxruntime running the file (in the file's dtype), on a
    few samples. The certified comparison is check_onnx's; this one only catches a wrong
    meaning (a transposed weight, a moved axis). Tolerance: these models compute at most a
    few dozen products of values below 2 in magnitude, so float32 rounding moves an output by
    far less than 1e-4 (n * 2^-24 * sum|terms| < 100 * 6e-8 * 100); a wrong meaning moves it
    by O(1)."""
    x = sample(ir)
    mode = batch_mode(m)
    fixed = mode != "symbolic"
    expected = np.stack([run_onnxruntime(m, x[i:i + 1] if mode == "fixed" else x[i])
                         for i in range(len(x))]) if fixed else run_onnxruntime(m, x)
    if mode == "fixed":
        expected = expected[:, 0]
    got = ncet.evaluate(ir, torch.from_numpy(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# -- the table of spellings ---------------------------------------------------------------------


@dataclass(frozen=True)
class Spelling:
    """One ONNX spelling: a tiny model, and the op_types its import holds (Input and Output
    left out), in order."""

    id: str
    model: onnx.ModelProto
    op_types: tuple[str, ...]
    folded: dict = field(default_factory=dict)


W34, B3 = rand(3, 4, seed=1), rand(3, seed=2)
IMG = ["N", 2, 6, 6]
CONV_W, CONV_B = rand(4, 2, 3, 3, seed=3), rand(4, seed=4)


def _gemm(**attrs):
    weight = W34 if attrs.get("transB") else W34.T.copy()
    inputs = ["x", "w", "b"] if "no_bias" not in attrs else ["x", "w"]
    attrs.pop("no_bias", None)
    inits = {"w": weight, "b": B3}
    return dense(["N", 4], [node("Gemm", inputs, ["y"], **attrs)], "y", inits)


def _matmul_add(bias_first=False, add=True, x_shape=("N", 4)):
    nodes = [node("MatMul", ["x", "w"], ["h"])]
    if add:
        nodes.append(node("Add", ["b", "h"] if bias_first else ["h", "b"], ["y"]))
    return dense(list(x_shape), nodes, "y" if add else "h", {"w": W34.T.copy(), "b": B3})


def _conv(**attrs):
    groups = attrs.get("group", 1)
    weight = CONV_W[:, :2 // groups]
    return dense(IMG, [node("Conv", ["x", "w", "b"], ["y"], **attrs)], "y",
                 {"w": np.ascontiguousarray(weight), "b": CONV_B})


def _pad_then(op: str, opset: int, **attrs):
    pads = [0, 0, 1, 2, 0, 0, 1, 0] if op == "Conv" else [0, 0, 1, 1, 0, 0, 1, 1]
    pad = node("Pad", ["x"], ["p"], pads=pads) if opset < 11 else \
        node("Pad", ["x", "pads"], ["p"])
    inits = {"pads": ints(*pads)} if opset >= 11 else {}
    if op == "Conv":
        after = node("Conv", ["p", "w"], ["y"], pads=[1, 1, 1, 1])
        inits["w"] = CONV_W
    else:
        after = node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], **attrs)
    return dense(IMG, [pad, after], "y", inits, opset=opset)


def _elementwise(op: str, constant_first=False, constant=None):
    c = rand(2, 3, seed=5, positive=True) if constant is None else constant
    inputs = ["c", "x"] if constant_first else ["x", "c"]
    return dense(["N", 2, 3], [node(op, inputs, ["y"])], "y", {"c": c})


def _two(op: str):
    nodes = [node("Relu", ["x"], ["r"]), node(op, ["x", "r"], ["y"])]
    return dense(["N", 5], nodes, "y", {})


def _one(op: str, x_shape=("N", 2, 3), opset=13, **attrs):
    return dense(list(x_shape), [node(op, ["x"], ["y"], **attrs)], "y", {}, opset=opset)


def _with_input(op, x_shape, name, value, opset=13, **attrs):
    return dense(list(x_shape), [node(op, ["x", name], ["y"], **attrs)], "y", {name: value},
                 opset=opset)


def _slice(opset: int):
    if opset < 10:
        return _one("Slice", ["N", 4, 6], opset=9, starts=[1, 0], ends=[3, 5], axes=[1, 2])
    nodes = [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])]
    inits = {"starts": ints(1, 0), "ends": ints(3, 9_223_372_036_854_775_807),
             "axes": ints(1, -1), "steps": ints(1, 2)}
    return dense(["N", 4, 6], nodes, "y", inits, opset=opset)


def _reduce(op: str, opset: int, keepdims=1, axes=(-1,)):
    if opset >= (18 if op == "ReduceMean" else 13):
        return _with_input(op, ["N", 3, 4], "axes", ints(*axes), opset=opset,
                           keepdims=keepdims)
    return _one(op, ["N", 3, 4], opset=opset, axes=list(axes), keepdims=keepdims)


def _constant_add():
    value = onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])
    nodes = [node("Constant", [], ["c"], value=value), node("Add", ["x", "c"], ["y"])]
    return dense(["N", 3], nodes, "y", {})


C64 = rand(3, seed=6, dtype="float64")


def _cast_constant():
    nodes = [node("Cast", ["c64"], ["c"], to=onnx.TensorProto.FLOAT),
             node("Mul", ["x", "c"], ["y"])]
    return dense(["N", 3], nodes, "y", {"c64": C64})


def _batch_norm(opset: int, x_shape=IMG):
    channels = x_shape[1]
    inits = {"s": rand(channels, seed=7), "b": rand(channels, seed=8),
             "m": rand(channels, seed=9), "v": rand(channels, seed=10, positive=True)}
    return dense(list(x_shape), [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                      epsilon=1e-3)], "y", inits, opset=opset)


SPELLINGS = [
    Spelling("Gemm transB=0", _gemm(), ("Linear",)),
    Spelling("Gemm transB=1", _gemm(transB=1), ("Linear",)),
    Spelling("Gemm alpha=beta=1 transA=0 given", _gemm(transB=1, alpha=1.0, beta=1.0,
                                                       transA=0), ("Linear",)),
    Spelling("Gemm no C", _gemm(transB=1, no_bias=True), ("Linear",)),
    Spelling("Gemm C of shape (1, n)", dense(["N", 4], [node("Gemm", ["x", "w", "b"], ["y"],
                                                             transB=1)], "y",
                                             {"w": W34, "b": B3.reshape(1, 3)}), ("Linear",)),
    Spelling("MatMul alone", _matmul_add(add=False), ("Linear",)),
    Spelling("MatMul + Add", _matmul_add(), ("Linear",)),
    Spelling("MatMul + Add bias first", _matmul_add(bias_first=True), ("Linear",)),
    Spelling("MatMul + Add per-sample rank 2", _matmul_add(x_shape=("N", 2, 4)), ("Linear",)),
    Spelling("MatMul W @ x, no batch axis",
             model([node("MatMul", ["w", "x"], ["y"])], {"x": [4]}, ["y"], {"w": W34}),
             ("Linear",)),
    Spelling("Conv", _conv(pads=[1, 1, 1, 1]), ("Conv2d",)),
    Spelling("Conv strides dilations", _conv(strides=[2, 1], dilations=[1, 2]), ("Conv2d",)),
    Spelling("Conv group=2", _conv(group=2, pads=[0, 1, 0, 1]), ("Conv2d",)),
    Spelling("Conv asymmetric pads", _conv(pads=[0, 1, 2, 0], kernel_shape=[3, 3]),
             ("Conv2d",)),
    Spelling("Conv auto_pad VALID", _conv(auto_pad="VALID"), ("Conv2d",)),
    Spelling("Pad-2 + Conv", _pad_then("Conv", 10), ("Conv2d",)),
    Spelling("Pad-11 + Conv", _pad_then("Conv", 13), ("Conv2d",)),
    Spelling("Pad-11 + AveragePool", _pad_then("AveragePool", 13), ("AvgPool2d",)),
    Spelling("Pad reflect + Conv", dense(
        IMG, [node("Pad", ["x", "p"], ["q"], mode="reflect"), node("Conv", ["q", "w"], ["y"])],
        "y", {"p": ints(0, 0, 1, 1, 0, 0, 1, 1), "w": CONV_W}), ("Conv2d",)),
    Spelling("Pad edge + Conv", dense(
        IMG, [node("Pad", ["x", "p"], ["q"], mode="edge"), node("Conv", ["q", "w"], ["y"])],
        "y", {"p": ints(0, 0, 2, 1, 0, 0, 2, 1), "w": CONV_W}), ("Conv2d",)),
    Spelling("Pad of zeros", _with_input("Pad", ["N", 3], "pads", ints(0, 0, 0, 0)),
             ("Identity",)),
    Spelling("BatchNormalization-9", _batch_norm(9), ("BatchNorm",)),
    Spelling("BatchNormalization-15", _batch_norm(15), ("BatchNorm",)),
    Spelling("BatchNormalization (N, C)", _batch_norm(15, ["N", 3]), ("BatchNorm",)),
    Spelling("Relu", _one("Relu"), ("ReLU",)),
    Spelling("LeakyRelu", _one("LeakyRelu", alpha=0.1), ("LeakyReLU",)),
    Spelling("LeakyRelu default alpha", _one("LeakyRelu"), ("LeakyReLU",)),
    Spelling("LeakyRelu alpha=0", _one("LeakyRelu", alpha=0.0), ("ReLU",)),
    Spelling("Add of two tensors", _two("Add"), ("ReLU", "Add")),
    Spelling("Sub of two tensors", _two("Sub"), ("ReLU", "Sub")),
    Spelling("Add constant", _elementwise("Add"), ("ElementwiseAffine",)),
    Spelling("Add constant first", _elementwise("Add", True), ("ElementwiseAffine",)),
    Spelling("Sub constant", _elementwise("Sub"), ("ElementwiseAffine",)),
    Spelling("Sub from constant", _elementwise("Sub", True), ("ElementwiseAffine",)),
    Spelling("Mul constant", _elementwise("Mul"), ("ElementwiseAffine",)),
    Spelling("Mul constant first", _elementwise("Mul", True), ("ElementwiseAffine",)),
    Spelling("Div constant", _elementwise("Div"), ("ElementwiseAffine",)),
    Spelling("Mul scalar constant", _elementwise("Mul", constant=np.float32(0.25)),
             ("ElementwiseAffine",)),
    Spelling("Div by per-row constant", _elementwise("Div", constant=rand(2, 1, seed=11,
                                                                          positive=True)),
             ("ElementwiseAffine",)),
    Spelling("Add of -0.0 and a subnormal", _elementwise(
        "Add", constant=np.array([[-0.0, 1e-45, 1.0]] * 2, np.float32)),
        ("ElementwiseAffine",)),
    Spelling("Neg", _one("Neg"), ("ElementwiseAffine",)),
    Spelling("Flatten axis=1", _one("Flatten", IMG), ("Flatten",)),
    Spelling("Flatten default axis", _one("Flatten", ["N", 3, 2], opset=9), ("Flatten",)),
    Spelling("Flatten axis=2, no batch axis", _one("Flatten", [3, 2, 4], axis=2),
             ("Reshape",)),
    Spelling("Reshape constant shape [0, -1]",
             _with_input("Reshape", IMG, "shape", ints(0, -1)), ("Reshape",)),
    Spelling("Reshape constant shape [-1, 12, 6]",
             _with_input("Reshape", IMG, "shape", ints(-1, 12, 6)), ("Reshape",)),
    Spelling("Reshape Shape chain, Unsqueeze-11", shape_chain(11), ("Reshape",)),
    Spelling("Reshape Shape chain, Unsqueeze-13", shape_chain(13), ("Reshape",)),
    Spelling("Squeeze-11", _one("Squeeze", ["N", 3, 1, 2], opset=11, axes=[2]),
             ("Reshape",)),
    Spelling("Squeeze-13", _with_input("Squeeze", ["N", 3, 1, 2], "axes", ints(-2)),
             ("Reshape",)),
    Spelling("Unsqueeze-11", _one("Unsqueeze", ["N", 3, 2], opset=11, axes=[1, -1]),
             ("Reshape",)),
    Spelling("Unsqueeze-13", _with_input("Unsqueeze", ["N", 3, 2], "axes", ints(2)),
             ("Reshape",)),
    Spelling("Transpose", _one("Transpose", IMG, perm=[0, 2, 3, 1]), ("Permute",)),
    Spelling("Concat", dense(["N", 3], [node("Relu", ["x"], ["r"]),
                                        node("Concat", ["x", "r"], ["y"], axis=-1)], "y", {}),
             ("ReLU", "Concat")),
    Spelling("Slice-9", _slice(9), ("Slice",)),
    Spelling("Slice-13 axes steps INT64_MAX", _slice(13), ("Slice",)),
    Spelling("Gather one index", _with_input("Gather", ["N", 4, 3], "i", np.asarray(2),
                                             axis=1), ("GetItem",)),
    Spelling("Gather negative index", _with_input("Gather", ["N", 4, 3], "i", np.asarray(-1),
                                                  axis=2), ("GetItem",)),
    Spelling("Gather run", _with_input("Gather", ["N", 4, 3], "i", ints(1, 2, 3), axis=1),
             ("Slice",)),
    Spelling("Gather even spacing", _with_input("Gather", ["N", 5, 3], "i", ints(0, 2, 4),
                                                axis=1), ("Slice",)),
    Spelling("MaxPool", _one("MaxPool", IMG, kernel_shape=[2, 2], strides=[2, 2]),
             ("MaxPool2d",)),
    Spelling("MaxPool pads dilations", _one("MaxPool", IMG, kernel_shape=[3, 3],
                                            pads=[1, 1, 1, 1], dilations=[1, 2]),
             ("MaxPool2d",)),
    Spelling("AveragePool", _one("AveragePool", IMG, kernel_shape=[3, 3], strides=[1, 2]),
             ("AvgPool2d",)),
    Spelling("AveragePool pads count_include_pad=0", _one("AveragePool", IMG,
                                                          kernel_shape=[3, 3],
                                                          pads=[1, 1, 1, 1]), ("AvgPool2d",)),
    Spelling("AveragePool pads count_include_pad=1", _one("AveragePool", IMG,
                                                          kernel_shape=[3, 3],
                                                          pads=[1, 1, 1, 1],
                                                          count_include_pad=1),
             ("AvgPool2d",)),
    Spelling("MaxPool ceil_mode=1", _one("MaxPool", ["N", 1, 5, 5], kernel_shape=[3, 3],
                                         strides=[2, 2], ceil_mode=1), ("MaxPool2d",)),
    Spelling("AveragePool ceil_mode=1 pads", _one("AveragePool", ["N", 1, 7, 7],
                                                  kernel_shape=[3, 3], strides=[2, 2],
                                                  pads=[1, 1, 1, 1], ceil_mode=1),
             ("AvgPool2d",)),
    Spelling("GlobalAveragePool", _one("GlobalAveragePool", IMG), ("AdaptiveAvgPool2d",)),
    Spelling("ReduceMean-13", _reduce("ReduceMean", 13, axes=(1, 2)), ("ReduceMean",)),
    Spelling("ReduceMean-13 keepdims=0", _reduce("ReduceMean", 13, keepdims=0),
             ("ReduceMean",)),
    Spelling("ReduceMean-18", _reduce("ReduceMean", 18, axes=(-1,)), ("ReduceMean",)),
    Spelling("ReduceSum-11 last axis", _reduce("ReduceSum", 11), ("Linear",)),
    Spelling("ReduceSum-13 last axis", _reduce("ReduceSum", 13), ("Linear",)),
    Spelling("Identity", _one("Identity"), ("Identity",)),
    Spelling("Dropout-10", _one("Dropout", opset=10, ratio=0.5), ("Identity",)),
    Spelling("Dropout-13", _with_input("Dropout", ["N", 3], "ratio", np.float32(0.5)),
             ("Identity",)),
    Spelling("Dropout-13 training_mode=False", dense(
        ["N", 3], [node("Dropout", ["x", "r", "t"], ["y"])], "y",
        {"r": np.float32(0.5), "t": np.asarray(False)}), ("Identity",)),
    Spelling("Constant", _constant_add(), ("ElementwiseAffine",)),
    Spelling("Constant value_float", dense(
        ["N", 3], [onnx.helper.make_node("Constant", [], ["c"], name="c", value_float=0.5),
                   node("Mul", ["x", "c"], ["y"])], "y", {}), ("ElementwiseAffine",),
        {"c": np.float32(0.5)}),
    Spelling("Cast of a constant", _cast_constant(), ("ElementwiseAffine",),
             {"c": C64.astype(np.float32)}),  # Cast rounds to nearest, as numpy does
    Spelling("Cast to its own type", _one("Cast", to=onnx.TensorProto.FLOAT), ("Identity",)),
    Spelling("Add of tensors broadcasting within a sample", dense(
        ["N", 3, 1], [node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                      node("Add", ["x", "t"], ["y"])], "y", {}), ("Permute", "Add")),
    # files of batch 1, as most of the corpus is written
    Spelling("batch 1: Gemm", dense([1, 4], [node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
                                    "y", {"w": W34, "b": B3}), ("Linear",)),
    Spelling("batch 1: Conv, Flatten", dense(
        [1, 2, 6, 6], [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                       node("Flatten", ["c"], ["y"])], "y", {"w": CONV_W}),
        ("Conv2d", "Flatten")),
    Spelling("batch 1: Reshape [1, -1]", _with_input("Reshape", [1, 2, 3], "s", ints(1, -1)),
             ("Reshape",)),
    Spelling("batch 1: Reshape [-1, 6]", _with_input("Reshape", [1, 2, 3], "s", ints(-1, 6)),
             ("Reshape",)),
    Spelling("no batch axis: MatMul + Add", dense(
        [4], [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["y"])], "y",
        {"w": W34.T.copy(), "b": B3}), ("Linear",)),
    Spelling("no batch axis: Transpose", _one("Transpose", [3, 2]), ("Permute",)),
    Spelling("Where on constants", dense(
        ["N", 3], [node("Equal", ["k", "minus_one"], ["is"]),
                   node("Where", ["is", "a", "b"], ["c"]), node("Add", ["x", "c"], ["y"])],
        "y", {"k": ints(1, -1, 2), "minus_one": ints(-1), "a": rand(3, seed=12),
              "b": rand(3, seed=13)}), ("ElementwiseAffine",),
        {"c": np.where([False, True, False], rand(3, seed=12), rand(3, seed=13))}),
    Spelling("Expand of a constant", dense(
        ["N", 2, 3], [node("Expand", ["v", "shape"], ["c"]), node("Mul", ["x", "c"], ["y"])],
        "y", {"v": rand(1, 3, seed=14), "shape": ints(2, 1)}), ("ElementwiseAffine",),
        {"c": np.broadcast_to(rand(1, 3, seed=14), (2, 3))}),
]


def _operators(ir) -> tuple[str, ...]:
    return tuple(n.op_type for n in ir.nodes if n.op_type not in ("Input", "Output"))


KNOWN_BUGS: dict[str, str] = {}
"""Rows that fail today for a bug outside this test's reach (none): strict, so a fix shows."""


def _params(cases):
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(
        strict=True, reason=KNOWN_BUGS[c.id])] if c.id in KNOWN_BUGS else [])
        for c in cases]


@pytest.mark.parametrize("case", _params(SPELLINGS))
def test_each_spelling_maps_onto_its_canonical_operators(case):
    ir = ncet.from_onnx(case.model)
    assert _operators(ir) == case.op_types
    assert_outputs_agree(ir, case.model)
    report = ncet.check_onnx(ir, case.model, samples_per_scale=1)
    assert report.ok, report
    assert {e.name for e in report.entries} >= {n.name for n in ir.nodes
                                                 if n.op_type not in ("Input", "Output")}
    assert_constants_are_the_files(ir, case.model, case.folded)
    assert_provenance(ir, case.model)


@pytest.mark.parametrize("case", _params(SPELLINGS))
def test_each_spelling_diagnoses_as_it_imports(case):
    report = ncet.diagnose_onnx(case.model)
    assert report.ok and not report.errors
    assert_same_graph(report.graph, ncet.from_onnx(case.model))
    rows = report.rows[len(report.graph.inputs):]
    assert [r.spelling for r in rows] == [n.op_type for n in case.model.graph.node]
    assert {r.status for r in rows} <= {"mapped", "lifted"}


# -- what the file's nodes become ------------------------------------------------------------


def test_a_fused_matmul_add_is_named_after_the_adds_value():
    m = _matmul_add()
    ir = ncet.from_onnx(m)
    (linear,) = [n for n in ir.nodes if n.op_type == "Linear"]
    assert linear.name == "y"  # the Add's value, where check_onnx compares
    assert linear.source.fx_name == "h + y" and linear.source.target == "MatMul + Add"
    assert linear.source.location == "<model> nodes 0, 1"
    assert linear.attrs["weight"] == "w:transposed" and linear.attrs["bias"] == "b"
    rows = ncet.diagnose_onnx(m).rows
    assert [(r.spelling, r.op_type, r.status) for r in rows[1:]] == [
        ("MatMul", "Linear", "mapped"), ("Add", "Linear", "mapped")]


def test_a_matmul_whose_value_is_read_twice_keeps_its_add_apart():
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["a"]),
             node("Add", ["h", "a"], ["y"])]
    m = dense(["N", 4], nodes, "y", {"w": W34.T.copy(), "b": B3})
    ir = ncet.from_onnx(m)
    assert _operators(ir) == ("Linear", "ElementwiseAffine", "Add")
    assert ncet.check_onnx(ir, m, samples_per_scale=1).ok


def test_gemm_with_transb_keeps_the_initializer_itself():
    ir = ncet.from_onnx(_gemm(transB=1))
    assert set(ir.constants) == {"w", "b"}
    ir = ncet.from_onnx(_gemm())
    assert set(ir.constants) == {"w:transposed", "b"}


def test_a_pad_folded_into_a_conv_adds_its_pads():
    ir = ncet.from_onnx(_pad_then("Conv", 13))
    (conv,) = [n for n in ir.nodes if n.op_type == "Conv2d"]
    # Pad [top 1, left 2, bottom 1, right 0] + Conv pads 1 each; GraphIR's order is
    # [top, bottom, left, right]
    assert conv.attrs["padding"] == [2, 2, 3, 1]
    assert conv.source.target == "Pad + Conv" and conv.source.location == "<model> nodes 0, 1"


def test_unnamed_nodes_are_named_by_index():
    m = dense(["N", 3], [node("Relu", ["x"], ["r"], name=""),
                         node("Neg", ["r"], ["y"], name="")], "y", {})
    ir = ncet.from_onnx(m)
    assert [n.source.fx_name for n in ir.nodes[1:-1]] == ["#0", "#1"]
    assert [n.name for n in ir.nodes[1:-1]] == ["r", "y"]


def test_a_path_names_the_file_in_every_location(tmp_path):
    path = tmp_path / "net.onnx"
    onnx.save(_conv(pads=[1, 1, 1, 1]), path)
    for source in (path, str(path)):
        ir = ncet.from_onnx(source)
        assert_provenance(ir, onnx.load(path), "net.onnx")
    ir = ncet.from_onnx(path.read_bytes())
    assert ir.nodes[1].source.location == "<model> node 0"
    assert ncet.check_onnx(ir, path, samples_per_scale=1).ok


# -- batch axis, dtype -------------------------------------------------------------------------


def _relu_of(dims, dtype="float32"):
    return model([node("Relu", ["x"], ["y"])], {"x": dims}, ["y"], dtype=dtype)


@pytest.mark.parametrize("dims, mode, shape, phrase", [
    (["N", 3, 2], "symbolic", (3, 2), "first axis is symbolic (Nx3x2)"),
    (["batch", 5], "symbolic", (5,), "first axis is symbolic (batchx5)"),
    ([1, 3, 2], "fixed", (3, 2), "first axis is 1 (1x3x2)"),
    ([7], "none", (7,), "no batch axis (7: rank 1"),
    ([1], "none", (1,), "no batch axis (1: rank 1"),
    ([12, 8], "none", (12, 8), "no batch axis (12x8: rank 1"),
])
def test_the_batch_axis_modes(dims, mode, shape, phrase):
    m = _relu_of(dims)
    ir = ncet.from_onnx(m)
    assert ir.node("x").shape == shape
    assert batch_mode(m) == mode
    (note,) = ncet.diagnose_onnx(m).notes
    assert phrase in note
    assert ("per sample, without it" in note) == (mode != "none")
    assert_outputs_agree(ir, m)
    assert ncet.check_onnx(ir, m, samples_per_scale=1).ok


def test_an_unnamed_symbolic_dim_is_a_batch_axis_too():
    m = _relu_of(["N", 3])
    m.graph.input[0].type.tensor_type.shape.dim[0].ClearField("dim_param")
    ir = ncet.from_onnx(m)
    assert ir.node("x").shape == (3,)
    assert "symbolic" in ncet.diagnose_onnx(m).notes[0]


@pytest.mark.parametrize("dims", [["N", 4], [1, 4], [4]], ids=str)
def test_float64_files_stay_float64(dims):
    w, b = rand(4, 3, seed=1, dtype="float64"), rand(3, seed=2, dtype="float64")
    nodes = [node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["h"]),
             node("Relu", ["h"], ["y"])]
    m = model(nodes, {"x": dims}, ["y"], {"w": w, "b": b}, dtype="float64")
    ir = ncet.from_onnx(m)
    assert {n.dtype for n in ir.nodes if n.op_type != "Output"} == {"float64"}
    assert {c.dtype for c in ir.constants.values()} == {torch.float64}
    assert_constants_are_the_files(ir, m)
    assert_outputs_agree(ir, m)
    assert ncet.check_onnx(ir, m, samples_per_scale=1).ok


def test_weights_listed_as_graph_inputs_are_the_initializers():
    """IR version 3 files list every weight among the graph inputs too (acasxu's)."""
    m = _gemm(transB=1)
    for init in m.graph.initializer:
        m.graph.input.append(onnx.helper.make_tensor_value_info(
            init.name, init.data_type, list(init.dims)))
    ir = ncet.from_onnx(m)
    assert [n.name for n in ir.inputs] == ["x"]
    assert_constants_are_the_files(ir, m)
    assert ncet.check_onnx(ir, m, samples_per_scale=1).ok


def test_import_ncet_does_not_import_onnx():
    code = ("import sys, ncet; ncet.ONNXImportError; "
            "print([m for m in ('onnx', 'onnxruntime') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600)
    assert result.stdout.split() == ["[]"], result.stderr


# -- the table of refusals ----------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """A model outside the boundary: the first offending node (by name; "x" a graph input)
    and the reason code from_onnx raises there."""

    id: str
    model: onnx.ModelProto
    at: str
    code: str


def _unary(op, x_shape=("N", 3), opset=13, **attrs):
    return dense(list(x_shape), [node(op, ["x"], ["bad"], **attrs)], "bad", {}, opset=opset)


def _binary(op, first, second, inits, x_shape=("N", 3)):
    nodes = [node("Relu", ["x"], ["r"]), node(op, [first, second], ["bad"])]
    return dense(list(x_shape), nodes, "bad", inits)


def _batch_size_times_two():
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Mul", ["n", "two"], ["bad"]), node("Unsqueeze", ["bad", "axes"], ["n1"]),
             node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    return dense(["N", 2, 3], nodes, "y", {"zero": np.asarray(0, np.int64),
                                            "two": np.asarray(2, np.int64),
                                            "axes": ints(0), "minus_one": ints(-1)})


def _batch_size_as_int32():
    """int32 cannot hold the batch size's stand-in: a Cast to it is refused, not wrapped
    (which made the batch size 1 and the Reshape after it refused for the wrong reason)."""
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Cast", ["n"], ["n32"], to=onnx.TensorProto.INT32),
             node("Cast", ["n32"], ["n64"], to=onnx.TensorProto.INT64),
             node("Unsqueeze", ["n64", "axes"], ["n1"]),
             node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    return dense(["N", 2, 3], nodes, "y", {"zero": np.asarray(0, np.int64), "axes": ints(0),
                                            "minus_one": ints(-1)})


REFUSALS = [
    Refusal("Sigmoid", _unary("Sigmoid"), "bad", "onnx-unsupported-op"),
    Refusal("Softmax", _unary("Softmax", axis=-1), "bad", "onnx-unsupported-op"),
    Refusal("Sign", _unary("Sign"), "bad", "onnx-unsupported-op"),
    Refusal("Cos", _unary("Cos"), "bad", "onnx-unsupported-op"),
    Refusal("Pow", _binary("Pow", "x", "e", {"e": np.float32(2.0)}), "bad",
            "onnx-unsupported-op"),
    Refusal("ArgMax", dense(["N", 3], [node("ArgMax", ["x"], ["bad"], axis=1)], "bad", {}),
            "bad", "onnx-unsupported-op"),
    Refusal("ConvTranspose", dense(IMG, [node("ConvTranspose", ["x", "w"], ["bad"])], "bad",
                                   {"w": CONV_W.transpose(1, 0, 2, 3).copy()}),
            "bad", "onnx-unsupported-op"),
    Refusal("Max of tensors", _binary("Max", "x", "r", {}), "bad", "onnx-unsupported-op"),
    Refusal("a domain op", model([node("Relu", ["x"], ["bad"], domain="com.example")],
                                 {"x": ["N", 3]}, ["bad"], domains=["com.example"]),
            "bad", "onnx-domain"),
    Refusal("Gemm alpha=2", dense(["N", 4], [node("Gemm", ["x", "w"], ["bad"], transB=1,
                                                  alpha=2.0)], "bad", {"w": W34}),
            "bad", "onnx-attribute"),
    Refusal("Gemm beta=0.5", dense(["N", 4], [node("Gemm", ["x", "w", "b"], ["bad"],
                                                   transB=1, beta=0.5)], "bad",
                                   {"w": W34, "b": B3}), "bad", "onnx-attribute"),
    Refusal("Gemm transA=1", dense([4, 1], [node("Gemm", ["x", "w"], ["bad"], transA=1,
                                                 transB=1)], "bad", {"w": W34}),
            "bad", "onnx-batch-axis"),
    Refusal("Gemm with a computed weight", _binary("Gemm", "r", "x", {}, ("N", 3)), "bad",
            "onnx-dynamic-operand"),
    Refusal("Mul of two tensors", _binary("Mul", "x", "r", {}), "bad", "onnx-tensor-tensor"),
    Refusal("Div of two tensors", _binary("Div", "x", "r", {}), "bad", "onnx-tensor-tensor"),
    Refusal("MatMul of two tensors", dense(["N", 3, 3], [node("Relu", ["x"], ["r"]),
                                                         node("MatMul", ["x", "r"], ["bad"])],
                                           "bad", {}), "bad", "onnx-tensor-tensor"),
    Refusal("Div constant over tensor", _binary("Div", "c", "x", {"c": rand(3, seed=1)}),
            "bad", "onnx-constant-over-tensor"),
    Refusal("Div by zero", _binary("Div", "x", "c", {"c": np.asarray([1, 0, 2], np.float32)}),
            "bad", "onnx-zero-divisor"),
    Refusal("Div by a subnormal", _binary("Div", "x", "c", {"c": np.asarray(
        [1, 1e-40, 2], np.float32)}), "bad", "onnx-zero-divisor"),
    Refusal("Add of a broadcasting constant", _binary("Add", "x", "c", {"c": rand(2, 3)}),
            "bad", "onnx-broadcast"),
    Refusal("Add of tensors of two ranks", dense(
        ["N", 3], [node("Unsqueeze", ["x", "a"], ["u"]), node("Add", ["x", "u"], ["bad"])],
        "bad", {"a": ints(1)}), "bad", "onnx-broadcast"),
    Refusal("Add of a NaN constant", _binary("Add", "x", "c", {"c": np.asarray(
        [0, np.nan, 0], np.float32)}), "bad", "onnx-constant-not-finite"),
    Refusal("Mul by a float64 constant", _binary("Mul", "x", "c", {"c": rand(
        3, dtype="float64")}), "bad", "onnx-dtype"),
    Refusal("Cast of a tensor to float64", _unary("Cast", to=onnx.TensorProto.DOUBLE), "bad",
            "onnx-dtype"),
    Refusal("an int64 input", model([node("Cast", ["x"], ["bad"], to=onnx.TensorProto.FLOAT)],
                                    {"x": ["N", 3]}, ["bad"], dtype="float32"), "x",
            "onnx-dtype"),
    Refusal("an input of unknown inner dims", _unary("Relu", ("N", "M")), "x",
            "onnx-input-shape"),
    Refusal("Transpose moving the batch axis", _unary("Transpose", ("N", 3), perm=[1, 0]),
            "bad", "onnx-batch-axis"),
    Refusal("Flatten axis=0", _unary("Flatten", IMG, axis=0), "bad", "onnx-batch-axis"),
    Refusal("Flatten axis=2 merges the batch axis", _unary("Flatten", IMG, axis=2), "bad",
            "onnx-batch-axis"),
    Refusal("Reshape moving the batch axis", dense(IMG, [node("Reshape", ["x", "s"], ["bad"])],
                                                   "bad", {"s": ints(2, -1)}), "bad",
            "onnx-batch-axis"),
    Refusal("Unsqueeze before the batch axis", dense(
        ["N", 3], [node("Unsqueeze", ["x", "a"], ["bad"])], "bad", {"a": ints(0)}), "bad",
        "onnx-batch-axis"),
    Refusal("Squeeze without axes", _unary("Squeeze", ("N", 1, 3)), "bad", "onnx-attribute"),
    Refusal("ReduceMean over every axis", _unary("ReduceMean", ("N", 3)), "bad",
            "onnx-batch-axis"),
    Refusal("ReduceSum of a middle axis", _unary("ReduceSum", ("N", 3, 4), opset=11, axes=[1]),
            "bad", "onnx-attribute"),
    Refusal("ReduceSum keepdims=0", _unary("ReduceSum", ("N", 3, 4), opset=11, axes=[-1],
                                           keepdims=0), "bad", "onnx-attribute"),
    Refusal("Concat with a constant", dense(["N", 3], [node("Concat", ["x", "c"], ["bad"],
                                                            axis=1)], "bad", {"c": rand(1, 3)}),
            "bad", "onnx-concat-constant"),
    Refusal("Gather with scattered indices", _with_input("Gather", ["N", 3], "i", ints(0, 2, 1),
                                                         axis=1), "y", "onnx-indexing"),
    Refusal("Gather of 2-d indices", _with_input("Gather", ["N", 3], "i",
                                                 ints(0, 1).reshape(1, 2), axis=1), "y",
            "onnx-indexing"),
    Refusal("Gather on the batch axis", _with_input("Gather", ["N", 3], "i", ints(0)), "y",
            "onnx-batch-axis"),
    Refusal("Slice with a negative step", dense(
        ["N", 4], [node("Slice", ["x", "s", "e", "a", "k"], ["bad"])], "bad",
        {"s": ints(3), "e": ints(0), "a": ints(1), "k": ints(-1)}), "bad", "onnx-indexing"),
    Refusal("Pad reflect before a Conv that pads too", dense(
        IMG, [node("Pad", ["x", "p"], ["bad"], mode="reflect"),
              node("Conv", ["bad", "w"], ["y"], pads=[1, 1, 1, 1])], "y",
        {"p": ints(0, 0, 1, 1, 0, 0, 1, 1), "w": CONV_W}), "bad", "onnx-pad"),
    Refusal("Pad reflect before a Relu", dense(
        IMG, [node("Pad", ["x", "p"], ["bad"], mode="reflect"), node("Relu", ["bad"], ["y"])],
        "y", {"p": ints(0, 0, 1, 1, 0, 0, 1, 1)}), "bad", "onnx-pad"),
    Refusal("Pad of ones", dense(IMG, [node("Pad", ["x", "p", "v"], ["bad"]),
                                       node("Conv", ["bad", "w"], ["y"])], "y",
                                 {"p": ints(0, 0, 1, 1, 0, 0, 1, 1), "v": np.float32(1.0),
                                  "w": CONV_W}), "bad", "onnx-pad"),
    Refusal("Pad before a Relu", dense(IMG, [node("Pad", ["x", "p"], ["bad"]),
                                             node("Relu", ["bad"], ["y"])], "y",
                                       {"p": ints(0, 0, 1, 1, 0, 0, 1, 1)}), "bad",
            "onnx-pad"),
    Refusal("Dropout in training mode", dense(
        ["N", 3], [node("Dropout", ["x", "r", "t"], ["bad"])], "bad",
        {"r": np.float32(0.5), "t": np.asarray(True)}), "bad", "onnx-training-mode"),
    Refusal("Dropout whose mask is used", dense(
        ["N", 3], [node("Dropout", ["x"], ["bad", "mask"]),
                   node("Cast", ["mask"], ["y"], to=onnx.TensorProto.FLOAT)], "y", {}),
        "bad", "onnx-training-mode"),
    Refusal("BatchNormalization in training mode", dense(
        IMG, [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bad"],
                   training_mode=1)], "bad",
        {"s": rand(2), "b": rand(2), "m": rand(2), "v": rand(2, positive=True)}, opset=15),
        "bad", "onnx-training-mode"),
    Refusal("LeakyRelu alpha=2", _unary("LeakyRelu", alpha=2.0), "bad", "onnx-attribute"),
    Refusal("MaxPool storage_order=1", _unary("MaxPool", IMG, kernel_shape=[2, 2],
                                              storage_order=1), "bad", "onnx-attribute"),
    Refusal("MaxPool auto_pad=SAME_UPPER", _unary("MaxPool", IMG, kernel_shape=[2, 2],
                                                  auto_pad="SAME_UPPER"), "bad",
            "onnx-attribute"),
    Refusal("AveragePool asymmetric pads", _unary("AveragePool", IMG, kernel_shape=[2, 2],
                                                  pads=[0, 0, 1, 1]), "bad",
            "onnx-attribute"),
    Refusal("MaxPool ceil_mode with a window starting in the padding", _unary(
        "MaxPool", ("N", 1, 5, 5), kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
        ceil_mode=1), "bad", "onnx-attribute"),
    Refusal("Conv of a 1-d signal", dense(["N", 2, 6], [node("Conv", ["x", "w"], ["bad"])],
                                          "bad", {"w": rand(4, 2, 3)}), "bad",
            "onnx-attribute"),
    Refusal("arithmetic on the batch size", _batch_size_times_two(), "bad",
            "onnx-static-computation"),
    Refusal("the batch size cast to int32", _batch_size_as_int32(), "n32",
            "onnx-static-computation"),
    Refusal("BatchNormalization without a batch axis", dense(
        [3, 3, 4], [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], "y",
        {"s": rand(3), "b": rand(3), "m": rand(3), "v": rand(3, positive=True)}), "y",
        "onnx-batch-axis"),
    Refusal("Conv of a first axis of 2", dense([2, 2, 6, 6], [node("Conv", ["x", "w"], ["y"])],
                                               "y", {"w": CONV_W}), "y", "onnx-batch-axis"),
    Refusal("MaxPool of a first axis of 2", _unary("MaxPool", (2, 2, 6, 6),
                                                   kernel_shape=[2, 2]), "bad",
            "onnx-batch-axis"),
    # malformed or degenerate nodes: refused with a reason, never a crash
    Refusal("Reshape to a scalar", dense([1, 1], [node("Reshape", ["x", "s"], ["y"])], "y",
                                         {"s": np.zeros(0, np.int64)}), "y",
            "onnx-batch-axis"),
    Refusal("Concat without an axis", dense(["N", 3], [node("Relu", ["x"], ["r"]),
                                                       node("Concat", ["x", "r"], ["y"])],
                                            "y", {}), "y", "onnx-malformed"),
    Refusal("Gather of no index", _with_input("Gather", ["N", 3], "i", np.zeros(0, np.int64),
                                              axis=1), "y", "onnx-indexing"),
    Refusal("Slice without ends", dense(["N", 3], [node("Slice", ["x", "s"], ["y"])], "y",
                                        {"s": ints(1)}), "y", "onnx-malformed"),
    Refusal("Unsqueeze out of range", _with_input("Unsqueeze", ["N", 1], "axes", ints(7)), "y",
            "onnx-attribute"),
    Refusal("Unsqueeze of one axis twice", _with_input("Unsqueeze", ["N", 2], "axes",
                                                       ints(1, 1)), "y", "onnx-attribute"),
    Refusal("Pad of an empty value", dense(IMG, [node("Pad", ["x", "p", "v"], ["bad"]),
                                                 node("Conv", ["bad", "w"], ["y"])], "y",
                                           {"p": ints(0, 0, 1, 1, 0, 0, 1, 1),
                                            "v": np.zeros(0, np.float32), "w": CONV_W}),
            "bad", "onnx-pad"),
    Refusal("a fixed graph output", model([node("Relu", ["x"], ["y"]),
                                           node("Identity", ["c"], ["z"])],
                                          {"x": ["N", 3]}, ["y", "z"], {"c": rand(3)}),
            "output", "onnx-output"),
]


def _int64_input(m: onnx.ModelProto) -> onnx.ModelProto:
    m.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.INT64
    return m


REFUSALS = [Refusal(r.id, _int64_input(r.model), r.at, r.code) if r.id == "an int64 input"
            else r for r in REFUSALS]


def _where(m: onnx.ModelProto, at: str) -> tuple[str, str]:
    """The op type and location an error at `at` names."""
    if at == "output":
        return "graph outputs", "<model> outputs"
    inputs = [i.name for i in m.graph.input]
    if at in inputs:
        return "graph input", f"<model> input {inputs.index(at)}"
    index = next(i for i, n in enumerate(m.graph.node) if n.name == at)
    return m.graph.node[index].op_type, f"<model> node {index}"


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.id)
def test_from_onnx_refuses_the_first_offending_node(case):
    with pytest.raises(ncet.ONNXImportError) as info:
        ncet.from_onnx(case.model)
    error = info.value
    assert isinstance(error, ncet.ConversionError)
    assert error.code == case.code and error.code in IMPORT_REASONS
    spelling, location = _where(case.model, case.at)
    if case.at != "output":
        assert (error.node, error.spelling, error.location) == (case.at, spelling, location)
    else:
        assert error.location == location
    assert f"'{error.node}'" in str(error) and location in str(error)
    assert f"[{case.code}]" in str(error)


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.id)
def test_diagnose_onnx_reports_the_refusal_as_a_row(case):
    report = ncet.diagnose_onnx(case.model)
    assert not report.ok and report.graph is None
    first = report.errors[0]
    assert first.code == case.code and first.status == IMPORT_STATUS[case.code]
    assert first.message == str(first.error)
    assert first.fx_op == "onnx" and first.location == _where(case.model, case.at)[1]


def test_diagnose_onnx_names_every_offending_node_at_once():
    """Three problems in one file, each after the one before: each named with its code and
    hint, and from_onnx raising the first."""
    nodes = [node("Gemm", ["x", "w"], ["scaled"], transB=1, alpha=2.0),   # onnx-attribute
             node("Sigmoid", ["scaled"], ["squashed"]),                   # unsupported
             node("Relu", ["squashed"], ["r"]),
             node("Mul", ["r", "squashed"], ["product"]),                 # tensor-tensor
             node("Relu", ["product"], ["y"])]
    m = dense(["N", 4], nodes, "y", {"w": W34})
    report = ncet.diagnose_onnx(m)
    found = [(r.fx_name, r.spelling, r.status, r.code) for r in report.errors]
    assert found == [("scaled", "Gemm", "boundary", "onnx-attribute"),
                     ("squashed", "Sigmoid", "unsupported", "onnx-unsupported-op"),
                     ("product", "Mul", "boundary", "onnx-tensor-tensor")]
    assert all(r.hint for r in report.errors[:2])
    assert [r.location for r in report.errors] == [f"<model> node {i}" for i in (0, 1, 3)]
    with pytest.raises(ncet.ONNXImportError, match=r"'scaled' \(onnx Gemm, <model> node 0\)"):
        ncet.from_onnx(m)
    assert " ONNX nodes (" in report.summary()
    assert "3 problem(s)" in report.summary()


def test_every_reason_code_is_refused_by_some_row():
    assert {r.code for r in REFUSALS} == set(IMPORT_REASONS)


@pytest.mark.parametrize("module", ["import_layout", "import_conv", "import_static"])
def test_every_refusal_of_the_layout_image_and_static_rules_says_what_to_do(module):
    """Each ImportRejection these rules raise carries a hint (its third argument)."""
    import ast
    from pathlib import Path

    path = Path(ncet.__file__).parent / "onnx" / f"{module}.py"
    bare = [f"{path.name}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ImportRejection"
            and len(n.args) + len(n.keywords) < 3]
    assert not bare, f"refusals without a hint: {bare}"


def test_check_onnx_of_an_import_against_another_file_finds_the_difference():
    """One weight one ulp apart: the certificate names the node whose constant differs."""
    other = _gemm(transB=1)
    w = numpy_helper.to_array(other.graph.initializer[0]).copy()
    w[0, 0] = np.nextafter(w[0, 0], np.float32(2))
    other.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "w"))
    report = ncet.check_onnx(ncet.from_onnx(_gemm(transB=1)), other, samples_per_scale=1)
    assert not report.ok
    assert "constant 'w' differs from the file's value" in str(report)


@pytest.mark.parametrize("case", [c for c in SPELLINGS if c.id in (
    "MatMul + Add", "Pad-11 + Conv", "Reshape Shape chain, Unsqueeze-13", "Cast of a constant")],
    ids=lambda c: c.id)
def test_a_model_given_is_left_as_it_was(case):
    before = case.model.SerializeToString()
    ir = ncet.from_onnx(case.model)
    ncet.diagnose_onnx(case.model)
    ncet.check_onnx(ir, case.model, samples_per_scale=1)
    assert case.model.SerializeToString() == before
