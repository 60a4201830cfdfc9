"""ncet.to_onnx, verifier profile (docs/export.md, "The verifier profile"): every op row, bundled
example and zoo model exported at batch 1, checked by onnx's checker and strict shape
inference, held to the profile's form (op set, Gemm(transB=1) on the weight's own bytes, no
Squeeze/Unsqueeze/MatMul/Shape/Gather, batch dim 1) and run in onnxruntime against the eager
model (PyTorch is the oracle)."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.examples import EXAMPLES
from tests.conftest import Fn
from tests.test_export import CONV, OP_ROWS, TOLERANCE, _bn, _export_and_run, _seeded
from tests.zoo_models import CONVERTS, ZOO

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ncet.onnx import PROFILES, VERIFIER_OPS, ExportError, Profile  # noqa: E402
from ncet.onnx import model as export_model  # noqa: E402
from ncet.onnx.patterns import PATTERNS  # noqa: E402
from ncet.onnx.verifier_patterns import VERIFIER_PATTERNS  # noqa: E402

NEVER = {"Squeeze", "Unsqueeze", "MatMul", "Shape", "Gather"}
"""ONNX ops the verifier profile must never write (also outside VERIFIER_OPS)."""

# Rows the verifier profile adds to OP_ROWS: its own patterns' cases.
VERIFIER_OP_ROWS = [
    ("linear-no-bias-rank1", lambda: nn.Linear(5, 4, bias=False), [(5,)], {"Linear"}),
    ("flatten-then-linear", lambda: nn.Sequential(nn.Flatten(), nn.Linear(108, 3)), [CONV],
     {"Flatten", "Linear"}),
    ("linear-then-batchnorm1d", lambda: nn.Sequential(nn.Linear(5, 3), _bn(3, dim=1)),
     [(5,)], {"Linear", "BatchNorm"}),
    ("reshape-to-one-axis", lambda: Fn(lambda m, x: x.view(-1, 12)), [(3, 4)], {"Reshape"}),
    ("index-unsqueeze-only", lambda: Fn(lambda m, x: x[:, None]), [(3, 4)], {"Slice"}),
    ("index-empty-slice", lambda: Fn(lambda m, x: x[:, 2:2]), [(3, 4)], {"Slice"}),
]

RANK = ("Linear", "ONNX Gemm multiplies 2-d inputs only.*flatten the input first")
OP_REFUSED = {
    "linear-rank3": RANK,      # a Linear over (2, 3, 5) per sample: MatMul, not Gemm
    "linear-no-bias": RANK,    # over (3, 5) per sample
    # at the profile's default opset 18; it exports at opset=19 (below)
    "conv2d-circular": ("Conv2d", "circular padding needs Pad mode 'wrap', opset 19 or later"),
}
"""OP_ROWS the verifier profile refuses at its default opset: the node's op_type and (a part
of) the reason."""

MODEL_ROWS = (
    [(name, e.build, list(e.input_shapes), False) for name, e in EXAMPLES.items() if e.converts]
    + [(f"zoo-{e.name}", e.factory, list(e.shapes), e.as_written != CONVERTS)
       for e in ZOO if e.with_rewrite == CONVERTS])
"""(id, builder, shapes, rewrite): every bundled example and zoo model that converts (with
rewrite=True where it needs it)."""

MODEL_REFUSED: dict[str, str] = {}
"""Models among MODEL_ROWS the verifier profile refuses, with the reason. None today: every
bundled example and zoo model has its dense layers on flattened inputs, and a float32
LeakyReLU."""


def _attributes(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _check_verifier_form(ir, exported) -> None:
    """The verifier profile's promises about the file, beyond checker and shape inference."""
    graph = exported.graph
    ops = {n.op_type for n in graph.node}
    assert ops <= VERIFIER_OPS, ops - VERIFIER_OPS
    assert not ops & NEVER
    for value in (*graph.input, *graph.output, *graph.value_info):
        dim = value.type.tensor_type.shape.dim[0]
        assert dim.WhichOneof("value") == "dim_value" and dim.dim_value == 1, value.name
    props = {p.key: p.value for p in exported.metadata_props}
    assert props["ncet.profile"] == "verifier" and "verifier profile" in graph.doc_string
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    for name, tensor in ir.constants.items():  # same bytes, shape and dtype: nothing folded
        array = tensor.contiguous().numpy()
        assert initializers[name].dtype == array.dtype and initializers[name].shape == array.shape
        assert initializers[name].tobytes() == array.tobytes()
    producer = {n.output[0]: n for n in graph.node}
    for node in ir.nodes:
        if node.op_type == "Linear":
            gemm = producer[node.name]
            bias = [] if node.attrs["bias"] is None else [node.attrs["bias"]]
            assert gemm.op_type == "Gemm" and _attributes(gemm) == {"transB": 1}
            assert list(gemm.input[1:]) == [node.attrs["weight"], *bias]
        elif node.op_type == "BatchNorm":
            assert producer[node.name].op_type == "BatchNormalization"
        elif node.op_type in ("Flatten", "Reshape"):
            written = producer[node.name]
            if len(node.shape) == 1:
                assert written.op_type == "Flatten" and _attributes(written) == {"axis": 1}
            else:
                assert written.op_type == "Reshape"
                assert list(initializers[written.input[1]]) == [1, *node.shape]


