"""`MarginView`: a float margin (`ncet.float_margin`, docs/margins.md) as a view: the
headline, where eps comes from (each node's share, drawn) beside eps per output against the
exact output's range, the property's unsafe rows against eps (given the property), the
shares of eps as a table and the unstable neurons per nonlinear node. The report's renderer
(`ncet.render.margin_repr_html`, the tables and figure of `ncet.render.margin_page`).

`margin_view_html(margin, property, network)` is its static form (HTML with an inline SVG).
"""

from __future__ import annotations

import ipywidgets as W

import ncet
from ncet.render import margin_repr_html

from .display import VIEW_CLASS, StaticFallback, style_widget

LIMIT = 50
"""The most outputs, rows and nodes each table of the view lists."""

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
        >>> view = MarginView.of(ir, prop)  # the same
    """

    def __init__(self, margin, property=None, network=None, limit: int | None = LIMIT):
        if not isinstance(margin, ncet.Margin):
            raise TypeError(f"MarginView shows a Margin (from ncet.float_margin), not "
                            f"{type(margin).__name__}")
        self.margin, self.property, self.network, self.limit = margin, property, network, limit
        self.html = W.HTML(self.to_html())
        self.html.add_class("ncet-margin-html")
        super().__init__([style_widget(), self.html])
        self.add_class("ncet-margin-view")
        self.add_class(VIEW_CLASS)

    @classmethod
    def of(cls, network, property, *, limit: int | None = LIMIT, **options) -> MarginView:
        """Compute the margin of `network` over `property`'s region (`ncet.float_margin`,
        with `options`: input_rounding, splits) and show it.

        Raises:
            As `ncet.float_margin`.
        """
        return cls(ncet.float_margin(network, property, **options), property, network, limit)

    def to_html(self) -> str:
        """The static form (`margin_view_html`)."""
        return margin_view_html(self.margin, self.property, self.network, self.limit)
