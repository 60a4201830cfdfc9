"""ncet.simplify (issue 35): one row per pass, each run alone on a model built to need it,
with PyTorch's eager model as the oracle (its outputs against the simplified graph's, held
to the report's certified bound); the refusals the passes owe (a shift before a zero-padded
Conv2d, a layer read twice); and faults seeded in the folds (eps dropped, the wrong channel
axis, a sign flipped, a merged bias counted twice), each found by the certificate, which
names the pass."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

import ncet
from ncet.passes import PASSES, simplify
from ncet.passes.carried import Carried
from tests.zoo_models import seeded


class Normalised(nn.Module):
    """(x - mean) / std per channel, then `body`."""

    def __init__(self, body: nn.Module, channels: int, rank: int = 3):
        super().__init__()
        shape = (channels,) + (1,) * (rank - 1)
        self.register_buffer("mean", torch.linspace(-0.4, 0.6, channels).reshape(shape))
        self.register_buffer("std", torch.linspace(0.2, 0.5, channels).reshape(shape))
        self.body = body

    def forward(self, x):
        return self.body((x - self.mean) / self.std)


class Shifted(nn.Module):
    """x + 1.5 - c, * 2, / 3 (scalars and a tensor), then a Linear."""

    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.linspace(-1, 1, 6))
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc((x + 1.5 - self.c) * 2.0 / 3.0)


class Reshaped(nn.Module):
    """flatten, reshape, flatten: one Reshape would do."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(x.flatten(1).reshape(-1, 2, 8).flatten(1))


