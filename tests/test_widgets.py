"""The workbench views (ncet.widgets): driven programmatically, checked against diagnose's rows
and PyTorch's own values as the oracles, by parsing the HTML they render."""

from __future__ import annotations

import html
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from torch import nn

import ncet
from ncet.examples import load_example

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

from ncet import render, widgets  # noqa: E402

CONVERTING = ("mlp", "lenet", "residual_cnn")
REJECTED = ("many_problems", "training_mode_cnn", "sigmoid_mlp", "batch_mixing", "data_dependent")


class Rows(HTMLParser):
    """The `<tr data-node=...>` rows of an HTML fragment: (node, [cell texts])."""

    def __init__(self, text: str):
        super().__init__()
        self.rows: list[tuple[str, list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-node" in attrs:
            self.rows.append((attrs["data-node"], []))
        elif tag == "td" and self.rows:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    @property
    def nodes(self) -> list[str]:
        return [node for node, _ in self.rows]


_REPORTS: dict[str, ncet.ConversionReport] = {}


def report_of(name: str) -> ncet.ConversionReport:
    if name not in _REPORTS:
        model, shapes = load_example(name)
        _REPORTS[name] = ncet.diagnose(model, *shapes)
    return _REPORTS[name]


def expected(report, op_type=None, status=None, search=""):
    """The oracle: diagnose's rows that pass the filters, in graph order."""
    query = search.lower()
    return [r.fx_name for r in report.rows
            if (op_type is None or (r.op_type or "-") == op_type)
            and (status is None or r.status == status)
            and (not query or any(query in (getattr(r, c) or "").lower() for c in
                                  ("fx_name", "spelling", "module_path", "op_type",
                                   "location")))]


# -- static forms ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONVERTING + REJECTED)
def test_mapping_frame_has_every_row(name):
    report = report_of(name)
    frame = widgets.mapping_frame(report)
    assert list(frame.columns) == list(widgets.frames.MAPPING_COLUMNS)
    assert frame["fx_name"].tolist() == [r.fx_name for r in report.rows]
    assert frame["status"].tolist() == [r.status for r in report.rows]
    assert frame["op_type"].tolist() == [r.op_type or "" for r in report.rows]
    assert frame["code"].tolist() == [r.code or "" for r in report.rows]
    assert frame["location"].tolist() == [r.location for r in report.rows]
    html = widgets.mapping_html(report)
    assert Rows(html).nodes == [r.fx_name for r in report.rows]
    assert html == widgets.mapping_html(report_of(name))  # deterministic
    assert " at 0x" not in html and "id=" not in html


@pytest.mark.parametrize("name", CONVERTING)
def test_mapping_frame_constants_are_the_ir_constants(name):
    report = report_of(name)
    frame = widgets.mapping_frame(report).set_index("fx_name")
    used = set()
    for node in report.graph.nodes:
        names = [v for v in node.attrs.values() if isinstance(v, str)
                 and v in report.graph.constants]
        assert frame.loc[node.name, "constants"] == ", ".join(names)
        used.update(names)
    assert used == set(report.graph.constants)  # every constant shows somewhere


@pytest.mark.parametrize("name", CONVERTING + REJECTED)
def test_boundary_forms_list_every_rejected_node(name):
    report = report_of(name)
    frame = widgets.boundary_frame(report)
    problems = [r for r in report.rows if r.status in ("unsupported", "boundary")]
    assert sorted(frame["fx_name"]) == sorted(r.fx_name for r in problems)
    assert frame["code"].tolist() == sorted(frame["code"])
    by_name = {r.fx_name: r for r in problems}
    for row in frame.itertuples():
        source = by_name[row.fx_name]
        assert (row.code, row.message, row.hint, row.location, row.source_text) == (
            source.code, source.message, source.hint, source.location, source.source_text)
    html = widgets.boundary_html(report)
    if report.ok:
        assert "No problems" in html and not Rows(html).rows
    else:
        assert sorted(Rows(html).nodes) == sorted(by_name)
        assert any(r.source_text for r in problems)  # the bundled models' files are readable
        for r in problems:  # the line's code next to its location
            assert widgets.frames.escape(f"{r.location} `{r.source_text}`" if r.source_text
                                         else r.location) in html
        for code in frame["code"].unique():
            assert f'data-code="{code}"' in html


# -- MappingTable -----------------------------------------------------------------------------


def shown(table) -> list[str]:
    return Rows(table.table.value).nodes


@pytest.mark.parametrize("name", CONVERTING + REJECTED)
def test_mapping_table_filters_against_diagnose(name):
    report = report_of(name)
    table = widgets.MappingTable(report, page_size=1000)
    assert shown(table) == expected(report)
    # The DOM contract the browser test relies on.
    assert "ncet-mapping-table" in table._dom_classes
    assert "ncet-filter-op-type" in table.op_type._dom_classes
    assert "ncet-filter-status" in table.status._dom_classes
    assert "ncet-count" in table.count._dom_classes
    assert table.table.value.startswith('<table class="ncet-mapping">')
    for status in table.status.options[1:]:
        table.status.value = status
        assert shown(table) == expected(report, status=status) != []
        assert table.rows()["fx_name"].tolist() == shown(table)
    table.status.value = "all"
    for op in table.op_type.options[1:]:
        table.op_type.value = op
        assert shown(table) == expected(report, op_type=op) != []
    table.op_type.value = "all"
    for query in ("RELU", "conv", "examples.py:9", "nn.", "zzz-none"):
        table.search.value = query
        assert shown(table) == expected(report, search=query)
        count, total = len(expected(report, search=query)), len(report.rows)
        wanted = (f"no node matches '{query}'" if count == 0 else f"of {total} nodes"
                  if count == total else f"of {count} matching ({total} nodes)")
        assert wanted in html.unescape(table.count.value)


def test_mapping_table_combines_filters_and_pages():
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=4)
    everything = expected(report)
    pages = [everything[i:i + 4] for i in range(0, len(everything), 4)]
    assert table.page.max == len(pages)
    seen = []
    for number, page in enumerate(pages, start=1):
        assert table.page.value == number
        assert shown(table) == page
        assert table.node.options == tuple(everything)  # every matching node
        first = 4 * (number - 1) + 1
        assert f"showing {first}–{first + len(page) - 1} of {len(everything)}" \
            in table.count.value
        seen += shown(table)
        table.next.click()
    assert seen == everything
    assert table.page.value == len(pages)  # next stops at the last page
    table.page.value = 2
    table.prev.click()
    assert table.page.value == 1
    table.page.value = 3
    table.op_type.value = "Conv2d"
    table.search.value = "block2"
    assert table.page.value == 1  # a filter change goes back to the first page
    assert table.rows()["fx_name"].tolist() == \
        [n for n in expected(report, op_type="Conv2d") if n in expected(report, search="block2")]
    assert shown(table) == table.rows()["fx_name"].tolist()[:4]


def test_mapping_table_select_shows_attrs_constants_and_source():
    report = report_of("lenet")
    table = widgets.MappingTable(report, page_size=5)
    table.status.value = "mapped"
    table.op_type.value = "ReLU"
    table.select("fc1")  # hidden by the filter: the filters are cleared
    assert table.op_type.value == "all" and "fc1" in shown(table)
    assert table.node.value == "fc1"
    detail = table.detail.value
    weight = report.graph.constants["fc1.weight"]
    for text in ("fc1.weight", "fc1.bias", "[120, 400]", "float32", "examples.py:54",
                 f"{float(weight.double().min()):.6g}", f"{float(weight.double().max()):.6g}",
                 f"{float(weight.double().mean()):.6g}", f"{float(weight.double().std()):.6g}"):
        assert text in detail
    table.node.value = "view"
    assert "shape" in table.detail.value and "[400]" in table.detail.value
    with pytest.raises(KeyError):
        table.select("no_such_node")


def test_mapping_table_detail_of_a_rejected_node_has_message_and_hint():
    report = report_of("many_problems")
    table = widgets.MappingTable(report)
    table.select("relu_")
    row = next(r for r in report.rows if r.fx_name == "relu_")
    assert "inplace" in table.detail.value
    assert "Use x.relu(...) instead" in table.detail.value
    assert row.location in table.detail.value
    assert row.source_text and html.escape(row.source_text) in table.detail.value


def test_import_ncet_stays_free_of_jupyter_dependencies():
    code = ("import sys, ncet; ncet.diagnose; "
            "bad = [m for m in ('ipywidgets', 'matplotlib', 'jupyter', 'IPython', "
            "'ipykernel', 'ncet.widgets') if m in sys.modules]; print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_static_forms_do_not_import_ipywidgets():
    code = ("import sys; from ncet.widgets import mapping_frame, boundary_html; "
            "print('ipywidgets' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# -- BoundaryPanel ----------------------------------------------------------------------------


def test_boundary_panel_groups_by_code_and_filters():
    report = report_of("many_problems")
    panel = widgets.BoundaryPanel(report)
    assert "ncet-boundary-panel" in panel._dom_classes
    codes = sorted({r.code for r in report.errors})
    assert list(panel.code.options) == ["all", *codes]
    assert sorted(Rows(panel.html.value).nodes) == sorted(r.fx_name for r in report.errors)
    for code in codes:
        panel.code.value = code
        assert Rows(panel.html.value).nodes == [r.fx_name for r in report.errors
                                                if r.code == code]
    assert panel.to_html() == widgets.boundary_html(report)


def test_boundary_panel_says_no_problems_when_the_model_converts():
    panel = widgets.BoundaryPanel(report_of("mlp"))
    assert "No problems" in panel.html.value and not Rows(panel.html.value).rows


# -- exactness --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lenet_exactness():
    model, shapes = load_example("lenet")
    return ncet.check_exactness(model, report_of("lenet").graph, samples_per_scale=4)


def labelled(axis, prefix: str):
    return [c for c in axis.collections if c.get_label().startswith(prefix)]


OBSERVED = ("observed", "no error observed", "violation")
"""The labels of an error panel's markers of observed errors, one marker per node."""


def observed_nodes(axis) -> list[int]:
    """The node positions an error panel marks an observed error at, in order."""
    return sorted(int(x) for prefix in OBSERVED for c in labelled(axis, prefix)
                  for x, _ in c.get_offsets())


def test_exactness_figure_draws_every_node_and_marks_violations(lenet_exactness):
    import dataclasses

    report = lenet_exactness
    figure = widgets.exactness_figure(report)
    assert widgets.exactness_figure is render.exactness_figure  # the report's figure
    local, e2e, ratio = figure.axes  # node-local, end to end, their ratio to the bound
    assert all(axis.get_yscale() == "log" for axis in figure.axes)
    assert observed_nodes(local) == observed_nodes(e2e) == list(range(len(report.entries)))
    assert [t.get_text() for t in ratio.get_xticklabels()] == \
        [f"{e.name} ({e.op_type})" for e in report.entries]
    assert not any(labelled(axis, "violation") for axis in (local, e2e))  # within the bounds
    # A report with a violation at node 3: the figure marks exactly that node.
    bad = dataclasses.replace(report.entries[3], local_violations=2)
    broken = dataclasses.replace(report, entries=(*report.entries[:3], bad,
                                                  *report.entries[4:]))
    (marks,) = labelled(widgets.exactness_figure(broken).axes[0], "violation")
    assert [int(x) for x, _ in marks.get_offsets()] == [3]


def test_output_histogram_counts_every_sampled_error(lenet_exactness):
    report = lenet_exactness
    figure = widgets.output_error_figure(report)  # of error / bound per element
    ratios = report.output_ratio_sample()
    counted = sum(p.get_height() for p in figure.axes[0].containers[0])
    exact = int((ratios == 0).sum())
    assert counted + exact == ratios.numel() > 0
    assert f"{ratios.numel()} sampled elements, {exact} exact" in \
        figure.axes[0].get_title(loc="left")


def test_scatter_is_pytorch_against_the_reference(lenet_exactness):
    report = lenet_exactness
    torch_values, reference = report.value_sample("fc2")
    left = widgets.scatter_figure(report, "fc2").axes[0]
    points = left.collections[0].get_offsets()
    assert points[:, 0].tolist() == reference.tolist()
    assert points[:, 1].tolist() == torch_values.tolist()
    with pytest.raises(KeyError):
        widgets.scatter_figure(report, "no_such_node")


def test_exactness_panel_drives_the_scatter_and_states_the_arithmetic(lenet_exactness):
    report = lenet_exactness
    panel = widgets.ExactnessPanel(report)
    assert "ncet-exactness-panel" in panel._dom_classes
    assert list(panel.node.options) == [e.name for e in report.entries]
    assert report.summary().splitlines()[0] in panel.verdict.value.replace("&#x27;", "'")
    for note in report.arithmetic.notes:
        assert escape_text(note) in panel.arithmetic.value
    panel.node.value = "conv1"
    first = panel.scatter.value
    assert "conv1 (Conv2d)" in first
    panel.node.value = "fc3"
    assert "fc3 (Linear)" in panel.scatter.value and panel.scatter.value != first
    rows = Rows(panel.table.value).rows
    assert [node for node, _ in rows] == [e.name for e in report.entries]
    for entry, (_, cells) in zip(report.entries, rows):  # the source line, with its code
        assert entry.source_text and cells[2] == f"{entry.location} `{entry.source_text}`"
    html = panel.to_html()
    assert html == widgets.exactness_html(report, "fc3")  # deterministic
    assert " at 0x" not in html and "<svg" in html


def widened(report, count: int):
    """`report` with `count` entries: its own, renamed n0, n1, ... and given varied ratios
    (a deterministic permutation), so that graph order and worst-first order differ."""
    import dataclasses

    base = report.entries
    entries = tuple(dataclasses.replace(base[i % len(base)], name=f"n{i}",
                                        local_ratio=((i * 7919) % count) / count,
                                        e2e_ratio=((i * 104729) % count) / count / 2)
                    for i in range(count))
    return dataclasses.replace(report, entries=entries)


def test_exactness_panel_pages_the_table_in_graph_and_worst_order(lenet_exactness):
    report = widened(lenet_exactness, 1234)
    panel = widgets.ExactnessPanel(report, page_size=50)
    names = [e.name for e in report.entries]
    assert panel.pages == 25 and panel.page.max == 25
    assert Rows(panel.table.value).nodes == names[:50]
    assert "showing 1–50 of 1234 nodes (1234 nodes)" in panel.count.value
    panel.next.click()
    panel.next.click()
    assert Rows(panel.table.value).nodes == names[100:150]
    panel.prev.click()
    assert Rows(panel.table.value).nodes == names[50:100]
    panel.page.value = 25
    assert Rows(panel.table.value).nodes == names[1200:]
    assert panel.next.disabled and "showing 1201–1234" in panel.count.value
    # Worst ratio first (no violations here): by max(local, e2e ratio), largest first.
    worst = sorted(report.entries, key=lambda e: -max(e.local_ratio, e.e2e_ratio))
    panel.order.value = "worst"
    assert panel.page.value == 1
    assert Rows(panel.table.value).nodes == [e.name for e in worst[:50]]
    panel.page.value = 2
    assert Rows(panel.table.value).nodes == [e.name for e in worst[50:100]]
    assert [e.name for e in panel.entries()] == [e.name for e in worst]
    # The cells are the entries' numbers.
    first = Rows(panel.table.value).rows[0]
    assert first[1][:2] == [worst[50].name, worst[50].op_type]
    assert first[1][5] == ncet.render.ratio_text(worst[50].local_ratio)  # node, op_type,
    # source, error, bound, ratio


def test_exactness_figure_draws_many_nodes_and_bounds_near_overflow(lenet_exactness):
    import dataclasses

    from ncet.widgets import static

    report = widened(lenet_exactness, 1000)
    huge = tuple(dataclasses.replace(e, e2e_bound=1.5e308 if i % 2 else float("inf"))
                 for i, e in enumerate(report.entries))  # deep models' end-to-end bounds
    report = dataclasses.replace(report, entries=huge)
    figure = widgets.exactness_figure(report)
    axis, e2e = figure.axes[:2]
    (bars,) = labelled(axis, "certified bound")  # one collection, not patches
    assert len(bars.get_paths()) == sum(e.local_bound > 0 for e in report.entries)
    assert len(axis.patches) == 1  # the band where zeros are drawn, no bar patches
    assert observed_nodes(axis) == list(range(1000))
    (bars,) = labelled(e2e, "certified bound")  # huge and infinite: drawn at the ceiling
    assert max(y for path in bars.get_paths() for _, y in path.vertices) == \
        render.plots.CEILING
    assert static.figure_html(figure, "e", 1000).startswith("<img")  # renders (PNG)


def test_exactness_panel_stays_bounded_on_a_large_report(lenet_exactness):
    report = widened(lenet_exactness, 3000)
    panel = widgets.ExactnessPanel(report)
    assert len(Rows(panel.table.value).rows) == 50
    assert len(panel.table.value) < 50 * 400  # one page of rows, not 3,000
    assert len(panel.node.options) == 50
    assert list(panel.node.options) == [e.name for e in sorted(
        report.entries, key=lambda e: -max(e.local_ratio, e.e2e_ratio))[:50]]
    # The static form keeps the MAX_STATIC_ROWS worst rows, in graph order, and says so.
    from ncet.widgets import static

    html = static.static_nodes_html(report)
    kept = {e.name for e in sorted(report.entries,
                                   key=lambda e: -max(e.local_ratio, e.e2e_ratio))[:500]}
    assert Rows(html).nodes == [e.name for e in report.entries if e.name in kept]
    assert "2500 rows are left out" in html
    small = static.static_nodes_html(lenet_exactness)
    assert Rows(small).nodes == [e.name for e in lenet_exactness.entries]
    assert "left out" not in small


def test_exactness_panel_violations_filter_shows_exactly_the_violated_nodes():
    import dataclasses

    from ncet.ir import GraphIR

    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, "bias": None})
                  if n.name == "layers_2" else n for n in ir.nodes)  # a seeded converter bug
    report = ncet.check_exactness(model, GraphIR(nodes, dict(ir.constants)),
                                  samples_per_scale=2)
    violated = [e.name for e in report.entries if e.violated]
    assert report.first_violation.name == "layers_2" and "layers_2" in violated
    assert len(violated) < len(report.entries)
    panel = widgets.ExactnessPanel(report, page_size=2)
    assert panel.shown == "layers_2" and "layers_2 (Linear)" in panel.scatter.value
    panel.violations.value = True
    assert [e.name for e in panel.entries()] == violated
    assert Rows(panel.table.value).nodes == violated[:2]
    assert all(cells[-1] == "VIOLATED" for _, cells in Rows(panel.table.value).rows)
    assert f"of {len(violated)} violated ({len(report.entries)} nodes)" in panel.count.value
    panel.violations.value = False
    assert [e.name for e in panel.entries()] == [e.name for e in report.entries]


