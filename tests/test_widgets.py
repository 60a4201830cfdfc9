"""The workbench views (ncet.widgets): driven programmatically, checked against diagnose's rows
and PyTorch's own values as the oracles, by parsing the HTML they render."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser

import pytest

import ncet
from ncet.examples import load_example

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

from ncet import widgets  # noqa: E402

CONVERTING = ("mlp", "lenet", "residual_cnn")
REJECTED = ("many_problems", "training_mode_cnn", "sigmoid_mlp")


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
        assert (row.code, row.message, row.hint, row.location) == (
            source.code, source.message, source.hint, source.location)
    html = widgets.boundary_html(report)
    if report.ok:
        assert "No problems" in html and not Rows(html).rows
    else:
        assert sorted(Rows(html).nodes) == sorted(by_name)
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
    assert "ncet-mapping-table" in table._dom_classes
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
        count = len(expected(report, search=query))
        assert f"of {count} matching ({len(report.rows)} nodes)" in table.count.value


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
        assert table.node.options == tuple(page)
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
