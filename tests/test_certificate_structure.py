"""Structure is checked, not assumed; eager against trace is a real check; low-precision graphs
get bounds that see faults; and nothing is certified that was not checked.

PyTorch is the oracle: every faulty GraphIR below is one `ncet.evaluate` shows to differ from
the model, and every correct one agrees with the eager model.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import ncet
from ncet.ir import GraphIR


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x - y


class TwoOutputs(nn.Module):
    def forward(self, x):
        return x.relu(), x * 3.0


def test_inputs_in_the_wrong_order_are_a_value_error():
    model = TwoInputs()
    ir = ncet.convert(model, (3,), (3,))
    swapped = GraphIR((ir.nodes[1], ir.nodes[0], *ir.nodes[2:]), ir.constants)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    assert not torch.allclose(ncet.evaluate(swapped, x, y), model(x, y).double())
    with pytest.raises(ValueError, match=r"Input nodes are \['y', 'x'\].*takes \['x', 'y'\]"):
        ncet.check_exactness(model, swapped)


def test_outputs_in_the_wrong_order_are_a_value_error():
    model = TwoOutputs()
    ir = ncet.convert(model, (3,))
    out = ir.nodes[-1]
    swapped = GraphIR((*ir.nodes[:-1], dataclasses.replace(out, inputs=out.inputs[::-1])),
                      ir.constants)
    with pytest.raises(ValueError, match="returns"):
        ncet.check_exactness(model, swapped)


# --- eager against trace --------------------------------------------------------------------


class AliasedInFront(nn.Module):
    """`s += 1` on an alias: eager PyTorch changes `x` too, FX records `s = s + 1`; a deep MLP
    after it, whose end-to-end radius dwarfs the difference."""

    def __init__(self, depth: int = 24, width: int = 64):
        super().__init__()
        layers = [nn.Linear(width, width)]
        for _ in range(depth - 1):
            layers += [nn.ReLU(), nn.Linear(width, width)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        s = x
        s += 1  # in place on x as well, in eager PyTorch
        return self.body(x + s)


def test_a_trace_that_is_not_the_model_fails_the_verdict_at_any_depth():
    torch.manual_seed(0)
    model = AliasedInFront().eval()
    ir = ncet.convert(model, (64,))
    x = torch.randn(8, 64)
    with torch.no_grad():
        eager = model(x.clone())
    assert not torch.equal(ncet.evaluate(ir, x, dtype=torch.float32), eager)
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert not report.ok and report.traced_differs
    assert report.outputs[0].traced_differs
    verdict = report.summary().splitlines()[0]
    assert verdict.startswith("VIOLATION at output") and repr(report.outputs[0].name) in verdict
    assert "bit-identical" in verdict


class UnaliasedInFront(AliasedInFront):
    def forward(self, x):
        return self.body(x + (x + 1))  # what FX traced of AliasedInFront, as eager code


def test_the_same_deep_model_without_the_alias_is_certified():
    torch.manual_seed(0)
    model = UnaliasedInFront().eval()
    report = ncet.check_exactness(model, ncet.convert(model, (64,)), samples_per_scale=4)
    assert report.ok and not report.traced_differs, report.summary()


# --- low precision ------------------------------------------------------------------------------


def bf16_layer(width: int = 300):
    torch.manual_seed(0)
    return nn.Linear(width, width).to(torch.bfloat16).eval()


def seeded(ir: GraphIR, name: str, **constants) -> GraphIR:
    return GraphIR(ir.nodes, {**ir.constants, **constants})


def test_a_wide_bfloat16_layer_has_finite_bounds_and_no_false_alarm():
    layer = bf16_layer()
    ir = ncet.convert(layer, (300,), dtype=torch.bfloat16)
    x = torch.randn(16, 300).to(torch.bfloat16)
    x[3] = 0  # an all-zero row: a zero bound, not NaN
    report = ncet.check_exactness(layer, ir, x)
    (entry,) = report.entries
    assert entry.checked and report.first_violation is None and not report.unchecked
    assert 0 < entry.local_bound < 1, "float32 accumulation: a bound far below O(1)"


@pytest.mark.parametrize("fault", ["transposed weight", "dropped bias", "weights 10% off"])
def test_faults_in_a_wide_bfloat16_layer_are_caught(fault):
    layer = bf16_layer()
    ir = ncet.convert(layer, (300,), dtype=torch.bfloat16)
    (node,) = [n for n in ir.nodes if n.op_type == "Linear"]
    weight, bias = ir.constants[node.attrs["weight"]], ir.constants[node.attrs["bias"]]
    faulty = {"transposed weight": {node.attrs["weight"]: weight.T.contiguous()},
              "dropped bias": {node.attrs["bias"]: torch.zeros_like(bias)},
              "weights 10% off": {node.attrs["weight"]: (weight.float() * 1.1).to(weight.dtype)},
              }[fault]
    bad = seeded(ir, node.name, **faulty)
    x = torch.randn(16, 300).to(torch.bfloat16)
    assert not torch.equal(ncet.evaluate(bad, x, dtype=torch.bfloat16), layer(x))
    report = ncet.check_exactness(layer, bad, x)
    assert report.first_violation is not None and report.first_violation.name == node.name


def test_an_infinite_bound_is_not_checked_and_not_certified():
    from ncet.exactness.stats import CheckStats

    stats = CheckStats()
    value = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    stats.update(value + 1, value, torch.tensor([1.0, float("inf"), float("nan")],
                                                dtype=torch.float64), torch.float32)
    assert stats.unbounded == 2 and stats.violations == 0  # element 0: error 1, bound 1


def test_a_node_with_an_overflowing_bound_makes_the_report_not_certified():
    """|W| |x| overflows float64 where W x cancels to 0: an exact 0 proves nothing there."""
    model = nn.Sequential(nn.Linear(2, 1)).double().eval()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1.5e308, -1.5e308]], dtype=torch.float64))
        model[0].bias.zero_()
    ir = ncet.convert(model, (2,), dtype=torch.float64)
    report = ncet.check_exactness(model, ir, torch.ones(3, 2, dtype=torch.float64))
    (entry,) = report.entries
    assert not report.ok and entry.name in report.unchecked and not entry.checked
    assert "infinite or NaN bound: not checked" in entry.note
    assert report.summary().startswith("NOT CERTIFIED") and "NOT CHECKED" in report.table()


def test_overflow_in_pytorch_is_reported_as_inf():
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    with torch.no_grad():
        model[0].weight.fill_(3e38)
    report = ncet.check_exactness(model, ncet.convert(model, (4,)), torch.full((2, 4), 1e30))
    assert not report.ok and report.first_violation is not None
    assert "error inf" in report.summary().splitlines()[0]
    assert "1.8e+308" not in report.summary()


# --- the text table ------------------------------------------------------------------------------


def test_the_text_table_shows_the_error_at_the_element_of_the_bound():
    from ncet.examples import load_example

    model, shapes = load_example("lenet")
    report = ncet.check_exactness(model, ncet.convert(model, *shapes), samples_per_scale=4)
    assert report.ok
    for entry in report.entries:
        assert entry.local_error_at_worst <= entry.local_bound or entry.local_bound == 0
        assert entry.e2e_error_at_worst <= entry.e2e_bound or entry.e2e_bound == 0
    header, *rows = report.table().splitlines()
    assert "err at worst" in header


# --- sensitivity and the probabilistic second tier ------------------------------------------


def wide_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10)).eval()


def reweighted(ir: GraphIR, change) -> GraphIR:
    return GraphIR(ir.nodes, {k: change(v) if k.endswith("weight") else v
                              for k, v in ir.constants.items()})


@pytest.fixture(scope="module")
def wide():
    model = wide_mlp()
    return model, ncet.convert(model, (1024,))


def test_sensitivity_says_what_the_certified_bound_can_see(wide):
    """bound / |value| at the worst element: a relative change of the value there smaller
    than this passes the certified check (and 0 for an op that does no rounding)."""
    model, ir = wide
    report = ncet.check_exactness(model, ir)
    x = torch.randn(1, 1024)
    for entry in report.entries:
        if entry.op_type == "ReLU":
            assert entry.sensitivity == 0
        else:
            assert 1e-6 < entry.sensitivity < 1e-2, entry
    (first,) = [e for e in report.entries if e.name == "_0"]
    # the relative change of that size, applied to the whole layer, is inside the bound
    scaled = GraphIR(ir.nodes, {**ir.constants, "0.weight": ir.constants["0.weight"] * (
        1 + first.sensitivity / 4), "0.bias": ir.constants["0.bias"] * (
        1 + first.sensitivity / 4)})
    assert not torch.equal(ncet.evaluate(scaled, x), ncet.evaluate(ir, x))
    assert ncet.check_exactness(model, scaled).first_violation is None
    assert "sensitivity" in report.to_pandas().columns


@pytest.mark.parametrize("fault", ["weights rounded to float16", "weights 1e-4 off"])
def test_the_second_tier_flags_faults_below_the_certified_bound(wide, fault):
    model, ir = wide
    change = {"weights rounded to float16": lambda w: w.half().float(),
              "weights 1e-4 off": lambda w: w * (1 + 1e-4)}[fault]
    faulty = reweighted(ir, change)
    x = torch.randn(4, 1024)
    assert not torch.equal(ncet.evaluate(faulty, x, dtype=torch.float32), model(x))
    report = ncet.check_exactness(model, faulty)
    assert report.ok, "the certified verdict holds: the fault is inside the certified bound"
    linears = [e.name for e in report.entries if e.op_type == "Linear"]
    assert report.suspicious == tuple(linears)
    assert "suspicious (second tier" in report.summary()


def test_the_second_tier_is_quiet_on_correct_models(wide):
    from ncet.examples import load_example

    model, ir = wide
    report = ncet.check_exactness(model, ir)
    assert report.ok and report.suspicious == ()
    assert max(e.suspicion for e in report.entries) < 0.2
    for name in ("mlp", "lenet", "residual_cnn"):
        model, shapes = load_example(name)
        report = ncet.check_exactness(model, ncet.convert(model, *shapes))
        assert report.ok and report.suspicious == (), (name, report.summary())


# --- found in review: false alarms and raw exceptions ------------------------------------


def test_a_slice_of_the_callers_batch_is_checked_like_a_fresh_tensor():
    """The traced graph and the eager model run on equally allocated copies: a kernel whose
    path depends on its input's alignment rounds alike in both, and no false alarm follows."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 2)).eval()
    ir = ncet.convert(model, (5,))
    x = torch.randn(200, 5)
    for view in (x[1:65], x[3:103], x[101:180]):
        report = ncet.check_exactness(model, ir, view)
        assert report.ok and not report.traced_differs, report.summary()
    assert ncet.check_exactness(model, ir, x, chunk_size=7).ok


class TransposedInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 64)

    def forward(self, x):
        return self.l(x.transpose(1, 2))  # non-contiguous, 3-D: ATen adds the bias apart


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_a_low_precision_linear_that_rounds_the_bias_apart_is_no_false_alarm(dtype):
    torch.manual_seed(0)
    model = TransposedInput().to(dtype).eval()
    with torch.no_grad():
        model.l.bias.fill_(3.0)
    ir = ncet.convert(model, (8, 4), dtype=dtype)
    x = (torch.rand(64, 8, 4) + 0.5).to(dtype)
    report = ncet.check_exactness(model, ir, x)
    assert report.first_violation is None, report.summary()


def test_violations_lead_the_verdict_even_when_not_certified():
    class Aliasing(nn.Module):
        def forward(self, x):
            y = x.relu()
            z = y
            z += 1
            return y + z

    model = Aliasing()
    ir = ncet.convert(model, (4,))
    with torch.backends.mkldnn.flags(enabled=False):  # NNPACK may convolve: NOT CERTIFIED
        report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert not report.arithmetic.certified
    verdict = report.summary().splitlines()[0]
    assert verdict.startswith("VIOLATION at output") and "NOT CERTIFIED" in verdict
    assert "no violation was observed" not in verdict


def test_a_node_local_check_alone_can_certify():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    report = ncet.check_exactness(model, ncet.convert(model, (4,)), end_to_end=False,
                                  samples_per_scale=4)
    assert report.ok, report.summary()


