"""VNN-LIB properties (issue 33, first part): read_vnnlib / write_vnnlib over the VNN-COMP
corpus and constructed texts. Oracles: constants read by hand from the files, exact rational
comparisons (fractions.Fraction), the networks' own input/output sizes (onnx)."""

from __future__ import annotations

import csv
import gzip
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ncet
from ncet.properties import VNNLIB_REASONS, Property, VNNLIBError, read_vnnlib, write_vnnlib
from tests.corpus import corpus_properties, corpus_root

F = Fraction
DECLARE_XY = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"


def _text(body: str, inputs: int = 1, outputs: int = 1) -> str:
    return ("".join(f"(declare-const X_{i} Real)\n" for i in range(inputs)) +
            "".join(f"(declare-const Y_{j} Real)\n" for j in range(outputs)) + body)


# --- the corpus ---------------------------------------------------------------------------

def test_the_corpus_has_130_properties():
    corpus_root()
    assert len(corpus_properties()) == 130


@pytest.mark.parametrize("name", corpus_properties())
def test_every_corpus_property_reads_and_round_trips(name):
    path = corpus_root() / name
    prop = read_vnnlib(path)
    assert prop.num_inputs > 0 and prop.num_outputs > 0 and prop.cases
    for lower, upper in prop.input_boxes:
        assert len(lower) == len(upper) == prop.num_inputs
        assert all(isinstance(v, Fraction) for v in lower)
        assert all(lo <= hi for lo, hi in zip(lower, upper))
    text = write_vnnlib(prop)
    again = read_vnnlib(text)
    assert again == prop  # the same normal form, the same exact constants
    for (l1, u1), (l2, u2) in zip(prop.input_boxes, again.input_boxes):
        assert (l1 == l2).all() and (u1 == u2).all()
    if prop.separable:
        for (a1, b1), (a2, b2) in zip(prop.unsafe, again.unsafe):
            assert (a1 == a2).all() and (b1 == b2).all()
    assert read_vnnlib(write_vnnlib(again)) == prop


def _instances() -> list[tuple[str, str, str]]:
    """(benchmark folder, onnx, vnnlib) of every corpus instance, paths relative to the
    corpus."""
    root = corpus_root()
    rows = []
    for listing in sorted(root.glob("*/instances_included.csv")):
        with open(listing) as f:
            for row in csv.reader(line for line in f if not line.startswith("#")):
                if len(row) >= 2:
                    folder = listing.parent
                    rows.append((folder.name, str((folder / row[0].strip()).relative_to(root)),
                                 str((folder / row[1].strip()).relative_to(root))))
    return rows


def _flat_size(value_info) -> int:
    # a symbolic or zero dimension (the batch) counts 1, as the competition's scripts count it
    return math.prod(d.dim_value or 1 for d in value_info.type.tensor_type.shape.dim)


def test_sizes_agree_with_the_networks():
    onnx = pytest.importorskip("onnx")
    root = corpus_root()
    instances = _instances()
    assert len({v for _, _, v in instances}) >= 100
    sizes, checked = {}, 0
    for _, network, prop_path in instances:
        if not (root / network).exists():  # files >= 4 MiB are not in the corpus
            continue
        if network not in sizes:
            model = onnx.load(root / network, load_external_data=False)
            initializers = {t.name for t in model.graph.initializer}
            (inp,) = [i for i in model.graph.input if i.name not in initializers]
            (out,) = model.graph.output
            sizes[network] = _flat_size(inp), _flat_size(out)
        prop = read_vnnlib(root / prop_path)
        assert (prop.num_inputs, prop.num_outputs) == sizes[network], (network, prop_path)
        checked += 1
    assert checked >= 100


# --- constants read by hand from the files ----------------------------------------------

def test_acasxu_property_1_as_written():
    prop = read_vnnlib(corpus_root() / "acasxu/vnnlib/prop_1.vnnlib")
    (lower, upper), = prop.input_boxes
    assert list(lower) == [F(6, 10), F(-5, 10), F(-5, 10), F(45, 100), F(-5, 10)]
    assert list(upper) == [F(679857769, 10 ** 9), F(1, 2), F(1, 2), F(1, 2), F(-45, 100)]
    (a, b), = prop.unsafe  # (>= Y_0 3.991125645861615): -Y_0 <= -3.991...
    assert a.tolist() == [[-1, 0, 0, 0, 0]]
    assert b.tolist() == [F(-3991125645861615, 10 ** 15)]
    assert prop.separable and not prop.strict


def test_mnist_fc_bounds_are_the_decimals_not_their_floats():
    prop = read_vnnlib(corpus_root() / "mnist_fc/vnnlib/prop_0_0.03.vnnlib")
    assert (prop.num_inputs, prop.num_outputs) == (784, 10)
    (lower, upper), = prop.input_boxes
    assert upper[0] == upper[783] == F(29999999329447746, 10 ** 18)
    assert upper[0] != F(0.029999999329447746)  # the float64 is another number
    assert lower[0] == 0


