"""adjudicate (issue 33, second part): constructed counterexamples on networks whose exact
outputs are known by hand (Fractions), PyTorch and onnxruntime as the float32 oracle; hostile
witnesses by reason code; the corpus's witnesses without a crash, the enclosure's decisions
held to exact rational evaluation."""

from __future__ import annotations

import json
import time
from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.properties import VERDICTS, WITNESS_REASONS, WitnessError, read_witness
from ncet.properties.exact_eval import enclose_at, rational_at
from tests.corpus import CORPUS, corpus_root

F = Fraction


def _line(weight: float, bias: float) -> nn.Module:
    """y = weight * x + bias, one input, one output, float32."""
    net = nn.Linear(1, 1)
    with torch.no_grad():
        net.weight.fill_(weight)
        net.bias.fill_(bias)
    return net


def _property(box: tuple[str, str], unsafe: str) -> str:
    return ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
            f"(assert (>= X_0 {box[0]}))\n(assert (<= X_0 {box[1]}))\n(assert {unsafe})\n")


def _witness(x: str, y: str | None = None) -> str:
    return f"((X_0 {x})" + ("" if y is None else f"\n(Y_0 {y})") + ")\n"


# --- constructed cases: one each -----------------------------------------------------------

def test_a_witness_violating_only_in_float32():
    # y = x + 2^-25 at x = 1: exactly 1 + 2^-25 > 1, but 1 + 2^-25 rounds to 1 in float32
    # (half an ulp of 1 is 2^-24), so float32 says y <= 1: the unsafe set.
    net = _line(1.0, 2.0 ** -25)
    prop = _property(("0", "2"), "(<= Y_0 1)")
    answer = ncet.adjudicate(net, prop, _witness("1", "1"), input_shape=(1,))
    assert answer.inside and answer.box == 0
    assert answer.exact.violated is False
    assert F(answer.exact.margin) == -F(1, 2 ** 25)
    assert answer.float32.violated is True and answer.float32.margin == 0.0
    assert answer.competition.accepted and answer.claimed_matches is True
    assert answer.verdict == "float32-only"


def test_float32_only_through_onnxruntime_on_the_exported_file():
    pytest.importorskip("onnxruntime")
    net = _line(1.0, 2.0 ** -25)
    data = ncet.to_onnx(ncet.convert(net, (1,))).SerializeToString()
    answer = ncet.adjudicate(data, _property(("0", "2"), "(<= Y_0 1)"), _witness("1", "1"))
    assert [r[0].split()[0] for r in answer.float32.runs] == ["onnxruntime"]
    assert answer.exact.violated is False and answer.float32.violated is True
    assert answer.verdict == "float32-only"


def test_a_witness_accepted_only_within_the_tolerance():
    # y = x at x = 0.5; the unsafe set is y >= 0.50005: missed by 5e-5 exactly and in float32
    # (0.5 is exact), inside the competition's 1e-4 on the claimed y = 0.5.
    prop = _property(("0", "1"), "(>= Y_0 0.50005)")
    answer = ncet.adjudicate(_line(1.0, 0.0), prop, _witness("0.5", "0.5"), input_shape=(1,))
    assert answer.inside
    assert answer.exact.violated is False
    lo, hi = answer.exact.margin_bounds
    assert lo <= -F(5, 100000) <= hi and hi < 0
    exact = ncet.adjudicate(_line(1.0, 0.0), prop, _witness("0.5", "0.5"), input_shape=(1,),
                            exact="rational")
    assert exact.exact.margin_bounds == (-F(5, 100000), -F(5, 100000))
    assert answer.float32.violated is False
    assert answer.competition.accepted and answer.competition.relative_error == 0.0
    assert answer.verdict == "tolerance-only"


def test_a_witness_outside_the_box_by_one_ulp():
    # X_0 = 1 + 2^-52, the float64 after 1, written exactly; the box is [0, 1].
    x = format(np.nextafter(1.0, 2.0), ".60g")
    assert F(x) == 1 + F(1, 2 ** 52)
    prop = _property(("0", "1"), "(>= Y_0 0.5)")
    answer = ncet.adjudicate(_line(1.0, 0.0), prop, _witness(x, "1"), input_shape=(1,))
    assert answer.inside is False and answer.box is None
    assert answer.outside_by == F(1, 2 ** 52)
    assert answer.inside_float32_box  # rounded to float32, X is 1: the box's upper bound
    assert answer.exact.violated is True  # the output is unsafe, the point is not in the box
    assert answer.competition.in_box and answer.competition.accepted
    assert answer.verdict == "tolerance-only"


