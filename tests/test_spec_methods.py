"""Spec section 4 (tensor method calls): every row converts to its op_type and matches eager.

Attributes are per-sample (batch axis removed, axes non-negative).
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import (
    affine,
    assert_attrs,
    convert_and_compare,
    only_op,
    seeded,
    spec_row,
)
from tests.spelling_columns import op_type_column

X = [(3, 4)]
XY = [(3, 4), (3, 4)]
C = seeded(3, 4, seed=1, nonzero=True)  # a fixed tensor of x's per-sample shape, no zeros


METHOD_ROWS = [
    # Add / Sub of two graph tensors.
    spec_row("x.add(y, alpha=...)", lambda m, x, y: x.add(y, alpha=2.5), XY, "Add",
             {"alpha": 2.5}),
    spec_row("x.add(y)", lambda m, x, y: x.add(y), XY, "Add", {"alpha": 1}),
    spec_row("x.sub(y, alpha=...)", lambda m, x, y: x.sub(y, alpha=0.5), XY, "Sub",
             {"alpha": 0.5}),
    spec_row("x.subtract(y, alpha=...)", lambda m, x, y: x.subtract(y, alpha=-3), XY, "Sub",
             {"alpha": -3}),
    # ElementwiseAffine, Python scalar or get_attr tensor constant.
    spec_row("x.add(c)", lambda m, x: x.add(2.0), X, "ElementwiseAffine",
             affine("add", 0, 2.0, alpha=1)),
    spec_row("x.add(c, alpha=...)", lambda m, x: x.add(2.0, alpha=-1.5), X,
             "ElementwiseAffine", affine("add", 0, 2.0, alpha=-1.5)),
    spec_row("x.sub(c)", lambda m, x: x.sub(2.0), X, "ElementwiseAffine",
             affine("sub", 0, 2.0, alpha=1)),
    spec_row("x.add(buffer)", lambda m, x: x.add(m.c), X, "ElementwiseAffine",
             affine("add", 0, constant="c", alpha=1), c=C),
    spec_row("x.sub(buffer, alpha=...)", lambda m, x: x.sub(m.c, alpha=3), X,
             "ElementwiseAffine", affine("sub", 0, constant="c", alpha=3), c=C),
    spec_row("x.subtract(c)", lambda m, x: x.subtract(1.25), X, "ElementwiseAffine",
             affine("sub", 0, 1.25, alpha=1)),
    spec_row("x.mul(c)", lambda m, x: x.mul(3), X, "ElementwiseAffine", affine("mul", 0, 3.0)),
    spec_row("x.multiply(c)", lambda m, x: x.multiply(-0.25), X, "ElementwiseAffine",
             affine("mul", 0, -0.25)),
    spec_row("x.mul(buffer)", lambda m, x: x.mul(m.c), X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=C),
    spec_row("x.multiply(buffer)", lambda m, x: x.multiply(m.c), X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=C),
    spec_row("x.div(c)", lambda m, x: x.div(4), X, "ElementwiseAffine", affine("div", 0, 4.0)),
    spec_row("x.divide(c)", lambda m, x: x.divide(3.0), X, "ElementwiseAffine",
             affine("div", 0, 3.0)),
    spec_row("x.true_divide(c)", lambda m, x: x.true_divide(7), X, "ElementwiseAffine",
             affine("div", 0, 7.0)),
    spec_row("x.div(buffer)", lambda m, x: x.div(m.c), X, "ElementwiseAffine",
             affine("div", 0, constant="c"), c=C),
    # Activation.
    spec_row("x.relu()", lambda m, x: x.relu(), X, "ReLU"),
    # Shape operators.
    spec_row("x.flatten(1)", lambda m, x: x.flatten(1), [(2, 3, 4)], "Flatten",
             {"start_dim": 0, "end_dim": 2}),
    spec_row("x.flatten(start_dim=2)", lambda m, x: x.flatten(start_dim=2), [(2, 3, 4)],
             "Flatten", {"start_dim": 1, "end_dim": 2}),
    spec_row("x.flatten(1, -2)", lambda m, x: x.flatten(1, -2), [(2, 3, 4)], "Flatten",
             {"start_dim": 0, "end_dim": 1}),
    spec_row("x.mean(dim=..., keepdim=...)", lambda m, x: x.mean(dim=1, keepdim=True), X,
             "ReduceMean", {"axes": [0], "keepdim": True}),
    spec_row("x.mean(axis=..., keepdims=...)", lambda m, x: x.mean(axis=1, keepdims=True), X,
             "ReduceMean", {"axes": [0], "keepdim": True}),
    spec_row("x.mean(-1)", lambda m, x: x.mean(-1), X, "ReduceMean",
             {"axes": [1], "keepdim": False}),
    spec_row("x.mean((2, 1))", lambda m, x: x.mean((2, 1)), X, "ReduceMean",
             {"axes": [0, 1], "keepdim": False}),
    spec_row("x.reshape(...)", lambda m, x: x.reshape(-1, 12), X, "Reshape", {"shape": [12]}),
    spec_row("x.reshape((...))", lambda m, x: x.reshape((-1, 4, 3)), X, "Reshape",
             {"shape": [4, 3]}),
    spec_row("x.view(...)", lambda m, x: x.view(-1, 12), X, "Reshape", {"shape": [12]}),
    spec_row("x.view(-1, 2, 6)", lambda m, x: x.view(-1, 2, 6), X, "Reshape",
             {"shape": [2, 6]}),
    spec_row("x.squeeze(dim)", lambda m, x: x.squeeze(1), [(1, 3)], "Reshape", {"shape": [3]}),
    spec_row("x.squeeze(-1)", lambda m, x: x.squeeze(-1), [(3, 1)], "Reshape", {"shape": [3]}),
    spec_row("x.unsqueeze(dim)", lambda m, x: x.unsqueeze(1), X, "Reshape",
             {"shape": [1, 3, 4]}),
    spec_row("x.unsqueeze(-1)", lambda m, x: x.unsqueeze(-1), X, "Reshape",
             {"shape": [3, 4, 1]}),
    spec_row("x.permute(...)", lambda m, x: x.permute(0, 2, 1), X, "Permute", {"perm": [1, 0]}),
    spec_row("x.permute((...))", lambda m, x: x.permute((0, 3, 1, 2)), [(2, 3, 4)], "Permute",
             {"perm": [2, 0, 1]}),
    spec_row("x.transpose(...)", lambda m, x: x.transpose(1, 2), X, "Transpose",
             {"dim0": 0, "dim1": 1}),
    spec_row("x.transpose(-1, -2)", lambda m, x: x.transpose(-1, -2), X, "Transpose",
             {"dim0": 0, "dim1": 1}),
    spec_row("x.transpose(3, 1)", lambda m, x: x.transpose(3, 1), [(2, 3, 4)], "Transpose",
             {"dim0": 0, "dim1": 2}),
]


@pytest.mark.parametrize(("build", "shapes", "op_type", "attrs"), METHOD_ROWS)
def test_method_row(build, shapes, op_type, attrs):
    model = build()
    ir = convert_and_compare(model, *shapes)
    node = only_op(ir)
    assert node.op_type == op_type
    assert node.op_type in op_type_column(model)  # the spec's column in the spelling table
    assert_attrs(node, attrs)
    assert node.source.fx_op == "call_method"
    if node.attrs.get("constant") is not None:  # lifted bit for bit
        assert torch.equal(ir.constants[node.attrs["constant"]], model.get_buffer("c"))