def test_exactness_panel_chooser_accepts_any_node_and_refuses_unknown_names(lenet_exactness):
    from ncet.widgets import static

    report = lenet_exactness
    panel = widgets.ExactnessPanel(report, choices=3)
    worst = sorted(report.entries, key=lambda e: (not e.violated,
                                                  -max(e.local_ratio, e.e2e_ratio)))
    assert list(panel.node.options) == [e.name for e in worst[:3]]
    name = next(e.name for e in report.entries[::-1]
                if e.name not in panel.node.options and e.op_type in ("Linear", "Conv2d"))
    entry = next(e for e in report.entries if e.name == name)
    panel.node.value = name  # typed: not among the options offered
    assert panel.shown == name and panel.message.value == ""
    assert f"{name} ({entry.op_type})" in panel.scatter.value
    assert panel.scatter.value == static.figure_html(
        widgets.scatter_figure(report, name), "ncet-scatter")
    drawn = panel.scatter.value
    panel.node.value = "no_such_node"
    assert "no_such_node" in panel.message.value and panel.node.value == name
    assert panel.shown == name and panel.scatter.value == drawn
    with pytest.raises(KeyError):
        panel.select("no_such_node")
    panel.select("conv1")
    assert panel.node.value == "conv1" and "conv1 (Conv2d)" in panel.scatter.value
    assert panel.message.value == ""