class ScaledConv(nn.Module):
    """A Conv2d, then a per-channel scale and shift by constants."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.register_buffer("scale", torch.tensor([0.5, -2.0, 3.0]).reshape(3, 1, 1))
        self.register_buffer("shift", torch.tensor([1.0, 0.0, -0.25]).reshape(3, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) * self.scale + self.shift)


def _sequential(*layers):
    return lambda: nn.Sequential(*layers)


@dataclass(frozen=True)
class Row:
    """One pass, run alone on a model that needs it."""

    name: str
    pass_name: str
    build: object
    shape: tuple[int, ...]
    applied: int  # changes the pass makes
    nodes_after: int


ROWS = (
    Row("identity", "remove_identities",
        _sequential(nn.Linear(4, 8), nn.Identity(), nn.ReLU(), nn.Linear(8, 3)), (4,), 1, 3),
    Row("reshape_chain", "collapse_reshapes", Reshaped, (4, 4), 2, 2),
    Row("elementwise_chain", "merge_elementwise", Shifted, (6,), 2, 3),
    Row("normalisation_linear", "fold_input_normalisation",
        lambda: Normalised(nn.Sequential(nn.Flatten(), nn.Linear(2 * 3 * 3, 4)), 2), (2, 3, 3),
        1, 2),
    Row("normalisation_conv", "fold_input_normalisation",
        lambda: Normalised(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), 3), (3, 6, 6), 1, 2),
    Row("normalisation_batchnorm", "fold_input_normalisation",
        _sequential(nn.BatchNorm2d(2), nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
                    nn.ReLU()), (2, 5, 5), 1, 2),
    Row("batchnorm_conv", "fold_batchnorm",
        _sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                    nn.Conv2d(4, 4, 3, groups=2, bias=False), nn.BatchNorm2d(4)), (3, 6, 6),
        2, 3),
    Row("batchnorm_linear", "fold_batchnorm",
        _sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2)), (5,),
        1, 3),
    Row("linear_linear", "merge_affine_layers",
        _sequential(nn.Linear(5, 7), nn.Linear(7, 4), nn.Linear(4, 3), nn.ReLU()), (5,), 2, 2),
    Row("conv_scale", "merge_affine_layers", ScaledConv, (2, 5, 5), 1, 2),
)


def _oracle(model, ir, simplified, report, shape, seed=1):
    """The eager model against the simplified graph in float32, within the certified
    bound, on inputs the certificate did not see."""
    x = torch.randn((6, *shape), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        eager = model(x).reshape(6, -1).double()
    ours = ncet.evaluate(simplified, x, dtype=torch.float32).reshape(6, -1).double()
    gap = (eager - ours).abs()
    # the bound is certified at the report's samples; on these, hold to it with the
    # original graph's own run as well (the eager model is that run, kernel for kernel)
    original = ncet.evaluate(ir, x, dtype=torch.float32).reshape(6, -1).double()
    again, here = simplify(ir, list(dict.fromkeys(c.pass_name for c in report.applied)),
                           inputs=[x])
    assert [n for n in again.nodes] == [n for n in simplified.nodes]
    assert here.ok, here.verdict()
    assert bool((gap <= here.bound).all()), (gap.max(), here.bound.max())
    assert bool(((original - eager).abs() <= here.bound).all())
    return gap


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_each_pass_alone_simplifies_and_certifies(row: Row):
    model = seeded(row.build, 0)
    ir = ncet.convert(model, row.shape)
    simplified, report = simplify(ir, [row.pass_name])
    assert report.ok, str(report)
    assert [c.pass_name for c in report.applied] == [row.pass_name] * row.applied, str(report)
    assert report.nodes_after == row.nodes_after, simplified
    assert report.nodes_after < report.nodes_before
    assert "the simplified network's outputs agree with the original's within" in str(report)
    assert "(certified)" in report.verdict()
    assert report.bound.shape == (sum(torch.Size(ir.node(o).shape).numel()
                                      for o in ir.outputs),)
    for agreement in report.agreements:
        assert agreement.ratio <= 1, agreement
    _oracle(model, ir, simplified, report, row.shape)


def test_computed_constants_are_new_names_rounded_once_from_float64():
    model = seeded(_sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), 0)
    ir = ncet.convert(model, (3, 5, 5))
    simplified, report = simplify(ir, ["fold_batchnorm"])
    (change,) = report.applied
    assert {c.name for c in change.constants} == set(simplified.constants)
    assert not set(simplified.constants) & set(ir.constants)
    conv, bn = model[0], model[1]
    exact_scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
    weight = (conv.weight.double() * exact_scale.reshape(-1, 1, 1, 1)).detach()
    node = simplified.node(ir.outputs[0])
    stored = simplified.constants[node.attrs["weight"]]
    assert stored.dtype == torch.float32
    assert torch.equal(stored, weight.float())  # float64 then once to nearest float32
    record = {c.name: c for c in change.constants}[node.attrs["weight"]]
    assert bool(((stored.double() - weight).abs() <= record.radius).all())
    assert float(record.radius.max()) <= 2 ** -23 * float(weight.abs().max())
    assert "sqrt" in record.how and "rounded once to float32" in str(change)


def test_a_shift_before_a_zero_padded_conv_is_refused_and_said():
    model = seeded(lambda: Normalised(nn.Conv2d(3, 4, 3, padding=1), 3), 0)
    ir = ncet.convert(model, (3, 6, 6))
    simplified, report = simplify(ir, ["fold_input_normalisation"])
    assert report.ok and not report.applied
    (refusal,) = report.refusals
    assert refusal.pass_name == "fold_input_normalisation"
    assert "pads with zeros" in refusal.note and "not exact" in refusal.note
    assert "refused" in str(report)
    assert [n.op_type for n in simplified.nodes] == [n.op_type for n in ir.nodes]


def test_a_pure_scale_before_a_zero_padded_conv_folds():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)

        def forward(self, x):
            return self.conv(x / 255.0)

    model = seeded(Scaled, 0)
    ir = ncet.convert(model, (2, 5, 5))
    simplified, report = simplify(ir, ["fold_input_normalisation"])
    assert report.ok and len(report.applied) == 1 and report.nodes_after == 1
    _oracle(model, ir, simplified, report, (2, 5, 5))


def test_a_layer_read_twice_is_not_folded():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            y = self.fc(x)
            return self.bn(y) + y

    ir = ncet.convert(seeded(Twice, 0), (4,))
    simplified, report = simplify(ir, ["fold_batchnorm"])
    assert not report.applied and report.refusals and report.ok
    assert "also read" in report.refusals[0].note


def test_all_passes_together_on_a_normalised_batchnorm_network():
    model = seeded(lambda: Normalised(nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 8),
        nn.BatchNorm1d(8), nn.Linear(8, 3), nn.Identity()), 3), 0)
    ir = ncet.convert(model, (3, 6, 6))
    simplified, report = simplify(ir)
    assert report.ok, str(report)
    assert {n.op_type for n in simplified.nodes} == {"Input", "Conv2d", "ReLU", "Flatten",
                                                     "Linear", "Output"}
    assert [n.op_type for n in simplified.nodes].count("Linear") == 1
    _oracle(model, ir, simplified, report, (3, 6, 6))
    assert set(PASSES) >= {c.pass_name for c in report.applied}


def test_unknown_pass_and_wrong_arguments():
    ir = ncet.convert(nn.Linear(2, 2).eval(), (2,))
    with pytest.raises(ValueError, match="no simplification pass 'fold_everything'"):
        simplify(ir, ["fold_everything"])
    with pytest.raises(TypeError, match="must be a GraphIR"):
        simplify(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="per-sample shape"):
        simplify(ir, inputs=[torch.zeros(3, 5)])


# --- seeded faults -------------------------------------------------------------------------
def _small_variance_batchnorm_net():
    model = seeded(_sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                               nn.Flatten(), nn.Linear(64, 5), nn.Linear(5, 3)), 0)
    with torch.no_grad():  # eps = 1e-5 is then a few per cent of var + eps
        model[1].running_var.copy_(torch.tensor([2e-4, 5e-4, 1e-3, 3e-4]))
    return model


def _no_eps(var, eps, weight):
    root = var.sqrt()
    return (weight if weight is not None else Carried.exact(torch.ones_like(var.value))) / root


def _input_axis(weight, a):
    return weight * a.reshape(1, a.value.shape[0], *(1,) * (weight.value.dim() - 2))


def _flipped(b, mean, s, bias):
    shift = (b + mean) * s
    return shift if bias is None else shift + bias


def _twice(w2, b1, b2):
    inner = w2.matmul(b1)
    return inner + b2 + b2


FAULTS = (
    ("eps_dropped", "ncet.passes.affine_forms.batchnorm_scale", _no_eps, "fold_batchnorm"),
    ("wrong_channel_axis", "ncet.passes.layer_folds.scale_rows", _input_axis,
     "fold_batchnorm"),
    ("sign_flipped", "ncet.passes.affine_forms.batchnorm_shift", _flipped, "fold_batchnorm"),
    ("bias_counted_twice", "ncet.passes.folds.merged_bias", _twice, "merge_affine_layers"),
)


@pytest.mark.parametrize("fault", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fault_seeded_in_a_fold_is_found_and_names_its_pass(fault, monkeypatch):
    name, target, replacement, pass_name = fault
    ir = ncet.convert(_small_variance_batchnorm_net(), (4, 4, 4))
    _, sound = simplify(ir)
    assert sound.ok, str(sound)
    monkeypatch.setattr(target, replacement)
    _, report = simplify(ir)
    assert pass_name in {c.pass_name for c in report.applied}
    assert not report.ok
    assert report.violation is not None and pass_name in report.violation.passes
    assert str(report).startswith("VIOLATION at ") and pass_name in report.verdict()
    assert report.violation.difference > report.violation.bound


def test_nothing_to_simplify_leaves_the_graph_and_an_exact_bound_of_zero():
    model = seeded(_sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.ReLU()), 0)
    ir = ncet.convert(model, (3,))
    simplified, report = simplify(ir)
    assert simplified is ir and not report.changes and report.ok
    assert torch.equal(report.exact_bound, torch.zeros(2, dtype=torch.float64))
    assert bool((report.bound > 0).all())  # two runs of float arithmetic, bounded apart


def test_a_batchnorm_across_the_linears_rows_is_refused():
    """Linear on a (3, 5) input acts on the last axis; BatchNorm1d(3) normalises axis 0."""
    model = seeded(_sequential(nn.Linear(5, 4), nn.BatchNorm1d(3)), 0)
    ir = ncet.convert(model, (3, 5))
    simplified, report = simplify(ir, ["fold_batchnorm"])
    assert report.ok and not report.applied
    assert "output channels" in report.refusals[0].note


class TwoHeads(nn.Module):
    """Two inputs, two outputs, a BatchNorm and a Linear chain on each."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
        self.b = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))

    def forward(self, x, y):
        return self.a(x), self.b(y) * 2.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_two_inputs_two_outputs_and_float64(dtype):
    model = seeded(TwoHeads, 0).to(dtype)
    ir = ncet.convert(model, (4,), (3,), dtype=dtype)
    before = {k: v.clone() for k, v in ir.constants.items()}
    nodes = list(ir.nodes)
    simplified, report = simplify(ir)
    assert list(ir.nodes) == nodes and ir.constants.keys() == before.keys()
    assert all(torch.equal(ir.constants[k], v) for k, v in before.items())  # not mutated
    assert report.ok, str(report)
    assert {c.pass_name for c in report.applied} == {"fold_batchnorm", "merge_affine_layers"}
    assert report.bound.shape == (4,) and report.exact_bound.shape == (4,)
    x = torch.randn(5, 4, dtype=dtype)
    y = torch.randn(5, 3, dtype=dtype)
    _, here = simplify(ir, inputs=[x, y])
    with torch.no_grad():
        eager = torch.cat([t.reshape(5, -1) for t in model(x, y)], dim=1).double()
    ours = torch.cat([t.reshape(5, -1) for t in ncet.evaluate(simplified, x, y, dtype=dtype)],
                     dim=1).double()
    assert here.ok and bool(((eager - ours).abs() <= here.bound).all())
    computed = [c for change in report.applied for c in change.constants]
    assert all(c.dtype == str(dtype).removeprefix("torch.") for c in computed)
    kept = [c for c in computed if c.name in simplified.constants]  # a later pass may fold one
    assert kept and all(simplified.constants[c.name].dtype == dtype for c in kept)


