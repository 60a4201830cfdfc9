"""`ncet adjudicate NET PROPERTY WITNESS` (issue 33): exit statuses, the text answers one per
line, the JSON document, refusals as one line on stderr. Networks built here, exact outputs
known by hand."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import ncet
from ncet.cli import main

pytest.importorskip("onnxruntime")

PROPERTY = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
            "(assert (>= X_0 0))\n(assert (<= X_0 1))\n(assert (<= Y_0 0.5))\n")


@pytest.fixture()
def files(tmp_path):
    net = nn.Linear(1, 1)
    with torch.no_grad():  # y = x
        net.weight.fill_(1.0)
        net.bias.fill_(0.0)
    ir = ncet.convert(net, (1,))
    ncet.to_onnx(ir, tmp_path / "net.onnx")
    ncet.save(ir, tmp_path / "net.ncet")
    (tmp_path / "prop.vnnlib").write_text(PROPERTY)
    (tmp_path / "yes.counterexample").write_text("sat\n((X_0 0.25)\n(Y_0 0.25))\n")
    (tmp_path / "no.counterexample").write_text("((X_0 0.75)\n(Y_0 0.75))\n")
    (tmp_path / "bad.counterexample").write_text("((X_0 nan)\n(Y_0 0.75))\n")
    return tmp_path


def test_a_counterexample_exits_0_with_each_answer_on_its_line(files, capsys):
    status = main(["adjudicate", str(files / "net.onnx"), str(files / "prop.vnnlib"),
                   str(files / "yes.counterexample")])
    out = capsys.readouterr().out
    assert status == 0
    assert [line.split(":")[0] for line in out.splitlines()] == [
        "inside", "exact", "float32", "competition", "claimed matches", "verdict"]
    assert out.splitlines()[-1].split() == ["verdict:", "counterexample"]


def test_not_a_counterexample_exits_1_and_json_has_the_answers(files, capsys):
    status = main(["adjudicate", str(files / "net.ncet"), str(files / "prop.vnnlib"),
                   str(files / "no.counterexample"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert status == 1 and doc["command"] == "adjudicate" and doc["ok"] is False
    answer = doc["adjudication"]
    assert answer["verdict"] == "not-a-counterexample"
    assert answer["exact"]["violated"] is False and answer["exact"]["margin"] == -0.25
    assert answer["float32"]["runs"][0]["runtime"].startswith("ncet.evaluate")


def test_a_refused_witness_exits_1_with_its_code(files, capsys):
    status = main(["adjudicate", str(files / "net.onnx"), str(files / "prop.vnnlib"),
                   str(files / "bad.counterexample"), "--json"])
    captured = capsys.readouterr()
    assert status == 1
    assert json.loads(captured.out)["error"]["code"] == "witness-not-finite"
    assert captured.err.startswith("ncet adjudicate: error:") and \
        len(captured.err.splitlines()) == 1


def test_a_missing_file_is_a_usage_error(files, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["adjudicate", str(files / "net.onnx"), str(files / "prop.vnnlib"),
              str(files / "missing.counterexample")])
    assert caught.value.code == 2
    assert "no such file" in capsys.readouterr().err


def test_many_from_a_csv_counts_the_verdicts(files, capsys):
    (files / "many.csv").write_text(
        "net,property,witness\n# a comment\n"
        "net.onnx,prop.vnnlib,yes.counterexample\n"
        "net.ncet,prop.vnnlib,no.counterexample\n"
        "net.onnx,prop.vnnlib,bad.counterexample\n")
    status = main(["adjudicate", "--many", str(files / "many.csv"), "-q"])
    out = capsys.readouterr().out.splitlines()
    assert status == 1  # one witness refused
    assert out[0].split() == ["counterexample", "yes.counterexample"]
    assert out[1].split() == ["not-a-counterexample", "no.counterexample"]
    assert out[2].startswith("refused") and "witness-not-finite" in out[2]
    assert out[3] == "1 counterexample, 1 not-a-counterexample, 1 refused"
    status = main(["adjudicate", "--many", str(files / "many.csv"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"counterexample": 1, "not-a-counterexample": 1, "refused": 1}
    assert [r["error"] is None for r in doc["results"]] == [True, True, False]


def test_many_and_positionals_are_exclusive(files, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["adjudicate", str(files / "net.onnx"), "--many", str(files / "net.onnx")])
    assert caught.value.code == 2
    assert "not both" in capsys.readouterr().err
