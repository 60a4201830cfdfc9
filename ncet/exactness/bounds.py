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

When the probes saw subnormals flushed to zero (`ArithmeticModel.flush`), both carry the
underflow term of §2.2 (`flush_term`), for a node with carry C and k roundings in dtype d,
m the inputs that may be flushed (0 < |x| < eta_d, `flushable`):

    Phi_d = SAFETY [(3 + 2 Gamma_d(k)) (C(eta_d m) + C(eta_64 1)) + 2 k eta_d]

(`FlushedBounds` adds it on every route). An exact op gets 2 eta C(m) (a comparison may read a
subnormal operand as zero, `ExactFlushedBound`) and a graph input the radius eta m where it is
subnormal (`input_radius`), so the loss reaches the next rounding node. Otherwise Phi = 0 and
the bounds are unchanged.

This is the reference path, the specification the checker's fast paths are held to
(`fast_paths.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..evaluate import EVALUATORS
from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, ArithmeticModel, read_arithmetic_model
from .rules import (
    BOUND_RULES,
    Consts,
    Shapes,
    Tensors,
    subnormal_constants,
    subnormal_elements,
)

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


FLUSH_CARRIES = 3
"""Phi = SAFETY [(FLUSH_CARRIES + 2 Gamma_t(k)) (C(eta m) + C(eta_64 1)) + FLUSH_ROUNDINGS k eta]
(§2.2): C(eta m) for PyTorch's operands read as zero (1), the reference's conversion of them
to float64 (1), one spare, and NCET's magnitudes computed from flushed operands (2 Gamma);
C(eta_64 1) for the float64 reference's own operands below 2^-1022."""

FLUSH_ROUNDINGS = 2
"""k eta for the conversion of PyTorch's value to float64 and for NCET's own flushed results
(k eta spare) (§2.2)."""


def flushable(x: torch.Tensor, eta: float) -> torch.Tensor:
    """Where `x` holds a value that flushing in a dtype with smallest normal `eta` may read as
    zero (0 < |x| < eta): x's own subnormals from their bits (denormals-are-zero on the
    calling thread cannot hide them), and, for float64, values below eta, which are normal
    doubles and compare exactly."""
    if not x.is_floating_point():
        return torch.zeros(x.shape, dtype=torch.bool)
    mask = subnormal_elements(x)
    if x.dtype == _F64:
        mask |= (x.abs() < eta) & (x != 0)
    return mask


FLUSH_COMPARED = 2
"""An exact op's bound under flushing is FLUSH_COMPARED eta C(m) (§2.2): a comparison reads
its operands as zero below eta (the chosen one's value within eta of the true maximum) and
returns the chosen operand's own bits (another eta)."""


def compared_eta(dtype: torch.dtype) -> float:
    """The eta below which a comparison or a move of `dtype` values may read them as zero
    under flushing: float32's for float16 (CPU kernels widen float16 to float32, exactly
    whatever denormals-are-zero says, where its subnormals are normal numbers; §2.2), else
    the dtype's own smallest normal (0 for an integer dtype)."""
    return SMALLEST_NORMAL[torch.float32] if dtype == torch.float16 \
        else SMALLEST_NORMAL.get(dtype, 0.0)


def input_radius(x: torch.Tensor, arithmetic: ArithmeticModel) -> torch.Tensor:
    """A graph input's radius under flushing (§2.2): eta of its dtype where it is
    subnormal in its bits (a kernel, or the float64 conversion under denormals-are-zero,
    may read it as zero, and an exact op such as ReLU or MaxPool carries that loss to the
    next rounding node, whose own inputs are then zeros); a scalar 0 otherwise."""
    zero = torch.zeros((), dtype=_F64)
    if not arithmetic.flush or not x.is_floating_point():
        return zero
    eta = compared_eta(x.dtype)
    mask = flushable(x, eta)
    return mask.to(_F64).mul_(eta) if bool(mask.any()) else zero


@dataclass(frozen=True, slots=True)
class FlushTerm:
    """A node's underflow term Phi (§2.2) in two parts: `base`, SAFETY [(3 + 2 Gamma)
    C(eta_64 1) + 2 k eta] (one sample's shape, batch dimension 1), and `factor` (SAFETY (3 +
    2 Gamma)) times C(eta m), m the operands that may be flushed (`of`)."""

    node: IRNode
    eta: float
    factor: float
    base: torch.Tensor

    @classmethod
    def at(cls, node: IRNode, shapes: Shapes, abs_consts: Consts, consts: Consts,
           dtype: torch.dtype, arithmetic: ArithmeticModel,
           operands: tuple[torch.dtype, ...] = ()) -> FlushTerm:
        rule = BOUND_RULES[node.op_type]
        eta = max(SMALLEST_NORMAL.get(d, 0.0) for d in (dtype, *operands))
        k = rule.roundings(node, shapes, consts)
        factor = SAFETY * (FLUSH_CARRIES + 2 * arithmetic.gamma(dtype, node.op_type, k))
        tiny = [torch.full((1, *shape), SMALLEST_NORMAL[_F64], dtype=_F64) for shape in shapes]
        base = factor * rule.carry(node, tiny, abs_consts) + SAFETY * FLUSH_ROUNDINGS * k * eta
        return cls(node, eta, factor, base)

    def of(self, masks: list[torch.Tensor], abs_consts: Consts) -> torch.Tensor:
        """Phi with m = `masks` (bool, batched like the inputs)."""
        if not any(bool(m.any()) for m in masks):
            return self.base
        radii = [m.to(_F64).mul_(self.eta) for m in masks]
        carried = BOUND_RULES[self.node.op_type].carry(self.node, radii, abs_consts)
        return self.base + self.factor * carried


def flush_term(node: IRNode, shapes: Shapes, abs_consts: Consts, consts: Consts,
               dtype: torch.dtype, arithmetic: ArithmeticModel,
               operands: tuple[torch.dtype, ...] = (),
               masks: list[torch.Tensor] | None = None) -> torch.Tensor | float:
    """Phi, the underflow term of a node computed in `dtype` when the probes saw flushing
    (§2.2): 0 without flushing and for an exact op; else a float64 tensor of the node's
    per-sample shape with a leading batch dimension (1 when `masks` is None).

    Args:
        node: The IR node.
        shapes: Its inputs' per-sample shapes.
        abs_consts: |constants| in float64 (the carry reads them).
        consts: The constants in their original dtypes (k reads them).
        dtype: The dtype PyTorch computed the node in.
        arithmetic: The arithmetic model; `flush` turns the term on.
        operands: The dtypes of the node's inputs as PyTorch holds them: eta is the largest
            smallest normal of `dtype` and these (a float32 operand promoted to a float64
            node is read as zero below float32's, 2^-126).
        masks: Where each input may be flushed (`flushable`, batched); None: everywhere.
    """
    if not arithmetic.flush or BOUND_RULES[node.op_type].magnitude is None:
        return 0.0
    term = FlushTerm.at(node, shapes, abs_consts, consts, dtype, arithmetic, operands)
    if masks is None:
        masks = [torch.ones((1, *shape), dtype=torch.bool) for shape in shapes]
    return term.of(masks, abs_consts)


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


def local_bound(node: IRNode, inputs: Tensors, consts: Consts, dtype: torch.dtype,
                arithmetic: ArithmeticModel | None = None) -> torch.Tensor:
    """Certified bound on |fl(f(x)) - f(x)| for one node computed in `dtype` on `inputs`:
    SAFETY B_d(S, X).

    Args:
        node: The IR node.
        inputs: Its input values (batched; any float dtype, read exactly).
        consts: The IR's constants in their own dtypes (read exactly).
        dtype: The precision the node is computed in.
        arithmetic: The arithmetic model (flags); read from PyTorch when None. Under
            flushing the bound includes the underflow term `flush_term` (an exact op's,
            2 eta C(m), where an input is below eta; the model is then read only there).
    """
    xs = [x.to(_F64) for x in inputs]
    abs_consts = {k: v.to(_F64).abs() for k, v in consts.items()}
    r = rounding(node, xs, abs_consts, consts)
    operands = tuple(x.dtype for x in inputs)
    eta = max(SMALLEST_NORMAL.get(d, 0.0) for d in (dtype, *operands))
    masks = [flushable(x, eta) for x in inputs]
    if r.magnitude is None:  # an exact op: 2 eta C(m) under flushing (`ExactFlushedBound`)
        zero = torch.zeros_like(EVALUATORS[node.op_type](node, xs, abs_consts))
        eta = max(compared_eta(d) for d in (dtype, *operands))
        masks = [flushable(x, eta) for x in inputs]
        if not any(bool(m.any()) for m in masks) \
                or not (arithmetic or read_arithmetic_model()).flush:
            return zero
        radii = [m.to(_F64).mul_(eta) for m in masks]
        return zero + SAFETY * FLUSH_COMPARED * BOUND_RULES[node.op_type].carry(
            node, radii, abs_consts)
    arithmetic = arithmetic or read_arithmetic_model()
    flushed = flush_term(node, [tuple(x.shape[1:]) for x in xs], abs_consts, consts, dtype,
                         arithmetic, operands, masks)
    return r.bound(node, dtype, arithmetic) * SAFETY + flushed


def enclose(ir, *inputs: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The float64 reference value of every node with a certified radius around the exact
    real value: |value - [[G]](x)| <= radius elementwise (inputs taken as exact), with
    radius = SAFETY [C(E_in) + B_r(S(|r_in|), X(|r_in|))] (§4.2).

    Returns:
        node name -> (value, radius), for the Input nodes and every operator node.

    Raises:
        RuntimeError: The arithmetic in force is outside the declared model (also: a
            subnormal tensor constant while subnormals are flushed).
    """
    consts = {k: v.to(_F64) for k, v in ir.constants.items()}
    arithmetic = read_arithmetic_model()
    if arithmetic.flush and (subnormal := subnormal_constants(
            ir.nodes, ir.constants, arithmetic.flushing_kernels)):
        arithmetic = arithmetic.outside(f"subnormal constants ({', '.join(subnormal[:5])}) "
                                        "may be flushed to zero")
    if not arithmetic.certified:
        raise RuntimeError("no certified enclosure: " + arithmetic.describe())
    abs_consts = {k: v.abs() for k, v in consts.items()}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for node, x in zip(ir.inputs, inputs):
        out[node.name] = (x.to(_F64), input_radius(x, arithmetic))
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        values = [out[i][0] for i in node.inputs]
        radii = [out[i][1].expand_as(out[i][0]) for i in node.inputs]
        value = EVALUATORS[node.op_type](node, values, consts)
        r = rounding(node, values, abs_consts, ir.constants)
        carried = BOUND_RULES[node.op_type].carry(node, radii, abs_consts)
        flushed = flush_term(node, [tuple(x.shape[1:]) for x in values], abs_consts,
                             ir.constants, _F64, arithmetic, tuple(
                                 getattr(torch, ir.node(i).dtype) for i in node.inputs))
        out[node.name] = (value, (carried + r.bound(node, _F64, arithmetic)) * SAFETY
                          + flushed)
    return out


@dataclass(frozen=True, slots=True)
class FlushedBound:
    """A rounding node's bound on any route with the underflow term Phi added to the
    node-local bound and to the end-to-end radius (§2.2)."""

    inner: NodeBound
    flushed: torch.Tensor
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        return self.inner.radius(radii) + self.flushed


class FlushedBounds:
    """The checker's bounds (`inner`, any route) with the underflow term added at every
    rounding node: the bounds under flushing (§2.2). Its constant part is computed once per
    node and dtype; C(eta m) only for a chunk where some operand may be flushed."""

    def __init__(self, inner, constants: Consts, abs_consts: Consts,
                 arithmetic: ArithmeticModel):
        self.inner, self.constants, self.abs_consts = inner, constants, abs_consts
        self.arithmetic = arithmetic
        self.terms: dict[tuple[str, torch.dtype], FlushTerm] = {}

    def local(self, at: NodeInputs) -> FlushedBound | ExactFlushedBound | None:
        bound = self.inner.local(at)
        if bound is None:
            return ExactFlushedBound.at(at, self.abs_consts)
        key = (at.node.name, at.dtype)
        term = self.terms.get(key)
        if term is None:
            term = self.terms[key] = FlushTerm.at(
                at.node, [tuple(x.shape[1:]) for x in at.values], self.abs_consts,
                self.constants, at.dtype, self.arithmetic, tuple(x.dtype for x in at.computed))
        flushed = term.of([flushable(x, term.eta) for x in at.computed], self.abs_consts)
        return FlushedBound(bound, flushed, bound.value + flushed)


@dataclass(frozen=True, slots=True)
class ExactFlushedBound:
    """An exact op (ReLU, MaxPool, a reshape...) under flushing (§2.2): denormals-are-zero
    may read its subnormal inputs as zero (a comparison does) and returns the chosen
    input's own bits, so its value is within 2 eta C(m) of the op on its inputs, m where
    they may be flushed (`FLUSH_COMPARED`); carried to the next rounding node with the
    inputs' radii."""

    node: IRNode
    abs_consts: Consts
    value: torch.Tensor

    @classmethod
    def at(cls, at: NodeInputs, abs_consts: Consts) -> ExactFlushedBound | None:
        """None when no input may be flushed (the op is then exact as without flushing)."""
        eta = max((compared_eta(x.dtype) for x in at.computed), default=0.0)
        masks = [flushable(x, eta) for x in at.computed]
        if not any(bool(m.any()) for m in masks):
            return None
        radii = [m.to(_F64).mul_(eta) for m in masks]
        carry = BOUND_RULES[at.node.op_type].carry
        return cls(at.node, abs_consts,
                   SAFETY * FLUSH_COMPARED * carry(at.node, radii, abs_consts))

    def radius(self, radii: Tensors) -> torch.Tensor:
        return BOUND_RULES[self.node.op_type].carry(self.node, radii, self.abs_consts) \
            + self.value