def test_a_point_outside_by_a_bounds_float32_rounding_and_beyond():
    # the box is [0, 0.1]; X_0 is float32(0.1) = 0.100000001490116119384765625 > 0.1
    x = format(float(np.float32(0.1)), ".40g")
    assert F(x) > F(1, 10)
    answer = ncet.adjudicate(_line(1.0, 0.0), _property(("0", "0.1"), "(<= Y_0 1)"),
                             _witness(x, x), input_shape=(1,))
    assert not answer.inside and answer.inside_float32_box
    assert answer.outside_by == F(x) - F(1, 10)
    assert answer.exact.violated and answer.float32.violated
    assert answer.verdict == "tolerance-only"
    # the next float32 above is outside the box even rounded outward to float32
    beyond = format(float(np.nextafter(np.float32(0.1), np.float32(1))), ".40g")
    answer = ncet.adjudicate(_line(1.0, 0.0), _property(("0", "0.1"), "(<= Y_0 1)"),
                             _witness(beyond, beyond), input_shape=(1,))
    assert not answer.inside and not answer.inside_float32_box


def test_a_point_exactly_on_a_non_strict_boundary_is_violated_with_margin_zero():
    prop = _property(("0", "1"), "(<= Y_0 0.5)")
    answer = ncet.adjudicate(_line(1.0, 0.0), prop, _witness("0.5", "0.5"), input_shape=(1,))
    assert answer.exact.violated is True and answer.exact.margin == 0.0
    assert answer.exact.method == "rational" and answer.exact.margin_bounds == (0, 0)
    assert answer.float32.violated is True
    assert answer.verdict == "counterexample"


def test_a_point_exactly_on_a_strict_boundary_is_not_violated():
    prop = _property(("0", "1"), "(< Y_0 0.5)")
    answer = ncet.adjudicate(_line(1.0, 0.0), prop, _witness("0.5", "0.5"), input_shape=(1,))
    assert answer.exact.violated is False and answer.exact.margin == 0.0
    assert answer.float32.violated is False
    # the competition reads every row as <= (and adds 1e-4): it accepts
    assert answer.competition.accepted
    assert answer.verdict == "tolerance-only"


def test_a_tensor_witness_has_no_claimed_output():
    ir = ncet.convert(_line(2.0, 0.0), (1,))
    answer = ncet.adjudicate(ir, _property(("0", "1"), "(>= Y_0 1)"), torch.tensor([0.75]))
    assert answer.claimed_matches is None
    assert answer.exact.violated and F(answer.exact.margin) == F(1, 2)
    assert answer.competition.claimed_from.startswith("ncet.evaluate")
    assert answer.verdict == "counterexample"


def test_the_answers_print_one_per_line_and_serialise():
    answer = ncet.adjudicate(_line(1.0, 0.0), _property(("0", "1"), "(<= Y_0 0.5)"),
                             _witness("0.5", "0.5"), input_shape=(1,))
    lines = str(answer).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "inside", "exact", "float32", "competition", "claimed matches", "verdict"]
    data = json.loads(json.dumps(answer.to_dict()))
    assert data["verdict"] == "counterexample" and data["exact"]["margin_bounds"] == ["0", "0"]
    assert set(VERDICTS) >= {"counterexample", "float32-only", "tolerance-only",
                             "not-a-counterexample"}


def test_a_claimed_output_that_does_not_reproduce():
    answer = ncet.adjudicate(_line(1.0, 0.0), _property(("0", "1"), "(<= Y_0 0.5)"),
                             _witness("0.75", "0.25"), input_shape=(1,))
    assert answer.claimed_matches is False
    assert not answer.competition.matched and not answer.competition.accepted
    assert answer.verdict == "not-a-counterexample"


# --- hostile witnesses ---------------------------------------------------------------------

