"""The workbench in a real browser: JupyterLab on loopback, headless Chromium driven by Playwright.

One JupyterLab (tests/browser/lab.py) serves two notebooks from tests/browser/, and each test
opens one, runs all its cells from the Run menu and works what it displays:

* mapping_table.ipynb, a `MappingTable`: rows rendered, then a choice in the op_type filter
  changes the rows and the count to exactly that op_type's nodes (and one in the status filter
  to exactly the lifted nodes); its screenshot is artifacts/workbench.png.
* workbench.ipynb, a `Workbench` of residual_cnn with its exactness check run (6 samples): a
  clicked row is selected and its detail, beside the table (in a 2000 px window), names it;
  at 1400 px the detail goes below and the table shows every column; a header sorts the rows
  up, down, and back to graph order; a node clicked in the Graph tab (dragged into view) is
  selected there and in the Mapping and Exactness tabs, and a row clicked in the Mapping tab
  is selected in the graph, shown in the canvas's view; the Graph tab draws every module call
  as a cluster, top to bottom in the order of the calls (screenshot
  artifacts/workbench-graph-calls.png), and its search box finds a node by op_type and by
  source line; the CSV link downloads the table's
  rows; in JupyterLab Light and JupyterLab Dark (switched with `apputils:change-theme`) the
  verdict and the mapping table's text have a WCAG AA contrast (4.5:1) against the background
  they are painted on (composited from the element's and its ancestors' backgrounds); each
  tab is screenshot as artifacts/workbench-<tab>-<light|dark>.png.

The screenshots (gitignored) are for a person to look at; .ci/run lists them. The browser is
Debian's /usr/bin/chromium (.ci/run installs it); Playwright only drives it and never downloads
one of its own. Locally the tests skip without it; in CI (CI=true) a missing browser fails them.
"""

from __future__ import annotations

import contextlib
import csv
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ncet.widgets.frames import MAPPING_COLUMNS
from ncet.widgets.mapping import TABLE_BASIS
from ncet.widgets.sorting import natural_key
from playwright.sync_api import Browser, Page, expect, sync_playwright

import ncet
from ncet.examples import load_example
from ncet.render import ROOT, Groups
from tests.browser.lab import (
    CHANGE_MS,
    DARK,
    LIGHT,
    RENDER_MS,
    VIEWPORT,
    Lab,
    open_notebook,
    running_lab,
    set_theme,
    tail,
)
from tests.browser.probes import CHANGED, CLUSTER_TOPS, CONTRAST, READ_TABLE
from tests.browsers import chromium
from tests.test_table_widths import CLIPPED_COLUMNS

REPO = Path(__file__).resolve().parents[1]
MAPPING_NOTEBOOK = REPO / "tests" / "browser" / "mapping_table.ipynb"
WORKBENCH_NOTEBOOK = REPO / "tests" / "browser" / "workbench.ipynb"
EXAMPLE = "residual_cnn"  # what both notebooks display
PAGE_SIZE = 25  # MappingTable's default
ARTIFACTS = REPO / "artifacts"
SCREENSHOT = ARTIFACTS / "workbench.png"
CALLS_SCREENSHOT = ARTIFACTS / "workbench-graph-calls.png"

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

AA = 4.5
"""WCAG 2 level AA: the least contrast for text below 18 pt (24 px, or 14 pt bold)."""

TABLE = ".ncet-mapping-table"
ROWS = f"{TABLE} table.ncet-mapping tbody tr"
OP_TYPE_SELECT = f"{TABLE} .ncet-filter-op-type select"
STATUS_SELECT = f"{TABLE} .ncet-filter-status select"
BENCH = ".ncet-workbench"
GRAPH_NODES = ".ncet-graph-canvas g.node"
VERDICT = ".ncet-exactness-panel .ncet-verdict > p"
DETAIL = f"{TABLE} .ncet-detail:not(.ncet-static)"  # the widget, not the HTML it holds

TABS = {  # each tab's title, and what shows once its view is drawn
    "Mapping": f"{TABLE} .ncet-clickable table.ncet-mapping tbody tr",  # the grid's script ran
    "Support boundary": ".ncet-boundary-panel",
    "Exactness": VERDICT,
    "Graph": GRAPH_NODES,
    "Summary": ".ncet-summary-panel",
}

