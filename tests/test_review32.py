"""Faults a review of the ONNX import and the VNN-LIB reader found, one test each (each
failed before its fix). onnxruntime and the ONNX operator spec are the oracles: an imported
GraphIR must either be refused or compute what onnxruntime computes on the original file; a
refusal must name what is wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import ncet

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ncet.onnx.import_errors import ONNXImportError  # noqa: E402
from ncet.onnx.onnx_file import ONNXFileError  # noqa: E402

FLOAT = TensorProto.FLOAT
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _vi(name: str, shape, elem=FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _ints(*values) -> np.ndarray:
    return np.asarray(values, np.int64)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "review32", list(inputs), list(outputs),
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


# -- import_patterns: the export's Slice -> Squeeze pattern met by a foreign file ------------


def test_a_slice_squeeze_pattern_with_a_negative_axis_computes_what_onnx_does():
    model = _model(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["p/slice"]),
         helper.make_node("Squeeze", ["p/slice", "q"], ["p"])],
        [_vi("x", ["N", 3, 4])], [_vi("p", None)],
        [_init("s", _ints(1)), _init("e", _ints(2)), _init("a", _ints(2)),
         _init("q", _ints(-1))])
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    want, = _onnxruntime(model, x)
    try:
        ir = ncet.from_onnx(model)
    except ONNXImportError:
        return  # refusing it is honest too
    got = ncet.evaluate(ir, torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    assert np.array_equal(got, want)


def test_a_slice_reshape_pattern_keeps_the_batch_axis_rule():
    model = _model(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["p/slice"]),
         helper.make_node("Reshape", ["p/slice", "t"], ["p"])],
        [_vi("x", ["N", 4])], [_vi("p", None)],
        [_init("s", _ints(0)), _init("e", _ints(2)), _init("a", _ints(1)),
         _init("t", _ints(1, 2))])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code == "onnx-batch-axis"


# -- Slice whose starts, ends and axes do not match -------------------------------------------


def test_a_slice_whose_starts_and_ends_differ_in_length_is_refused():
    model = _model(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])],
        [_vi("x", ["N", 4, 4])], [_vi("y", None)],
        [_init("s", _ints(1, 1)), _init("e", _ints(3)), _init("a", _ints(1, 2))])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code in ("onnx-attribute", "onnx-malformed")


def test_a_slice_that_names_an_axis_twice_is_refused():
    model = _model(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])],
        [_vi("x", ["N", 4])], [_vi("y", None)],
        [_init("s", _ints(1, 2)), _init("e", _ints(3, 4)), _init("a", _ints(1, 1))])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code in ("onnx-attribute", "onnx-malformed", "onnx-indexing")


# -- training mode spelled by older opsets ----------------------------------------------------


def _x(shape=("N", 2)):
    return [_vi("x", list(shape))]


def test_a_dropout_6_in_training_mode_is_refused():
    model = _model([helper.make_node("Dropout", ["x"], ["y"], is_test=0)], _x(),
                   [_vi("y", None)], opset=6)
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code == "onnx-training-mode"


def test_a_batch_normalization_6_in_training_mode_is_refused():
    stats = [_init(k, np.full(2, 0.5, np.float32)) for k in "sbmv"]
    model = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                     is_test=0)], _x(), [_vi("y", None)], stats, opset=6)
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code == "onnx-training-mode"


def test_a_batch_normalization_9_with_its_training_outputs_is_refused():
    stats = [_init(k, np.full(2, 0.5, np.float32)) for k in "sbmv"]
    model = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                     ["y", "rm", "rv", "sm", "sv"])],
                   _x(), [_vi("y", None)], stats, opset=9)
    x = np.random.default_rng(1).uniform(-1, 1, (4, 2)).astype(np.float32)
    try:
        ir = ncet.from_onnx(model)
    except ONNXImportError as error:
        assert error.code == "onnx-training-mode"
        return
    want, = _onnxruntime(model, x)
    got = ncet.evaluate(ir, torch.from_numpy(x)).numpy()
    assert np.allclose(got, want, atol=1e-3)


# -- refusals that name the wrong thing -------------------------------------------------------


def test_maxpool_indices_as_a_graph_output_are_refused_at_the_maxpool():
    model = _model([helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2],
                                     name="pool")],
                   [_vi("x", ["N", 1, 4, 4])],
                   [_vi("y", None), _vi("idx", None, TensorProto.INT64)])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code == "onnx-attribute"
    assert "pool" in str(caught.value) and "indices" in str(caught.value)


def test_a_dropout_mask_as_a_graph_output_is_refused_at_the_dropout():
    model = _model([helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")], _x(),
                   [_vi("y", None), _vi("mask", None, TensorProto.BOOL)])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.code == "onnx-training-mode"
    assert "drop" in str(caught.value)


def test_a_sparse_initializer_operand_is_refused_as_sparse():
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "g",
                              [_vi("x", ["N", 4])], [_vi("y", None)])
    graph.sparse_initializer.append(helper.make_sparse_tensor(
        _init("c", np.array([2.0], np.float32)), _init("c_i", _ints(1)), [4]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises((ONNXImportError, ONNXFileError)) as caught:
        ncet.from_onnx(model)
    assert "sparse" in str(caught.value)
    assert "depends on the graph inputs" not in str(caught.value)


# -- docs ---------------------------------------------------------------------------------


def test_the_docs_say_what_a_constant_of_value_float_does():
    model = _model([helper.make_node("Constant", [], ["c"], value_float=2.5),
                    helper.make_node("Mul", ["x", "c"], ["y"])], _x(), [_vi("y", None)])
    ncet.from_onnx(model)  # imported
    text = (DOCS / "onnx-import.md").read_text()
    assert "are refused today" not in text


# -- refusals without a hint ------------------------------------------------------------------


HINTLESS = [
    ("a zero divisor", "Div", ["x", "c"], np.array([1, 0, 2], np.float32)),
    ("a constant over a tensor", "Div", ["c", "x"], np.array([1, 3, 2], np.float32)),
    ("a NaN constant", "Add", ["x", "c"], np.array([1, np.nan, 2], np.float32)),
    ("a constant of another dtype", "Add", ["x", "c"], np.array([1, 2, 3], np.float64)),
]


@pytest.mark.parametrize("what, op, inputs, constant", HINTLESS, ids=[h[0] for h in HINTLESS])
def test_every_refusal_says_what_to_do(what, op, inputs, constant):
    model = _model([helper.make_node(op, inputs, ["y"])], [_vi("x", ["N", 3])],
                   [_vi("y", None)], [_init("c", constant)])
    with pytest.raises(ONNXImportError) as caught:
        ncet.from_onnx(model)
    assert caught.value.hint


# -- check_onnx of a file without a batch axis whose value is a scalar ------------------------


def test_a_per_sample_scalar_of_a_file_without_a_batch_axis_is_certified():
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
                    helper.make_node("Relu", ["y"], ["z"])],
                   [_vi("x", [3])], [_vi("z", None)], [_init("i", np.array(1, np.int64))])
    ir = ncet.from_onnx(model)
    assert ir.node("y").shape == ()
    report = ncet.check_onnx(ir, model, samples_per_scale=1)
    assert "computes [1]" not in str(report)
    assert report.ok, report


# -- VNN-LIB ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [b"", "(assert (<= 1 2))"], ids=["empty", "no declarations"])
def test_a_property_without_inputs_is_refused(text):
    with pytest.raises(ncet.VNNLIBError):
        ncet.read_vnnlib(text)


def test_a_set_info_string_with_a_parenthesis_is_ignored():
    text = ('(set-info :status "a ) b")\n(declare-const X_0 Real)\n(declare-const Y_0 Real)\n'
            "(assert (>= X_0 0))\n(assert (<= X_0 1))\n(assert (<= Y_0 0))\n")
    prop = ncet.read_vnnlib(text)
    assert (prop.num_inputs, prop.num_outputs) == (1, 1)