HOSTILE = [
    ("", "witness-empty", None),
    ("unsat\n", "witness-empty", (1, 1)),
    ("sat\n((X_0 0.5)", "witness-syntax", (2, 1)),
    ("((X_0 0.5) (Y_0 1) extra)", "witness-syntax", (1, 20)),
    ("((X_0 0.5)) (Y_0 1)", "witness-syntax", (1, 13)),
    ("((X_0 0.5 0.6))", "witness-syntax", (1, 11)),
    ("((Z_0 0.5))", "witness-bad-name", (1, 3)),
    ("((X_-1 0.5))", "witness-bad-name", (1, 3)),
    ("((X_0 NaN))", "witness-not-finite", (1, 7)),
    ("((X_0 -inf))", "witness-not-finite", (1, 7)),
    ("((X_0 0.5)\n(X_1 abc))", "witness-not-a-number", (2, 6)),
    ("((X_0 0x1p3))", "witness-not-a-number", (1, 7)),
    ("((X_0 1e99999))", "witness-not-a-number", (1, 7)),
    ("((X_0 0.5) (Y_0 -1e400))", "witness-out-of-range", (1, 17)),
    ("((X_0 " + "9" * 310 + "))", "witness-out-of-range", (1, 7)),
    ("((X_0 0.5)\n(X_0 0.6))", "witness-duplicate", (2, 2)),
    ("((X_0 0.5) (X_2 0.6))", "witness-missing", None),
    ("((Y_0 0.5))", "witness-no-input", None),
]


@pytest.mark.parametrize(("text", "code", "where"), HOSTILE)
def test_hostile_witnesses_are_refused_with_a_code_and_place(text, code, where):
    with pytest.raises(WitnessError) as caught:
        read_witness(text if "(" in text else text.encode())
    error = caught.value
    assert error.code == code and code in WITNESS_REASONS
    assert isinstance(error, ValueError) and isinstance(error, ncet.NCETError)
    if where is not None:
        assert (error.line, error.column) == where


def test_an_enormous_witness_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import ncet.properties.witness as witness
    monkeypatch.setattr(witness, "MAX_BYTES", 1000)
    path = tmp_path / "big.counterexample"
    path.write_text("(" + "(X_0 0.5)" * 200 + ")")
    with pytest.raises(WitnessError, match="witness-too-large"):
        read_witness(path)


def test_a_witness_of_the_wrong_length_is_refused():
    with pytest.raises(WitnessError) as caught:
        ncet.adjudicate(_line(1.0, 0.0), _property(("0", "1"), "(<= Y_0 0.5)"),
                        "((X_0 0.5) (X_1 0.5))", input_shape=(1,))
    assert caught.value.code == "witness-wrong-length"


def test_a_tensor_witness_with_nan_is_refused():
    with pytest.raises(WitnessError, match="witness-not-finite"):
        ncet.adjudicate(_line(1.0, 0.0), _property(("0", "1"), "(<= Y_0 0.5)"),
                        torch.tensor([float("nan")]), input_shape=(1,))


def test_a_witness_keeps_its_numbers_exactly_as_written():
    w = read_witness("sat\n((X_0 0.1)\n(X_1 -1e-3)\n(Y_0 3))")
    assert w.x_exact == [F(1, 10), F(-1, 1000)] and w.y_exact == [F(3)]


# --- the enclosure against exact rationals -------------------------------------------------

def test_the_enclosure_holds_the_exact_output_of_a_small_cnn():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                        nn.Flatten(), nn.Linear(12, 4), nn.LeakyReLU(0.1))
    ir = ncet.convert(net, (2, 4, 4))
    x = [F(k, 7) - 1 for k in range(32)]
    value, radius = enclose_at(ir, x)
    exact = rational_at(ir, x)
    assert all(abs(e - F(float(v))) <= F(float(r)) for e, v, r in zip(exact, value, radius))
    # the rational output is the network's: PyTorch in float64 agrees to float64 rounding
    with torch.no_grad():
        ref = net.double()(torch.tensor([float(v) for v in x], dtype=torch.float64).reshape(
            1, 2, 4, 4)).reshape(-1)
    assert max(abs(float(e) - float(r)) for e, r in zip(exact, ref)) < 1e-12


# --- the corpus ----------------------------------------------------------------------------

def _corpus_rows():
    if not CORPUS.is_dir():
        return []
    from benchmarks.adjudicate import witness_instances
    return witness_instances(CORPUS)


def _representatives():
    """One witness per benchmark and per network: the default run (the benchmark runs all)."""
    seen, out = set(), []
    for row in _corpus_rows():
        if row["onnx"] not in seen:
            seen.add(row["onnx"])
            out.append(row)
    return out


