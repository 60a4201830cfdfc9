"""The explorable graph (ncet.widgets.GraphView) and the Workbench's shared selection: module
calls checked against the IR's module paths, the layout against the graph's edges (every edge
runs downward, clusters in the order of the calls), node boxes against the IR's attributes and
constants, the search against the IR, the selection against every tab, and the static forms
for determinism."""

from __future__ import annotations

import hashlib
import html
import os
import re
import subprocess
import sys

import pytest
from torch import nn

import ncet
from ncet.examples import load_example

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")
pytest.importorskip("matplotlib")

from ncet import widgets  # noqa: E402
from ncet.render import ROOT, Groups, layout_of  # noqa: E402
from tests.zoo_models import TVResNet  # noqa: E402


def ir_of(name: str) -> ncet.GraphIR:
    model, shapes = load_example(name)
    return ncet.convert(model, *shapes)


def chain(blocks: int) -> nn.Module:
    return nn.Sequential(*[m for _ in range(blocks) for m in (nn.Linear(3, 3), nn.ReLU())])


def svg_ids(svg: str, kind: str) -> list[str]:
    """The ids of the SVG's `<g class="node|cluster">` elements, unescaped."""
    return [html.unescape(i) for i in re.findall(rf'<g id="([^"]+)" class="{kind}\b', svg)]


# -- grouping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["residual_cnn", "lenet", "mlp"])
def test_every_node_sits_in_the_group_of_its_module_path(name):
    ir = ir_of(name)
    groups = Groups(ir)
    assert set(groups.owner) == {n.name for n in ir.nodes}
    for node in ir.nodes:
        owner = groups.owner[node.name]
        path = node.source.module_path
        assert owner == ROOT or path == owner or path.startswith(owner + "."), (node, owner)
    for group in groups.groups.values():  # sizes add up over the tree
        inside = sum(1 if i not in groups.groups else groups.groups[i].size for i in group.items)
        assert group.size == inside and group.size > 1 or group.id == ROOT
    assert groups.groups[ROOT].size == len(ir.nodes)


def test_residual_blocks_are_groups_with_their_nodes():
    groups = Groups(ir_of("residual_cnn"))
    assert {"stem", "block1", "block2", "block2.skip", "head"} <= set(groups.groups)
    assert groups.groups["block2.skip"].parent == "block2"
    assert groups.groups["block2.skip"].items == ["block2_skip_0", "block2_skip_1"]
    assert "block1_conv1" in groups.groups["block1"].items  # a one-node module: no group
    assert groups.ancestors("block2_skip_0") == ["block2.skip", "block2", ROOT]


def test_a_long_sequential_is_split_into_blocks_and_edges_follow_the_closed_groups():
    ir = ncet.convert(chain(150), (3,))  # 302 nodes, each its own one-node module
    groups = Groups(ir, fanout=10)
    assert all(len(g.items) <= 10 for g in groups.groups.values())
    shown = groups.visible({ROOT})
    assert len(shown.boxes) == 4 and not shown.nodes  # blocks of 100 nodes (10 x 10)
    assert sum(groups.groups[b].size for b in shown.boxes) == len(ir.nodes)
    assert [n for *_, n in shown.edges] == [1, 1, 1]  # a chain of blocks
    everything = groups.visible(set(groups.groups))
    assert sorted(everything.nodes) == sorted(n.name for n in ir.nodes)
    assert sum(n for *_, n in everything.edges) == sum(len(n.inputs) for n in ir.nodes)
    assert len(groups.visible(groups.default_expanded(50)).nodes) <= 50


# -- grouping by call and the layout ----------------------------------------------------------


class CalledTwice(nn.Module):
    """A two-layer module called twice, a residual add between the calls."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.inner(x)
        return self.inner(self.fc(y) + y)


def tv_resnet_ir() -> ncet.GraphIR:
    """torchvision's ResNet (two BasicBlocks, one shared `self.relu` each, called twice)."""
    return ncet.convert(TVResNet().eval(), (3, 32, 32), rewrite=True)


