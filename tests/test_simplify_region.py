"""The simplification's bound over a region (`ncet.passes.simplification_bound`): for every
input of a box, |simplified exact - original exact| per output element. Held, at the box's
corners and points drawn inside it, to the two graphs' certified float64 enclosures
(`enclose`): |r_s - r_o| <= bound + R_s + R_o; zero when nothing was computed; and not
vacuous: a fold with its eps dropped breaks it inside the box. Where both graphs have
rational values (no BatchNorm), exact rational arithmetic is the oracle for both exact
bounds."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from torch import nn

import ncet
from ncet.exactness.enclosure import enclose
from ncet.passes import simplification_bound, simplify
from ncet.properties.exact_eval import rational_at
from tests.corpus import box_samples, corpus_root, first_property
from tests.test_simplify import ROWS, _no_eps, _small_variance_batchnorm_net
from tests.zoo_models import ZOO, seeded

ZOO_ROWS = ("lirpa_cnn_7layer_bn", "tv_resnet_basic", "augmented_normalize")


def _points(lo, hi, count=64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = lo + (hi - lo) * torch.rand((count, *lo.shape), generator=generator, dtype=torch.float64)
    x[0], x[1] = lo, hi
    return x


def _held(original, simplified, bound, x):
    """|r_s - r_o| - R_s - R_o, a lower bound on the exact difference, is within `bound`."""
    mine, theirs = enclose(original, x), enclose(simplified, x)
    gaps = []
    for o, s in zip(original.outputs, simplified.outputs):
        (r_o, e_o), (r_s, e_s) = mine[o], theirs[s]
        gaps.append(((r_s - r_o).abs() - e_o - e_s).reshape(x.shape[0], -1))
    gap = torch.cat(gaps, dim=1)
    return bool((gap <= bound).all()), gap


@pytest.mark.parametrize("name", ZOO_ROWS)
def test_the_region_bound_holds_inside_the_box(name):
    (entry,) = [e for e in ZOO if e.name == name]
    ir = ncet.convert(entry.factory(), *entry.shapes, rewrite=True)
    simplified, report = simplify(ir, samples_per_scale=2)
    assert report.ok and report.applied
    lo, hi = -torch.ones(entry.shapes[0], dtype=torch.float64), torch.ones(entry.shapes[0])
    bound = simplification_bound(ir, simplified, (lo, hi.double()))
    assert bound.shape == report.bound.shape and bool((bound > 0).all())
    held, _ = _held(ir, simplified, bound, _points(lo, hi.double()))
    assert held


def test_nothing_computed_means_a_zero_bound():
    ir = ncet.convert(nn.Sequential(nn.Linear(3, 4), nn.Identity(), nn.ReLU()).eval(), (3,))
    simplified, report = simplify(ir)
    assert [c.pass_name for c in report.applied] == ["remove_identities"]
    bound = simplification_bound(ir, simplified, (-torch.ones(3), torch.ones(3)))
    assert torch.equal(bound, torch.zeros(4, dtype=torch.float64))


def test_the_region_bound_is_not_vacuous(monkeypatch):
    """With BatchNorm's eps dropped from the fold, points of the box leave the bound."""
    ir = ncet.convert(_small_variance_batchnorm_net(), (4, 4, 4))
    monkeypatch.setattr("ncet.passes.affine_forms.batchnorm_scale", _no_eps)
    simplified, _ = simplify(ir, samples_per_scale=1)
    lo, hi = -torch.ones(4, 4, 4, dtype=torch.float64), torch.ones(4, 4, 4, dtype=torch.float64)
    bound = simplification_bound(ir, simplified, (lo, hi))
    held, gap = _held(ir, simplified, bound, _points(lo, hi))
    assert not held and float((gap / bound).max()) > 1


@pytest.mark.parametrize("network", ["acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx",
                                     "eran/nets/mnist_relu_9_200.onnx"])
def test_a_corpus_normalisation_fold_holds_over_its_property_box(network):
    root = corpus_root()
    ir = ncet.from_onnx(root / network)
    prop = ncet.read_vnnlib(root / first_property(network))
    simplified, report = simplify(ir, samples_per_scale=2)
    assert report.ok and "fold_input_normalisation" in {c.pass_name for c in report.applied}
    bound = simplification_bound(ir, simplified, prop)
    x = box_samples(prop, ir.inputs[0].shape, 32).double()
    held, gap = _held(ir, simplified, bound, x)
    assert held, float(gap.max())
    assert bool(torch.isfinite(bound).all())


