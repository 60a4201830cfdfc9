"""Every number the support boundary enforces, probed at its edges.

For each rule of ncet/frontend/boundary_rules.py that carries a `Limit`, a model just inside
each end of the limit converts (and matches eager PyTorch), and one just outside is rejected
with the rule's reason code and error class. The probe values are read from the rule, so the
handlers, their messages, docs/support-boundary.md and these tests share one number.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.errors import REASONS
from ncet.frontend.boundary_rules import (
    AFFINE_INTEGER,
    BATCH_NORM_1D_RANK,
    BATCH_NORM_2D_RANK,
    CONV2D_RANK,
    LEAKY_RELU_SLOPE,
    LIMITED_RULES,
    LINEAR_RANK,
    POOL_RANK,
    Limit,
)
from tests.conftest import At, Fn, convert_and_compare, model_unchanged, param, reseed


def _trailing(core: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """The per-sample shape of a batched rank-`rank` input: `core`'s last axes, or `core`
    after leading 1s."""
    padded = (1,) * rank + core
    return padded[len(padded) - (rank - 1):] if rank > 1 else ()


def _channels(channels: int, rank: int) -> tuple[int, ...]:
    """A BatchNorm input's per-sample shape: channels first, then length-5 axes."""
    return (channels,) + (5,) * (rank - 2) if rank > 1 else ()


def _module(factory, shape_of):
    return lambda value: (At("m", reseed(factory(), seed=3)).eval(), [shape_of(value)])


def _scalar_affine(value):
    return Fn(lambda m, x: x * value).eval(), [(3, 4)]


def _tensor_affine(value):
    return Fn(lambda m, x: x * m.c, c=torch.tensor([value], dtype=torch.int64)).eval(), [(3, 4)]


# rule -> [(probe name, value -> (model, per-sample shapes))]
PROBES = {
    LINEAR_RANK: [
        ("nn.Linear", _module(lambda: nn.Linear(4, 3), lambda r: _trailing((4,), r))),
        ("F.linear", lambda r: (Fn(lambda m, x: F.linear(x, m.w), w=param(3, 4)).eval(),
                                [_trailing((4,), r)])),
    ],
    CONV2D_RANK: [
        ("nn.Conv2d", _module(lambda: nn.Conv2d(2, 3, 3), lambda r: _trailing((2, 5, 5), r))),
    ],
    BATCH_NORM_1D_RANK: [
        ("nn.BatchNorm1d", _module(lambda: nn.BatchNorm1d(4), lambda r: _channels(4, r))),
    ],
    BATCH_NORM_2D_RANK: [
        ("nn.BatchNorm2d", _module(lambda: nn.BatchNorm2d(2), lambda r: _channels(2, r))),
    ],
    POOL_RANK: [
        (name, _module(factory, lambda r: _trailing((2, 4, 4), r)))
        for name, factory in [("nn.AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(2)),
                              ("nn.AvgPool2d", lambda: nn.AvgPool2d(2)),
                              ("nn.MaxPool2d", lambda: nn.MaxPool2d(2))]
    ],
    LEAKY_RELU_SLOPE: [
        ("nn.LeakyReLU", lambda s: (At("m", nn.LeakyReLU(s)).eval(), [(3, 4)])),
        ("F.leaky_relu", lambda s: (Fn(lambda m, x: F.leaky_relu(x, s)).eval(), [(3, 4)])),
    ],
    AFFINE_INTEGER: [
        ("x * int", _scalar_affine),
        ("x * int64 buffer", _tensor_affine),
    ],
}


def _inside(limit: Limit) -> list:
    return [limit.low, limit.high]


def _outside(limit: Limit) -> list:
    if isinstance(limit.low, int) and isinstance(limit.high, int):
        return [limit.low - 1, limit.high + 1]
    return [math.nextafter(limit.low, -math.inf), math.nextafter(limit.high, math.inf)]


CASES = [pytest.param(rule, probe, id=f"{rule.code}:{name}")
         for rule, probes in PROBES.items() for name, probe in probes]


def test_every_rule_with_a_number_is_probed():
    assert set(PROBES) == set(LIMITED_RULES)


@pytest.mark.parametrize(("rule", "probe"), CASES)
def test_just_inside_is_accepted(rule, probe):
    for value in _inside(rule.limit):
        model, shapes = probe(value)
        convert_and_compare(model, *shapes)


@pytest.mark.parametrize(("rule", "probe"), CASES)
def test_just_outside_is_rejected_with_the_rules_code(rule, probe):
    error_class = getattr(ncet, REASONS[rule.code].error)
    for value in _outside(rule.limit):
        model, shapes = probe(value)
        with model_unchanged(model), pytest.raises(error_class) as info:
            ncet.convert(model, *shapes)
        assert info.value.code == rule.code, f"{value!r}: {info.value}"
        if rule.limit.quantity == "rank":  # the message states the accepted ranks
            assert f"batched input of {rule.limit}, got rank {value}" in str(info.value)
