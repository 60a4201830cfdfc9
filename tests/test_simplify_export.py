"""`to_onnx(..., simplify=True)` (issue 35): the simplified graph exported once certified,
so that the verification tools' lint has nothing to report on a network with BatchNorm and
an input normalisation, which ERAN mis-handles as written (its BatchNormalization is
replaced by its input) and Marabou rejects; the file certifies against the simplified graph
with check_onnx."""

from __future__ import annotations

import onnx
import pytest
import torch
from torch import nn

import ncet
from ncet.passes import simplify
from ncet.passes.export import METADATA_KEY
from tests.test_simplify import Normalised, _no_eps
from tests.zoo_models import seeded

pytest.importorskip("onnxruntime")


def _network():
    return seeded(lambda: Normalised(nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 8),
        nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)), 3), 0)


@pytest.mark.parametrize("profile", ["canonical", "verifier"])
def test_the_simplified_export_leaves_the_lint_nothing_to_report(profile, tmp_path):
    ir = ncet.convert(_network(), (3, 6, 6))
    plain = ncet.to_onnx(ir, profile=profile)
    assert {f.code for f in ncet.lint_onnx(plain, "eran").findings} == {
        "eran-batchnorm-ignored"}
    assert ncet.lint_onnx(plain, "marabou").findings
    path = tmp_path / "net.onnx"
    model = ncet.to_onnx(ir, path, profile=profile, simplify=True)
    for tool in ("eran", "marabou", "abcrown", "nnv"):
        assert not ncet.lint_onnx(path, tool).findings, tool
    assert onnx.load(str(path)) == model
    props = {p.key: p.value for p in model.metadata_props}
    assert props[METADATA_KEY].startswith("CERTIFIED by ncet.simplify")
    assert "fold_batchnorm x2" in props[METADATA_KEY]
    assert {n.op_type for n in model.graph.node} <= {"Conv", "Relu", "Flatten", "Gemm",
                                                      "MatMul", "Add", "Reshape"}
    simplified, _ = simplify(ir)
    assert ncet.check_onnx(simplified, path, samples_per_scale=2).ok
    assert ncet.to_onnx(ir, profile=profile, simplify=True).SerializeToString() == \
        model.SerializeToString()


def test_an_uncertified_simplification_is_not_written(monkeypatch, tmp_path):
    model = _network()
    with torch.no_grad():
        model.body[1].running_var.copy_(torch.tensor([2e-4, 5e-4, 1e-3, 3e-4]))
    ir = ncet.convert(model, (3, 6, 6))
    monkeypatch.setattr("ncet.passes.affine_forms.batchnorm_scale", _no_eps)
    with pytest.raises(ValueError, match="not certified.*fold_batchnorm"):
        ncet.to_onnx(ir, tmp_path / "net.onnx", simplify=True)
    assert not (tmp_path / "net.onnx").exists()


def test_the_benchmark_runs_on_one_corpus_network():
    from benchmarks import simplify as bench
    from tests.corpus import corpus_root

    corpus_root()
    (row,) = bench.main(["--networks", "test/test_tiny", "--rounds", "1", "--samples", "4"])
    assert row["certified"] and row["nodes_after"] <= row["nodes_before"]
    assert row["samples"] in ("box", "generated")
    assert set(row["lint_before"]) == set(row["lint_after"]) == {
        "abcrown", "marabou", "nnv", "eran"}
    assert "| test/test_tiny.onnx |" in bench.markdown([row])