@pytest.mark.parametrize("row", ["linear_linear", "elementwise_chain", "normalisation_linear",
                                 "conv_scale"])
def test_exact_rationals_hold_both_exact_bounds(row):
    """Exact rational arithmetic as the oracle (graphs without BatchNorm, whose square root
    has no rational value): the two graphs' exact outputs at points of a box differ by no
    more than the report's `exact_bound` at those points, nor than the region's bound."""
    (spec,) = [r for r in ROWS if r.name == row]
    ir = ncet.convert(seeded(spec.build, 0), spec.shape)
    lo = -torch.ones(spec.shape, dtype=torch.float64)
    hi = torch.ones(spec.shape, dtype=torch.float64)
    x = _points(lo, hi, count=4, seed=1).float()
    simplified, report = simplify(ir, [spec.pass_name], inputs=[x])
    assert report.ok and report.applied
    region = simplification_bound(ir, simplified, (lo, hi))
    for sample in x:
        point = [Fraction(float(v)) for v in sample.reshape(-1).double()]
        gap = [abs(a - b) for a, b in zip(rational_at(simplified, point), rational_at(ir, point))]
        assert all(g <= Fraction(float(b)) for g, b in zip(gap, report.exact_bound)), row
        assert all(g <= Fraction(float(b)) for g, b in zip(gap, region)), row


def test_a_margin_of_the_simplified_network_is_widened_to_speak_about_the_original():
    from ncet.passes import widen_margin
    from ncet.regions import Margin

    ir = ncet.convert(_small_variance_batchnorm_net(), (4, 4, 4))
    simplified, report = simplify(ir, samples_per_scale=1)
    lo, hi = -torch.ones(4, 4, 4, dtype=torch.float64), torch.ones(4, 4, 4, dtype=torch.float64)
    bound = simplification_bound(ir, simplified, (lo, hi))
    margin = Margin(eps=torch.full((3,), 1e-6, dtype=torch.float64),  # built by hand
                    lower=torch.full((3,), -2.0, dtype=torch.float64),
                    upper=torch.full((3,), 3.0, dtype=torch.float64))
    wide = widen_margin(margin, ir, simplified, (lo, hi))
    assert bool((wide.eps >= margin.eps + bound).all())
    assert bool((wide.lower <= margin.lower - bound).all())
    assert bool((wide.upper >= margin.upper + bound).all())
    assert torch.equal(wide.contributions["<simplification>"], bound)
    with pytest.raises(ValueError, match="outputs"):
        widen_margin(Margin(eps=torch.zeros(2), lower=torch.zeros(2), upper=torch.zeros(2)),
                     ir, simplified, (lo, hi))


@pytest.mark.parametrize("case", ["acasxu", "batchnorm"])
def test_the_widened_float_margin_of_the_simplified_network_speaks_about_the_original(case):
    """float_margin of the simplified graph, widened by the simplification's bound: at the
    box's corners and points inside it, the simplified network in float32 is within eps of
    the original's exact value (its certified float64 enclosure)."""
    from ncet.passes import widen_margin

    if case == "acasxu":
        network = "acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx"
        ir = ncet.from_onnx(corpus_root() / network)
        prop = ncet.read_vnnlib(corpus_root() / first_property(network))
        lo, hi = (torch.as_tensor(b, dtype=torch.float64).reshape(ir.inputs[0].shape)
                  for b in prop.input_boxes_as()[0])
    else:
        ir = ncet.convert(_small_variance_batchnorm_net(), (4, 4, 4))
        lo = -torch.ones(4, 4, 4, dtype=torch.float64)
        hi = torch.ones(4, 4, 4, dtype=torch.float64)
    simplified, report = simplify(ir, samples_per_scale=2)
    assert report.ok and report.applied
    margin = ncet.float_margin(simplified, (lo, hi))
    wide = widen_margin(margin, ir, simplified, (lo, hi))
    x = _points(lo, hi, count=32).float()  # float32 points of the box
    inside = ((x.double() >= lo) & (x.double() <= hi)).reshape(32, -1).all(1)
    x = x[inside]
    ours = ncet.evaluate(simplified, x, dtype=torch.float32).reshape(x.shape[0], -1).double()
    (value, radius), = [enclose(ir, x)[o] for o in ir.outputs]
    gap = (ours - value.reshape(x.shape[0], -1)).abs() - radius.reshape(x.shape[0], -1)
    assert bool((gap <= wide.eps).all())
    assert bool((wide.eps >= margin.eps).all())