def test_lsnc_top_level_row_joins_every_disjunct():
    # 13 disjuncts in an `or`, then (assert (<= Y_1 1.3392)): each polytope is both, its
    # rows in the order of the file
    prop = read_vnnlib(corpus_root() / "lsnc/vnnlib/quadrotor2d_state_0.vnnlib")
    assert (prop.num_inputs, prop.num_outputs) == (6, 8)
    assert len(prop.unsafe) == 13
    for a, b in prop.unsafe:
        assert a.shape == (2, 8)
        assert a[1].tolist() == [0, 1, 0, 0, 0, 0, 0, 0] and b[1] == F(13392, 10000)
    a, b = prop.unsafe[0]  # (and (<= Y_0 -1e-06))
    assert a[0].tolist() == [1, 0, 0, 0, 0, 0, 0, 0] and b[0] == F(-1, 10 ** 6)
    a, b = prop.unsafe[2]  # (and (>= Y_2 0.7500010132789612))
    assert a[0, 2] == -1 and b[0] == -F(7500010132789612, 10 ** 16)
    (lower, upper), = prop.input_boxes
    assert lower[0] == F(-41154518723487854, 10 ** 17) and upper[5] == F(2091320514678955,
                                                                            10 ** 15)


def test_acasxu_property_6_two_boxes_share_the_unsafe_set():
    prop = read_vnnlib(corpus_root() / "acasxu/vnnlib/prop_6.vnnlib")
    assert len(prop.input_boxes) == 2 and prop.separable
    (l0, u0), (l1, u1) = prop.input_boxes
    assert (l0[1], u0[1]) == (F(11140846, 10 ** 8), F(499999896, 10 ** 9))
    assert (l1[1], u1[1]) == (F(-499999896, 10 ** 9), F(-11140846, 10 ** 8))
    assert [a.tolist() for a, _ in prop.unsafe] == [
        [[-1, 1, 0, 0, 0]], [[-1, 0, 1, 0, 0]], [[-1, 0, 0, 1, 0]], [[-1, 0, 0, 0, 1]]]
    assert all(b.tolist() == [0] for _, b in prop.unsafe)


def test_nn4sys_lindex_has_an_unsafe_set_per_box():
    prop = read_vnnlib(corpus_root() / "nn4sys/vnnlib/lindex_200.vnnlib")
    assert len(prop.cases) == 200 and not prop.separable
    assert all(len(case.unsafe) == 2 for case in prop.cases)
    assert len(prop.input_boxes) == 200
    with pytest.raises(VNNLIBError) as error:
        prop.unsafe  # noqa: B018
    assert error.value.code == "vnnlib-unsafe-per-box"
    first = read_vnnlib(corpus_root() / "nn4sys/vnnlib/lindex_1.vnnlib")
    (lower, upper), = first.input_boxes
    assert (lower[0], upper[0]) == (F("0.0012412108480930"), F("0.0012412895448506"))
    assert [b.tolist() for _, b in first.unsafe] == [[F("0.2328912677061364")],
                                                    [F("-0.2356499074208930")]]


def test_alpha_beta_crowns_reader_reads_what_the_float64_views_say(tmp_path):
    # an independent parser (alpha-beta-CROWN's read_vnnlib, derived from the competition's,
    # vendored in benchmarks/third_party) on every corpus file below 300 kB: the same cases,
    # the same (A, b) of every disjunct in the same order, bit for bit, and the same boxes
    # after the one thing it does to them: each bound recomputed as mean -+ half-width
    import contextlib
    import io
    import shutil

    from benchmarks.vnnlib_read import abcrown_reader

    read_theirs = abcrown_reader()
    root, compared, moved = corpus_root(), 0, 0
    for name in corpus_properties():
        if (root / name).stat().st_size > 300_000:
            continue
        copy = tmp_path / Path(name).name  # it leaves a .compiled cache beside the file
        shutil.copyfile(root / name, copy)
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = read_theirs(str(copy))
        ours = read_vnnlib(root / name).reachability()
        assert len(ours) == len(theirs), name
        for (box, polytopes), (their_box, their_polytopes) in zip(ours, theirs):
            box, their_box = np.asarray(box), np.asarray(their_box)
            mean, half = (box[:, 0] + box[:, 1]) / 2, (box[:, 1] - box[:, 0]) / 2
            assert np.array_equal(their_box[:, 0], mean - half), name
            assert np.array_equal(their_box[:, 1], mean + half), name
            moved += int((box != their_box).sum())
            assert len(polytopes) == len(their_polytopes), name
            for (a, b), (their_a, their_b) in zip(polytopes, their_polytopes):
                assert np.array_equal(a, their_a) and np.array_equal(b, their_b), name
        compared += 1
    assert compared >= 90 and moved > 0  # the recomputation moves some bounds by an ulp


# --- exact constants, float views --------------------------------------------------------

