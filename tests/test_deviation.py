"""find_deviation (ncet/regions/deviation.py) held to exact rationals: on networks whose
float32 result is fixed by IEEE 754 alone (one product per node: no summation order, no FMA),
the deviation it proves equals the true one, computed here with Fractions; its points stay
inside the exact box; the region is read alike in every form."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.regions import deviation as deviation_module
from ncet.regions.deviation import find_deviation
from ncet.regions.deviation_runs import region_boxes

W1, W2, W3 = np.float32(1 / 3), np.float32(-0.7), np.float32(1.1)
X0 = np.float32(1.5)


def _chain(*weights) -> nn.Module:
    """A chain of one-by-one products (Linear(1, 1) without bias, ReLU between them)."""
    layers = []
    for w in weights:
        layer = nn.Linear(1, 1, bias=False)
        layer.weight.data.fill_(float(w))
        layers += [layer, nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _floats_from(x0: np.float32, count: int) -> list[np.float32]:
    """x0 and the count - 1 float32 numbers above it."""
    xs = [x0]
    for _ in range(count - 1):
        xs.append(np.nextafter(xs[-1], np.float32(np.inf)))
    return xs


def _true_worst(weights, xs) -> Fraction:
    """max over x of |float32 chain(x) - exact chain(x)|: each product of two float32
    numbers is exact in float64, so rounding it to float32 is IEEE 754's one rounding."""
    worst = Fraction(0)
    for x in xs:
        f, exact = np.float32(x), Fraction(float(x))
        for i, w in enumerate(weights):
            f = np.float32(float(f) * float(w))
            exact *= Fraction(float(w))
            if i < len(weights) - 1:
                f, exact = max(f, np.float32(0)), max(exact, Fraction(0))
        worst = max(worst, abs(Fraction(float(f)) - exact))
    return worst


def _floor(q: Fraction) -> float:
    v = float(q)
    return float(np.nextafter(v, -np.inf)) if Fraction(v) > q else v


def test_the_deviation_proven_on_one_product_is_the_true_one():
    xs = _floats_from(X0, 8)
    ir = ncet.convert(_chain(W1), (1,))
    found = find_deviation(ir, (np.array([xs[0]]), np.array([xs[-1]])), samples=64)
    true = _true_worst([W1], xs)
    assert true > 0
    # all that is given away: the enclosure's radius, float64's rounding bound at y ~ 0.5
    assert float(true) - 2 ** -51 <= float(found.deviation[0]) <= float(true)
    assert found.exact == ("enclosure",) and found.boxes == 1


def test_the_rational_path_proves_exactly_the_true_deviation(monkeypatch):
    monkeypatch.setattr(deviation_module, "RADIUS_SHARE", 0.0)  # every candidate exactly
    xs = _floats_from(X0, 6)
    weights = [W1, W3, W1, W3]
    ir = ncet.convert(_chain(*weights), (1,))
    found = find_deviation(ir, (torch.tensor([xs[0]]), torch.tensor([xs[-1]])), samples=64)
    assert found.exact == ("rational",)
    assert float(found.deviation[0]) == _floor(_true_worst(weights, xs))


def test_onnxruntime_runs_the_deployed_file_to_the_same_true_deviation(tmp_path):
    pytest.importorskip("onnxruntime")
    xs = _floats_from(X0, 8)
    ir = ncet.convert(_chain(W1), (1,))
    ncet.to_onnx(ir, tmp_path / "net.onnx")
    found = find_deviation(ir, [(np.array([xs[0]]), np.array([xs[-1]]))],
                           onnx_file=tmp_path / "net.onnx", samples=64)
    true = _true_worst([W1], xs)
    assert float(true) - 2 ** -51 <= float(found.deviation[0]) <= float(true)
    assert found.runtimes[0] in ("pytorch", "onnxruntime", "pytorch batch 1")


def test_a_negative_weight_and_a_relu_that_cuts_are_followed():
    xs = _floats_from(X0, 4)
    ir = ncet.convert(_chain(W1, W2, W3), (1,))  # the ReLU after W2 cuts: output exactly 0
    found = find_deviation(ir, (np.array([xs[0]]), np.array([xs[-1]])), samples=32)
    assert _true_worst([W1, W2, W3], xs) == 0
    assert float(found.deviation[0]) == 0 and found.runtimes == ("",)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))


def test_points_are_float32_numbers_inside_the_exact_decimal_box():
    prop = ncet.Property.from_region([(["0.1", "-0.3", "0.2"], ["0.7", "0.1", "0.2000001"])],
                                     [([[1, -1]], ["0"])], 2)
    ir = ncet.convert(_mlp(), (3,))
    found = find_deviation(ir, prop, samples=64, ascent_steps=4)
    (lower, upper), = prop.input_boxes
    assert (found.deviation > 0).all()
    for point in found.points.numpy():
        assert point.dtype == np.float32
        assert all(lo <= Fraction(float(v)) <= hi for lo, v, hi in zip(lower, point, upper))


def test_a_region_is_read_alike_as_a_property_a_pair_a_list_and_a_tensor():
    prop = ncet.Property.from_region([(["0.1", "-0.3", "0.2"], ["0.7", "0.1", "0.3"]),
                                      (["1", "1", "1"], ["2", "2", "2"])],
                                     [([[1, -1]], ["0"])], 2)
    from_prop = region_boxes(prop, 3)
    lo64 = np.array([0.1, -0.3, 0.2])
    hi64 = np.array([0.7, 0.1, 0.3])
    pairs = region_boxes([(lo64, hi64), (torch.ones(3), 2 * torch.ones(3, dtype=torch.float64))],
                         3)
    assert len(from_prop) == len(pairs) == 2
    for (a, b), (c, d) in zip(from_prop, pairs):
        assert a.dtype == b.dtype == c.dtype == d.dtype == np.float32
        assert (a == c).all() and (b == d).all()
    assert (from_prop[0][0].astype(np.float64) >= lo64).all()  # rounded inward
    assert (from_prop[0][1].astype(np.float64) <= hi64).all()


def test_a_zero_width_decimal_bound_holds_no_float32_and_is_skipped():
    ir = ncet.convert(_mlp(), (3,))
    found = find_deviation(ir, (np.array([0.1, 0.0, 0.0]), np.array([0.1, 1.0, 1.0])))
    assert found.boxes == 0 and (found.deviation == 0).all() and found.evaluated == 0


@pytest.mark.parametrize("region, error", [
    ((np.zeros(4), np.ones(4)), ValueError),
    ({"lower": 0}, TypeError),
], ids=["wrong-size", "not-a-region"])
def test_a_region_that_is_not_the_inputs_is_refused(region, error):
    with pytest.raises(error):
        find_deviation(ncet.convert(_mlp(), (3,)), region)


def test_the_record_is_json_ready_and_names_its_outputs():
    ir = ncet.convert(_mlp(), (3,))
    found = find_deviation(ir, (np.zeros(3), np.ones(3)), samples=16, ascent_steps=2)
    record = found.to_dict()
    assert len(record["deviation"]) == 2 == found.num_outputs
    assert len(record["points"]) == 2 and len(record["points"][0]) == 3
    assert "2 outputs" in repr(found)
