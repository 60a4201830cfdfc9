"""to_onnx builds its protos in place, not through onnx.helper: every file it writes is held
here to the bytes of the same model rebuilt with onnx.helper's functions (make_node,
make_tensor_value_info, numpy_helper.from_array, make_tensor, make_graph, make_model,
set_model_props), the path the export took before (tests/test_graphir_hash.py holds the
GraphIR hash in its metadata)."""

from __future__ import annotations

import dataclasses
import gc

import pytest
import torch

import ncet
from benchmarks.scale import build as build_family
from ncet.examples import EXAMPLES
from ncet.ir import GraphIR
from tests.test_export import OP_ROWS, _seeded
from tests.test_io import linear_ir, raw, special_constants

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ncet.format.file import file_sha256  # noqa: E402
from ncet.onnx import ExportError  # noqa: E402


def _family(name: str, nodes: int):
    model, shape = build_family(name, nodes, 16)
    return lambda: model, [shape]


MODELS = [
    *[(row[0], row[1], row[2]) for row in OP_ROWS],
    *[(name, e.build, list(e.input_shapes)) for name, e in EXAMPLES.items() if e.converts],
    ("scale-mlp", *_family("mlp", 60)),
    ("scale-resnet", *_family("resnet", 60)),
]
"""(id, builder, per-sample input shapes): every op row, the bundled examples, and small
models of both benchmarks/scale.py families."""


def _value_info(info):
    dims = [d.dim_param if d.HasField("dim_param") else d.dim_value
            for d in info.type.tensor_type.shape.dim]
    return helper.make_tensor_value_info(info.name, info.type.tensor_type.elem_type, dims)


def _initializer(tensor):
    if tensor.data_type == TensorProto.INT64 and not tensor.HasField("raw_data"):
        return helper.make_tensor(tensor.name, TensorProto.INT64, list(tensor.dims),
                                  [int(v) for v in tensor.int64_data])
    return numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name)


