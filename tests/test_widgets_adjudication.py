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


# --- the output against the unsafe set on 2-D slices ---------------------------------------

def _identity(n: int) -> nn.Module:
    net = nn.Linear(n, n)
    with torch.no_grad():  # y = x, exactly in every arithmetic
        net.weight.copy_(torch.eye(n))
        net.bias.fill_(0.0)
    return net


def _two(unsafe: str = "(assert (<= Y_0 Y_1))", n: int = 2) -> str:
    decl = "".join(f"(declare-const X_{i} Real)\n" for i in range(n)) + \
        "".join(f"(declare-const Y_{i} Real)\n" for i in range(n))
    box = "".join(f"(assert (>= X_{i} 0))\n(assert (<= X_{i} 1))\n" for i in range(n))
    return decl + box + unsafe + "\n"


def test_the_slices_mark_the_adjudications_points_on_the_right_side():
    pytest.importorskip("matplotlib")
    from ncet.render import adjudication_figure, drawn_points

    net, prop = _identity(2), _two()
    # X inside, Y_0 <= Y_1: unsafe; the claimed Y is on the safe side of Y_0 = Y_1
    witness = "((X_0 0.25) (X_1 0.75) (Y_0 0.8) (Y_1 0.2))"
    view = ncet.widgets.AdjudicationView.of(net, prop, witness, input_shape=(2,))
    assert view.answer.exact.violated and view.answer.float32.violated
    [s] = view.slices
    assert s.pair == (0, 1) and not s.wide and view.left_out == 0
    assert s.exact == (0.25, 0.75) and s.float32[0][1] == (0.25, 0.75)
    assert s.claimed == (0.8, 0.2)
    assert s.contains(s.exact) and s.contains(s.float32[0][1]) and not s.contains(s.claimed)
    assert s.contains((0.5, 0.5)) and not s.contains((0.5 + 2 ** -20, 0.5))  # the boundary
    [points] = drawn_points(adjudication_figure(view.slices))
    assert points == {"ncet-exact": (0.25, 0.75), "ncet-float32-0": (0.25, 0.75),
                      "ncet-claimed": (0.8, 0.2)}
    # the other side: X = (0.75, 0.25) is safe in every arithmetic
    safe = ncet.widgets.AdjudicationView.of(net, prop, "((X_0 0.75) (X_1 0.25))",
                                            input_shape=(2,))
    [s] = safe.slices
    assert safe.answer.exact.violated is False and not s.contains(s.exact)
    assert s.claimed is None and not s.contains(s.float32[0][1])


def test_the_shaded_region_is_the_slices_unsafe_set():
    pytest.importorskip("matplotlib")
    from ncet.render import adjudication_figure
    from ncet.render.adjudication_figure import GIDS

    view = ncet.widgets.AdjudicationView.of(_identity(2), _two(), "((X_0 0.25) (X_1 0.75))",
                                            input_shape=(2,))
    figure = adjudication_figure(view.slices)
    [patch] = [p for p in figure.axes[0].patches if p.get_gid().startswith(GIDS["unsafe"])]
    path = patch.get_path().transformed(patch.get_patch_transform())
    [s] = view.slices
    for point in [(0.25, 0.75), (0.3, 0.31), (0.31, 0.3), (0.75, 0.25)]:
        assert path.contains_point(point) == s.contains(point)


def test_a_row_on_three_outputs_is_drawn_on_its_two_largest_coefficients():
    pytest.importorskip("matplotlib")
    from ncet.render import adjudication_figure, figure_svg

    prop = _two("(assert (<= (+ Y_0 (* 2 Y_1) (* -3 Y_2)) 0))", 3)
    view = ncet.widgets.AdjudicationView.of(_identity(3), prop,
                                            "((X_0 0.5) (X_1 0.25) (X_2 0.5))",
                                            input_shape=(3,))
    [s] = view.slices
    assert s.pair == (1, 2) and s.wide
    assert s.contains(s.exact) == view.answer.exact.violated is True
    svg = figure_svg(adjudication_figure(view.slices))
    assert "more than two outputs" in svg
    assert svg == figure_svg(adjudication_figure(view.slices))  # the same bytes every time


def test_the_view_draws_the_slices_below_the_answers_without_a_kernel():
    pytest.importorskip("matplotlib")
    from ncet.widgets import AdjudicationView

    view = AdjudicationView.of(_identity(2), _two(), "((X_0 0.25) (X_1 0.75))",
                               input_shape=(2,))
    html = view._repr_mimebundle_()["text/html"]
    assert html == view.to_html() == view.html.value
    assert html.index("<th>verdict</th>") < html.index('id="ncet-exact"')
    assert "Y_0 against Y_1" in html
    assert 'id="ncet-unsafe-0"' in html
    plain = AdjudicationView(view.answer).to_html()  # no slices: says how to get them
    assert "ncet-exact" not in plain and "AdjudicationView.of" in plain


