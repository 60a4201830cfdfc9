"""ncet.to_onnx, canonical profile (docs/export.md): every op_type and bundled example exported,
checked by onnx's checker and strict shape inference, and run in onnxruntime against the eager
model (PyTorch is the oracle), at batch 1 and 3 with the symbolic batch axis. The verifier
profile's tests are tests/test_export_verifier.py, on the same rows and helper."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.examples import EXAMPLES
from ncet.format.digest import hash_graphir
from ncet.ir import GraphIR
from tests.conftest import Fn, Fn2
from tests.zoo_models import CONVERTS, ZOO

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ncet.onnx import PROFILES, ExportError  # noqa: E402

# Every graph here is a handful of nodes with fan-in below 1,000 and values of order 1, so
# PyTorch's and onnxruntime's float32 results differ by a few roundings per dot product
# (relative 1e-7 each, any summation order, with or without FMA): rtol 1e-4 and atol 1e-5
# bound that on any CPU with three orders of magnitude to spare, and are still far below
# what any translation fault (a wrong weight, pad or axis) changes. float64 is held to 1e-10.
TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}


def _bn(channels, affine=True, dim=2, eps=1e-5):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = (nn.BatchNorm1d if dim == 1 else nn.BatchNorm2d)(channels, eps=eps, affine=affine)
        layer.running_mean.normal_(0.0, 0.2)
        layer.running_var.uniform_(0.5, 2.0)
        if affine:
            layer.weight.data.uniform_(0.5, 1.5)
            layer.bias.data.normal_(0.0, 0.1)
    return layer


def _seeded(build):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build().eval()


CONV = (3, 6, 6)
# (id, model builder, per-sample input shapes, the op_types the IR must contain)
OP_ROWS = [
    ("linear", lambda: nn.Linear(5, 4), [(5,)], {"Linear"}),
    ("linear-rank3", lambda: nn.Linear(5, 4), [(2, 3, 5)], {"Linear"}),
    ("linear-no-bias", lambda: nn.Linear(5, 4, bias=False), [(3, 5)], {"Linear"}),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=1), [CONV], {"Conv2d"}),
    ("conv2d-groups-dilation", lambda: nn.Conv2d(4, 4, 2, dilation=2, groups=2, bias=False),
     [(4, 6, 6)], {"Conv2d"}),
    ("conv2d-same-asymmetric", lambda: nn.Conv2d(3, 2, 4, padding="same"), [CONV],
     {"Conv2d"}),
    *[(f"conv2d-{mode}", lambda mode=mode: nn.Conv2d(3, 2, 3, padding=1, padding_mode=mode),
       [CONV], {"Conv2d"}) for mode in ("reflect", "replicate", "circular")],
    ("batchnorm2d", lambda: _bn(3), [CONV], {"BatchNorm"}),
    # eps a float32 value, so that the float64 export below can keep it exactly
    ("batchnorm1d-no-affine", lambda: _bn(3, affine=False, dim=1, eps=2**-16), [(3, 4)],
     {"BatchNorm"}),
    ("adaptive-avg-pool-global", lambda: nn.AdaptiveAvgPool2d(1), [CONV], {"AdaptiveAvgPool2d"}),
    ("adaptive-avg-pool-3", lambda: nn.AdaptiveAvgPool2d(3), [CONV], {"AdaptiveAvgPool2d"}),
    ("avg-pool", lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), [CONV],
     {"AvgPool2d"}),
    ("avg-pool-include-pad", lambda: nn.AvgPool2d(2, 2, 1), [CONV], {"AvgPool2d"}),
    ("avg-pool-ceil", lambda: nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False),
     [(3, 5, 5)], {"AvgPool2d"}),
    ("max-pool", lambda: nn.MaxPool2d(3, 2, 1, dilation=1), [CONV], {"MaxPool2d"}),
    ("max-pool-dilation-ceil", lambda: nn.MaxPool2d(2, 2, dilation=2, ceil_mode=True),
     [(3, 7, 7)], {"MaxPool2d"}),
    ("identity", lambda: nn.Identity(), [(4,)], {"Identity"}),
    ("relu", lambda: nn.ReLU(), [(4,)], {"ReLU"}),
    ("leaky-relu", lambda: nn.LeakyReLU(0.1), [(4,)], {"LeakyReLU"}),
    ("flatten", lambda: nn.Flatten(), [CONV], {"Flatten"}),
    ("flatten-partial", lambda: nn.Flatten(2, 3), [CONV], {"Flatten"}),
    ("add", lambda: Fn2(lambda m, x, y: x + y), [(3, 4), (3, 4)], {"Add"}),
    ("add-alpha", lambda: Fn2(lambda m, x, y: torch.add(x, y, alpha=0.3)), [(4,), (4,)],
     {"Add"}),
    ("sub-alpha", lambda: Fn2(lambda m, x, y: torch.sub(x, y, alpha=2.5)), [(4,), (4,)],
     {"Sub"}),
    ("affine-scalars", lambda: Fn(lambda m, x: (0.5 - (x * 3.0 + 1.25)) / 7.0), [(4,)],
     {"ElementwiseAffine"}),
    ("affine-alpha", lambda: Fn(lambda m, x: torch.sub(x, 2.0, alpha=0.1)), [(4,)],
     {"ElementwiseAffine"}),
    ("affine-constants", lambda: Fn(lambda m, x: (x - m.mean) / m.std * m.w + m.b,
                                    mean=torch.rand(3, 1, 1), std=torch.rand(3, 1, 1) + 0.5,
                                    w=torch.randn(3, 1, 1), b=torch.randn(6)),
     [CONV], {"ElementwiseAffine"}),
    ("concat", lambda: Fn(lambda m, x: torch.cat([x, x * 2.0], 1)), [(2, 3)], {"Concat"}),
    ("reduce-mean", lambda: Fn(lambda m, x: x.mean((2, 3), keepdim=True) + x.mean(1, True)), [CONV],
     {"ReduceMean"}),
    ("reshape", lambda: Fn(lambda m, x: x.unsqueeze(2).squeeze(1)), [(1, 9)], {"Reshape"}),
    ("permute", lambda: Fn(lambda m, x: x.permute(0, 2, 3, 1)), [CONV], {"Permute"}),
    ("transpose", lambda: Fn(lambda m, x: x.transpose(1, 2)), [CONV], {"Transpose"}),
    ("getitem", lambda: Fn(lambda m, x: x[:, 1, 2]), [CONV], {"GetItem"}),
    ("slice", lambda: Fn(lambda m, x: x[:, 1:3, None, ::2, 4]), [CONV], {"Slice"}),
    ("slice-empty-index", lambda: Fn(lambda m, x: x[:, ...] + 1.0), [(4,)], {"Slice"}),
    ("outputs-input-and-twice", lambda: Fn(lambda m, x: (lambda y: (x, y, y))(torch.relu(x))),
     [(4,)], {"ReLU"}),
]

EXAMPLE_ROWS = [(name, e.build, list(e.input_shapes), set())
                for name, e in EXAMPLES.items() if e.converts]
ZOO_ROWS = [(f"zoo-{e.name}", e.factory, list(e.shapes), set())
            for e in ZOO if e.as_written == CONVERTS]


def _export_and_run(build, shapes, dtype=torch.float32, batch=None, rewrite=False,
                    profile="canonical", opset=None):
    """Convert, export, check, and run in onnxruntime against the eager model: at `batch`,
    at the profile's fixed batch, or at 1 and 3 on the symbolic batch axis (at `opset`, the
    profile's default when None)."""
    model = _seeded(build).to(dtype)
    ir = ncet.convert(model, *shapes, dtype=dtype, rewrite=rewrite)
    exported = ncet.to_onnx(ir, batch=batch, profile=profile, opset=opset)
    onnx.checker.check_model(exported, full_check=True)
    onnx.shape_inference.infer_shapes(exported, strict_mode=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exported.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    rtol, atol = TOLERANCE[str(dtype).removeprefix("torch.")]
    fixed = batch or PROFILES[profile].fixed_batch
    for n in ([fixed] if fixed else [1, 3]):
        generator = torch.Generator().manual_seed(n)
        xs = [torch.randn(n, *s, generator=generator, dtype=dtype) for s in shapes]
        feed = {name: x.numpy().copy() for name, x in zip(names, xs)}  # before the model,
        with torch.no_grad():                                              # which may write
            expected = model(*xs)                                          # its inputs
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = session.run(None, feed)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape) and g.dtype == e.numpy().dtype
            np.testing.assert_allclose(g, e.numpy(), rtol=rtol, atol=atol)
    return ir, exported


