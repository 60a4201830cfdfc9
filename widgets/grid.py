"""RowGrid: an HTML table shown in the notebook whose row and header clicks reach the kernel.

An `ipywidgets.HTML` cannot send anything back, so the mapping table's page is shown by a
small anywidget instead: its ES module sets the table's HTML (rendered in Python, one page
at a time) and sends one message per click, `{"event": "row", "node": <data-node>}` for a
body row and `{"event": "sort", "column": <data-sort>}` for a sortable header. The HTML is
the same the static forms embed, so the DOM contract (`table.ncet-mapping tbody
tr[data-node]`) holds in both. Without anywidget installed, RowGrid is a plain HTML widget:
the table still shows, and rows are chosen with the node Combobox instead.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
import traitlets

try:
    import anywidget
except ImportError:  # the optional dependency is missing: a table without clicks
    anywidget = None

CLICKABLE = anywidget is not None
"""Whether a click on a row or a header reaches the kernel (anywidget is installed)."""

ESM = """
function render({ model, el }) {
  const draw = () => { el.innerHTML = model.get("value"); };
  draw();
  model.on("change:value", draw);
  el.classList.add("ncet-clickable");
  el.addEventListener("click", (event) => {
    const th = event.target.closest("th[data-sort]");
    if (th && el.contains(th)) {
      model.send({ event: "sort", column: th.dataset.sort });
      return;
    }
    const tr = event.target.closest("tbody tr[data-node]");
    if (tr && el.contains(tr)) model.send({ event: "row", node: tr.dataset.node });
  });
  return () => model.off("change:value", draw);
}
export default { render };
"""
"""The grid's front end: draw `value`, send row and header clicks."""

_Base = anywidget.AnyWidget if anywidget is not None else W.HTML


class RowGrid(_Base):
    """A table whose rows (`tr[data-node]`) and sortable headers (`th[data-sort]`) can be
    clicked.

    Attributes:
        value: The table's HTML, as `ncet.render.records_html` renders it.

    Example:
        >>> grid = RowGrid(value=records_html(rows, COLUMNS, node=name, sort=("#", True)))
        >>> grid.on_row(lambda node: print("clicked", node))
    """

    if anywidget is not None:
        _esm = traitlets.Unicode(ESM).tag(sync=True)
        value = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._row_handlers: list[Callable[[str], None]] = []
        self._sort_handlers: list[Callable[[str], None]] = []
        if anywidget is not None:
            self.on_msg(self._on_message)

    def on_row(self, handler: Callable[[str], None]) -> None:
        """Call `handler(node)` when a body row is clicked."""
        self._row_handlers.append(handler)

    def on_sort(self, handler: Callable[[str], None]) -> None:
        """Call `handler(column)` when a sortable header is clicked."""
        self._sort_handlers.append(handler)

    def click_row(self, node: str) -> None:
        """Do what a click on the row `data-node="node"` does (for tests and scripts)."""
        self._on_message(self, {"event": "row", "node": node}, [])

    def click_header(self, column: str) -> None:
        """Do what a click on the header `data-sort="column"` does."""
        self._on_message(self, {"event": "sort", "column": column}, [])

    def _on_message(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict):
            return
        if content.get("event") == "row" and isinstance(content.get("node"), str):
            for handler in self._row_handlers:
                handler(content["node"])
        elif content.get("event") == "sort" and isinstance(content.get("column"), str):
            for handler in self._sort_handlers:
                handler(content["column"])
