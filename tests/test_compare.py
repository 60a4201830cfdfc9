"""`ncet.compare`, `ncet diff`, the compare and summary views, and the download links."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import struct

import numpy as np
import pytest
import torch
from torch import nn

import ncet
from ncet.changes import Comparison
from ncet.differences import compare, match, same_value
from ncet.examples import load_example
from ncet.ir import GraphIR, IRNode, Source
from tests.test_cli import call  # the command run in this process

from .test_faults import dropped_bias, zoo

pytest.importorskip("ipywidgets")


def mlp(extra_relu: bool = False, stride: int = 1) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers = [nn.Conv2d(3, 4, 3, stride=stride), nn.ReLU(), nn.Flatten(),
                  nn.Linear(4 * (36 if stride == 1 else 9), 5)]
    return nn.Sequential(*layers, *([nn.ReLU()] if extra_relu else [])).eval()


SHAPE = (3, 8, 8)


def with_node(ir: GraphIR, name: str, constants: dict | None = None, **attrs) -> GraphIR:
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, **attrs}) if n.name == name else n
                  for n in ir.nodes)
    return GraphIR(nodes, {**ir.constants, **(constants or {})})


# --- GraphIRs --------------------------------------------------------------------------------


def test_identical_graphs_are_the_same(tmp_path):
    a = ncet.convert(mlp(), SHAPE)
    ncet.save(a, tmp_path / "a.ncet")
    c = compare(a, ncet.load(tmp_path / "a.ncet"))
    assert isinstance(c, Comparison) and c.same
    assert (c.added, c.removed, c.changed) == ((), (), ())
    assert "same" in c.summary() and c.to_pandas().empty
    assert compare(a, ncet.convert(mlp(), SHAPE)).same


def test_one_changed_weight_element_is_reported_with_its_delta():
    a = ncet.convert(mlp(), SHAPE)
    weight = a.constants["3.weight"].clone()
    weight[2, 7] += 0.25
    b = GraphIR(a.nodes, {**a.constants, "3.weight": weight})
    c = compare(a, b)
    assert not c.same and len(c.changed) == 1
    change = c.changed[0]
    assert change.name == "_3" and change.fields == ()
    (constant,) = change.constants
    assert constant.attr == "weight" and not constant.bit_identical
    assert constant.max_abs_diff == pytest.approx(0.25, rel=1e-6)
    assert constant.shape_a == constant.shape_b == (5, 144)
    assert "max |Δ| 0.25, not bit-identical" in c.summary()
    row = c.to_pandas().iloc[0]
    assert row["change"] == "changed" and not row["bit_identical"]


def test_negative_zero_is_not_bit_identical_but_has_no_delta():
    a = ncet.convert(mlp(), SHAPE)
    bias = a.constants["3.bias"].clone()
    bias[0] = 0.0
    zero = GraphIR(a.nodes, {**a.constants, "3.bias": bias})
    negative = GraphIR(a.nodes, {**a.constants, "3.bias": torch.where(
        torch.arange(5) == 0, torch.tensor(-0.0), bias)})
    (constant,) = compare(zero, negative).changed[0].constants
    assert constant.max_abs_diff == 0.0 and not constant.bit_identical


def test_an_added_and_a_removed_node():
    a, b = ncet.convert(mlp(), SHAPE), ncet.convert(mlp(extra_relu=True), SHAPE)
    c = compare(a, b)
    assert c.added == ("_4",) and c.added_op_types == ("ReLU",) and c.removed == ()
    assert c.outputs == (("_3",), ("_4",))
    output = next(x for x in c.changed if x.op_type == "Output")
    assert output.fields == (("inputs", ["_3"], ["_4"]),)
    back = compare(b, a)
    assert back.removed == ("_4",) and back.added == ()
    assert "- added _4 (ReLU)" in c.summary()


def test_an_attribute_change():
    a = ncet.convert(mlp(), SHAPE)
    c = compare(a, with_node(a, "_0", stride=[2, 2]))
    (change,) = c.changed
    assert change.name == "_0" and change.fields == (("stride", [1, 1], [2, 2]),)
    assert change.constants == ()
    assert "stride [1, 1] -> [2, 2]" in c.summary()


def test_renamed_nodes_are_matched_by_position_and_op_type():
    a = ncet.convert(mlp(), SHAPE)
    rename = {n.name: f"r{n.name}" for n in a.nodes}
    b = GraphIR(tuple(dataclasses.replace(n, name=rename[n.name],
                                          inputs=tuple(rename[i] for i in n.inputs))
                      for n in a.nodes), a.constants)
    c = compare(a, b)
    assert c.matched_by_position == len(a.nodes) and not c.added and not c.removed
    assert {x.matched_by for x in c.changed} == {"position"}
    assert all(x.fields == (("name", x.name, rename[x.name]),) for x in c.changed)
    assert not any(c.outputs)  # the output, mapped through the matching, is the same


def test_matching_pairs_leftovers_per_op_type_in_order():
    pairs, removed, added = match([("a", "Linear"), ("b", "ReLU"), ("c", "Linear")],
                                  [("x", "Linear"), ("b", "ReLU"), ("y", "ReLU")])
    assert pairs == {"a": ("x", "position"), "b": ("b", "name")}
    assert removed == ["c"] and added == ["y"]


def test_a_20000_node_graph_compares_in_linear_time():
    source = Source("x", "call_function", "torch.relu")
    nodes = [IRNode("x", "Input", (), {"index": 0}, (4,), "float32", source)]
    nodes += [IRNode(f"r{i}", "ReLU", (nodes[-1].name if i == 0 else f"r{i - 1}",), {}, (4,),
                     "float32", source) for i in range(20_000)]
    a = GraphIR((*nodes, IRNode("output", "Output", ("r19999",), {"tuple": False}, None, "",
                                source)), {})
    renamed = GraphIR(tuple(dataclasses.replace(n, name=f"s{n.name}", inputs=tuple(
        f"s{i}" for i in n.inputs)) if n.op_type == "ReLU" else
        dataclasses.replace(n, inputs=tuple(f"s{i}" for i in n.inputs))
        if n.op_type == "Output" else n for n in a.nodes), {})
    assert compare(a, a).same
    c = compare(a, renamed)
    assert c.matched_by_position == 20_000 and len(c.changed) == 20_000
    assert len(c.summary().splitlines()) < 50  # capped


def test_mixed_types_are_refused():
    ir = ncet.convert(mlp(), SHAPE)
    with pytest.raises(TypeError, match="two GraphIRs or two ExactnessReports"):
        compare(ir, ncet.diagnose(mlp(), SHAPE))


def test_to_dict_is_strict_json():
    a = ncet.convert(mlp(), SHAPE)
    c = compare(a, ncet.convert(mlp(stride=2), SHAPE))
    data = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    assert data["kind"] == "graph" and data["same"] is False
    conv = next(x for x in data["changed"] if x["node"] == "_0")
    assert {"field": "stride", "a": [1, 1], "b": [2, 2]} in conv["fields"]
    linear = next(x for x in data["changed"] if x["node"] == "_3")
    assert linear["constants"][0]["max_abs_diff"] == "nan"  # shapes differ


# --- ExactnessReports ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reports():
    model = zoo()
    ir = ncet.convert(model, (3, 6, 8))
    return (ncet.check_exactness(model, ir, samples_per_scale=4),
            ncet.check_exactness(model, dropped_bias(ir), samples_per_scale=4))


def test_a_seeded_fault_shows_as_a_new_violation_side_by_side(reports):
    good, faulty = reports
    assert compare(good, good).same
    c = compare(good, faulty)
    assert c.kind == "exactness" and not c.same and c.ok == (True, False)
    assert c.new_violations == ("lin",) and c.resolved_violations == ()
    row = next(r for r in c.ratios if r.name == "lin")
    assert (row.status_a, row.status_b, row.change) == ("ok", "violated", "new violation")
    assert row.local_a < 1 < row.local_b and row.e2e_a < 1 < row.e2e_b
    frame = c.to_pandas()
    assert list(frame.columns[3:7]) == ["local_ratio_a", "local_ratio_b", "e2e_ratio_a",
                                        "e2e_ratio_b"]
    assert frame.set_index("node").loc["conv", "change"] == ""
    text = c.summary()
    assert "new violation at lin (Linear): ok -> violated" in text
    assert "new violation at output lin" in text and text.splitlines()[2].startswith("B: VIOL")
    back = compare(faulty, good)
    assert back.resolved_violations == ("lin",) and back.new_violations == ()
    json.dumps(c.to_dict(), allow_nan=False)


# --- ncet diff -------------------------------------------------------------------------------


def test_diff_exit_statuses_and_json(tmp_path, capsys):
    same, other = tmp_path / "a.ncet", tmp_path / "b.ncet"
    ncet.save(ncet.convert(mlp(), SHAPE), same)
    ncet.save(ncet.convert(mlp(extra_relu=True), SHAPE), other)
    status, out, _ = call(capsys, "diff", str(same), str(same))
    assert status == 0 and "the GraphIRs are the same" in out
    status, out, _ = call(capsys, "diff", str(same), str(other))
    assert status == 1 and "- added _4 (ReLU)" in out
    status, out, _ = call(capsys, "diff", str(same), str(other), "--json")
    doc = json.loads(out)
    assert status == 1 and doc["command"] == "diff" and doc["same"] is False
    assert doc["comparison"]["added"] == ["_4"] and doc["error"] is None
    status, out, err = call(capsys, "diff", str(same), str(tmp_path / "missing.ncet"))
    assert status == 2 and "no file" in err
    status, out, err = call(capsys, "diff", str(same))
    assert status == 2 and "usage: ncet diff" in err
    (tmp_path / "bad.ncet").write_bytes(b"not a GraphIR")
    status, out, err = call(capsys, "diff", str(same), str(tmp_path / "bad.ncet"), "--json")
    assert status == 2 and json.loads(out)["ok"] is False


def test_diff_resolves_targets_as_the_other_commands(tmp_path, capsys):
    path = tmp_path / "mlp.ncet"
    assert call(capsys, "convert", "mlp", "-o", str(path))[0] == 0
    assert call(capsys, "diff", str(path), "mlp")[0] == 0
    assert call(capsys, "diff", "mlp", "lenet")[0] == 1
    status, _, err = call(capsys, "diff", "mlp", "many_problems")
    assert status == 2 and "nothing to compare" in err


def test_diff_has_help_with_examples(capsys):
    status, out, _ = call(capsys, "diff", "--help")
    assert status == 0 and "usage: ncet diff" in out and "examples:" in out
    assert "--json" in out and "Exit status 0 when they are the same" in " ".join(out.split())
    assert "    diff" in call(capsys, "--help")[1]


# --- views -----------------------------------------------------------------------------------


def test_compare_view_builds_and_its_static_form_is_deterministic(reports):
    from ncet.widgets.compare import CompareView

    a = ncet.convert(mlp(), SHAPE)
    b = with_node(a, "_0", stride=[2, 2])
    view = CompareView(a, b)
    html = view.to_html()
    assert html == CompareView(a, b).to_html() == CompareView(compare(a, b)).to_html()
    assert "ncet-compare-view" in view._dom_classes and 'data-node="_0"' in html
    assert "stride [1, 1] -&gt; [2, 2]" in html and 'class="ncet-download"' in html
    csv = _data(view.download.value)
    assert csv.decode().splitlines()[0].startswith("node,node_b,op_type,change")
    exact = CompareView(*reports)
    assert exact.table.value.count('data-node="lin"') == 2  # the node and the output
    assert 'class="problem"' in exact.table.value
    exact.all_nodes.value = True
    assert 'data-node="conv"' in exact.table.value
    assert "No node differs" in CompareView(a, a).to_html()


def test_summary_panel_counts_parameters_buffers_and_modules():
    from ncet.widgets.summary import SummaryPanel, module_frame, op_type_frame, totals

    model, shapes = load_example("residual_cnn")
    report = ncet.diagnose(model, *shapes)
    t = totals(report.graph)
    assert t["parameters"] == sum(p.numel() for p in model.parameters())
    assert t["buffers"] == sum(b.numel() for n, b in model.named_buffers()
                               if n.endswith(("running_mean", "running_var")))
    every = module_frame(report.graph)
    block = every.set_index("module").loc["block2"]
    children = every[every["module"].str.startswith("block2.") & (every["depth"] == 2)]
    assert block["parameters"] == children["parameters"].sum()
    assert list(module_frame(report.graph, 1)["depth"].unique()) == [0, 1]
    assert op_type_frame(report.graph).set_index("op_type").loc["Conv2d", "nodes"] == 6
    panel = SummaryPanel(report)
    html = panel.to_html()
    assert html == SummaryPanel(report).to_html() and "block2.skip<" in html
    assert "block2.skip.0" not in html and "block2.skip.0" in SummaryPanel(report, 3).to_html()
    panel.depth.value = 1
    assert "block2.conv1" not in panel.modules.value and "block2" in panel.modules.value
    assert "block2.conv1" not in panel.to_html()
    csv = _data(panel.children[-1].children[0].value).decode()
    assert csv.splitlines()[0] == "module,depth,module_type,nodes,parameters,buffers,other,bytes"
    rejected = SummaryPanel(ncet.diagnose(*load_example("many_problems")[:1],
                                          *load_example("many_problems")[1]))
    assert "does not convert" in rejected.to_html()


# --- downloads -------------------------------------------------------------------------------


def _data(html: str) -> bytes:
    found = re.search(r'href="data:[^;]+;base64,([A-Za-z0-9+/=]*)"', html)
    assert found, html[:200]
    return base64.b64decode(found.group(1))


def test_download_links_carry_the_bytes():
    from ncet.widgets.downloads import MAX_EMBED_BYTES, download_link, link_html

    payload = bytes(range(256)) * 3
    link = download_link(payload, "x.bin", "application/octet-stream", label="get <it>")
    assert _data(link.value) == payload and "ncet-download" in link._dom_classes
    assert 'download="x.bin"' in link.value and "get &lt;it&gt;" in link.value
    assert 'href="data:application/octet-stream;base64,' in link.value
    assert _data(download_link("é,1\n", "a.csv", "text/csv").value) == "é,1\n".encode()
    assert link.value == download_link(payload, "x.bin", "application/octet-stream",
                                       label="get <it>").value
    big = link_html(b"0" * (MAX_EMBED_BYTES + 1), "big.bin", "application/octet-stream")
    assert "data:" not in big and "too large" in big


def test_frame_and_figure_downloads():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from ncet.widgets.downloads import figure_downloads, frame_download

    from ncet.render import new_figure

    frame = pd.DataFrame({"node": ["a", "b"], "ratio": [0.5, 2.0]})
    assert _data(frame_download(frame, "t.csv").value) == b"node,ratio\na,0.5\nb,2.0\n"
    figure, axes = new_figure(3, 2)
    axes[0][0].plot([0, 1], [1, 0])
    box = figure_downloads(figure, "plot")
    svg, png = (_data(child.value) for child in box.children)
    assert svg.startswith(b"<?xml") and b"<svg" in svg
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert 'download="plot.svg"' in box.children[0].value
    assert svg == _data(figure_downloads(figure, "plot").children[0].value)


class Scaled(nn.Module):
    def __init__(self, k: float):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.l = nn.Linear(4, 4)
        self.k = k

    def forward(self, x):
        return self.l(x) * self.k


def test_a_scalar_zero_of_the_other_sign_is_a_change():
    a, b = ncet.convert(Scaled(0.0), (4,)), ncet.convert(Scaled(-0.0), (4,))
    c = compare(a, b)
    assert not c.same
    (change,) = c.changed
    assert change.op_type == "ElementwiseAffine" and [f[0] for f in change.fields] == ["scalar"]
    assert compare(a, ncet.convert(Scaled(0.0), (4,))).same


NAN = float("nan")
OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000123))[0]

ATTRIBUTE_PAIRS = [  # (a, b, the same?)
    (0.0, -0.0, False),
    (-0.0, -0.0, True),
    (NAN, NAN, True),  # the same NaN: no change
    (NAN, OTHER_NAN, False),  # another payload
    (1.0, 1, False),  # a float and an int
    (1, True, False),
    ([0.0, 1.0], [-0.0, 1.0], False),  # inside a list
    ((0.0, 1.0), [0.0, 1.0], True),  # a tuple and a list alike
    ([[1.0, -0.0]], [[1.0, 0.0]], False),  # nested
    ([[NAN]], ([NAN],), True),
    ({"k": [0.0]}, {"k": [-0.0]}, False),
    ({"k": 1.0}, {"k": 1.0}, True),
    ([1, 2], [1, 2, 3], False),
    (np.float64(0.0), np.float64(-0.0), False),  # NumPy floats by their bits too
    (np.float64(NAN), np.float64(NAN), True),
    (np.float64(NAN), np.float64(OTHER_NAN), False),
    (np.float32(-0.0), np.float32(0.0), False),
    (np.float64(1.5), 1.5, True),  # the same float64 (the same JSON number in a file)
    (np.float64(1.0), 1, False),
    ([np.float64(0.0)], (np.float64(-0.0),), False),
]


@pytest.mark.parametrize(("x", "y", "same"), ATTRIBUTE_PAIRS,
                         ids=[f"{x!r}-{y!r}" for x, y, _ in ATTRIBUTE_PAIRS])
def test_attribute_values_are_compared_by_their_bits(x, y, same):
    assert same_value(x, y) is same and same_value(y, x) is same


def test_a_float_attribute_compared_by_its_bits_in_a_graph():
    a = ncet.convert(Scaled(2.0), (4,))
    name = next(n.name for n in a.nodes if n.op_type == "ElementwiseAffine")
    for value, other in ((0.0, -0.0), (NAN, OTHER_NAN), (2.0, 2)):
        x, y = with_node(a, name, scalar=value), with_node(a, name, scalar=other)
        assert not compare(x, y).same
        assert compare(x, with_node(a, name, scalar=value)).same


def test_ir_nodes_are_equal_only_with_bit_identical_attributes():
    a = ncet.convert(Scaled(0.0), (4,))
    node = next(n for n in a.nodes if n.op_type == "ElementwiseAffine")
    assert node == dataclasses.replace(node, attrs=dict(node.attrs))
    assert node == dataclasses.replace(node, source=Source("other", "", ""))  # provenance aside
    for other in (-0.0, 0, NAN):
        assert node != dataclasses.replace(node, attrs={**node.attrs, "scalar": other})
    nan = dataclasses.replace(node, attrs={**node.attrs, "scalar": NAN})
    assert nan == dataclasses.replace(node, attrs={**node.attrs, "scalar": NAN})
    assert nan != dataclasses.replace(node, attrs={**node.attrs, "scalar": OTHER_NAN})


class Sliced(nn.Module):
    def forward(self, x):
        return x[:, 1:3]


def test_a_slice_index_entry_as_a_tuple_is_the_same_slice_to_compare_and_evaluate():
    # a [start, stop, step] entry given as a tuple compares the same as the list, and so it
    # must compute the same: a slice, not an advanced index of positions start, stop, step
    a = ncet.convert(Sliced(), (4,))
    node = next(n for n in a.nodes if n.op_type == "Slice")
    as_tuples = [tuple(e) if isinstance(e, list) else e for e in node.attrs["index"]]
    b = with_node(a, node.name, index=as_tuples)
    assert compare(a, b).same and node == b.node(node.name)
    x = torch.arange(8.0).reshape(2, 4)
    assert torch.equal(ncet.evaluate(b, x), x[:, 1:3])
    assert torch.equal(ncet.evaluate(a, x), x[:, 1:3])


def test_a_numpy_float_attribute_of_the_other_sign_is_a_change():
    a = ncet.convert(Scaled(0.0), (4,))
    name = next(n.name for n in a.nodes if n.op_type == "ElementwiseAffine")
    x, y = with_node(a, name, scalar=np.float64(0.0)), with_node(a, name, scalar=np.float64(-0.0))
    assert not compare(x, y).same and x.node(name) != y.node(name)
    assert compare(x, with_node(a, name, scalar=np.float64(0.0))).same
