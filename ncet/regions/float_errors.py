"""Float error over a box: how far the network run in its own dtype (float32) can be from its
exact value, for every input of the box (docs/margins.md §2).

Write e_v = f_float,v(x) - [[G]]_v(x) for the error at node v. The float network computes each
node on its own float inputs and rounds, so

    affine v:      e_v = L_v e_in + d_v,   |d_v| <= D_v   (the certificate's rounding bound
                                                            B(S(|x_float|)) over the box)
    ReLU, LeakyReLU: e_v = s e_in,  s the secant slope between the float and the exact input:
                    1 (or k) where both keep their sign over the box, in [0, 1] (hull(k, 1))
                    where either may change it
    MaxPool2d:     e_v a convex combination of its window's errors (the pinned element's
                    error where the same element is the max in both)

Unrolled, e_out = sum_v M_v d_v (plus the input's own rounding), with M_v the product of the
affine maps and slope intervals from v to the output. `backward_errors` computes an interval
enclosure [C - R, C + R] of each M_v row by row, from the output back (interval coefficients
through slopes, exact transposes through affine maps), so that cancellation between the
paths of the network is kept: the bound is sum_v (|C_v| + R_v) D_v, "error through the
network's sensitivity" rather than through products of |W|. `forward_error` is the |W|-product
bound (the certificate's end-to-end radius over the box), used where a backward pass would be
too wide to afford.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..exactness.arithmetic import ArithmeticModel
from ..exactness.bounds import SAFETY, rounding
from ..exactness.flush_bounds import FLUSH_COMPARED, compared_eta, flush_term
from ..exactness.rules import BOUND_RULES
from ..ir import IRNode
from .linear_bounds import State, per_row
from .linear_maps import (
    apply,
    carry,
    dominated,
    is_affine,
    pull,
    pull_abs,
    scatter,
    window_argmax,
    window_sum_pull,
)

INPUT_ROUNDING = "<input rounding>"
"""The key of the input's own rounding (and flushing) in the contributions."""

_F64 = torch.float64
_U64 = 2.0 ** -53


@dataclass
class Errors:
    """The float error known per node over one box (batch-1 float64 tensors).

    Attributes:
        delta: D_v, the bound of node v's own rounding (0.0 for an exact op without
            flushing).
        eps: A bound of |e_v| over the box.
        slopes: Per ReLU/LeakyReLU: (lowest, highest) secant slope; per MaxPool2d:
            (pinned index, pinned in both float and exact).
        unstable: Per nonlinear node: (elements not pinned, elements).
    """

    arithmetic: ArithmeticModel
    constants: dict[str, torch.Tensor]
    delta: dict[str, torch.Tensor | float] = field(default_factory=dict)
    eps: dict[str, torch.Tensor] = field(default_factory=dict)
    slopes: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    unstable: dict[str, tuple[int, int]] = field(default_factory=dict)


def _dtype(node: IRNode) -> torch.dtype:
    return getattr(torch, node.dtype)