def escape_text(text: str) -> str:
    import html

    return html.escape(text)


# -- graph ------------------------------------------------------------------------------------


def chain(blocks: int):
    from torch import nn

    return nn.Sequential(*[m for _ in range(blocks) for m in (nn.Linear(3, 3), nn.ReLU())])


def drawn_nodes(figure) -> list[str]:
    """The node names in the drawn boxes, in drawing order."""
    axis = figure.axes[0]
    return [t.get_text().split("\n")[0] for t in axis.texts if t.get_bbox_patch() is not None]


def test_graph_figure_draws_every_node_and_edge_colored_by_op_type():
    ir = report_of("residual_cnn").graph
    figure = widgets.graph_figure(ir)
    assert drawn_nodes(figure) == [n.name for n in ir.nodes]
    axis = figure.axes[0]
    boxes = {t.get_text().split("\n")[0]: t.get_bbox_patch().get_edgecolor()
             for t in axis.texts if t.get_bbox_patch() is not None}
    by_op = {}
    for node in ir.nodes:
        by_op.setdefault(node.op_type, set()).add(tuple(boxes[node.name]))
    assert all(len(colors) == 1 for colors in by_op.values())  # one colour per op_type
    assert len({next(iter(c)) for c in by_op.values()}) == len(by_op)  # distinct colours
    arrows = [c for c in axis.get_children() if type(c).__name__ == "Annotation"]
    named = sum(t.get_text().startswith("from ") for t in axis.texts)
    edges = sum(len(n.inputs) for n in ir.nodes)
    assert len(arrows) + sum(t.get_text().count(",") + 1 for t in axis.texts
                             if t.get_text().startswith("from ")) == edges
    assert named >= 1  # 32 layers fold into two columns; the fold is named, not drawn


