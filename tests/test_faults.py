"""Bug localisation, shown: seeded translation faults are reported at the node they sit in.

Each row breaks one node of a correct GraphIR the way a converter bug would, then runs
`check_exactness` with its default inputs: the first violation must be that node.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.ir import GraphIR


class Zoo(nn.Module):
    """One model with every operator a fault below is seeded into."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.avg = nn.AvgPool2d(3, stride=1, padding=1)  # count_include_pad matters here
        self.lin = nn.Linear(8, 8)  # square, so a transposed weight still fits

    def forward(self, x):
        y = F.leaky_relu(self.bn(self.conv(x)), 0.1)
        y = self.avg(y)
        z = torch.cat([y, y[:, :, 1:3]], dim=2)
        return self.lin(z / 3.0)


def zoo(dtype=torch.float32) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Zoo()
        model.bn.running_mean.normal_(0, 0.3)
        model.bn.running_var.uniform_(0.5, 2.0)
        model.bn.weight.data.uniform_(0.5, 1.5)
        model.bn.bias.data.normal_(0, 0.1)
    return model.to(dtype).eval()


def with_node(ir: GraphIR, name: str, constants: dict | None = None, **attrs) -> GraphIR:
    """`ir` with node `name`'s attrs updated (and constants added or replaced)."""
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, **attrs}) if n.name == name else n
                  for n in ir.nodes)
    return GraphIR(nodes, {**ir.constants, **(constants or {})})


def dropped_bias(ir):
    return with_node(ir, "lin", bias=None)


def eps_ignored(ir):
    return with_node(ir, "bn", eps=0.0)


def padding_off_by_one(ir):
    return with_node(ir, "conv", padding=[2, 2, 2, 2])


def stride_off_by_one(ir):
    return with_node(ir, "avg", stride=[2, 2])


def count_include_pad_flipped(ir):
    return with_node(ir, "avg", count_include_pad=False)


def slope_changed(ir):
    return with_node(ir, "leaky_relu", negative_slope=0.1001)


def weight_transposed(ir):
    return with_node(ir, "lin", weight="lin.weight.T",
                     constants={"lin.weight.T": ir.constants["lin.weight"].T.contiguous()})


def wrong_concat_axis(ir):
    return with_node(ir, "cat", axis=2)


def slice_off_by_one(ir):
    return with_node(ir, "getitem", index=[[0, 4, 1], [2, 4, 1]])


def divisor_to_reciprocal_in_float32(ir):
    """What a converter that folds x / c into x * (1/c) stores: the reciprocal, rounded.

    In a float64 model a float32-rounded reciprocal is 1e-8 off, far above float64 rounding.
    (Rounded to the model's own precision it would be indistinguishable from rounding: that
    is why canonicalization keeps divisors; see docs/exactness.md.)"""
    return with_node(ir, "truediv", kind="mul", scalar=float(torch.tensor(1 / 3.0,
                                                                         dtype=torch.float32)))


def relu_for_leaky(ir):
    nodes = tuple(dataclasses.replace(n, op_type="ReLU", attrs={}) if n.name == "leaky_relu"
                  else n for n in ir.nodes)
    return GraphIR(nodes, ir.constants)


def extra_node(ir: GraphIR, after: str, name: str) -> tuple[GraphIR, str]:
    """`ir` with an `x * 2` node the model does not have between `after` and its consumers."""
    source = ir.node(after)
    attrs = dict(ncet.convert(_Doubled(), (1,)).nodes[1].attrs)  # x * 2.0, from a real node
    nodes = []
    for n in ir.nodes:
        if after in n.inputs:
            n = dataclasses.replace(n, inputs=tuple(name if i == after else i for i in n.inputs))
        nodes.append(n)
        if n.name == after:
            nodes.append(ncet.IRNode(name, "ElementwiseAffine", (after,), attrs, source.shape,
                                     source.dtype, source.source))
    return GraphIR(tuple(nodes), ir.constants), name


class _Doubled(nn.Module):
    def forward(self, x):
        return x * 2.0


def node_inserted(ir):
    """An IR node with no FX counterpart (a converter that emits an extra op)."""
    return extra_node(ir, "avg", "doubled")[0]


def node_appended_before_output(ir):
    """An IR node with no FX counterpart between the last layer and the Output."""
    return extra_node(ir, "lin", "doubled")[0]


