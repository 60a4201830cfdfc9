"""Round trips between GraphIR and ONNX (issue 32; docs/onnx-import.md, "Round trips").

1. `from_onnx(to_onnx(ir))` is `ir` for every model the export tests write (every bundled
   example and zoo model that converts, every op row, the float64 rows), in both profiles
   and at batch None and 1: the same IR nodes in the same order (`IRNode ==`, which leaves
   out the provenance) and the same constants (name, dtype, shape and bits), after one small
   normal form (`normal_form`) for what ONNX cannot tell apart.
2. `to_onnx(from_onnx(f))` is certified against `f` for every corpus network that imports:
   `check_onnx(ir, f)` (onnxruntime running the original file) and `check_onnx(ir,
   to_onnx(ir))` (onnxruntime running the re-export) both hold every node to the IR's
   certified bounds, a chain f ~ ir ~ export.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ncet
from ncet.examples import EXAMPLES
from ncet.ir import GraphIR, IRNode
from tests.conftest import Fn
from tests.corpus import corpus_networks, corpus_root
from tests.test_export import OP_ROWS, _seeded
from tests.zoo_models import CONVERTS, ZOO

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ncet.onnx import ExportError  # noqa: E402
from tests.test_export_verifier import OP_REFUSED, VERIFIER_OP_ROWS  # noqa: E402

MODELS = ([(name, e.build, list(e.input_shapes), False)
           for name, e in EXAMPLES.items() if e.converts]
          + [(f"zoo-{e.name}", e.factory, list(e.shapes), e.as_written != CONVERTS)
             for e in ZOO if e.with_rewrite == CONVERTS])
"""(id, builder, shapes, rewrite): every bundled example and zoo model that converts."""

OPS = [(name, build, shapes, False) for name, build, shapes, _ in OP_ROWS + VERIFIER_OP_ROWS]

FLOAT64 = ("linear", "linear-rank3", "batchnorm1d-no-affine", "add-alpha", "affine-constants",
           "concat", "reduce-mean", "slice", "max-pool", "leaky-relu", "conv2d-reflect",
           "avg-pool")
"""The op rows tests/test_export.py exports in float64."""

EXPORTS = [("canonical", None, None), ("canonical", 1, None), ("verifier", None, None)]
"""(profile, batch, opset) of every export read back (the verifier's batch is always 1)."""

EXACT = ("linear-rank3", "linear-no-bias", "batchnorm1d-no-affine", "conv2d-reflect",
         "conv2d-replicate", "conv2d-circular", "getitem", "slice", "affine-scalars",
         "affine-constants", "outputs-input-and-twice", "concat", "max-pool", "avg-pool",
         "reduce-mean", "permute", "reshape")
"""Op rows whose export the import reads back as the very IR, without the normal form (at
float64, where no attribute is rounded to float32)."""

FLOAT32_ATTRS = ("negative_slope", "eps", "alpha", "scalar")


def _float32(value):
    return value if value is None else float(np.float32(value))


def _ranges(node: IRNode, shape: tuple[int, ...]) -> list[list[int]]:
    """What an index selects from each input axis: [start, stop, step] per axis."""
    ranges, axis = [], 0
    for entry in node.attrs["index"]:
        if entry is None:
            continue
        ranges.append([entry, entry + 1, 1] if isinstance(entry, int) else list(entry))
        axis += 1
    return ranges + [[0, d, 1] for d in shape[axis:]]


def normal_form(ir: GraphIR) -> tuple[IRNode, ...]:
    """The GraphIR's nodes with what an ONNX file cannot tell apart written one way
    (docs/onnx-import.md, "Round trips"): every node keeps its name, inputs, shape and dtype.

    * a float attribute of a float32 node (`negative_slope`, `eps`, `alpha`, `scalar`) is
      rounded to float32: ONNX writes it as a float32 attribute or 0-d initializer, as
      PyTorch rounds it when it computes on float32;
    * `Flatten` is the `Reshape` to its output shape; `Transpose(dim0, dim1)` is the
      `Permute` swapping them; `GetItem` and `Slice` are a `Slice` of `[start, stop, step]`
      on every input axis (the output shape says which axes an int removed and a None
      added), or the `Reshape` to the output shape when every range is whole;
      a `Reshape` to its input's own shape is `Identity`;
    * an `AdaptiveAvgPool2d` to other than 1x1 (equal windows: the export refuses others)
      is the `AvgPool2d` of its window, which ONNX writes the same; an unpadded
      `AvgPool2d` has `count_include_pad=False` (no window covers padding);
    * `Output`'s `tuple` is whether it returns more than one value.
    """
    shapes = {n.name: n.shape for n in ir.nodes}
    nodes = []
    for node in ir.nodes:
        op, attrs = node.op_type, dict(node.attrs)
        before = shapes.get(node.inputs[0]) if node.inputs else None
        if op == "Output":
            attrs["tuple"] = len(node.inputs) > 1
        elif op == "Flatten":
            op, attrs = "Reshape", {"shape": list(node.shape)}
        elif op == "Transpose":
            perm = list(range(len(node.shape)))
            perm[attrs["dim0"]], perm[attrs["dim1"]] = attrs["dim1"], attrs["dim0"]
            op, attrs = "Permute", {"perm": perm}
        elif op in ("GetItem", "Slice"):
            ranges = _ranges(node, before)
            whole = all(r == [0, d, 1] for r, d in zip(ranges, before))
            op, attrs = ("Reshape", {"shape": list(node.shape)}) if whole else \
                ("Slice", {"index": ranges})
        elif op == "AdaptiveAvgPool2d" and list(attrs["output_size"]) != [1, 1]:
            kernel = [before[1] // attrs["output_size"][0], before[2] // attrs["output_size"][1]]
            op, attrs = "AvgPool2d", {"kernel_size": kernel, "stride": kernel, "padding": [0, 0],
                                      "ceil_mode": False, "count_include_pad": False,
                                      "divisor_override": None}
        if op == "AvgPool2d" and not any(attrs["padding"]):
            attrs["count_include_pad"] = False
        if op == "Reshape" and tuple(attrs["shape"]) == tuple(before):
            op, attrs = "Identity", {}
        if node.dtype == "float32":
            attrs.update({k: _float32(attrs[k]) for k in FLOAT32_ATTRS if k in attrs})
        nodes.append(IRNode(node.name, op, node.inputs, attrs, node.shape, node.dtype,
                            node.source))
    return tuple(nodes)


def _bits(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).numpy().tobytes()


def assert_same_constants(back: GraphIR, ir: GraphIR) -> None:
    """The same constants: by name, dtype, shape and bits."""
    assert set(back.constants) == set(ir.constants)
    for name, tensor in ir.constants.items():
        other = back.constants[name]
        assert (other.dtype, tuple(other.shape)) == (tensor.dtype, tuple(tensor.shape)), name
        assert _bits(other) == _bits(tensor), f"constant {name!r} differs in its bits"


def assert_same_nodes(back: tuple[IRNode, ...], ir: tuple[IRNode, ...]) -> None:
    differ = [f"{a!r}\n   read back as {b!r}" for a, b in zip(ir, back) if a != b]
    assert [n.name for n in back] == [n.name for n in ir]
    assert not differ, "\n".join(differ[:5])


def _read_back(ir: GraphIR, profile: str, batch, opset=None) -> GraphIR:
    exported = ncet.to_onnx(ir, profile=profile, batch=batch, opset=opset)
    return ncet.from_onnx(exported.SerializeToString())


FLOAT64_REFUSED = {"leaky-relu": ("LeakyReLU", "negative_slope=0.1 is not a float32 value")}
"""Float64 rows the verifier profile refuses (docs/export.md), beside OP_REFUSED."""


def _round_trip(ir: GraphIR, name: str, profile: str, batch, refused=OP_REFUSED) -> None:
    if profile == "verifier" and name in refused:  # the profile cannot say it: refused
        with pytest.raises(ExportError, match=refused[name][1]):
            ncet.to_onnx(ir, profile=profile)
        return
    back = _read_back(ir, profile, batch)
    assert_same_nodes(normal_form(back), normal_form(ir))
    assert_same_constants(back, ir)


@pytest.mark.parametrize("profile, batch, opset", EXPORTS, ids=lambda v: str(v))
@pytest.mark.parametrize("case", MODELS, ids=lambda c: c[0])
def test_every_model_reads_back_as_its_graphir(case, profile, batch, opset):
    name, build, shapes, rewrite = case
    ir = ncet.convert(_seeded(build), *shapes, rewrite=rewrite)
    _round_trip(ir, name, profile, batch)


@pytest.mark.parametrize("profile, batch, opset", EXPORTS, ids=lambda v: str(v))
@pytest.mark.parametrize("case", OPS, ids=lambda c: c[0])
def test_every_op_row_reads_back_as_its_graphir(case, profile, batch, opset):
    name, build, shapes, _ = case
    ir = ncet.convert(_seeded(build), *shapes)
    _round_trip(ir, name, profile, batch)


@pytest.mark.parametrize("profile", ["canonical", "verifier"])
@pytest.mark.parametrize("name", FLOAT64)
def test_float64_rows_read_back_as_their_graphir(name, profile):
    _, build, shapes, _ = next(r for r in OP_ROWS if r[0] == name)
    ir = ncet.convert(_seeded(build).double(), *shapes, dtype=torch.float64)
    _round_trip(ir, name, profile, None, {**OP_REFUSED, **FLOAT64_REFUSED})


def test_circular_padding_reads_back_from_the_verifier_profile_at_opset_19():
    _, build, shapes, _ = next(r for r in OP_ROWS if r[0] == "conv2d-circular")
    ir = ncet.convert(_seeded(build), *shapes)
    back = _read_back(ir, "verifier", None, opset=19)
    assert back.nodes == ir.nodes
    assert_same_constants(back, ir)


@pytest.mark.parametrize("name", EXACT)
def test_the_export_patterns_read_back_exactly_without_the_normal_form(name):
    _, build, shapes, _ = next(r for r in OP_ROWS if r[0] == name)
    ir = ncet.convert(_seeded(build).double(), *shapes, dtype=torch.float64)
    back = _read_back(ir, "canonical", None)
    assert_same_nodes(back.nodes, ir.nodes)
    assert_same_constants(back, ir)


def test_a_linear_over_several_axes_takes_the_file_s_own_weight():
    """Transpose(W) -> MatMul -> Add is one Linear named after the Add, whose weight is W
    itself, the initializer the Transpose reads: no transposed copy, the very bits."""
    ir = ncet.convert(_seeded(lambda: torch.nn.Linear(5, 4)), (2, 3, 5))
    exported = ncet.to_onnx(ir)
    assert [n.op_type for n in exported.graph.node] == ["Transpose", "MatMul", "Add"]
    back = ncet.from_onnx(exported)
    (linear,) = [n for n in back.nodes if n.op_type == "Linear"]
    assert linear.name == exported.graph.node[-1].output[0] == ir.nodes[1].name
    assert (linear.attrs["weight"], linear.attrs["bias"]) == ("weight", "bias")
    initializer = next(t for t in exported.graph.initializer if t.name == "weight")
    assert onnx.numpy_helper.to_array(initializer).tobytes() == \
        _bits(back.constants["weight"]) == _bits(ir.constants["weight"])


def test_a_float32_graph_s_slope_reads_back_rounded_to_float32():
    """A float32 graph's slope and alpha are float32 in the file (PyTorch computes with
    them rounded so): the import reads that float32 value, exactly."""
    ir = ncet.convert(_seeded(lambda: torch.nn.LeakyReLU(0.1)), (4,))
    back = _read_back(ir, "canonical", None)
    assert back.nodes[1].attrs["negative_slope"] == float(np.float32(0.1)) != 0.1
    assert normal_form(back) == normal_form(ir)


def test_pads_of_other_modes_before_another_op_are_refused_naming_the_pad():
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 1, 4, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 1, 6, 6])
    pads = onnx.numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Pad", ["x", "pads"], ["p"], "pad", mode="reflect"),
         onnx.helper.make_node("Relu", ["p"], ["y"], "relu")], "g", [x], [y], [pads])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with pytest.raises(ncet.ConversionError, match="(?s)pad.*mode 'reflect'.*onnx-pad"):
        ncet.from_onnx(model)