def test_graph_figure_pages_beyond_max_nodes():
    ir = ncet.convert(chain(60), (3,))  # 122 nodes
    first = widgets.graph_figure(ir)
    assert drawn_nodes(first) == [n.name for n in ir.nodes[:100]]
    assert "showing nodes 1–100 of 122 (page 1 of 2)" in first.axes[0].get_title(loc="left")
    second = widgets.graph_figure(ir, start=100)
    assert drawn_nodes(second) == [n.name for n in ir.nodes[100:]]
    assert "showing nodes 101–122 of 122 (page 2 of 2)" in second.axes[0].get_title(loc="left")
    assert f"from {ir.nodes[99].name}" in [t.get_text() for t in second.axes[0].texts]
    small = widgets.graph_figure(report_of("mlp").graph)
    assert "showing" not in small.axes[0].get_title(loc="left")


# -- Workbench --------------------------------------------------------------------------------


def test_workbench_is_lazy_and_run_exactness_fills_the_panel(monkeypatch):
    calls = []
    real = ncet.check_exactness

    reports = []  # (done, total) as check_exactness reports them

    def counting(*args, **kwargs):
        calls.append(kwargs)
        if callable(kwargs.get("progress")):
            bar = kwargs["progress"]
            kwargs = {**kwargs, "progress": lambda done, total: (reports.append((done, total)),
                                                                 bar(done, total))}
        return real(*args, **kwargs)

    monkeypatch.setattr(ncet, "check_exactness", counting)
    model, shapes = load_example("mlp")
    bench = widgets.Workbench(model, *shapes)
    assert "ncet-workbench" in bench._dom_classes
    assert bench.titles[:4] == ("Mapping", "Support boundary", "Exactness", "Graph")
    assert Rows(bench.mapping.table.value).nodes == [r.fx_name for r in bench.report.rows]
    assert bench._graph is None
    for index in (1, 2, 0):
        bench.selected_index = index
    assert calls == [] and bench.exactness is None and bench._graph is None
    bench.selected_index = 3
    assert isinstance(bench._graph, widgets.GraphView)
    assert bench.children[3].children == (bench.graph,)
    assert calls == []
    values = []  # the bar's value after each change
    bench.progress.observe(lambda change: values.append(change["new"]), "value")
    report = bench.run_exactness(samples_per_scale=2, chunk_size=2)
    assert len(calls) == 1 and callable(calls[0]["progress"])
    # the check's own reports move the bar forward, over three chunks of node steps, to full
    assert len(reports) >= 2 and reports[-1][0] == reports[-1][1] == bench.progress.max
    assert values == [done for done, _ in reports] and bench.progress.max % 3 == 0
    assert bench.exactness_report is report and report.ok
    assert bench.exactness in bench.children[2].children
    assert Rows(bench.exactness.table.value).nodes == [e.name for e in report.entries]
    bench.mapping.select("layers_2")  # the mapping table's choice drives the scatter
    assert bench.exactness.node.value == "layers_2"
    assert "layers_2 (Linear)" in bench.exactness.scatter.value
    html = bench.to_html()
    assert Rows(html).nodes[:len(bench.report.rows)] == [r.fx_name for r in bench.report.rows]
    assert report.summary().splitlines()[0] in html.replace("&#x27;", "'")


