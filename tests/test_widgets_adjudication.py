"""The adjudication view (issue 33): the five answers and the verdict in the static form and
the live view, the margins strip placing each margin on the side of 0 it is on."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import ncet

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")


def _answer(x: str, y: str, unsafe: str = "(<= Y_0 0.5)") -> ncet.Adjudication:
    net = nn.Linear(1, 1)
    with torch.no_grad():  # y = x
        net.weight.fill_(1.0)
        net.bias.fill_(0.0)
    prop = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 0))\n"
            f"(assert (<= X_0 1))\n(assert {unsafe})\n")
    return ncet.adjudicate(net, prop, f"((X_0 {x}) (Y_0 {y}))", input_shape=(1,))


def test_the_static_form_holds_every_answer_and_the_verdict():
    from ncet.widgets import adjudication_html

    html = adjudication_html(_answer("0.25", "0.25"))
    for name in ("inside", "exact", "float32", "competition", "claimed matches", "verdict"):
        assert f"<th>{name}</th>" in html
    assert "<b>counterexample</b>" in html and "<svg" in html


def _circles(svg: str) -> list[tuple[float, str]]:
    return [(float(cx), kind) for cx, kind in re.findall(
        r'<circle cx="([\d.]+)"[^>]*?(fill="#2563eb"|fill="none")', svg)]


def test_the_margins_sit_on_their_side_of_zero():
    from ncet.widgets.adjudication import margins_svg

    safe = _answer("0.75", "0.75", "(<= Y_0 0.5)")  # margin -0.25 exactly and in float32
    svg = margins_svg(safe)
    zero = float(re.search(r'<line x1="([\d.]+)" y1="8"', svg).group(1))
    circles = _circles(svg)
    assert circles and all(cx < zero for cx, _ in circles)
    for x, width in re.findall(r'<rect x="([\d.]+)" y="34" width="([\d.]+)"', svg):
        assert float(x) + float(width) < zero  # the exact interval, when drawn as a bar
    unsafe = _answer("0.25", "0.25", "(<= Y_0 0.5)")  # margin +0.25
    svg = margins_svg(unsafe)
    zero = float(re.search(r'<line x1="([\d.]+)" y1="8"', svg).group(1))
    assert all(cx > zero for cx, _ in _circles(svg))


def test_the_view_shows_its_static_form_and_refuses_other_things():
    from ncet.widgets import AdjudicationView, adjudication_html

    answer = _answer("0.25", "0.25")
    view = AdjudicationView(answer)
    assert view.html.value == adjudication_html(answer) == view.to_html()
    bundle = view._repr_mimebundle_()
    assert bundle["text/html"] == view.to_html()
    with pytest.raises(TypeError, match="ncet.Adjudication"):
        AdjudicationView("counterexample")