# -- 2. to_onnx(from_onnx(f)) certified against f -----------------------------------------------

VERIFIER_REFUSALS = ("per-sample axes, and ONNX Gemm multiplies 2-d inputs only",)
"""Why the verifier profile may refuse an imported network: a Linear over rank > 1."""


@pytest.mark.parametrize("path", corpus_networks())
def test_every_corpus_network_that_imports_is_certified_through_its_re_export(path):
    root = corpus_root()
    diagnosis = ncet.diagnose_onnx(root / path)
    if not diagnosis.ok:  # outside the import's boundary: refused with reasons, no chain
        assert diagnosis.graph is None and diagnosis.errors
        return
    ir = ncet.from_onnx(root / path)
    original = ncet.check_onnx(ir, root / path, samples_per_scale=1)
    assert original.ok, str(original)
    for profile in ("canonical", "verifier"):
        try:
            exported = ncet.to_onnx(ir, profile=profile)
        except ExportError as refusal:
            assert profile == "verifier" and any(r in str(refusal) for r in VERIFIER_REFUSALS), \
                str(refusal)
            continue
        report = ncet.check_onnx(ir, exported, samples_per_scale=1)
        assert report.ok, f"{profile}: {report}"


# -- both ways for the bundled examples and the zoo ---------------------------------------------


