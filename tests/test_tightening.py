"""`ncet.tighten` (issue 34): a property's unsafe rows grown by a float margin, rounded up to
a numeral both exact and float64 readers read at or above the exact sum, written and read
back equal. Oracle: exact rationals (fractions.Fraction) on the rows, the points and the
margin; the guarantee is checked on random rows and points (hypothesis) and at the corners of
the deviation box."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ncet
from ncet.properties import Property, read_vnnlib, write_vnnlib
from ncet.properties.rational import fraction
from ncet.regions import Margin
from ncet.regions.tightening import upward_numeral
from tests.corpus import corpus_properties, corpus_root

F = Fraction


def _text(body: str, inputs: int = 1, outputs: int = 2) -> str:
    return ("".join(f"(declare-const X_{i} Real)\n" for i in range(inputs)) +
            "".join(f"(declare-const Y_{j} Real)\n" for j in range(outputs)) +
            "(assert (>= X_0 0))\n(assert (<= X_0 1))\n" * (inputs == 1) + body)


def _rows(prop: Property):
    """(terms as Fractions, b as Fraction, strict) of every row of every case."""
    return [[[(tuple((j, fraction(c)) for j, c in terms), fraction(b), strict)
              for terms, b, strict in p.rows] for p in case.unsafe] for case in prop.cases]


EPS = [2.0 ** -23, 3 * 2.0 ** -30]

# The row as written, eps per output, and the exact b + sum |a_j| eps_j it must reach.
ROWS = [
    ("(assert (<= Y_0 0.5))", F(1, 2) + F(EPS[0]), False),
    ("(assert (>= Y_0 0.5))", -F(1, 2) + F(EPS[0]), False),
    ("(assert (< Y_1 -3))", -3 + F(EPS[1]), True),
    ("(assert (> Y_1 1e-06))", -F(1, 10 ** 6) + F(EPS[1]), True),
    ("(assert (<= Y_0 Y_1))", F(EPS[0]) + F(EPS[1]), False),
    ("(assert (<= (+ (* 2 Y_0) (* -0.5 Y_1)) 0.1))", F(1, 10) + 2 * F(EPS[0]) +
     F(EPS[1]) / 2, False),
    ("(assert (<= (* 3 Y_0) 1))", F(1) + 3 * F(EPS[0]), False),
]


@pytest.mark.parametrize("body, reach, strict", ROWS, ids=[r[0] for r in ROWS])
def test_each_row_grows_by_its_exact_sum_rounded_up_by_at_most_two_ulps(body, reach, strict):
    prop = read_vnnlib(_text(body))
    tight = ncet.tighten(prop, EPS)
    (((terms, b, is_strict),),), = _rows(tight)
    (((old_terms, _, _),),), = _rows(prop)
    assert terms == old_terms and is_strict == strict
    written = tight.cases[0].unsafe[0].rows[0][1]
    assert isinstance(written, str)  # a numeral: written and read exactly as it is
    assert b >= reach and F(float(written)) >= reach  # exact and float64 readers alike
    assert b - reach <= 2 * F(math.ulp(float(reach)))
    assert read_vnnlib(write_vnnlib(tight)) == tight


def test_the_region_is_unchanged_and_a_zero_margin_changes_nothing():
    prop = read_vnnlib(_text("(assert (<= Y_0 0.5))\n(assert (>= Y_1 -1))"))
    tight = ncet.tighten(prop, [0.0, 2.0 ** -20])
    assert tight.cases[0].box is prop.cases[0].box
    assert tight.cases[0].unsafe[0].rows[0] == prop.cases[0].unsafe[0].rows[0]  # as written
    assert tight.cases[0].unsafe[0].rows[1] != prop.cases[0].unsafe[0].rows[1]
    assert ncet.tighten(prop, [0.0, 0.0]) == prop


def test_a_margin_record_is_taken_as_its_eps():
    prop = read_vnnlib(_text("(assert (<= Y_0 0.5))"))
    margin = Margin(eps=torch.tensor(EPS, dtype=torch.float64),
                    lower=torch.zeros(2, dtype=torch.float64),
                    upper=torch.ones(2, dtype=torch.float64))
    assert ncet.tighten(prop, margin) == ncet.tighten(prop, EPS)


def test_per_box_unsafe_sets_are_grown_box_by_box():
    body = ("(assert (or (and (>= X_0 0) (<= X_0 1) (<= Y_0 5))\n"
            "            (and (>= X_0 1) (<= X_0 2) (>= Y_1 7) (< Y_0 Y_1))))")
    prop = read_vnnlib(_text(body, inputs=1, outputs=2).replace(
        "(assert (>= X_0 0))\n(assert (<= X_0 1))\n", ""))
    assert not prop.separable and len(prop.cases) == 2
    tight = ncet.tighten(prop, EPS)
    assert not tight.separable
    rows = _rows(tight)
    assert rows[0][0][0][1] >= 5 + F(EPS[0])
    assert rows[1][0][0][1] >= -7 + F(EPS[1])
    assert rows[1][0][1][1] >= F(EPS[0]) + F(EPS[1]) and rows[1][0][1][2] is True
    assert [c.box for c in tight.cases] == [c.box for c in prop.cases]
    assert read_vnnlib(write_vnnlib(tight)) == tight


def test_a_coefficient_without_a_terminating_decimal_is_scaled_so_the_file_reads_back():
    prop = Property.from_cases([((["0"], ["1"]), [([[F(1, 3), F(-2, 7)]], ["0.25"])])], 2)
    tight = ncet.tighten(prop, EPS)
    (((terms, b, _),),), = _rows(tight)
    assert terms == ((0, F(7)), (1, F(-6)))  # 21 times the row: the same half-space
    assert b >= 21 * F(1, 4) + 7 * F(EPS[0]) + 6 * F(EPS[1])
    assert read_vnnlib(write_vnnlib(tight)) == tight


BAD_MARGINS = [
    ([1e-7], ValueError, "the margin has 1 outputs and the property 2"),
    ([1e-7] * 3, ValueError, "the margin has 3 outputs and the property 2"),
    ([1e-7, -1e-7], ValueError, "eps of Y_1 is -1e-07"),
    ([float("nan"), 0.0], ValueError, "eps of Y_0 is nan"),
    ([0.0, float("inf")], ValueError, "eps of Y_1 is inf"),
    ([1e308, 1e308], ValueError, "beyond the largest float64"),
    ("eps", TypeError, "tighten takes a Margin"),
]


@pytest.mark.parametrize("margin, kind, words", BAD_MARGINS,
                         ids=[w for _, _, w in BAD_MARGINS])
def test_a_margin_that_does_not_fit_is_refused_saying_why(margin, kind, words):
    prop = read_vnnlib(_text("(assert (<= (+ Y_0 Y_1) 1e308))"))
    with pytest.raises(kind, match=words.replace("(", r"\(")):
        ncet.tighten(prop, margin)


def test_a_property_is_required():
    with pytest.raises(TypeError, match="takes a Property"):
        ncet.tighten("prop.vnnlib", EPS)


# --- the guarantee, on random rows and points ------------------------------------------------

_COEFF = st.one_of(st.integers(-5, 5).map(F),
                   st.fractions(min_value=-8, max_value=8, max_denominator=64),
                   st.decimals(-10, 10, places=3, allow_nan=False).map(
                       lambda d: F(*d.as_integer_ratio())))
_FLOAT = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)
_EPS = st.one_of(st.just(0.0), st.floats(0, 1e-2, allow_nan=False),
                 st.integers(-40, -10).map(lambda k: 2.0 ** k))
_UNIT = st.one_of(st.sampled_from([F(-1), F(0), F(1)]),
                  st.fractions(min_value=-1, max_value=1, max_denominator=1000))


@st.composite
def _case(draw):
    m = draw(st.integers(1, 4))
    coefficients = draw(st.lists(_COEFF, min_size=m, max_size=m).filter(any))  # a row of
    # no terms (0 <= b) is a constant the reader decides, not a row it keeps
    y_float = draw(st.lists(_FLOAT, min_size=m, max_size=m))
    eps = draw(st.lists(_EPS, min_size=m, max_size=m))
    units = draw(st.lists(_UNIT, min_size=m, max_size=m))
    strict = draw(st.booleans())
    # b at or above a . y_float: y_float is in the row (on its boundary when slack is 0)
    slack = draw(st.sampled_from([F(0), F(1, 10 ** 6), F(1, 3)]))
    if strict and slack == 0:
        slack = F(1, 2 ** 30)
    b = sum((c * F(y) for c, y in zip(coefficients, y_float)), F(0)) + slack
    return m, coefficients, y_float, eps, units, strict, b


def _property(m, coefficients, b, strict) -> Property:
    prop = Property.from_cases([((["0"], ["1"]), [([coefficients], [b])])], m)
    if strict:  # from_cases makes rows non-strict; the same row, strict
        case = prop.cases[0]
        (terms, value, _), = case.unsafe[0].rows
        from ncet.properties import Case, Polytope
        prop = Property(1, m, (Case(case.box, (Polytope(((terms, value, True),)),)),))
    return prop


@settings(max_examples=max(50, settings.default.max_examples))
@given(_case())
def test_an_exact_output_near_an_unsafe_float_output_is_in_the_tightened_set(case):
    m, coefficients, y_float, eps, units, strict, b = case
    prop = _property(m, coefficients, b, strict)
    y_float_exact = [F(y) for y in y_float]
    assert prop.violated_by([0], y_float_exact)  # the float output is unsafe
    # the exact output anywhere within eps of it: a random point and the worst corner
    y_exact = [y + u * F(e) for y, u, e in zip(y_float_exact, units, eps)]
    corner = [y + (1 if c > 0 else -1) * F(e) for y, c, e in zip(y_float_exact, coefficients,
                                                                   eps)]
    tight = ncet.tighten(prop, eps)
    assert tight.cases[0].unsafe[0].strict == (strict,)
    assert tight.violated_by([0], y_exact)
    assert tight.violated_by([0], corner)
    assert read_vnnlib(write_vnnlib(tight)) == tight


@settings(max_examples=max(50, settings.default.max_examples))
@given(st.fractions(min_value=-1e300, max_value=1e300))
def test_the_upward_numeral_is_at_or_above_the_value_read_either_way(value):
    text = upward_numeral(value)
    assert F(Decimal(text)) >= value and F(float(text)) >= value
    assert F(Decimal(text)) - value <= 2 * F(math.ulp(float(text)))


def test_the_upward_numeral_of_a_float_is_its_shortest_repr():
    assert upward_numeral(F(1, 10)) == "0.1"  # the float 0.1 is above 1/10
    assert upward_numeral(F(0.1)) == "0.10000000000000002"  # "0.1" reads as 1/10, below
    assert upward_numeral(F(-1, 10)) == "-0.09999999999999999"  # float("-0.1") < -1/10


# --- the corpus ----------------------------------------------------------------------------

def _one_per_benchmark() -> list[str]:
    seen: dict[str, str] = {}
    for name in corpus_properties():
        seen.setdefault(name.split("/")[0], name)
    return sorted(seen.values())


@pytest.mark.parametrize("name", _one_per_benchmark())
def test_a_tightened_corpus_property_writes_and_reads_back_equal(name):
    prop = read_vnnlib(corpus_root() / name)
    rng = np.random.default_rng(0)
    eps = rng.random(prop.num_outputs) * 1e-5
    tight = ncet.tighten(prop, eps)
    assert read_vnnlib(write_vnnlib(tight)) == tight
    assert [c.box for c in tight.cases] == [c.box for c in prop.cases]
    assert tight.separable == prop.separable
    exact_eps = [F(float(e)) for e in eps]
    for old, new in zip(prop.cases, tight.cases):
        for p, q in zip(old.unsafe, new.unsafe):
            for (terms, b, strict), (_, b2, strict2) in zip(p.rows, q.rows):
                growth = sum((abs(fraction(c)) * exact_eps[j] for j, c in terms), F(0))
                assert strict2 == strict and fraction(b2) >= fraction(b) + growth
