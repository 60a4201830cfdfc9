"""A layered (Sugiyama) layout of a DAG whose boxes sit in nested clusters, in pure Python:
the same coordinates on every machine (no system binary, no font measured, no thread).

Each cluster is laid out on its own, innermost first, and then stands as one box in its
parent: its items (boxes and inner clusters) are ranked by longest path over the edges
between them (so every edge runs downward), each rank a horizontal strip. A long edge gets a
chain of bend points, one per rank it passes (one chain per source, shared by its targets);
an edge leaving a cluster runs down through the cluster's ranks below its source, one
entering runs from the cluster's top down to its target, so a residual skip passes beside
the block's boxes, not through them. The ranks are ordered by a bounded number of barycentre
sweeps, and x is placed rank by rank as near as the boxes allow to the mean of the
neighbours' x (an isotonic regression: the order kept, no overlap). A cluster's items stay
together, so the nodes of one call of a module are contiguous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RANK_GAP = 24.0
"""Vertical space between two ranks (the edges run there)."""

ITEM_GAP = 14.0
"""Least horizontal space between two neighbours of a rank."""

BEND_WIDTH = 8.0
"""The width a bend point of a long edge takes in its rank."""

CLUSTER_PAD = 8.0
"""Space between a cluster's border and its items."""

TITLE_HEIGHT = 16.0
"""The strip at the top of a cluster for its title."""

SWEEPS = 4
"""Pairs of barycentre sweeps (down then up) ordering each cluster's ranks."""

PLACEMENTS = 3
"""Pairs of x placement passes (down then up)."""


@dataclass(frozen=True)
class Layout:
    """Where everything is, in drawing units (y grows downward).

    Attributes:
        boxes: Leaf id -> (x, y, width, height) of its box (x, y: top left).
        clusters: Cluster id -> (x, y, width, height) of its frame (the root's is the
            whole drawing).
        edges: One per edge given, in order: (source, target, points), the points from the
            bottom of the source's box to the top of the target's, through the bend points.
        width, height: The drawing's size.
    """

    boxes: dict[str, tuple[float, float, float, float]]
    clusters: dict[str, tuple[float, float, float, float]]
    edges: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...]
    width: float
    height: float


@dataclass
class _Local:
    """One cluster's own layout: its vertices (items, then bend points) relative to it."""

    items: list[str]
    rank: list[int]
    x: list[float]  # centre
    y: list[float]  # top
    w: list[float]
    h: list[float]
    chains: dict[int, list[int]]  # source item index -> its bend vertices, rank by rank
    outlets: dict[int, list[int]]  # item index -> bends from below it to the bottom
    inlets: dict[str, list[int]]  # outer source -> bends from the top to its lowest target
    index: dict[str, int]
    bottom: list[float]  # the bottom of each vertex's rank
    width: float
    height: float


