"""Spec section 1 (graph boundaries: Input and Output), and tracing failures as ncet.TraceError.

Tracing failures must surface as `ncet.TraceError` with a reason code, never as FX's raw
exception; `diagnose` reports them without raising.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
from torch import nn

import ncet
from tests.conftest import (
    Fn,
    Fn2,
    batched_inputs,
    convert_and_compare,
    op_nodes,
    reseed,
)


class Three(nn.Module):
    """Three forward() arguments, returned in a different order as a list."""

    def forward(self, a, b, c):
        return [c, a.relu(), b]


# (spelling, model, per-sample input shapes, output names, Output attrs["tuple"])
BOUNDARY_ROWS = [
    pytest.param(Fn(lambda m, x: x.relu()), [(3, 4)], ["relu"], False, id="return y"),
    pytest.param(Fn(lambda m, x: x), [(3,)], ["x"], False, id="return x (an Input)"),
    pytest.param(Fn(lambda m, x: (x.relu(), x + 1)), [(3,)], ["relu", "add"], True,
                 id="return (y, z)"),
    pytest.param(Fn(lambda m, x: (x.relu(),)), [(3,)], ["relu"], True, id="return (y,)"),
    pytest.param(Fn2(lambda m, x, y: (y, x)), [(2,), (3,)], ["y", "x"], True,
                 id="return (y, x) (two Inputs)"),
    pytest.param(Three(), [(2,), (3,), (4,)], ["c", "relu", "b"], True, id="return [c, a, b]"),
]


@pytest.mark.parametrize(("model", "shapes", "outputs", "is_tuple"), BOUNDARY_ROWS)
def test_input_and_output_nodes(model, shapes, outputs, is_tuple):
    ir = convert_and_compare(model.eval(), *shapes)
    assert [n.name for n in ir.inputs] == list(inspect.signature(model.forward).parameters)
    assert [n.attrs["index"] for n in ir.inputs] == list(range(len(shapes)))
    assert all(n.inputs == () for n in ir.inputs)
    output = ir.nodes[-1]
    assert output.op_type == "Output" and output.shape is None
    assert list(ir.outputs) == outputs == list(output.inputs)
    assert output.attrs["tuple"] is is_tuple


def test_output_consumes_existing_tensors_only():
    """Every name an Output (or any node) reads is produced earlier in the graph."""
    ir = convert_and_compare(Fn(lambda m, x: (x.relu(), x.relu() * 2)).eval(), (3,))
    seen = set()
    for node in ir.nodes:
        assert set(node.inputs) <= seen, f"{node!r} reads a later or unknown node"
        seen.add(node.name)
    assert len(op_nodes(ir)) == 3


OUTPUT_REJECTIONS = [
    pytest.param(Fn(lambda m, x: {"y": x.relu()}), id="return {'y': y}"),
    pytest.param(Fn(lambda m, x: (x.relu(), (x, x))), id="return (y, (x, x))"),
    pytest.param(Fn(lambda m, x: (x.relu(), m.b), b=torch.ones(3)), id="return (y, buffer)"),
]


@pytest.mark.parametrize("model", OUTPUT_REJECTIONS)
def test_output_structure_rejected(model):
    with pytest.raises(ncet.SupportBoundaryError) as info:
        ncet.convert(model.eval(), (3,))
    assert info.value.code == "output-structure"
    assert info.value.node == "output"


class DataDependent(nn.Module):
    """Python control flow on a tensor value: torch.fx cannot trace it."""

    def forward(self, x):
        if x.sum() > 0:
            return x.relu()
        return x


TRACE_ERRORS = [
    pytest.param(DataDependent(), [(3,)], "trace-failed", id="if x.sum() > 0"),
    pytest.param(Fn(lambda m, x: x.relu()), [(3,), (3,)], "input-count", id="too many shapes"),
    pytest.param(Fn2(lambda m, x, y: x + y), [(3,)], "input-count", id="too few shapes"),
    pytest.param(Fn(lambda m, x: x.relu()), [], "input-count", id="no shapes"),
    pytest.param(Fn2(lambda m, x, y: x + y), [(3,), (4,)], "shape-propagation",
                 id="shapes that do not fit the model"),
]


@pytest.mark.parametrize(("model", "shapes", "code"), TRACE_ERRORS)
def test_trace_error(model, shapes, code):
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(model.eval(), *shapes)
    assert info.value.code == code
    assert f"[{code}]" in str(info.value)


@pytest.mark.parametrize(("model", "shapes", "code"), TRACE_ERRORS)
def test_diagnose_reports_trace_error(model, shapes, code):
    report = ncet.diagnose(model.eval(), *shapes)
    assert not report.ok and report.graph is None
    assert code in {r.code for r in report.errors}


class Mixed(nn.Module):
    """A little of everything: conv, pooling, a skip connection, indexing, mean and concat."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.linear = nn.Linear(2, 3)

    def forward(self, x):
        h = (self.conv(x) + x).relu()
        h = self.pool(h).mean((2, 3))
        return torch.cat((self.linear(h), h[:, :1] * 2), 1)


@pytest.mark.parametrize("batch", [1, 2, 7])
def test_evaluate_takes_any_batch_size(batch):
    model = reseed(Mixed()).eval()
    ir = convert_and_compare(model, (2, 4, 4))
    (x,) = batched_inputs((2, 4, 4), seed=batch, batch=batch)
    with torch.no_grad():
        want = copy.deepcopy(model).double()(x)
    torch.testing.assert_close(ncet.evaluate(ir, x), want, rtol=1e-12, atol=1e-12)