def test_workbench_mapping_choice_drives_any_checked_node():
    """Beyond 50 nodes the chooser offers only the worst ones; the mapping table still
    drives the scatter to any checked node, and a node without an entry changes nothing."""
    model = nn.Sequential(*[m for _ in range(40) for m in (nn.Linear(3, 3), nn.ReLU())]).eval()
    bench = widgets.Workbench(model, (3,))
    report = bench.run_exactness(samples_per_scale=2)
    assert len(report.entries) == 80 and len(bench.exactness.node.options) <= 51
    offered = set(bench.exactness.node.options)
    other = next(e.name for e in report.entries if e.name not in offered)
    bench.mapping.select(other)
    assert bench.exactness.shown == other and bench.exactness.node.value == other
    bench.mapping.select("input_1")  # an Input node has no exactness entry
    assert bench.exactness.shown == other


def test_workbench_on_a_rejected_model():
    model, shapes = load_example("many_problems")
    bench = widgets.Workbench(model, *shapes)
    assert bench.run_button.disabled and bench.graph is None
    assert sorted(Rows(bench.boundary.html.value).nodes) == \
        sorted(r.fx_name for r in bench.report.errors)
    with pytest.raises(ncet.ConversionError):
        bench.run_exactness()
    assert "does not convert" in bench.to_html()