def layered_layout(children: Mapping[str, Sequence[str]], sizes: Mapping[str, tuple[float,
                   float]], edges: Sequence[tuple[str, str]], root: str,
                   title_widths: Mapping[str, float] | None = None) -> Layout:
    """Lay out the boxes `sizes` (id -> (width, height)) held by the clusters `children`
    (cluster id -> its items in order: box ids and inner cluster ids; `root` holds all),
    joined by `edges` (box id pairs).

    Items are expected in a topological order of the edges (a module's calls in the order
    they ran): an edge against that order is drawn, but does not rank its target.
    """
    parent: dict[str, str] = {}
    for cluster, items in children.items():
        for item in items:
            parent[item] = cluster
    depth = {root: 0}

    def depth_of(item: str) -> int:
        chain = []
        while item not in depth:
            chain.append(item)
            item = parent[item]
        for step in reversed(chain):
            depth[step] = depth[parent[step]] + 1
        return depth[chain[0]] if chain else depth[item]

    # every edge as a pair of siblings (the items under their lowest common cluster), the
    # clusters it leaves on its way there and those it enters on its way down
    pairs: dict[str, dict[tuple[str, str], None]] = {c: {} for c in children}
    outlets: dict[str, dict[str, None]] = {c: {} for c in children}
    inlets: dict[str, dict[str, dict[str, None]]] = {c: {} for c in children}
    routes = []
    for source, target in edges:
        a, b = source, target
        da, db = depth_of(a), depth_of(b)
        leaving, entering = [], []
        while da > db:
            leaving.append((parent[a], a))
            a, da = parent[a], da - 1
        while db > da:
            entering.append((parent[b], b))
            b, db = parent[b], db - 1
        while parent.get(a) != parent.get(b):
            leaving.append((parent[a], a))
            entering.append((parent[b], b))
            a, b = parent[a], parent[b]
        entering.reverse()
        routes.append((a, b, leaving, entering))
        if a != b:
            pairs[parent[a]][(a, b)] = None
        for cluster, item in leaving:
            outlets[cluster][item] = None
        for cluster, item in entering:
            inlets[cluster].setdefault(source, {})[item] = None

    locals_: dict[str, _Local] = {}
    titles = title_widths or {}

    def size_of(item: str) -> tuple[float, float]:
        if item in locals_:
            inner = locals_[item]
            return inner.width, inner.height
        return sizes[item]

    for cluster in sorted(children, key=lambda c: -depth_of(c)):  # innermost first
        pad = 0.0 if cluster == root else CLUSTER_PAD
        top = 0.0 if cluster == root else TITLE_HEIGHT
        locals_[cluster] = _lay_out_cluster(list(children[cluster]), pairs[cluster],
                                            outlets[cluster], inlets[cluster], size_of,
                                            pad, top, titles.get(cluster, 0.0))

    boxes: dict[str, tuple[float, float, float, float]] = {}
    frames: dict[str, tuple[float, float, float, float]] = {}
    origin: dict[str, tuple[float, float]] = {root: (0.0, 0.0)}
    stack = [root]
    while stack:
        cluster = stack.pop()
        local, (ox, oy) = locals_[cluster], origin[cluster]
        frames[cluster] = (ox, oy, local.width, local.height)
        for i, item in enumerate(local.items):
            x, y = ox + local.x[i] - local.w[i] / 2, oy + local.y[i]
            if item in locals_:
                origin[item] = (x, y)
                stack.append(item)
            else:
                boxes[item] = (x, y, local.w[i], local.h[i])

    drawn = []
    for (source, target), (a, b, leaving, entering) in zip(edges, routes):
        sx, sy, sw, sh = boxes[source]
        tx, ty, tw, _ = boxes[target]
        points = [(sx + sw / 2, sy + sh)]
        for cluster, item in leaving:
            _drop(points, locals_[cluster], origin[cluster], item)
            local = locals_[cluster]
            points += _through(local, origin[cluster], local.outlets.get(local.index[item], ()))
        if a != b:
            local = locals_[parent[a]]
            _drop(points, local, origin[parent[a]], a)
            points += _through(local, origin[parent[a]], local.chains.get(local.index[a], ()),
                               local.rank[local.index[b]])
        for cluster, item in entering:
            local = locals_[cluster]
            points += _through(local, origin[cluster], local.inlets.get(source, ()),
                               local.rank[local.index[item]])
        points.append((tx + tw / 2, ty))
        drawn.append((source, target, tuple(points)))
    whole = locals_[root]
    return Layout(boxes, frames, tuple(drawn), whole.width, whole.height)


def _drop(points: list, local: _Local, origin: tuple[float, float], item: str) -> None:
    """Straight down to the bottom of `item`'s rank (past its taller neighbours there)."""
    bottom = origin[1] + local.bottom[local.index[item]]
    if bottom > points[-1][1]:
        points.append((points[-1][0], bottom))


def _through(local: _Local, origin: tuple[float, float], chain, before: int | None = None):
    """The points of the bends of `chain` above rank `before` (all of them for None)."""
    ox, oy = origin
    points = []
    for v in chain:
        if before is not None and local.rank[v] >= before:
            break
        points += [(ox + local.x[v], oy + local.y[v]),
                   (ox + local.x[v], oy + local.y[v] + local.h[v])]
    return points


