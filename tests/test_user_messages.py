"""What a user reads when a call goes wrong: short, about what they passed, and readable when
printed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.examples import load_example

MODEL = nn.Sequential(nn.Linear(4, 3), nn.ReLU())


@pytest.mark.parametrize("entry", [ncet.convert, ncet.diagnose])
@pytest.mark.parametrize("value, kind", [
    (torch.randn(8, 4), "Tensor"),
    (torch.randn(1000, 4), "Tensor"),
    (np.zeros((8, 4)), "numpy.ndarray"),
])
def test_a_tensor_given_as_a_shape_is_named_not_dumped(entry, value, kind):
    with pytest.raises(ValueError) as caught:
        entry(MODEL, value)
    message = str(caught.value)
    assert f"got a {kind} of shape {list(value.shape)}" in message
    assert "tuple(x.shape[1:])" in message
    assert "tensor(" not in message and "array(" not in message and len(message) < 200


def test_a_shape_given_as_a_torch_size_still_converts():
    assert ncet.convert(MODEL, torch.randn(8, 4).shape[1:]).nodes[0].shape == (4,)


def test_printing_a_reports_error_prints_its_message(capsys):
    model, shapes = load_example("many_problems")
    report = ncet.diagnose(model, *shapes)
    for row in report.errors:
        print(row)
        assert str(row) == row.message == str(row.error)
    printed = capsys.readouterr().out
    assert "Row(" not in printed and "Source(" not in printed
    assert printed.count("\n") == len(report.errors)


def test_printing_a_row_without_a_problem_says_what_the_node_became():
    report = ncet.diagnose(MODEL, (4,))
    assert [str(r) for r in report.rows] == [
        "node 'input_1' (placeholder input): mapped to Input",  # forward(self, input)
        "node '_0' (call_module nn.Linear): mapped to Linear",
        "node '_1' (call_module nn.ReLU): mapped to ReLU",
        "node 'output' (output output): mapped to Output",
    ]
