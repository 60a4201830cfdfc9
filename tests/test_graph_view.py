"""The explorable graph (ncet.widgets.GraphView) and the Workbench's shared selection: module
groups checked against the IR's module paths, node boxes against the IR's attributes and
constants, the selection against every tab, and the static forms for determinism."""

from __future__ import annotations

import html
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

from ncet.widgets.graph_dot import dot_available  # noqa: E402
from ncet.widgets.graph_groups import ROOT, Groups  # noqa: E402

from ncet import widgets  # noqa: E402

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed "
                               "(apt-get install graphviz)")


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


# -- node data --------------------------------------------------------------------------------


@needs_dot
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


@needs_dot
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


@needs_dot
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


@needs_dot
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


@needs_dot
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
