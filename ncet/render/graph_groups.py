"""The GraphIR's nodes grouped by module call into a tree of collapsible groups, and the graph
that is drawn for a set of expanded groups (a collapsed group is one box)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import GraphIR

FANOUT = 40
"""Most items (nodes and subgroups) one group shows when expanded: a module with more (an
`nn.Sequential` of 10,000 layers) gets its items split into consecutive blocks of blocks."""

BUDGET = 400
"""Most boxes the first drawing shows: groups are expanded breadth first while they fit."""

ROOT = ""
"""The id of the whole model's group (never collapsed)."""


@dataclass
class Group:
    """One call of a module (or a block of a long call's items): its direct nodes and
    subgroups.

    Attributes:
        id: The module path for its first call ("" for the model), `path@k` for its k-th
            call, or `path[first..last]` for a block.
        label: What its cluster or box is titled with (`path (call k)` from the second).
        module: The module path (a block's is its module's).
        call: Which call of the module it is (1 for the first).
        items: Node names (str) and subgroup ids, in the order they first appear.
        parent: The enclosing group's id (None for the root).
        size: Nodes inside, at any depth.
        ops: op_type -> count of the nodes inside.
    """

    id: str
    label: str
    parent: str | None
    items: list[str] = field(default_factory=list)
    module: str = ""
    call: int = 1
    size: int = 0
    ops: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Visible:
    """What one drawing shows: expanded groups as clusters holding their items, collapsed
    ones as boxes, and the edges between what is shown (with how many IR edges each stands
    for)."""

    clusters: tuple[str, ...]
    boxes: tuple[str, ...]
    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, int], ...]


