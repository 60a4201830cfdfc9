"""`MarginView`: a float margin (`ncet.float_margin`, docs/margins.md) as a view: the
headline, where eps comes from (each node's share, drawn) beside eps per output against the
exact output's range, the property's unsafe rows against eps (given the property), the
shares of eps as a table and the unstable neurons per nonlinear node. The report's renderer
(`ncet.render.margin_repr_html`, the tables and figure of `ncet.render.margin_page`).

`margin_view_html(margin, property, network)` is its static form (HTML with an inline SVG).
"""

from __future__ import annotations

import ipywidgets as W

from ncet.render import margin_repr_html

from .display import VIEW_CLASS, StaticFallback, style_widget

LIMIT = 50
"""The most outputs, rows and nodes each table of the view lists."""

FIELDS = ("eps", "lower", "upper", "contributions", "unstable", "num_outputs")
"""What a Margin record has (`ncet.float_margin` returns one)."""


def margin_view_html(margin, property=None, network=None, limit: int | None = LIMIT) -> str:
    """The static form: the headline, the figure (when matplotlib is installed) and the
    tables, each to `limit` records."""
    return margin_repr_html(margin, property, network, limit=limit, figure=True)


class MarginView(StaticFallback, W.VBox):
    """One float margin: the headline, the figure and the tables (module docstring).

    Attributes:
        margin: The Margin shown.
        property: The Property it was computed for, or None (no rows table).
        network: The GraphIR, or None (op_types unnamed, bars in one colour).
        html: HTML: its static form.

    Example:
        >>> view = MarginView(ncet.float_margin(ir, prop), prop, ir)
    """

    def __init__(self, margin, property=None, network=None, limit: int | None = LIMIT):
        if not all(hasattr(margin, name) for name in FIELDS):
            raise TypeError(f"MarginView shows a Margin (from ncet.float_margin), not "
                            f"{type(margin).__name__}")
        self.margin, self.property, self.network, self.limit = margin, property, network, limit
        self.html = W.HTML(self.to_html())
        self.html.add_class("ncet-margin-html")
        super().__init__([style_widget(), self.html])
        self.add_class("ncet-margin-view")
        self.add_class(VIEW_CLASS)

    def to_html(self) -> str:
        """The static form (`margin_view_html`)."""
        return margin_view_html(self.margin, self.property, self.network, self.limit)
