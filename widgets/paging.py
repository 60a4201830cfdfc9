"""Paging shared by the views that render one page of a long list (MappingTable and the
ExactnessPanel's node table): only the current page is ever rendered."""

from __future__ import annotations

import contextlib

import ipywidgets as W

PAGE_SIZES = (10, 25, 50, 100)
"""The page sizes the page-size control offers (a view's own default is added)."""


def count_text(first: int, last: int, matching: int, total: int, noun: str = "nodes",
               which: str = "matching", empty: str = "") -> str:
    """What a pager says it shows.

    "showing 1–8 of 8 nodes" when nothing is filtered out, "showing 1–8 of 12 matching (40
    nodes)" when something is, and `empty` (default "no node matches") when nothing
    passes the filters.

    Args:
        first, last: The positions (from 1) of the first and last rows shown.
        matching: How many rows pass the filters.
        total: How many rows there are.
        noun: What the rows are.
        which: How the rows that pass are called ("matching", "violated").
        empty: The text when no row passes the filters.
    """
    if matching == 0:
        return empty or f"no {noun.removesuffix('s')} matches"
    if matching == total:
        return f"showing {first}–{last} of {total} {noun}"
    return f"showing {first}–{last} of {matching} {which} ({total} {noun})"


class Paged:
    """Mixin for a view with a `page` control (a BoundedIntText from 1), a `page_size`, the
    positions of the rows that pass its filters in `_matches`, and a `_render()`."""

    _holding = False

    def _add_pager(self, prefix: str, sizes: tuple[int, ...] = ()) -> None:
        """Create the `page`, `prev`, `next` and `count` controls wired to this view, with
        the DOM classes `<prefix>page`, `<prefix>prev`, `<prefix>next` and `<prefix>count`;
        with `sizes`, also `page_size_control`, a Dropdown of page sizes
        (`<prefix>page-size`)."""
        self.page = W.BoundedIntText(value=1, min=1, max=1, description="page",
                                     layout=W.Layout(width="140px"),
                                     style={"description_width": "36px"})
        self.prev = W.Button(description="◀ prev", layout=W.Layout(width="72px"))
        self.next = W.Button(description="next ▶", layout=W.Layout(width="72px"))
        self.count = W.HTML(layout=W.Layout(width="auto"))
        controls = [(self.page, "page"), (self.prev, "prev"), (self.next, "next"),
                    (self.count, "count")]
        if sizes:
            options = sorted({*sizes, self.page_size})
            self.page_size_control = W.Dropdown(
                options=options, value=self.page_size, description="rows",
                layout=W.Layout(width="130px"), style={"description_width": "36px"})
            self.page_size_control.observe(self._on_page_size, names="value")
            controls.append((self.page_size_control, "page-size"))
        for widget, name in controls:
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
            self.page.value = min(max(1, page), self.pages)
        self._render()

    def _on_page(self, _change) -> None:
        if not self._holding:
            self._render()

    def _on_page_size(self, change) -> None:
        """A new page size: keep the first row shown on the page shown."""
        first = self._page_slice().start
        self.page_size = change["new"]
        if not self._holding:
            self._turn_to(first // self.page_size + 1)

    def _step(self, delta: int) -> None:
        self.page.value = min(max(1, self.page.value + delta), self.pages)
