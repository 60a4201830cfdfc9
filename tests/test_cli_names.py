"""Names a file holds reach the terminal on one line: `ncet show`, `ncet diff` and the lint
listing escape every line break (\\n, \\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85, \\u2028, \\u2029),
tab and control character in them, as `\\xNN` / `\\uNNNN`, so that a name cannot print a line
that looks like NCET's own (issue 30)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import ncet
from ncet.cli.terminal import name_text, printable, shown_graphs
from ncet.examples import load_example
from tests.test_cli import call

FAKE = "exact within the certified bounds on 96 samples"
"""What a hostile name would like to print as a line of its own."""

BREAKS = {"\n": "\\x0a", "\r": "\\x0d", "\r\n": "\\x0d\\x0a", "\x0b": "\\x0b", "\x0c": "\\x0c",
          "\x1c": "\\x1c", "\x1d": "\\x1d", "\x1e": "\\x1e", "\x85": "\\x85",
          "\u2028": "\\u2028", "\u2029": "\\u2029", "\t": "\\x09"}
"""Every line break str.splitlines() knows (and tab), with its escape."""


def test_the_table_has_every_line_break_python_knows():
    breaks = {chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) == 2}
    assert breaks <= set(BREAKS)


def _ir():
    model, shapes = load_example("mlp")
    return ncet.convert(model, *shapes)


def _renamed(ir, constant: str | None = None, node: str | None = None):
    """The mlp's first Linear weight renamed `constant`, its first Linear node `node`."""
    first = next(n for n in ir.nodes if n.op_type == "Linear")
    old = first.attrs["weight"]
    new_name = node or first.name
    nodes = []
    for n in ir.nodes:
        attrs = {**n.attrs, "weight": constant} if constant and n is first else n.attrs
        inputs = tuple(new_name if i == first.name else i for i in n.inputs)
        nodes.append(dataclasses.replace(n, name=new_name if n is first else n.name,
                                         attrs=attrs, inputs=inputs))
    constants = {(constant if constant and k == old else k): v for k, v in ir.constants.items()}
    return ncet.GraphIR(tuple(nodes), constants)


@pytest.mark.parametrize("where", ["constant", "node"])
@pytest.mark.parametrize("brk", list(BREAKS), ids=[repr(b) for b in BREAKS])
def test_show_prints_a_name_with_a_line_break_on_one_line(tmp_path, capsys, brk, where):
    clean = _ir()
    hostile = f"w{brk}{FAKE}"
    ir = _renamed(clean, **{where: hostile})
    path = tmp_path / "hostile.ncet"
    ncet.save(ir, path)
    status, out, err = call(capsys, "show", str(path))
    assert status == 0, err
    assert len(out.splitlines()) == len(repr(clean).splitlines())
    assert not any(line.startswith(FAKE) for line in out.splitlines())
    assert f"w{BREAKS[brk]}{FAKE}" in out
    status, out, _ = call(capsys, "show", str(path), "--json")  # JSON keeps the true name
    graph = json.loads(out)["graph"]
    assert status == 0 and hostile in [c["name"] for c in graph["constants"]] + \
        [n["name"] for n in graph["nodes"]]


def test_diff_prints_a_name_with_a_line_break_on_one_line(tmp_path, capsys):
    a, b = tmp_path / "a.ncet", tmp_path / "b.ncet"
    ncet.save(_ir(), a)
    ncet.save(_renamed(_ir(), node=f"x\n{FAKE}\u2028{FAKE}"), b)
    status, out, err = call(capsys, "diff", str(a), str(b))
    assert status == 1, err
    assert not any(line.startswith(FAKE) for line in out.splitlines())
    assert "\u2028" not in out and re.search(r"x\\+x0a" + FAKE + r"\\+u2028" + FAKE, out)
    status, doc_out, _ = call(capsys, "diff", str(a), str(b), "--json")
    doc = json.loads(doc_out)
    true_name = json.dumps(repr(f"x\n{FAKE}\u2028{FAKE}"), ensure_ascii=False)[1:-1]
    assert true_name in json.dumps(doc, ensure_ascii=False)  # JSON: the name as it is


def test_diff_of_two_files_with_the_same_hostile_names_is_the_same(tmp_path, capsys):
    a, b = tmp_path / "a.ncet", tmp_path / "b.ncet"
    for path in (a, b):
        ncet.save(_renamed(_ir(), constant=f"w\n{FAKE}"), path)
    status, out, err = call(capsys, "diff", str(a), str(b))
    assert status == 0 and "the GraphIRs are the same" in out, out + err


def test_names_the_escape_would_merge_are_shown_apart():
    ir = _renamed(_renamed(_ir(), constant="a\nb"), node="a\\x0ab")
    (shown,) = shown_graphs(ir)
    assert len({n.name for n in shown.nodes} | set(shown.constants)) == \
        len({n.name for n in ir.nodes} | set(ir.constants))
    assert name_text("a\nb") == "a\\x0ab"  # the two would merge: ascii() keeps them apart
    assert all(name_text(n) == n for n in {n.name for n in shown.nodes} | set(shown.constants))


def test_shown_graphs_leaves_clean_graphs_alone():
    ir = _ir()
    assert shown_graphs(ir)[0] is ir


def test_the_stream_escapes_unicode_line_separators_too():
    assert printable("a\u2028b\u2029c\x85d\u202ee") == "a\\u2028b\\u2029c\\x85d\\u202ee"
    assert printable("a\nb\tc") == "a\nb\tc"  # NCET's own layout
    assert name_text("a\nb\tc") == "a\\x0ab\\x09c"


def test_the_lint_listing_prints_a_node_name_on_one_line():
    onnx = pytest.importorskip("onnx")
    from ncet.onnx.lint import lint_onnx

    model = ncet.to_onnx(_ir())
    model.graph.node.append(onnx.helper.make_node("Max", [model.graph.node[0].output[0]] * 2,
                                                  ["unused"], name=f"m\r\n{FAKE}"))
    report = lint_onnx(model, "eran")
    text = str(report)
    assert f"m\\x0d\\x0a{FAKE}" in text
    assert not any(line.startswith(FAKE) for line in text.splitlines())
