"""Paging shared by the views that render one page of a long list (MappingTable and the
ExactnessPanel's node table): only the current page is ever rendered."""

from __future__ import annotations

import contextlib

import ipywidgets as W


class Paged:
    """Mixin for a view with a `page` control (a BoundedIntText from 1), a `page_size`, the
    positions of the rows that pass its filters in `_matches`, and a `_render()`."""

    _holding = False

    def _add_pager(self, prefix: str) -> None:
        """Create the `page`, `prev`, `next` and `count` controls wired to this view, with
        the DOM classes `<prefix>page`, `<prefix>prev`, `<prefix>next` and `<prefix>count`."""
        self.page = W.BoundedIntText(value=1, min=1, max=1, description="page",
                                     layout=W.Layout(width="160px"))
        self.prev = W.Button(description="◀ prev", layout=W.Layout(width="80px"))
        self.next = W.Button(description="next ▶", layout=W.Layout(width="80px"))
        self.count = W.HTML()
        for widget, name in ((self.page, "page"), (self.prev, "prev"), (self.next, "next"),
                             (self.count, "count")):
            widget.add_class(prefix + name)
        self.page.observe(self._on_page, names="value")
        self.prev.on_click(lambda _: self._step(-1))
        self.next.on_click(lambda _: self._step(1))

    @property
    def pages(self) -> int:
        """How many pages the filtered rows fill (at least 1)."""
        return max(1, -(-len(self._matches) // self.page_size))

    def _page_slice(self) -> slice:
        start = (self.page.value - 1) * self.page_size
        return slice(start, start + self.page_size)

    @contextlib.contextmanager
    def _hold(self):
        """Change controls without their observers re-rendering."""
        holding, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = holding

    def _turn_to(self, page: int) -> None:
        """Fit the page control to the filtered rows, show `page`, render."""
        with self._hold():
            self.page.max = self.pages
            self.page.value = page
        self._render()

    def _on_page(self, _change) -> None:
        if not self._holding:
            self._render()

    def _step(self, delta: int) -> None:
        self.page.value = min(max(1, self.page.value + delta), self.pages)
