"""The bundled example models: the converting ones match eager PyTorch, the others are rejected
with the reasons their docstrings give."""

from __future__ import annotations

import copy

import pytest
import torch

import ncet
from ncet.examples import EXAMPLES, load_example

CONVERTING = [n for n, e in EXAMPLES.items() if e.converts]
REJECTED = {
    "sigmoid_mlp": {"unsupported-function"},
    "training_mode_cnn": {"batch-norm-training", "dropout-training"},
    "batch_mixing": {"batch-not-preserved"},
    "data_dependent": {"trace-failed"},
    "many_problems": {"batch-norm-training", "dropout-training", "inplace",
                      "affine-tensor-tensor", "unsupported-method", "dynamic-argument",
                      "unsupported-function"},
}


def test_every_example_is_in_a_table():
    assert set(CONVERTING) | set(REJECTED) == set(EXAMPLES)


@pytest.mark.parametrize("name", CONVERTING)
def test_converting_example_matches_eager(name):
    model, shapes = load_example(name)
    ir = ncet.convert(model, *shapes)
    generator = torch.Generator().manual_seed(7)
    inputs = [torch.randn((6, *s), generator=generator, dtype=torch.float64) for s in shapes]
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(*inputs)
    torch.testing.assert_close(ncet.evaluate(ir, *inputs), expected, rtol=1e-12, atol=1e-12)
    assert [n.op_type for n in ir.nodes if n.op_type == "Input"] == ["Input"] * len(shapes)


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_example_reports_every_reason(name):
    model, shapes = load_example(name)
    report = ncet.diagnose(model, *shapes)
    assert not report.ok and report.graph is None
    assert {r.code for r in report.errors} == REJECTED[name]
    with pytest.raises(ncet.ConversionError) as info:
        ncet.convert(model, *shapes)
    assert info.value.code == report.errors[0].code


def test_residual_cnn_uses_the_advertised_operators():
    model, shapes = load_example("residual_cnn")
    ops = {n.op_type for n in ncet.convert(model, *shapes).nodes}
    assert {"Conv2d", "BatchNorm", "ReLU", "Add", "MaxPool2d", "AvgPool2d", "Concat",
            "AdaptiveAvgPool2d", "Flatten", "Identity", "ElementwiseAffine", "Linear"} <= ops


def test_examples_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    for name in EXAMPLES:
        load_example(name)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_unknown_example_names_the_choices():
    with pytest.raises(KeyError, match="residual_cnn"):
        load_example("resnet50")


def _convert_here(model, shapes):
    return ncet.convert(model, *shapes)


@pytest.mark.parametrize("name", CONVERTING)
def test_saved_files_are_byte_identical_and_evaluate_identically(name, tmp_path):
    model, shapes = load_example(name)
    first, second = ncet.convert(model, *shapes), _convert_here(model, shapes)  # two call sites
    ncet.save(first, tmp_path / "a.ncet")
    ncet.save(second, tmp_path / "b.ncet")
    assert (tmp_path / "a.ncet").read_bytes() == (tmp_path / "b.ncet").read_bytes()
    loaded = ncet.load(tmp_path / "a.ncet")
    assert loaded.nodes == first.nodes
    inputs = [torch.randn((4, *s), generator=torch.Generator().manual_seed(3)) for s in shapes]
    assert torch.equal(ncet.evaluate(loaded, *inputs), ncet.evaluate(first, *inputs))