def bottom(box) -> float:
    return box[1] + box[3]


def test_a_module_called_twice_is_two_clusters_in_the_order_of_the_calls():
    ir = ncet.convert(CalledTwice(), (4,))
    groups = Groups(ir)
    first, second = groups.groups["inner"], groups.groups["inner@2"]
    assert (first.module, first.call, second.module, second.call) == ("inner", 1, "inner", 2)
    assert second.label == "inner (call 2)" and first.size == second.size == 2
    (add,) = [n.name for n in ir.nodes if n.op_type == "Add"]
    items = groups.groups[ROOT].items
    assert items.index("inner") < items.index(add) < items.index("inner@2")
    for call in ("inner", "inner@2"):  # each call holds the nodes that ran in it
        assert all(ir.node(n).source.module_path.startswith("inner.")
                   for n in groups.groups[call].items)
    assert groups.in_call_order(["inner@2", "inner", ROOT]) == [ROOT, "inner", "inner@2"]
    layout = layout_of(groups, set(groups.groups))
    assert bottom(layout.clusters["inner"]) < layout.boxes[add][1]
    assert bottom(layout.boxes[add]) < layout.clusters["inner@2"][1]


def test_torchvision_basic_block_draws_its_second_relu_below_the_residual_add():
    ir = tv_resnet_ir()
    groups = Groups(ir)
    relus = [n.name for n in ir.nodes if n.source.module_path == "layer1.0.relu"]
    assert len(relus) == 2
    assert "layer1.0.relu" not in groups.groups, "two calls drawn as one cluster"
    assert [groups.owner[r] for r in relus] == ["layer1.0", "layer1.0"]
    (add,) = [n.name for n in ir.nodes if n.op_type == "Add"
              and n.source.module_path == "layer1.0"]
    layout = layout_of(groups, set(groups.groups))
    assert bottom(layout.boxes[relus[0]]) < layout.boxes[add][1]
    assert bottom(layout.boxes[add]) < layout.boxes[relus[1]][1]


def drawings():
    chained = ncet.convert(chain(150), (3,))
    return [("residual_cnn", ir_of("residual_cnn"), None), ("lenet", ir_of("lenet"), None),
            ("tv_resnet", tv_resnet_ir(), None), ("called_twice",
                                                  ncet.convert(CalledTwice(), (4,)), None),
            ("chain_blocks_closed", chained, 50), ("chain_blocks_open", chained, 400)]


@pytest.fixture(scope="module")
def laid_out():
    out = []
    for name, ir, budget in drawings():
        groups = Groups(ir, fanout=10)
        expanded = groups.default_expanded(budget) if budget else set(groups.groups)
        out.append((name, groups, expanded, layout_of(groups, expanded)))
    return out


def test_every_edge_runs_downward(laid_out):
    for name, groups, expanded, layout in laid_out:
        shown = groups.visible(expanded)
        assert len(layout.edges) == len(shown.edges)
        for source, target, points in layout.edges:
            ys = [y for _, y in points]
            assert ys == sorted(ys) and ys[0] < ys[-1], (name, source, target, points)
            assert points[0][1] == bottom(layout.boxes[source])
            assert points[-1][1] == layout.boxes[target][1]


def test_edges_run_beside_the_boxes_they_pass(laid_out):
    """A residual skip is drawn beside the block's boxes, not through them: each piece of an
    edge (a line, or a curve leaving and entering its ends vertically) stays inside the
    rectangle its two ends span, and no box but the edge's own ends is in it."""
    eps = 1e-6
    for name, _, _, layout in laid_out:
        for source, target, points in layout.edges:
            for (x0, y0), (x1, y1) in zip(points, points[1:]):
                left, right = min(x0, x1), max(x0, x1)
                for item, (x, y, w, h) in layout.boxes.items():
                    if item in (source, target):
                        continue
                    assert not (x + eps < right and left < x + w - eps and y + eps < y1
                                and y0 < y + h - eps), (name, source, target, item,
                                                        (x0, y0), (x1, y1))