@pytest.mark.parametrize("profile", ["canonical", "verifier"])
@pytest.mark.parametrize("case", MODELS, ids=lambda c: c[0])
def test_every_model_round_trips_the_other_way_certified(case, profile):
    """f = to_onnx(ir); the import of f is certified against f (whose stamp is ir's hash,
    not the import's: f is the file it was imported from) and against its own re-export,
    which reads back as the very same GraphIR (import after export is then the identity)."""
    name, build, shapes, rewrite = case
    ir = ncet.convert(_seeded(build), *shapes, rewrite=rewrite)
    f = ncet.to_onnx(ir, profile=profile)
    imported = ncet.from_onnx(f)
    exported = ncet.to_onnx(imported, profile=profile)
    again = ncet.from_onnx(exported)
    assert_same_nodes(again.nodes, imported.nodes)
    assert_same_constants(again, imported)
    for file, how in ((f, "the file as imported"), (exported, "")):
        report = ncet.check_onnx(imported, file, samples_per_scale=1)
        assert report.ok, str(report)
        assert report.inputs.endswith(f"; {how} (from_onnx)") if how else \
            "from_onnx" not in report.inputs and "hash" not in report.inputs


@pytest.mark.parametrize("case", OPS, ids=lambda c: c[0])
def test_every_op_row_s_import_reads_back_as_itself(case):
    name, build, shapes, _ = case
    imported = ncet.from_onnx(ncet.to_onnx(ncet.convert(_seeded(build), *shapes)))
    again = ncet.from_onnx(ncet.to_onnx(imported))
    assert_same_nodes(again.nodes, imported.nodes)
    assert_same_constants(again, imported)


