"""The import's shape rules (ncet/onnx/import_shapes.py) against PyTorch: every node of every
bundled example and zoo model that converts (shapes from FX's shape propagation on the eager
model), and every node of every corpus network that imports (shapes from the reference
evaluator on meta tensors, the rules' own definition)."""

from __future__ import annotations

import pytest
import torch

import ncet
from ncet.evaluate import EVALUATORS
from ncet.examples import EXAMPLES, load_example
from tests.corpus import corpus_networks, corpus_root
from tests.zoo_models import CONVERTS, ZOO

pytest.importorskip("onnx")

from ncet.onnx.import_shapes import output_shape  # noqa: E402


def _converted():
    for name in EXAMPLES:
        model, shapes = load_example(name)
        report = ncet.diagnose(model, *shapes)
        if report.ok:
            yield f"example-{name}", report.graph
    for entry in ZOO:
        if entry.as_written == CONVERTS:
            yield f"zoo-{entry.name}", ncet.convert(entry.factory(), *entry.shapes)


def _assert_rules_agree(ir: ncet.GraphIR, expected: dict) -> None:
    shapes = {n.name: n.shape for n in ir.nodes}
    consts = {k: tuple(v.shape) for k, v in ir.constants.items()}
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        got = output_shape(node.op_type, node.attrs, [shapes[i] for i in node.inputs], consts)
        assert got == expected[node.name], (node, got, expected[node.name])


def test_shape_rules_match_pytorch_on_every_converted_model():
    seen = 0
    for label, ir in _converted():
        try:
            _assert_rules_agree(ir, {n.name: tuple(n.shape) for n in ir.nodes
                                     if n.shape is not None})
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None
        seen += 1
    assert seen >= 10


def _meta_shapes(ir: ncet.GraphIR) -> dict:
    meta = {}
    consts = {k: v.to("meta") for k, v in ir.constants.items()}
    for node in ir.nodes:
        if node.op_type == "Input":
            meta[node.name] = torch.empty((1, *node.shape), device="meta",
                                          dtype=getattr(torch, node.dtype))
        elif node.op_type != "Output":
            meta[node.name] = EVALUATORS[node.op_type](node, [meta[i] for i in node.inputs],
                                                       consts)
    return {k: tuple(v.shape[1:]) for k, v in meta.items()}


@pytest.mark.parametrize("network", corpus_networks())
def test_shape_rules_match_the_reference_evaluator_on_the_corpus(network):
    report = ncet.diagnose_onnx(corpus_root() / network)
    if not report.ok:
        assert report.errors, "a network that does not import names its problems"
        return
    expected = _meta_shapes(report.graph)
    _assert_rules_agree(report.graph, expected)
    assert all(n.shape == expected[n.name] for n in report.graph.nodes if n.shape is not None)


def test_the_corpus_is_there():
    corpus_root()  # fails in CI, skips elsewhere, when it is missing
    assert len(corpus_networks()) == 55