# The elements whose text contrast is measured in the mapping table: the header, the first
# rows' cells, the selected row's cells and the status pills (empty cells have no text).
TABLE_TEXT = (f"{TABLE} table.ncet-mapping thead th, {TABLE} table.ncet-mapping tbody "
              f"tr:nth-child(-n+3) td, {TABLE} table.ncet-mapping tbody tr.ncet-selected td, "
              f"{TABLE} table.ncet-mapping tbody tr:nth-child(-n+3) .pill")


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    """JupyterLab from this environment on loopback, serving copies of the test notebooks."""
    chromium()  # skip (or fail in CI) before paying for a server
    with running_lab(tmp_path_factory.mktemp("jupyterlab"),
                     [MAPPING_NOTEBOOK, WORKBENCH_NOTEBOOK]) as running:
        yield running


@pytest.fixture(scope="module")
def browser(lab) -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright (closed before the server stops)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS,
                                              headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def report() -> ncet.ConversionReport:
    """What the notebooks' model diagnoses to, computed here to know what the page must show."""
    model, shapes = load_example(EXAMPLE)
    diagnosed = ncet.diagnose(model, *shapes)
    assert len(diagnosed.rows) > PAGE_SIZE, "the example must need a second page"
    return diagnosed


@pytest.fixture(scope="module")
def bench(lab, browser) -> Iterator[Page]:
    """workbench.ipynb open and run: its Workbench drawn, the exactness check done."""
    page = open_notebook(lab, browser, WORKBENCH_NOTEBOOK.name)
    with recorded(page, lab, "workbench-failure-open"):
        page.wait_for_selector(TABS["Mapping"], timeout=RENDER_MS)
    try:
        yield page
    finally:
        page.close()


@contextlib.contextmanager
def recorded(page: Page, lab: Lab, name: str) -> Iterator[None]:
    """On failure, save a screenshot as artifacts/<name>.png and print the server's log."""
    try:
        yield
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        print(f"screenshot: {ARTIFACTS / f'{name}.png'}\nJupyterLab log:\n{tail(lab.log)}")
        raise


def show_tab(page: Page, title: str) -> None:
    """Click the Workbench's tab `title` and wait until its view is drawn."""
    page.locator(f"{BENCH} .lm-TabBar-tab", has_text=re.compile(f"^{title}$")).click()
    page.locator(TABS[title]).first.wait_for(state="visible", timeout=RENDER_MS)


def sort_state(page: Page) -> list:
    return page.evaluate(READ_TABLE)["sorted"]


def choose(page: Page, select: str, label: str, count_before: str, rows: int) -> dict:
    """Choose `label` in a filter, wait until the count text and the row count follow."""
    page.select_option(select, label=label)
    page.wait_for_function(CHANGED, arg=[count_before, rows], timeout=CHANGE_MS)
    return page.evaluate(READ_TABLE)


def one_page_of(nodes: list[str], order: list[str]) -> bool:
    """Whether `nodes` is one whole page of `order` (the table shows the selected node's)."""
    starts = range(0, len(order), PAGE_SIZE)
    return any(nodes == order[start:start + PAGE_SIZE] for start in starts)


def screenshot(page: Page, path: Path) -> None:
    """A screenshot of the Workbench, the window made tall enough to show all of it."""
    bench = page.locator(BENCH)
    bench.scroll_into_view_if_needed()
    box = bench.bounding_box()
    height = max(VIEWPORT["height"], int(box["y"] + box["height"] + 40))
    if height != page.viewport_size["height"]:
        page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
        bench.scroll_into_view_if_needed()
    bench.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)


def first_page(page: Page, name: str) -> None:
    """Choose `name` (a first-page row) in the node chooser and show the table from its left."""
    chooser = page.locator(f"{TABLE} .ncet-node input")
    chooser.fill(name)
    chooser.press("Enter")
    page.locator(f'{ROWS}.ncet-selected[data-node="{name}"]').wait_for(timeout=CHANGE_MS)
    page.locator(f"{TABLE} .ncet-scroll").evaluate("box => { box.scrollLeft = 0; }")


def in_view(page: Page, node) -> bool:
    """Whether `node`'s box is wholly inside the graph canvas's view."""
    frame = page.locator(".ncet-graph-canvas .ncet-graph-holder").bounding_box()
    box = node.bounding_box()
    return box is not None and box["width"] > 0 and (
        frame["x"] <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"]
        and frame["y"] <= box["y"] and box["y"] + box["height"] <= frame["y"] + frame["height"])