def _lay_out_cluster(items: list[str], pairs: Mapping[tuple[str, str], None],
                     outlets: Mapping[str, None], inlets: Mapping[str, Mapping[str, None]],
                     size_of, pad: float, top: float, title_width: float) -> _Local:
    n = len(items)
    index = {item: i for i, item in enumerate(items)}
    w = [size_of(item)[0] for item in items]
    h = [size_of(item)[1] for item in items]
    rank = [0] * n
    targets: dict[int, list[int]] = {}
    for a, b in pairs:
        i, j = index[a], index[b]
        if i < j:
            targets.setdefault(i, []).append(j)
    for i in range(n):  # items come in topological order: longest path in one pass
        for j in targets.get(i, ()):
            rank[j] = max(rank[j], rank[i] + 1)
    # bend points: one chain per source, down to the rank above its lowest target; one per
    # item whose edges leave the cluster, down to its last rank; one per outer source whose
    # edges enter it, from its first rank down to the rank above its lowest target
    up: list[list[int]] = [[] for _ in range(n)]  # vertex -> vertices above joined to it

    def chain_of(first: int, stop: int, previous: int | None) -> list[int]:
        chain = []
        for r in range(first, stop):
            v = len(rank)
            rank.append(r)
            w.append(BEND_WIDTH)
            h.append(0.0)
            up.append([] if previous is None else [previous])
            chain.append(v)
            previous = v
        return chain

    chains: dict[int, list[int]] = {}
    for i in sorted(targets):
        chain = chains[i] = chain_of(rank[i] + 1, max(rank[j] for j in targets[i]), i)
        for j in targets[i]:
            up[j].append(chain[rank[j] - rank[i] - 2] if rank[j] - rank[i] > 1 else i)
    last = max(rank, default=0)
    out_chains = {index[item]: chain_of(rank[index[item]] + 1, last + 1, index[item])
                  for item in outlets}
    in_chains: dict[str, list[int]] = {}
    for source, inner in inlets.items():
        chain = in_chains[source] = chain_of(0, max(rank[index[j]] for j in inner), None)
        for j in inner:
            if rank[index[j]] > 0:
                up[index[j]].append(chain[rank[index[j]] - 1])
    down: list[list[int]] = [[] for _ in rank]
    for v, above in enumerate(up):
        for u in above:
            down[u].append(v)
    ranks: list[list[int]] = [[] for _ in range(max(rank, default=-1) + 1)]
    for v in sorted(range(len(rank)), key=lambda v: (v >= n, v)):
        ranks[rank[v]].append(v)
    _order(ranks, up, down)
    x = _place(ranks, w, up, down)
    heights = [max((h[v] for v in row), default=0.0) for row in ranks]
    y = [0.0] * len(rank)
    bottom = [0.0] * len(rank)
    cursor = pad + top
    for r, row in enumerate(ranks):
        for v in row:
            y[v], bottom[v] = cursor, cursor + heights[r]
            if v >= n:  # a bend point spans its rank: the edge passes the tallest box
                h[v] = heights[r]
        cursor += heights[r] + RANK_GAP
    left = min((x[v] - w[v] / 2 for v in range(len(rank))), default=0.0)
    right = max((x[v] + w[v] / 2 for v in range(len(rank))), default=0.0)
    inner = max(right - left, title_width)
    shift = pad - left + (inner - (right - left)) / 2
    x = [c + shift for c in x]
    height = cursor - (RANK_GAP if ranks else 0.0) + pad
    return _Local(items, rank, x, y, w, h, chains, out_chains, in_chains, index, bottom,
                  inner + 2 * pad, height)


def _order(ranks: list[list[int]], up: list[list[int]], down: list[list[int]]) -> None:
    """Reorder each rank in place by the mean position of its neighbours in the rank above
    (sweeping down) or below (sweeping up); a vertex without any keeps its place."""
    position = [0.0] * len(up)
    for row in ranks:
        for k, v in enumerate(row):
            position[v] = float(k)

    def sweep(rows, neighbours) -> None:
        for row in rows:
            keys = []
            for k, v in enumerate(row):
                near = neighbours[v]
                keys.append((sum(position[u] for u in near) / len(near) if near else
                             position[v], k))
            row[:] = [row[k] for _, k in sorted(keys)]
            for k, v in enumerate(row):
                position[v] = float(k)

    for _ in range(SWEEPS):
        sweep(ranks[1:], up)
        sweep(reversed(ranks[:-1]), down)


def _place(ranks: list[list[int]], w: list[float], up: list[list[int]],
           down: list[list[int]]) -> list[float]:
    """Centres x: each rank packed left to right, then moved as near as the order and the
    gaps allow to the mean x of its neighbours above (then below), a few times."""
    x = [0.0] * len(w)
    for row in ranks:
        cursor = 0.0
        for v in row:
            x[v] = cursor + w[v] / 2
            cursor += w[v] + ITEM_GAP
    for _ in range(PLACEMENTS):
        for rows, neighbours in ((ranks[1:], up), (list(reversed(ranks[:-1])), down)):
            for row in rows:
                wanted = [sum(x[u] for u in neighbours[v]) / len(neighbours[v])
                          if neighbours[v] else x[v] for v in row]
                for v, c in zip(row, _packed(wanted, [w[v] for v in row])):
                    x[v] = c
    return x


def _packed(wanted: list[float], widths: list[float]) -> list[float]:
    """The centres nearest (least squares) to `wanted` that keep the order and `ITEM_GAP`
    between neighbours: pool adjacent violators over the centres less their least offsets."""
    offset, cursor = [], 0.0
    for k, width in enumerate(widths):
        if k:
            cursor += (widths[k - 1] + width) / 2 + ITEM_GAP
        offset.append(cursor)
    blocks: list[list[float]] = []  # [mean, count]
    for want, off in zip(wanted, offset):
        blocks.append([want - off, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, count = blocks.pop()
            blocks[-1][0] = (blocks[-1][0] * blocks[-1][1] + mean * count) / (blocks[-1][1]
                                                                              + count)
            blocks[-1][1] += count
    out = []
    for mean, count in blocks:
        out += [mean] * int(count)
    return [value + off for value, off in zip(out, offset)]