def test_boxes_never_overlap_and_sit_inside_their_clusters(laid_out):
    eps = 1e-6  # float sums: a box flush with its frame may be 1e-15 outside

    def inside(box, frame):
        return (frame[0] - eps <= box[0] and box[0] + box[2] <= frame[0] + frame[2] + eps
                and frame[1] - eps <= box[1] and bottom(box) <= bottom(frame) + eps)

    def overlap(a, b):
        return (a[0] + eps < b[0] + b[2] and b[0] + eps < a[0] + a[2]
                and a[1] + eps < bottom(b) and b[1] + eps < bottom(a))

    for name, groups, expanded, layout in laid_out:
        shown = groups.visible(expanded)
        assert set(layout.boxes) == set(shown.nodes) | set(shown.boxes)
        assert set(layout.clusters) == set(shown.clusters)
        for item, box in layout.boxes.items():
            for group in groups.ancestors(item):
                assert inside(box, layout.clusters[group]), (name, item, group)
        for cluster in shown.clusters:  # siblings (boxes and clusters) apart
            items = groups.groups[cluster].items
            frames = [layout.clusters.get(i) or layout.boxes[i] for i in items]
            for k, a in enumerate(frames):
                for j in range(k):
                    assert not overlap(a, frames[j]), (name, items[k], items[j])


def test_clusters_are_drawn_in_the_order_of_their_calls(laid_out):
    for name, groups, _, layout in laid_out:
        order = groups.in_call_order(layout.clusters)
        tops = [layout.clusters[c][1] for c in order]
        assert tops == sorted(tops), (name, list(zip(order, tops)))


def test_the_layout_is_the_same_in_another_process():
    code = ("import hashlib, ncet; from ncet.render import Groups; "
            "from ncet.render import to_svg; "
            "from ncet.examples import load_example; m, s = load_example('residual_cnn'); "
            "g = Groups(ncet.convert(m, *s)); "
            "print(hashlib.sha256(to_svg(g, set(g.groups)).encode()).hexdigest())")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    groups = Groups(ir_of("residual_cnn"))
    from ncet.render import to_svg

    assert result.stdout.strip() == hashlib.sha256(
        to_svg(groups, set(groups.groups)).encode()).hexdigest()


# -- search -----------------------------------------------------------------------------------


def synthetic_ir(count: int) -> ncet.GraphIR:
    """`count` nodes in a chain, in modules of two (`layers.K`), each its own source line;
    one LeakyReLU in the middle."""
    nodes = [ncet.IRNode("x", "Input", (), {"index": 0}, (4,), "float32",
                         ncet.Source("x", "placeholder", "x"))]
    for k in range(count):
        op, attrs = ("LeakyReLU", {"negative_slope": 0.1}) if k == count // 2 else ("ReLU", {})
        name = f"{op.lower()}_{k}"
        nodes.append(ncet.IRNode(name, op, (nodes[-1].name,), attrs, (4,), "float32",
                                 ncet.Source(name, "call_function", "relu", f"layers.{k // 2}",
                                             "", f"model.py:{100_000 + k}")))
    nodes.append(ncet.IRNode("output", "Output", (nodes[-1].name,), {"tuple": False}, None, "",
                             ncet.Source("output", "output", "output")))
    return ncet.GraphIR(tuple(nodes), {})


@pytest.fixture(scope="module")
def big_view():
    return widgets.GraphView(synthetic_ir(20_000))


@pytest.mark.parametrize("query, found", [
    ("relu_19999", "relu_19999"),  # a name
    ("LEAKYRELU", "leakyrelu_10000"),  # an op_type, case ignored
    ("model.py:100017", "relu_17"),  # a source line
    (" relu_4242 ", "relu_4242"),  # blanks around it
])
def test_search_finds_a_node_by_name_op_type_or_source_line_among_20000(big_view, query,
                                                                          found):
    view = big_view
    assert len(view.ir.nodes) == 20_002
    assert view.find(query) == found
    assert view.selected == view.canvas.selected == found
    assert set(view.groups.ancestors(found)) <= view.expanded, "its groups opened"
    assert f'id="n:{found}"' in view.canvas.svg
    assert "1 of 1" in view.found.value


