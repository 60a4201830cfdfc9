"""The mapping table as a data grid (ncet.widgets.MappingTable): sorting, page size, row
clicks and the shared `selected`, empty states, counts; and the one table style shared by
the views and the HTML report. Checked against diagnose's rows, by parsing the HTML."""

from __future__ import annotations

import html
import math
import re
from html.parser import HTMLParser

import pytest
import traitlets

import ncet
from ncet.examples import load_example

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")

from ncet.widgets import frames, sorting  # noqa: E402

from ncet import render, widgets  # noqa: E402


class Table(HTMLParser):
    """A rendered table: header cells (attributes, text) and body rows (attributes, cells as
    (class, text))."""

    def __init__(self, text: str):
        super().__init__()
        self.head: list[tuple[dict, str]] = []
        self.rows: list[tuple[dict, list[tuple[str, str]]]] = []
        self._open: list | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "th":
            self.head.append((attrs, ""))
            self._open = ["th"]
        elif tag == "tr" and "data-node" in attrs:
            self.rows.append((attrs, []))
        elif tag == "td" and self.rows:
            self.rows[-1][1].append((attrs.get("class") or "", ""))
            self._open = ["td"]

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._open = None

    def handle_data(self, data):
        if self._open == ["th"]:
            attrs, text = self.head[-1]
            self.head[-1] = (attrs, text + data)
        elif self._open == ["td"]:
            cls, text = self.rows[-1][1][-1]
            self.rows[-1][1][-1] = (cls, text + data)

    @property
    def nodes(self) -> list[str]:
        return [attrs["data-node"] for attrs, _ in self.rows]

    def column(self, title: str) -> list[tuple[str, str]]:
        index = [text.strip() for _, text in self.head].index(title)
        return [cells[index] for _, cells in self.rows]


_REPORTS: dict[str, ncet.ConversionReport] = {}


def report_of(name: str) -> ncet.ConversionReport:
    if name not in _REPORTS:
        model, shapes = load_example(name)
        _REPORTS[name] = ncet.diagnose(model, *shapes)
    return _REPORTS[name]


def page(table) -> Table:
    return Table(table.table.value)


def text(value: str) -> str:
    """The visible text of an HTML fragment."""
    return html.unescape(re.sub(r"<[^>]+>", "", value))


# -- sorting ---------------------------------------------------------------------------------

SORTS = [  # (column key, the oracle: a sort key of a diagnose Row)
    ("fx_name", lambda r: sorting.natural_key(r.fx_name)),
    ("op_type", lambda r: sorting.natural_key(r.op_type or "")),
    ("status", lambda r: sorting.status_key(r.status)),
    ("shape", lambda r: (-1,) if r.shape is None else
     (math.prod(r.shape), len(r.shape), *r.shape)),
    ("location", lambda r: sorting.natural_key(r.location)),
]


@pytest.mark.parametrize("ascending", [True, False], ids=["ascending", "descending"])
@pytest.mark.parametrize(("key", "oracle"), SORTS, ids=[s[0] for s in SORTS])
def test_sort_by_a_column_orders_every_row_with_ties_in_graph_order(key, oracle, ascending):
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=1000)
    table.sort_by(key, ascending)
    keys = sorted({oracle(r) for r in report.rows})
    sign = 1 if ascending else -1  # ties stay in graph order either way
    expected = [r for _, r in sorted(enumerate(report.rows),
                                     key=lambda p: (sign * keys.index(oracle(p[1])), p[0]))]
    assert page(table).nodes == [r.fx_name for r in expected]
    assert table.rows()["fx_name"].tolist() == page(table).nodes
    (sorted_header,) = [a for a, _ in page(table).head if "aria-sort" in a]
    assert sorted_header["data-sort"] == key
    assert sorted_header["aria-sort"] == ("ascending" if ascending else "descending")


