"""`ncet margin NET PROPERTY [-o FILE] [--json] [--input-rounding]` (issue 34): the report,
the tightened file written and read back, exit statuses, and bad arguments as one line
without a traceback. `float_margin` is replaced here by a hand-built Margin (its eps, range
and contributions known), so every number the command prints is checked against exact
rationals worked out from it; the real float_margin runs in tests/test_margin_constructed.py.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import torch
from torch import nn

import ncet
from ncet.regions import Margin
from tests.test_cli import call

F = Fraction
HEAD = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
        "(assert (>= X_0 0))\n(assert (<= X_0 1))\n")


def _margin(eps, lower, upper, contributions=None, **fields) -> Margin:
    def t(values):
        return torch.tensor(values, dtype=torch.float64)
    return Margin(eps=t(eps), lower=t(lower), upper=t(upper),
                  contributions={k: t(v) for k, v in (contributions or {}).items()},
                  arithmetic="any summation order, FMA", **fields)


@pytest.fixture()
def files(tmp_path):
    net = nn.Linear(1, 2)
    with torch.no_grad():  # y = (x, -x)
        net.weight.copy_(torch.tensor([[1.0], [-1.0]]))
        net.bias.zero_()
    ir = ncet.convert(net, (1,))
    ncet.save(ir, tmp_path / "net.ncet")
    (tmp_path / "prop.vnnlib").write_text(HEAD + "(assert (<= Y_0 Y_1))\n"
                                          "(assert (>= Y_0 -0.5))\n")
    return tmp_path


@pytest.fixture()
def fake(monkeypatch):
    """float_margin replaced: returns `fake.margin`, records its calls."""
    class Fake:
        margin = _margin([2.0 ** -24, 2.0 ** -23], [0.0, -1.0], [1.0, 0.0],
                         {"fc": [2.0 ** -25, 2.0 ** -23], "<input rounding>": [2.0 ** -25, 0]},
                         unstable={"relu": (3, 8), "relu_1": (0, 8)})
        calls: list = []

        def __call__(self, network, region, *, input_rounding=False, splits=None):
            self.calls.append((network, region, input_rounding))
            return self.margin

    stub = Fake()
    monkeypatch.setattr(ncet, "float_margin", stub, raising=False)
    return stub


def test_the_report_and_the_tightened_file(files, fake, capsys):
    out_path = files / "tight.vnnlib"
    status, out, err = call(capsys, "margin", str(files / "net.ncet"),
                            str(files / "prop.vnnlib"), "-o", str(out_path))
    assert status == 0 and err == ""
    network, region, rounding = fake.calls[-1]
    assert isinstance(network, ncet.GraphIR) and isinstance(region, ncet.Property)
    assert rounding is False
    lines = out.splitlines()
    assert lines[0].startswith(f"float32 margin of {files / 'net.ncet'}")
    # eps, the range, eps / the range's width (2^-24 / 1 and 2^-23 / 1)
    assert ["Y_0", "5.96e-08", "[0,", "1]", "6e-08"] in [line.split() for line in lines]
    assert ["Y_1", "1.19e-07", "[-1,", "0]", "1.2e-07"] in [line.split() for line in lines]
    # Y_0 - Y_1 <= 0 grows by eps_0 + eps_1 = 3 * 2^-24; -Y_0 <= 0.5 by eps_0
    assert any(line.startswith("Y_0 - Y_1 <= 0") and "1.79e-07" in line for line in lines)
    assert any(line.startswith("Y_0 >= -0.5") and "5.96e-08" in line for line in lines)
    assert "possibly unstable over the region: relu 3/8" in lines  # relu_1: none
    nodes = [line.split() for line in lines if line.startswith("  ")]
    assert nodes == [["fc", "100.0%", "(Y_1)"], ["<input", "rounding>", "50.0%", "(Y_0)"]]
    assert lines[-1] == f"wrote {out_path}: 2 rows grown, {out_path.stat().st_size:,} " \
                        "bytes; read back equal"
    written = ncet.read_vnnlib(out_path)
    prop = ncet.read_vnnlib(files / "prop.vnnlib")
    assert written == ncet.tighten(prop, fake.margin)
    assert all((a == b).all() for a, b in zip(written.input_boxes[0], prop.input_boxes[0]))
    ((_, b),) = written.unsafe
    eps0, eps1 = F(2) ** -24, F(2) ** -23
    assert b[0] >= eps0 + eps1 and b[1] >= F(1, 2) + eps0  # Y_0 - Y_1 <= 0, -Y_0 <= 0.5


def test_json_has_the_margin_rows_and_the_written_file(files, fake, capsys):
    status, out, _ = call(capsys, "margin", str(files / "net.ncet"),
                          str(files / "prop.vnnlib"), "--json", "--input-rounding",
                          "-o", str(files / "t.vnnlib"))
    doc = json.loads(out)
    assert status == 0 and doc["command"] == "margin" and doc["ok"] is True
    assert fake.calls[-1][2] is True
    assert doc["margin"]["eps"] == [2.0 ** -24, 2.0 ** -23]
    assert [r["text"] for r in doc["rows"]] == ["Y_0 - Y_1 <= 0", "Y_0 >= -0.5"]
    assert [F(r["tightened_b"]) >= F(r["b"]) + F(r["grown_by"]) for r in doc["rows"]] == \
        [True, True]
    assert doc["output"]["read_back"] is True and doc["output"]["rows_grown"] == 2
    assert doc["top_contributions"][0]["node"] == "fc"
    assert doc["decided_as_deployed"] is False


# The range against one row: (row, range of Y_0, eps of Y_0, exact output out of the row?,
# float32 output too?, the verdict's first words). Y_1 is in [0, 0] with eps 0.
DECISIONS = [
    ("(assert (<= Y_0 0.5))", (0.75, 1.0), 2.0 ** -20, True, True,
     "the range alone keeps every float32 output out"),
    ("(assert (<= Y_0 0.5))", (0.5 + 2.0 ** -30, 1.0), 2.0 ** -20, True, False,
     "the range keeps every exact output out"),
    ("(assert (<= Y_0 0.5))", (0.75, 1.0), 0.25, True, False,
     "the range keeps every exact output out"),  # out by eps exactly: float32 may reach b
    ("(assert (< Y_0 0.5))", (0.75, 1.0), 0.25, True, True,
     "the range alone keeps every float32 output out"),  # ... but not below a strict b
    ("(assert (<= Y_0 0.5))", (0.25, 1.0), 2.0 ** -20, False, False,
     "the range does not decide the property"),
    ("(assert (>= Y_0 2))", (0.25, 1.0), 0.5, True, True,
     "the range alone keeps every float32 output out"),
]


@pytest.mark.parametrize("row, span, eps, excluded, deployed, verdict", DECISIONS)
def test_the_range_decides_a_row_when_it_keeps_out_by_more_than_the_growth(
        files, fake, capsys, row, span, eps, excluded, deployed, verdict):
    (files / "one.vnnlib").write_text(HEAD + row + "\n")
    fake.margin = _margin([eps, 0.0], [span[0], 0.0], [span[1], 0.0])
    status, out, _ = call(capsys, "margin", str(files / "net.ncet"), str(files / "one.vnnlib"))
    assert status == 0 and out.splitlines()[-1].startswith(verdict)
    status, out, _ = call(capsys, "margin", str(files / "net.ncet"),
                          str(files / "one.vnnlib"), "--json")
    (record,) = json.loads(out)["rows"]
    assert (record["excluded"], record["excluded_as_deployed"]) == (excluded, deployed)
    assert json.loads(out)["decided_as_deployed"] is deployed


def test_an_onnx_net_is_imported(files, fake, capsys):
    pytest.importorskip("onnx")
    ncet.to_onnx(ncet.load(files / "net.ncet"), files / "net.onnx")
    status, _, _ = call(capsys, "margin", str(files / "net.onnx"), str(files / "prop.vnnlib"))
    assert status == 0 and isinstance(fake.calls[-1][0], ncet.GraphIR)


def test_per_box_unsafe_sets_are_reported_box_by_box(files, fake, capsys):
    (files / "boxes.vnnlib").write_text(
        "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
        "(assert (or (and (>= X_0 0) (<= X_0 1) (<= Y_0 5))\n"
        "            (and (>= X_0 1) (<= X_0 2) (>= Y_1 7))))\n")
    status, out, _ = call(capsys, "margin", str(files / "net.ncet"),
                          str(files / "boxes.vnnlib"), "--json", "-o", str(files / "b.vnnlib"))
    doc = json.loads(out)
    assert status == 0 and [(r["box"], r["text"]) for r in doc["rows"]] == [
        (0, "Y_0 <= 5"), (1, "Y_1 >= 7")]
    assert doc["output"]["rows_grown"] == 2 and doc["output"]["read_back"] is True


# Arguments that do not work: (arguments, exit status, words in the one stderr line).
# {d} is the fixture's folder; "net.ncet" and "prop.vnnlib" exist there.
BAD = [
    (["{d}/none.ncet", "{d}/prop.vnnlib"], 2, "NET"),
    (["{d}", "{d}/prop.vnnlib"], 2, "a folder"),
    (["{d}/prop.vnnlib", "{d}/prop.vnnlib"], 2, "neither an ONNX file"),
    (["{d}/net.ncet", "{d}/none.vnnlib"], 2, "PROPERTY"),
    (["{d}/net.ncet", "{d}/prop.vnnlib", "-o", "{d}"], 2, "is a folder"),
    (["{d}/net.ncet", "{d}/prop.vnnlib", "-o", "{d}/no/such/t.vnnlib"], 2, "cannot write"),
    (["{d}/net.ncet"], 2, "required"),
    (["{d}/net.ncet", "{d}/bad.vnnlib"], 1, "vnnlib"),
    (["{d}/bad.ncet", "{d}/prop.vnnlib"], 1, ""),
    (["{d}/bad.onnx", "{d}/prop.vnnlib"], 1, ""),
    (["{d}/net.ncet", "{d}/three.vnnlib"], 1, "the margin has 2 outputs and the property 3"),
]


@pytest.mark.parametrize("args, status, words", BAD, ids=[" ".join(a[0][1:]) for a in BAD])
def test_bad_arguments_are_one_line_and_no_traceback(files, fake, capsys, args, status, words):
    (files / "bad.vnnlib").write_text(HEAD + "(assert (<= Y_0 nan))\n")
    (files / "bad.ncet").write_bytes(b"not a GraphIR file")
    (files / "bad.onnx").write_bytes(b"not an ONNX file")
    (files / "three.vnnlib").write_text(HEAD.replace(
        "(declare-const Y_1 Real)\n", "(declare-const Y_1 Real)\n(declare-const Y_2 Real)\n")
        + "(assert (<= Y_2 1))\n")
    got, out, err = call(capsys, "margin", *(a.replace("{d}", str(files)) for a in args))
    assert got == status, err
    assert "Traceback" not in out + err
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith("ncet margin: error: ") and words in last, err
    if status == 1:
        assert len(err.splitlines()) == 1 and not (files / "t.vnnlib").exists()


@pytest.mark.parametrize("raised, words", [
    (ValueError("the network has 2 inputs; float_margin takes one"), "has 2 inputs"),
    (RuntimeError("a bug\nover two lines"), "ncet margin failed on this file (RuntimeError: "
                                             "a bug); please report it"),
])
def test_float_margin_refusing_is_one_line(files, fake, capsys, monkeypatch, raised, words):
    def refuse(network, region, **options):
        raise raised
    monkeypatch.setattr(ncet, "float_margin", refuse, raising=False)
    status, out, err = call(capsys, "margin", str(files / "net.ncet"),
                            str(files / "prop.vnnlib"), "-o", str(files / "t.vnnlib"))
    assert status == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("ncet margin: error: ") and words in err
    assert not (files / "t.vnnlib").exists()


def test_json_refusal_has_the_code(files, fake, capsys):
    (files / "bad.vnnlib").write_text(HEAD + "(assert (<= Y_0 nan))\n")
    status, out, err = call(capsys, "margin", str(files / "net.ncet"),
                            str(files / "bad.vnnlib"), "--json")
    doc = json.loads(out)
    assert status == 1 and doc["ok"] is False and doc["margin"] is None
    assert doc["error"]["code"] == "vnnlib-bad-number"
    assert err.startswith("ncet margin: error:")


def test_help_names_the_command(capsys):
    status, out, _ = call(capsys, "margin", "--help")
    assert status == 0 and "ncet margin" in out and "--input-rounding" in out
    status, out, _ = call(capsys, "--help")
    assert "margin" in out


def test_the_real_margin_of_a_corpus_network_writes_the_tightened_property(tmp_path, capsys):
    """float_margin itself, on ACAS Xu 1_1 and property 3 (an ONNX NET): the file written is
    the property tightened by the eps the JSON reports, and reads back equal."""
    pytest.importorskip("onnx")
    from tests.corpus import corpus_root

    root = corpus_root() / "acasxu"
    prop_path = root / "vnnlib" / "prop_3.vnnlib"
    status, out, err = call(capsys, "margin", str(root / "onnx" /
                                                  "ACASXU_run2a_1_1_batch_2000.onnx"),
                            str(prop_path), "--json", "-o", str(tmp_path / "t.vnnlib"))
    doc = json.loads(out)
    assert status == 0 and doc["ok"] is True and err == ""
    eps = doc["margin"]["eps"]
    assert len(eps) == 5 and all(e > 0 for e in eps)
    assert all(lo <= hi for lo, hi in zip(doc["margin"]["lower"], doc["margin"]["upper"]))
    prop = ncet.read_vnnlib(prop_path)
    assert ncet.read_vnnlib(tmp_path / "t.vnnlib") == ncet.tighten(prop, eps)
    assert doc["output"] == {"path": str(tmp_path / "t.vnnlib"),
                             "bytes": (tmp_path / "t.vnnlib").stat().st_size,
                             "rows_grown": 4, "read_back": True}