def test_a_bound_written_0_1_is_one_tenth():
    prop = read_vnnlib(_text("(assert (<= X_0 0.1))(assert (>= X_0 -1e-3))"
                             "(assert (<= Y_0 -0.0))"))
    (lower, upper), = prop.input_boxes
    assert upper[0] == F(1, 10) and upper[0] != F(0.1)
    assert lower[0] == F(-1, 1000)
    assert prop.unsafe[0][1][0] == 0


def _next32(f, up: bool) -> np.float32:
    return np.nextafter(np.float32(f), np.float32(np.inf if up else -np.inf))


TRICKY = ["0.1", "-0.1", "0", "-0.0", "0.5", "1e-50", "-1e-50", "3.4028235e38", "1e39",
          "-1e39", "16777217", "0.029999999329447746", "1.000000059604644775390625",
          "1.0000000596046447753906250000001", "0.99999997019767761230468749999",
          "1.401298464324817e-45", "7e-46", "123456789.123456789"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_views_round_outward_inward_and_to_nearest(dtype):
    body = "".join(f"(assert (<= X_{i} {t}))(assert (>= X_{i} {t}))"
                   for i, t in enumerate(TRICKY))
    prop = read_vnnlib(_text(body, inputs=len(TRICKY)))
    exact = [F(t) for t in TRICKY]
    (low_out, high_out), = prop.input_boxes_as(dtype)  # default: outward
    (low_in, high_in), = prop.input_boxes_as(dtype, rounding="inward")
    (near, near_too), = prop.input_boxes_as(dtype, rounding="nearest")
    assert low_out.dtype == dtype and high_out.dtype == dtype
    info = np.finfo(dtype)
    for k, x in enumerate(exact):
        down, up = low_out[k], high_out[k]
        # down <= x <= up, and no float of dtype lies strictly between them and x
        assert (F(float(down)) <= x) if np.isfinite(down) else down < 0
        assert (x <= F(float(up))) if np.isfinite(up) else up > 0
        if np.isfinite(down) and down < info.max:
            assert F(float(np.nextafter(down, dtype(np.inf)))) > x
        if np.isfinite(up) and up > -info.max:
            assert F(float(np.nextafter(up, dtype(-np.inf)))) < x
        assert low_in[k] == up and high_in[k] == down  # inward: lower up, upper down
        assert near[k] == near_too[k]
        assert near[k] in (down, up)
        if np.isfinite(down) and np.isfinite(up) and down != up:
            gap_down, gap_up = x - F(float(down)), F(float(up)) - x
            other = up if near[k] == down else down
            assert abs(F(float(near[k])) - x) <= abs(F(float(other)) - x), TRICKY[k]
            assert gap_down != gap_up or int(np.array(near[k]).view(
                np.uint32 if dtype == np.float32 else np.uint64)) % 2 == 0


def test_float32_nearest_is_not_the_float32_of_the_float64():
    # just above the midpoint of 1 and 1 + 2**-23: float64 rounds it onto the midpoint,
    # whose float32 (ties to even) is 1.0; the nearest float32 is 1 + 2**-23
    prop = read_vnnlib(_text("(assert (<= X_0 1.0000000596046447753906250000001))"
                             "(assert (>= X_0 0))"))
    (_, upper), = prop.input_boxes_as(np.float32, rounding="nearest")
    assert np.float32(np.float64("1.0000000596046447753906250000001")) == 1.0
    assert upper[0] == np.float32(1 + 2 ** -23)


def test_unsafe_float_view_rounds_b_up():
    prop = read_vnnlib(_text("(assert (<= X_0 1))(assert (>= X_0 0))"
                             "(assert (<= Y_0 0.1))(assert (>= Y_1 0.1))", outputs=2))
    (a, b), = prop.unsafe_as(np.float32)
    assert a.tolist() == [[1, 0], [0, -1]]
    assert F(float(b[0])) >= F(1, 10) and F(float(_next32(b[0], False))) < F(1, 10)
    assert F(float(b[1])) >= F(-1, 10) and F(float(_next32(b[1], False))) < F(-1, 10)
    (_, b_in), = prop.unsafe_as(np.float32, rounding="inward")
    assert F(float(b_in[0])) <= F(1, 10)
    # what the competition's parser reads: float64 nearest
    (box, polytopes), = prop.reachability()
    assert box == [[0.0, 1.0]] and polytopes[0][1].tolist() == [0.1, -0.1]


# --- the language -------------------------------------------------------------------------

def test_linear_terms_sums_products_and_equalities():
    prop = read_vnnlib(_text(
        "(assert (>= (* 2 X_0) 1))(assert (<= X_0 (- 0.75)))"
        "(assert (= X_1 0.25))"
        "(assert (<= (+ Y_0 (* 2 Y_1) (- Y_2) (* Y_1 0.5 2)) (- 1 0.5)))"
        "(assert (>= (- Y_0 Y_1) 0))",
        inputs=2, outputs=3))
    (lower, upper), = prop.input_boxes
    assert lower.tolist() == [F(1, 2), F(1, 4)] and upper.tolist() == [F(-3, 4), F(1, 4)]
    (a, b), = prop.unsafe
    assert a.tolist() == [[1, 3, -1], [-1, 1, 0]] and b.tolist() == [F(1, 2), 0]


def test_comments_blank_lines_and_ignored_commands():
    prop = read_vnnlib("; a comment (with a paren\n" + _text(
        "(assert ; inline\n (<= X_0 1)) ; trailing )\n(assert (>= X_0 0))\n"
        "(check-sat)\n(exit)\n"))
    assert prop.input_boxes[0][1].tolist() == [1]


def test_the_tightest_bound_wins_and_constants_are_decided():
    prop = read_vnnlib(_text("(assert (<= X_0 1))(assert (<= X_0 0.5))(assert (>= X_0 0))"
                             "(assert (>= X_0 -1))(assert (<= 1 2))(assert (<= Y_0 3))"))
    (lower, upper), = prop.input_boxes
    assert (lower[0], upper[0]) == (0, F(1, 2))
    assert len(prop.unsafe) == 1
    never = read_vnnlib(_text("(assert (<= X_0 1))(assert (>= X_0 0))(assert (<= 2 1))"))
    assert never.cases == ()


def test_strict_inequalities_are_flagged_and_written_back():
    prop = read_vnnlib(_text("(assert (< X_0 1))(assert (>= X_0 0))(assert (> Y_0 Y_1))"
                             "(assert (<= Y_0 2))", outputs=2))
    assert prop.strict
    box = prop.cases[0].box
    assert box.strict_upper == {0} and box.strict_lower == frozenset()
    assert prop.cases[0].unsafe[0].strict == (True, False)
    text = write_vnnlib(prop)
    assert "(< X_0 1)" in text and "(< Y_1 Y_0)" in text
    again = read_vnnlib(text)
    assert again == prop and again.cases[0].unsafe[0].strict == (True, False)
    # the float views are of the closure
    (lower, upper), = prop.input_boxes_as()
    assert upper.tolist() == [1.0]
    # a strict and a non-strict bound of one value: the strict one
    both = read_vnnlib(_text("(assert (<= X_0 1))(assert (< X_0 1))(assert (>= X_0 0))"))
    assert both.cases[0].box.strict_upper == {0}
    assert prop != read_vnnlib(_text("(assert (<= X_0 1))(assert (>= X_0 0))"
                                     "(assert (>= Y_0 Y_1))(assert (<= Y_0 2))", outputs=2))


def test_paths_texts_bytes_and_gzip(tmp_path):
    text = _text("(assert (<= X_0 1))(assert (>= X_0 0))")
    (tmp_path / "p.vnnlib").write_text(text)
    (tmp_path / "p.vnnlib.gz").write_bytes(gzip.compress(text.encode()))
    expected = read_vnnlib(text)
    for source in (tmp_path / "p.vnnlib", str(tmp_path / "p.vnnlib"),
                  tmp_path / "p.vnnlib.gz", text.encode()):
        assert read_vnnlib(source) == expected
    assert read_vnnlib(tmp_path / "p.vnnlib").source == str(tmp_path / "p.vnnlib")
    with pytest.raises(VNNLIBError) as error:
        read_vnnlib(tmp_path / "missing.vnnlib")
    assert error.value.code == "vnnlib-unreadable"
    with pytest.raises(VNNLIBError) as error:
        read_vnnlib(b"\xff(")
    assert error.value.code == "vnnlib-unreadable"
    with pytest.raises(TypeError):
        read_vnnlib(3)


# --- malformed files: the error class, its code, line, column and token ------------------

DEEP = "(assert " + "(and " * 120 + "(<= X_0 1)" + ")" * 120 + ")"
MANY = "".join(f"(assert (or (<= Y_0 {k}) (<= Y_0 {k + 1})))\n" for k in range(20))

MALFORMED = [
    # name, text, code, line, column, token
    ("unclosed", "(declare-const X_0 Real)\n(assert (<= X_0 1)", "vnnlib-unbalanced", 2, 1,
     "("),
    ("closes nothing", "(declare-const X_0 Real))", "vnnlib-unbalanced", 1, 25, ")"),
    ("undeclared", "(declare-const X_0 Real)\n(assert (<= X_1 1))", "vnnlib-undeclared", 2, 13,
     "X_1"),
    ("unknown symbol", DECLARE_XY + "(assert (<= X_0 one))", "vnnlib-undeclared", 3, 17,
     "one"),
    ("undeclared in a disjunct", DECLARE_XY + "(assert (<= X_0 1))(assert (>= X_0 0))\n"
     "(assert (or (<= Y_0 1) (<= Y_0 b)))", "vnnlib-undeclared", 4, 32, "b"),
    ("comparison as a term", DECLARE_XY + "(assert (<= (+ (<= Y_0 1) 2) 1))",
     "vnnlib-unknown-operator", 3, 17, "<="),
    ("commented assert", DECLARE_XY + "(assert ; why\n (<= X_0 1.2.3))", "vnnlib-bad-number", 4,
     10, "1.2.3"),
    ("unknown comparison", DECLARE_XY + "(assert (<== X_0 1))", "vnnlib-unknown-operator", 3,
     10, "<=="),
    ("not", DECLARE_XY + "(assert (not (<= X_0 1)))", "vnnlib-unknown-operator", 3, 10, "not"),
    ("unknown term operator", DECLARE_XY + "(assert (<= (/ Y_0 2) 1))",
     "vnnlib-unknown-operator", 3, 14, "/"),
    ("two points", DECLARE_XY + "(assert (<= X_0 0.5.1))", "vnnlib-bad-number", 3, 17,
     "0.5.1"),
    ("inf", DECLARE_XY + "(assert (<= X_0 inf))", "vnnlib-bad-number", 3, 17, "inf"),
    ("huge exponent", DECLARE_XY + "(assert (<= X_0 1e99999))", "vnnlib-bad-number", 3, 17,
     "1e99999"),
    ("too many digits", DECLARE_XY + "(assert (<= X_0 " + "1" * 5000 + "))",
     "vnnlib-bad-number", 3, 17, "1" * 5000),
    ("no inputs", "(declare-const Y_0 Real)\n(assert (<= Y_0 1))", "vnnlib-no-inputs", 1, 1,
     "("),
    ("index gap", "(declare-const X_0 Real)\n(declare-const X_2 Real)", "vnnlib-index-gap",
     2, 16, "X_2"),
    ("output gap", "(declare-const X_0 Real)\n(declare-const Y_1 Real)", "vnnlib-index-gap",
     2, 16, "Y_1"),
    ("nonlinear", DECLARE_XY + "(declare-const Y_1 Real)\n(assert (<= (* Y_0 Y_1) 1))",
     "vnnlib-nonlinear", 4, 14, "*"),
    ("mixed", DECLARE_XY + "(assert (<= X_0 Y_0))", "vnnlib-mixed-constraint", 3, 10, "<="),
    ("not a box", "(declare-const X_0 Real)\n(declare-const X_1 Real)\n"
     "(assert (<= X_0 X_1))", "vnnlib-input-not-box", 3, 10, "<="),
    ("unbounded", DECLARE_XY + "(assert (<= X_0 1))", "vnnlib-unbounded-input", 1, 16, "X_0"),
    ("unbounded in a disjunct", DECLARE_XY + "(assert (>= X_0 0))\n"
     "(assert (or (<= X_0 1) (<= Y_0 1)))", "vnnlib-unbounded-input", 1, 16, "X_0"),
    ("bad name", "(declare-const Z Real)", "vnnlib-bad-declaration", 1, 16, "Z"),
    ("leading zero", "(declare-const X_01 Real)", "vnnlib-bad-declaration", 1, 16, "X_01"),
    ("unicode digit in a name", "(declare-const X_\u0661 Real)", "vnnlib-bad-declaration", 1,
     16, "X_\u0661"),
    ("unicode digit in a number", DECLARE_XY + "(assert (<= X_0 \u0663))",
     "vnnlib-undeclared", 3, 17, "\u0663"),
    ("bad sort", "(declare-const X_0 Int)", "vnnlib-bad-declaration", 1, 20, "Int"),
    ("twice", "(declare-const X_0 Real)\n(declare-const X_0 Real)", "vnnlib-bad-declaration",
     2, 16, "X_0"),
    ("unknown command", "(define-fun f () Real 1)", "vnnlib-unknown-command", 1, 2,
     "define-fun"),
    ("bare word", DECLARE_XY + "X_0", "vnnlib-unexpected-token", 3, 1, "X_0"),
    ("one term", DECLARE_XY + "(assert (<= X_0))", "vnnlib-arity", 3, 10, "<="),
    ("three terms", DECLARE_XY + "(assert (<= X_0 1 2))", "vnnlib-arity", 3, 10, "<="),
    ("two formulas", DECLARE_XY + "(assert (<= X_0 1) (<= X_0 2))", "vnnlib-arity", 3, 2,
     "assert"),
    ("too deep", DECLARE_XY + DEEP, "vnnlib-too-deep", 3, 1 + len("(assert ") + 5 * 99, "("),
    ("too many disjuncts", DECLARE_XY + "(assert (<= X_0 1))(assert (>= X_0 0))\n" + MANY,
     "vnnlib-too-many-disjuncts", 20, 10, "or"),
    ("too many boxes", _text("(assert (<= X_0 1))(assert (>= X_0 0))\n" + "".join(
        f"(assert (or (<= X_{k} 1) (<= X_{k} 2)))\n" for k in range(1, 12)) +
        "".join(f"(assert (<= X_{k} 3))(assert (>= X_{k} 0))" for k in range(1, 15000)),
        inputs=15000, outputs=1), "vnnlib-too-many-disjuncts", 15013, 10, "or"),
]


@pytest.mark.parametrize("name,text,code,line,column,token", MALFORMED,
                         ids=[row[0] for row in MALFORMED])
def test_malformed_files_name_the_line_column_and_token(name, text, code, line, column,
                                                        token):
    with pytest.raises(VNNLIBError) as caught:
        ncet.read_vnnlib(text)
    error = caught.value
    assert isinstance(error, ncet.NCETError) and isinstance(error, ValueError)
    assert (error.code, error.line, error.column, error.token) == (code, line, column, token)
    assert error.code in VNNLIB_REASONS
    assert f"<text>:{line}:{column}:" in str(error) and f"[{code}]" in str(error)


def test_every_reason_code_is_tested():
    tested = {row[2] for row in MALFORMED} | {row[2] for row in V2_ERRORS} | {
        "vnnlib-unsafe-per-box", "vnnlib-unreadable", "vnnlib-2-unavailable"}
    assert set(VNNLIB_REASONS) == tested


def test_a_file_error_names_the_path(tmp_path):
    path = tmp_path / "bad.vnnlib"
    path.write_text("(declare-const X_0 Real)\n\n   (assert (<= X_0 nope))\n")
    with pytest.raises(VNNLIBError) as caught:
        read_vnnlib(path)
    assert str(caught.value).startswith(f"{path}:3:20: ")
    assert caught.value.source == str(path)


# --- writing ----------------------------------------------------------------------------

def test_writing_rounds_non_terminating_constants_outward(tmp_path):
    third = F(1, 3)
    prop = Property.from_cases([(([third, F(-2, 3)], [F(2, 3), F(1, 7)]),
                                 [([[1, 0]], [third]), ([[F(1, 3), F(-1, 6)]], [F(1, 5)])])],
                               num_outputs=2)
    text = write_vnnlib(prop, tmp_path / "out.vnnlib")
    assert (tmp_path / "out.vnnlib").read_text() == text
    assert "rounded outward" in text
    back = read_vnnlib(text)
    (lower, upper), = back.input_boxes
    assert lower[0] <= third and lower[1] <= F(-2, 3)  # lower bounds down
    assert upper[0] >= F(2, 3) and upper[1] >= F(1, 7)  # upper bounds up
    assert all(abs(b - x) < F(1, 10 ** 19) for b, x in zip(
        [*lower, *upper], [third, F(-2, 3), F(2, 3), F(1, 7)]))
    (a1, b1), (a2, b2) = back.unsafe
    assert a1.tolist() == [[1, 0]] and b1[0] >= third
    # 1/3 Y_0 - 1/6 Y_1 <= 1/5 is written times 6: 2 Y_0 - Y_1 <= 6/5, exactly
    assert a2.tolist() == [[2, -1]] and b2.tolist() == [F(6, 5)]


def test_written_properties_read_back_equal():
    prop = Property.from_region([(["0", "-0.5"], ["1e-3", F(1, 4)]),
                                 ([0.1, 0], [0.5, 1])],
                                [([[1, -1]], [0]), ([[0, 1]], ["2.5"])], num_outputs=2)
    assert prop.input_boxes[1][0][0] == F(0.1)  # a float's exact binary value
    text = write_vnnlib(prop)
    assert "(<= X_0 1e-3)" in text  # a numeral is written as it was given
    assert read_vnnlib(text) == prop


def test_a_source_name_with_a_line_break_stays_in_its_comment(tmp_path):
    path = tmp_path / "a\n(assert (<= X_0 0.5))\n.vnnlib"  # would tighten the box
    path.write_text(_text("(assert (<= X_0 1))(assert (>= X_0 0))"))
    prop = read_vnnlib(path)
    text = write_vnnlib(prop)
    assert text.splitlines()[0].startswith("; written by ncet.write_vnnlib from a\\x0a(assert")
    assert read_vnnlib(text) == prop


def test_write_refuses_what_is_not_a_property():
    with pytest.raises(TypeError):
        write_vnnlib("(assert)")


# --- the package ------------------------------------------------------------------------

def test_import_ncet_imports_neither_onnx_nor_the_vnnlib_package():
    code = ("import sys, ncet; ncet.read_vnnlib('(declare-const X_0 Real)(assert (<= X_0 1))"
            "(assert (>= X_0 0))'); print('onnx' in sys.modules, 'vnnlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(ncet.__file__).parent.parent)
    assert out.stdout.split() == ["False", "False"]


# --- VNN-LIB 2.0, through the standard's own parser (the vnnlib package) -----------------

V2_HEAD = """(vnnlib-version <2.0>)
(declare-network net
  (declare-input X float32 [1, 2, 3])
  (declare-output Y float32 [2])
)
"""
V2_BOXES = "".join(f"(assert (<= X[0,{i // 3},{i % 3}] 0.{i + 1}))\n"
                   f"(assert (>= X[0,{i // 3},{i % 3}] -0.{i + 1}))\n" for i in range(6))


def test_version_2_reads_into_the_same_property_as_its_1_0_form():
    pytest.importorskip("vnnlib", reason="the vnnlib package reads VNN-LIB 2.0")
    prop = read_vnnlib(V2_HEAD + V2_BOXES + "(assert (or (<= (- Y[0] Y[1]) (- 3.0))\n"
                       "  (and (<= (- Y[0]) 1.0) (> Y[1] 0.5))))\n")
    (lower, upper), = prop.input_boxes  # X[0,i,j] is X_(3i+j), row-major
    assert upper.tolist() == [F(k, 10) for k in range(1, 7)]
    assert lower.tolist() == [F(-k, 10) for k in range(1, 7)]
    one = read_vnnlib(_text("".join(f"(assert (<= X_{i} 0.{i + 1}))(assert (>= X_{i} -0.{i + 1}))"
                                    for i in range(6)) +
                            "(assert (or (<= (- Y_0 Y_1) (- 3.0)) (and (<= (- Y_0) 1.0) "
                            "(> Y_1 0.5))))", inputs=6, outputs=2))
    assert prop == one and prop.strict
    assert [a.tolist() for a, _ in prop.unsafe] == [[[1, -1]], [[-1, 0], [0, -1]]]


V2_ERRORS = [
    ("input not a box", "(assert (<= (+ X[0,0,0] X[0,0,1]) 1.0))", "vnnlib-input-not-box", 18),
    ("undeclared", "(assert (<= X[0,0,0] Z))", "vnnlib-2-invalid", 18),
    ("int where float32", "(assert (<= X[0,0,0] 1))", "vnnlib-2-invalid", 18),
    ("not equal", "(assert (!= X[0,0,0] 1.0))", "vnnlib-2-unsupported", 18),
]


@pytest.mark.parametrize("name,assertion,code,line", V2_ERRORS, ids=[r[0] for r in V2_ERRORS])
def test_version_2_errors_name_the_2_0_line(name, assertion, code, line):
    pytest.importorskip("vnnlib", reason="the vnnlib package reads VNN-LIB 2.0")
    with pytest.raises(VNNLIBError) as caught:
        read_vnnlib(V2_HEAD + V2_BOXES + assertion)
    assert (caught.value.code, caught.value.line) == (code, line)


def test_version_2_syntax_errors_keep_the_packages_line_and_column():
    pytest.importorskip("vnnlib", reason="the vnnlib package reads VNN-LIB 2.0")
    with pytest.raises(VNNLIBError) as caught:
        read_vnnlib(V2_HEAD + "(assert (<= X[0,0,0] 1e-3))")
    assert (caught.value.code, caught.value.line, caught.value.column, caught.value.token) == (
        "vnnlib-2-invalid", 6, 23, "e")


def test_version_2_without_the_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vnnlib", None)  # import vnnlib fails
    with pytest.raises(VNNLIBError) as caught:
        read_vnnlib(V2_HEAD + V2_BOXES)
    assert caught.value.code == "vnnlib-2-unavailable"
    assert "pip install vnnlib" in str(caught.value)


def test_version_2_outside_a_property_is_refused():
    pytest.importorskip("vnnlib", reason="the vnnlib package reads VNN-LIB 2.0")
    two = V2_HEAD.replace("(declare-output Y float32 [2])",
                          "(declare-output Y float32 [2])\n  (declare-output Z float32 [1])")
    with pytest.raises(VNNLIBError) as caught:
        read_vnnlib(two + V2_BOXES)
    assert caught.value.code == "vnnlib-2-unsupported"


def test_the_error_is_raised_from_the_callers_line_and_pickles():
    import pickle
    import traceback

    with pytest.raises(VNNLIBError) as caught:
        ncet.read_vnnlib(DECLARE_XY + "(assert (<= X_0 a))")
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert not any("/ncet/" in frame.filename for frame in frames)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.code, again.line, again.column, again.token, str(again)) == (
        caught.value.code, 3, 17, "a", str(caught.value))


# --- exact membership --------------------------------------------------------------------

def test_violated_by_decides_exactly_at_the_boundary():
    prop = read_vnnlib(_text("(assert (<= X_0 0.1))(assert (>= X_0 0))(assert (< X_1 1))"
                             "(assert (>= X_1 0))(assert (or (<= Y_0 Y_1) (>= Y_0 0.5)))",
                             inputs=2, outputs=2))
    inside, out = [0.0, 0.5], [0.5, 0.5]
    assert prop.violated_by(inside, out)  # Y_0 <= Y_1, on its boundary
    assert prop.violated_by([F(1, 10), 0], [1, 0])  # X_0 = 1/10 exactly, Y_0 >= 1/2
    # the float 0.1 is above 1/10: outside the box, though float(0.1) prints as 0.1
    assert not prop.violated_by([0.1, 0], [1, 0])
    assert not prop.violated_by([0, 1], [1, 0])  # X_1 < 1 is strict
    assert prop.violated_by([0, np.nextafter(1.0, 0.0)], [1, 0])
    assert not prop.violated_by([0, 0], [0.5 - 2 ** -30, np.float32(0.25)])  # in neither
    assert prop.cases[0].box.contains(np.array([0.05, 0.5], dtype=np.float32))
    with pytest.raises(ValueError):
        prop.violated_by([0, 0, 0], [0, 0])
    with pytest.raises(ValueError):
        prop.violated_by([0, 0], [float("nan"), 0])


def test_violated_by_respects_per_box_unsafe_sets():
    prop = read_vnnlib(corpus_root() / "nn4sys/vnnlib/lindex_1.vnnlib")
    x = [F("0.0012412108480930")]  # the lower bound itself
    assert prop.violated_by(x, [F("0.2328912677061364")])  # Y_0 <= c
    assert not prop.violated_by(x, [F("0.2328912677061365")])
    assert prop.violated_by(x, [F("0.2356499074208930")])  # Y_0 >= c'
    assert not prop.violated_by([F("0.0012412108480929")], [0])  # below the box


# --- generated inputs (hypothesis) -------------------------------------------------------

NUMERALS = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{'.' + frac if frac else ''}"
                                   f"{'e' + str(exp) if exp is not None else ''}",
    st.sampled_from(["", "-", "+"]), st.text("0123456789", min_size=1, max_size=25),
    st.text("0123456789", max_size=25), st.one_of(st.none(), st.integers(-330, 330)))


