"""benchmarks/margin.py (the table of docs/margins.md) on two small corpus instances: every
column, the JSON and the markdown written, no ratio below 1."""

from __future__ import annotations

import json

import pytest

from tests.corpus import corpus_root

pytest.importorskip("onnxruntime")


def test_the_margin_benchmark_writes_its_table(tmp_path, capsys):
    from benchmarks import margin

    root = corpus_root()
    out = tmp_path / "margin.json"
    assert margin.main(["--corpus", str(root), "--only", "test/test_small", "test/test_tiny",
                        "--samples", "32", "--steps", "2", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["network"] for r in rows] == ["test/test_tiny.onnx", "test/test_small.onnx"]
    for row in rows:
        assert row["margin_seconds"] > 0 and row["forward_seconds"] > 0
        assert row["min_ratio"] is None or row["min_ratio"] >= 1
        assert row["max_deviation"] <= row["max_eps"]
    table = (tmp_path / "margin.md").read_text()
    assert "| `test/test_small.onnx` | `test_small.vnnlib` | 1 | 1 |  |" in table
    assert "| test | 2 |" in table and table in capsys.readouterr().out


def test_quick_takes_new_networks_and_new_properties():
    from benchmarks.margin import quick

    pairs = [("acasxu/a.onnx", "acasxu/p1"), ("acasxu/a.onnx", "acasxu/p2"),
             ("acasxu/b.onnx", "acasxu/p1"), ("acasxu/b.onnx", "acasxu/p2"),
             ("x/c.onnx", "x/q1"), ("x/c.onnx", "x/q2")]
    assert quick(pairs) == [("acasxu/a.onnx", "acasxu/p1"), ("acasxu/b.onnx", "acasxu/p2"),
                            ("x/c.onnx", "x/q1")]