def dtype_recorded_wrong(ir):
    """A float32 node recorded as bfloat16 (whose looser bounds would hide a fault)."""
    return GraphIR(tuple(dataclasses.replace(n, dtype="bfloat16") if n.name == "lin" else n
                         for n in ir.nodes), ir.constants)


FAULTS = [
    pytest.param(dropped_bias, torch.float32, "lin", id="dropped bias"),
    pytest.param(eps_ignored, torch.float32, "bn", id="BatchNorm eps ignored"),
    pytest.param(padding_off_by_one, torch.float32, "conv", id="conv padding off by one"),
    pytest.param(stride_off_by_one, torch.float32, "avg", id="pool stride off by one"),
    pytest.param(count_include_pad_flipped, torch.float32, "avg", id="count_include_pad flipped"),
    pytest.param(slope_changed, torch.float32, "leaky_relu", id="LeakyReLU slope 0.1 -> 0.1001"),
    pytest.param(relu_for_leaky, torch.float32, "leaky_relu", id="LeakyReLU mapped to ReLU"),
    pytest.param(weight_transposed, torch.float32, "lin", id="transposed weight"),
    pytest.param(wrong_concat_axis, torch.float32, "cat", id="wrong Concat axis"),
    pytest.param(slice_off_by_one, torch.float32, "getitem", id="Slice off by one"),
    pytest.param(divisor_to_reciprocal_in_float32, torch.float64, "truediv",
                 id="divisor rounded to its reciprocal"),
    pytest.param(node_inserted, torch.float32, "doubled", id="IR node with no FX counterpart"),
    pytest.param(node_appended_before_output, torch.float32, "doubled",
                 id="IR node appended before Output"),
    pytest.param(dtype_recorded_wrong, torch.float32, "lin", id="dtype recorded wrong"),
]


@pytest.mark.parametrize(("dtype"), [torch.float32, torch.float64], ids=str)
def test_the_correct_graph_passes(dtype):
    model = zoo(dtype)
    report = ncet.check_exactness(model, ncet.convert(model, (3, 6, 8), dtype=dtype))
    assert report.ok, report.summary()


@pytest.mark.parametrize(("fault", "dtype", "node"), FAULTS)
def test_fault_is_reported_at_its_node(fault, dtype, node):
    model = zoo(dtype)
    faulty = fault(ncet.convert(model, (3, 6, 8), dtype=dtype))
    report = ncet.check_exactness(model, faulty)
    assert not report.ok
    first = report.first_violation
    assert first is not None and first.name == node, report.summary()
    assert first.local_violations > 0, "the node-local check must catch it at the node"
    assert node in report.summary() and "VIOLATION" in report.summary()
    if first.name not in {n.name for n in ncet.convert(model, (3, 6, 8), dtype=dtype).nodes}:
        assert "structure:" in report.summary()  # the model has no such node, nor line
        return
    # the verdict quotes the model's line, read from this file (first.location)
    line = int(first.location.rpartition(":")[2])
    with open(__file__) as f:
        assert first.source_text == f.read().splitlines()[line - 1].strip()
    assert f"{first.location} `{first.source_text}`)" in report.summary().splitlines()[0]


def test_the_source_text_needs_the_same_location(tmp_path):
    # a loaded IR names the same file:line as this check's trace: the text is quoted; an IR
    # whose node names another line gets no text, rather than the wrong line's
    model = zoo(torch.float32)
    ir = ncet.convert(model, (3, 6, 8))
    ncet.save(ir, tmp_path / "zoo.ncet")
    loaded = ncet.check_exactness(model, ncet.load(tmp_path / "zoo.ncet"))
    assert all(e.source_text for e in loaded.entries if e.location)
    moved = GraphIR(tuple(dataclasses.replace(n, source=dataclasses.replace(
        n.source, location=n.source.location + "0")) if n.name == "lin" else n
        for n in ir.nodes), ir.constants)
    entry = next(e for e in ncet.check_exactness(model, moved).entries if e.name == "lin")
    assert entry.location.endswith("0") and entry.source_text == ""


def test_a_shape_mismatch_leads_the_verdict():
    """A node whose IR shape differs from PyTorch's has no error to report: say the shapes."""
    model = zoo(torch.float32)
    report = ncet.check_exactness(model, padding_off_by_one(ncet.convert(model, (3, 6, 8))))
    verdict = report.summary().splitlines()[0]
    assert "shape" in verdict and "from the IR" in verdict and "error 0" not in verdict