@settings(max_examples=300, deadline=None)
@given(numeral=NUMERALS, dtype=st.sampled_from([np.float32, np.float64]))
def test_directed_rounding_brackets_every_decimal_tightly(numeral, dtype):
    from ncet.properties.rational import rounded

    x = F(numeral)
    (down,), (up,), (near,) = (rounded([numeral], dtype, r) for r in ("down", "up", "nearest"))
    info = np.finfo(dtype)
    assert (F(float(down)) <= x) if np.isfinite(down) else (down < 0 and x < -F(float(info.max)))
    assert (F(float(up)) >= x) if np.isfinite(up) else (up > 0 and x > F(float(info.max)))
    if np.isfinite(down) and np.isfinite(up):
        assert down == up or np.nextafter(down, dtype(np.inf)) == up  # adjacent: tight
        assert (down == up) == (F(float(down)) == x)
        assert near in (down, up)
        assert abs(F(float(near)) - x) <= abs(F(float(up if near == down else down)) - x)


TEXT_PIECES = st.sampled_from([
    "(", ")", " ", "\n", "; c\n", "assert", "declare-const", "Real", "X_0", "X_1", "Y_0",
    "Y_1", "<=", ">=", "<", ">", "=", "and", "or", "+", "-", "*", "0.5", "-1e-3", "1.2.3",
    "(assert (<= X_0 1))", "(assert (>= X_0 0))", "(declare-const X_0 Real)",
    "(declare-const Y_0 Real)", "(assert (or (and (<= Y_0 1)) (and (>= Y_0 2))))",
    "(vnnlib-version <2.0>)", "X[0]", "true", "false", "not"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(TEXT_PIECES, max_size=40))
def test_any_text_reads_or_raises_a_vnnlib_error(pieces):
    text = "(" + " ".join(pieces)  # a parenthesis: always read as text, never as a path
    try:
        prop = read_vnnlib(text)
    except VNNLIBError as error:
        assert error.code in VNNLIB_REASONS
        return
    assert read_vnnlib(write_vnnlib(prop)) == prop


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.fractions(max_denominator=10 ** 6), min_size=4, max_size=4))
def test_written_fractions_read_back_exactly_or_outward(values):
    lo, hi, b, c = values
    lo, hi = min(lo, hi), max(lo, hi)
    prop = Property.from_cases([(([lo], [hi]), [([[1, 0]], [b]), ([[c, 1]], [b])])],
                               num_outputs=2)
    back = read_vnnlib(write_vnnlib(prop))
    (lower, upper), = back.input_boxes
    assert lower[0] <= lo and upper[0] >= hi
    (a1, b1), (a2, b2) = back.unsafe
    assert a1.tolist() == [[1, 0]] and b1[0] >= b
    if c == 0:
        assert a2.tolist() == [[0, 1]] and b2[0] >= b
    else:  # the row may have been scaled by a positive integer: the same half-space
        scale = a2[0, 1]
        assert scale >= 1 and a2[0, 0] == c * scale and b2[0] >= b * scale
    exact = all(v.denominator in (1, 2, 4, 5, 8, 10) for v in (lo, hi, b, c))
    if exact:
        assert back == prop