def rebuilt_with_helpers(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` rebuilt field by field through onnx.helper, as to_onnx once built it."""
    g = model.graph
    nodes = [helper.make_node(n.op_type, list(n.input), list(n.output), name=n.name,
                              doc_string=n.doc_string,
                              **{a.name: helper.get_attribute_value(a) for a in n.attribute})
             for n in g.node]
    graph = helper.make_graph(nodes, g.name, [_value_info(v) for v in g.input],
                              [_value_info(v) for v in g.output],
                              [_initializer(t) for t in g.initializer], doc_string=g.doc_string,
                              value_info=[_value_info(v) for v in g.value_info])
    opsets = [helper.make_opsetid(o.domain, o.version) for o in model.opset_import]
    rebuilt = helper.make_model(graph, opset_imports=opsets,
                                ir_version=helper.find_min_ir_version_for(opsets),
                                producer_name=model.producer_name,
                                producer_version=model.producer_version)
    helper.set_model_props(rebuilt, {p.key: p.value for p in model.metadata_props})
    return rebuilt


def _exports(build, shapes, dtype):
    ir = ncet.convert(_seeded(build).to(dtype), *shapes, dtype=dtype)
    for profile, batch, opset in (("canonical", None, None), ("canonical", 3, 18),
                                  ("verifier", None, None), ("verifier", None, 21)):
        try:
            yield ir, ncet.to_onnx(ir, profile=profile, batch=batch, opset=opset)
        except ExportError:  # a refusal (tests/test_export_verifier.py checks which)
            continue


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", MODELS, ids=lambda c: c[0])
def test_the_bytes_are_those_onnx_helper_builds(case, dtype):
    _, build, shapes = case
    exports = list(_exports(build, shapes, dtype))
    assert exports or dtype == torch.float64, "every float32 row exports in some profile"
    for _, model in exports:
        data = model.SerializeToString()
        assert data == rebuilt_with_helpers(model).SerializeToString()
        assert onnx.load_from_string(data).SerializeToString() == data


def test_file_sha256_refuses_what_save_refuses():
    with pytest.raises(TypeError, match="file_sha256\\(\\) expects a GraphIR"):
        file_sha256("net.ncet")
    ir = ncet.convert(_seeded(lambda: torch.nn.Linear(3, 2)), (3,))
    odd = ncet.ir.GraphIR(ir.nodes, {**ir.constants, "extra": torch.zeros(2).to_sparse()})
    with pytest.raises(ValueError, match="cannot save constant 'extra'"):
        file_sha256(odd)
    with pytest.raises(ExportError, match="cannot export a GraphIR that cannot be saved"):
        ncet.to_onnx(odd)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_export_leaves_the_garbage_collector_as_it_was(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        ir = ncet.convert(_seeded(EXAMPLES["mlp"].build), *EXAMPLES["mlp"].input_shapes)
        ncet.to_onnx(ir)
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_constants_of_every_file_dtype_are_written_with_their_bytes():
    """Constants of every dtype a GraphIR file holds (NaN payloads, -0.0, subnormals, an
    empty, a 0-d and a transposed tensor among them), unused by the graph, are initializers
    of their ONNX element type with the tensor's own bytes, as numpy_helper writes them."""
    ir = linear_ir()
    odd = special_constants()
    exported = ncet.to_onnx(GraphIR(ir.nodes, {**ir.constants, **odd}))
    data = exported.SerializeToString()
    assert data == rebuilt_with_helpers(exported).SerializeToString()
    written = {t.name: t for t in exported.graph.initializer}
    for name, tensor in {**ir.constants, **odd}.items():
        proto = written[name]
        assert list(proto.dims) == list(tensor.shape), name
        assert proto.raw_data == raw(tensor), name


@pytest.mark.parametrize(("attrs", "refusal"), [
    ({"index": [2**63 - 1]}, "ends .* do not fit ONNX's int64"),  # the stop is start + 1
    ({"index": [[0, 2**63, 1]]}, "cannot be saved"),  # not an int64 to save either
], ids=["int-index", "slice-stop"])
def test_an_int64_initializer_that_does_not_fit_is_refused(attrs, refusal):
    ir = linear_ir()
    sliced = GraphIR(tuple(dataclasses.replace(n, op_type="GetItem", attrs=attrs)
                           if n.name == "relu" else n for n in ir.nodes), ir.constants)
    with pytest.raises(ExportError, match=refusal):
        ncet.to_onnx(sliced)


def _converted(model, shape):
    return ncet.convert(_seeded(lambda: model), shape)


def _replaced(ir, name, **changes):
    return GraphIR(tuple(dataclasses.replace(n, **changes) if n.name == name else n
                         for n in ir.nodes), ir.constants)


def test_an_int_eps_or_slope_is_a_float_attribute():
    # save's "float" kind takes ints; ONNX's epsilon and alpha are FLOAT attributes
    ir = _converted(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                                        torch.nn.LeakyReLU(0.5)), (4,))
    bn = next(n for n in ir.nodes if n.op_type == "BatchNorm")
    leaky = next(n for n in ir.nodes if n.op_type == "LeakyReLU")
    ir = _replaced(_replaced(ir, bn.name, attrs={**bn.attrs, "eps": 0}), leaky.name,
                   attrs={"negative_slope": 1})
    for profile in ("canonical", "verifier"):
        model = ncet.to_onnx(ir, profile=profile)
        onnx.checker.check_model(model, full_check=True)
        kinds = {a.name: a.type for n in model.graph.node for a in n.attribute}
        assert kinds["epsilon"] == kinds["alpha"] == onnx.AttributeProto.FLOAT


@pytest.mark.parametrize(("change", "refusal"), [
    (lambda ir: _replaced(ir, "relu", op_type="ElementwiseAffine", attrs={
        "kind": "add", "tensor_position": 0, "scalar": None, "constant": None, "alpha": 1.0}),
     "its scalar None is not a number"),
    (lambda ir: _replaced(ir, "relu", op_type="Concat", attrs={"axis": 2**63 - 1}),
     "axis=9223372036854775808 does not fit ONNX's int64"),
    (lambda ir: _replaced(ir, "relu", op_type="Transpose", attrs={"dim0": 5, "dim1": 0}),
     "its pattern failed on its attributes and shapes \\(IndexError"),
], ids=["affine-without-operand", "attribute-past-int64", "transpose-past-the-rank"])
def test_a_saveable_graph_that_does_not_compute_is_refused_with_the_node(change, refusal,
                                                                       tmp_path):
    odd = change(linear_ir())
    ncet.save(odd, tmp_path / "g.ncet", verify=False)  # the format takes it, not the meaning
    with pytest.raises(ValueError, match="cannot save this GraphIR: node 'relu'"):
        ncet.save(odd, tmp_path / "g.ncet")  # save's meaning check, as load's
    with pytest.raises(ExportError, match=f"cannot export node 'relu'.*{refusal}"):
        ncet.to_onnx(odd)


def test_a_constant_with_the_negative_bit_is_written_with_its_values():
    ir = linear_ir()
    weight = ir.constants["fc.weight"]
    flagged = (-weight)._neg_view()  # the values of weight, behind the negative bit
    conjugated = torch.complex(weight, weight).conj().imag  # -weight, the same way
    assert flagged.is_neg() and conjugated.is_neg()
    for tensor, values in ((flagged, weight), (conjugated, -weight)):
        exported = ncet.to_onnx(GraphIR(ir.nodes, {**ir.constants, "fc.weight": tensor}))
        written = {t.name: t for t in exported.graph.initializer}["fc.weight"]
        assert written.raw_data == raw(values)


def test_forms_save_accepts_export_as_the_plain_ones():
    ir = _converted(torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ReLU()),
                    (2, 5, 5))
    odd = GraphIR(tuple(dataclasses.replace(
        n, shape=None if n.shape is None else (list(n.shape) if i % 2 else torch.Size(n.shape)),
        attrs={k: tuple(v) if isinstance(v, list) else v for k, v in n.attrs.items()})
        for i, n in enumerate(ir.nodes)), ir.constants)
    assert ncet.to_onnx(odd).SerializeToString() == ncet.to_onnx(ir).SerializeToString()