def test_search_steps_through_the_matches_and_says_when_none(big_view):
    view = big_view
    matches = view.search("relu_1999")  # relu_1999, relu_19990 ... relu_19999
    assert matches == ["relu_1999", *[f"relu_{k}" for k in range(19990, 20000)]]
    assert [view.find("relu_1999") for _ in range(3)] == matches[:3]
    assert "3 of 11" in view.found.value
    view.search_box.value = "relu_1999"  # typed, then Enter: the next match
    assert view.selected == matches[3] and "4 of 11" in view.found.value
    view.next_match.click()  # Enter again sends nothing (the value is unchanged): "next"
    assert view.selected == matches[4] and "5 of 11" in view.found.value
    view.search_box.value = "no such thing"  # Enter in the box
    assert view.selected == matches[4] and "no node matches" in view.found.value
    assert view.search("   ") == []


# -- node data --------------------------------------------------------------------------------


def test_boxes_carry_shape_constant_shapes_and_attributes():
    ir = ir_of("residual_cnn")
    view = widgets.GraphView(ir)
    facts = view.node_data("block2_conv1")
    assert facts["op_type"] == "Conv2d" and facts["shape"] == "16×16×16"
    weight = ir.constants["block2.conv1.weight"]
    assert facts["constants"]["weight"] == ("block2.conv1.weight",
                                            "×".join(map(str, weight.shape)), "float32")
    assert facts["attrs"]["stride"] == "[2,2]"
    svg = html.unescape(view.canvas.svg)
    assert sorted(i[2:] for i in svg_ids(svg, "node")) == sorted(n.name for n in ir.nodes)
    assert "weight 16×8×3×3" in svg and "stride=[2,2]" in svg  # on the box
    assert "weight = block2.conv1.weight float32 [16×8×3×3]" in svg  # in the tooltip
    assert {i[2:] for i in svg_ids(svg, "cluster")} == set(view.groups.groups) - {ROOT}


# -- the view ---------------------------------------------------------------------------------


def test_select_sets_selected_and_opens_the_groups_around_a_hidden_node():
    ir = ir_of("residual_cnn")
    view = widgets.GraphView(ir)
    assert "ncet-graph-view" in view._dom_classes
    assert "ncet-graph-figure" in view.canvas._dom_classes
    view.toggle("block2")
    assert "block2" not in view.expanded and "block2.skip" not in view.expanded
    assert "g:block2" in svg_ids(view.canvas.svg, "node")
    view.select("block2_skip_1")
    assert view.selected == view.canvas.selected == "block2_skip_1"
    assert {"block2", "block2.skip"} <= view.expanded
    assert view.canvas.focus == "n:block2_skip_1"
    view.canvas.selected = "fc"  # a click in the browser
    assert view.selected == "fc"
    view._on_message(view.canvas, {"event": "toggle", "group": "head"}, [])
    assert "head" not in view.expanded
    with pytest.raises(KeyError):
        view.select("no_such_node")


def test_selections_one_after_another_do_not_open_the_whole_graph():
    """The groups opened to show one selected node close again at the next selection."""
    model = chain(300)  # 600 nodes: split into blocks, most of them closed
    view = widgets.GraphView(ncet.convert(model, (3,)), budget=60)
    names = [n.name for n in view.ir.nodes if n.op_type == "Linear"]
    sizes = []
    for name in names[40::60]:
        view.select(name)
        assert view.selected == name and set(view.groups.ancestors(name)) <= view.expanded
        sizes.append(len(view.expanded))
    assert max(sizes) == sizes[0], f"the open groups grew with each selection: {sizes}"