class Groups:
    """The tree of module calls of one GraphIR.

    A node's group is the call of its `source.module_path` it ran in: the graph's nodes come
    in the order they ran, so a call is a run of consecutive nodes of that module (and its
    submodules), and each FX node of a leaf module (`call_module`) is a call of its own. A
    module called twice (a shared `self.relu`) is two groups, `path` and `path@2`, each
    where its call ran. A call that holds one item only is no group of its own (its item
    sits in the parent); a group that would show more than `fanout` items has them split
    into consecutive blocks.

    Attributes:
        ir: The GraphIR grouped.
        groups: id -> Group, the root ("") first.
        owner: node name -> id of the innermost group holding it.
    """

    def __init__(self, ir: GraphIR, fanout: int = FANOUT):
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout}")
        self.ir = ir
        self.fanout = fanout
        self._place = {n.name: k for k, n in enumerate(ir.nodes)}  # graph order
        self.groups: dict[str, Group] = {ROOT: Group(ROOT, "model", None)}
        self.owner: dict[str, str] = {}
        calls: dict[str, int] = {}  # module path -> calls so far
        stack: list[str] = []  # the calls open at this node, outermost first
        last_fx: dict[str, str] = {}  # call id -> the FX node of its last IR node
        for node in ir.nodes:  # in graph order: the order the calls ran
            path = node.source.module_path
            parts = path.split(".") if path else []
            chain = [".".join(parts[:d + 1]) for d in range(len(parts))]
            keep = 0
            while (keep < len(stack) and keep < len(chain)
                   and self.groups[stack[keep]].module == chain[keep]):
                keep += 1
            # a leaf module's FX node is one whole call: the next one is another call
            if (keep == len(chain) == len(stack) and chain and node.source.fx_op ==
                    "call_module" and last_fx[stack[-1]] != node.source.fx_name):
                keep -= 1
            del stack[keep:]
            for module in chain[keep:]:
                calls[module] = calls.get(module, 0) + 1
                call = f"\0{len(self.groups)}"  # no node's name: renamed below
                label = module if calls[module] == 1 else f"{module} (call {calls[module]})"
                self.groups[call] = Group(call, label, stack[-1] if stack else ROOT,
                                          module=module, call=calls[module])
                stack.append(call)
            group = stack[-1] if stack else ROOT
            for call in stack:
                last_fx[call] = node.source.fx_name
            self.owner[node.name] = group
            self._add_item(group, node.name)
            self._count(group, node.op_type)
        self._parents = {g.id: g.parent for g in self.groups.values()}
        self._dissolve_single_items()
        del self._parents
        self._name_calls()
        for group in list(self.groups.values()):
            if len(group.items) > fanout:
                group.items = self._blocks(group, group.items)

    def _add_item(self, group: str, item: str) -> None:
        """Add `item` to `group`, and `group` to its ancestors' items on its first item."""
        target = self.groups[group]
        if not target.items and target.parent is not None:
            self._add_item(target.parent, group)
        target.items.append(item)

    def _dissolve_single_items(self) -> None:
        """A group holding one item only is no group: its item takes its place (one pass
        over every group's items, innermost groups first)."""
        replaced: dict[str, str] = {}  # dissolved group -> the item in its place
        # innermost first: a call's module path is longer than its enclosing call's
        for group in sorted(self.groups.values(), key=lambda g: -len(g.module.split("."))
                            if g.module else 0):
            group.items = [replaced.get(item, item) for item in group.items]
            if group.parent is not None and len(group.items) == 1:
                replaced[group.id] = group.items[0]
        for gone in replaced:
            del self.groups[gone]

        def kept(group: str) -> str:
            while group not in self.groups:
                group = self._parents[group]
            return group

        for group in self.groups.values():
            if group.parent is not None:
                group.parent = kept(group.parent)
        self.owner = {name: kept(group) for name, group in self.owner.items()}

    def _name_calls(self) -> None:
        """The groups left get their ids: `path` for a module's first call, `path@k` for its
        k-th."""
        ids = {g.id: g.module if g.call == 1 else f"{g.module}@{g.call}"
               for g in self.groups.values()}
        groups = {}
        for group in self.groups.values():
            group.id = ids[group.id]
            group.parent = None if group.parent is None else ids[group.parent]
            group.items = [ids.get(item, item) for item in group.items]
            groups[group.id] = group
        self.groups = groups
        self.owner = {name: ids[group] for name, group in self.owner.items()}

    def _count(self, group: str | None, op: str) -> None:
        while group is not None:
            target = self.groups[group]
            target.size += 1
            target.ops[op] = target.ops.get(op, 0) + 1
            group = target.parent

    def _blocks(self, group: Group, items: list[str]) -> list[str]:
        """Split `items` into at most `fanout` consecutive blocks (blocks of blocks when
        needed), each a new Group under `group`; returns the block ids."""
        size = self.fanout
        while -(-len(items) // size) > self.fanout:
            size *= self.fanout
        blocks = []
        for start in range(0, len(items), size):
            chunk = items[start:start + size]
            first, last = _first_node(self, chunk[0]), _last_node(self, chunk[-1])
            block = Group(f"{group.module}[{first}..{last}]",
                          f"{group.module or 'model'} [{first} … {last}]", group.id,
                          module=group.module)
            self.groups[block.id] = block
            for item in chunk:
                if item in self.groups:
                    self.groups[item].parent = block.id
                    inner = self.groups[item]
                    block.size += inner.size
                    for op, n in inner.ops.items():
                        block.ops[op] = block.ops.get(op, 0) + n
                else:
                    self.owner[item] = block.id if self.owner[item] == group.id else \
                        self.owner[item]
                    op = self.ir.node(item).op_type
                    block.size += 1
                    block.ops[op] = block.ops.get(op, 0) + 1
            block.items = self._blocks(block, chunk) if len(chunk) > self.fanout else chunk
            blocks.append(block.id)
        return blocks

    # -- queries ---------------------------------------------------------------------------

    def ancestors(self, name: str) -> list[str]:
        """The ids of the groups holding node or group `name`, innermost first, root last."""
        group = self.owner[name] if name in self.owner else self.groups[name].parent
        chain = []
        while group is not None:
            chain.append(group)
            group = self.groups[group].parent
        return chain

    def in_call_order(self, ids) -> list[str]:
        """Group ids sorted by when their call ran (their first node's place in the graph);
        an enclosing group before the groups inside it."""
        return sorted(ids, key=lambda g: (self._place[_first_node(self, g)],
                                          len(self.ancestors(g)) if g in self.groups else 0))

    def default_expanded(self, budget: int = BUDGET) -> set[str]:
        """Groups expanded breadth first from the root while the boxes shown stay within
        `budget` (a graph of up to `budget` nodes is shown whole)."""
        expanded, shown = {ROOT}, len(self.groups[ROOT].items)
        queue = [i for i in self.groups[ROOT].items if i in self.groups]
        while queue:
            group = self.groups[queue.pop(0)]
            if shown + len(group.items) - 1 > budget:
                continue
            expanded.add(group.id)
            shown += len(group.items) - 1
            queue += [i for i in group.items if i in self.groups]
        return expanded

    def visible(self, expanded: set[str]) -> Visible:
        """What is drawn when exactly the groups in `expanded` (and the root) are open; a
        group inside a collapsed one stays hidden whatever `expanded` says."""
        clusters, boxes, nodes = [], [], []
        shown: dict[str, str] = {}  # node name -> what stands for it in the drawing
        stack = [(ROOT, ROOT)]
        while stack:
            group, _ = stack.pop()
            clusters.append(group)
            for item in self.groups[group].items:
                if item not in self.groups:
                    nodes.append(item)
                    shown[item] = item
                elif item in expanded:
                    stack.append((item, group))
                else:
                    boxes.append(item)
        closed = set(boxes)
        for name in self.owner:
            if name not in shown:
                shown[name] = next(g for g in reversed(self.ancestors(name)) if g in closed)
        edges: dict[tuple[str, str], int] = {}
        for node in self.ir.nodes:
            for source in node.inputs:
                key = (shown[source], shown[node.name])
                if key[0] != key[1]:
                    edges[key] = edges.get(key, 0) + 1
        return Visible(tuple(clusters), tuple(boxes), tuple(nodes),
                       tuple((a, b, n) for (a, b), n in edges.items()))


def _first_node(groups: Groups, item: str) -> str:
    while item in groups.groups:
        item = groups.groups[item].items[0]
    return item


def _last_node(groups: Groups, item: str) -> str:
    while item in groups.groups:
        item = groups.groups[item].items[-1]
    return item
