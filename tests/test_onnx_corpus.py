"""Every network of the VNN-COMP corpus (../shared/vnncomp, tests/corpus.py) through the ONNX
import (issue 32): imported and certified by check_onnx against onnxruntime running the
original file, or refused with every offending node named; never a crash. The expected
outcome is the issue's op census, not the code's: a network is refused exactly when it uses
an op type outside the piecewise-linear set (Sigmoid, Softmax, Cos/Sin, Pow, Sign,
ConvTranspose or ArgMax), which the test reads from the file itself."""

from __future__ import annotations

import onnx
import pytest

import ncet
from ncet.onnx.import_errors import IMPORT_REASONS, IMPORT_STATUS
from tests.corpus import CORPUS, corpus_networks, corpus_root

CORPUS_SIZE = 55
"""The corpus's networks (../shared/vnncomp/inventory.md: "ONNX files: 55")."""

INSIDE = frozenset({
    "Gemm", "MatMul", "Conv", "Pad", "BatchNormalization", "Relu", "LeakyRelu", "Add", "Sub",
    "Mul", "Div", "Neg", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat",
    "Slice", "Gather", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean",
    "ReduceSum", "Identity", "Dropout", "Constant", "Cast",
    "Shape", "Where", "ConstantOfShape"})
"""The issue's op set ("What the corpus uses, at least"), and the static shape plumbing its
census counts inside (Shape, Gather, Unsqueeze, Concat, Cast, Where on constants)."""

OUTSIDE = frozenset({"Sigmoid", "Softmax", "Cos", "Sin", "Pow", "Sign", "ConvTranspose",
                     "ArgMax"})
"""The op types the issue's census names as outside the piecewise-linear set."""

REFUSED = {
    "carvana_unet_2022/onnx/unet_simp_small.onnx": {"Softmax", "ArgMax"},
    "cctsdb_yolo/onnx/patch-1.onnx": {"ArgMax"},
    "cgan/onnx/cGAN_imgSz32_nCh_1.onnx": {"ConvTranspose"},
    "dist_shift/onnx/mnist_concat.onnx": {"Sigmoid"},
    "eran/nets/ffnnSIGMOID__Point_6x200.onnx": {"Sigmoid"},
    "lsnc/onnx/quadrotor2d_output.onnx": {"Cos"},
    "lsnc/onnx/quadrotor2d_state.onnx": {"Sin", "Cos"},
    "ml4acopf/onnx/14_ieee_ml4acopf.onnx": {"Pow", "Sigmoid", "Cos", "Sin"},
    "nn4sys/onnx/mscn_128d.onnx": {"Sigmoid"},
    "nn4sys/onnx/pensieve_small_parallel.onnx": {"Pow"},
    "traffic_signs_recognition/onnx/3_48_48_QConv_32_5_MP_2_BN_QConv_64_5_MP_2_BN_QConv_64_3_"
    "BN_Dense_256_BN_Dense_43_ep_30.onnx": {"Sign", "Softmax"},
    "vit/onnx/ibp_3_3_8.onnx": {"Softmax"},
}
"""The 12 networks the issue's census puts outside, with the op types that put them there
(../shared/vnncomp/inventory.md, "Per file"); the other 43 import."""

HINTLESS: set[tuple[str, str]] = set()
"""Refusals that carry no hint (none today): every refusal says what to do."""


def op_types(network: str) -> set[str]:
    """The op types of a corpus file's nodes, read from the file."""
    return {n.op_type for n in onnx.load(str(CORPUS / network), load_external_data=False)
            .graph.node}


def test_the_corpus_is_all_there():
    corpus_root()
    assert len(corpus_networks()) == CORPUS_SIZE


def test_the_census_splits_the_corpus_43_to_12():
    """The expectation table is the issue's census: a network is refused exactly when its
    file uses an op type outside the set, and an imported one uses only the set's."""
    corpus_root()
    networks = corpus_networks()
    assert set(REFUSED) <= set(networks)
    for network in networks:
        ops = op_types(network)
        if network in REFUSED:
            assert ops & OUTSIDE == REFUSED[network], network
        else:
            assert ops <= INSIDE, (network, ops - INSIDE)
    assert (len(networks) - len(REFUSED), len(REFUSED)) == (43, 12)


@pytest.mark.parametrize("network", [n for n in corpus_networks() if n not in REFUSED])
def test_a_network_inside_the_op_set_imports_and_certifies(network):
    path = corpus_root() / network
    ir = ncet.from_onnx(path)
    report = ncet.check_onnx(ir, path, samples_per_scale=1)
    assert report.ok, f"{network}: {report.first_violation}"
    assert "the file as imported (from_onnx)" in str(report)
    checked = {e.name for e in report.entries}
    assert checked == {n.name for n in ir.nodes if n.op_type not in ("Input", "Output")}


@pytest.mark.parametrize("network", sorted(REFUSED))
def test_a_network_outside_is_refused_naming_every_offending_node(network):
    path = corpus_root() / network
    report = ncet.diagnose_onnx(path)
    assert not report.ok and report.graph is None
    graph = onnx.load(str(path), load_external_data=False).graph
    named = {r.location: r for r in report.errors}
    for index, node in enumerate(graph.node):
        if node.op_type in OUTSIDE:  # each op outside the set has its own row
            row = named[f"{path.name} node {index}"]
            assert (row.fx_name, row.spelling) == (node.name or f"#{index}", node.op_type)
            assert (row.status, row.code) == ("unsupported", "onnx-unsupported-op")
    for row in report.errors:
        assert row.code in IMPORT_REASONS and row.status == IMPORT_STATUS[row.code]
        assert row.message and row.fx_op == "onnx"
        assert row.hint or (row.spelling, row.code) in HINTLESS, (row.spelling, row.code)
    with pytest.raises(ncet.ONNXImportError) as info:
        ncet.from_onnx(path)
    first = report.errors[0]
    assert (info.value.code, info.value.node, info.value.location) == \
        (first.code, first.fx_name, first.location)


@pytest.mark.parametrize("network", sorted(REFUSED))
def test_every_node_of_an_op_type_without_a_rule_is_named(network):
    from ncet.onnx.import_rules import IMPORT_RULES
    from ncet.onnx.import_static import STATIC_RULES

    known = set(IMPORT_RULES) | set(STATIC_RULES) | {"Constant", "Shape", "graph input"}
    rows = ncet.diagnose_onnx(corpus_root() / network).rows
    unnamed = [(r.fx_name, r.spelling) for r in rows
               if r.spelling not in known and r.status not in ("unsupported", "boundary")]
    assert not unnamed
