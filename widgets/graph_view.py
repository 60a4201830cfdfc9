"""GraphView: the GraphIR laid out in pure Python with a cluster per module call, shown in a
pan-and-zoom canvas (an anywidget) where a click selects a node or opens and closes a group,
and a search box finds a node by name, op_type or source line."""

from __future__ import annotations

from pathlib import Path

import anywidget
import ipywidgets as W
import traitlets

import ncet
from ncet.render import (
    BUDGET,
    ROOT,
    STATIC_BUDGET,
    Groups,
    escape,
    graph_html,
    node_facts,
    to_svg,
)

from .display import StaticFallback

CANVAS_CSS = """
.ncet-graph-canvas { position: relative; border: 1px solid var(--jp-border-color2, #cbd5e1);
  border-radius: 4px; background: var(--jp-layout-color0, #fff); }
.ncet-graph-holder { height: 560px; resize: vertical; overflow: hidden; cursor: grab;
  touch-action: none; user-select: none; }
.ncet-graph-holder svg { width: 100%; height: 100%; display: block; }
.ncet-graph-tools { position: absolute; top: 6px; right: 6px; z-index: 1; display: flex;
  gap: 4px; }
.ncet-graph-tools button { min-width: 28px; height: 26px; cursor: pointer;
  border: 1px solid var(--jp-border-color1, #94a3b8); border-radius: 3px;
  background: var(--jp-layout-color1, #f8fafc); color: var(--jp-ui-font-color1, #111); }
.ncet-graph-holder g.node { cursor: pointer; }
.ncet-graph-holder g.edge { pointer-events: none; }
.ncet-graph-holder g.cluster text { cursor: pointer; fill: var(--jp-ui-font-color2, #475569); }
.ncet-graph-holder g.cluster rect { stroke: var(--jp-ui-font-color3, #94a3b8); }
.ncet-graph-holder g.edge path { stroke: var(--jp-ui-font-color2, #64748b); }
.ncet-graph-holder marker path { fill: var(--jp-ui-font-color2, #64748b); }
.ncet-graph-holder g.node.ncet-selected rect { stroke: #f59e0b; stroke-width: 4px; }
"""


class GraphCanvas(anywidget.AnyWidget):
    """The browser side of GraphView: the SVG, panned and zoomed there; a click on a node
    sets `selected`, one on a group sends {"event": "toggle", "group": id} to the kernel.

    Attributes:
        svg: The drawing (`ncet.render.to_svg`: node `<g id="n:NAME">`, group
            `<g id="g:ID">`).
        selected: The IR node name marked (None for none).
        focus: The element id the next drawing is centred on ("" to fit the graph).
    """

    _esm = Path(__file__).with_name("graph_view.js")
    _css = CANVAS_CSS
    svg = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    focus = traitlets.Unicode("").tag(sync=True)


