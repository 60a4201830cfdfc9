"""Spec section 3 (function calls): every row converts to its op_type and matches eager PyTorch.

Attributes are per-sample (batch axis removed, axes non-negative). Constants are either
Python scalars or fixed tensors that FX reaches through get_attr (buffers or parameters).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import (
    affine,
    assert_attrs,
    convert_and_compare,
    fx_op_of,
    only_op,
    param,
    seeded,
    spec_row,
)
from tests.spelling_columns import op_type_column

X = [(3, 4)]
XY = [(3, 4), (3, 4)]
IMAGE = [(2, 4, 4)]
C = seeded(3, 4, seed=1, nonzero=True)  # a fixed tensor of x's per-sample shape, no zeros


FUNCTION_ROWS = [
    # Linear and Conv2d with fixed (get_attr) weights.
    spec_row("F.linear(x, weight, bias)", lambda m, x: F.linear(x, m.weight, m.bias), [(4,)],
             "Linear", {"weight": "weight", "bias": "bias"}, weight=param(3, 4), bias=param(3)),
    spec_row("F.linear(x, weight)", lambda m, x: F.linear(x, m.weight), [(2, 4)], "Linear",
             {"weight": "weight", "bias": None}, weight=param(3, 4)),
    spec_row("F.linear(x, buffer)", lambda m, x: F.linear(x, m.w, m.b), [(4,)], "Linear",
             {"weight": "w", "bias": "b"}, w=seeded(3, 4), b=seeded(3, seed=2)),
    spec_row("F.conv2d(x, weight, bias, ...)",
             lambda m, x: F.conv2d(x, m.weight, m.bias, stride=1, padding=1), [(2, 5, 5)],
             "Conv2d", {"weight": "weight", "bias": "bias", "stride": [1, 1], "dilation": [1, 1],
                        "groups": 1},
             weight=param(3, 2, 3, 3), bias=param(3)),
    spec_row("F.conv2d(x, weight, stride=2, groups=2)",
             lambda m, x: F.conv2d(x, m.weight, None, 2, 0, 1, 2), [(2, 7, 7)], "Conv2d",
             {"bias": None, "stride": [2, 2], "groups": 2}, weight=param(4, 1, 3, 3)),
    # Add / Sub of two graph tensors.
    spec_row("x + y", lambda m, x, y: x + y, XY, "Add", {"alpha": 1}),
    spec_row("torch.add(x, y, alpha=...)", lambda m, x, y: torch.add(x, y, alpha=2.5), XY,
             "Add", {"alpha": 2.5}),
    spec_row("x - y", lambda m, x, y: x - y, XY, "Sub", {"alpha": 1}),
    spec_row("torch.sub(x, y, alpha=...)", lambda m, x, y: torch.sub(x, y, alpha=0.5), XY,
             "Sub", {"alpha": 0.5}),
    spec_row("torch.subtract(x, y, alpha=...)",
             lambda m, x, y: torch.subtract(x, y, alpha=-2.0), XY, "Sub", {"alpha": -2.0}),
    # ElementwiseAffine with a Python scalar. c + x and c * x are exactly commutative in IEEE
    # arithmetic, so they canonicalize to x + c and x * c (tensor_position 0); c - x cannot.
    spec_row("x + c", lambda m, x: x + 1.5, X, "ElementwiseAffine",
             affine("add", 0, 1.5, alpha=1)),
    spec_row("c + x", lambda m, x: 1.5 + x, X, "ElementwiseAffine", affine("add", 0, 1.5)),
    spec_row("x - c", lambda m, x: x - 1.5, X, "ElementwiseAffine",
             affine("sub", 0, 1.5, alpha=1)),
    spec_row("c - x", lambda m, x: 1.5 - x, X, "ElementwiseAffine", affine("sub", 1, 1.5)),
    spec_row("x * c", lambda m, x: x * 3, X, "ElementwiseAffine", affine("mul", 0, 3.0)),
    spec_row("c * x", lambda m, x: -0.5 * x, X, "ElementwiseAffine", affine("mul", 0, -0.5)),
    spec_row("x / c", lambda m, x: x / 4, X, "ElementwiseAffine", affine("div", 0, 4.0)),
    spec_row("torch.add(x, c, alpha=...)", lambda m, x: torch.add(x, 2, alpha=3), X,
             "ElementwiseAffine", affine("add", 0, 2.0, alpha=3)),
    spec_row("torch.sub(x, c)", lambda m, x: torch.sub(x, 2), X, "ElementwiseAffine",
             affine("sub", 0, 2.0, alpha=1)),
    spec_row("torch.subtract(x, c, alpha=...)",
             lambda m, x: torch.subtract(x, 2, alpha=0.5), X, "ElementwiseAffine",
             affine("sub", 0, 2.0, alpha=0.5)),
    spec_row("torch.mul(x, c)", lambda m, x: torch.mul(x, -2), X, "ElementwiseAffine",
             affine("mul", 0, -2.0)),
    spec_row("torch.multiply(x, c)", lambda m, x: torch.multiply(x, 0.5), X,
             "ElementwiseAffine", affine("mul", 0, 0.5)),
    spec_row("torch.div(x, c)", lambda m, x: torch.div(x, 8), X, "ElementwiseAffine",
             affine("div", 0, 8.0)),
    spec_row("torch.divide(x, c)", lambda m, x: torch.divide(x, 3), X, "ElementwiseAffine",
             affine("div", 0, 3.0)),
    spec_row("torch.true_divide(x, c)", lambda m, x: torch.true_divide(x, 3), X,
             "ElementwiseAffine", affine("div", 0, 3.0)),
    # ElementwiseAffine with a fixed tensor reached through get_attr.
    spec_row("x + buffer", lambda m, x: x + m.c, X, "ElementwiseAffine",
             affine("add", 0, constant="c", alpha=1), c=C),
    spec_row("buffer + x", lambda m, x: m.c + x, X, "ElementwiseAffine",
             affine("add", 0, constant="c"), c=C),
    spec_row("x - buffer", lambda m, x: x - m.c, X, "ElementwiseAffine",
             affine("sub", 0, constant="c", alpha=1), c=C),
    spec_row("buffer - x", lambda m, x: m.c - x, X, "ElementwiseAffine",
             affine("sub", 1, constant="c"), c=C),
    spec_row("x * buffer", lambda m, x: x * m.c, X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=C),
    spec_row("buffer * x", lambda m, x: m.c * x, X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=C),
    spec_row("x / buffer", lambda m, x: x / m.c, X, "ElementwiseAffine",
             affine("div", 0, constant="c"), c=C),
    spec_row("x * parameter", lambda m, x: x * m.p, X, "ElementwiseAffine",
             affine("mul", 0, constant="p"), p=param(3, 4, seed=4)),
    spec_row("x * buffer(broadcast)", lambda m, x: x * m.c, X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=seeded(4, seed=5)),
    spec_row("x + 0-d buffer", lambda m, x: x + m.c, X, "ElementwiseAffine",
             affine("add", 0, constant="c"), c=torch.tensor(0.75)),
    spec_row("torch.add(x, buffer, alpha=...)", lambda m, x: torch.add(x, m.c, alpha=2), X,
             "ElementwiseAffine", affine("add", 0, constant="c", alpha=2), c=C),
    spec_row("torch.add(buffer, x, alpha=...)", lambda m, x: torch.add(m.c, x, alpha=2), X,
             "ElementwiseAffine", affine("add", 1, constant="c", alpha=2), c=C),
    spec_row("torch.sub(buffer, x, alpha=...)", lambda m, x: torch.sub(m.c, x, alpha=2), X,
             "ElementwiseAffine", affine("sub", 1, constant="c", alpha=2), c=C),
    spec_row("torch.mul(x, buffer)", lambda m, x: torch.mul(x, m.c), X, "ElementwiseAffine",
             affine("mul", 0, constant="c"), c=C),
    spec_row("torch.div(x, buffer)", lambda m, x: torch.div(x, m.c), X, "ElementwiseAffine",
             affine("div", 0, constant="c"), c=C),
    # Activations.
    spec_row("F.relu(x)", lambda m, x: F.relu(x), X, "ReLU"),
    spec_row("F.leaky_relu(x, ...)", lambda m, x: F.leaky_relu(x, 0.2), X, "LeakyReLU",
             {"negative_slope": 0.2}),
    spec_row("F.leaky_relu(x)", lambda m, x: F.leaky_relu(x), X, "LeakyReLU",
             {"negative_slope": 0.01}),
    spec_row("torch.relu(x)", lambda m, x: torch.relu(x), X, "ReLU"),
    # Pooling.
    spec_row("F.adaptive_avg_pool2d(x, ...)", lambda m, x: F.adaptive_avg_pool2d(x, (2, 3)),
             [(3, 4, 6)], "AdaptiveAvgPool2d", {"output_size": [2, 3]}),
    spec_row("F.adaptive_avg_pool2d(x, 1)", lambda m, x: F.adaptive_avg_pool2d(x, 1), IMAGE,
             "AdaptiveAvgPool2d", {"output_size": [1, 1]}),
    spec_row("F.avg_pool2d(x, ...)", lambda m, x: F.avg_pool2d(x, 2), IMAGE, "AvgPool2d",
             {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}),
    spec_row("F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)",
             lambda m, x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), IMAGE,
             "AvgPool2d", {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1],
                           "count_include_pad": False}),
    spec_row("F.max_pool2d(x, ...)", lambda m, x: F.max_pool2d(x, 2), IMAGE, "MaxPool2d",
             {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}),
    spec_row("F.max_pool2d(x, 3, 2, 1)", lambda m, x: F.max_pool2d(x, 3, 2, 1), [(2, 5, 5)],
             "MaxPool2d", {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}),
    # Dropout with training=False.
    spec_row("F.dropout(training=False)", lambda m, x: F.dropout(x, 0.3, training=False), X,
             "Identity"),
    spec_row("F.dropout1d(training=False)", lambda m, x: F.dropout1d(x, training=False), X,
             "Identity"),
    spec_row("F.dropout2d(training=False)", lambda m, x: F.dropout2d(x, training=False),
             IMAGE, "Identity"),
    spec_row("F.dropout3d(training=False)", lambda m, x: F.dropout3d(x, training=False),
             [(2, 2, 3, 3)], "Identity"),
    # Concatenation.
    spec_row("torch.cat((x, y), dim)", lambda m, x, y: torch.cat((x, y), 1),
             [(2, 3), (4, 3)], "Concat", {"axis": 0}),
    spec_row("torch.cat((x, y), -1)", lambda m, x, y: torch.cat((x, y), -1),
             [(2, 3), (2, 5)], "Concat", {"axis": 1}),
    spec_row("torch.cat((x, y, x), dim)", lambda m, x, y: torch.cat((x, y, x), 2),
             [(2, 3), (2, 1)], "Concat", {"axis": 1}),
    spec_row("torch.concat((x, y), dim)", lambda m, x, y: torch.concat((x, y), 1),
             [(2, 3), (4, 3)], "Concat", {"axis": 0}),
    spec_row("torch.concatenate((x, y), dim)", lambda m, x, y: torch.concatenate((x, y), 2),
             [(2, 3), (2, 5)], "Concat", {"axis": 1}),
    # PyTorch accepts NumPy's keyword names for dim / keepdim (and dim for concatenate's axis).
    spec_row("torch.cat((x, y), axis=dim)", lambda m, x, y: torch.cat((x, y), axis=1),
             [(2, 3), (4, 3)], "Concat", {"axis": 0}),
    spec_row("torch.concat((x, y), axis=dim)", lambda m, x, y: torch.concat((x, y), axis=-1),
             [(2, 3), (2, 5)], "Concat", {"axis": 1}),
    spec_row("torch.concatenate((x, y), dim=dim)",
             lambda m, x, y: torch.concatenate((x, y), dim=2), [(2, 3), (2, 5)], "Concat",
             {"axis": 1}),
    spec_row("torch.mean(x, axis=..., keepdims=...)",
             lambda m, x: torch.mean(x, axis=1, keepdims=True), X, "ReduceMean",
             {"axes": [0], "keepdim": True}),
    # Shape operators.
    spec_row("torch.flatten(x, 1)", lambda m, x: torch.flatten(x, 1), [(2, 3, 4)], "Flatten",
             {"start_dim": 0, "end_dim": 2}),
    spec_row("torch.flatten(x, 2)", lambda m, x: torch.flatten(x, 2), [(2, 3, 4)], "Flatten",
             {"start_dim": 1, "end_dim": 2}),
    spec_row("torch.flatten(x, 1, 2)", lambda m, x: torch.flatten(x, 1, 2), [(2, 3, 4)],
             "Flatten", {"start_dim": 0, "end_dim": 1}),
    spec_row("torch.mean(x, dim=..., keepdim=...)",
             lambda m, x: torch.mean(x, dim=1, keepdim=True), X, "ReduceMean",
             {"axes": [0], "keepdim": True}),
    spec_row("torch.mean(x, (3, 1))", lambda m, x: torch.mean(x, (3, 1)), [(2, 3, 4)],
             "ReduceMean", {"axes": [0, 2], "keepdim": False}),
    spec_row("torch.mean(x, -1)", lambda m, x: torch.mean(x, -1), X, "ReduceMean",
             {"axes": [1], "keepdim": False}),
    spec_row("torch.reshape(x, shape)", lambda m, x: torch.reshape(x, (-1, 12)), X, "Reshape",
             {"shape": [12]}),
    spec_row("torch.reshape(x, (-1, 2, 6))", lambda m, x: torch.reshape(x, (-1, 2, 6)), X,
             "Reshape", {"shape": [2, 6]}),
    spec_row("torch.squeeze(x, dim)", lambda m, x: torch.squeeze(x, 2), [(3, 1, 4)],
             "Reshape", {"shape": [3, 4]}),
    spec_row("torch.squeeze(x, -1)", lambda m, x: torch.squeeze(x, -1), [(3, 1)], "Reshape",
             {"shape": [3]}),
    spec_row("torch.squeeze(x, (1, 3))", lambda m, x: torch.squeeze(x, (1, 3)), [(1, 3, 1)],
             "Reshape", {"shape": [3]}),
    spec_row("torch.unsqueeze(x, dim)", lambda m, x: torch.unsqueeze(x, 1), X, "Reshape",
             {"shape": [1, 3, 4]}),
    spec_row("torch.unsqueeze(x, -1)", lambda m, x: torch.unsqueeze(x, -1), X, "Reshape",
             {"shape": [3, 4, 1]}),
    spec_row("torch.permute(x, dims)", lambda m, x: torch.permute(x, (0, 2, 1)), X, "Permute",
             {"perm": [1, 0]}),
    spec_row("torch.permute(x, (0, 3, 1, 2))", lambda m, x: torch.permute(x, (0, 3, 1, 2)),
             [(2, 3, 4)], "Permute", {"perm": [2, 0, 1]}),
    spec_row("torch.transpose(x, dim0, dim1)", lambda m, x: torch.transpose(x, 1, 2), X,
             "Transpose", {"dim0": 0, "dim1": 1}),
    spec_row("torch.transpose(x, -1, 1)", lambda m, x: torch.transpose(x, -1, 1), [(2, 3, 4)],
             "Transpose", {"dim0": 0, "dim1": 2}),
    # Indexing (classified in detail in test_spec_indexing.py).
    spec_row("x[:, 0]", lambda m, x: x[:, 0], X, "GetItem"),
    spec_row("x[:, 1:]", lambda m, x: x[:, 1:], X, "Slice"),
]


@pytest.mark.parametrize(("build", "shapes", "op_type", "attrs"), FUNCTION_ROWS)
def test_function_row(build, shapes, op_type, attrs):
    model = build()
    ir = convert_and_compare(model, *shapes)
    node = only_op(ir)
    assert node.op_type == op_type
    assert node.op_type in op_type_column(model)  # the spec's column in the spelling table
    assert_attrs(node, attrs)
    assert node.source.fx_op == fx_op_of(model) == "call_function"
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    for key in ("weight", "bias", "constant"):
        name = node.attrs.get(key)
        if name is not None:  # the lifted constant is the model's tensor, bit for bit
            assert ir.constants[name].dtype == state[name].dtype
            assert torch.equal(ir.constants[name], state[name])
