"""ncet.simplify on every network NCET has at hand (issue 35, "Done when"): the bundled
examples, the zoo models that convert (tests/zoo_models.py) and every corpus network that
imports (tests/corpus.py), each certified against the original; for the PyTorch models the
eager model is the oracle: its outputs against the simplified graph's, held to the bound."""

from __future__ import annotations

import pytest
import torch

import ncet
from ncet.exactness.check import generate_inputs
from ncet.examples import EXAMPLES
from ncet.passes import simplify
from tests.corpus import corpus_networks, corpus_root
from tests.zoo_models import CONVERTS, ZOO

CONVERTING = [e for e in ZOO if CONVERTS in (e.as_written, e.with_rewrite)]


def _certified_against_eager(model, ir):
    inputs, _ = generate_inputs(ir, samples_per_scale=4, seed=3)
    simplified, report = simplify(ir, inputs=inputs)
    assert report.ok, str(report)
    assert report.nodes_after <= report.nodes_before
    with torch.no_grad():
        eager = model(*(x.clone() for x in inputs))  # a model may write into its input
    eager = eager if isinstance(eager, (tuple, list)) else (eager,)
    ours = ncet.evaluate(simplified, *inputs, dtype=torch.float32)
    ours = ours if isinstance(ours, tuple) else (ours,)
    count = inputs[0].shape[0]
    gap = torch.cat([(e.double() - o.double()).abs().reshape(count, -1)
                     for e, o in zip(eager, ours)], dim=1)
    assert bool((gap <= report.bound).all()), (float(gap.max()), report.max_bound)
    return simplified, report


@pytest.mark.parametrize("name", [n for n, e in EXAMPLES.items() if e.converts])
def test_every_bundled_example_simplifies_and_certifies(name):
    example = EXAMPLES[name]
    model = example.build()
    _certified_against_eager(model, ncet.convert(model, *example.input_shapes))


@pytest.mark.parametrize("entry", CONVERTING, ids=[e.name for e in CONVERTING])
def test_every_zoo_model_that_converts_simplifies_and_certifies(entry):
    model = entry.factory()
    ir = ncet.convert(model, *entry.shapes, rewrite=True)
    simplified, report = _certified_against_eager(model, ir)
    # a BatchNorm right after the Conv2d or Linear that alone reads it does not survive
    for node in simplified.nodes:
        if node.op_type == "BatchNorm":
            before = simplified.node(node.inputs[0])
            assert before.op_type not in ("Conv2d", "Linear") or any(
                c.refused and node.name in c.removed for c in report.changes), node


def test_the_zoo_folds_its_batchnorms():
    folded = 0
    for entry in CONVERTING:
        ir = ncet.convert(entry.factory(), *entry.shapes, rewrite=True)
        _, report = simplify(ir, ["fold_batchnorm"], samples_per_scale=1)
        folded += sum(c.pass_name == "fold_batchnorm" for c in report.applied)
    assert folded >= 72  # of 82 (docs/simplification.md)


@pytest.mark.parametrize("network", corpus_networks())
def test_every_corpus_network_that_imports_simplifies_and_certifies(network):
    report = ncet.diagnose_onnx(corpus_root() / network)
    if not report.ok:
        assert report.errors  # refused on import, with its reasons (tests/test_onnx_corpus.py)
        return
    simplified, simplification = simplify(report.graph, samples_per_scale=2)
    assert simplification.ok, str(simplification)
    assert simplification.nodes_after <= simplification.nodes_before
    assert simplification.bound.shape == (sum(
        torch.Size(report.graph.node(o).shape).numel() for o in report.graph.outputs),)


def test_an_eps_dropped_from_the_fold_is_found_on_every_zoo_batchnorm_network(monkeypatch):
    """At the zoo's running variances (0.5 to 2), eps = 1e-5 moves the folded scale by a few
    parts in 10^6: the certificate's float64 check still finds the fault on every one."""
    from tests.test_simplify import _no_eps

    monkeypatch.setattr("ncet.passes.affine_forms.batchnorm_scale", _no_eps)
    folded = 0
    for entry in CONVERTING:
        ir = ncet.convert(entry.factory(), *entry.shapes, rewrite=True)
        _, report = simplify(ir, samples_per_scale=2)
        if "fold_batchnorm" not in {c.pass_name for c in report.applied}:
            continue
        folded += 1
        assert not report.ok and "fold_batchnorm" in report.violation.passes, entry.name
    assert folded >= 11