def pan_to(page: Page, node) -> None:
    """Drag the graph canvas until `node` is inside its view (each drag moves the drawing by
    at most half the canvas); fails if dragging does not bring it in."""
    frame = page.locator(".ncet-graph-canvas .ncet-graph-holder").bounding_box()
    centre = (frame["x"] + frame["width"] / 2, frame["y"] + frame["height"] / 2)
    reach = (frame["width"] / 2 - 20, frame["height"] / 2 - 20)
    for _ in range(20):
        if in_view(page, node):
            return
        box = node.bounding_box()
        away = [box["x"] + box["width"] / 2 - centre[0], box["y"] + box["height"] / 2 - centre[1]]
        step = [max(-r, min(r, a)) for a, r in zip(away, reach)]
        page.mouse.move(*centre)
        page.mouse.down()
        page.mouse.move(centre[0] - step[0], centre[1] - step[1], steps=5)
        page.mouse.up()
    pytest.fail(f"dragging the graph did not bring {node} into view")


def select_with_the_graph_hidden(page: Page, name: str) -> None:
    """Draw the Graph tab, then click row `name` in the Mapping tab and wait until the hidden
    graph has marked it."""
    show_tab(page, "Graph")
    show_tab(page, "Mapping")
    first_page(page, name)
    page.locator(f'{ROWS}[data-node="{name}"]').click()
    page.locator(f'{ROWS}.ncet-selected[data-node="{name}"]').wait_for(timeout=CHANGE_MS)
    page.locator(f'{GRAPH_NODES}.ncet-selected[id="n:{name}"]').wait_for(state="attached",
                                                                         timeout=CHANGE_MS)


THEMES = [pytest.param(LIGHT, id="light"), pytest.param(DARK, id="dark")]


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install"):
        chromium("/nonexistent/chromium")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install"):
        chromium("/nonexistent/chromium")


def test_the_mapping_table_filters_in_jupyterlab(lab, browser, report):
    chosen = "Conv2d"
    expected = [r.fx_name for r in report.rows if r.op_type == chosen]
    assert 0 < len(expected) < PAGE_SIZE
    lifted = [r.fx_name for r in report.rows if r.status == "lifted"]
    assert 0 < len(lifted) < PAGE_SIZE

    page = open_notebook(lab, browser, MAPPING_NOTEBOOK.name)
    try:
        with recorded(page, lab, "workbench-failure"):
            page.wait_for_selector(ROWS, timeout=RENDER_MS)

            before = page.evaluate(READ_TABLE)
            assert [r["node"] for r in before["rows"]] == [
                r.fx_name for r in report.rows[:PAGE_SIZE]], "the first page, in graph order"
            op_column = before["head"].index("op_type")
            assert "all" in before["options"] and chosen in before["options"]
            assert str(len(report.rows)) in before["count"], before["count"]

            after = choose(page, OP_TYPE_SELECT, chosen, before["count"], len(expected))
            assert [r["node"] for r in after["rows"]] == expected
            assert {r["cells"][op_column] for r in after["rows"]} == {chosen}
            assert after["count"] != before["count"]
            assert str(len(expected)) in after["count"], after["count"]

            ARTIFACTS.mkdir(exist_ok=True)
            page.locator(TABLE).scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"screenshot: {SCREENSHOT}")

            # the other filter: every op_type again, then only the lifted nodes
            again = choose(page, OP_TYPE_SELECT, "all", after["count"], PAGE_SIZE)
            assert again["rows"] == before["rows"] and again["count"] == before["count"]
            status_column = before["head"].index("status")
            only = choose(page, STATUS_SELECT, "lifted", again["count"], len(lifted))
            assert [r["node"] for r in only["rows"]] == lifted
            assert {r["cells"][status_column] for r in only["rows"]} == {"lifted"}
    finally:
        page.close()
    assert SCREENSHOT.stat().st_size > 10_000


@contextlib.contextmanager
def window_width(page: Page, width: int) -> Iterator[None]:
    """The window `width` px wide for the duration (JupyterLab relays its panels out)."""
    page.set_viewport_size({"width": width, "height": VIEWPORT["height"]})
    try:
        yield
    finally:
        page.set_viewport_size(VIEWPORT)


