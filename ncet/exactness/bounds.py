"""Certified forward error bounds from the rules of `rules.py`: the formulas of
docs/exactness.md, each written once.

For a node with rule (S, k, X, C) computed in a dtype d with unit roundoff u and smallest
normal eta (§2.1, `Rounding.bound`):

    (L)    B_d(S, X) = Gamma_d(k) S + k eta_d + 2 eta_d X

node-locally, PyTorch's rounding (t) and the float64 reference's (r) of the same real
value (§4.1, `node_local_bound`):

    SAFETY [B_t(S_t, X_t) + B_r(S_t, X_t)]

and end to end, with input radii E (§4.2, `end_to_end_radius`):

    SAFETY [C(E) + B_t(S_t, X_t) + B_r(S_t + C(E), X_t + X(E))]

When the probes saw subnormals flushed to zero, `flush_bounds.py` adds the underflow term
of §2.2 to both; `enclosure.py` applies the formulas to one node (`local_bound`) and to a
whole graph (`enclose`) for the tests that hold them to exact values.

This is the reference path, the specification the checker's fast paths are held to
(`fast_paths.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, ArithmeticModel
from .rules import BOUND_RULES, Consts, Tensors

SAFETY = 1.0 + 2.0 ** -20
"""Bounds are computed in float64 (relative error far below 2^-30 for any layer size NCET
handles) and multiplied by this factor, so they are rounded up (§2.5)."""

_F64 = torch.float64


@dataclass(frozen=True, slots=True)
class Rounding:
    """One node's rule evaluated at its inputs: k, S and X of (L).

    Attributes:
        k: The rounding count.
        magnitude: S, None for an exact op.
        exposed: X (0.0 where the rule has none).
    """

    k: float
    magnitude: torch.Tensor | None
    exposed: torch.Tensor | float

    def bound(self, node: IRNode, dtype: torch.dtype, arithmetic: ArithmeticModel,
              magnitude: torch.Tensor | None = None,
              exposed: torch.Tensor | float | None = None) -> torch.Tensor | float:
        """(L): B_d(S, X) in `dtype`, at this S and X or at the (larger) ones given."""
        magnitude = self.magnitude if magnitude is None else magnitude
        exposed = self.exposed if exposed is None else exposed
        if magnitude is None:
            return 0.0
        eta = SMALLEST_NORMAL[dtype]
        return arithmetic.gamma(dtype, node.op_type, self.k) * magnitude \
            + self.k * eta + 2 * eta * exposed


def rounding(node: IRNode, inputs: Tensors, abs_consts: Consts, consts: Consts) -> Rounding:
    """Evaluate a node's rule on its inputs (float64; absolute values are taken here).

    Args:
        node: The IR node.
        inputs: Its input values, float64, batched.
        abs_consts: |constants| in float64, which S and X read.
        consts: The constants in their original dtypes, which k reads (a conversion is
            charged only where one happens, §2.5).
    """
    rule = BOUND_RULES[node.op_type]
    if rule.magnitude is None:
        return Rounding(0, None, 0.0)
    abs_inputs = [x.abs() for x in inputs]
    shapes = [tuple(x.shape[1:]) for x in abs_inputs]
    exposed = rule.exposed(node, abs_inputs, abs_consts) if rule.exposed else 0.0
    return Rounding(rule.roundings(node, shapes, consts),
                    rule.magnitude(node, abs_inputs, abs_consts), exposed)


def node_local_bound(node: IRNode, r: Rounding, dtype: torch.dtype,
                     arithmetic: ArithmeticModel) -> torch.Tensor:
    """SAFETY [B_t(S_t, X_t) + B_r(S_t, X_t)]: PyTorch's value in `dtype` against the
    float64 reference on the same inputs (§4.1); `r` is the rule at PyTorch's inputs."""
    return SAFETY * (r.bound(node, dtype, arithmetic) + r.bound(node, _F64, arithmetic))


def end_to_end_radius(node: IRNode, r: Rounding, dtype: torch.dtype,
                      arithmetic: ArithmeticModel, radii: Tensors,
                      abs_consts: Consts) -> torch.Tensor:
    """E_v = SAFETY [C(E) + B_t(S_t, X_t) + B_r(S_t + C(E), X_t + X(E))] for a rounding
    node whose inputs have radii E (§4.2); `r` is the rule at PyTorch's inputs. An exact op
    carries its radii exactly: C(E)."""
    rule = BOUND_RULES[node.op_type]
    carried = rule.carry(node, radii, abs_consts)
    if r.magnitude is None:
        return carried
    exposed = rule.exposed(node, radii, abs_consts) if rule.exposed else 0.0
    return SAFETY * (carried + r.bound(node, dtype, arithmetic)
                     + r.bound(node, _F64, arithmetic, r.magnitude + carried,
                               r.exposed + exposed))


@dataclass(frozen=True, slots=True)
class NodeInputs:
    """A node as the checker bounds it: its inputs at PyTorch's values.

    Attributes:
        node: The IR node.
        computed: PyTorch's input values in their own dtypes (the fast paths read them).
        values: The same, converted exactly to float64.
        dtype: The dtype PyTorch computed the node in.
        shape: The shape of its batched value.
    """

    node: IRNode
    computed: Tensors
    values: Tensors
    dtype: torch.dtype
    shape: torch.Size


@dataclass(frozen=True, slots=True)
class ReferenceBound:
    """A rounding node's node-local bound (`value`) and its end-to-end radius on demand,
    by the formulas above."""

    at: NodeInputs
    rounding: Rounding
    arithmetic: ArithmeticModel
    abs_consts: Consts
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        """E_v from the inputs' radii (`end_to_end_radius`)."""
        return end_to_end_radius(self.at.node, self.rounding, self.at.dtype, self.arithmetic,
                                 radii, self.abs_consts)


class NodeBound(Protocol):
    """What the checker needs of a rounding node's bound, by any route."""

    value: torch.Tensor  # the node-local bound, SAFETY included

    def radius(self, radii: Tensors) -> torch.Tensor:
        """The end-to-end radius E_v from the inputs' radii."""


class ReferenceBounds:
    """The checker's bounds by the reference path: every rule evaluated as it is written."""

    def __init__(self, constants: Consts, abs_consts: Consts, arithmetic: ArithmeticModel):
        self.constants, self.abs_consts, self.arithmetic = constants, abs_consts, arithmetic

    def local(self, at: NodeInputs) -> ReferenceBound | None:
        """The node's bound at PyTorch's inputs; None for an exact op."""
        if BOUND_RULES[at.node.op_type].magnitude is None:
            return None
        r = rounding(at.node, at.values, self.abs_consts, self.constants)
        return ReferenceBound(at, r, self.arithmetic, self.abs_consts,
                              node_local_bound(at.node, r, at.dtype, self.arithmetic))