@pytest.mark.parametrize("case", MODEL_ROWS, ids=lambda c: c[0])
def test_every_model_exports_for_verifiers_and_runs_like_the_eager_model(case):
    name, build, shapes, rewrite = case
    if name in MODEL_REFUSED:
        ir = ncet.convert(_seeded(build), *shapes, rewrite=rewrite)
        with pytest.raises(ExportError, match=MODEL_REFUSED[name]):
            ncet.to_onnx(ir, profile="verifier")
        return
    ir, exported = _export_and_run(build, shapes, rewrite=rewrite, profile="verifier")
    _check_verifier_form(ir, exported)


@pytest.mark.parametrize("case", OP_ROWS + VERIFIER_OP_ROWS, ids=lambda c: c[0])
def test_every_op_row_exports_for_verifiers_or_is_refused_naming_the_node(case):
    name, build, shapes, op_types = case
    if name in OP_REFUSED:
        op_type, reason = OP_REFUSED[name]
        ir = ncet.convert(_seeded(build), *shapes)
        with pytest.raises(ExportError, match=reason) as caught:
            ncet.to_onnx(ir, profile="verifier")
        node = next(n for n in ir.nodes if n.op_type == op_type)
        assert f"cannot export node {node.name!r} ({op_type}" in str(caught.value)
        return
    ir, exported = _export_and_run(build, shapes, profile="verifier")
    assert op_types <= {n.op_type for n in ir.nodes}
    _check_verifier_form(ir, exported)


def test_the_verifier_profile_writes_opset_18_unless_asked():
    """Its default opset is 18, the last at which onnx2torch 1.5.15 (alpha-beta-CROWN's
    importer) reads every op the profile writes; another opset is the caller's to ask for."""
    assert (PROFILES["canonical"].default_opset, PROFILES["verifier"].default_opset) == (21, 18)
    ir = ncet.convert(_seeded(EXAMPLES["lenet"].build), *EXAMPLES["lenet"].input_shapes)
    for opset, expected in ((None, 18), (18, 18), (21, 21)):
        exported = ncet.to_onnx(ir, profile="verifier", opset=opset)
        assert [(o.domain, o.version) for o in exported.opset_import] == [("", expected)]
    assert ncet.to_onnx(ir).opset_import[0].version == 21
    assert ncet.onnx.to_onnx(ir, profile="verifier").SerializeToString() == \
        ncet.to_onnx(ir, profile="verifier", opset=18).SerializeToString()


def test_circular_padding_exports_for_verifiers_at_opset_19():
    build = next(row[1] for row in OP_ROWS if row[0] == "conv2d-circular")
    ir, exported = _export_and_run(build, [CONV], profile="verifier", opset=19)
    assert "Pad" in {n.op_type for n in exported.graph.node}
    _check_verifier_form(ir, exported)


def test_the_refusal_tables_name_rows_that_exist():
    assert set(OP_REFUSED) <= {row[0] for row in OP_ROWS + VERIFIER_OP_ROWS}
    assert set(MODEL_REFUSED) <= {row[0] for row in MODEL_ROWS}


def test_the_batch_is_one():
    ir = ncet.convert(EXAMPLES["lenet"].build(), *EXAMPLES["lenet"].input_shapes)
    default = ncet.to_onnx(ir, profile="verifier")
    assert ncet.to_onnx(ir, profile="verifier", batch=1).SerializeToString() == \
        default.SerializeToString()
    with pytest.raises(ValueError, match="the verifier profile fixes the batch to 1"):
        ncet.to_onnx(ir, profile="verifier", batch=3)


