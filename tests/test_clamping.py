"""Clamps (clamp, clip, hardtanh, ReLU6; ncet/frontend/clamping.py): each spelling is rejected
with a hint that says what to write instead, and `rewrite=True` maps exactly the clamps that
PyTorch computes bit for bit as ReLU onto ReLU."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.frontend.rewrites import RULE_CLAMP_RELU
from tests.conftest import Fn

U = ncet.UnsupportedOperatorError
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_INT = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16,
        torch.float16: torch.int16}


def special_values(dtype: torch.dtype) -> torch.Tensor:
    """Signed zeros, NaNs of both signs, infinities, the smallest normals and subnormals,
    the largest finite numbers and a few ordinary ones, repeated to 67 elements (so that
    vectorised loops and their scalar tails both see each value)."""
    info = torch.finfo(dtype)
    values = [0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"),
              info.tiny, -info.tiny, info.tiny / 2, -info.tiny / 2, info.tiny / 8,
              -info.tiny / 8, info.max, -info.max, 1.0, -1.0, 1e-3, -1e-3]
    values = (values * 4)[:67]
    return torch.tensor(values, dtype=dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_INT[t.dtype])


RELU_CLAMPS = {  # every spelling rewrite=True maps onto ReLU
    "torch.clamp(x, min=0)": lambda x: torch.clamp(x, min=0),
    "torch.clamp(x, min=0.0)": lambda x: torch.clamp(x, min=0.0),
    "torch.clamp(x, 0)": lambda x: torch.clamp(x, 0),
    "torch.clamp(x, 0, None)": lambda x: torch.clamp(x, 0, None),
    "x.clamp(min=0)": lambda x: x.clamp(min=0),
    "x.clamp(0.0)": lambda x: x.clamp(0.0),
    "x.clamp_min(0)": lambda x: x.clamp_min(0),
    "x.clamp_min(0.0)": lambda x: x.clamp_min(0.0),
    "torch.clamp_min(x, 0)": lambda x: torch.clamp_min(x, 0),
    "torch.clamp_min(x, 0.0)": lambda x: torch.clamp_min(x, 0.0),
    "torch.clip(x, min=0)": lambda x: torch.clip(x, min=0),
    "x.clip(0)": lambda x: x.clip(0),
}

NOT_RELU = {  # what is left alone, and the value where it differs from relu
    "torch.clamp(x, min=-0.0)": (lambda x: torch.clamp(x, min=-0.0), "sign of zero"),
    "x.clamp_min(-0.0)": (lambda x: x.clamp_min(-0.0), "sign of zero"),
    "torch.clamp(x, min=tensor(0.0))": (lambda x: torch.clamp(x, min=torch.tensor(0.0)),
                                        "sign of zero"),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("spelling", list(RELU_CLAMPS))
def test_the_mapped_clamps_are_relu_bit_for_bit(spelling, dtype):
    """The premise of RULE_CLAMP_RELU, with PyTorch as the oracle: the bits agree at every
    special value (the sign of zero, NaN payloads and signs, subnormals, infinities)."""
    x = special_values(dtype)
    got = RELU_CLAMPS[spelling](x.clone())
    assert got.dtype == dtype
    assert torch.equal(bits(got), bits(torch.relu(x.clone()))), spelling


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("spelling", list(NOT_RELU))
def test_the_clamps_left_alone_differ_from_relu(spelling, dtype):
    """Why a lower bound of -0.0 or a tensor is not mapped: PyTorch gives the other sign of
    zero than relu somewhere among the special values."""
    x = special_values(dtype)
    fn, _ = NOT_RELU[spelling]
    got = fn(x.clone()).to(dtype)
    assert not torch.equal(bits(got), bits(torch.relu(x.clone())))
    assert torch.equal(got.isnan(), x.isnan())  # the same values but for zeros' signs
    finite = ~x.isnan()
    assert torch.equal(got[finite], torch.relu(x)[finite])


def _sequential(fn):
    return nn.Sequential(nn.Linear(4, 4), Fn(lambda m, x: fn(x))).eval()


@pytest.mark.parametrize("spelling", list(RELU_CLAMPS))
def test_rewrite_maps_a_clamp_at_zero_onto_relu(spelling):
    model = _sequential(RELU_CLAMPS[spelling])
    report = ncet.diagnose(model, (4,))
    (error,) = report.errors
    assert isinstance(error.error, U)
    assert error.code in ("unsupported-function", "unsupported-method")
    assert "convert with rewrite=True, which maps it onto ReLU" in error.hint
    report = ncet.diagnose(model, (4,), rewrite=True)
    assert report.ok, report
    assert [n.op_type for n in report.graph.nodes] == ["Input", "Linear", "ReLU", "Output"]
    (row,) = [r for r in report.rows if r.rewrite]
    assert row.rewrite.startswith(RULE_CLAMP_RELU) and row.op_type == "ReLU"
    assert ncet.check_exactness(model, report.graph, samples_per_scale=4).ok


@pytest.mark.parametrize("spelling", list(NOT_RELU))
def test_rewrite_leaves_other_clamps_rejected(spelling):
    model = _sequential(NOT_RELU[spelling][0])
    report = ncet.diagnose(model, (4,), rewrite=True)
    assert not report.ok
    assert {e.code for e in report.errors} <= {"unsupported-function", "unsupported-method",
                                               "constant-computation"}
    assert not any(r.rewrite for r in report.rows)


def _module(module):
    return nn.Sequential(nn.Linear(4, 4), module).eval()


def _fn(fn):
    return _sequential(fn)


# spelling, model, code, what the hint must say (the replacement)
HINTS = [
    ("nn.Hardtanh()", _module(nn.Hardtanh()), "unsupported-module",
     "F.relu(x + 1.0) - 1.0 - F.relu(x - 1.0)"),
    ("nn.Hardtanh(-2, 3)", _module(nn.Hardtanh(-2, 3)), "unsupported-module",
     "F.relu(x + 2) - 2 - F.relu(x - 3)"),
    ("nn.Hardtanh(0, 1)", _module(nn.Hardtanh(0, 1)), "unsupported-module",
     "F.relu(x) - F.relu(x - 1)"),
    ("F.hardtanh(x)", _fn(F.hardtanh), "unsupported-function",
     "F.relu(x + 1.0) - 1.0 - F.relu(x - 1.0)"),
    ("F.hardtanh(x, -0.5, 0.5)", _fn(lambda x: F.hardtanh(x, -0.5, 0.5)),
     "unsupported-function", "F.relu(x + 0.5) - 0.5 - F.relu(x - 0.5)"),
    ("F.hardtanh_(x)", _fn(lambda x: torch.nn.functional.hardtanh_(x * 1.0)),
     "unsupported-function", "F.relu(x + 1.0) - 1.0 - F.relu(x - 1.0)"),
    ("nn.ReLU6()", _module(nn.ReLU6()), "unsupported-module", "F.relu(x) - F.relu(x - 6.0)"),
    ("F.relu6(x)", _fn(F.relu6), "unsupported-function", "F.relu(x) - F.relu(x - 6)"),
    ("torch.clamp(x, -1, 1)", _fn(lambda x: torch.clamp(x, -1, 1)), "unsupported-function",
     "F.relu(x + 1) - 1 - F.relu(x - 1)"),
    ("torch.clamp(x, min=0, max=2.5)", _fn(lambda x: torch.clamp(x, min=0, max=2.5)),
     "unsupported-function", "F.relu(x) - F.relu(x - 2.5)"),
    ("torch.clamp(x, min=0.5)", _fn(lambda x: torch.clamp(x, min=0.5)),
     "unsupported-function", "F.relu(x - 0.5) + 0.5"),
    ("torch.clamp(x, max=3)", _fn(lambda x: torch.clamp(x, max=3)), "unsupported-function",
     "3 - F.relu(3 - x)"),
    ("torch.clamp(x, min=0)", _fn(lambda x: torch.clamp(x, min=0)), "unsupported-function",
     "write F.relu(x), or convert with rewrite=True"),
    ("torch.clamp(x, min=-0.0)", _fn(lambda x: torch.clamp(x, min=-0.0)),
     "unsupported-function", "write F.relu(x): the same but for the sign of zero"),
    ("x.clamp(min=-2)", _fn(lambda x: x.clamp(min=-2)), "unsupported-method",
     "F.relu(x + 2) - 2"),
    ("x.clamp(0, 1)", _fn(lambda x: x.clamp(0, 1)), "unsupported-method",
     "F.relu(x) - F.relu(x - 1)"),
    ("x.clamp_min(1)", _fn(lambda x: x.clamp_min(1)), "unsupported-method",
     "F.relu(x - 1) + 1"),
    ("x.clamp_min(0)", _fn(lambda x: x.clamp_min(0)), "unsupported-method",
     "write F.relu(x), or convert with rewrite=True"),
    ("x.clamp_max(0)", _fn(lambda x: x.clamp_max(0)), "unsupported-method",
     "0 - F.relu(0 - x)"),
    ("torch.clamp_min(x, 2.0)", _fn(lambda x: torch.clamp_min(x, 2.0)),
     "unsupported-function", "F.relu(x - 2.0) + 2.0"),
    ("torch.clamp_max(x, -1)", _fn(lambda x: torch.clamp_max(x, -1)), "unsupported-function",
     "-1 - F.relu(-1 - x)"),
    ("torch.clip(x, -3, 3)", _fn(lambda x: torch.clip(x, -3, 3)), "unsupported-function",
     "F.relu(x + 3) - 3 - F.relu(x - 3)"),
    ("x.clip(max=1.5)", _fn(lambda x: x.clip(max=1.5)), "unsupported-method",
     "1.5 - F.relu(1.5 - x)"),
    ("x.clamp_(min=0)", _fn(lambda x: (x * 1.0).clamp_(min=0)), "inplace",
     "write F.relu(x), out of place"),
    ("torch.clamp(x, 2, 1)", _fn(lambda x: torch.clamp(x, 2, 1)), "unsupported-function",
     "replace it by that constant"),
]


@pytest.mark.parametrize("spelling, model, code, replacement", HINTS,
                         ids=[row[0] for row in HINTS])
def test_every_clamp_spelling_is_told_what_to_write(spelling, model, code, replacement):
    report = ncet.diagnose(model, (4,))
    (row,) = report.errors
    assert isinstance(row.error, U), row.error
    assert row.code == code, row.message
    assert replacement in row.hint, row.hint
    with pytest.raises(U) as info:
        ncet.convert(model, (4,))
    assert info.value.code == code and replacement in info.value.hint


def test_rounding_hints_say_the_form_is_not_bit_identical():
    """The hint's identity holds in real arithmetic (exact rationals), but not in float32:
    ReLU6 = relu(x) - relu(x - 6) differs at 2**26 + 8 (x - 6 rounds) and at inf (NaN)."""
    (row,) = ncet.diagnose(_module(nn.ReLU6()), (4,)).errors
    assert "not bit-identical" in row.hint and "NaN" in row.hint

    def relu(v):
        return max(v, 0)

    for x in (Fraction(-3), Fraction(0), Fraction(5, 2), Fraction(6), Fraction(13),
              Fraction(2 ** 26 + 8)):
        assert relu(x) - relu(x - 6) == min(max(x, 0), 6)
    x = torch.tensor([2.0 ** 26 + 8, float("inf")])
    form = F.relu(x) - F.relu(x - 6)
    assert torch.equal(F.relu6(x), torch.tensor([6.0, 6.0]))
    assert form[0] != 6 and form[1].isnan()