def test_every_corpus_witness_matches_one_instance():
    corpus_root()
    assert len(_corpus_rows()) == 167


@pytest.mark.parametrize("row", _representatives(),
                         ids=lambda r: r["witness"].name.removesuffix(".counterexample"))
def test_corpus_witnesses_are_adjudicated(row):
    pytest.importorskip("onnxruntime")
    corpus_root()
    if not ncet.diagnose_onnx(row["onnx"]).ok:  # refused whole, with the import's reason
        with pytest.raises(ncet.ONNXImportError):
            ncet.adjudicate(row["onnx"], row["vnnlib"], row["witness"])
        return
    start = time.perf_counter()
    answer = ncet.adjudicate(row["onnx"], row["vnnlib"], row["witness"])
    assert time.perf_counter() - start < 30
    assert answer.verdict in VERDICTS and answer.verdict != "undecided"
    # the enclosure's decision agrees with exact rational evaluation
    exact = ncet.adjudicate(row["onnx"], row["vnnlib"], row["witness"], exact="rational")
    assert exact.exact.method == "rational"
    assert exact.exact.violated == answer.exact.violated
    lo, hi = answer.exact.margin_bounds
    assert lo <= exact.exact.margin_bounds[0] <= hi


# --- more networks and inputs --------------------------------------------------------------

