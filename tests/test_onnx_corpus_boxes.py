"""Each corpus network that imports, certified against onnxruntime on inputs inside its own
input box: the first property the competition pairs it with (`instances_included.csv`),
its box's corners and points drawn between them (issue 32, "Done when"). Networks without a
property are certified on the generated inputs of tests/test_onnx_corpus.py."""

from __future__ import annotations

import math

import pytest

import ncet
from tests.corpus import box_samples, corpus_networks, corpus_root, first_property

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("network", corpus_networks())
def test_every_network_that_imports_is_certified_inside_its_input_box(network):
    root = corpus_root()
    prop_path = first_property(network)
    report = ncet.diagnose_onnx(root / network)
    if prop_path is None or not report.ok:
        assert report.ok or report.errors  # refused ones name their problems
        return
    ir = report.graph
    prop = ncet.read_vnnlib(root / prop_path)
    (x_node,) = ir.inputs
    assert prop.num_inputs == math.prod(x_node.shape)
    x = box_samples(prop, x_node.shape, 6)
    certificate = ncet.check_onnx(ir, root / network, x)
    assert certificate.ok, str(certificate).splitlines()[0]


def test_most_networks_that_import_have_a_property():
    root = corpus_root()
    paired = [n for n in corpus_networks() if first_property(n) is not None
              and ncet.diagnose_onnx(root / n).ok]
    assert len(paired) >= 35