@pytest.mark.parametrize("case", OP_ROWS + EXAMPLE_ROWS + ZOO_ROWS, ids=lambda c: c[0])
def test_export_runs_in_onnxruntime_like_the_eager_model(case):
    _, build, shapes, op_types = case
    ir, _ = _export_and_run(build, shapes)
    assert op_types <= {n.op_type for n in ir.nodes}


@pytest.mark.parametrize("entry", [e for e in ZOO if e.as_written != CONVERTS
                                   and e.with_rewrite == CONVERTS], ids=lambda e: e.name)
def test_zoo_models_converted_with_rewrites_export_too(entry):
    """`x.view(x.size(0), -1)` made static by the rewrites is one Reshape, no Shape/Gather."""
    _, exported = _export_and_run(entry.factory, list(entry.shapes), rewrite=True)
    assert not any(n.op_type in ("Shape", "Gather") for n in exported.graph.node)


def test_every_operator_op_type_has_a_row():
    from ncet.onnx.patterns import PATTERNS

    covered = set().union(*(row[3] for row in OP_ROWS))
    assert covered == set(PATTERNS) == set(ncet.ir.OP_SCHEMAS) - {"Input", "Output"}


# onnxruntime's CPU provider has float64 kernels for these (not for Conv, the pools or
# LeakyRelu, whose float64 export is checked by onnx's own reference evaluator below).
@pytest.mark.parametrize("case", [r for r in OP_ROWS if r[0] in (
    "linear", "linear-rank3", "batchnorm1d-no-affine", "add-alpha", "affine-constants",
    "concat", "reduce-mean", "slice", "max-pool")], ids=lambda c: c[0])
