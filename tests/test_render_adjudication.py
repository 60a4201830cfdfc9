"""The adjudication figure's geometry (ncet/render/unsafe_slice.py, adjudication_figure.py):
the rows restricted to a pair of outputs, the other outputs fixed at the exact output, and the
shaded polygon, on hand-built outputs whose sides are known."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

import ncet
from ncet.render.unsafe_slice import Outputs, slices_of


def _polytopes(unsafe: str, n: int = 3):
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(1)) + \
        "".join(f"(declare-const Y_{i} Real)\n" for i in range(n)) + \
        "(assert (>= X_0 0))\n(assert (<= X_0 1))\n" + unsafe
    prop = ncet.read_vnnlib(text)
    return tuple(p for case in prop.cases for p in case.unsafe)


def test_the_other_outputs_are_fixed_at_the_exact_output():
    # unsafe: Y_0 <= Y_1 and Y_0 <= Y_2; on the (Y_0, Y_1) plane Y_2 = 0.5 caps Y_0
    polytopes = _polytopes("(assert (<= Y_0 Y_1))\n(assert (<= Y_0 Y_2))\n")
    exact = np.array([0.25, 0.75, 0.5])
    outputs = Outputs(exact, np.zeros(3), (("run", np.array([0.625, 0.75, 0.5])),),
                      None, polytopes)
    slices, left = slices_of(outputs, 0.25)
    assert left == 0 and [s.pair for s in slices] == [(0, 2), (0, 1)]  # the tighter first
    s = slices[1]
    assert s.polytopes == (((F(1), F(-1), F(0), False), (F(1), F(0), F(1, 2), False)),)
    assert s.contains(s.exact) and not s.contains(s.float32[0][1])  # 0.625 > Y_2 = 0.5


def test_the_limit_on_pairs_is_said():
    rows = "".join(f"(assert (<= Y_0 Y_{j}))\n" for j in range(1, 7))
    polytopes = _polytopes(rows, 7)
    outputs = Outputs(np.arange(7.0), np.zeros(7), (), None, polytopes)
    slices, left = slices_of(outputs, 0.0, limit=4)
    assert len(slices) == 4 and left == 2


def test_the_shaded_polygon_holds_the_inside_points_only():
    pytest.importorskip("matplotlib")
    from matplotlib.path import Path

    from ncet.render.adjudication_figure import _view, region

    polytopes = _polytopes("(assert (<= Y_0 Y_1))\n(assert (<= Y_0 Y_2))\n")
    exact = np.array([0.25, 0.75, 0.5])
    [_, s] = slices_of(Outputs(exact, np.zeros(3), (), None, polytopes), 0.25)[0]
    view = _view(s)
    [polygon] = region(s, view)
    path = Path(polygon)
    u0, u1, v0, v1 = view
    for u in np.linspace(u0, u1, 9)[1:-1]:
        for v in np.linspace(v0, v1, 9)[1:-1]:
            if abs(u - v) > 1e-9 and abs(u - 0.5) > 1e-9:  # off the boundary lines
                assert path.contains_point((u, v)) == s.contains((u, v))
    # a row the fixed outputs break empties the slice: Y_2 = 0.5 < 0.6 <= Y_2 fails
    broken = _polytopes("(assert (<= Y_0 Y_1))\n(assert (>= Y_2 0.6))\n")
    [s] = [s for s in slices_of(Outputs(exact, np.zeros(3), (), None, broken), -0.1)[0]
           if s.pair == (0, 1)]
    assert region(s, _view(s)) == [] and not s.contains(s.exact)
