"""`AdjudicationView`: one adjudication (`ncet.adjudicate`, docs/adjudication.md) as a view:
the verdict, the five answers as a table, and the margins on one axis (exact arithmetic's
certified interval and each float32 run's margin, 0 the boundary of the unsafe set).

`adjudication_html(answer)` is its static form (HTML with an inline SVG; no matplotlib).
"""

from __future__ import annotations

import ipywidgets as W

import ncet
from ncet.render import VIEW_STYLE, escape, facts_html, number

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


def adjudication_html(answer: ncet.Adjudication) -> str:
    """The static form: the verdict, the answers table and the margin strip."""
    return (f'<div class="ncet-static ncet-adjudication">{VIEW_STYLE}'
            f"<p>verdict: <b>{escape(answer.verdict)}</b></p>"
            f"{facts_html(answer_facts(answer))}"
            "<p>Margins (exact: filled, float32: rings; >= 0 is inside the unsafe set):</p>"
            f"{margins_svg(answer)}</div>")


class AdjudicationView(StaticFallback, W.VBox):
    """One adjudication: the verdict, the five answers and the margins.

    Attributes:
        answer: The Adjudication shown.
        html: HTML: its static form.
    """

    def __init__(self, answer: ncet.Adjudication):
        if not isinstance(answer, ncet.Adjudication):
            raise TypeError(f"AdjudicationView shows an ncet.Adjudication (from "
                            f"ncet.adjudicate), not {type(answer).__name__}")
        self.answer = answer
        self.html = W.HTML(adjudication_html(answer))
        super().__init__([style_widget(), self.html])
        self.add_class("ncet-adjudication-view")
        self.add_class(VIEW_CLASS)

    def to_html(self) -> str:
        """The static form (`adjudication_html`)."""
        return adjudication_html(self.answer)
