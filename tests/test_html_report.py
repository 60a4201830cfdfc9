"""The HTML report: self-contained and complete, with violations marked."""

from __future__ import annotations

import dataclasses
import re

import ncet
from ncet import exactness_plots
from ncet.examples import load_example
from ncet.html_report import render_report, verdict
from ncet.ir import GraphIR


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def seeded_fault() -> tuple[ncet.ConversionReport, ncet.ExactnessReport]:
    """The MLP with one Linear's bias dropped from its IR node: a translation bug."""
    model, shapes = load_example("mlp")
    report = ncet.diagnose(model, *shapes)
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, "bias": None})
                  if n.name == "layers_2" else n for n in report.graph.nodes)
    faulty = GraphIR(nodes, report.graph.constants)
    return report, ncet.check_exactness(model, faulty, samples_per_scale=2)


def test_a_violation_is_marked_in_the_headline_tables_and_plot():
    report, exactness = seeded_fault()
    assert verdict(report, exactness) == ("bad", "converts, but VIOLATION at node 'layers_2' "
                                                 "(Linear)")
    page = render_report(report, exactness, title="mlp")
    assert '<div class="verdict bad" id="verdict">' in page
    assert re.search(r'<tr class="violated"><td class="mono">layers_2</td>', page)
    assert "violation (error above its bound)" in page  # the plot's legend


def test_without_matplotlib_the_report_keeps_its_tables(monkeypatch):
    monkeypatch.setattr(exactness_plots, "matplotlib_available", lambda: False)
    report, exactness = seeded_fault()
    page = render_report(report, exactness, title="mlp")
    assert "<svg" not in page and "No plots: matplotlib is not installed" in page
    assert "<h3>Per node</h3>" in page


def test_text_is_escaped():
    model, shapes = load_example("mlp")
    page = render_report(ncet.diagnose(model, *shapes), title="<b>x</b>", command="a & b")
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "a &amp; b" in page and "<b>x</b>" not in page


def test_a_rejected_model_gets_its_reasons_and_no_exactness_section():
    model, shapes = load_example("many_problems")
    report = ncet.diagnose(model, *shapes)
    page = render_report(report, title="many_problems", input_shapes=shapes)
    boundary = section(page, "boundary")
    for row in report.errors:
        group = boundary[boundary.index(f'id="reason-{row.code}"'):]
        group = group[:group.index("</div>")]
        assert row.fx_name in group and row.location in group and row.hint in group
    assert "Not checked: the model does not convert" in section(page, "exactness")
    assert "<svg" not in page and "<script" not in page
