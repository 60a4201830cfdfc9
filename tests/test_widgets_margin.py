"""The float margin view (issue 34): the report's tables and figure in a view, its static
form the same HTML, and a tab of the Workbench. Margins are built by hand (dyadic numbers)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ncet
from ncet.regions import Margin

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")


def _t(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))


def _margin(ir: ncet.GraphIR) -> Margin:
    first, relu, last = [n.name for n in ir.nodes if n.op_type in ("Linear", "ReLU")]
    return Margin(eps=_t(0.5, 0.25), lower=_t(1.0, 0.0), upper=_t(2.0, 0.5),
                  contributions={first: _t(0.125, 0.0625), last: _t(0.375, 0.1875)},
                  unstable={relu: (1, 3)})


PROPERTY = ("(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
            "(declare-const Y_1 Real)\n(assert (>= X_0 0))\n(assert (<= X_0 1))\n"
            "(assert (>= X_1 0))\n(assert (<= X_1 1))\n(assert (<= Y_0 Y_1))\n")


def test_the_view_shows_its_static_form_with_every_part():
    from ncet.widgets import MarginView, margin_view_html

    ir = ncet.convert(_net(), (2,))
    margin, prop = _margin(ir), ncet.read_vnnlib(PROPERTY)
    view = MarginView(margin, prop, ir)
    html = view.to_html()
    assert view.html.value == html == margin_view_html(margin, prop, ir)
    assert view._repr_mimebundle_()["text/html"] == html
    for heading in ("eps per output", "unsafe rows", "Where eps comes from",
                    "Unstable neurons"):
        assert heading in html
    assert "Y_0 - Y_1 &lt;= 0" in html  # b - a.y <= -1/2 + 3/4: not decided
    if ncet.render.matplotlib_available():  # the figure, above the tables, names op_types
        figure = html[html.index("<svg"):html.index("</svg>")]
        assert html.index("<svg") < html.index("eps per output")
        assert figure.count("(Linear)") == 2
    assert html.count("<td>Linear</td>") == 2 and "<td>ReLU</td>" in html
    assert "ncet-margin-view" in view._dom_classes


def test_the_view_refuses_other_things_and_other_networks_properties():
    from ncet.widgets import MarginView

    with pytest.raises(TypeError, match="ncet.float_margin"):
        MarginView("margin")
    three = PROPERTY.replace("(declare-const Y_1 Real)\n", "(declare-const Y_1 Real)\n"
                             "(declare-const Y_2 Real)\n")
    with pytest.raises(ValueError, match="3 outputs and the margin 2"):
        MarginView(_margin(ncet.convert(_net(), (2,))), ncet.read_vnnlib(three))


def test_the_workbench_shows_a_margin_in_a_tab_after_the_adjudication():
    from ncet.widgets import MarginView, Workbench

    from widgets.workbench import ADJUDICATION_TITLE, MARGIN_TITLE, TITLES

    net = _net()
    bench = Workbench(net, (2,))
    prop = ncet.read_vnnlib(PROPERTY)
    margin = _margin(bench.report.graph)
    view = bench.add_margin(margin, prop)
    assert isinstance(view, MarginView) and bench.margin is view
    assert bench.titles == (*TITLES, MARGIN_TITLE) and bench.children[-1] is view
    assert view.network is bench.report.graph and view.property is prop
    answer = ncet.adjudicate(net, PROPERTY, "((X_0 0.25) (X_1 0.75))", input_shape=(2,))
    bench.add_adjudication(answer)
    assert bench.titles == (*TITLES, MARGIN_TITLE, ADJUDICATION_TITLE)
    again = bench.add_margin(MarginView(margin))  # replaced in its own tab
    assert bench.titles == (*TITLES, MARGIN_TITLE, ADJUDICATION_TITLE)
    assert bench.children[len(TITLES)] is again and bench.margin is again
    html = bench.to_html()
    assert again.to_html() in html and bench.adjudication.to_html() in html
    assert html.index(f"<h3>{MARGIN_TITLE}</h3>") < html.index(f"<h3>{ADJUDICATION_TITLE}</h3>")
    with pytest.raises(TypeError, match="ncet.float_margin"):
        bench.add_margin("margin")
    built = Workbench(net, (2,), margin=margin)
    assert built.titles == (*TITLES, MARGIN_TITLE)


def test_the_view_of_a_network_and_property_computes_the_margin():
    from ncet.widgets import MarginView

    ir = ncet.convert(_net(), (2,))
    prop = ncet.read_vnnlib(PROPERTY)
    view = MarginView.of(ir, prop, splits=1)
    assert isinstance(view.margin, ncet.Margin) and view.margin.pieces == 1
    assert view.property is prop and view.network is ir
    assert view.to_html() == MarginView(view.margin, prop, ir).to_html()