def test_the_static_form_is_deterministic_and_bounded():
    ir = ir_of("lenet")
    first = widgets.GraphView(ir).to_html()
    assert first == widgets.graph_view_html(ir) and "<svg" in first
    assert " at 0x" not in first and "<!--" not in first and "<?xml" not in first
    code = ("import hashlib, ncet; from ncet import widgets; "
            "from ncet.examples import load_example; m, s = load_example('lenet'); "
            "print(hashlib.sha256(widgets.graph_view_html(ncet.convert(m, *s)).encode())"
            ".hexdigest())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    import hashlib

    assert result.stdout.strip() == hashlib.sha256(first.encode()).hexdigest()
    big = widgets.GraphView(ncet.convert(chain(200), (3,)))  # 402 nodes: shown in blocks
    bundle = big._repr_mimebundle_()["text/html"]
    assert len(svg_ids(bundle, "node")) <= widgets.graph_view.STATIC_BUDGET


# -- the Workbench ----------------------------------------------------------------------------


def test_selection_is_shared_by_the_workbench_tabs():
    model, shapes = load_example("residual_cnn")
    bench = widgets.Workbench(model, *shapes)
    graph = bench.graph
    graph.select("block1_conv1")
    assert bench.mapping.selected == "block1_conv1"
    bench.mapping.select("block2_conv2")
    assert graph.selected == "block2_conv2"
    bench.run_exactness(samples_per_scale=2)
    assert bench.exactness.shown == "block2_conv2"  # a new view takes the selection
    graph.select("fc")
    assert bench.exactness.shown == "fc" and bench.mapping.selected == "fc"
    bench.exactness.select("head_0")
    assert graph.selected == bench.mapping.selected == "head_0"
    lifted = next(r.fx_name for r in bench.report.rows if r.status == "lifted")
    bench.mapping.select(lifted)  # a get_attr row: no IR node, no exactness entry
    assert graph.selected == "head_0" and bench.exactness.shown == "head_0"
    bench.mapping.select("x")  # an Input node: in the graph, not in the exactness panel
    assert graph.selected == "x" and bench.exactness.shown == "head_0"
    bench.select("stem_0")
    assert graph.selected == bench.mapping.selected == bench.exactness.shown == "stem_0"
    with pytest.raises(KeyError):
        bench.select("no_such_node")


def test_save_html_writes_the_report_page(tmp_path):
    from ncet.render import render_report, verdict

    model, shapes = load_example("lenet")
    bench = widgets.Workbench(model, *shapes)
    path = tmp_path / "bench.html"
    bench.save_html(path)
    before = path.read_text()
    assert verdict(bench.report, None)[1] in before  # "converts (exactness not checked)"
    report = bench.run_exactness(samples_per_scale=2)
    bench.save_html(path, title="lenet")
    page = path.read_text()
    assert verdict(bench.report, report)[1] in html.unescape(page)
    expected = render_report(bench.report, report, title="lenet",
                             input_shapes=bench.input_shapes,
                             command="Workbench(..., rewrite=False).save_html()")
    assert page == expected
    assert [p.name for p in tmp_path.iterdir()] == ["bench.html"]  # no temporary left


def test_the_workbench_tabs_and_constants_agree():
    from ncet.widgets import workbench

    model, shapes = load_example("mlp")
    bench = widgets.Workbench(model, *shapes)
    assert bench.titles == workbench.TITLES
    assert workbench.TITLES[workbench.EXACTNESS_TAB] == "Exactness"
    assert workbench.TITLES[workbench.GRAPH_TAB] == "Graph"
    if workbench.SUMMARY_TAB is not None:
        assert workbench.TITLES[workbench.SUMMARY_TAB] == "Summary"
        assert bench._summary is None
        bench.selected_index = workbench.SUMMARY_TAB
        assert bench.children[workbench.SUMMARY_TAB].children == (bench.summary,)


def test_the_drawing_as_it_is_shown_downloads_as_svg():
    import base64
    import re

    from ncet.widgets.graph_view import GraphView

    model, shapes = load_example("lenet")
    view = GraphView(ncet.convert(model, *shapes))
    assert view.svg_link.children == ()  # made on a click only: the SVG can be large
    view.svg_button.click()
    (link,) = view.svg_link.children
    data = re.search(r'href="data:image/svg\+xml;base64,([^"]+)"', link.value).group(1)
    assert base64.b64decode(data).decode() == view.canvas.svg