class _Ops(nn.Module):
    """Every op rational_at evaluates, in one graph."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect", dilation=1, groups=2)
        self.conv2 = nn.Conv2d(4, 2, 2, stride=2, dilation=1, bias=False)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = y * 0.75 - 0.125
        y = 2.0 - y / 3.0
        y = self.conv2(y).permute(0, 2, 3, 1).transpose(1, 2)
        y = torch.flatten(y, 1)
        z = torch.cat([y[:, :5], y[:, 5:] + 1.5], dim=1)
        return nn.functional.leaky_relu(self.fc(z), 0.2) - self.fc(z)


def test_rational_evaluation_of_every_op_sits_in_the_enclosure():
    torch.manual_seed(1)
    net = _Ops().eval()
    ir = ncet.convert(net, (2, 4, 4))
    assert {"Conv2d", "Linear", "ElementwiseAffine", "Permute", "Transpose", "Concat",
            "LeakyReLU", "Sub"} <= {n.op_type for n in ir.nodes}
    x = [F(k, 9) - F(3, 2) for k in range(32)]
    value, radius = enclose_at(ir, x)
    exact = rational_at(ir, x)
    assert len(exact) == 3
    assert all(abs(e - F(float(v))) <= F(float(r)) for e, v, r in zip(exact, value, radius))
    with torch.no_grad():
        ref = net.double()(torch.tensor([float(v) for v in x], dtype=torch.float64).reshape(
            1, 2, 4, 4)).reshape(-1)
    assert max(abs(float(e) - float(r)) for e, r in zip(exact, ref)) < 1e-12


def test_a_boundary_case_outside_rational_evaluation_is_undecided():
    # BatchNorm (a square root) with mean 0, variance 1, eps 0: y = x exactly, but only the
    # enclosure can evaluate it, and at y = 0.5 on the boundary it holds both signs
    net = nn.Sequential(nn.Linear(1, 1), nn.BatchNorm1d(1, eps=0.0)).eval()
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.fill_(0.0)
    answer = ncet.adjudicate(net, _property(("0", "1"), "(<= Y_0 0.5)"),
                             _witness("0.5", "0.5"), input_shape=(1,))
    assert answer.exact.violated is None and answer.verdict == "undecided"
    lo, hi = answer.exact.margin_bounds
    assert lo <= 0 <= hi
    # away from the boundary the enclosure decides
    answer = ncet.adjudicate(net, _property(("0", "1"), "(<= Y_0 0.5)"),
                             _witness("0.25", "0.25"), input_shape=(1,))
    assert answer.exact.violated is True and answer.verdict == "counterexample"


def test_network_and_property_forms(tmp_path):
    ir = ncet.convert(_line(1.0, 0.0), (1,))
    ncet.save(ir, tmp_path / "net.ncet")
    prop_path = tmp_path / "p.vnnlib"
    prop_path.write_text(_property(("0", "1"), "(<= Y_0 0.5)"))
    witness_path = tmp_path / "w.counterexample"
    witness_path.write_text(_witness("0.25", "0.25"))
    verdicts = {ncet.adjudicate(net, prop, witness).verdict for net, prop, witness in [
        (ir, prop_path, witness_path), (str(tmp_path / "net.ncet"), str(prop_path),
                                        str(witness_path)),
        (ir, ncet.read_vnnlib(prop_path), read_witness(witness_path)),
        (ir, prop_path.read_text(), witness_path.read_bytes())]}
    assert verdicts == {"counterexample"}
    with pytest.raises(ValueError, match="input_shape"):
        ncet.adjudicate(_line(1.0, 0.0), prop_path, witness_path)
    with pytest.raises(ValueError, match="exact="):
        ncet.adjudicate(ir, prop_path, witness_path, exact="approximate")
    with pytest.raises(ValueError, match=r"has shape \[2\], and the property 1 inputs"):
        ncet.adjudicate(ncet.convert(nn.Linear(2, 1), (2,)), prop_path, "((X_0 0.5))")


def test_overlapping_boxes_each_bring_their_own_unsafe_set():
    # X_0 = 0.5 lies in both boxes; only the second box's unsafe set (y >= 0.25) holds y = x
    prop = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (or\n"
            "  (and (>= X_0 0) (<= X_0 1) (>= Y_0 2))\n"
            "  (and (>= X_0 0.5) (<= X_0 2) (>= Y_0 0.25))))\n")
    answer = ncet.adjudicate(_line(1.0, 0.0), prop, _witness("0.5", "0.5"), input_shape=(1,))
    assert answer.inside and answer.box == 0
    assert answer.exact.violated and answer.verdict == "counterexample"


def test_a_claimed_output_near_zero_matches_any_execution_under_the_rule():
    # the scripts take the relative error as 0 when max|claimed| < 1e-6: a claimed Y of 0
    # "matches" the executed 0.75, and 0 is in the unsafe set y <= 0.5
    answer = ncet.adjudicate(_line(1.0, 0.0), _property(("0", "1"), "(<= Y_0 0.5)"),
                             _witness("0.75", "0"), input_shape=(1,))
    assert answer.competition.relative_error == 0.0 and answer.competition.accepted
    assert answer.claimed_matches is False
    assert answer.exact.violated is False and answer.float32.violated is False
    assert answer.verdict == "tolerance-only"


class _Pools(nn.Module):
    """MaxPool2d with padding, AdaptiveAvgPool2d to uneven windows, and a mean: each exact
    in rationals."""

    def forward(self, x):
        a = torch.nn.functional.max_pool2d(x, 3, 2, 1)  # (2, 3, 3)
        b = torch.nn.functional.adaptive_avg_pool2d(x, (2, 3))  # windows of 2x2 and 2x3
        return torch.cat([a.flatten(1), b.flatten(1), x.mean(dim=(2, 3))], dim=1)


def _max_pool_oracle(x, k, s, p):
    """Max pooling of nested lists of Fractions, padding ignored (it never wins)."""
    out = []
    for ch in x:
        h, w = len(ch), len(ch[0])
        size = lambda n: (n + 2 * p - k) // s + 1  # noqa: E731
        out.append([[max(ch[r][c] for r in range(i * s - p, i * s - p + k)
                         for c in range(j * s - p, j * s - p + k)
                         if 0 <= r < h and 0 <= c < w)
                     for j in range(size(w))] for i in range(size(h))])
    return out


def test_max_pool_adaptive_pool_and_mean_evaluate_exactly():
    ir = ncet.convert(_Pools().eval(), (2, 5, 5))
    x = [F(k * k % 17, 7) - F(5, 3) for k in range(50)]
    exact = rational_at(ir, x)
    grid = [[x[c * 25 + r * 5:c * 25 + r * 5 + 5] for r in range(5)] for c in range(2)]
    pooled = [v for ch in _max_pool_oracle(grid, 3, 2, 1) for row in ch for v in row]
    windows = [((0, 3), (0, 2)), ((0, 3), (1, 4)), ((0, 3), (3, 5)),
               ((2, 5), (0, 2)), ((2, 5), (1, 4)), ((2, 5), (3, 5))]
    adaptive = [sum(grid[c][r][q] for r in range(*rows) for q in range(*cols)) /
                ((rows[1] - rows[0]) * (cols[1] - cols[0]))
                for c in range(2) for rows, cols in windows]
    means = [sum(x[c * 25:(c + 1) * 25]) / 25 for c in range(2)]
    assert exact == pooled + adaptive + means