def test_header_clicks_cycle_ascending_descending_graph_order():
    report = report_of("lenet")
    table = widgets.MappingTable(report, page_size=1000)
    graph = [r.fx_name for r in report.rows]
    assert table.sort == ("#", True) and page(table).nodes == graph
    headers = {a["data-sort"]: t for a, t in page(table).head}
    assert set(headers) == set(frames.SORT_KEYS) and headers["op_type"] == "op_type"
    assert all("ncet-sort" in a["class"] for a, _ in page(table).head)
    for expected in (("op_type", True), ("op_type", False), ("#", True)):
        table.table.click_header("op_type")
        assert table.sort == expected
    assert page(table).nodes == graph
    table.table.click_header("#")
    assert table.sort == ("#", False) and page(table).nodes == graph[::-1]
    with pytest.raises(KeyError):
        table.sort_by("no_such_column")


def test_sorting_keeps_the_filters_and_the_selection():
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=3)
    table.status.value = "mapped"
    table.select("block2_conv1")
    table.sort_by("op_type", ascending=False)
    assert table.status.value == "mapped" and table.selected == "block2_conv1"
    assert "block2_conv1" in page(table).nodes  # the page turned to the selected node
    assert set(table.rows()["status"]) == {"mapped"}


# -- page size, counts ------------------------------------------------------------------------

@pytest.mark.parametrize("size", [10, 25, 50, 100])
def test_page_size_control_sets_the_rows_per_page(size):
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report)
    assert "ncet-page-size" in table.page_size_control._dom_classes
    assert table.page_size_control.value == 25
    table.page_size_control.value = size
    graph = [r.fx_name for r in report.rows]
    assert page(table).nodes == graph[:size]
    assert table.page.max == -(-len(graph) // size)


def test_page_size_change_keeps_the_first_row_shown():
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=10)
    table.page.value = 3  # rows 21-30
    table.page_size_control.value = 25
    assert table.page.value == 1 and report.rows[20].fx_name in page(table).nodes


COUNTS = [  # (filters, the count text's form)
    ({}, "showing 1–{shown} of {total} nodes"),
    ({"status": "lifted"}, "showing 1–{shown} of {matching} matching ({total} nodes)"),
    ({"search": "xyz"}, "no node matches 'xyz'"),
    ({"status": "lifted", "op_type": "Conv2d"}, "no node matches these filters"),
]


@pytest.mark.parametrize(("filters", "form"), COUNTS, ids=["all", "filtered", "search", "none"])
def test_count_text(filters, form):
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report)
    for name, value in filters.items():
        getattr(table, name).value = value
    matching = len(table.rows())
    expected = form.format(shown=min(matching, 25), matching=matching, total=len(report.rows))
    assert text(table.count.value).startswith(expected)
    assert "nodes (" not in table.count.value  # never "of 8 nodes (8 nodes)"


def test_count_helper_forms():
    from ncet.widgets.paging import count_text

    assert count_text(1, 8, 8, 8) == "showing 1–8 of 8 nodes"
    assert count_text(1, 8, 12, 40) == "showing 1–8 of 12 matching (40 nodes)"
    assert count_text(1, 8, 8, 40, which="violated") == "showing 1–8 of 8 violated (40 nodes)"
    assert count_text(0, 0, 0, 40) == "no node matches"


# -- selection -------------------------------------------------------------------------------

def test_clicking_a_row_selects_it_and_shows_its_detail_beside_the_table():
    report = report_of("lenet")
    table = widgets.MappingTable(report, page_size=5)
    seen = []
    table.observe(lambda change: seen.append(change["new"]), names="selected")
    assert table.selected is None and "Click a row" in table.detail.value
    table.table.click_row("conv1")
    assert table.selected == "conv1" and seen == ["conv1"]
    assert table.node.value == "conv1"
    assert "conv1.weight" in table.detail.value and "examples.py:51" in table.detail.value
    (selected,) = [a["data-node"] for a, _ in page(table).rows
                   if "ncet-selected" in (a.get("class") or "")]
    assert selected == "conv1"
    # the detail sits beside the table: one row-wrapping HBox holding both
    body = table.children[-1]
    assert body.layout.flex_flow == "row wrap"
    assert table.table in body.children[0].children and table.detail in body.children[1].children


