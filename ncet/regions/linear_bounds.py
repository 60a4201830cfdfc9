"""Value bounds over a box: interval propagation (`interval_step`) and CROWN-style backward
linear bounds (`lower_bounds`), the design of auto_LiRPA (Zhang et al. 2018, Xu et al.
2020) written for NCET's operator set.

A batch of Q row vectors a over a node t is pulled back through the graph towards the input:
through an affine node exactly (L^T a, plus a . f(0) into the constant), through a ReLU by its
linear relaxation (a lower line where a >= 0, the upper chord where a < 0, chosen per row),
through a MaxPool by the element its window is pinned to (or the window's upper bound as a
constant). At the input the box is met exactly. The result is, per row, a certified lower
bound of a . t over the box; upper bounds are lower bounds of -a.

Relaxations read the bounds already found for the nonlinearities' inputs (`State.lower`,
`State.upper`), so bounds are computed in topological order (`margin.py`).

Bounds are computed in float64; each is widened by `State.slack` (a relative term on the
node's absolute magnitude, `magnitude`) for the rounding of that computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..ir import IRNode
from .linear_maps import apply, carry, dominated, is_affine, pull, scatter, window_argmax

_F64 = torch.float64


@dataclass
class State:
    """What is known about every node over one box (all tensors of batch 1, float64).

    Attributes:
        nodes: The GraphIR's nodes, topological order.
        consts: The constants in float64; abs_consts their absolute values.
        shapes: Per-sample shape of each node.
        offsets: f(0) of each affine node.
        lower, upper: Certified bounds of each node's exact value over the box.
        magnitude: A bound of |value| through |L| products (`magnitude_step`), which the
            float64 rounding of any bound computed for the node is relative to.
        slack: The relative widening of every computed bound (float64 rounding).
        influence: Per input element, the sum of |coefficient| it had in every backward
            pass that met the input (what splitting the box along it would change).
    """

    nodes: tuple[IRNode, ...]
    consts: dict[str, torch.Tensor]
    abs_consts: dict[str, torch.Tensor]
    shapes: dict[str, tuple[int, ...]]
    offsets: dict[str, torch.Tensor]
    slack: float
    lower: dict[str, torch.Tensor] = field(default_factory=dict)
    upper: dict[str, torch.Tensor] = field(default_factory=dict)
    magnitude: dict[str, torch.Tensor] = field(default_factory=dict)
    influence: torch.Tensor | float = 0.0

    def widen(self, name: str, lower: torch.Tensor, upper: torch.Tensor) -> None:
        """Store bounds for `name`, widened by the slack, intersected with any known."""
        pad = self.slack * self.magnitude[name] + 1e-300
        lower, upper = lower - pad, upper + pad
        if name in self.lower:
            lower = torch.maximum(lower, self.lower[name])
            upper = torch.minimum(upper, self.upper[name])
        self.lower[name], self.upper[name] = lower, upper


def _leaky(z: torch.Tensor, k: float) -> torch.Tensor:
    return torch.where(z >= 0, z, k * z)


def interval_step(state: State, node: IRNode) -> tuple[torch.Tensor, torch.Tensor]:
    """Interval bounds of a node from its inputs' (centre and radius through affine nodes,
    endpoints through monotone ones)."""
    lo = [state.lower[i] for i in node.inputs]
    hi = [state.upper[i] for i in node.inputs]
    op = node.op_type
    if is_affine(node):
        centre = apply(node, [(a + b) / 2 for a, b in zip(lo, hi)], state.consts)
        radius = carry(node, [(b - a) / 2 for a, b in zip(lo, hi)], state.abs_consts)
        return centre - radius, centre + radius
    if op == "ReLU":
        return lo[0].clamp(min=0), hi[0].clamp(min=0)
    if op == "LeakyReLU":
        k = node.attrs["negative_slope"]
        a, b = _leaky(lo[0], k), _leaky(hi[0], k)
        if k >= 0:
            return a, b
        low = torch.where((lo[0] < 0) & (hi[0] > 0), torch.zeros_like(a), torch.minimum(a, b))
        return low, torch.maximum(a, b)
    if op == "MaxPool2d":
        return apply(node, lo, state.consts), apply(node, hi, state.consts)
    raise AssertionError(op)


def magnitude_step(state: State, node: IRNode) -> torch.Tensor:
    """|L| M + |f(0)| for an affine node, M through a ReLU or MaxPool, max(1, |k|) M
    through a LeakyReLU: a bound of |value| and of every term any bound of it adds up."""
    ms = [state.magnitude[i] for i in node.inputs]
    if is_affine(node):
        return carry(node, ms, state.abs_consts) + state.offsets[node.name].abs()
    if node.op_type == "LeakyReLU":
        return ms[0] * max(1.0, abs(node.attrs["negative_slope"]))
    if node.op_type == "MaxPool2d":
        return apply(node, ms, state.consts)
    return ms[0]


def _relu_lines(lo, hi, k: float):
    """For y = leaky(z, k) (ReLU: k = 0) with z in [lo, hi]: (lower slope, lower intercept,
    upper slope, upper intercept), elementwise, exact where the sign is fixed."""
    one, zero = torch.ones_like(lo), torch.zeros_like(lo)
    pos, neg = lo >= 0, hi <= 0
    unstable = ~(pos | neg)
    width = torch.where(unstable, hi - lo, one)
    chord = torch.where(unstable, (hi - k * lo) / width, one)
    chord_b = torch.where(unstable, hi - chord * hi, zero)
    tangent = torch.where(hi > -lo, one, k * one)
    fixed = torch.where(pos, one, k * one)
    if k <= 1:  # convex: a tangent line below, the chord above
        ls, lb, us, ub = torch.where(unstable, tangent, fixed), zero, \
            torch.where(unstable, chord, fixed), chord_b
    else:  # concave: the chord below, a tangent line above
        ls, lb, us, ub = torch.where(unstable, chord, fixed), chord_b, \
            torch.where(unstable, tangent, fixed), zero
    return ls, lb, us, ub


def per_row(t: torch.Tensor, rows: int) -> torch.Tensor:
    """A per-piece tensor (P, ...) repeated for each of a piece's rows: (P * rows, ...),
    the layout of every backward pass (piece-major)."""
    return t if t.shape[0] == 1 else t.repeat_interleave(rows, 0)


def lower_bounds(state: State, target: str, rows: torch.Tensor, box: tuple[torch.Tensor,
                 torch.Tensor]) -> torch.Tensor:
    """Per row a (Q, *shape of target), for each of the P boxes (state tensors of batch P,
    `box` likewise): a certified lower bound of min over the box of a . target (before the
    slack), by backward linear relaxation; (P * Q,), piece-major."""
    q = rows.shape[0]
    pieces = box[0].shape[0]
    rows = rows.repeat(pieces, *([1] * (rows.dim() - 1))) if pieces > 1 else rows
    coef: dict[str, torch.Tensor] = {target: rows}
    const = torch.zeros(rows.shape[0], dtype=_F64)
    order = [n.name for n in state.nodes]
    for node in reversed(state.nodes[:order.index(target) + 1]):
        a = coef.pop(node.name, None)
        if a is None:
            continue
        op = node.op_type
        if op == "Input":
            lo, hi = per_row(box[0], q), per_row(box[1], q)
            const += (a.clamp(min=0) * lo + a.clamp(max=0) * hi).reshape(rows.shape[0], -1).sum(1)
            state.influence = state.influence + a.abs().view(pieces, q, *lo.shape[1:]).sum(1)
            continue
        if is_affine(node):
            const += (a * state.offsets[node.name]).reshape(rows.shape[0], -1).sum(1)
            shapes = [state.shapes[i] for i in node.inputs]
            for name, g in zip(node.inputs, pull(node, a, shapes, state.consts)):
                coef[name] = coef[name] + g if name in coef else g
            continue
        source = node.inputs[0]
        lo, hi = state.lower[source], state.upper[source]
        pos, neg = a.clamp(min=0), a.clamp(max=0)
        if op == "MaxPool2d" and pieces > 1:
            raise NotImplementedError("MaxPool2d is bounded one piece at a time")
        lo, hi = per_row(lo, q), per_row(hi, q)
        if op in ("ReLU", "LeakyReLU"):
            k = 0.0 if op == "ReLU" else float(node.attrs["negative_slope"])
            ls, lb, us, ub = _relu_lines(lo, hi, k)
            g = pos * ls + neg * us
            const += (pos * lb + neg * ub).reshape(rows.shape[0], -1).sum(1)
        else:  # MaxPool2d: y >= x[pinned]; y <= max upper (= x[pinned] where dominated)
            index = window_argmax(node, lo)
            sure = dominated(node, lo, hi, index)
            top = apply(node, [hi], state.consts)
            g = scatter(pos + neg * sure, index, state.shapes[source])
            const += (neg * ~sure * top).reshape(rows.shape[0], -1).sum(1)
        coef[source] = coef[source] + g if source in coef else g
    return const


def crown_bounds(state: State, target: str, box, chunk: int) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    """Lower and upper bounds of every element of `target` over each box (before the
    slack): rows +e_j and -e_j, `chunk` elements per backward pass."""
    shape = state.shapes[target]
    n, pieces = int(torch.Size(shape).numel()), box[0].shape[0]
    lower = torch.empty((pieces, n), dtype=torch.float64)
    upper = torch.empty((pieces, n), dtype=torch.float64)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        eye = unit_rows(n, start, stop)
        const = lower_bounds(state, target, torch.cat([eye, -eye]).view(-1, *shape), box)
        const = const.view(pieces, 2 * (stop - start))
        lower[:, start:stop], upper[:, start:stop] = const[:, :stop - start], \
            -const[:, stop - start:]
    return lower.view(pieces, *shape), upper.view(pieces, *shape)


def unit_rows(n: int, start: int, stop: int) -> torch.Tensor:
    """Rows e_start .. e_(stop-1) of the n x n identity."""
    rows = torch.zeros((stop - start, n), dtype=torch.float64)
    rows[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
    return rows
