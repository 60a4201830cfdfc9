"""`AdjudicationView`: one adjudication (`ncet.adjudicate`, docs/adjudication.md) as a view:
the verdict, the five answers as a table, and the margins on one axis (exact arithmetic's
certified interval and each float32 run's margin, 0 the boundary of the unsafe set).

Below the answers, the output against the unsafe set on 2-D slices (`ncet.render`'s
`adjudication_figure`), when the view is given the slices (`AdjudicationView.of(network,
property, witness)` computes them; an Adjudication alone holds the margins, not the outputs).

`adjudication_html(answer, slices)` is its static form (HTML with inline SVGs).
"""

from __future__ import annotations

import ipywidgets as W

import ncet
from ncet.render import (
    VIEW_STYLE,
    adjudication_figure,
    escape,
    facts_html,
    figure_svg,
    matplotlib_available,
    number,
    unsafe_slices,
)

from .display import VIEW_CLASS, StaticFallback, style_widget

WIDTH, HEIGHT = 520, 64
"""The margin strip's size in pixels."""


def _yes(value) -> str:
    return "undecided" if value is None else "violated" if value else "not violated"


def answer_facts(answer: ncet.Adjudication) -> list[tuple[str, str]]:
    """The five answers and the verdict, one (name, text) each."""
    e, f, c = answer.exact, answer.float32, answer.competition
    lo, hi = e.margin_bounds
    where = f"box {answer.box}" if answer.inside else \
        f"outside by {number(float(answer.outside_by))}" + (
            " (inside once rounded to float32)" if answer.inside_float32_box else "")
    exact = f"{_yes(e.violated)}, margin {number(e.margin)}" + (
        " exactly" if e.method == "rational" else
        f" in [{number(float(lo))}, {number(float(hi))}] (certified enclosure)")
    runs = "; ".join(f"{r}: {_yes(v)}, margin {number(m)}" for r, v, m in f.runs)
    rule = (f"{'accepted' if c.accepted else 'rejected'}: relative error "
            f"{number(c.relative_error)} (matched {c.matched}), box within 1e-4 {c.in_box}, "
            f"property on the claimed Y within 1e-4 {c.property_violated}")
    return [("inside", f"{answer.inside} ({where})"), ("exact", exact), ("float32", runs),
            ("competition", rule), ("claimed matches", str(answer.claimed_matches)),
            ("verdict", answer.verdict)]


def margins_svg(answer: ncet.Adjudication) -> str:
    """The margins on one axis: the exact interval (a bar, or a dot when exact), each
    float32 run (a ring), 0 (the unsafe set's boundary: unsafe to the right)."""
    lo, hi = (float(v) for v in answer.exact.margin_bounds)
    points = [lo, hi, *(m for _, _, m in answer.float32.runs)]
    span = max((abs(p) for p in points if p == p and abs(p) != float("inf")), default=1.0)
    span = span * 1.15 or 1.0

    def x(v: float) -> float:
        v = max(-span, min(span, v))
        return 20 + (v + span) / (2 * span) * (WIDTH - 40)

    parts = [f'<svg class="ncet-margins" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="margins">',
             f'<line x1="20" y1="40" x2="{WIDTH - 20}" y2="40" stroke="currentColor" '
             'stroke-opacity="0.4"/>',
             f'<line x1="{x(0):.1f}" y1="8" x2="{x(0):.1f}" y2="56" stroke="currentColor"/>',
             f'<text x="{x(0) + 4:.1f}" y="16" font-size="10" fill="currentColor">'
             'unsafe &#8594;</text>',
             f'<text x="20" y="60" font-size="10" fill="currentColor">{escape(number(-span))}'
             f'</text><text x="{WIDTH - 20}" y="60" font-size="10" text-anchor="end" '
             f'fill="currentColor">{escape(number(span))}</text>']
    if hi > lo:
        parts.append(f'<rect x="{x(lo):.1f}" y="34" width="{max(x(hi) - x(lo), 2):.1f}" '
                     'height="12" fill="#2563eb"><title>exact (certified interval)</title>'
                     '</rect>')
    else:
        parts.append(f'<circle cx="{x(lo):.1f}" cy="40" r="5" fill="#2563eb"><title>exact'
                     '</title></circle>')
    for runtime, _, margin in answer.float32.runs:
        parts.append(f'<circle cx="{x(margin):.1f}" cy="40" r="7" fill="none" '
                     f'stroke="#dc2626" stroke-width="2"><title>float32: {escape(runtime)}'
                     '</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def slices_html(slices, left_out: int = 0) -> str:
    """The output against the unsafe set on 2-D slices (an SVG), or why it is not drawn."""
    if slices is None:
        return ("<p>The output against the unsafe set is drawn when the view has the "
                "network, the property and the witness: <code>AdjudicationView.of(network, "
                "property, witness)</code>.</p>")
    if not matplotlib_available():
        return "<p>The output against the unsafe set needs matplotlib (not installed).</p>"
    figure = adjudication_figure(slices, left_out)
    return ("<p>The output against the unsafe set, on the planes of the outputs its rows "
            "involve (the other outputs at the exact output's values):</p>"
            f"{figure_svg(figure, salt='ncet-adjudication')}")


def adjudication_html(answer: ncet.Adjudication, slices=None, left_out: int = 0) -> str:
    """The static form: the verdict, the answers table, the margin strip and the slices
    (`slices_html`)."""
    return (f'<div class="ncet-static ncet-adjudication">{VIEW_STYLE}'
            f"<p>verdict: <b>{escape(answer.verdict)}</b></p>"
            f"{facts_html(answer_facts(answer))}"
            "<p>Margins (exact: filled, float32: rings; >= 0 is inside the unsafe set):</p>"
            f"{margins_svg(answer)}{slices_html(slices, left_out)}</div>")


class AdjudicationView(StaticFallback, W.VBox):
    """One adjudication: the verdict, the five answers, the margins and (given the slices)
    the output against the unsafe set on 2-D slices.

    Attributes:
        answer: The Adjudication shown.
        slices: The `ncet.render.Slice`s drawn (None: not drawn).
        left_out: How many pairs of outputs were not drawn.
        html: HTML: its static form.

    Example:
        >>> view = AdjudicationView.of("net.onnx", "prop.vnnlib", "w.counterexample")
    """

    def __init__(self, answer: ncet.Adjudication, slices=None, left_out: int = 0):
        if not isinstance(answer, ncet.Adjudication):
            raise TypeError(f"AdjudicationView shows an ncet.Adjudication (from "
                            f"ncet.adjudicate), not {type(answer).__name__}")
        self.answer = answer
        self.slices = None if slices is None else list(slices)
        self.left_out = left_out
        self.html = W.HTML(adjudication_html(answer, self.slices, left_out))
        super().__init__([style_widget(), self.html])
        self.add_class("ncet-adjudication-view")
        self.add_class(VIEW_CLASS)

    @classmethod
    def of(cls, network, property, witness, *, input_shape=None,
           exact: str = "auto") -> AdjudicationView:
        """Adjudicate (`ncet.adjudicate`, same arguments) and draw the slices.

        Raises:
            As `ncet.adjudicate`.
        """
        answer = ncet.adjudicate(network, property, witness, input_shape=input_shape,
                                 exact=exact)
        slices, left_out = unsafe_slices(network, property, witness, answer,
                                         input_shape=input_shape)
        return cls(answer, slices, left_out)

    def to_html(self) -> str:
        """The static form (`adjudication_html`)."""
        return adjudication_html(self.answer, self.slices, self.left_out)
