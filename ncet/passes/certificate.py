"""The graph-to-graph certificate at sampled inputs: the original and the simplified GraphIR
run side by side, in their dtype as PyTorch's kernels compute them and in the float64
reference, and every node the two share (same name, same shape) and every output held to

    |simplified - original| <= E_s + E_o + D_s

where E is each graph's end-to-end radius of docs/exactness.md §4.2 (|t - G| <= E for
PyTorch's value t and the exact real value G of that graph) and D_s bounds how far the
simplified graph's exact value moves because its computed constants are rounded
(|G_s - G_s*| <= D_s, G_s* the same graph with the exact folded constants, which is the
original's exact function when the passes are right). The float64 references are held
the same way with each graph's own reference radius R (`enclose`'s: |r - G| <= R) in place
of E, the sharper test of a fold; and |r_s - r_o| + R_s + R_o bounds the difference of the
two exact values at the outputs whatever the passes did. A pass that computes a wrong
constant (an eps dropped, a channel axis crossed, a sign flipped, a bias counted twice)
shows as a difference beyond the bound at the first node its change reaches."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..evaluate import EVALUATORS
from ..exactness.arithmetic import ArithmeticModel
from ..exactness.bounds import SAFETY, end_to_end_radius, rounding
from ..exactness.flush_bounds import FLUSH_COMPARED, compared_eta, flush_term, input_radius
from ..exactness.rules import BOUND_RULES
from ..ir import CONSTANT_ATTRS, GraphIR, IRNode
from .carried import radius_of

_F64 = torch.float64
CHUNK = 8
"""Samples per walk: both graphs' values of one chunk are held at once."""


@dataclass
class Agreement:
    """One compared place: a node both graphs have, or an output (by position).

    Attributes:
        name: The node's name (an output: the simplified graph's node it returns).
        output: The output's position, or None for a node.
        difference: max |t_s - t_o| of the two graphs' values in their dtype.
        reference_difference: max |r_s - r_o| of their float64 references.
        bound: max of the certified bound E_s + E_o + D_s.
        ratio: max over elements of difference / bound (both comparisons).
        violated: Some element is beyond its bound.
        unchecked: Some bound is not finite (nothing is certified there).
    """

    name: str
    output: int | None = None
    difference: float = 0.0
    reference_difference: float = 0.0
    bound: float = 0.0
    ratio: float = 0.0
    violated: bool = False
    unchecked: bool = False
    worst: tuple[float, float] = (0.0, 0.0)  # (difference, bound) at the largest ratio
    per_element: torch.Tensor | None = field(default=None, repr=False)
    exact_per_element: torch.Tensor | None = field(default=None, repr=False)

    def update(self, t_s, t_o, r_s, r_o, tol, tol_r, radii) -> None:
        """One chunk: PyTorch's values (t) held to `tol`, the references (r) to `tol_r`;
        `radii` = R_s + R_o, so that |r_s - r_o| + radii bounds the exact difference."""
        tol, tol_r = tol.expand_as(r_s), tol_r.expand_as(r_s)
        if not bool(torch.isfinite(tol).all()):
            self.unchecked = True
        gap_t = (t_s.to(_F64) - t_o.to(_F64)).abs()
        gap_r = (r_s - r_o).abs()
        self.difference = max(self.difference, float(gap_t.max()) if gap_t.numel() else 0.0)
        self.reference_difference = max(self.reference_difference,
                                        float(gap_r.max()) if gap_r.numel() else 0.0)
        if gap_t.numel():
            self.bound = max(self.bound, float(tol.max()))
            for gap, limit in ((gap_t, tol), (gap_r, tol_r)):
                ratio = torch.where(gap == 0, torch.zeros_like(gap), gap / limit)
                at = int(ratio.reshape(-1).nan_to_num(math.inf).argmax())
                if float(ratio.reshape(-1)[at]) > self.ratio or self.worst == (0.0, 0.0):
                    self.worst = (float(gap.reshape(-1)[at]), float(limit.reshape(-1)[at]))
                self.ratio = max(self.ratio, float(ratio.max()))
                self.violated |= bool((gap > limit).any()) or bool(torch.isnan(gap).any())
        if self.output is not None:
            count = tol.shape[0]
            worst = tol.reshape(count, -1).max(0).values
            self.per_element = worst if self.per_element is None else torch.maximum(
                self.per_element, worst)
            exact = (gap_r + radii.expand_as(gap_r)).reshape(count, -1).max(0).values * SAFETY
            self.exact_per_element = exact if self.exact_per_element is None else \
                torch.maximum(self.exact_per_element, exact)