WIDE = 2000
"""A window wide enough for the mapping table's box (`TABLE_BASIS`) and the node detail
beside it, JupyterLab's side panel open."""


def test_a_clicked_row_is_selected_and_its_detail_shows_beside_the_table(bench, lab, report):
    name = "block1_conv1"
    assert name in [r.fx_name for r in report.rows[:PAGE_SIZE]], "a row of the first page"
    with recorded(bench, lab, "workbench-failure-row"), window_width(bench, WIDE):
        show_tab(bench, "Mapping")
        bench.locator(f'{ROWS}[data-node="{name}"]').click()
        bench.locator(f'{ROWS}.ncet-selected[data-node="{name}"]').wait_for(timeout=CHANGE_MS)
        assert [r["node"] for r in bench.evaluate(READ_TABLE)["rows"] if r["selected"]] == [name]

        detail = bench.locator(DETAIL)
        expect(detail).to_contain_text(name, timeout=CHANGE_MS)
        expect(detail).to_contain_text("Conv2d")  # its op_type: the detail is this node's
        table, side = bench.locator(f"{TABLE} .ncet-table").bounding_box(), detail.bounding_box()
        assert side["x"] >= table["x"] + table["width"] - 1, (table, side)  # to its right
        assert side["y"] < table["y"] + table["height"], (table, side)  # beside, not below