def test_a_file_with_a_0_d_constant_is_certified_against_its_import():
    """A scalar initializer (x / 255 as most image networks write it) is compared bit for
    bit with the file's own (a 0-d tensor has no byte view: reshaped first)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3])
    scale = onnx.numpy_helper.from_array(np.array(255.0, np.float32), "scale")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Div", ["x", "scale"], ["y"], "div")],
                                   "g", [x], [y], [scale])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    ir = ncet.from_onnx(model)
    assert ir.nodes[1].attrs["constant"] == "scale" and ir.constants["scale"].shape == ()
    assert ncet.check_onnx(ir, model, samples_per_scale=1).ok


def test_a_bias_free_linear_then_an_add_stays_two_nodes_in_an_export():
    """In an NCET export a MatMul takes the Add after it as its bias only when it is that
    Add's own `<node>/...` value: here the Add is an IR node of its own."""
    weight = torch.nn.Parameter(torch.randn(4, 5, generator=torch.Generator().manual_seed(0)))
    model = Fn(lambda m, x: torch.nn.functional.linear(x, m.w) + m.c, w=weight,
               c=torch.arange(4.0))
    ir = ncet.convert(model, (3, 5))
    assert [n.op_type for n in ir.nodes[1:-1]] == ["Linear", "ElementwiseAffine"]
    back = _read_back(ir, "canonical", None)
    assert_same_nodes(back.nodes, ir.nodes)
    assert_same_constants(back, ir)


def test_an_input_returned_and_a_value_returned_twice_are_certified_through_the_import():
    _, build, shapes, _ = next(r for r in OP_ROWS if r[0] == "outputs-input-and-twice")
    f = ncet.to_onnx(ncet.convert(_seeded(build), *shapes))
    imported = ncet.from_onnx(f)
    assert imported.outputs == ("x", "relu", "relu") and imported.nodes[-1].name == "output"
    assert ncet.check_onnx(imported, f, samples_per_scale=1).ok