def computed_radii(ir: GraphIR) -> dict[str, torch.Tensor]:
    """The radius of every constant of `ir` a pass computed (|stored - exact| <= radius)."""
    return {name: r for name, t in ir.constants.items() if (r := radius_of(t)) is not None}


def constant_perturbation(node: IRNode, xbar: torch.Tensor, delta: dict, abs_consts: dict):
    """|f'(x) - f*(x)| for |x| <= xbar, when node's constants are within delta of exact."""
    names = [node.attrs[a] for a in CONSTANT_ATTRS[node.op_type]
             if node.attrs.get(a) is not None]
    if not any(n in delta for n in names):
        return None
    if node.op_type in ("Linear", "Conv2d"):
        radii = {n: delta.get(n, torch.zeros_like(abs_consts[n])) for n in names}
        return EVALUATORS[node.op_type](node, [xbar], radii)
    if node.op_type == "ElementwiseAffine":
        a = node.attrs
        c, dc = abs_consts[a["constant"]], delta[a["constant"]]
        if a["kind"] == "mul":
            return xbar * dc
        if a["kind"] == "div":
            margin = c - dc
            if not bool((margin > 0).all()):
                return torch.full_like(xbar, math.inf)
            return xbar * dc / (c * margin)
        weight = abs(a["alpha"]) if a["tensor_position"] == 0 else 1.0
        return dc * weight + torch.zeros_like(xbar)
    raise AssertionError(f"{node.op_type} {node.name} has computed constants")


def walk(ir: GraphIR, inputs: list[torch.Tensor], arithmetic: ArithmeticModel,
         keep: set[str], visit=None) -> dict[str, tuple]:
    """Run `ir` on one chunk: PyTorch's value t (its dtype), the float64 reference r, the
    radius E (|t - G| <= E, |r - G| <= E), for computed constants D, and the reference's
    own radius R (|r - G| <= R, `enclose`'s); returns (t, r, E, D, R) of the names in
    `keep`, and calls `visit(node, t, r, E, D, R)` on each node."""
    own = dict(ir.constants)
    consts = {k: v.to(_F64) for k, v in own.items()}
    abs_consts = {k: v.abs() for k, v in consts.items()}
    delta = computed_radii(ir)
    last = {name: i for i, n in enumerate(ir.nodes) for name in n.inputs}
    env: dict[str, tuple] = {}
    kept: dict[str, tuple] = {}
    for node, x in zip(ir.inputs, inputs):
        radius = input_radius(x, arithmetic).to(_F64)
        env[node.name] = (x, x.to(_F64), radius, None, radius)
    for i, node in enumerate(ir.nodes):
        if node.op_type not in ("Input", "Output"):
            ins = [env[n] for n in node.inputs]
            t_in = [v[0] for v in ins]
            r_in = [v[1] for v in ins]
            e_in = [v[2].expand_as(v[1]) for v in ins]
            er_in = [v[4].expand_as(v[1]) for v in ins]
            t = EVALUATORS[node.op_type](node, t_in, own)
            r = EVALUATORS[node.op_type](node, r_in, consts)
            rule = BOUND_RULES[node.op_type]
            r_at = rounding(node, [x.to(_F64) for x in t_in], abs_consts, own)
            e = end_to_end_radius(node, r_at, t.dtype, arithmetic, e_in, abs_consts)
            er = rule.carry(node, er_in, abs_consts)
            if rule.magnitude is not None:
                own_rounding = rounding(node, r_in, abs_consts, own)
                er = (er + own_rounding.bound(node, _F64, arithmetic)) * SAFETY
            if arithmetic.flush:
                e = e + _flushed(node, t_in, t.dtype, arithmetic, abs_consts, own)
                er = er + _flushed(node, t_in, _F64, arithmetic, abs_consts, own)
            d = None
            d_in = [v[3] for v in ins]
            xbar = None
            if any(x is not None for x in d_in) or any(
                    node.attrs.get(a) in delta for a in CONSTANT_ATTRS[node.op_type]):
                d_full = [torch.zeros_like(rv) if dv is None else dv.expand_as(rv)
                          for dv, rv in zip(d_in, r_in)]
                d = rule.carry(node, d_full, abs_consts)
                if len(node.inputs) == 1:
                    xbar = r_in[0].abs() + er_in[0] + d_full[0]
                    extra = constant_perturbation(node, xbar, delta, abs_consts)
                    if extra is not None:
                        d = d + extra
                d = d * SAFETY
            env[node.name] = (t, r, torch.as_tensor(e, dtype=_F64), d,
                              torch.as_tensor(er, dtype=_F64))
            if visit is not None:
                visit(node, *env[node.name])
        for name in node.inputs:
            if last[name] == i and name not in keep:
                env.pop(name, None)
        if node.name in keep and node.name in env:
            kept[node.name] = env[node.name]
    return kept