@pytest.mark.parametrize("how", ["select", "trait", "chooser"])
def test_every_way_of_selecting_sets_selected_and_turns_to_its_page(how):
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=5)
    name = report.rows[-3].fx_name  # on the last page
    table.op_type.value = "Conv2d"  # hides it
    if how == "select":
        table.select(name)
    elif how == "trait":
        table.selected = name
    else:
        table.node.value = name  # typed: not among the names offered
    assert table.selected == name and name in page(table).nodes
    assert table.op_type.value == "all"  # the filters that hid it were cleared
    assert name in text(table.detail.value)


def test_selected_links_with_another_widget_and_refuses_unknown_names():
    import ipywidgets as W

    report = report_of("lenet")
    table = widgets.MappingTable(report)
    other = W.Text()
    traitlets.link((table, "selected"), (other, "value"),
                   transform=(lambda v: v or "", lambda v: v or None))
    other.value = "fc2"
    assert table.selected == "fc2" and "fc2" in page(table).nodes
    table.table.click_row("fc1")
    assert other.value == "fc1"
    with pytest.raises(traitlets.TraitError):
        table.selected = "no_such_node"
    with pytest.raises(KeyError):
        table.select("no_such_node")
    table.node.value = "no_such_node"  # typed in the chooser: refused with a message
    assert table.selected == "fc1" and "no_such_node" in table.message.value
    table.select(None)
    assert table.selected is None and "Click a row" in table.detail.value


def test_the_chooser_offers_every_matching_node_up_to_its_bound():
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=5)
    assert list(table.node.options) == [r.fx_name for r in report.rows]  # not only one page
    table.status.value = "lifted"
    assert list(table.node.options) == [r.fx_name for r in report.rows if r.status == "lifted"]
    bounded = widgets.MappingTable(report, page_size=5, choices=7)
    assert list(bounded.node.options) == [r.fx_name for r in report.rows[:7]]
    bounded.node.value = report.rows[-1].fx_name  # any name can be typed
    assert bounded.selected == report.rows[-1].fx_name


def test_a_search_that_matches_nothing_clears_the_detail_and_says_so():
    report = report_of("lenet")
    table = widgets.MappingTable(report)
    table.select("fc1")
    table.search.value = "xyz"
    assert table.selected is None and table.node.value == ""
    assert "fc1" not in table.detail.value
    assert "no node matches 'xyz'" in text(table.detail.value)
    assert "no node matches 'xyz'" in text(table.table.value)
    assert page(table).nodes == [] and 'class="ncet-empty"' in table.table.value
    table.search.value = ""
    assert "Click a row" in table.detail.value and len(page(table).nodes) == len(report.rows)


def test_a_filter_that_keeps_the_selected_node_keeps_the_selection():
    report = report_of("lenet")
    table = widgets.MappingTable(report)
    table.select("fc1")
    table.search.value = "fc"
    assert table.selected == "fc1" and "fc1.weight" in table.detail.value


def test_csv_of_the_matching_rows():
    import base64

    report = report_of("lenet")
    table = widgets.MappingTable(report)
    table.op_type.value = "Linear"
    table.csv.click()
    data = re.search(r'base64,([A-Za-z0-9+/=]+)"', table.csv_link.value).group(1)
    lines = base64.b64decode(data).decode().splitlines()
    assert lines[0].split(",")[0] == "fx_name"
    assert [line.split(",")[0] for line in lines[1:]] == table.rows()["fx_name"].tolist()
    table.op_type.value = "all"
    assert table.csv_link.value == ""  # a stale download is withdrawn


