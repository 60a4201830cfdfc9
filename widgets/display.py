"""The notebook display of the views: the live widget, and its static HTML beside it.

A saved notebook keeps every representation a cell displayed. Where no widget manager runs
(GitHub, nbviewer, nbconvert, an untrusted notebook, a notebook opened before Run All or
after a kernel restart), renderers skip the widget and show the next representation they
know, so each view puts its `to_html()` there instead of ipywidgets' repr of its widget tree.
The live views get the same table style as the static forms from `style_widget()`.
"""

from __future__ import annotations

from ncet.render import VIEW_STYLE

STATIC_ROWS = 500
"""The most mapping-table rows a view's display embeds in the notebook (the whole table of a
20,000-node model would add megabytes to the file); `to_html()` itself has them all."""

VIEW_CLASS = "ncet-view"
"""The class of a live view's root widget: `ncet.render`'s view rules apply inside it."""


def style_widget():
    """An `ipywidgets.HTML` holding the views' `<style>` (class `ncet-style`): put it in a
    live view (whose root has class `VIEW_CLASS`) so its tables look like the static forms
    and the report's (pills, tints, nowrap, compact rows, theme colours)."""
    import ipywidgets as W

    widget = W.HTML(VIEW_STYLE, layout=W.Layout(height="0px", margin="0"))
    widget.add_class("ncet-style")
    return widget


class StaticFallback:
    """Mixin for an ipywidgets view with a `to_html()`: its mime bundle carries that HTML as
    `text/html` and a one-line `text/plain`, beside the widget view itself."""

    def _static_html(self) -> str:
        """The HTML embedded in the display; views with long tables cap their rows."""
        return self.to_html()

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = dict(super()._repr_mimebundle_(**kwargs))
        bundle["text/plain"] = f"<{type(self).__name__} widget: its static form is this " \
            "output's HTML>"
        bundle["text/html"] = self._static_html()
        return bundle