def _flushed(node, t_in, dtype, arithmetic, abs_consts, own):
    """Under flushing: the underflow term with every operand taken as flushable."""
    shapes = [tuple(x.shape[1:]) for x in t_in]
    if BOUND_RULES[node.op_type].magnitude is not None:
        return flush_term(node, shapes, abs_consts, own, dtype, arithmetic,
                          tuple(x.dtype for x in t_in))
    eta = max(compared_eta(x.dtype) for x in t_in)
    radii = [torch.full((1, *s), eta, dtype=_F64) for s in shapes]
    return SAFETY * FLUSH_COMPARED * BOUND_RULES[node.op_type].carry(node, radii, abs_consts)


def _plus(tol: torch.Tensor, d: torch.Tensor | None) -> torch.Tensor:
    return tol if d is None else tol + d


def compare_graphs(original: GraphIR, simplified: GraphIR, inputs: list[torch.Tensor],
                   arithmetic: ArithmeticModel) -> tuple[list[Agreement], list[Agreement]]:
    """Every shared node's and every output's agreement over the samples (in chunks)."""
    shared = [n.name for n in simplified.nodes if n.op_type not in ("Input", "Output")
              and n.name in {m.name for m in original.nodes}
              and original.node(n.name).shape == n.shape]
    nodes = {name: Agreement(name) for name in shared}
    outputs = [Agreement(name, i) for i, name in enumerate(simplified.outputs)]
    count = inputs[0].shape[0]
    for start in range(0, count, CHUNK):
        chunk = [x[start:start + CHUNK] for x in inputs]
        mine = walk(original, chunk, arithmetic, set(shared) | set(original.outputs))

        def visit(node, t, r, e, d, er, mine=mine):
            if node.name in nodes:
                t_o, r_o, e_o, _, er_o = mine[node.name]
                nodes[node.name].update(t, t_o, r, r_o, _plus(e + e_o, d), _plus(er + er_o, d),
                                        er + er_o)

        theirs = walk(simplified, chunk, arithmetic, set(simplified.outputs), visit)
        for agreement, name_o in zip(outputs, original.outputs):
            t_s, r_s, e_s, d_s, er_s = theirs[agreement.name]
            t_o, r_o, e_o, _, er_o = mine[name_o]
            if t_s.shape != t_o.shape:
                agreement.violated = True
                continue
            agreement.update(t_s, t_o, r_s, r_o, _plus(e_s + e_o, d_s), _plus(er_s + er_o, d_s),
                             er_s + er_o)
    return list(nodes.values()), outputs