def test_a_one_output_property_is_drawn_on_a_line():
    pytest.importorskip("matplotlib")
    from ncet.render import adjudication_figure, drawn_points, unsafe_slices

    answer = _answer("0.25", "0.75")  # y = x, unsafe Y_0 <= 0.5; the claim on the safe side
    net = nn.Linear(1, 1)
    with torch.no_grad():
        net.weight.fill_(1.0)
        net.bias.fill_(0.0)
    prop = ("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (>= X_0 0))\n"
            "(assert (<= X_0 1))\n(assert (<= Y_0 0.5))\n")
    slices, left = unsafe_slices(net, prop, "((X_0 0.25) (Y_0 0.75))", answer,
                                 input_shape=(1,))
    [s] = slices
    assert s.pair == (0, None) and left == 0
    assert s.contains(s.exact) and not s.contains(s.claimed)
    view = ncet.widgets.AdjudicationView(answer, slices)
    assert "Y_0: exact margin" in view.to_html()
    [points] = drawn_points(adjudication_figure(slices))
    assert points["ncet-exact"] == (0.25, 0.0) and points["ncet-claimed"] == (0.75, 0.0)


def test_the_workbench_shows_an_adjudication_in_a_last_tab():
    from ncet.widgets import AdjudicationView, Workbench

    from widgets.workbench import ADJUDICATION_TITLE, TITLES

    net = _identity(2)
    assert Workbench(net, (2,)).titles == TITLES  # without one: as before
    answer = ncet.adjudicate(net, _two(), "((X_0 0.25) (X_1 0.75))", input_shape=(2,))
    bench = Workbench(net, (2,), adjudication=answer)
    assert bench.titles == (*TITLES, ADJUDICATION_TITLE)
    assert isinstance(bench.adjudication, AdjudicationView)
    assert bench.children[-1] is bench.adjudication
    assert bench.adjudication.to_html() in bench.to_html()
    again = bench.add_adjudication(AdjudicationView(answer))
    assert bench.titles == (*TITLES, ADJUDICATION_TITLE) and bench.children[-1] is again
    with pytest.raises(TypeError, match="ncet.Adjudication"):
        bench.add_adjudication("counterexample")


def test_the_figure_of_an_acas_xu_witness():
    pytest.importorskip("matplotlib")
    pytest.importorskip("onnxruntime")
    import numpy as np
    import onnxruntime as ort

    from ncet.render import adjudication_figure, drawn_points, figure_svg
    from tests.corpus import corpus_root

    root = corpus_root()
    net = root / "acasxu/onnx/ACASXU_run2a_1_7_batch_2000.onnx"
    prop = root / "acasxu/vnnlib/prop_3.vnnlib"
    witness = root / ("witnesses/acasxu/2023__alpha_beta_crown__ACASXU_run2a_1_7_batch_2000"
                      "_prop_3.counterexample")
    view = ncet.widgets.AdjudicationView.of(net, prop, witness)
    answer = view.answer
    assert answer.verdict == "counterexample"
    # property 3's rows are Y_0 <= Y_j: the (Y_0, Y_j) planes, all four
    assert sorted(s.pair for s in view.slices) == [(0, 1), (0, 2), (0, 3), (0, 4)]
    w = ncet.read_witness(witness)
    options = ort.SessionOptions()  # as adjudicate runs it: no graph optimizations
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(net), options, providers=["CPUExecutionProvider"])
    x = w.x_as(np.float32).reshape(1, 1, 1, 5)
    y = session.run(None, {session.get_inputs()[0].name: x})[0].reshape(-1)
    claimed = w.y_as(np.float64)
    figure = adjudication_figure(view.slices)
    for s, points in zip(view.slices, drawn_points(figure)):
        j, k = s.pair
        assert points["ncet-float32-0"] == (float(y[j]), float(y[k]))
        assert points["ncet-claimed"] == (claimed[j], claimed[k])
        assert points["ncet-exact"] == s.exact
        # the exact output is where the certified margin says: inside every slice
        assert s.contains(s.exact) == answer.exact.violated
        assert s.contains(points["ncet-float32-0"]) == answer.float32.violated
    assert figure_svg(figure).count('id="ncet-exact"') == 4
