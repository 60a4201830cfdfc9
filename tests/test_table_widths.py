"""Every column of the report's and the mapping table's tables is on screen at 1400 px.

Headless Chromium (Debian's, driven by Playwright, as in tests/test_browser.py) opens the
HTML report of a converting model (with its 16-column per-node exactness table) and of a
rejected one, and the static mapping table, in a 1400 px wide window; the mapping table
also in a box as wide as the live view's table asks for beside the node detail
(`TABLE_BASIS`). For every table, the right edge of every header cell must lie inside the
box that clips it (the nearest ancestor that scrolls, or the window): no column is cut off
or hidden behind a scrollbar. Locally the tests skip without Chromium; in CI they fail.
The screenshots land in artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ncet.widgets.frames import mapping_html
from ncet.widgets.mapping import TABLE_BASIS

import ncet
from ncet.examples import load_example
from ncet.render.html import render_report
from tests.browsers import chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WIDTH = 1400

CLIPPED_COLUMNS = """() => [...document.querySelectorAll("table")].filter(t => t.tHead)
  .flatMap(table => {
    let box = table.parentElement;
    while (box !== document.body && getComputedStyle(box).overflowX === "visible")
      box = box.parentElement;
    const right = Math.min(box === document.body ? Infinity : box.getBoundingClientRect().right,
                           document.documentElement.clientWidth);
    return [...table.tHead.rows[0].cells]
      .filter(th => th.getBoundingClientRect().right > right + 0.5)
      .map(th => `${th.textContent} ends at ${th.getBoundingClientRect().right} > ${right}`);
  })"""
"""The header cells whose right edge lies beyond the box that clips their table."""

TABLES = "() => document.querySelectorAll('table thead').length"


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    path = chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": WIDTH, "height": 1000})
        finally:
            browser.close()


@pytest.fixture(scope="module")
def reports() -> dict[str, str]:
    made = {}
    for name in ("residual_cnn", "many_problems"):
        model, shapes = load_example(name)
        report = ncet.diagnose(model, *shapes)
        exactness = ncet.check_exactness(model, report.graph, samples_per_scale=2) \
            if report.ok else None
        made[name] = render_report(report, exactness, title=name, input_shapes=shapes)
    return made


def clipped(page, html: str, tmp_path: Path, shot: str) -> list[str]:
    file = tmp_path / "page.html"
    file.write_text(html, encoding="utf-8")
    page.goto(file.as_uri())
    assert page.evaluate(TABLES) > 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    return page.evaluate(CLIPPED_COLUMNS)


@pytest.mark.parametrize("name", ["residual_cnn", "many_problems"])
def test_the_report_shows_every_column_at_1400_px(page, reports, tmp_path, name):
    assert clipped(page, reports[name], tmp_path, f"report-{name}-{WIDTH}px.png") == []


def test_the_per_node_table_has_its_suspicion_column(reports):
    assert "<th class=\"num\">suspicion</th>" in reports["residual_cnn"]


@pytest.mark.parametrize("name", ["residual_cnn", "many_problems"])
@pytest.mark.parametrize("box", [None, TABLE_BASIS])
def test_the_mapping_table_shows_every_column(page, tmp_path, name, box):
    model, shapes = load_example(name)
    table = mapping_html(ncet.diagnose(model, *shapes))
    assert "<th>constants</th>" in table and "<th>source</th>" in table
    width = f"width: {box}px" if box else ""
    html = (f'<!DOCTYPE html><html><body style="margin: 0"><div style="{width}">{table}</div>'
            "</body></html>")
    shot = f"mapping-{name}-{box or WIDTH}px.png"
    assert clipped(page, html, tmp_path, shot) == []
