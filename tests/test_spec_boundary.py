"""Spec section 7 (frontend spelling boundary): one row per rejection rule, plus constant lifting.

Each rejection row asserts the error class, its reason `code`, and that the error names the
offending FX node. `diagnose` must report the same problem at the same node without raising.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from tests.conftest import (
    At,
    Fn,
    Fn2,
    affine,
    assert_attrs,
    assert_rejected,
    batched_inputs,
    codes,
    convert_and_compare,
    fx_names,
    ir_signature,
    only_op,
    param,
    reseed,
    seeded,
)
from tests.spelling_columns import op_type_column

U = ncet.UnsupportedOperatorError
S = ncet.SupportBoundaryError
X = [(3, 4)]
XY = [(3, 4), (3, 4)]
C = seeded(3, 4, seed=1, nonzero=True)


def with_value(tensor: torch.Tensor, index: tuple, value: float) -> torch.Tensor:
    out = tensor.clone()
    out[index] = value
    return out


WITH_ZERO = with_value(C, (1, 2), 0.0)
WITH_INF = with_value(C, (0, 3), float("inf"))


def reject(spelling, fn, shapes, cls, code, node, **state):
    """A rejection row: `fn(m, *inputs)` with `state` must raise `cls` with `code` at `node`."""
    def build() -> nn.Module:
        fresh = {k: nn.Parameter(v.detach().clone()) if isinstance(v, nn.Parameter)
                 else v.clone() for k, v in state.items()}
        return (Fn2 if len(shapes) == 2 else Fn)(fn, **fresh).eval()

    return pytest.param(build, shapes, cls, code, node, id=spelling)


REJECTIONS = [
    # In-place forms.
    reject("x.relu_()", lambda m, x: x.relu_(), X, U, "inplace", "relu_"),
    reject("x.add_(y)", lambda m, x, y: x.add_(y), XY, U, "inplace", "add_"),
    reject("x.mul_(2)", lambda m, x: x.mul_(2), X, U, "inplace", "mul_"),
    reject("torch.relu_(x)", lambda m, x: torch.relu_(x), X, U, "inplace", "relu_"),
    reject("F.relu_(x)", lambda m, x: F.relu_(x), X, U, "inplace", "relu_"),
    reject("buffer.add_(1)", lambda m, x: x + m.c.add_(1), X, U, "inplace", "add_", c=C),
    reject("F.relu(x, inplace=True)", lambda m, x: F.relu(x, inplace=True), X, U, "inplace",
           "relu"),
    reject("F.leaky_relu(x, 0.1, inplace=True)",
           lambda m, x: F.leaky_relu(x, 0.1, inplace=True), X, U, "inplace", "leaky_relu"),
    reject("F.dropout(x, training=False, inplace=True)",
           lambda m, x: F.dropout(x, training=False, inplace=True), X, U, "inplace", "dropout"),
    # Dropout in training mode.
    reject("F.dropout(x)", lambda m, x: F.dropout(x), X, U, "dropout-training", "dropout"),
    reject("F.dropout(x, training=True)", lambda m, x: F.dropout(x, 0.2, training=True), X, U,
           "dropout-training", "dropout"),
    reject("F.dropout2d(x)", lambda m, x: F.dropout2d(x), [(2, 3, 3)], U, "dropout-training",
           "dropout2d"),
    # Squeeze / unsqueeze.
    reject("torch.squeeze(x)", lambda m, x: torch.squeeze(x), [(1, 3)], S,
           "squeeze-without-dim", "squeeze"),
    reject("x.squeeze()", lambda m, x: x.squeeze(), [(1, 3)], S, "squeeze-without-dim",
           "squeeze"),
    reject("torch.squeeze(x, 0)", lambda m, x: torch.squeeze(x, 0), [(1, 3)], S, "batch-axis",
           "squeeze"),
    reject("x.squeeze((0, 1))", lambda m, x: x.squeeze((0, 1)), [(1, 3)], S, "batch-axis",
           "squeeze"),
    reject("x.unsqueeze(0)", lambda m, x: x.unsqueeze(0), X, S, "batch-axis", "unsqueeze"),
    reject("torch.unsqueeze(x, -4)", lambda m, x: torch.unsqueeze(x, -4), X, S, "batch-axis",
           "unsqueeze"),
    # Mean.
    reject("x.mean()", lambda m, x: x.mean(), X, S, "mean-without-dim", "mean"),
    reject("torch.mean(x)", lambda m, x: torch.mean(x), X, S, "mean-without-dim", "mean"),
    reject("x.mean(0)", lambda m, x: x.mean(0), X, S, "batch-axis", "mean"),
    reject("x.mean((0, 1))", lambda m, x: x.mean((0, 1)), X, S, "batch-axis", "mean"),
    reject("x.mean(-3)", lambda m, x: x.mean(-3), X, S, "batch-axis", "mean"),
    reject("x.mean(1, dtype=torch.float64)", lambda m, x: x.mean(1, dtype=torch.float64), X, S,
           "mean-dtype", "mean"),
    reject("torch.mean(x, 1, out=buffer)", lambda m, x: torch.mean(x, 1, out=m.out), X, S,
           "out-argument", "mean", out=torch.zeros(5, 4)),
    # ElementwiseAffine.
    reject("x * y", lambda m, x, y: x * y, XY, S, "affine-tensor-tensor", "mul"),
    reject("torch.mul(x, y)", lambda m, x, y: torch.mul(x, y), XY, S, "affine-tensor-tensor",
           "mul"),
    reject("x / y", lambda m, x, y: x / y, XY, S, "affine-tensor-tensor", "truediv"),
    reject("x.div(y)", lambda m, x, y: x.div(y), XY, S, "affine-tensor-tensor", "div"),
    reject("2 / x", lambda m, x: 2 / x, X, S, "affine-constant-over-tensor", "truediv"),
    reject("buffer / x", lambda m, x: m.c / x, X, S, "affine-constant-over-tensor", "truediv",
           c=C),
    reject("x / 0", lambda m, x: x / 0, X, S, "affine-zero-divisor", "truediv"),
    reject("x / -0.0", lambda m, x: x / -0.0, X, S, "affine-zero-divisor", "truediv"),
    reject("x.div(buffer with a zero)", lambda m, x: x.div(m.c), X, S, "affine-zero-divisor",
           "div", c=WITH_ZERO),
    reject("torch.div(x, 2, rounding_mode='floor')",
           lambda m, x: torch.div(x, 2, rounding_mode="floor"), X, S, "affine-rounding-mode",
           "div"),
    reject("x.div(2, rounding_mode='trunc')", lambda m, x: x.div(2, rounding_mode="trunc"), X,
           S, "affine-rounding-mode", "div"),
    reject("torch.mul(x, 2, out=buffer)", lambda m, x: torch.mul(x, 2, out=m.out), X, S,
           "out-argument", "mul", out=torch.zeros(5, 3, 4)),
    reject("torch.add(x, 1, out=buffer)", lambda m, x: torch.add(x, 1, out=m.out), X, S,
           "out-argument", "add", out=torch.zeros(5, 3, 4)),
    reject("x * inf", lambda m, x: x * float("inf"), X, S, "constant-not-finite", "mul"),
    reject("x + nan", lambda m, x: x + float("nan"), X, S, "constant-not-finite", "add"),
    reject("x * buffer with inf", lambda m, x: x * m.c, X, S, "constant-not-finite", "mul",
           c=WITH_INF),
    reject("x * buffer with -inf", lambda m, x: x * m.c, X, S, "constant-not-finite", "mul",
           c=with_value(C, (2, 1), float("-inf"))),
    reject("x + buffer with nan", lambda m, x: x + m.c, X, S, "constant-not-finite", "add",
           c=with_value(C, (1, 2), float("nan"))),
    reject("x * buffer on the meta device", lambda m, x: x * m.c, X, S, "constant-device",
           "mul", c=torch.ones(3, 4, device="meta")),
    reject("x + sparse buffer", lambda m, x: x + m.c, X, S, "constant-device", "add",
           c=C.to_sparse()),
    reject("x + buffer (broadcast grows x)", lambda m, x: x + m.c, [(1, 3)], S,
           "affine-broadcast", "add", c=seeded(4, 3)),
    reject("torch.add(x, y, alpha=inf)", lambda m, x, y: torch.add(x, y, alpha=float("inf")),
           XY, S, "alpha", "add"),
    reject("torch.sub(x, 1, alpha=nan)", lambda m, x: torch.sub(x, 1, alpha=float("nan")), X,
           S, "alpha", "sub"),
    # Linear / Conv2d weights, F.batch_norm, LeakyReLU slope.
    reject("F.linear(x, w, runtime bias)", lambda m, x, b: F.linear(x, m.w, b), [(4,), (3,)],
           S, "runtime-weight", "linear", w=param(3, 4)),
    reject("F.linear(x, computed weight)", lambda m, x: F.linear(x, m.w * 2), [(4,)], S,
           {"runtime-weight", "constant-computation"}, {"linear", "mul"}, w=param(3, 4)),
    reject("F.batch_norm(...)",
           lambda m, x: F.batch_norm(x, m.mean, m.var, training=False), [(4,)], U,
           "batch-norm-function", "batch_norm", mean=seeded(4), var=seeded(4, positive=True)),
    reject("F.leaky_relu(x, -0.1)", lambda m, x: F.leaky_relu(x, -0.1), X, S,
           "leaky-relu-slope", "leaky_relu"),
    reject("F.leaky_relu(x, 2.0)", lambda m, x: F.leaky_relu(x, 2.0), X, S, "leaky-relu-slope",
           "leaky_relu"),
    reject("F.leaky_relu(x, nan)", lambda m, x: F.leaky_relu(x, float("nan")), X, S,
           "leaky-relu-slope", "leaky_relu"),
    # Operations on the batch axis.
    reject("x.permute(1, 0, 2)", lambda m, x: x.permute(1, 0, 2), X, S, "batch-axis",
           "permute"),
    reject("torch.permute(x, (2, 1, 0))", lambda m, x: torch.permute(x, (2, 1, 0)), X, S,
           "batch-axis", "permute"),
    reject("torch.transpose(x, 0, 1)", lambda m, x: torch.transpose(x, 0, 1), X, S,
           "batch-axis", "transpose"),
    reject("x.transpose(1, -3)", lambda m, x: x.transpose(1, -3), X, S, "batch-axis",
           "transpose"),
    reject("torch.cat((x, y), 0)", lambda m, x, y: torch.cat((x, y), 0), XY, S, "batch-axis",
           "cat"),
    reject("torch.cat((x, y), -3)", lambda m, x, y: torch.cat((x, y), -3), XY, S, "batch-axis",
           "cat"),
    reject("torch.flatten(x)", lambda m, x: torch.flatten(x), X, S, "batch-axis", "flatten"),
    reject("x.flatten(0, 1)", lambda m, x: x.flatten(0, 1), X, S, "batch-axis", "flatten"),
    reject("x.view(-1)", lambda m, x: x.view(-1), X, S, "batch-not-preserved", "view"),
    reject("x.reshape(-1)", lambda m, x: x.reshape(-1), X, S, "batch-not-preserved", "reshape"),
    reject("torch.reshape(x, (4, -1))", lambda m, x: torch.reshape(x, (4, -1)), X, S,
           "batch-not-preserved", "reshape"),
    # Spellings not in the tables.
    reject("torch.sigmoid(x)", lambda m, x: torch.sigmoid(x), X, U, "unsupported-function",
           "sigmoid"),
    reject("torch.tanh(x)", lambda m, x: torch.tanh(x), X, U, "unsupported-function", "tanh"),
    reject("F.gelu(x)", lambda m, x: F.gelu(x), X, U, "unsupported-function", "gelu"),
    reject("-x", lambda m, x: -x, X, U, "unsupported-function", "neg"),
    reject("x @ y", lambda m, x, y: x @ y.transpose(1, 2), XY, U, "unsupported-function",
           "matmul"),
    reject("x.sigmoid()", lambda m, x: x.sigmoid(), X, U, "unsupported-method", "sigmoid"),
    reject("x.clamp(min=0)", lambda m, x: x.clamp(min=0), X, U, "unsupported-method", "clamp"),
    reject("x.size(0)", lambda m, x: x.view(x.size(0), -1), X, U, "unsupported-method", "size"),
]


@pytest.mark.parametrize(("build", "shapes", "cls", "code", "node"), REJECTIONS)
def test_rejected(build, shapes, cls, code, node):
    model = build()
    assert codes(node) & fx_names(model), f"table error: no FX node named {node!r}"
    assert_rejected(model, shapes, cls, code, node)


STATUS = {U: "unsupported", S: "boundary"}


@pytest.mark.parametrize(("build", "shapes", "cls", "code", "node"), REJECTIONS)
def test_diagnose_reports_the_same_problem(build, shapes, cls, code, node):
    model = build()
    report = ncet.diagnose(model, *shapes)
    assert not report.ok
    assert report.errors, "a failing report lists its errors"
    found = [(r.fx_name, r.code, r.status) for r in report.errors]
    assert any(r.fx_name in codes(node) and r.code in codes(code) and r.status == STATUS[cls]
               for r in report.errors), found
    assert len(report.rows) >= len(report.errors)


def test_diagnose_reports_every_problem():
    model = Fn(lambda m, x: torch.sigmoid(x.relu_()).mean()).eval()
    report = ncet.diagnose(model, (3, 4))
    found = {(r.fx_name, r.code) for r in report.errors}
    assert {("relu_", "inplace"), ("sigmoid", "unsupported-function"),
            ("mean", "mean-without-dim")} <= found
    assert not report.ok and report.graph is None


GOOD_MODELS = [
    pytest.param(lambda: reseed(nn.Sequential(nn.Linear(4, 3), nn.ReLU())), [(4,)],
                 id="nn.Sequential(nn.Linear, nn.ReLU)"),
    pytest.param(lambda: Fn(lambda m, x: (x + m.b).relu() / 2, b=seeded(4)), [(4,)],
                 id="(x + buffer).relu() / 2"),
    pytest.param(lambda: Fn2(lambda m, x, y: torch.cat((x[:, 1:], y), 1)), [(3, 2), (1, 2)],
                 id="torch.cat((x[:, 1:], y), 1)"),
]


@pytest.mark.parametrize(("build", "shapes"), GOOD_MODELS)
def test_diagnose_accepts_a_good_model(build, shapes):
    """One row per FX node; every IR node's row agrees with it; the graph is convert's."""
    model = build().eval()
    report = ncet.diagnose(model, *shapes)
    assert report.ok and not report.errors
    ir = ncet.convert(model, *shapes)
    assert ir_signature(report.graph) == ir_signature(ir)
    assert sorted(r.fx_name for r in report.rows) == sorted(fx_names(model))
    assert {r.status for r in report.rows} <= {"mapped", "lifted", "skipped"}
    rows = {r.fx_name: r for r in report.rows}
    for node in ir.nodes:
        row = rows[node.name]
        assert (row.op_type, row.status, row.code) == (node.op_type, "mapped", None)
        assert row.shape == node.shape
    assert all(r.status == "lifted" for r in report.rows if r.fx_op == "get_attr")
    frame = report.to_pandas()
    assert len(frame) == len(report.rows)
    assert {"fx_name", "fx_op", "spelling", "op_type", "status", "code", "shape"} <= set(
        frame.columns)


# Recognised spellings whose parameters normalize to another operator.
NORMALIZED = [
    pytest.param(lambda m, x: F.leaky_relu(x, 0.0), "ReLU", id="F.leaky_relu(x, 0.0)"),
    pytest.param(lambda m, x: F.leaky_relu(x, 1.0), "Identity", id="F.leaky_relu(x, 1.0)"),
    pytest.param(lambda m, x: F.leaky_relu(x, negative_slope=0), "ReLU",
                 id="F.leaky_relu(x, negative_slope=0)"),
]


@pytest.mark.parametrize(("fn", "op_type"), NORMALIZED)
def test_normalized(fn, op_type):
    model = Fn(fn).eval()
    node = only_op(convert_and_compare(model, *X))
    assert node.op_type == op_type
    assert node.op_type in op_type_column(model)  # the spec's column in the spelling table


def test_get_attr_is_lifted_not_an_operator():
    """`x + self.buf`: the buffer becomes a constant, and no IR node stands for get_attr."""
    model = Fn(lambda m, x: x + m.buf, buf=C.clone()).eval()
    ir = convert_and_compare(model, *X)
    node = only_op(ir)
    assert node.op_type == "ElementwiseAffine"
    assert dict(node.attrs) == affine("add", 0, constant="buf", alpha=1)
    assert list(ir.constants) == ["buf"]
    assert torch.equal(ir.constants["buf"], model.buf)
    report = ncet.diagnose(model, *X)
    assert [r.status for r in report.rows if r.fx_op == "get_attr"] == ["lifted"]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x).relu()


def test_constants_are_detached_bit_identical_copies():
    model = reseed(Net()).eval()
    ir = convert_and_compare(model, (4,))
    linear = ir.nodes[1]
    assert (linear.op_type, linear.attrs["weight"], linear.attrs["bias"]) == (
        "Linear", "block.linear.weight", "block.linear.bias")
    lifted = {k: v.clone() for k, v in ir.constants.items()}
    for name in ("block.linear.weight", "block.linear.bias"):
        original = model.get_parameter(name)
        constant = ir.constants[name]
        assert constant.dtype == original.dtype and torch.equal(constant, original)
        assert constant.untyped_storage().data_ptr() != original.untyped_storage().data_ptr()
        assert not constant.requires_grad
    with torch.no_grad():
        model.block.linear.weight.add_(1.0)
        model.block.linear.bias.zero_()
    for name, before in lifted.items():
        assert torch.equal(ir.constants[name], before), f"{name} follows the model"


def test_constants_are_deduplicated_by_identity():
    """A buffer used twice, and a weight tied between two layers, are each lifted once."""
    ir = convert_and_compare(Fn(lambda m, x: x * m.c + m.c, c=C.clone()).eval(), *X)
    assert list(ir.constants) == ["c"]
    first, second = nn.Linear(3, 3), nn.Linear(3, 3)
    second.weight = first.weight
    ir = convert_and_compare(reseed(nn.Sequential(first, second)).eval(), (3,))
    linears = [n for n in ir.nodes if n.op_type == "Linear"]
    assert linears[0].attrs["weight"] == linears[1].attrs["weight"]
    assert linears[0].attrs["bias"] != linears[1].attrs["bias"]
    assert len(ir.constants) == 3


def test_float64_model_keeps_float64_constants():
    model = reseed(Net()).double().eval()
    ir = ncet.convert(model, (4,), dtype=torch.float64)
    assert ir.constants["block.linear.weight"].dtype == torch.float64
    assert torch.equal(ir.constants["block.linear.weight"], model.block.linear.weight)


@pytest.mark.parametrize("fn", [
    pytest.param(lambda m, x: x / 3.0, id="x / 3.0"),
    pytest.param(lambda m, x: torch.div(x, 3.0), id="torch.div(x, 3.0)"),
    pytest.param(lambda m, x: x.true_divide(3.0), id="x.true_divide(3.0)"),
])
def test_divisor_is_kept(fn):
    """`x / 3.0` stores 3.0 (not a rounded 1/3), so evaluation is exactly eager's division."""
    model = Fn(fn).eval()
    ir = convert_and_compare(model, *X)
    assert_attrs(only_op(ir), affine("div", 0, 3.0))
    (x,) = batched_inputs(*X, batch=64)
    got = ncet.evaluate(ir, x)
    assert torch.equal(got, x / 3.0)
    assert not torch.equal(x * (1 / 3.0), x / 3.0), "inputs too tame to tell x/3 from x*(1/3)"


def test_buffer_divisor_is_kept():
    model = Fn(lambda m, x: x / m.c, c=C.clone()).eval()
    ir = convert_and_compare(model, *X)
    (x,) = batched_inputs(*X, batch=64)
    assert torch.equal(ncet.evaluate(ir, x), x / C.double())


def test_conversion_does_not_touch_model_in_training():
    """A rejected model keeps its mode, parameters and buffers (NCET never calls .eval())."""
    model = At("bn", reseed(nn.BatchNorm1d(4))).train()
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(S) as info:
        ncet.convert(model, (4,))
    assert info.value.code == "batch-norm-training"
    assert model.training and model.bn.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