def test_verifier_exports_are_deterministic():
    build, shapes = EXAMPLES["residual_cnn"].build, EXAMPLES["residual_cnn"].input_shapes
    first = ncet.to_onnx(ncet.convert(build(), *shapes), profile="verifier")
    second = ncet.to_onnx(ncet.convert(build(), *shapes), profile="verifier")
    assert first.SerializeToString() == second.SerializeToString()


def test_the_builder_refuses_ops_outside_the_profile(monkeypatch):
    """Defence in depth: a profile whose patterns step outside its op set (here the canonical
    patterns, whose rank-3 Linear is Transpose then MatMul) is caught at the node."""
    narrow = Profile("narrow", "canonical patterns, verifier ops", fixed_batch=1,
                     ops=VERIFIER_OPS, patterns=PATTERNS)
    monkeypatch.setattr(export_model, "PROFILES", {**PROFILES, "narrow": narrow})
    ir = ncet.convert(_seeded(lambda: nn.Linear(5, 4)), (2, 3, 5))
    linear = next(n for n in ir.nodes if n.op_type == "Linear")
    with pytest.raises(ExportError, match="needs ONNX MatMul, which is outside the narrow "
                                          "profile's op set") as caught:
        ncet.to_onnx(ir, profile="narrow")
    assert f"cannot export node {linear.name!r}" in str(caught.value)


def test_profiles_are_data():
    assert list(PROFILES) == ["canonical", "verifier"] and "canonical" in PROFILES
    operators = set(ncet.ir.OP_SCHEMAS) - {"Input", "Output"}
    for profile in PROFILES.values():
        assert set(profile.patterns) == operators
    canonical, verifier = PROFILES["canonical"], PROFILES["verifier"]
    assert (canonical.fixed_batch, canonical.ops) == (None, None)
    assert (verifier.fixed_batch, verifier.ops) == (1, VERIFIER_OPS)
    assert (canonical.default_opset, verifier.default_opset) == (21, 18)
    assert all(verifier.patterns[k] is VERIFIER_PATTERNS.get(k, PATTERNS[k]) for k in operators)
    with pytest.raises(TypeError):
        PROFILES["mine"] = canonical
    with pytest.raises(ValueError, match="missing"):
        Profile("partial", "", None, None, {"ReLU": PATTERNS["ReLU"]})
    with pytest.raises(ValueError, match="default_opset"):
        Profile("old", "", None, None, PATTERNS, default_opset=17)


@pytest.mark.parametrize("slope, refused", [(0.125, False), (0.1, True)])
def test_a_float64_leaky_relu_is_leaky_relu_when_its_slope_is_a_float32_value(slope, refused):
    """LeakyRelu's alpha is a float32 attribute: exact for a slope that is a float32 value,
    refused otherwise (onnxruntime has no float64 LeakyRelu; onnx's reference evaluator runs it)."""
    from onnx.reference import ReferenceEvaluator

    model = nn.LeakyReLU(slope).double()
    ir = ncet.convert(model, (6,), dtype=torch.float64)
    if refused:
        with pytest.raises(ExportError, match="not a float32 value"):
            ncet.to_onnx(ir, profile="verifier")
        return
    exported = ncet.to_onnx(ir, profile="verifier")
    onnx.checker.check_model(exported, full_check=True)
    onnx.shape_inference.infer_shapes(exported, strict_mode=True)
    assert [n.op_type for n in exported.graph.node] == ["LeakyRelu"]
    x = torch.randn(1, 6, dtype=torch.float64)
    (got,) = ReferenceEvaluator(exported).run(None, {"x": x.numpy()})
    rtol, atol = TOLERANCE["float64"]
    np.testing.assert_allclose(got, model(x).numpy(), rtol=rtol, atol=atol)


DOC = pathlib.Path(__file__).parent.parent / "docs" / "export.md"


def test_the_docs_list_the_op_set_and_a_row_per_override():
    section = DOC.read_text().split("## The verifier profile", 1)[1].split("\n## ", 1)[0]
    op_set = re.search(r"\*\*Op set\*\*[^:]*:(.*?)\.\n", section, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", op_set)) == VERIFIER_OPS
    first_cells = re.findall(r"^\| ([^|]*)\|", section, re.M)
    rows = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert set(VERIFIER_PATTERNS) <= rows