class GraphView(StaticFallback, W.VBox):
    """The IR as a layered DAG: module calls as clusters that open and close (a module
    called twice is two clusters, each where its call ran), op_type colours, each node's
    shape, constant shapes and key attributes on its box (all attributes in its tooltip);
    pan by dragging, zoom with the wheel or the buttons; the search box selects a node by
    name, op_type or source line.

    A graph of up to `budget` nodes is shown whole; a larger one opens its groups breadth
    first while they fit (a long `nn.Sequential` is split into blocks of blocks), and
    selecting a hidden node opens the groups around it.

    Attributes:
        ir: The GraphIR drawn.
        groups: Its tree of module calls (`ncet.render.Groups`).
        expanded: The ids of the open groups.
        selected: The IR node name selected (None for none): set by a click and `select`.
        canvas: The GraphCanvas.
        info: HTML: how many nodes and groups are shown.
        search_box: The search Text; Enter selects the first node matching it.
        next_match: The button selecting the next match.
        found: HTML: which match is selected, of how many ("no node matches 'xyz'").

    Example:
        >>> view = GraphView(ncet.convert(model, (3, 32, 32)))
        >>> view.select("conv1"); view.selected
        'conv1'
    """

    selected = traitlets.Unicode(None, allow_none=True)

    def __init__(self, ir: ncet.GraphIR, budget: int = BUDGET):
        if budget < 1:
            raise ValueError(f"budget must be positive, got {budget}")
        self.ir = ir
        self.budget = budget
        self.groups = Groups(ir)
        self.expanded = self.groups.default_expanded(budget)
        self._opened_for_selection: set[str] = set()  # closed again at the next selection
        self.info = W.HTML()
        self.info.add_class("ncet-graph-info")
        self.open_all = W.Button(description="open all", layout=W.Layout(width="auto",
                                                                          flex="0 0 auto"),
                                 tooltip="open every group (slow beyond ~2,000 nodes)")
        self.close_all = W.Button(description="close all",
                                  layout=W.Layout(width="auto", flex="0 0 auto"))
        self.open_all.add_class("ncet-graph-open-all")
        self.close_all.add_class("ncet-graph-close-all")
        self.open_all.on_click(lambda _: self._set_expanded(set(self.groups.groups)))
        self.close_all.on_click(lambda _: self._set_expanded({ROOT}))
        self.canvas = GraphCanvas()
        self.canvas.on_msg(self._on_message)
        traitlets.link((self, "selected"), (self.canvas, "selected"))
        self.canvas.add_class("ncet-graph-figure")
        self._haystack = [f"{n.name}\n{n.op_type}\n{n.source.location}".lower()
                          for n in ir.nodes]
        self._matches: tuple[str, list[str]] = ("", [])
        self.search_box = W.Text(placeholder="find: name, op_type or file:line",
                                 continuous_update=False, layout=W.Layout(width="260px"))
        self.search_box.add_class("ncet-graph-search")
        self.search_box.observe(lambda change: self.find(change["new"]), "value")
        self.next_match = W.Button(description="next", tooltip="select the next match",
                                   layout=W.Layout(width="auto", flex="0 0 auto"))
        self.next_match.add_class("ncet-graph-next")
        self.next_match.on_click(lambda _: self.find(self.search_box.value))
        self.found = W.HTML()
        self.found.add_class("ncet-graph-found")
        self.svg_button = W.Button(description="SVG of this view", icon="download",
                                   layout=W.Layout(width="auto", flex="0 0 auto"))
        self.svg_button.add_class("ncet-graph-svg")
        self.svg_link = W.HBox()  # the download link, made on a click (the SVG is large)
        self.svg_button.on_click(lambda _: self._offer_svg())
        tools = W.HBox([self.search_box, self.next_match, self.found, self.close_all, self.open_all,
                        self.svg_button, self.svg_link],
                       layout=W.Layout(flex_flow="row wrap", align_items="center"))
        super().__init__([tools, self.info, self.canvas])
        self.add_class("ncet-graph-view")
        self._draw()

    # -- public -----------------------------------------------------------------------------

    def select(self, name: str) -> None:
        """Select IR node `name`, opening the groups around it if they are closed.

        Raises:
            KeyError: The IR has no node of that name.
        """
        if name not in self.groups.owner:
            raise KeyError(f"the GraphIR has no node {name!r}")
        around = set(self.groups.ancestors(name))
        closed = around - self.expanded
        # the groups opened for the previous selection close again (those around this node
        # stay open), so that selections one after another do not open the whole graph
        stale = self._opened_for_selection - around
        if closed or stale:
            self._set_expanded((self.expanded - stale) | closed, focus="n:" + name)
        self._opened_for_selection = (self._opened_for_selection & around) | closed
        self.selected = name

    def node_data(self, name: str) -> dict:
        """What node `name`'s box and tooltip show: name, op_type, shape, dtype, constants
        (attribute -> (constant name, shape, dtype)), other attributes, module path, source.

        Raises:
            KeyError: The IR has no node of that name.
        """
        return node_facts(self.ir, self.ir.node(name))

    def toggle(self, group: str) -> None:
        """Open a closed group, or close an open one (and everything inside it)."""
        if group not in self.groups.groups:
            raise KeyError(f"no module group {group!r}")
        if group == ROOT:
            return
        if group in self.expanded:
            inside = {g for g in self.expanded if group in self.groups.ancestors(g) or
                      g == group}
            self._set_expanded(self.expanded - inside, focus="g:" + group)
        else:
            self._set_expanded(self.expanded | {group}, focus="g:" + group)

    def search(self, query: str) -> list[str]:
        """The names of the nodes whose name, op_type or source line (`file.py:71`) holds
        `query` (case ignored), in graph order; none for a blank query."""
        needle = query.strip().lower()
        if not needle:
            return []
        names = self.ir.nodes
        return [names[k].name for k, text in enumerate(self._haystack) if needle in text]

    def find(self, query: str) -> str | None:
        """Select (and centre on) the next node matching `query` (see `search`): the first
        for a new query, the one after the selected match when the same query is asked
        again. Returns its name, or None when nothing matches."""
        if query != self._matches[0]:
            self._matches = (query, self.search(query))
        matches = self._matches[1]
        if not matches:
            self.found.value = (f'<span class="ncet-empty">no node matches '
                                f"'{escape(query.strip())}'</span>" if query.strip() else "")
            return None
        at = matches.index(self.selected) + 1 if self.selected in matches else 0
        name = matches[at % len(matches)]
        self.select(name)
        self.found.value = f"{at % len(matches) + 1} of {len(matches)}: {escape(name)}"
        return name

    def svg(self) -> str:
        """The drawing of what the view shows."""
        return to_svg(self.groups, self.expanded)

    def to_html(self) -> str:
        """The static form: the drawing of what the view shows, as inline SVG."""
        return graph_html(self.ir, self.expanded, self.groups)

    # -- internals --------------------------------------------------------------------------

    def _static_html(self) -> str:
        shown = self.groups.visible(self.expanded)
        if len(shown.nodes) + len(shown.boxes) <= STATIC_BUDGET:
            return self.to_html()
        return graph_html(self.ir, self.groups.default_expanded(STATIC_BUDGET), self.groups)

    def _on_message(self, _widget, content, _buffers) -> None:
        if content.get("event") == "toggle" and content.get("group") in self.groups.groups:
            self.toggle(content["group"])

    def _set_expanded(self, expanded: set[str], focus: str = "") -> None:
        self.expanded = expanded | {ROOT}
        self._opened_for_selection &= self.expanded
        self._draw(focus)

    def _offer_svg(self) -> None:
        """A download link for the drawing as it is now (its open and closed groups)."""
        from .downloads import download_link

        self.svg_link.children = [download_link(self.canvas.svg, "graph.svg", "image/svg+xml")]

    def _draw(self, focus: str = "") -> None:
        self.svg_link.children = ()
        shown = self.groups.visible(self.expanded)
        closed = len(shown.boxes)
        self.info.value = (f"{len(self.ir.nodes)} nodes in {len(self.groups.groups) - 1} "
                           f"module calls; showing {len(shown.nodes)} nodes"
                           + (f" and {closed} closed groups" if closed else "")
                           + ". Drag to pan, wheel to zoom; click a node to select it, a "
                           "closed group to open it, an open group's title to close it.")
        with self.canvas.hold_sync():
            self.canvas.focus = focus
            self.canvas.svg = self.svg()


graph_view_html = graph_html
"""The graph view's static form (`ncet.render.graph_html`): the report draws the same."""