# -- one table style ------------------------------------------------------------------------

def test_cells_carry_the_nowrap_and_right_align_classes():
    report = report_of("residual_cnn")
    table = widgets.MappingTable(report, page_size=1000)
    parsed = page(table)
    for title, classes in (("#", {"num"}), ("node", {"mono"}), ("shape", {"mono", "shape"}),
                           ("spelling", {"mono"}), ("source", {"mono", "wrap"}),
                           ("module", {"mono", "wrap"}), ("constants", {"mono", "wrap"}),
                           ("op_type", {"nowrap"})):
        assert all(classes <= set(c.split()) for c, _ in parsed.column(title)), title
    # the status pill never wraps; its reason code may go below it in a narrow table
    assert all("nowrap" not in c.split() for c, _ in parsed.column("status"))
    assert [a.get("class") for a, t in parsed.head if t == "#"] == ["num ncet-sort"]
    shapes = dict(zip(parsed.nodes, (t for _, t in parsed.column("shape"))))
    for row in report.rows:
        assert shapes[row.fx_name] == ("-" if row.shape is None else str(list(row.shape)))
    assert '<span class="pill mapped">mapped</span>' in table.table.value
    problem = widgets.MappingTable(report_of("many_problems"), page_size=1000)
    tinted = [a["data-node"] for a, _ in page(problem).rows if "problem" in a.get("class", "")]
    assert tinted == [r.fx_name for r in report_of("many_problems").errors]


def test_the_style_makes_those_classes_compact_nowrap_scrolling_and_themed():
    css = render.css.VIEW_CSS
    for rule in ("white-space: nowrap", "text-align: right", "position: sticky",
                 "max-height: 480px; overflow: auto", "line-height: 16px",
                 "var(--jp-layout-color1, #fff)", "var(--jp-ui-font-color1, #1f2937)",
                 "body[data-jp-theme-name]"):
        assert rule in css, rule
    for selector in ("td.num", "td.mono", "td.shape", "td.nowrap", "tr.problem td", ".pill",
                     ".ncet-scroll", "th.ncet-sort", "tr.ncet-selected td"):
        assert f":is(.ncet-static, .ncet-view) {selector}" in css, selector
    table = widgets.MappingTable(report_of("lenet"))
    assert "ncet-view" in table._dom_classes and "ncet-scroll" in table.table._dom_classes
    assert any(render.VIEW_STYLE in getattr(c, "value", "") for c in table.children)
    for box in (table.children[2], table.children[3]):  # filters and pager wrap
        assert box.layout.flex_flow == "row wrap"
    assert 'class="ncet-scroll"' in table.to_html()


def test_the_report_uses_the_same_table_classes_and_rules():
    model, shapes = load_example("many_problems")
    report = ncet.diagnose(model, *shapes)
    page_html = render.render_report(report)
    for fragment in ('<span class="pill ', '<td class="num">', '<td class="mono">',
                     '<tr class="problem">'):
        assert fragment in page_html, fragment
    widget_html = widgets.mapping_html(report)
    for fragment in ('<span class="pill ', '<td class="num">', '<td class="mono">',
                     'class="problem"'):
        assert fragment in widget_html, fragment
    for selectors, declarations in render.css.TABLE_RULES:  # one rule set, scoped twice
        first = selectors.split(",")[0].strip()
        assert f"{first}" in render.REPORT_CSS and declarations in render.REPORT_CSS
        assert f":is(.ncet-static, .ncet-view) {first}" in render.css.VIEW_CSS


def test_the_report_keeps_its_palette_when_no_theme_is_there():
    css = render.REPORT_CSS
    for colour in ("#15803d", "#dcfce7", "#b91c1c", "#fee2e2", "#fff5f5", "#b45309"):
        assert colour in css
    assert "body[data-jp-theme-name]" not in css  # the standalone page: fallbacks only