def test_constants_of_the_wrong_shape_are_a_violation_not_a_crash():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6)).eval()
    ir = ncet.convert(model, (4,))
    for name, value in (("0.weight", ir.constants["0.weight"].T.contiguous()),
                        ("0.bias", torch.zeros(5))):
        report = ncet.check_exactness(model, GraphIR(ir.nodes, {**ir.constants, name: value}),
                                      samples_per_scale=2)
        assert report.first_violation is not None and report.first_violation.name == "_0"


def test_an_ir_that_returns_its_input_or_nothing_known_is_a_value_error():
    model = nn.Sequential(nn.ReLU()).eval()
    ir = ncet.convert(model, (4,))
    out = ir.nodes[-1]
    for returned, says in ((ir.inputs[0].name, "returns its input"), ("nowhere", "none of")):
        bad = GraphIR((*ir.nodes[:-1], dataclasses.replace(out, inputs=(returned,))),
                      ir.constants)
        with pytest.raises(ValueError, match=says):
            ncet.check_exactness(model, bad, samples_per_scale=2)


class Reshaped(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l = nn.Linear(8, 2)

    def forward(self, x):
        return self.l(torch.relu(x.reshape(-1, 2, 4)).reshape(-1, 8))


def with_shape(ir: GraphIR, name: str, shape: tuple[int, ...]) -> GraphIR:
    return GraphIR(tuple(dataclasses.replace(n, shape=shape) if n.name == name else n
                         for n in ir.nodes), ir.constants)


@pytest.mark.parametrize(("name", "shape"), [("reshape", (4, 2)), ("relu", (8,)),
                                             ("l", (3,)), ("reshape_1", (2, 4))])
def test_a_declared_shape_the_node_does_not_compute_is_a_structural_fault(name, shape):
    """Each node's declared per-sample shape is the record's own claim (ONNX export writes it,
    a consumer reads it): one PyTorch does not compute is a fault at that node, even when
    the values, read in another shape, are bit for bit the model's."""
    model = Reshaped().eval()
    ir = ncet.convert(model, (8,))
    assert ir.node(name).shape != shape
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok
    report = ncet.check_exactness(model, with_shape(ir, name, shape), samples_per_scale=4)
    assert not report.ok and report.first_violation.name == name
    entry = report.entry(name)
    assert entry.structural and f"declares per-sample shape {list(shape)}" in entry.note