def float_range(state: State, errors: Errors, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds of the float value of `name` over the box: the exact bounds widened by eps."""
    return state.lower[name] - errors.eps[name], state.upper[name] + errors.eps[name]


def rounding_bound(state: State, errors: Errors, node: IRNode,
                   dtypes: dict[str, torch.dtype]) -> torch.Tensor | float:
    """D_v: the certificate's bound on one node's rounding (docs/exactness.md §3, with the
    underflow term of §2.2 where the host flushes), at the largest |float input| over the
    box (every rule's S and X grow with |x|)."""
    dtype, arithmetic = _dtype(node), errors.arithmetic
    rule = BOUND_RULES[node.op_type]
    shapes = [state.shapes[i] for i in node.inputs]
    if rule.magnitude is None:
        if not arithmetic.flush:
            return 0.0
        ones = [torch.ones((1, *s), dtype=_F64) for s in shapes]
        return SAFETY * FLUSH_COMPARED * compared_eta(dtype) * rule.carry(
            node, ones, state.abs_consts)
    mags = []
    for i in node.inputs:
        lo, hi = float_range(state, errors, i)
        mags.append(torch.maximum(lo.abs(), hi.abs()))
    r = rounding(node, mags, state.abs_consts, errors.constants)
    operands = tuple(dtypes[i] for i in node.inputs)
    bound = SAFETY * r.bound(node, dtype, arithmetic) + flush_term(
        node, shapes, state.abs_consts, errors.constants, dtype, arithmetic, operands)
    # a partial sum may reach the overflow threshold: outside the model, no bound
    near = r.magnitude >= torch.finfo(dtype).max / 4
    return torch.where(near, torch.inf, bound) if bool(near.any()) else bound


def record_slopes(state: State, errors: Errors, node: IRNode) -> None:
    """The secant slopes of a ReLU/LeakyReLU, or the pinned windows of a MaxPool2d, from
    the exact and float ranges of its input."""
    source = node.inputs[0]
    lo, hi = state.lower[source], state.upper[source]
    eps = errors.eps[source]
    if node.op_type == "MaxPool2d":
        index = window_argmax(node, lo - eps)
        sure = dominated(node, lo - eps, hi + eps, index)
        errors.slopes[node.name] = (index, sure)
        errors.unstable[node.name] = (int((~sure).sum()), sure[0].numel())
        return
    k = 0.0 if node.op_type == "ReLU" else float(node.attrs["negative_slope"])
    pos, neg = lo - eps >= 0, hi + eps <= 0
    low, high = min(k, 1.0), max(k, 1.0)
    s_lo = torch.where(pos, 1.0, torch.where(neg, k, low)).to(_F64)
    s_hi = torch.where(pos, 1.0, torch.where(neg, k, high)).to(_F64)
    errors.slopes[node.name] = (s_lo, s_hi)
    free = ~(pos | neg)
    errors.unstable[node.name] = (int(free.reshape(free.shape[0], -1).sum(1).max()),
                                  pos[0].numel())


def forward_error(state: State, errors: Errors, node: IRNode) -> torch.Tensor:
    """|e_v| <= C(eps_in) + D_v: the error through |L| (or the slopes' largest magnitude)."""
    eps = [errors.eps[i] for i in node.inputs]
    if is_affine(node):
        passed = carry(node, eps, state.abs_consts)
    elif node.op_type == "MaxPool2d":
        passed = apply(node, eps, state.consts)
    else:
        s_lo, s_hi = errors.slopes[node.name]
        passed = eps[0] * torch.maximum(s_lo.abs(), s_hi.abs())
    return SAFETY * (passed + errors.delta[node.name])


MAX_GENERATORS = 4096
"""Most noise generators a backward error pass keeps per row (`_Coefficients.reduce`)."""

GENERATOR_BUDGET = 1 << 24
"""Most float64 elements the generators of one node may hold (rows x generators x size)."""


@dataclass
class _Coefficients:
    """An enclosure of the rows of M_v at one node: C + sum_g G_g eps_g + [-R, R], with
    each eps_g in [-1, 1] (one per ReLU secant slope left free, a zonotope: pulled through
    the affine maps after it exactly, so their cancellation is kept) and R the part held as
    a box."""

    centre: torch.Tensor          # (Q, *shape)
    generators: torch.Tensor      # (Q, k, *shape)
    radius: torch.Tensor          # (Q, *shape)

    def span(self) -> torch.Tensor:
        """|C| + sum |G| + R: the largest |coefficient| per element."""
        return self.centre.abs() + self.generators.abs().sum(1) + self.radius

    def merge(self, other: _Coefficients) -> _Coefficients:
        """The sum of two paths' coefficients (their generators kept apart: sound, as if
        independent), with the sum's float64 rounding in the radius."""
        rounding = 2 * _U64 * (self.centre.abs() + other.centre.abs())
        return _Coefficients(self.centre + other.centre,
                             torch.cat([self.generators, other.generators], 1),
                             self.radius + other.radius + rounding)

    def reduce(self, most: int) -> _Coefficients:
        """Keep the `most` largest generators (by total magnitude; fewer if the budget
        says so), move the rest into R."""
        q, k = self.generators.shape[:2]
        size = self.centre[0].numel()
        keep = min(most, GENERATOR_BUDGET // max(1, q * size))
        if k <= keep:
            return self
        weight = self.generators.abs().flatten(2).sum(2).sum(0)
        order = weight.argsort(descending=True)
        kept, dropped = order[:keep], order[keep:]
        return _Coefficients(self.centre, self.generators[:, kept],
                             self.radius + self.generators[:, dropped].abs().sum(1))


def _pull_affine(node: IRNode, state: State, co: _Coefficients) -> list[_Coefficients]:
    shapes = [state.shapes[i] for i in node.inputs]
    q, k = co.generators.shape[:2]
    # float64 rounding of L^T c: at most gamma |L|^T |c|, moved into the radius
    gam = 4 * (co.centre[0].numel() + 2) * _U64
    spread = co.radius * (1 + gam) + gam * (co.centre.abs() + co.generators.abs().sum(1))
    centres = pull(node, co.centre, shapes, state.consts)
    radii = pull_abs(node, spread, shapes, state.abs_consts)
    if k:
        flat = co.generators.reshape(q * k, *co.generators.shape[2:])
        gens = [g.view(q, k, *g.shape[1:]) for g in pull(node, flat, shapes, state.consts)]
    else:
        gens = [torch.zeros((q, 0, *s), dtype=_F64) for s in shapes]
    return [_Coefficients(c, g, r) for c, g, r in zip(centres, gens, radii)]


def _pull_slopes(co: _Coefficients, s_lo: torch.Tensor, s_hi: torch.Tensor, most: int
                 ) -> _Coefficients:
    """Times a slope s in [s_lo, s_hi] per element: (C + G eps) m + R (|m| + h) plus a
    new generator (|C| + sum |G|) h per element whose slope is free (m, h the slopes'
    midpoint and half-width)."""
    mid, half = (s_lo + s_hi) / 2, (s_hi - s_lo) / 2
    free = (half > 0).reshape(half.shape[0], -1).any(0)  # free in some row (the others get width 0)
    centre, gens = co.centre * mid, co.generators * mid.unsqueeze(1)
    rounding = 4 * _U64 * (centre.abs() + gens.abs().sum(1))
    radius = co.radius * (mid.abs() + half) * (1 + 4 * _U64) + rounding
    if bool(free.any()):
        q, k = gens.shape[:2]
        width = (co.centre.abs() + co.generators.abs().sum(1)) * half * (1 + 4 * _U64)
        count, size = int(free.sum()), width[0].numel()
        if most == 0 or q * (k + count) * size > 2 * GENERATOR_BUDGET:
            radius = radius + width  # held as a box: no generator to pull
        else:
            index = free.nonzero().flatten()
            new = torch.zeros((q, count, size), dtype=_F64)
            new[:, torch.arange(count), index] = width.reshape(q, -1)[:, index]
            gens = torch.cat([gens, new.view(q, count, *centre.shape[1:])], 1)
    return _Coefficients(centre, gens, radius).reduce(most)


def _weigh(span: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Per row, sum of span x bound, a zero coefficient taking nothing from an infinite bound
    (that error does not reach the row: the path multiplies it by an exact zero)."""
    terms = torch.where(span == 0, torch.zeros_like(span), span * bound)
    return terms.reshape(span.shape[0], -1).sum(1)


def backward_errors(state: State, errors: Errors, target: str, rows: torch.Tensor,
                    generators: int = MAX_GENERATORS) -> dict[str, torch.Tensor]:
    """Per row a (Q, *shape of target): each node's share of a bound on |a . e_target| over
    the box, sum_v span(M_v) . D_v (`INPUT_ROUNDING` for the input's own error); their
    sum, times SAFETY, is the bound. `generators`: how many free slopes are kept as
    zonotope generators (0: intervals only, cheaper and looser)."""
    q, pieces = rows.shape[0], state.lower[target].shape[0]
    rows = rows.repeat(pieces, *([1] * (rows.dim() - 1))) if pieces > 1 else rows
    table: dict[str, _Coefficients] = {target: _Coefficients(
        rows, torch.zeros((rows.shape[0], 0, *rows.shape[1:]), dtype=_F64),
        torch.zeros_like(rows))}
    shares: dict[str, torch.Tensor] = {}
    order = [n.name for n in state.nodes]
    for node in reversed(state.nodes[:order.index(target) + 1]):
        co = table.pop(node.name, None)
        if co is None:
            continue
        if node.op_type == "Input":
            shares[INPUT_ROUNDING] = _weigh(co.span(), per_row(errors.eps[node.name], q))
            continue
        delta = errors.delta[node.name]
        if isinstance(delta, torch.Tensor):
            shares[node.name] = _weigh(co.span(), per_row(delta, q))
        if is_affine(node):
            pulled = zip(node.inputs, _pull_affine(node, state, co))
        elif node.op_type == "MaxPool2d":
            if pieces > 1:
                raise NotImplementedError("MaxPool2d is bounded one piece at a time")
            shape = state.shapes[node.inputs[0]]
            index, sure = errors.slopes[node.name]
            loose = window_sum_pull(node, co.span() * ~sure, shape)
            gens = co.generators * sure.unsqueeze(1)
            q, k = gens.shape[:2]
            pulled = [(node.inputs[0], _Coefficients(
                scatter(co.centre * sure, index, shape),
                scatter(gens.reshape(q * k, *gens.shape[2:]), index, shape).view(
                    q, k, *shape),
                scatter(co.radius * sure, index, shape) + loose))]
        else:
            s_lo, s_hi = errors.slopes[node.name]
            pulled = [(node.inputs[0], _pull_slopes(co, per_row(s_lo, q), per_row(s_hi, q),
                                                    generators))]
        for name, part in pulled:
            table[name] = table[name].merge(part).reduce(generators) if name in table else part
    return shares
