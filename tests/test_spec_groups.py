"""Spec section 6 (canonicalization groups): spellings of one meaning give identical IR up to names.

Each group lists models that spell one computation differently; every member must convert,
match eager PyTorch, and have the same `ir_signature` as the group's first member.
Containers (nn.Sequential, user-defined blocks) add no node of their own.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import (
    At,
    Fn,
    Fn2,
    convert_and_compare,
    ir_signature,
    op_nodes,
    reseed,
    seeded,
)

W = seeded(3, 4, seed=7)
B = seeded(3, seed=8)


def linear_module() -> nn.Module:
    module = nn.Linear(4, 3)
    with torch.no_grad():
        module.weight.copy_(W)
        module.bias.copy_(B)
    return At("block.linear", module)


def fn(f, **state) -> nn.Module:
    return Fn(f, **{k: v.clone() for k, v in state.items()})


# (group, per-sample input shapes, {spelling: model factory})
GROUPS = [
    ("ReLU", [(3, 4)], {
        "nn.ReLU": lambda: At("relu", nn.ReLU()),
        "F.relu": lambda: fn(lambda m, x: F.relu(x)),
        "torch.relu": lambda: fn(lambda m, x: torch.relu(x)),
        "x.relu()": lambda: fn(lambda m, x: x.relu()),
        "nn.LeakyReLU(0.0)": lambda: At("leaky_relu", nn.LeakyReLU(0.0)),
        "F.leaky_relu(x, 0.0)": lambda: fn(lambda m, x: F.leaky_relu(x, 0.0)),
    }),
    ("Add", [(3, 4), (3, 4)], {
        "x + y": lambda: Fn2(lambda m, x, y: x + y),
        "torch.add(x, y)": lambda: Fn2(lambda m, x, y: torch.add(x, y)),
        "x.add(y)": lambda: Fn2(lambda m, x, y: x.add(y)),
    }),
    ("Sub", [(3, 4), (3, 4)], {
        "x - y": lambda: Fn2(lambda m, x, y: x - y),
        "torch.sub(x, y)": lambda: Fn2(lambda m, x, y: torch.sub(x, y)),
        "torch.subtract(x, y)": lambda: Fn2(lambda m, x, y: torch.subtract(x, y)),
        "x.sub(y)": lambda: Fn2(lambda m, x, y: x.sub(y)),
        "x.subtract(y)": lambda: Fn2(lambda m, x, y: x.subtract(y)),
    }),
    ("Reshape (3,1) -> (3,)", [(3, 1)], {
        "torch.reshape(x, shape)": lambda: fn(lambda m, x: torch.reshape(x, (-1, 3))),
        "x.reshape(shape)": lambda: fn(lambda m, x: x.reshape(-1, 3)),
        "x.view(shape)": lambda: fn(lambda m, x: x.view(-1, 3)),
        "torch.squeeze(x, dim)": lambda: fn(lambda m, x: torch.squeeze(x, 2)),
        "x.squeeze(dim)": lambda: fn(lambda m, x: x.squeeze(-1)),
    }),
    ("Reshape (3,) -> (3,1)", [(3,)], {
        "torch.reshape(x, shape)": lambda: fn(lambda m, x: torch.reshape(x, (-1, 3, 1))),
        "x.reshape(shape)": lambda: fn(lambda m, x: x.reshape(-1, 3, 1)),
        "x.view(shape)": lambda: fn(lambda m, x: x.view(-1, 3, 1)),
        "torch.unsqueeze(x, dim)": lambda: fn(lambda m, x: torch.unsqueeze(x, 2)),
        "x.unsqueeze(dim)": lambda: fn(lambda m, x: x.unsqueeze(-1)),
    }),
    ("Linear", [(4,)], {
        "nn.Linear": linear_module,
        "F.linear": lambda: fn(lambda m, x: F.linear(x, m.w, m.b), w=W, b=B),
        "F.linear(parameters)": lambda: Fn(lambda m, x: F.linear(x, m.w, m.b),
                                           w=nn.Parameter(W.clone()), b=nn.Parameter(B.clone())),
    }),
    ("x * 2", [(3, 4)], {
        "x * 2": lambda: fn(lambda m, x: x * 2),
        "torch.mul(x, 2)": lambda: fn(lambda m, x: torch.mul(x, 2)),
        "torch.multiply(x, 2)": lambda: fn(lambda m, x: torch.multiply(x, 2)),
        "x.mul(2)": lambda: fn(lambda m, x: x.mul(2)),
        "x.multiply(2.0)": lambda: fn(lambda m, x: x.multiply(2.0)),
        "2 * x": lambda: fn(lambda m, x: 2 * x),
    }),
    ("x / 4", [(3, 4)], {
        "x / 4": lambda: fn(lambda m, x: x / 4),
        "torch.div(x, 4)": lambda: fn(lambda m, x: torch.div(x, 4)),
        "torch.divide(x, 4)": lambda: fn(lambda m, x: torch.divide(x, 4)),
        "torch.true_divide(x, 4)": lambda: fn(lambda m, x: torch.true_divide(x, 4)),
        "x.div(4)": lambda: fn(lambda m, x: x.div(4)),
        "x.divide(4)": lambda: fn(lambda m, x: x.divide(4)),
        "x.true_divide(4)": lambda: fn(lambda m, x: x.true_divide(4)),
    }),
    ("x - 1", [(3, 4)], {
        "x - 1": lambda: fn(lambda m, x: x - 1),
        "torch.sub(x, 1)": lambda: fn(lambda m, x: torch.sub(x, 1)),
        "torch.subtract(x, 1)": lambda: fn(lambda m, x: torch.subtract(x, 1)),
        "x.sub(1)": lambda: fn(lambda m, x: x.sub(1)),
        "x.subtract(1)": lambda: fn(lambda m, x: x.subtract(1)),
    }),
    ("x + c (buffer)", [(3, 4)], {
        "x + c": lambda: fn(lambda m, x: x + m.c, c=W),
        "torch.add(x, c)": lambda: fn(lambda m, x: torch.add(x, m.c), c=W),
        "x.add(c)": lambda: fn(lambda m, x: x.add(m.c), c=W),
        "c + x": lambda: fn(lambda m, x: m.c + x, c=W),
        "torch.add(c, x)": lambda: fn(lambda m, x: torch.add(m.c, x), c=W),
    }),
    ("Flatten", [(2, 3, 4)], {
        "nn.Flatten": lambda: At("flatten", nn.Flatten()),
        "torch.flatten(x, 1)": lambda: fn(lambda m, x: torch.flatten(x, 1)),
        "x.flatten(1)": lambda: fn(lambda m, x: x.flatten(1)),
        "x.flatten(1, -1)": lambda: fn(lambda m, x: x.flatten(1, -1)),
    }),
    ("Identity", [(3, 4)], {
        "nn.Identity": lambda: At("identity", nn.Identity()),
        "nn.Dropout (eval)": lambda: At("dropout", nn.Dropout(0.5)),
        "F.dropout(training=False)": lambda: fn(lambda m, x: F.dropout(x, training=False)),
        "nn.LeakyReLU(1.0)": lambda: At("leaky_relu", nn.LeakyReLU(1.0)),
        "F.leaky_relu(x, 1.0)": lambda: fn(lambda m, x: F.leaky_relu(x, 1.0)),
    }),
    ("ReduceMean", [(3, 4)], {
        "torch.mean(x, 2)": lambda: fn(lambda m, x: torch.mean(x, 2)),
        "torch.mean(x, -1)": lambda: fn(lambda m, x: torch.mean(x, -1)),
        "x.mean(dim=(2,))": lambda: fn(lambda m, x: x.mean(dim=(2,))),
        "x.mean(2, keepdim=False)": lambda: fn(lambda m, x: x.mean(2, keepdim=False)),
    }),
    ("Transpose", [(2, 3, 4)], {
        "torch.transpose(x, 1, 3)": lambda: fn(lambda m, x: torch.transpose(x, 1, 3)),
        "x.transpose(3, 1)": lambda: fn(lambda m, x: x.transpose(3, 1)),
        "x.transpose(-1, -3)": lambda: fn(lambda m, x: x.transpose(-1, -3)),
    }),
]

MEMBERS = [
    pytest.param(group, shapes, spellings, name, id=f"{group}: {name}")
    for group, shapes, spellings in GROUPS for name in list(spellings)[1:]
]


@pytest.mark.parametrize(("group", "shapes", "spellings", "name"), MEMBERS)
def test_same_ir_up_to_names(group, shapes, spellings, name):
    first_name, first = next(iter(spellings.items()))
    expected = ir_signature(convert_and_compare(first().eval(), *shapes))
    got = ir_signature(convert_and_compare(spellings[name]().eval(), *shapes))
    assert got == expected, f"{name} differs from {first_name}:\n{got}\n!=\n{expected}"


class Residual(nn.Module):
    """A user-defined residual block: x + body(x)."""

    def __init__(self, width: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x):
        return x + self.body(x)


def test_sequential_adds_no_node():
    model = reseed(nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))).eval()
    ir = convert_and_compare(model, (4,))
    ops = op_nodes(ir)
    assert [n.op_type for n in ops] == ["Linear", "ReLU", "Linear"]
    assert [n.source.module_path for n in ops] == ["0", "1", "2"]
    assert ops[0].inputs == (ir.inputs[0].name,)
    assert ops[1].inputs == (ops[0].name,) and ops[2].inputs == (ops[1].name,)
    assert ir.outputs == (ops[2].name,)


def test_residual_block_adds_no_node():
    model = reseed(nn.Sequential(Residual(4), nn.ReLU(), Residual(4))).eval()
    ir = convert_and_compare(model, (4,))
    ops = op_nodes(ir)
    assert [n.op_type for n in ops] == ["Linear", "ReLU", "Linear", "Add", "ReLU",
                                        "Linear", "ReLU", "Linear", "Add"]
    assert [n.source.module_path for n in ops if n.op_type != "Add"] == [
        "0.body.0", "0.body.1", "0.body.2", "1", "2.body.0", "2.body.1", "2.body.2"]
    x = ir.inputs[0].name
    first_add, second_add = [n for n in ops if n.op_type == "Add"]
    assert set(first_add.inputs) == {x, ops[2].name}  # the skip connection is kept
    assert set(second_add.inputs) == {ops[4].name, ops[7].name}
    assert ir.outputs == (second_add.name,)
    assert {"0.body.0.weight", "0.body.2.bias", "2.body.0.weight"} <= set(ir.constants)


def test_group_members_differ_from_other_groups():
    """The signature tells different meanings apart (so equal signatures are informative)."""
    shapes = [(3, 4)]
    signatures = [
        ir_signature(convert_and_compare(fn(f).eval(), *shapes))
        for f in (lambda m, x: x * 2, lambda m, x: x / 2, lambda m, x: x + 2,
                  lambda m, x: 2 - x, lambda m, x: x.relu(), lambda m, x: x.mean(1))]
    assert all(a != b for i, a in enumerate(signatures) for b in signatures[i + 1:])
