"""The suite view (issue 36): a suite's result table (`ncet.run_suite`) sortable, filterable
and tinted by outcome; a row selected opens its import, margin and adjudication; a tab of the
Workbench; a static form. On a run over two corpus instances (one with counterexamples)."""

from __future__ import annotations

import pytest
from torch import nn

from tests.corpus import corpus_root

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")
pytest.importorskip("distributed")

MNIST = ("mnist_fc/onnx/mnist-net_256x2.onnx", "mnist_fc/vnnlib/prop_1_0.03.vnnlib")
"""An instance the corpus's witnesses hold counterexamples for."""
ACAS = ("acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx", "acasxu/vnnlib/prop_1.vnnlib")
"""An instance without counterexamples."""


@pytest.fixture(scope="module")
def run():
    import ncet

    root = corpus_root()
    rows = [(str(root / o), str(root / v)) for o, v in (MNIST, ACAS)]
    table = ncet.run_suite(rows, results=str(root / "witnesses"), progress=False, samples=1,
                           splits=1)
    return table, str(root / "witnesses")


def test_the_table_has_a_row_per_instance_tinted_by_outcome(run):
    from ncet.widgets import SuiteView

    table, results = run
    view = SuiteView(table, results=results)
    html = view.grid.value
    assert html.count("<tr data-node=") == len(table) == 2
    for index, outcome in zip(table.index, table["outcome"]):
        assert f'data-node="{index}" class="outcome-{outcome}' in html
    assert "mnist-net_256x2.onnx" in html and "prop_1.vnnlib" in html
    assert "/work/" not in html.split("<tbody>")[1].split("mnist")[0], "paths shown by name"
    assert view._repr_mimebundle_()["text/html"] == view.to_html()
    assert "ncet-suite-view" in view._dom_classes


def test_rows_sort_by_a_header_click_and_filter_by_outcome_and_name(run):
    from ncet.widgets import SuiteView

    table, results = run
    view = SuiteView(table, results=results)
    view.grid.click_header("witnesses")  # ascending: the ACAS row (0 witnesses) first
    assert view.sort == ("witnesses", True)
    assert list(view.rows["witnesses"]) == sorted(table["witnesses"])
    view.grid.click_header("witnesses")
    assert view.sort == ("witnesses", False)
    assert list(view.rows["witnesses"]) == sorted(table["witnesses"], reverse=True)
    assert "&#9660;" in view.grid.value
    view.text.value = "acas"
    assert len(view.rows) == 1 and "ACASXU" in view.rows["onnx"].iloc[0]
    view.text.value = ""
    view.outcome.value = view.outcome.options[-1]
    assert set(view.rows["outcome"]) == {view.outcome.options[-1]}
    with pytest.raises(KeyError, match="no column"):
        view.sort_by("nope")


def test_a_row_with_counterexamples_opens_import_margin_and_adjudication(run):
    from ncet.widgets import AdjudicationView, MappingTable, MarginView, SuiteView

    import ncet

    table, results = run
    view = SuiteView(table, results=results)
    index = table.index[table["onnx"].str.endswith("mnist-net_256x2.onnx")][0]
    view.grid.click_row(str(index))
    instance = view.instance
    assert view.selected == index and instance is not None
    assert instance.titles == ("Import", "Float margin", "Adjudication")
    assert isinstance(instance.mapping, MappingTable) and instance.report.ok
    assert isinstance(instance.margin, MarginView)
    assert isinstance(instance.margin.margin, ncet.Margin)
    assert sorted(p.rsplit("/", 1)[1] for p in instance.witnesses) == \
        sorted(table.loc[index, "verdicts"]), "every judged counterexample is offered"
    assert isinstance(instance.adjudication, AdjudicationView)
    first = instance.witnesses[0].rsplit("/", 1)[1]
    assert instance.adjudication.answer.verdict == table.loc[index, "verdicts"][first]
    selected_row = view.grid.value.split(f'data-node="{index}"')[1].split("</tr>")[0]
    assert "ncet-selected" in selected_row, "the selected row is marked"
    html = view.to_html()
    for title in ("Import", "Float margin", "Adjudication"):
        assert f"<h5>{title}</h5>" in html


def test_a_row_without_counterexamples_has_no_adjudication_tab(run):
    from ncet.widgets import SuiteView

    table, results = run
    view = SuiteView(table, results=results)
    index = table.index[table["witnesses"] == 0][0]
    instance = view.select(index)
    assert instance.titles == ("Import", "Float margin") and instance.adjudication is None
    assert "<h5>Adjudication</h5>" not in view.to_html()
    with pytest.raises(KeyError, match="no row"):
        view.select(99)
    assert view.select(None) is None and view.detail.children == ()


def test_the_view_refuses_what_is_not_a_suite_table():
    from ncet.widgets import SuiteView

    with pytest.raises(TypeError, match="run_suite"):
        SuiteView([1, 2])


def test_the_workbench_shows_the_suite_in_a_tab_of_its_own(run):
    from ncet.widgets import SuiteView, Workbench

    table, results = run
    bench = Workbench(nn.Sequential(nn.Linear(2, 2)), (2,), suite=table)
    assert isinstance(bench.suite, SuiteView) and bench.titles[-1] == "Suite"
    replaced = bench.add_suite(SuiteView(table, results=results))
    assert bench.suite is replaced and bench.titles.count("Suite") == 1
    assert "ncet-suite" in bench.to_html()


@pytest.mark.parametrize("outcome, tint", [("ok", None), ("not-exact", "not-certified"),
                                           ("refused", "problem"), ("error", "problem"),
                                           ("timeout", "not-certified")])
def test_each_outcome_tints_its_row(outcome, tint):
    import pandas as pd
    from ncet.widgets import suite_html

    table = pd.DataFrame([{"onnx": "/a/net.onnx", "vnnlib": "/a/p.vnnlib", "outcome": outcome,
                           "reason": None if outcome == "ok" else "some-code"}])
    row = suite_html(table).split('<tr data-node="0"')[1].split(">")[0]
    classes = row.split('class="')[1].rstrip('"').split()
    assert classes[0] == f"outcome-{outcome}"
    assert classes[1:] == ([tint] if tint else []), f"{outcome}: tinted {tint}"


def test_a_row_whose_network_is_not_here_says_so():
    import pandas as pd
    from ncet.widgets import SuiteView

    table = pd.DataFrame([{"onnx": "/nowhere/net.onnx", "vnnlib": "/nowhere/p.vnnlib",
                           "outcome": "error", "reason": "FileNotFoundError"}])
    view = SuiteView(table)
    assert view.select(0) is None and view.selected == 0
    assert "Cannot open" in view.detail.children[0].value
    assert "net.onnx" in view.detail.children[0].value