def test_the_report_is_json():
    import json

    ir = ncet.convert(_small_variance_batchnorm_net(), (4, 4, 4))
    _, report = simplify(ir, samples_per_scale=1)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] and data["verdict"].startswith("CERTIFIED")
    assert [c["pass"] for c in data["changes"]] == [c.pass_name for c in report.changes]
    assert len(data["bound"]) == len(data["exact_bound"]) == 3


def test_the_zero_padding_refusal_is_needed(monkeypatch):
    """Without the refusal, a mean folded into a zero-padded Conv2d is found: the border
    outputs differ from the original's beyond the bound."""
    model = seeded(lambda: Normalised(nn.Conv2d(3, 4, 3, padding=1), 3), 0)
    ir = ncet.convert(model, (3, 6, 6))
    monkeypatch.setattr("ncet.passes.layer_folds.pads_with_zeros", lambda layer: False)
    _, report = simplify(ir, ["fold_input_normalisation"])
    assert [c.pass_name for c in report.applied] == ["fold_input_normalisation"]
    assert not report.ok and report.violation.passes == ("fold_input_normalisation",)


def test_a_fold_without_a_bounded_constant_is_refused_not_raised():
    """A hand-made BatchNorm with var + eps = 0 (convert rejects it; a GraphIR built by hand
    can hold it): the scale has no bound, so the fold is refused with the reason."""
    from dataclasses import replace

    ir = ncet.convert(seeded(_sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), 0), (3,))
    bn = ir.node(ir.outputs[0])
    nodes = [replace(n, attrs={**n.attrs, "eps": 0.0}) if n is bn else n for n in ir.nodes]
    constants = dict(ir.constants)
    constants[bn.attrs["var"]] = torch.zeros(4)
    _, report = simplify(ncet.GraphIR(tuple(nodes), constants), ["fold_batchnorm"],
                         samples_per_scale=1)
    (refusal,) = report.refusals
    assert refusal.pass_name == "fold_batchnorm" and "no certified bound" in refusal.note
