"""How NCET reads an ONNX file (ncet/onnx/onnx_file.py), for check_onnx and lint_onnx alike:
a name defined twice is refused with a stable reason code, since onnxruntime computes with
one definition and a reader may take another; and a tensor is compared by its meaning
(dtype, dims, decoded bytes), whether its values are raw_data, typed fields or external."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ncet

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ncet.onnx.onnx_file import READING_REASONS, ONNXFileError  # noqa: E402
from ncet.onnx.tool_graph import GraphContext  # noqa: E402


def _model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    return ncet.convert(model, (4,))


def _one_ulp(tensor: onnx.TensorProto) -> onnx.TensorProto:
    array = numpy_helper.to_array(tensor).copy()
    array.flat[0] = np.nextafter(array.flat[0], np.float32(np.inf))
    return numpy_helper.from_array(array, tensor.name)


def _first_weight(m) -> onnx.TensorProto:
    return next(t for t in m.graph.initializer if t.name.endswith("weight"))


# --- ambiguous files: each (how, the code, the name and entries the message names) --------

def _duplicate_initializer_first(m):
    weight = _first_weight(m)
    at = list(m.graph.initializer).index(weight)
    m.graph.initializer.insert(0, _one_ulp(weight))  # onnxruntime computes with this one
    return weight.name, ["initializer 0", f"initializer {at + 1}"]


def _duplicate_initializer_last(m):
    weight = _first_weight(m)
    at = list(m.graph.initializer).index(weight)
    m.graph.initializer.append(_one_ulp(weight))
    return weight.name, [f"initializer {at}", f"initializer {len(m.graph.initializer) - 1}"]


def _constant_node_and_initializer(m):
    weight = _first_weight(m)
    m.graph.node.insert(0, helper.make_node("Constant", [], [weight.name],
                                            value=_one_ulp(weight)))
    return weight.name, ["initializer", "node 0 (Constant"]


def _input_shadows_initializer(m):
    weight = _first_weight(m)
    m.graph.input.append(helper.make_tensor_value_info(weight.name, TensorProto.FLOAT,
                                                       list(weight.dims)))
    return weight.name, ["graph input 1", "initializer"]


def _two_nodes_write_one_name(m):
    first = m.graph.node[0]
    m.graph.node.insert(1, helper.make_node("Identity", [first.input[0]], [first.output[0]]))
    return first.output[0], ["node 0", "node 1 (Identity"]


def _a_node_writes_an_initializer(m):
    weight = _first_weight(m)
    m.graph.node.insert(0, helper.make_node("Identity", [m.graph.input[0].name],
                                            [weight.name]))
    return weight.name, ["initializer", "node 0 (Identity"]


def _a_node_writes_a_graph_input(m):
    name = m.graph.input[0].name
    m.graph.node.insert(0, helper.make_node("Neg", [name], [name]))
    return name, ["graph input 0", "node 0 (Neg"]


def _an_input_twice(m):
    m.graph.input.append(m.graph.input[0])
    return m.graph.input[0].name, ["graph input 0", "graph input 1"]


def _sparse_and_dense_initializer(m):
    weight = _first_weight(m)
    values = numpy_helper.from_array(np.array([1.0], np.float32), weight.name)
    indices = numpy_helper.from_array(np.array([0], np.int64), "")
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices,
                                                                list(weight.dims)))
    return weight.name, ["initializer", "sparse initializer 0"]


AMBIGUOUS = [
    (_duplicate_initializer_first, "onnx-duplicate-initializer"),
    (_duplicate_initializer_last, "onnx-duplicate-initializer"),
    (_sparse_and_dense_initializer, "onnx-duplicate-initializer"),
    (_constant_node_and_initializer, "onnx-duplicate-definition"),
    (_a_node_writes_an_initializer, "onnx-duplicate-definition"),
    (_two_nodes_write_one_name, "onnx-duplicate-definition"),
    (_a_node_writes_a_graph_input, "onnx-duplicate-definition"),
    (_an_input_twice, "onnx-duplicate-definition"),
    (_input_shadows_initializer, "onnx-input-shadows-initializer"),
]
_IDS = [f.__name__.strip("_") for f, _ in AMBIGUOUS]


def _ambiguous(tmp_path, seed):
    ir = _model()
    m = ncet.to_onnx(ir)
    name, entries = seed(m)
    path = tmp_path / "ambiguous.onnx"
    path.write_bytes(m.SerializeToString())
    return ir, m, path, name, entries


def _assert_refused(info, code, name, entries):
    error = info.value
    assert error.code == code and code in READING_REASONS
    assert error.name == name and f"[{code}]" in str(error) and repr(name) in str(error)
    assert len(error.entries) >= 2
    for entry in entries:
        assert any(e.startswith(entry) for e in error.entries), (entry, error.entries)
        assert entry in str(error)
    assert isinstance(error, ncet.NCETError)


@pytest.mark.parametrize(("seed", "code"), AMBIGUOUS, ids=_IDS)
def test_check_onnx_refuses_a_name_defined_twice(tmp_path, seed, code):
    ir, m, path, name, entries = _ambiguous(tmp_path, seed)
    for source in (path, m, str(path)):
        with pytest.raises(ONNXFileError) as info:
            ncet.check_onnx(ir, source, samples_per_scale=1)
        _assert_refused(info, code, name, entries)


@pytest.mark.parametrize(("seed", "code"), AMBIGUOUS, ids=_IDS)
def test_lint_onnx_refuses_a_name_defined_twice_alike(tmp_path, seed, code):
    _, m, path, name, entries = _ambiguous(tmp_path, seed)
    for source in (path, m, path.read_bytes()):
        with pytest.raises(ONNXFileError) as info:
            ncet.lint_onnx(source, tool="eran")
        _assert_refused(info, code, name, entries)
    with pytest.raises(ONNXFileError) as info:
        GraphContext.of(m.graph)
    _assert_refused(info, code, name, entries)


def test_onnxruntime_computes_with_one_of_two_initializers():
    # the ambiguity is real: with a second, different initializer of the weight's name,
    # onnxruntime's output is the export's or the other's, and the file alone cannot say
    import onnxruntime as ort

    ir = _model()
    m = ncet.to_onnx(ir)
    weight = _first_weight(m)
    other = numpy_helper.from_array(numpy_helper.to_array(weight) * 4, weight.name)
    x = np.ones((1, 4), np.float32)

    def run(model):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session.run(None, {session.get_inputs()[0].name: x})[0]

    both = onnx.ModelProto()
    both.CopyFrom(m)
    both.graph.initializer.insert(0, other)
    alone = onnx.ModelProto()
    alone.CopyFrom(m)
    alone.graph.initializer.remove(next(t for t in alone.graph.initializer
                                        if t.name == weight.name))
    alone.graph.initializer.append(other)
    assert not np.array_equal(run(m), run(alone))
    assert np.array_equal(run(both), run(m)) or np.array_equal(run(both), run(alone))


def test_an_exported_file_is_not_ambiguous(tmp_path):
    ir = _model()
    for profile in ("canonical", "verifier"):
        path = tmp_path / f"{profile}.onnx"
        ncet.to_onnx(ir, path, profile=profile)
        GraphContext.of(onnx.load(path).graph)
        assert ncet.lint_onnx(path, tool="eran").nodes > 0


# --- tensors by meaning -------------------------------------------------------------------

def _external(tmp_path, m, name="external.onnx"):
    path = tmp_path / name
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=f"{name}.data", size_threshold=0)
    return path


def test_an_export_saved_with_external_data_is_certified(tmp_path):
    ir = _model()
    path = _external(tmp_path, ncet.to_onnx(ir))
    raw = onnx.load(str(path), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in raw.graph.initializer)
    assert ncet.check_onnx(ir, path, samples_per_scale=2).ok  # read from the path
    loaded = onnx.load(str(path))  # resolved by onnx: data_location=DEFAULT set explicitly
    assert all(t.HasField("data_location") for t in loaded.graph.initializer)
    assert ncet.check_onnx(ir, loaded, samples_per_scale=2).ok


def test_a_model_whose_external_data_is_not_loaded_is_refused(tmp_path):
    ir = _model()
    path = _external(tmp_path, ncet.to_onnx(ir))
    raw = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ONNXFileError) as info:
        ncet.check_onnx(ir, raw, samples_per_scale=1)
    assert info.value.code == "onnx-external-data" and "0.weight" in str(info.value)
    (tmp_path / "external.onnx.data").unlink()
    with pytest.raises(ONNXFileError) as info:
        ncet.check_onnx(ir, path, samples_per_scale=1)
    assert info.value.code == "onnx-external-data"


def _explicit_default(m):
    for t in m.graph.initializer:
        t.data_location = TensorProto.DEFAULT


def _float_data(m):
    for t in m.graph.initializer:
        values = numpy_helper.to_array(t)
        t.ClearField("raw_data")
        t.float_data.extend(values.reshape(-1).tolist())


def _docs_and_names(m):
    for t in m.graph.initializer:
        t.doc_string = "a note"


SAME_MEANING = [_explicit_default, _float_data, _docs_and_names]


@pytest.mark.parametrize("rewrite", SAME_MEANING, ids=[f.__name__.strip("_")
                                                       for f in SAME_MEANING])
def test_the_same_values_in_another_encoding_are_the_export(rewrite):
    ir = _model()
    m = ncet.to_onnx(ir)
    rewrite(m)
    report = ncet.check_onnx(ir, m, samples_per_scale=2)
    assert report.ok, report.first_violation


def test_a_one_ulp_change_in_external_data_is_found(tmp_path):
    ir = _model()
    m = ncet.to_onnx(ir)
    weight = _first_weight(m)
    weight.CopyFrom(_one_ulp(weight))
    path = _external(tmp_path, m)
    for source in (path, onnx.load(str(path))):
        report = ncet.check_onnx(ir, source, samples_per_scale=2)
        assert not report.ok
        assert report.first_violation.name == "_0"
        assert f"{weight.name!r} is not the export's" in report.first_violation.note


def test_a_one_ulp_change_in_float_data_is_found():
    ir = _model()
    m = ncet.to_onnx(ir)
    _float_data(m)
    weight = _first_weight(m)
    weight.float_data[0] = float(np.nextafter(np.float32(weight.float_data[0]),
                                              np.float32(np.inf)))
    report = ncet.check_onnx(ir, m, samples_per_scale=2)
    assert not report.ok and report.first_violation.name == "_0"


def test_a_scalar_of_the_other_zero_sign_is_not_the_export():
    from tests.test_compare import Scaled  # l(x) * k, the same weights for every k

    zero, negative = ncet.convert(Scaled(0.0), (4,)), ncet.convert(Scaled(-0.0), (4,))
    report = ncet.check_onnx(zero, ncet.to_onnx(negative), samples_per_scale=2)
    name = next(n.name for n in zero.nodes if n.op_type == "ElementwiseAffine")
    assert not report.ok and report.first_violation.name == name
