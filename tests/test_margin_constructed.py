"""The constructed case of issue 34 (docs/margins.md, "A network float32 pushes into the
unsafe set"): a network whose exact output stays out of the unsafe set by less than its
float32 error, where float32 enters the unsafe set, and the tightened property holds the
exact output, so that a verifier reasoning in real arithmetic cannot answer "unsat" for it.

The network is y = relu(x + b) with x in [0, 1], weight 1 and b = 2^-24 + 2^-47 (a float32).
At x = 1 float32 makes one rounding, fixed by IEEE round-to-nearest whatever the CPU: x * 1
is exact, and x + b is a sum of two terms (no order to choose; exact in float64 too, so no
double rounding): 1 + 2^-24 + 2^-47 lies just above the midpoint of 1 and 1 + 2^-23, so it
rounds up to 1 + 2^-23. The unsafe set Y_0 >= 1.00000006 lies between the exact output
(at most 1.0000000596046519) and float32's (1.0000001192092896). Oracle: exact rationals.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from tests.test_cli import call

F = Fraction
BIAS = F(2) ** -24 + F(2) ** -47
THRESHOLD = F("1.00000006")
PROPERTY = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
            "(assert (>= X_0 0))\n(assert (<= X_0 1))\n(assert (>= Y_0 1.00000006))\n")
X = 1.0


def _network() -> nn.Module:
    net = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.fill_(float(BIAS))
    return net.eval()


def _exact(x: Fraction) -> Fraction:
    """The network's output in exact arithmetic."""
    return max(x + BIAS, F(0))


def _float32(x: Fraction) -> Fraction:
    """x + b rounded once to the nearest float32 (ties to even): x + b is exact in float64,
    so numpy's float64 -> float32 conversion rounds the exact value."""
    total = x + BIAS
    assert F(float(total)) == total
    return F(float(np.float32(float(total))))


def test_float32_enters_the_unsafe_set_where_the_exact_output_stays_out():
    net = _network()
    assert F(net[0].bias.item()) == BIAS  # b is a float32 exactly
    prop = ncet.read_vnnlib(PROPERTY)
    y_float = F(net(torch.tensor([[X]])).item())  # PyTorch's float32, as deployed
    assert y_float == _float32(F(X)) == 1 + F(2) ** -23
    y_exact = _exact(F(X))
    # the exact output is increasing in x, so its largest value over [0, 1] is at x = 1
    assert y_exact == max(_exact(F(0)), _exact(F(1)))
    assert not prop.violated_by([X], [y_exact]) and prop.violated_by([X], [y_float])
    out_by, error = THRESHOLD - y_exact, y_float - y_exact
    assert 0 < out_by < error  # out of the unsafe set by less than float32's error
    assert ncet.adjudicate(net, prop, torch.tensor([X]), input_shape=(1,)).verdict == \
        "float32-only"


def test_onnxruntime_rounds_it_the_same():
    pytest.importorskip("onnxruntime")
    import onnxruntime

    model = ncet.to_onnx(ncet.convert(_network(), (1,)))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: np.array([[X]], np.float32)})
    assert F(float(y.reshape(-1)[0])) == _float32(F(X))


def test_the_property_tightened_by_a_sound_eps_holds_the_exact_output():
    """eps from the standard model of one float32 addition, |fl(s) - s| <= 2^-24 |s|, at the
    largest |s| over the box (worked by hand, not by float_margin)."""
    prop = ncet.read_vnnlib(PROPERTY)
    eps = F(2) ** -24 * _exact(F(1))
    bound = float(eps)
    if F(bound) < eps:
        bound = np.nextafter(bound, np.inf)
    assert _float32(F(X)) - _exact(F(X)) <= F(bound)  # the deviation is within eps
    tight = ncet.tighten(prop, [bound])
    y_exact = _exact(F(X))
    assert tight.violated_by([X], [y_exact])  # a real-arithmetic verifier finds x = 1
    assert ncet.adjudicate(_network(), tight, torch.tensor([X]),
                           input_shape=(1,)).verdict == "counterexample"
    assert ncet.read_vnnlib(ncet.write_vnnlib(tight)) == tight


def test_float_margin_covers_the_deviation_and_ncet_margin_writes_the_tightened_file(
        tmp_path, capsys):
    ir = ncet.convert(_network(), (1,))
    prop = ncet.read_vnnlib(PROPERTY)
    margin = ncet.float_margin(ir, prop)
    deviation = abs(_float32(F(X)) - _exact(F(X)))
    assert F(float(margin.eps[0])) >= deviation
    assert F(float(margin.lower[0])) <= _exact(F(0)) and \
        F(float(margin.upper[0])) >= _exact(F(1))
    assert ncet.tighten(prop, margin).violated_by([X], [_exact(F(X))])
    ncet.save(ir, tmp_path / "net.ncet")
    (tmp_path / "prop.vnnlib").write_text(PROPERTY)
    status, out, _ = call(capsys, "margin", str(tmp_path / "net.ncet"),
                          str(tmp_path / "prop.vnnlib"), "-o", str(tmp_path / "t.vnnlib"),
                          "--json")
    doc = json.loads(out)
    assert status == 0 and doc["output"]["read_back"] is True
    assert doc["decided_as_deployed"] is False
    written = ncet.read_vnnlib(tmp_path / "t.vnnlib")
    assert written.violated_by([X], [_exact(F(X))])
    assert not prop.violated_by([X], [_exact(F(X))])