def test_at_1400_px_the_mapping_table_shows_every_column(bench, lab):
    """Narrower than the table's box and the detail together, the detail goes below the
    table, which keeps its width: no column is cut off (issue 31)."""
    with recorded(bench, lab, "workbench-failure-width"), window_width(bench, 1400):
        show_tab(bench, "Mapping")
        box = bench.locator(f"{TABLE} .ncet-table")
        box.scroll_into_view_if_needed()
        bench.wait_for_timeout(CHANGE_MS // 10)
        assert box.bounding_box()["width"] >= TABLE_BASIS - 1
        assert bench.evaluate(CLIPPED_COLUMNS) == []
        side = bench.locator(DETAIL).bounding_box()
        table = box.bounding_box()
        assert side["y"] >= table["y"] + table["height"] - 1, (table, side)  # below it
        ARTIFACTS.mkdir(exist_ok=True)
        box.screenshot(path=str(ARTIFACTS / "workbench-mapping-1400px.png"))


def test_a_header_click_sorts_up_then_down_then_back_to_graph_order(bench, lab, report):
    key = "op_type"
    graph_order = [r.fx_name for r in report.rows]
    up = [r.fx_name for r in sorted(report.rows, key=lambda r: natural_key(r.op_type or ""))]
    down = [r.fx_name for r in sorted(report.rows, key=lambda r: natural_key(r.op_type or ""),
                                      reverse=True)]  # stable: ties stay in graph order
    header = bench.locator(f'{TABLE} table.ncet-mapping th.ncet-sort[data-sort="{key}"]')
    with recorded(bench, lab, "workbench-failure-sort"):
        show_tab(bench, "Mapping")
        graph = [["#", "ascending"]]  # graph order: the "#" column, ascending
        assert sort_state(bench) == graph, "the table starts in graph order"
        for state, order in (("ascending", up), ("descending", down), (None, graph_order)):
            header.click()
            if state is None:
                expect(header).not_to_have_attribute("aria-sort", re.compile("."),
                                                      timeout=CHANGE_MS)
            else:
                expect(header).to_have_attribute("aria-sort", state, timeout=CHANGE_MS)
            shown = bench.evaluate(READ_TABLE)
            assert shown["sorted"] == ([[key, state]] if state else graph), shown["sorted"]
            nodes = [r["node"] for r in shown["rows"]]
            assert len(nodes) == PAGE_SIZE and one_page_of(nodes, order), (state, nodes)
            if state is not None:
                cells = [r["cells"][shown["head"].index(key)] for r in shown["rows"]]
                assert cells == sorted(cells, key=natural_key, reverse=state == "descending")


def test_a_node_clicked_in_the_graph_is_selected_in_the_other_tabs(bench, lab, report):
    name = next(r.fx_name for r in report.rows[PAGE_SIZE:] if r.status == "mapped")
    with recorded(bench, lab, "workbench-failure-graph"):
        show_tab(bench, "Graph")
        node = bench.locator(f'{GRAPH_NODES}[id="n:{name}"]')
        pan_to(bench, node)  # the first view shows the top of the graph, legible
        node.click()
        selected = bench.locator(f"{GRAPH_NODES}.ncet-selected")
        expect(selected).to_have_attribute("id", f"n:{name}", timeout=CHANGE_MS)
        expect(selected).to_have_count(1)

        show_tab(bench, "Mapping")  # the row is on the second page: the table turns to it
        bench.locator(f'{ROWS}.ncet-selected[data-node="{name}"]').wait_for(timeout=CHANGE_MS)
        assert [r["node"] for r in bench.evaluate(READ_TABLE)["rows"] if r["selected"]] == [name]
        expect(bench.locator(DETAIL)).to_contain_text(name)

        show_tab(bench, "Exactness")
        expect(bench.locator(".ncet-exactness-panel .ncet-node input")).to_have_value(name)


def test_a_row_clicked_in_the_mapping_table_is_selected_in_the_graph(bench, lab):
    name = "add_1"
    with recorded(bench, lab, "workbench-failure-graph-follows"):
        select_with_the_graph_hidden(bench, name)
        show_tab(bench, "Graph")
        selected = bench.locator(f"{GRAPH_NODES}.ncet-selected")
        expect(selected).to_have_attribute("id", f"n:{name}")
        expect(selected).to_have_count(1)


def test_the_graph_shows_a_node_selected_while_its_tab_was_hidden(bench, lab):
    name = "relu_1"
    with recorded(bench, lab, "workbench-failure-graph-view"):
        select_with_the_graph_hidden(bench, name)
        show_tab(bench, "Graph")
        node = bench.locator(f'{GRAPH_NODES}.ncet-selected[id="n:{name}"]')
        node.wait_for(timeout=CHANGE_MS)
        frame = bench.locator(".ncet-graph-canvas .ncet-graph-holder").bounding_box()
    assert in_view(bench, node), f"{name} at {node.bounding_box()}, the canvas at {frame}"


def test_the_graph_draws_the_module_calls_in_their_order_and_finds_a_node(bench, lab,
                                                                          report):
    groups = Groups(report.graph)
    calls = groups.in_call_order(set(groups.groups) - {ROOT})
    assert len(calls) >= 4, calls  # the stem, two residual blocks, a block's skip, the head
    nodes = report.graph.nodes
    (cat,) = [n for n in nodes if n.op_type == "Concat"]
    texts = [f"{n.name} {n.op_type} {n.source.location}" for n in nodes]
    canvas = bench.locator(".ncet-graph-canvas")
    with recorded(bench, lab, "workbench-failure-graph-calls"):
        show_tab(bench, "Graph")
        bench.locator(".ncet-graph-canvas .ncet-graph-fit").click()
        tops = canvas.evaluate(CLUSTER_TOPS)
        assert [c for c, _ in tops] == calls, "a cluster per call, in the order of the calls"
        ys = [y for _, y in tops]
        assert ys == sorted(ys), f"clusters not top to bottom in call order: {tops}"
        ARTIFACTS.mkdir(exist_ok=True)
        bench.mouse.move(0, 0)
        holder = bench.locator(".ncet-graph-canvas .ncet-graph-holder")
        holder.evaluate("h => { h.style.height = '1500px'; }")  # the whole graph, legible
        bench.set_viewport_size({"width": VIEWPORT["width"], "height": 1900})
        bench.locator(".ncet-graph-canvas .ncet-graph-fit").click()
        bench.locator(".ncet-graph-view").screenshot(path=str(CALLS_SCREENSHOT))
        print(f"screenshot: {CALLS_SCREENSHOT}")
        holder.evaluate("h => { h.style.height = ''; }")
        bench.set_viewport_size(VIEWPORT)
        bench.locator(".ncet-graph-canvas .ncet-graph-fit").click()

        search = bench.locator(".ncet-graph-view .ncet-graph-search input")
        found = bench.locator(".ncet-graph-view .ncet-graph-found")
        selected = bench.locator(f"{GRAPH_NODES}.ncet-selected")
        search.fill("concat")  # an op_type, one node
        search.press("Enter")
        expect(found).to_contain_text(f"1 of 1: {cat.name}", timeout=CHANGE_MS)
        expect(selected).to_have_attribute("id", f"n:{cat.name}", timeout=CHANGE_MS)
        line = [n.name for n, text in zip(nodes, texts) if cat.source.location in text]
        assert len(line) > 1, line  # the line holds a few nodes: "next" steps through them
        search.fill(cat.source.location)
        search.press("Enter")
        expect(found).to_contain_text(f"1 of {len(line)}: {line[0]}", timeout=CHANGE_MS)
        expect(selected).to_have_attribute("id", f"n:{line[0]}", timeout=CHANGE_MS)
        bench.locator(".ncet-graph-view .ncet-graph-next").click()
        expect(found).to_contain_text(f"2 of {len(line)}: {line[1]}", timeout=CHANGE_MS)
        expect(selected).to_have_attribute("id", f"n:{line[1]}", timeout=CHANGE_MS)
        expect(selected).to_have_count(1)
    assert CALLS_SCREENSHOT.stat().st_size > 10_000


def test_the_csv_link_downloads_the_rows_of_the_table(bench, lab, report, tmp_path):
    with recorded(bench, lab, "workbench-failure-csv"):
        show_tab(bench, "Mapping")
        bench.locator(f"{TABLE} button.ncet-csv").click()
        link = bench.locator(f'{TABLE} a.ncet-download[download="mapping.csv"]')
        with bench.expect_download(timeout=CHANGE_MS) as started:
            link.click(timeout=CHANGE_MS)
        download = started.value
        assert download.suggested_filename == "mapping.csv"
        path = tmp_path / "mapping.csv"
        download.save_as(path)
        count = bench.evaluate(READ_TABLE)["count"]
    with path.open(newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert header == list(MAPPING_COLUMNS)
    assert all(len(row) == len(header) for row in rows)
    assert len(rows) == len(report.rows) and str(len(rows)) in count, (len(rows), count)
    assert [row[0] for row in rows] == [r.fx_name for r in report.rows], "in the table's order"


@pytest.mark.parametrize("theme", THEMES)
def test_each_tab_is_screenshot_in(theme, bench, lab, report):
    shade = "light" if theme == LIGHT else "dark"
    ARTIFACTS.mkdir(exist_ok=True)
    with recorded(bench, lab, f"workbench-failure-{shade}"):
        set_theme(bench, theme)
        for title in TABS:
            show_tab(bench, title)
            if title == "Mapping":
                first_page(bench, report.rows[PAGE_SIZE // 2].fx_name)
            bench.mouse.move(0, 0)  # no row or node shown hovered
            path = ARTIFACTS / f"workbench-{title.lower().replace(' ', '-')}-{shade}.png"
            screenshot(bench, path)
            print(f"screenshot: {path}")
            assert path.stat().st_size > 3_000, path  # not a blank image


@pytest.mark.parametrize("theme", THEMES)
def test_the_verdict_reads_well_in(theme, bench, lab):
    with recorded(bench, lab, "workbench-failure-verdict"):
        set_theme(bench, theme)
        show_tab(bench, "Exactness")
        verdict = bench.locator(VERDICT).first.evaluate(CONTRAST)
    print(f"{theme}: verdict {verdict}")
    assert verdict["ratio"] >= AA, f"{theme}: the verdict's contrast is below {AA}:1: {verdict}"


@pytest.mark.parametrize("theme", THEMES)
def test_the_table_text_reads_well_in(theme, bench, lab):
    with recorded(bench, lab, "workbench-failure-table-text"):
        set_theme(bench, theme)
        show_tab(bench, "Mapping")
        bench.locator(f"{ROWS}[data-node]").nth(1).click()  # a selected row among them
        bench.locator(f"{ROWS}.ncet-selected").wait_for(timeout=CHANGE_MS)
        bench.mouse.move(0, 0)  # no row hovered
        measured = bench.locator(TABLE_TEXT).evaluate_all(f"elements => elements.map({CONTRAST})")
    cells = [c for c in measured if c["content"]]
    assert cells, "no table text measured"
    print(f"{theme}: lowest table contrast {min(cells, key=lambda c: c['ratio'])}")
    low = [c for c in cells if c["ratio"] < AA]
    assert not low, f"{theme}: table text below {AA}:1: {low}"