def test_static_html_is_the_same_in_another_process():
    report = report_of("lenet")
    forms = (widgets.mapping_html(report), widgets.boundary_html(report),
             widgets.graph_html(report.graph))
    code = ("import hashlib, ncet; from ncet import widgets; "
            "from ncet.examples import load_example; m, s = load_example('lenet'); "
            "r = ncet.diagnose(m, *s); "
            "print([hashlib.sha256(h.encode()).hexdigest() for h in (widgets.mapping_html(r), "
            "widgets.boundary_html(r), widgets.graph_html(r.graph))])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    import hashlib

    assert result.stdout.strip() == str([hashlib.sha256(h.encode()).hexdigest() for h in forms])


# --- the display: the live widget and its static HTML ----------------------------------------

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def views_of(name: str, lenet_exactness) -> dict:
    model, shapes = load_example(name)
    bench = widgets.Workbench(model, *shapes)
    return {"Workbench": bench, "MappingTable": bench.mapping, "BoundaryPanel": bench.boundary,
            "GraphView": bench.graph, "ExactnessPanel": widgets.ExactnessPanel(lenet_exactness)}


@pytest.mark.parametrize("view", ["Workbench", "MappingTable", "BoundaryPanel", "GraphView",
                                  "ExactnessPanel"])
def test_every_view_displays_its_static_html_beside_the_widget(view, lenet_exactness):
    widget = views_of("lenet", lenet_exactness)[view]
    bundle = widget._repr_mimebundle_()
    assert bundle[WIDGET_VIEW]["model_id"] == widget.model_id
    assert bundle["text/html"] == widget.to_html()
    assert bundle["text/plain"].startswith(f"<{view} widget") and "children=" not in \
        bundle["text/plain"]


def test_the_displayed_mapping_table_of_a_large_model_is_capped_but_to_html_is_whole():
    from ncet.widgets.display import STATIC_ROWS

    report = ncet.diagnose(chain(STATIC_ROWS // 2 + 10), (3,))  # two FX nodes per block
    table = widgets.MappingTable(report)
    shown_rows = Rows(table._repr_mimebundle_()["text/html"]).nodes
    assert shown_rows == [r.fx_name for r in report.rows][:STATIC_ROWS]
    assert f"and {len(report.rows) - STATIC_ROWS} more nodes" in \
        table._repr_mimebundle_()["text/html"]
    assert len(Rows(table.to_html()).nodes) == len(report.rows)


@pytest.mark.parametrize("notebook", ["quickstart.ipynb", "residual-cnn-end-to-end.ipynb"])
def test_a_stored_notebook_shows_the_workbench_tables_without_a_kernel(notebook):
    """nbconvert, like GitHub and nbviewer, has no widget state for the stored Workbench: it
    shows the static HTML, with the mapping table's rows."""
    import nbformat
    from nbconvert import HTMLExporter

    path = Path(__file__).resolve().parents[1] / "notebooks" / notebook
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"
             and any(WIDGET_VIEW in o.get("data", {}) for o in c.outputs)]
    assert cells, f"{notebook} displays no widget"
    for cell in cells:
        (output,) = [o for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
        assert "ncet-static" in output.data["text/html"], f"{notebook}: no static form stored"
    page, _ = HTMLExporter().from_notebook_node(nb)
    assert 'class="ncet-mapping"' in page and "ncet-workbench-static" in page
    assert "Workbench(children=" not in page and "Error displaying widget" not in page
    rows = Rows(page).nodes
    assert rows, "no mapping-table rows rendered"