def test_float64_exports_run_in_float64(case):
    _export_and_run(case[1], case[2], dtype=torch.float64)


@pytest.mark.parametrize("name", ["leaky-relu", "conv2d-reflect", "avg-pool"])
def test_float64_exports_agree_in_onnx_reference_evaluator(name):
    from onnx.reference import ReferenceEvaluator

    _, build, shapes, _ = next(r for r in OP_ROWS if r[0] == name)
    model = _seeded(build).double()
    exported = ncet.to_onnx(ncet.convert(model, *shapes, dtype=torch.float64))
    onnx.checker.check_model(exported, full_check=True)
    x = torch.randn(3, *shapes[0], dtype=torch.float64)
    (got,) = ReferenceEvaluator(exported).run(None, {"x": x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-10, atol=1e-12)


def test_a_fixed_batch_is_written_into_every_shape():
    _, exported = _export_and_run(EXAMPLES["lenet"].build, [(1, 28, 28)], batch=2)
    dims = exported.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [2, 1, 28, 28]
    assert not any(n.op_type in ("Shape", "Gather") for n in exported.graph.node)


def test_the_batch_axis_is_symbolic_by_default():
    exported = ncet.to_onnx(ncet.convert(EXAMPLES["lenet"].build(), (1, 28, 28)))
    for value in (*exported.graph.input, *exported.graph.output, *exported.graph.value_info):
        assert value.type.tensor_type.shape.dim[0].dim_param == "N"
    reshape = next(n for n in exported.graph.node if n.op_type == "Reshape")
    shape = next(i for i in exported.graph.initializer if i.name == reshape.input[1])
    assert list(onnx.numpy_helper.to_array(shape)) == [0, 400]


@pytest.mark.parametrize("name", ["mlp", "residual_cnn"])
def test_exports_are_deterministic(name):
    build = EXAMPLES[name].build
    first = ncet.to_onnx(ncet.convert(build(), *EXAMPLES[name].input_shapes))
    second = ncet.to_onnx(ncet.convert(build(), *EXAMPLES[name].input_shapes))
    assert first.SerializeToString() == second.SerializeToString()


def test_initializers_are_the_constants_bit_for_bit():
    ir = ncet.convert(EXAMPLES["residual_cnn"].build(), (3, 32, 32))
    initializers = {i.name: i for i in ncet.to_onnx(ir).graph.initializer}
    for name, tensor in ir.constants.items():
        array = onnx.numpy_helper.to_array(initializers[name])
        assert array.dtype == tensor.numpy().dtype and array.shape == tuple(tensor.shape)
        assert array.tobytes() == tensor.contiguous().numpy().tobytes()


def test_a_divisor_stays_a_divisor():
    model = Fn(lambda m, x: x / m.s, s=torch.tensor([3.0, 7.0]))
    exported = ncet.to_onnx(ncet.convert(model, (2,)))
    (node,) = exported.graph.node
    assert node.op_type == "Div" and node.input[1] == "s"


def test_doc_strings_carry_provenance_and_metadata_the_versions_and_hash():
    ir = ncet.convert(EXAMPLES["lenet"].build(), (1, 28, 28))
    exported = ncet.to_onnx(ir)
    for node in exported.graph.node:
        assert "fx: " in node.doc_string and "ncet: " in node.doc_string
    conv = exported.graph.node[0]
    assert "conv1" in conv.doc_string and "examples.py:" in conv.doc_string
    props = {p.key: p.value for p in exported.metadata_props}
    assert props == {"ncet.version": ncet.__version__, "ncet.profile": "canonical",
                     "ncet.graphir.hash": hash_graphir(ir),  # tests/test_graphir_hash.py
                     "torch.version": torch.__version__}


def test_path_writes_the_same_bytes(tmp_path):
    ir = ncet.convert(EXAMPLES["mlp"].build(), (16,))
    model = ncet.to_onnx(ir, tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == model.SerializeToString()
    assert onnx.load(io.BytesIO(model.SerializeToString())) == model


@pytest.mark.parametrize("kwargs, message", [
    ({"profile": "nonesuch"}, "unknown profile"),
    ({"batch": 0}, "positive int"),
    ({"batch": True}, "positive int"),
    ({"opset": 12}, "opset"),
])
def test_bad_arguments_are_refused(kwargs, message):
    ir = ncet.convert(EXAMPLES["mlp"].build(), (16,))
    with pytest.raises(ValueError, match=message):
        ncet.to_onnx(ir, **kwargs)


@pytest.mark.parametrize("build, shape, dtype, reason", [
    (lambda: nn.AdaptiveAvgPool2d(4), CONV, torch.float32, "not all the same size"),
    (lambda: nn.AvgPool2d(2, divisor_override=3), CONV, torch.float32, "divisor_override"),
    (lambda: _bn(3).double(), CONV, torch.float64, "not a float32 value"),
    (lambda: Fn(lambda m, x: x * m.c, c=torch.tensor(2.0, dtype=torch.float64)), (3,),
     torch.float32, "would need a Cast"),
], ids=["adaptive-uneven", "divisor-override", "float64-eps", "mixed-dtype"])
def test_what_onnx_cannot_say_exactly_is_refused_naming_the_node(build, shape, dtype, reason):
    ir = ncet.convert(build().eval(), shape, dtype=dtype)
    with pytest.raises(ExportError, match=reason) as caught:
        ncet.to_onnx(ir)
    assert "cannot export node '" in str(caught.value)


def test_circular_padding_needs_opset_19():
    ir = ncet.convert(nn.Conv2d(3, 2, 3, padding=1, padding_mode="circular"), CONV)
    with pytest.raises(ExportError, match="opset 19"):
        ncet.to_onnx(ir, opset=18)


def test_import_ncet_does_not_import_onnx():
    code = "import sys, ncet; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _with_source_location(ir, location):
    nodes = tuple(dataclasses.replace(n, source=dataclasses.replace(n.source, location=location))
                  for n in ir.nodes)
    return GraphIR(nodes, ir.constants)


def test_a_source_path_that_is_not_unicode_is_written_escaped():
    # a file name of undecodable bytes reaches Python (and so Source.location) as surrogates
    ir = _with_source_location(ncet.convert(EXAMPLES["mlp"].build(), (16,)), "caf\udce9.py:3")
    exported = ncet.to_onnx(ir)
    assert all("at: caf\\udce9.py:3" in node.doc_string for node in exported.graph.node)


def test_a_name_that_is_not_unicode_is_refused_with_the_node():
    ir = ncet.convert(EXAMPLES["mlp"].build(), (16,))
    bad = ir.nodes[2].name
    renamed = tuple(dataclasses.replace(
        n, name=n.name + "\udce9" if n.name == bad else n.name,
        inputs=tuple(i + "\udce9" if i == bad else i for i in n.inputs)) for n in ir.nodes)
    with pytest.raises(ExportError, match=f"cannot export node '{bad}.*lone surrogate"):
        ncet.to_onnx(GraphIR(renamed, ir.constants))
