"""Spec section 5 (static indexing): `x[index]` is GetItem, Slice, or rejected.

The rule: written on the batched tensor, the index must leave the batch axis alone; what
remains per-sample is GetItem when it is integer selection only, Slice when any slice,
ellipsis or inserted axis remains. Accepted rows also match eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch

import ncet
from tests.conftest import Fn, assert_rejected, convert_and_compare, only_op
from tests.spelling_columns import op_type_column

SHAPE = (3, 4, 5)  # per-sample shape of x in every row


def index_model(index) -> Fn:
    """A model returning `x[index]`, for an index written on the batched tensor."""
    return Fn(lambda m, x: x[index]).eval()


# (batched index as written, index, op_type); `...` is Ellipsis, `None` inserts an axis.
ACCEPTED = [
    ("x[:, 0]", (slice(None), 0), "GetItem"),
    ("x[:, 0, 1]", (slice(None), 0, 1), "GetItem"),
    ("x[:, -1]", (slice(None), -1), "GetItem"),
    ("x[:, 2, -1, 0]", (slice(None), 2, -1, 0), "GetItem"),
    ("x[:, 1:3]", (slice(None), slice(1, 3)), "Slice"),
    ("x[:, -2:]", (slice(None), slice(-2, None)), "Slice"),
    ("x[:, ::2]", (slice(None), slice(None, None, 2)), "Slice"),
    ("x[:, 1:3, ::2]", (slice(None), slice(1, 3), slice(None, None, 2)), "Slice"),
    ("x[:, :, 0]", (slice(None), slice(None), 0), "Slice"),
    ("x[:, 0, 1:]", (slice(None), 0, slice(1, None)), "Slice"),
    ("x[..., 0]", (Ellipsis, 0), "Slice"),
    ("x[:, ..., 1]", (slice(None), Ellipsis, 1), "Slice"),
    ("x[:, None]", (slice(None), None), "Slice"),
    ("x[:, 0, None]", (slice(None), 0, None), "Slice"),
    ("x[:, :, None, 1]", (slice(None), slice(None), None, 1), "Slice"),
]


@pytest.mark.parametrize(("index", "op_type"), [row[1:] for row in ACCEPTED],
                         ids=[row[0] for row in ACCEPTED])
def test_index_accepted(index, op_type):
    model = index_model(index)
    ir = convert_and_compare(model, SHAPE)
    node = only_op(ir)
    assert node.op_type == op_type
    assert node.op_type in op_type_column(model)  # the spec's column in the spelling table
    assert node.source.fx_op == "call_function"


def test_ellipsis_on_rank_one():
    """x[..., 0] on a per-sample vector is integer selection per-sample, or a Slice: either
    way it must convert and agree with eager."""
    node = only_op(convert_and_compare(index_model((Ellipsis, 0)), (3,)))
    assert node.op_type in ("GetItem", "Slice")
    assert node.shape == ()


def test_index_chain_keeps_graph_connections():
    """x[:, 1:][:, 0] is two nodes, the second reading the first."""
    ir = convert_and_compare(Fn(lambda m, x: x[:, 1:][:, 0]).eval(), SHAPE)
    first, second = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
    assert (first.op_type, second.op_type) == ("Slice", "GetItem")
    assert second.inputs == (first.name,)


MASK = torch.tensor([True, False, True])

# (batched index as written, index, code)
REJECTED = [
    ("x[0]", 0, "batch-axis"),
    ("x[-1]", -1, "batch-axis"),
    ("x[1:]", slice(1, None), "batch-axis"),
    ("x[::2]", slice(None, None, 2), "batch-axis"),
    ("x[:2, 0]", (slice(None, 2), 0), "batch-axis"),
    ("x[None]", None, "batch-axis"),
    ("x[None, :, 0]", (None, slice(None), 0), "batch-axis"),
    ("x[:, [0, 1]]", (slice(None), [0, 1]), "advanced-indexing"),
    ("x[:, 0, [1, 2]]", (slice(None), 0, [1, 2]), "advanced-indexing"),
]


@pytest.mark.parametrize(("index", "code"), [row[1:] for row in REJECTED],
                         ids=[row[0] for row in REJECTED])
def test_index_rejected(index, code):
    assert_rejected(index_model(index), [SHAPE], ncet.SupportBoundaryError, code, "getitem")


@pytest.mark.parametrize("index", [
    pytest.param(lambda m, x: x[:, torch.tensor([0, 2])], id="x[:, torch.tensor([0, 2])]"),
    pytest.param(lambda m, x: x[:, m.mask], id="x[:, bool_buffer]"),
])
def test_tensor_index_rejected(index):
    """Tensor indices reach FX as get_attr constants; indexing with them is still rejected."""
    model = Fn(index, mask=MASK.clone()).eval()
    assert_rejected(model, [SHAPE], ncet.SupportBoundaryError, "advanced-indexing", "getitem")
